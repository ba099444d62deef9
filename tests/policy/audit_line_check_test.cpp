// Reading audit lines back: the fast path answers every line exactly as the SAX reference,
// for the lines dhara writes and for every way a line can be wrong.
#include <catch2/catch.hpp>

#include <string>
#include <variant>

#include "policy/audit_line_check.hpp"
#include "policy/json_fast.hpp"
#include "policy/json_text.hpp"
#include "support/audit_line_same.hpp"

using namespace dhara::policy;
using dhara::test::same_answer;

namespace {

const std::string hex64(64, 'a');
const std::string suffix = R"(,"hash":")" + hex64 + R"("})";

// `body` (an object missing its closing brace) as a line with a well-formed hash suffix.
std::string line(const std::string& body) { return body + suffix; }

// The answer to `text`, checked against the reference; the seq, or 0 for a refusal.
std::uint64_t seq_of(const std::string& text) {
  const auto fast = read_audit_line(text);
  const auto reference = read_audit_line_reference(text);
  CAPTURE(text);
  CHECK(same_answer(fast, reference));
  const auto* facts = std::get_if<audit_line_facts>(&fast);
  return facts ? facts->seq : 0;
}

// `levels` objects, one inside the other.
std::string nested(std::size_t levels) {
  std::string s;
  for (std::size_t i = 0; i < levels; ++i) s += R"({"a":)";
  s += "1";
  for (std::size_t i = 0; i < levels; ++i) s += "}";
  return s;
}

}  // namespace

TEST_CASE("audit lines as dhara writes them give their seq and hash", "[policy][audit]") {
  const std::string written = line(
      R"({"timestamp":"2026-12-01T20:00:00.001Z","extension":"web-tools","capability":"network:fetch",)"
      R"("action":"allowed","details":{"url":"https://api.example.com/v1/items"},"decidedBy":"rule",)"
      R"("tool":"read","toolCallId":"call-1","session":"s","seq":42)");
  CHECK(seq_of(written) == 42);
  const auto facts = std::get<audit_line_facts>(read_audit_line(written));
  CHECK(facts.hash == hex64);
  // ...and the fast path vouches for it, building no document.
  std::uint64_t seq = 0;
  CHECK(scan_json_object_fast(written, max_json_depth, "seq", seq));
  CHECK(seq == 42);
  CHECK_FALSE(scan_json_object_fast(line(R"({"seq":1,"seq":2)"), max_json_depth, "seq", seq));
  CHECK_FALSE(scan_json_object_fast(R"({"a":1})", max_json_depth, "seq", seq));
  CHECK_FALSE(scan_json_object_fast(R"({"seq":1})", fast_json_max_depth + 1, "seq", seq));
  CHECK(seq_of(line(R"({"seq":18446744073709551615)")) == 18446744073709551615u);
  CHECK(seq_of(line(R"({"reason":"caf\u00e9 \"quoted\" \\ é 😀","seq":7)")) == 7);
  CHECK(seq_of(line(R"({"s\u0065q":9)")) == 9);  // the name unescaped, as nlohmann reads it
  CHECK(seq_of(line(R"( {"nested":{"seq":0,"x":[1,-2,3.5e1,true,false,null]}, "seq" : 3 )")) == 3);
  CHECK(seq_of(line(R"({"deep":)" + nested(255) + R"(,"seq":5)")) == 5);  // 256 levels with the line's own
  // nlohmann skips a byte-order mark; the fast path leaves such a line to the reference.
  CHECK(seq_of(line("\xEF\xBB\xBF{\"seq\":1")) == 1);
}

TEST_CASE("every malformed audit line is refused in the reference's words", "[policy][audit]") {
  const std::string refused[] = {
      "",
      R"({"seq":1})",                                      // no hash suffix
      R"({"seq":1,"hash":")" + std::string(64, 'A') + R"("})",  // upper-case hex
      line(R"({"seq":0)"),
      line(R"({"seq":-1)"),
      line(R"({"seq":-0)"),
      line(R"({"seq":1.0)"),
      line(R"({"seq":1e2)"),
      line(R"({"seq":18446744073709551616)"),              // past 64 bits: a double for nlohmann
      line(R"({"seq":"1")"),
      line(R"({"seq":[1])"),
      line(R"({"seq":{"seq":1})"),
      line(R"({"seq":1,"seq":2)"),
      line(R"({"seq":1,"s\u0065q":1)"),
      line(R"({"nested":{"seq":1})"),
      line(R"({"seq":01)"),
      line(R"({"seq":1,)"),
      line(R"({"seq":1 "x":2)"),
      line(R"({"bad":"\x","seq":1)"),
      line(R"({"bad":"\ud800","seq":1)"),
      line("{\"bad\":\"\xC0\xAF\",\"seq\":1"),            // overlong UTF-8
      line("{\"bad\":\"a\tb\",\"seq\":1"),                // a raw control byte
      line(R"([{"seq":1})"),
      "[" + line(R"({"seq":1)"),
      line(R"({"deep":)" + nested(256) + R"(,"seq":5)"),  // 257 levels
      line(R"({"seq":1}{"x":1)"),
  };
  for (const std::string& text : refused) CHECK(seq_of(text) == 0);
  CHECK(std::get<std::string>(read_audit_line(line(R"({"seq":1,"seq":2)"))) == R"(the line has two "seq" keys)");
  CHECK(std::get<std::string>(read_audit_line(line(R"({"seq":0)"))) ==
        R"(the line has no "seq" that is a positive integer)");
}
