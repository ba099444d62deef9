// Tests for policy/audit_entry.hpp: exact bytes of audit lines, key order, escaping of
// hostile strings, timestamps and the ignore filter.
#include "policy/audit_entry.hpp"

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace dhara::policy;
using ordered_json = nlohmann::ordered_json;

namespace {

const std::string zero_hash(64, '0');

std::string line_of(const audit_entry& e, std::string_view hash = zero_hash) {
  std::string out;
  append_audit_body(out, e);
  append_audit_suffix(out, hash);
  return out;
}

std::string json_string(std::string_view s) {
  std::string out;
  append_json_string(out, s);
  return out;
}

std::vector<std::string> keys_of(const ordered_json& j) {
  std::vector<std::string> keys;
  for (const auto& item : j.items()) keys.push_back(item.key());
  return keys;
}

audit_entry example_entry() {
  audit_entry e;
  e.timestamp_ms = 1'778'752'800'123;  // 2026-05-14T10:00:00.123Z
  e.extension = "web-tools";
  e.capability = "network:fetch";
  e.action = audit_action::allowed;
  e.details = {{"url", "https://api.example.com/data"}};
  e.decided_by = decider::user;
  e.seq = 1;
  return e;
}

audit_entry full_entry() {
  audit_entry e = example_entry();
  e.action = audit_action::denied;
  e.reason = "domain not listed";
  e.decided_by = decider::rule;
  e.tool = "fetch";
  e.tool_call_id = "call-7";
  e.session = "s-1";
  e.seq = 42;
  return e;
}

}  // namespace

TEST_CASE("an allowed fetch serializes to the documented line byte for byte", "[policy][audit]") {
  const std::string hash =
      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  CHECK(line_of(example_entry(), hash) ==
        R"({"timestamp":"2026-05-14T10:00:00.123Z","extension":"web-tools",)"
        R"("capability":"network:fetch","action":"allowed",)"
        R"("details":{"url":"https://api.example.com/data"},"decidedBy":"user","seq":1,)"
        R"("hash":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"})"
        "\n");
}

TEST_CASE("a denial with every optional key serializes them in the documented order",
          "[policy][audit]") {
  const std::string line = line_of(full_entry());
  CHECK(line ==
        R"({"timestamp":"2026-05-14T10:00:00.123Z","extension":"web-tools",)"
        R"("capability":"network:fetch","action":"denied",)"
        R"("details":{"url":"https://api.example.com/data"},"reason":"domain not listed",)"
        R"("decidedBy":"rule","tool":"fetch","toolCallId":"call-7","session":"s-1","seq":42,)"
        R"("hash":")" + zero_hash + "\"}\n");
  const auto j = ordered_json::parse(line);
  CHECK(keys_of(j) == std::vector<std::string>{"timestamp", "extension", "capability", "action",
                                               "details", "reason", "decidedBy", "tool",
                                               "toolCallId", "session", "seq", "hash"});
  CHECK(j["seq"].get<std::uint64_t>() == 42);
}

TEST_CASE("the body leaves the object open and appends after what the buffer holds",
          "[policy][audit]") {
  std::string out = "previous line\n";
  append_audit_body(out, example_entry());
  CHECK(out.rfind("previous line\n{\"timestamp\":", 0) == 0);
  CHECK(out.back() == '1');  // ends with the seq number, no closing brace
  CHECK(out.find('\n', 14) == std::string::npos);
}

TEST_CASE("audit_lines hold each line's body up to the seq, from entries and from views alike",
          "[policy][audit]") {
  const audit_entry full = full_entry();
  const audit_entry plain = example_entry();
  const std::vector<audit_detail> details = {{"url", "https://api.example.com/data"}};
  audit_entry_view view;
  view.timestamp_ms = full.timestamp_ms;
  view.extension = full.extension;
  view.capability = full.capability;
  view.action = full.action;
  view.details = details;
  view.reason = full.reason;
  view.decided_by = full.decided_by;
  view.tool = full.tool;
  view.tool_call_id = full.tool_call_id;
  view.session = full.session;

  audit_lines lines;
  lines.add(full);
  lines.add(plain);
  lines.add(view);
  audit_lines more;
  more.add(plain);
  lines.add(more);
  REQUIRE(lines.size() == 4);
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) bytes += lines[i].size();
  CHECK(bytes == lines.bytes());
  // Line i with seq N appended is exactly append_audit_body of the entry with seq N.
  std::string expected_full, expected_plain;
  append_audit_body(expected_full, full);    // seq 42
  append_audit_body(expected_plain, plain);  // seq 1
  CHECK(std::string(lines[0]) + "42" == expected_full);
  CHECK(std::string(lines[1]) + "1" == expected_plain);
  CHECK(std::string(lines[2]) + "42" == expected_full);
  CHECK(std::string(lines[3]) + "1" == expected_plain);
  CHECK(lines[2].ends_with(R"(,"seq":)"));

  // The last two lines move to another set, after what it holds; the first two stay.
  audit_lines moved;
  moved.add(plain);
  const std::string third(lines[2]), fourth(lines[3]);
  lines.move_tail(2, moved);
  REQUIRE(lines.size() == 2);
  REQUIRE(moved.size() == 3);
  CHECK(std::string(lines[1]) + "1" == expected_plain);
  CHECK(lines.bytes() == lines[0].size() + lines[1].size());
  CHECK(moved[1] == third);
  CHECK(moved[2] == fourth);
  CHECK(moved.bytes() == moved[0].size() + third.size() + fourth.size());
  lines.move_tail(2, moved);  // nothing past the end
  CHECK(lines.size() == 2);
  CHECK(moved.size() == 3);

  lines.clear();
  CHECK(lines.empty());
  CHECK(lines.bytes() == 0);
}

