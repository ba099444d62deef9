// Newline framing for the extension protocol and serve mode (DESIGN §5): turns a byte stream
// into complete lines, bounded by maxLineBytes, without I/O so that it can be fuzzed.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace dhara::io {

/// Accumulates bytes from one stream and yields each complete, non-empty line.
///
/// A line is the bytes before "\n", minus one trailing "\r" (so CRLF works). Its length,
/// without that terminator, may be at most `max_line_bytes`; a longer line is a protocol
/// violation, detected as soon as the partial line is too long, so at most
/// `max_line_bytes + 1` bytes (a pending "\r") are ever buffered. Lines that lie entirely
/// inside a fed chunk are handed out without copying; only a line split across chunks is
/// buffered. One framer per stream; not thread-safe.
class line_framer {
 public:
  /// A framer that allows lines of up to `max_line_bytes` bytes (terminator excluded).
  explicit line_framer(std::size_t max_line_bytes);

  /// Feeds the next bytes of the stream and calls `on_line(std::string_view)` for each
  /// complete non-empty line, in order. The view is valid only during the call, and
  /// `on_line` must not feed this framer. `on_line` may return void, or bool where false
  /// stops at once (the rest of `bytes` is dropped). Returns true when every byte was
  /// consumed; false when it stopped — on a protocol violation (violated() is then true)
  /// or because `on_line` said so — and every later feed returns false until reset().
  template <class F>
  bool feed(std::string_view bytes, F&& on_line);

  /// Ends the stream (EOF): a last line without "\n" is delivered like any other.
  /// Returns what feed() would; the framer is then empty and may be fed again.
  template <class F>
  bool finish(F&& on_line);

  /// Bytes of the incomplete line held back, waiting for its newline.
  std::size_t buffered() const { return buf_.size(); }

  /// True after a protocol violation (a line longer than the limit).
  bool violated() const { return state_ == state::violated; }

  /// What the violation was, for the log and the audit ("" when none).
  std::string_view violation() const { return violation_; }

  /// The limit given to the constructor.
  std::size_t max_line_bytes() const { return max_; }

  /// Forgets buffered bytes and any violation or stop (a restarted stream).
  void reset();

 private:
  enum class state { open, violated, stopped };

  // Length of a (partial) line without a final "\r": the one byte a line may exceed the
  // limit by while its "\n" is still to come.
  static std::size_t content_length(std::string_view s) {
    return s.size() - (!s.empty() && s.back() == '\r' ? 1 : 0);
  }

  // Appends a piece of the current line to the buffer, or records a violation.
  bool hold(std::string_view piece);
  // Records the violation for a line that reached `length` bytes and clears the buffer.
  bool fail(std::size_t length);
  // Hands a complete line (terminator still attached) to the consumer.
  template <class F>
  bool deliver(std::string_view line, F& on_line);
  // Hands the buffered line to the consumer and empties the buffer.
  template <class F>
  bool deliver_buffered(F& on_line);
  // Takes back a delivered line's storage unless one long line grew it.
  void recycle(std::string&& used);

  std::size_t max_;
  std::string buf_;  // the partial line; never holds a "\n"
  state state_ = state::open;
  std::string violation_;
};

template <class F>
bool line_framer::deliver(std::string_view line, F& on_line) {
  if (content_length(line) > max_) return fail(content_length(line));
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) return true;
  if constexpr (std::is_void_v<std::invoke_result_t<F&, std::string_view>>) {
    on_line(line);
  } else {
    if (!static_cast<bool>(on_line(line))) {
      state_ = state::stopped;
      return false;
    }
  }
  return true;
}

template <class F>
bool line_framer::deliver_buffered(F& on_line) {
  // Moved out before the call, so that a consumer that throws cannot leave the old line in
  // the buffer to be glued to the next one.
  std::string line = std::move(buf_);
  buf_.clear();
  const bool ok = deliver(line, on_line);
  recycle(std::move(line));
  return ok;
}

template <class F>
bool line_framer::feed(std::string_view bytes, F&& on_line) {
  if (state_ != state::open) return false;
  while (!bytes.empty()) {
    // buf_ never holds a newline, so only the new bytes are searched: no re-scanning.
    const std::size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) return hold(bytes);
    bool ok = false;
    if (buf_.empty()) {
      ok = deliver(bytes.substr(0, nl), on_line);
    } else {
      if (!hold(bytes.substr(0, nl))) return false;
      ok = deliver_buffered(on_line);
    }
    if (!ok) return false;
    bytes.remove_prefix(nl + 1);
  }
  return true;
}

template <class F>
bool line_framer::finish(F&& on_line) {
  if (state_ != state::open) return false;
  if (buf_.empty()) return true;
  return deliver_buffered(on_line);
}

}  // namespace dhara::io
