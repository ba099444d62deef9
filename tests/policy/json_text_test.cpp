// The shared JSON parser for untrusted text: positions, depth limit, printable reasons.
#include <catch2/catch.hpp>

#include <cstdint>

#include "policy/json_bytes.hpp"
#include "policy/json_fast.hpp"
#include "policy/json_text.hpp"
#include "support/json_same.hpp"

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

using nlohmann::json;
using dhara::test::same_json;

TEST_CASE("the fast path accepts well-formed text and builds nlohmann's document", "[policy][json]") {
  const std::string_view table[] = {
      R"({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"tool":"fs/read","input":{"path":"src/a.txt"}}})",
      R"([0, -0, 1, -1, 3.5, -0.0, 1e3, 2E-2, 1.5e+2, 18446744073709551615, 18446744073709551616,
          -9223372036854775808, -9223372036854775809, 4.9e-324])",
      R"({"e":"\"\\\/\b\f\n\r\t\u0000\u00e9\u20ac\ud83d\ude00\uDBFF\uDFFF"})",
      "{\"u\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xed\x9f\xbf\xee\x80\x80\xf4\x8f\xbf\xbf\x7f\"}",
      R"({"dup":1,"x":{},"dup":[true,false,null,[],{}]})",
      " \t\r\n {\"a\" : [ ] , \"b\" : { } } \n",
      R"("a lone string")",
      "12",
      "null",
  };
  for (std::string_view text : table) {
    CAPTURE(text);
    json fast;
    REQUIRE(parse_json_fast(text, max_json_depth, fast));
    CHECK(same_json(fast, json::parse(text)));
    auto doc = parse_json_text(text, "");
    REQUIRE(doc);
    CHECK(same_json(*doc, fast));
  }
  // The duplicate key: the last one wins, as in nlohmann's document.
  json dup;
  REQUIRE(parse_json_fast(R"({"k":1,"k":"two"})", max_json_depth, dup));
  CHECK(dup == json{{"k", "two"}});
  // Integers keep nlohmann's types: unsigned from 0 up, signed below, double beyond 64 bits.
  json nums;
  REQUIRE(parse_json_fast("[0, -0, -1, 18446744073709551616]", max_json_depth, nums));
  CHECK(nums[0].is_number_unsigned());
  CHECK(nums[1].is_number_integer());
  CHECK_FALSE(nums[1].is_number_unsigned());
  CHECK(nums[2].get<std::int64_t>() == -1);
  CHECK(nums[3].is_number_float());
}

TEST_CASE("a special byte anywhere in a long plain run is seen", "[policy][json]") {
  // The plain runs are scanned 8 bytes at a time: each special byte at each offset of a word.
  const std::string specials[] = {"\\n", "\\\"", "\\u00e9", "\xc3\xa9", "\x7f", "\"", "\x01", "\xff"};
  for (const std::string& special : specials) {
    for (std::size_t at = 0; at < 20; ++at) {
      const std::string text = "\"" + std::string(at, 'a') + special + std::string(23 - at, 'b') + "\"";
      CAPTURE(special, at);
      const json reference = json::parse(text, nullptr, false);
      json fast;
      const bool accepted = parse_json_fast(text, max_json_depth, fast);
      CHECK(accepted == !reference.is_discarded());
      if (accepted) CHECK(same_json(fast, reference));
    }
  }
}

TEST_CASE("skip_plain stops at the first special byte of a run of any length, tail included", "[policy][json]") {
  // Lengths 0 to 40 cover the 8-byte words and every tail (the last 1 to 7 bytes are read by
  // one load that overlaps bytes already passed); the special byte at each offset, or none.
  const unsigned char specials[] = {'"', '\\', 0x00, 0x1f, 0x80, 0xc3, 0xff};
  for (std::size_t length = 0; length <= 40; ++length) {
    for (const unsigned char special : specials) {
      for (std::size_t at = 0; at <= length; ++at) {  // at == length: no special byte
        std::string run(length, 'a');
        if (at < length) run[at] = static_cast<char>(special);
        CAPTURE(length, static_cast<int>(special), at);
        const char* stop = json_bytes::skip_plain(run.data(), run.data() + run.size());
        CHECK(static_cast<std::size_t>(stop - run.data()) == at);
      }
    }
  }
}