TEST_CASE("a view is dropped by the ignore filter exactly as the entry it mirrors", "[policy][audit]") {
  const std::vector<std::string> patterns = {"**/node_modules/**", "https://cdn.test/**"};
  struct row {
    std::string key, value;
    audit_action action;
    bool ignored;
  };
  const std::vector<row> rows = {
      {"path", "/p/node_modules/x.js", audit_action::allowed, true},
      {"path", "/p/node_modules/x.js", audit_action::denied, false},
      {"path", "/p/src/x.js", audit_action::allowed, false},
      {"url", "https://cdn.test/lib.js", audit_action::allowed, true},
      {"url", "https://cdn.test/lib.js", audit_action::denied, false},
      {"command", "/p/node_modules/x.js", audit_action::allowed, false},
  };
  for (const row& r : rows) {
    INFO(r.key << "=" << r.value << " " << to_string(r.action));
    audit_entry e = example_entry();
    e.action = r.action;
    e.details = {{r.key, r.value}};
    const audit_detail d{r.key, r.value};
    audit_entry_view v;
    v.action = r.action;
    v.details = {&d, 1};
    CHECK(is_ignored(e, patterns) == r.ignored);
    CHECK(is_ignored(v, patterns) == r.ignored);
  }
}

TEST_CASE("an ignore pattern cannot be met by what a caller adds to a path or a URL", "[policy][audit]") {
  // Both reviews of 2026-12-07 kept allowed reads of .env and fetches to any host out of the
  // trail with the seed's own `**/node_modules/**`.
  const std::vector<std::string> nm = {"**/node_modules/**"};
  struct row {
    const char* name;
    const char* key;
    const char* value;
    const char* resolved;
    bool ignored;
  };
  const row rows[] = {
      {"relative, resolved under node_modules", "path", "node_modules/x.js", "/p/node_modules/x.js", true},
      {"relative dot-dot out of node_modules", "path", "node_modules/../.env", "/p/.env", false},
      {"a link under node_modules to .env", "path", "node_modules/link", "/p/.env", false},
      {"absolute, the link's target elsewhere", "path", "/p/node_modules/link", "/p/.env", false},
      {"absolute, resolved under node_modules", "path", "/p/node_modules/x.js", "/p/node_modules/x.js", true},
      {"absolute dot-dot into node_modules, resolved there", "path", "/p/src/../node_modules/x.js", "/p/node_modules/x.js", true},
      {"relative without a resolution is kept", "path", "node_modules/x.js", "", false},
      {"a query naming node_modules", "url", "https://1.1.1.1/upload?secret=1&x=/node_modules/", "", false},
      {"a fragment naming node_modules", "url", "https://1.1.1.1/upload?secret=1#/node_modules/a", "", false},
      {"a path with a dot segment", "url", "https://cdn.test/node_modules/../upload", "", false},
      {"a path with a percent escape", "url", "https://cdn.test/node_modules/%2e%2e/upload", "", false},
      // A URL is dropped only by a pattern naming its scheme and host: a folder glob matched
      // a fetch to any host whose path had the folder in it (a review).
      {"any host's path under node_modules", "url", "http://203.0.113.7/node_modules/AKIA-SECRET", "", false},
      {"a path under node_modules, query dropped", "url", "https://cdn.test/node_modules/x.js?v=1", "", false},
  };
  for (const row& r : rows) {
    INFO(r.name);
    const audit_detail d{r.key, r.value};
    audit_entry_view v;
    v.action = audit_action::allowed;
    v.details = {&d, 1};
    CHECK(is_ignored(v, nm, r.resolved) == r.ignored);
    audit_entry e = example_entry();
    e.details = {{r.key, r.value}};
    CHECK(is_ignored(e, nm, r.resolved) == r.ignored);
  }
}

