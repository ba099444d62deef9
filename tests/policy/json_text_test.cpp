// The shared JSON parser for untrusted text: positions, depth limit, printable reasons.
#include <catch2/catch.hpp>

#include "policy/json_text.hpp"

using namespace dhara::policy;

TEST_CASE("valid JSON parses to its value", "[policy][json]") {
  auto doc = parse_json_text(R"({"a": [1, "x", null], "b": {"c": true}})", "f.json");
  REQUIRE(doc);
  CHECK((*doc)["a"][1] == "x");
  CHECK((*doc)["b"]["c"] == true);
}

TEST_CASE("syntax errors name source, line and column", "[policy][json]") {
  struct row { std::string_view text; std::string_view source; std::string_view starts; };
  const row table[] = {
      {"{\n  \"a\": 1,\n  \"b\": \n}", "cfg.json", "cfg.json:4:1: invalid JSON"},
      {"{\"a\" 1}", "cfg.json", "cfg.json:1:6: invalid JSON"},
      {"", "m.json", "m.json:1:1: invalid JSON"},
      {"[1, 2", "", "line 1, column 6: invalid JSON"},
      {"1e400", "x", "x:1:"},
  };
  for (const row& r : table) {
    CAPTURE(r.text);
    auto doc = parse_json_text(r.text, r.source);
    REQUIRE_FALSE(doc);
    CHECK(doc.err().code == errc::parse_error);
    CHECK(doc.err().message.starts_with(r.starts));
  }
}

TEST_CASE("nesting beyond the limit is refused with its position, at the limit accepted", "[policy][json]") {
  std::string ok = std::string(256, '[') + std::string(256, ']');
  CHECK(parse_json_text(ok, ""));
  std::string deep = std::string(257, '[') + std::string(257, ']');
  auto bad = parse_json_text(deep, "d.json");
  REQUIRE_FALSE(bad);
  CHECK(bad.err().message == "d.json:1:257: nested deeper than 256 levels");
  std::string huge(1'000'000, '{');  // no stack trouble, no deep value built
  CHECK_FALSE(parse_json_text(huge, ""));
  CHECK(parse_json_text(R"({"s": "[[[[[[[[[["})", "", 2));  // brackets inside strings do not count
}

TEST_CASE("error reasons are short and printable whatever the input", "[policy][json]") {
  std::string garbage = "\"" + std::string(100000, 'x') + "\x01\xff";
  auto bad = parse_json_text(garbage, "");
  REQUIRE_FALSE(bad);
  CHECK(bad.err().message.size() < 260);
  for (char c : bad.err().message) CHECK((c >= 0x20 && c < 0x7f));
  CHECK(printable_excerpt("a\nb\xff") == "a\\x0ab\\xff");
  CHECK(printable_excerpt(std::string(10, 'z'), 4) == "zzzz...");
}
