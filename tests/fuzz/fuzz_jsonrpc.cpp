// libFuzzer target for the extension protocol's untrusted bytes: the line framer must agree
// with a naive model however the stream is split, and every line parse_rpc accepts must
// re-encode to one line that parses back to the same message.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/jsonrpc.hpp"
#include "io/line_framer.hpp"

namespace {

using dhara::io::line_framer;
using dhara::policy::errc;

constexpr std::size_t max_line = 4096;

void require(bool ok) {
  if (!ok) std::abort();
}

struct framed {
  std::vector<std::string> lines;
  bool violated = false;
  std::size_t buffered = 0;
};

// The framing rules written the obvious way: split on "\n", drop one "\r", skip empties,
// stop at the first line (or unterminated tail) longer than the limit.
framed model(std::string_view in) {
  framed out;
  const auto content = [](std::string_view s) { return s.size() - (!s.empty() && s.back() == '\r'); };
  while (true) {
    const auto nl = in.find('\n');
    if (nl == std::string_view::npos) {
      out.violated = content(in) > max_line;
      out.buffered = out.violated ? 0 : in.size();
      return out;
    }
    std::string_view line = in.substr(0, nl);
    in.remove_prefix(nl + 1);
    if (content(line) > max_line) {
      out.violated = true;
      return out;
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty()) out.lines.emplace_back(line);
  }
}

// Feeds `in` in chunks whose sizes come from a generator seeded by the input, so that
// libFuzzer explores split points along with content.
framed split_feed(std::string_view in) {
  framed out;
  line_framer framer(max_line);
  std::uint64_t state = 0x9e3779b97f4a7c15ull ^ in.size();
  for (std::size_t i = 0; i < in.size() && i < 16; ++i) state = state * 1099511628211ull + static_cast<unsigned char>(in[i]);
  bool ok = true;
  while (!in.empty() && ok) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const std::size_t pick = (state >> 33) % 4;
    const std::size_t limit = pick == 0 ? 1 : pick == 1 ? 7 : pick == 2 ? 300 : 5000;
    const std::size_t n = std::min<std::size_t>(in.size(), 1 + (state >> 40) % limit);
    ok = framer.feed(in.substr(0, n), [&](std::string_view l) { out.lines.emplace_back(l); });
    in.remove_prefix(n);
  }
  out.violated = framer.violated();
  require(ok != out.violated);
  require(framer.buffered() <= max_line + 1);
  out.buffered = framer.buffered();
  return out;
}

bool printable_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) return false;
  return true;
}

void check_line(std::string_view line) {
  const auto parsed = dhara::io::parse_rpc(line);
  if (!parsed) {
    const auto& e = parsed.err();
    require(e.code == errc::parse_error || e.code == errc::invalid_value);
    require(!e.message.empty() && e.message.size() < 400 && printable_ascii(e.message));
    // parse_error exactly when nlohmann rejects the text, except for the depth limit.
    const bool accepted = nlohmann::json::accept(line);
    if (!accepted) require(e.code == errc::parse_error);
    if (accepted && e.code == errc::parse_error) require(e.message.find("deeper than 256") != std::string::npos);
    // The id it is answered with is null, a string or an integer, null for a line that is not
    // JSON; the error answer for it is itself a valid line, carrying that id.
    const nlohmann::json id = dhara::io::refused_request_id(line);
    require(id.is_null() || id.is_string() || id.is_number_integer());
    if (!accepted) require(id.is_null());
    const auto answer = dhara::io::encode_error(id, dhara::io::rpc_error_code(e), e.message);
    const auto back = dhara::io::parse_rpc(answer);
    require(back && std::get<dhara::io::rpc_error_response>(*back).message == e.message &&
            std::get<dhara::io::rpc_error_response>(*back).id == id);
    return;
  }
  const std::string encoded = dhara::io::encode(*parsed);
  require(encoded.find('\n') == std::string::npos);
  const auto again = dhara::io::parse_rpc(encoded);
  require(again.has_value());
  require(*again == *parsed);
  require(dhara::io::encode(*again) == encoded);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);

  const framed expected = model(in);
  const framed got = split_feed(in);
  require(got.lines == expected.lines);
  require(got.violated == expected.violated);
  require(got.buffered == expected.buffered);

  for (const auto& line : got.lines) check_line(line);
  // The whole input as one line too, whatever newlines it holds (the framer never gives
  // parse_rpc such a line, but the function must not care).
  if (size <= max_line) check_line(in);

  // Arbitrary bytes as a method name or message: encoders replace bad UTF-8, never throw.
  const std::string as_method = dhara::io::encode_notification(in, nullptr);
  const auto note = dhara::io::parse_rpc(as_method);
  require(as_method.find('\n') == std::string::npos);
  require(size == 0 ? !note : note && std::holds_alternative<dhara::io::rpc_notification>(*note));
  return 0;
}