TEST_CASE("a URL's entry is dropped only by a pattern that names its scheme and host", "[policy][audit]") {
  const std::vector<std::string> patterns = {"https://cdn.test/**", "**/node_modules/**", "http*://any.test/**",
                                             "https://*.wild.test/**", "https:///**"};
  struct row {
    const char* value;
    bool ignored;
  };
  const row rows[] = {
      {"https://cdn.test/lib.js", true},
      {"https://cdn.test/node_modules/x.js?v=1", true},
      {"https://cdn.test@evil.test/lib.js", false},      // userinfo: the host is evil.test
      {"https://cdn.test.evil.test/lib.js", false},
      {"https://cdn.test:8443/lib.js", false},
      {"http://cdn.test/lib.js", false},                 // another scheme
      {"https://evil.test/node_modules/x.js", false},    // the folder glob names no host
      {"https://any.test/x", false},                     // a glob in the scheme names none
      {"https://a.wild.test/x", false},                  // nor one in the host
      {"https:///x", false},
  };
  for (const row& r : rows) {
    INFO(r.value);
    const audit_detail d{"url", r.value};
    audit_entry_view v;
    v.action = audit_action::allowed;
    v.details = {&d, 1};
    CHECK(is_ignored(v, patterns) == r.ignored);
  }
}

TEST_CASE("the hash suffix is exactly 75 bytes plus the newline", "[policy][audit]") {
  std::string out;
  append_audit_suffix(out, zero_hash);
  CHECK(out.size() == audit_hash_suffix_bytes + 1);
  CHECK(audit_hash_suffix_bytes == 75);
  CHECK(out == ",\"hash\":\"" + zero_hash + "\"}\n");
}

TEST_CASE("empty optional keys are omitted", "[policy][audit]") {
  struct row {
    std::string tool, tool_call_id, session;
    std::vector<std::string> keys_after_decided_by;
  };
  const std::vector<row> rows = {
      {"", "", "", {}},
      {"read", "", "", {"tool"}},
      {"", "c1", "", {"toolCallId"}},
      {"", "", "s", {"session"}},
      {"read", "", "s", {"tool", "session"}},
      {"read", "c1", "s", {"tool", "toolCallId", "session"}},
  };
  for (const auto& r : rows) {
    audit_entry e = example_entry();
    e.tool = r.tool;
    e.tool_call_id = r.tool_call_id;
    e.session = r.session;
    std::vector<std::string> expected = {"timestamp", "extension", "capability", "action",
                                         "details", "decidedBy"};
    expected.insert(expected.end(), r.keys_after_decided_by.begin(), r.keys_after_decided_by.end());
    expected.push_back("seq");
    expected.push_back("hash");
    INFO("tool='" << r.tool << "' toolCallId='" << r.tool_call_id << "' session='" << r.session << "'");
    CHECK(keys_of(ordered_json::parse(line_of(e))) == expected);
  }
}

TEST_CASE("details are written in order and as {} when there are none", "[policy][audit]") {
  audit_entry e = example_entry();
  e.details.clear();
  CHECK(line_of(e).find(R"("action":"allowed","details":{},"decidedBy":"user")") != std::string::npos);
  e.details = {{"path", "/b"}, {"change", "approve"}, {"a", ""}};
  const std::string line = line_of(e);
  CHECK(line.find(R"("details":{"path":"/b","change":"approve","a":""},)") != std::string::npos);
  CHECK(keys_of(ordered_json::parse(line)["details"]) == std::vector<std::string>{"path", "change", "a"});
}

