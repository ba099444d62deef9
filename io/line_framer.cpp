// Newline framing: the non-template parts (limit checks, violation text, buffer upkeep).
#include "io/line_framer.hpp"

namespace dhara::io {

namespace {

// A buffer that grew past this for one long line is released afterwards, so that a single
// 8 MiB line does not pin 8 MiB per extension for the rest of the session.
constexpr std::size_t keep_capacity_bytes = 64 * 1024;

}  // namespace

line_framer::line_framer(std::size_t max_line_bytes) : max_(max_line_bytes) {}

bool line_framer::hold(std::string_view piece) {
  if (piece.empty()) return true;
  // The length the line would have, checked before appending so the buffer never exceeds
  // the limit by more than a pending "\r".
  const std::size_t total = buf_.size() + piece.size();
  const std::size_t content = total - (piece.back() == '\r' ? 1 : 0);
  if (content > max_) return fail(content);
  buf_.append(piece);
  return true;
}

bool line_framer::fail(std::size_t length) {
  state_ = state::violated;
  violation_ = "line longer than the limit of " + std::to_string(max_) + " bytes (reached " +
               std::to_string(length) + " bytes)";
  buf_.clear();
  buf_.shrink_to_fit();
  return false;
}

void line_framer::recycle(std::string&& used) {
  if (used.capacity() > keep_capacity_bytes || !buf_.empty()) return;
  used.clear();
  buf_.swap(used);
}

void line_framer::reset() {
  std::string().swap(buf_);
  state_ = state::open;
  violation_.clear();
}

}  // namespace dhara::io
