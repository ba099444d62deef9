// Suggestions, JSON type names and error-code names.
#include <catch2/catch.hpp>

#include <array>
#include <set>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "policy/decision.hpp"
#include "policy/result.hpp"
#include "policy/text.hpp"

using namespace dhara::policy;

TEST_CASE("edit distance counts single-byte edits", "[policy][text]") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("abc", "abc") == 0);
  CHECK(edit_distance("levle", "level") == 2);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("", "abc") == 3);
}

TEST_CASE("closest match suggests plausible names only", "[policy][text]") {
  std::array<std::string_view, 3> names{"security", "extensions", "extensionDirs"};
  CHECK(closest_match("securty", names) == "security");
  CHECK(closest_match("extension", names) == "extensions");
  CHECK(closest_match("zzzzzzzz", names).empty());
  CHECK(did_you_mean("securty", names) == " (did you mean 'security'?)");
  CHECK(did_you_mean("qqqq", names).empty());
}

TEST_CASE("JSON type names for messages", "[policy][text]") {
  CHECK(json_type_name(nlohmann::json(1)) == "number");
  CHECK(json_type_name(nlohmann::json("x")) == "string");
  CHECK(json_type_name(nlohmann::json::array()) == "array");
  CHECK(json_type_name(nlohmann::json::object()) == "object");
  CHECK(json_type_name(nlohmann::json(true)) == "boolean");
  CHECK(json_type_name(nlohmann::json()) == "null");
}

TEST_CASE("every error code, verdict and decider has a distinct name", "[policy][text]") {
  std::set<std::string_view> seen;
  for (errc e : {errc::parse_error, errc::invalid_type, errc::invalid_value, errc::missing_field,
                 errc::unknown_capability, errc::unknown_level, errc::unsupported_runtime,
                 errc::invalid_path, errc::resolve_failed, errc::not_found})
    CHECK(seen.insert(to_string(e)).second);
  CHECK(to_string(verdict_kind::allow) == "allow");
  CHECK(to_string(verdict_kind::deny) == "deny");
  CHECK(to_string(verdict_kind::ask) == "ask");
  CHECK(to_string(decider::rule) == "rule");
  CHECK(to_string(decider::user) == "user");
  CHECK(to_string(decider::trusted_author) == "trusted-author");
  CHECK(to_string(decider::yolo) == "yolo");
  CHECK(to_string(decider::failure) == "failure");
}

TEST_CASE("text shown on a terminal acts on nothing and hides nothing", "[policy][text]") {
  struct row {
    std::string in, out;
  };
  const std::vector<row> rows = {
      {"plain words, ünïcode and 日本語 stay", "plain words, ünïcode and 日本語 stay"},
      {"\x1b[2J\x1b[Hfake\rApprove? (y/n/q) ", "?[2J?[Hfake?Approve? (y/n/q) "},  // C0: escape, return
      {"a\x7f" "b\tc\nd", "a?b?c?d"},
      {"\xc2\x9b" "2J", "?2J"},                                  // C1: the 8-bit CSI
      {"\x9b" "2J and \xff\xfe", "?2J and ??"},                  // bytes that are not UTF-8
      {"evil\xe2\x80\xae" "txt.exe", "evil?txt.exe"},             // U+202E right-to-left override
      {"a\xe2\x81\xa6" "b\xe2\x81\xa9", "a?b?"},                  // U+2066/U+2069 isolates
      {"zero\xe2\x80\x8bwidth\xef\xbb\xbf", "zero?width?"},        // U+200B, U+FEFF
      {"line\xe2\x80\xa8sep", "line?sep"},                       // U+2028
      {"\xe0\x80\xaf overlong, \xed\xa0\x80 surrogate", "??? overlong, ??? surrogate"},
      {"cut \xe2\x80", "cut ??"},
      // Shown as nothing or as a blank: two names that look alike (a review).
      {"soft\xc2\xad" "hyphen", "soft?hyphen"},                 // U+00AD
      {"arabic\xd8\x9c" "mark", "arabic?mark"},                 // U+061C
      {"notes\xe3\x85\xa4.txt", "notes?.txt"},                 // U+3164 Hangul filler
      {"blank\xe2\xa0\x80" "braille", "blank?braille"},        // U+2800
      {"vs\xef\xb8\x8f", "vs?"},                               // U+FE0F
      {"tag\xf3\xa0\x81\x81" "ged", "tag?ged"},               // U+E0041 tag A
      {"anno\xef\xbf\xb9" "tation", "anno?tation"},            // U+FFF9
      {"kept: \xe2\x80\x90 \xc2\xa0 \xe3\x80\x80", "kept: \xe2\x80\x90 \xc2\xa0 \xe3\x80\x80"},  // hyphen, no-break and ideographic space
  };
  for (const row& r : rows) {
    INFO(r.in);
    CHECK(terminal_safe(r.in) == r.out);
  }
}