TEST_CASE("a denial always carries a reason, an allow only when it has one", "[policy][audit]") {
  struct row {
    audit_action action;
    std::string reason;
    bool has_reason;
    std::string written;
  };
  const std::vector<row> rows = {
      {audit_action::denied, "", true, std::string(audit_missing_reason)},
      {audit_action::denied, "path denied: ~/.ssh", true, "path denied: ~/.ssh"},
      {audit_action::allowed, "", false, ""},
      {audit_action::allowed, "approved once", true, "approved once"},
  };
  for (const auto& r : rows) {
    audit_entry e = example_entry();
    e.action = r.action;
    e.reason = r.reason;
    const auto j = ordered_json::parse(line_of(e));
    INFO(to_string(r.action) << " with reason '" << r.reason << "'");
    REQUIRE(j.contains("reason") == r.has_reason);
    if (r.has_reason) CHECK(j["reason"] == r.written);
  }
  CHECK_FALSE(audit_missing_reason.empty());
  audit_entry silent = example_entry();
  silent.action = audit_action::denied;
  CHECK(line_of(silent).find(
            R"x("details":{"url":"https://api.example.com/data"},"reason":"denied (no reason recorded)","decidedBy":)x") !=
        std::string::npos);
}

TEST_CASE("an out-of-range action is written as a denial with a reason", "[policy][audit]") {
  audit_entry e = example_entry();
  e.action = static_cast<audit_action>(7);
  const auto j = ordered_json::parse(line_of(e));
  CHECK(j["action"] == "denied");
  CHECK(j.contains("reason"));
  CHECK_FALSE(is_ignored(e, {"**"}));
}

TEST_CASE("actions and deciders use the audit spelling", "[policy][audit]") {
  CHECK(to_string(audit_action::allowed) == "allowed");
  CHECK(to_string(audit_action::denied) == "denied");
  const std::vector<std::pair<decider, std::string>> rows = {
      {decider::rule, "rule"}, {decider::user, "user"}, {decider::trusted_author, "trusted-author"},
      {decider::yolo, "yolo"}, {decider::failure, "failure"}};
  for (const auto& [d, name] : rows) {
    audit_entry e = example_entry();
    e.decided_by = d;
    CHECK(ordered_json::parse(line_of(e))["decidedBy"] == name);
  }
}

TEST_CASE("seq is written as a plain number up to the largest uint64", "[policy][audit]") {
  audit_entry e = example_entry();
  for (std::uint64_t seq : {std::uint64_t{0}, std::uint64_t{9}, std::uint64_t{10},
                            std::uint64_t{18446744073709551615ULL}}) {
    e.seq = seq;
    std::string body;
    append_audit_body(body, e);
    CHECK(body.substr(body.rfind(",\"seq\":")) == ",\"seq\":" + std::to_string(seq));
    CHECK(ordered_json::parse(line_of(e))["seq"].get<std::uint64_t>() == seq);
  }
}

namespace {

struct escape_row {
  const char* name;
  std::string input;
  std::string expected;  // the JSON literal, with quotes
  std::string decoded;   // what a JSON parser reads back
};

std::vector<escape_row> escape_table() {
  using namespace std::string_literals;
  return {
      {"empty", "", R"("")", ""},
      {"plain ascii", "hello world", R"("hello world")", "hello world"},
      {"long plain run", std::string(37, 'a'), "\"" + std::string(37, 'a') + "\"", std::string(37, 'a')},
      {"quote", "say \"hi\"", R"("say \"hi\"")", "say \"hi\""},
      {"backslash", "C:\\dir\\", R"("C:\\dir\\")", "C:\\dir\\"},
      {"newline", "a\nb", R"("a\nb")", "a\nb"},
      {"carriage return", "a\rb", R"("a\rb")", "a\rb"},
      {"tab", "a\tb", R"("a\tb")", "a\tb"},
      {"backspace", "a\bb", R"("a\bb")", "a\bb"},
      {"form feed", "a\fb", R"("a\fb")", "a\fb"},
      {"NUL", "a\0b"s, R"("a\u0000b")", "a\0b"s},
      {"0x01", "\x01", R"("\u0001")", "\x01"},
      {"escape 0x1b", "\x1b[31m", R"("\u001b[31m")", "\x1b[31m"},
      {"0x1f", "\x1f", R"("\u001f")", "\x1f"},
      {"space and tilde stay", " ~", R"(" ~")", " ~"},
      {"DEL stays", "\x7f", "\"\x7f\"", "\x7f"},
      {"2-byte UTF-8", "caf\xc3\xa9", "\"caf\xc3\xa9\"", "caf\xc3\xa9"},
      {"3-byte UTF-8", "\xe2\x82\xac 5", "\"\xe2\x82\xac 5\"", "\xe2\x82\xac 5"},
      {"4-byte UTF-8", "\xf0\x9f\x98\x80", "\"\xf0\x9f\x98\x80\"", "\xf0\x9f\x98\x80"},
      {"largest code point U+10FFFF", "\xf4\x8f\xbf\xbf", "\"\xf4\x8f\xbf\xbf\"", "\xf4\x8f\xbf\xbf"},
      {"last before surrogates U+D7FF", "\xed\x9f\xbf", "\"\xed\x9f\xbf\"", "\xed\x9f\xbf"},
      {"first after surrogates U+E000", "\xee\x80\x80", "\"\xee\x80\x80\"", "\xee\x80\x80"},
      {"U+2028 line separator", "a\xe2\x80\xa8" "b", R"("a\u2028b")", "a\xe2\x80\xa8" "b"},
      {"U+2029 paragraph separator", "\xe2\x80\xa9", R"("\u2029")", "\xe2\x80\xa9"},
      {"overlong slash C0 AF", "\xc0\xaf", R"("\ufffd\ufffd")", "\xef\xbf\xbd\xef\xbf\xbd"},
      {"overlong 3-byte E0 80 AF", "\xe0\x80\xaf", R"("\ufffd\ufffd\ufffd")",
       "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"overlong 4-byte F0 8F BF BF", "\xf0\x8f\xbf\xbf", R"("\ufffd\ufffd\ufffd\ufffd")",
       "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"surrogate ED A0 80", "\xed\xa0\x80", R"("\ufffd\ufffd\ufffd")",
       "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"above U+10FFFF F4 90 80 80", "\xf4\x90\x80\x80", R"("\ufffd\ufffd\ufffd\ufffd")",
       "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"F5 lead", "\xf5\x80", R"("\ufffd\ufffd")", "\xef\xbf\xbd\xef\xbf\xbd"},
      {"FF byte", "a\xff" "b", R"("a\ufffdb")", "a\xef\xbf\xbd" "b"},
      {"truncated 3-byte at end", "ab\xe2\x82", R"("ab\ufffd")", "ab\xef\xbf\xbd"},
      {"truncated 4-byte before ascii", "\xf0\x9f\x98" "x", R"("\ufffdx")", "\xef\xbf\xbd" "x"},
      {"truncated 2-byte before quote", "\xc3\"", R"("\ufffd\"")", "\xef\xbf\xbd\""},
      {"lone continuation byte", "a\x80" "b", R"("a\ufffdb")", "a\xef\xbf\xbd" "b"},
      {"two continuation bytes", "\x80\xbf", R"("\ufffd\ufffd")", "\xef\xbf\xbd\xef\xbf\xbd"},
      {"escape after a long run", std::string(20, 'x') + "\"" + std::string(20, 'y'),
       "\"" + std::string(20, 'x') + "\\\"" + std::string(20, 'y') + "\"",
       std::string(20, 'x') + "\"" + std::string(20, 'y')},
      {"backslash inside a long run", std::string(5, 'x') + "\\" + std::string(10, 'y'),
       "\"" + std::string(5, 'x') + "\\\\" + std::string(10, 'y') + "\"",
       std::string(5, 'x') + "\\" + std::string(10, 'y')},
      {"DEL inside a long run", std::string(3, 'x') + "\x7f" + std::string(12, 'y'),
       "\"" + std::string(3, 'x') + "\x7f" + std::string(12, 'y') + "\"",
       std::string(3, 'x') + "\x7f" + std::string(12, 'y')},
      {"multibyte after a long run", std::string(13, 'x') + "\xc3\xa9" + std::string(9, 'y'),
       "\"" + std::string(13, 'x') + "\xc3\xa9" + std::string(9, 'y') + "\"",
       std::string(13, 'x') + "\xc3\xa9" + std::string(9, 'y')},
  };
}

}  // namespace

TEST_CASE("strings are escaped to exact JSON that parses back", "[policy][audit]") {
  for (const auto& r : escape_table()) {
    INFO(r.name);
    const std::string got = json_string(r.input);
    CHECK(got == r.expected);
    CHECK(ordered_json::parse(got).get<std::string>() == r.decoded);
  }
}

TEST_CASE("every ASCII byte at every position of a run is escaped exactly when needed",
          "[policy][audit]") {
  // The scanner skips 8 bytes at a time: each byte is tried at each offset of two words.
  const auto expected_escape = [](unsigned char c) -> std::string {
    switch (c) {
      case '"': return "\\\"";
      case '\\': return "\\\\";
      case '\n': return "\\n";
      case '\r': return "\\r";
      case '\t': return "\\t";
      case '\b': return "\\b";
      case '\f': return "\\f";
      default: break;
    }
    if (c < 0x20) {
      const char hex[] = "0123456789abcdef";
      return std::string("\\u00") + hex[c >> 4] + hex[c & 0xF];
    }
    return std::string(1, static_cast<char>(c));
  };
  for (int c = 0; c < 0x80; ++c) {
    for (std::size_t pos = 0; pos < 16; ++pos) {
      std::string input(17, 'a');
      input[pos] = static_cast<char>(c);
      const std::string got = json_string(input);
      INFO("byte " << c << " at " << pos << " -> " << got);
      REQUIRE(got == "\"" + input.substr(0, pos) + expected_escape(static_cast<unsigned char>(c)) +
                         input.substr(pos + 1) + "\"");
      REQUIRE(ordered_json::parse(got).get<std::string>() == input);
    }
  }
}

TEST_CASE("short hostile strings escape the same at every position of a run", "[policy][audit]") {
  for (const auto& r : escape_table()) {
    if (r.input.empty() || r.input.size() > 4) continue;
    const std::string inner = r.expected.substr(1, r.expected.size() - 2);
    for (std::size_t pos = 0; pos < 16; ++pos) {
      const std::string head(pos, 'a'), tail(16 - pos, 'b');
      INFO(r.name << " at " << pos);
      CHECK(json_string(head + r.input + tail) == "\"" + head + inner + tail + "\"");
    }
  }
}

TEST_CASE("a hostile sequence after a plain run of any length escapes the same, appended or in a line",
          "[policy][audit]") {
  // Plain bytes are passed eight at a time, a short string gathered into one word, and a
  // line's strings copied word by word as they are read: each hostile sequence after runs of
  // every length up to three words, before a tail of every length up to one, both ways.
  for (const auto& r : escape_table()) {
    if (r.input.empty() || r.input.size() > 4) continue;
    const std::string inner = r.expected.substr(1, r.expected.size() - 2);
    for (std::size_t before = 0; before <= 24; ++before) {
      for (std::size_t after = 0; after <= 9; ++after) {
        const std::string head(before, 'a'), tail(after, 'b');
        const std::string expected = "\"" + head + inner + tail + "\"";
        INFO(r.name << " after " << before << ", before " << after);
        REQUIRE(json_string(head + r.input + tail) == expected);
        audit_entry e = example_entry();
        e.extension = head + r.input + tail;
        REQUIRE(line_of(e).find("\"extension\":" + expected + ",") != std::string::npos);
      }
    }
  }
}

TEST_CASE("lines whose every byte takes six to escape are exact below, at and past the one-piece size",
          "[policy][audit]") {
  // A line is written into room made for its worst case (6 bytes a string byte) when its
  // strings hold at most 16 KiB, else by appends: both sides of that size, with the bytes
  // whose escape is longest.
  for (const char c : {'\x01', '\xff'}) {
    for (const std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{2047}, std::size_t{2048}, std::size_t{2049}}) {
      const std::string s(n, c);
      audit_entry e = full_entry();
      e.extension = e.capability = e.reason = e.tool = e.tool_call_id = e.session = s;
      e.details = {{s, s}};  // 8 strings of n bytes: 16 KiB in all at n = 2048
      const std::string line = line_of(e);
      audit_lines lines;
      lines.add(e);
      const std::vector<audit_detail> view_details = {{s, s}};
      audit_entry_view view{e.timestamp_ms, e.extension, e.capability, e.action, view_details, e.reason,
                            e.decided_by, e.tool, e.tool_call_id, e.session};
      lines.add(view);
      INFO("byte " << int(static_cast<unsigned char>(c)) << ", " << n << " bytes a string");
      REQUIRE(lines.size() == 2);
      CHECK(line.substr(0, line.rfind(",\"seq\":") + 7) == lines[0]);
      CHECK(lines[1] == lines[0]);
      const std::string decoded = c == '\x01' ? s : [&] {
        std::string r;
        for (std::size_t i = 0; i < n; ++i) r += "\xef\xbf\xbd";
        return r;
      }();
      CHECK(line.size() > 6 * 8 * n);
      const auto j = ordered_json::parse(line);
      for (const char* key : {"extension", "capability", "reason", "tool", "toolCallId", "session"})
        CHECK(j[key].get<std::string>() == decoded);
      CHECK(j["details"][decoded].get<std::string>() == decoded);
    }
  }
}