TEST_CASE("the fast path refuses what it cannot vouch for, and nlohmann then decides", "[policy][json]") {
  struct row { std::string text; bool valid; };
  const row table[] = {
      // invalid: parse_json_text gives nlohmann's error
      {"", false}, {"{", false}, {"[1,]", false}, {"{\"a\":1,}", false}, {"01", false}, {"1.", false},
      {"-", false}, {".5", false}, {"1e", false}, {"+1", false}, {"tru", false}, {"nul", false},
      {"[1] x", false}, {"\"\\x\"", false}, {"\"\\ud800\"", false}, {"\"\\udc00\"", false},
      {"\"\\ud800\\u0041\"", false}, {"\"\\u12g4\"", false}, {"\"tab\there\"", false},
      {"\"\xc0\xaf\"", false}, {"\"\xed\xa0\x80\"", false}, {"\"\xf4\x90\x80\x80\"", false},
      {"\"\xe2\x82\"", false}, {"\"unterminated", false}, {"1e400", false}, {"-1e400", false},
      {"NaN", false}, {"{\"a\" 1}", false}, {"{1:2}", false}, {std::string("[\0]", 3), false},
      // valid, but left to nlohmann: a byte-order mark, an underflowing exponent
      {"\xef\xbb\xbf{\"bom\":true}", true}, {"1e-400", true},
  };
  for (const row& r : table) {
    CAPTURE(r.text);
    json fast;
    CHECK_FALSE(parse_json_fast(r.text, max_json_depth, fast));
    const json reference = json::parse(r.text, nullptr, false);
    REQUIRE(reference.is_discarded() == !r.valid);
    auto doc = parse_json_text(r.text, "");
    REQUIRE(doc.has_value() == r.valid);
    if (doc) CHECK(same_json(*doc, reference));
  }
  // Depth: within the limit only; a limit above what the fast path recurses to is nlohmann's.
  json v;
  CHECK(parse_json_fast("[[1]]", 2, v));
  CHECK_FALSE(parse_json_fast("[[[1]]]", 2, v));
  CHECK_FALSE(parse_json_fast("[1]", fast_json_max_depth + 1, v));
  CHECK(parse_json_text("[1]", "", fast_json_max_depth + 1));
}

TEST_CASE("an object's members are built one by one, the object itself never", "[policy][json]") {
  static constexpr std::string_view names[] = {"jsonrpc", "id", "result"};
  json version, id, result;
  json* const values[] = {&version, &id, &result};
  std::uint32_t present = 0;

  SECTION("any order, spaces, escaped names; each value as the full parse builds it") {
    const std::string text = R"( { "result" : {"content":[{"type":"text","text":"a\nb"}],"isError":false},)"
                             R"( "i\u0064":42, "jsonrpc":"2.0" } )";
    REQUIRE(parse_json_members_fast(text, max_json_depth, names, values, present));
    CHECK(present == 0b111);
    const json reference = json::parse(text);
    CHECK(same_json(version, reference["jsonrpc"]));
    CHECK(same_json(id, reference["id"]));
    CHECK(id.is_number_unsigned());
    CHECK(same_json(result, reference["result"]));
  }
  SECTION("members left out leave their bits clear") {
    REQUIRE(parse_json_members_fast(R"({"id":-3})", max_json_depth, names, values, present));
    CHECK(present == 0b010);
    CHECK(same_json(id, json(-3)));
    REQUIRE(parse_json_members_fast("{}", max_json_depth, names, values, present));
    CHECK(present == 0);
  }
  SECTION("refused: another member, a name twice, not an object, bad text, too deep") {
    for (const std::string text :
         {R"({"jsonrpc":"2.0","id":1,"error":{}})", R"({"id":1,"id":2})", R"({"id":1,"i\u0064":2})",
          R"([{"id":1}])", R"("id")", R"({"id":1)", R"({"id":1} x)", R"({"id":01})", R"({"result":[[[1]]]})"}) {
      CAPTURE(text);
      CHECK_FALSE(parse_json_members_fast(text, 3, names, values, present));
    }
    // The object counts as one level: a member value one level less deep than the limit fits.
    CHECK(parse_json_members_fast(R"({"result":[[1]]})", 3, names, values, present));
  }
}

TEST_CASE("a file's document refuses a key that appears twice in one object, naming its path", "[policy][json]") {
  // The parser keeps the last: a second `security` or `deniedPaths` dropped what the first held
  // (a review). Files dhara reads refuse it; the same text as a protocol line still parses.
  struct row {
    std::string text, path;
  };
  const std::vector<row> rows = {
      {R"({"security": {"deniedPaths": ["/a"]}, "security": {}})", "security"},
      {R"({"security": {"deniedPaths": ["/a"], "deniedPaths": []}})", "security.deniedPaths"},
      {R"({"a": [1, {"b": 1}, {"c": 1, "c": 2}]})", "a[2].c"},
      {R"({"x": {"y": [{"z": {}}]}, "w": {"k": 1, "k": 1}})", "w.k"},
  };
  for (const row& r : rows) {
    CAPTURE(r.text);
    auto doc = parse_json_document(r.text, "config.json");
    REQUIRE_FALSE(doc);
    CHECK(doc.err().code == errc::parse_error);
    CHECK(doc.err().message == "config.json: the key '" + r.path + "' appears twice in one object; keep one");
    CHECK(parse_json_text(r.text, "config.json"));
  }
  // Equal keys in different objects are fine.
  CHECK(parse_json_document(R"({"a": {"k": 1}, "b": {"k": 2}, "c": [{"k": 1}, {"k": 2}]})", "f"));
}