TEST_CASE("a string past the most a line holds is cut at a character and says so", "[policy][audit]") {
  // A call's input of megabytes made a line longer than dhara's own readers take, and every
  // later session refused the trail (a review). 3 MiB of U+2028, each escaped to 6 bytes.
  std::string huge;
  for (int i = 0; i < 1 << 20; ++i) huge += "\xe2\x80\xa8";
  audit_entry e = example_entry();
  e.details = {{"path", "/x/" + huge}};
  e.reason = huge;
  const std::string line = line_of(e);
  CHECK(line.size() < 2 * 6 * audit_string_bytes_max + 1024);
  const auto j = ordered_json::parse(line);
  const std::string marker = "… (cut by dhara: " + std::to_string(huge.size()) + " bytes in all)";
  const std::string path = j["details"]["path"].get<std::string>();
  REQUIRE(path.ends_with(" (cut by dhara: " + std::to_string(huge.size() + 3) + " bytes in all)"));
  CHECK(path.starts_with("/x/\xe2\x80\xa8"));
  const std::string kept = path.substr(0, path.rfind("… (cut"));
  CHECK(kept.size() <= audit_string_bytes_max);
  CHECK((kept.size() - 3) % 3 == 0);  // whole characters only
  CHECK(j["reason"].get<std::string>().ends_with(marker));
  // A string of exactly the most is written whole.
  e.details = {{"path", std::string(audit_string_bytes_max, 'a')}};
  e.reason = "r";
  CHECK(ordered_json::parse(line_of(e))["details"]["path"].get<std::string>() == std::string(audit_string_bytes_max, 'a'));
}

TEST_CASE("a line of many empty details is exact", "[policy][audit]") {
  // Nothing but separators and quotes: the room a detail takes beyond its strings' bytes.
  audit_entry e = example_entry();
  e.details.assign(20'000, {"", ""});
  const std::string line = line_of(e);
  std::string expected = "\"details\":{\"\":\"\"";
  for (int i = 1; i < 20'000; ++i) expected += ",\"\":\"\"";
  expected += "}";
  CHECK(line.find(expected) != std::string::npos);
  CHECK_NOTHROW(ordered_json::parse(line));
}

TEST_CASE("every line parses whichever field holds a hostile string", "[policy][audit]") {
  for (const auto& r : escape_table()) {
    INFO(r.name);
    for (int field = 0; field < 8; ++field) {
      audit_entry e = full_entry();
      switch (field) {
        case 0: e.extension = r.input; break;
        case 1: e.capability = r.input; break;
        case 2: e.details = {{r.input, r.input}}; break;
        case 3: e.reason = r.input; break;
        case 4: e.tool = r.input; break;
        case 5: e.tool_call_id = r.input; break;
        case 6: e.session = r.input; break;
        default: e.details.emplace_back("path", r.input); break;
      }
      const std::string line = line_of(e);
      CHECK(line.find('\n') == line.size() - 1);
      ordered_json j;
      REQUIRE_NOTHROW(j = ordered_json::parse(line));
      CHECK(j["hash"] == zero_hash);
    }
  }
}

TEST_CASE("timestamps are UTC with milliseconds", "[policy][audit]") {
  struct row {
    std::int64_t ms;
    const char* text;
  };
  const std::vector<row> rows = {
      {0, "1970-01-01T00:00:00.000Z"},
      {1, "1970-01-01T00:00:00.001Z"},
      {1'778'752'800'123, "2026-05-14T10:00:00.123Z"},
      {1'709'210'096'789, "2024-02-29T12:34:56.789Z"},          // leap day
      {1'709'251'199'999, "2024-02-29T23:59:59.999Z"},
      {1'709'251'200'000, "2024-03-01T00:00:00.000Z"},
      {1'767'225'599'999, "2025-12-31T23:59:59.999Z"},          // end of year
      {1'767'225'600'000, "2026-01-01T00:00:00.000Z"},
      {951'782'400'000, "2000-02-29T00:00:00.000Z"},            // 400-year leap
      {951'868'800'000, "2000-03-01T00:00:00.000Z"},
      {-1, "1969-12-31T23:59:59.999Z"},                          // negative: exact, not clamped
      {-86'400'000, "1969-12-31T00:00:00.000Z"},
      {-86'400'001, "1969-12-30T23:59:59.999Z"},
      {-2'208'988'800'000, "1900-01-01T00:00:00.000Z"},
      {-62'167'219'200'000, "0000-01-01T00:00:00.000Z"},
      {-62'167'219'200'001, "0000-01-01T00:00:00.000Z"},         // clamped below year 0
      {std::numeric_limits<std::int64_t>::min(), "0000-01-01T00:00:00.000Z"},
      {253'402'300'799'999, "9999-12-31T23:59:59.999Z"},
      {253'402'300'800'000, "9999-12-31T23:59:59.999Z"},         // clamped above year 9999
      {std::numeric_limits<std::int64_t>::max(), "9999-12-31T23:59:59.999Z"},
  };
  for (const auto& r : rows) {
    INFO(r.ms);
    CHECK(format_timestamp(r.ms) == r.text);
    CHECK(format_timestamp(r.ms).size() == audit_timestamp_bytes);
  }
}

namespace {

// The same text through the C library, independent of the serializer's calendar code.
std::string timestamp_by_gmtime(std::int64_t ms) {
  std::int64_t seconds = ms / 1000, milli = ms % 1000;
  if (milli < 0) milli += 1000, --seconds;
  const time_t t = static_cast<time_t>(seconds);
  struct tm tm {};
  REQUIRE(gmtime_r(&t, &tm) != nullptr);
  char text[64];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(milli));
  return text;
}

}  // namespace

TEST_CASE("timestamps stay exact when the time moves within a minute, across one and back", "[policy][audit]") {
  // The serializer remembers the last minute it wrote; every step here either reuses it or
  // must replace it, and the text must match the C library's either way.
  const std::int64_t start = 1'767'225'599'000 - 3 * 60'000;  // 2025-12-31T23:56:59, before a new year
  std::vector<std::int64_t> times;
  for (std::int64_t ms = start; ms < start + 5 * 60'000; ms += 997) times.push_back(ms);  // forward
  times.push_back(start + 60'000);     // back to an earlier minute
  times.push_back(start + 60'000 + 1);
  times.push_back(start + 4 * 60'000);  // and forth again
  times.push_back(59'999);              // the last ms of the epoch's first minute
  times.push_back(60'000);
  times.push_back(59'999);
  times.push_back(-1);                  // -1 and -60 000 lie in the minute before the epoch,
  times.push_back(-60'000);             // -60 001 in the one before that; then the epoch's
  times.push_back(-60'001);
  times.push_back(0);
  times.push_back(-1);
  for (std::int64_t ms : times) {
    INFO(ms);
    CHECK(format_timestamp(ms) == timestamp_by_gmtime(ms));
  }
}

TEST_CASE("threads writing timestamps of different minutes do not mix them", "[policy][audit]") {
  // Each thread keeps to its own minute: a memory of the last minute shared between threads
  // would now and then hand one thread the other's date.
  const std::int64_t a = 1'778'752'800'123;        // 2026-05-14T10:00:00.123Z
  const std::int64_t b = 951'782'400'000 + 59'000;  // 2000-02-29T00:00:59.000Z
  const std::string want_a = timestamp_by_gmtime(a), want_b = timestamp_by_gmtime(b);
  std::atomic<int> wrong{0};
  auto work = [&wrong](std::int64_t ms, const std::string& want) {
    for (int i = 0; i < 200'000; ++i)
      if (format_timestamp(ms) != want) wrong.fetch_add(1, std::memory_order_relaxed);
  };
  std::thread t1(work, a, std::cref(want_a));
  std::thread t2(work, b, std::cref(want_b));
  t1.join();
  t2.join();
  CHECK(wrong.load() == 0);
}

TEST_CASE("the line's timestamp is format_timestamp of the entry's time", "[policy][audit]") {
  audit_entry e = example_entry();
  e.timestamp_ms = -1;
  CHECK(ordered_json::parse(line_of(e))["timestamp"] == "1969-12-31T23:59:59.999Z");
}

TEST_CASE("the ignore filter drops only allowed entries whose path or url matches",
          "[policy][audit]") {
  struct row {
    const char* name;
    audit_action action;
    std::string key, value;
    std::vector<std::string> patterns;
    bool ignored;
  };
  const std::vector<std::string> nm = {"**/node_modules/**"};
  const std::vector<row> rows = {
      {"allowed read under node_modules", audit_action::allowed, "path", "/p/node_modules/x/y.js", nm, true},
      {"denied read under node_modules is kept", audit_action::denied, "path", "/p/node_modules/x/y.js", nm, false},
      {"other path kept", audit_action::allowed, "path", "/p/src/y.js", nm, false},
      {"similar name kept", audit_action::allowed, "path", "/p/node_modules_old/y.js", nm, false},
      {"no patterns drop nothing", audit_action::allowed, "path", "/p/node_modules/x/y.js", {}, false},
      {"empty pattern drops nothing", audit_action::allowed, "path", "/p/node_modules/x/y.js", {""}, false},
      {"directory pattern covers what is under it", audit_action::allowed, "path", "/tmp/cache/a/b", {"/tmp/cache"}, true},
      {"directory pattern keeps a sibling prefix", audit_action::allowed, "path", "/tmp/cachet/a", {"/tmp/cache"}, false},
      {"path is normalized first", audit_action::allowed, "path", "/p/src/../node_modules/x.js", nm, true},
      {"dot-dot out of node_modules is kept", audit_action::allowed, "path", "/p/node_modules/../src/y.js", nm, false},
      {"second pattern matches", audit_action::allowed, "path", "/var/log/x", {"/nope/**", "/var/log/**"}, true},
      {"other detail keys are not matched", audit_action::allowed, "file", "/p/node_modules/x/y.js", nm, false},
      // A URL's path alone drops nothing: the pattern must name its host (a review).
      {"url path alone kept", audit_action::allowed, "url", "https://cdn.example.com/p/node_modules/x/y.js?v=1", nm, false},
      {"url path kept", audit_action::allowed, "url", "https://api.example.com/data", nm, false},
      {"url path glob alone kept", audit_action::allowed, "url", "https://api.example.com/static/app.js#top", {"/static/**"}, false},
      {"url glob with its host", audit_action::allowed, "url", "https://api.example.com/static/app.js#top", {"https://api.example.com/static/**"}, true},
      {"denied url kept", audit_action::denied, "url", "https://api.example.com/static/app.js", {"/static/**"}, false},
      {"whole url glob", audit_action::allowed, "url", "https://api.example.com/static/app.js", {"https://api.example.com/**"}, true},
      {"whole url glob of another host", audit_action::allowed, "url", "https://evil.example.net/static/app.js", {"https://api.example.com/**"}, false},
      {"url without a path", audit_action::allowed, "url", "https://api.example.com", {"/static/**"}, false},
  };
  for (const auto& r : rows) {
    INFO(r.name);
    audit_entry e = example_entry();
    e.action = r.action;
    e.details = {{"change", "x"}, {r.key, r.value}};
    CHECK(is_ignored(e, r.patterns) == r.ignored);
  }
}
