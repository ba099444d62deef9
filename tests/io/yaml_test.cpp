// Tests for io/yaml.hpp: YAML → JSON scalar rules, errors with positions, and limits.
#include "io/yaml.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using dhara::io::load_manifest_text;
using dhara::io::yaml_to_json;
using dhara::policy::errc;
using json = nlohmann::json;

namespace {

constexpr const char* manifest_json = R"({ "name": "web-tools", "version": "1.0.0",
  "description": "Fetch web pages", "author": "zosmaai",
  "runtime": { "type": "subprocess", "command": "python3 main.py", "protocol": "json-rpc" },
  "capabilities": ["network:fetch", "network:dns"],
  "network": { "outbound": [ { "domain": "api.example.com", "purpose": "the API" } ] },
  "process": { "commands": ["git"] } })";

constexpr const char* manifest_yaml = R"(# the same manifest, as manifest.yaml
name: web-tools
version: "1.0.0"
description: Fetch web pages
author: zosmaai
runtime:
  type: subprocess
  command: python3 main.py
  protocol: json-rpc
capabilities:
  - network:fetch
  - network:dns
network:
  outbound:
    - domain: api.example.com
      purpose: the API
process:
  commands: [git]
)";

json convert(const std::string& text) {
  auto r = yaml_to_json(text, "test.yaml");
  REQUIRE(r);
  return *r;
}

}  // namespace

TEST_CASE("a YAML manifest converts to the same JSON as the JSON manifest", "[io][yaml]") {
  CHECK(convert(manifest_yaml) == json::parse(manifest_json));

  auto from_yaml = load_manifest_text(manifest_yaml, true, "manifest.yaml");
  auto from_json = load_manifest_text(manifest_json, false, "manifest.json");
  REQUIRE(from_yaml);
  REQUIRE(from_json);
  CHECK(from_yaml->name == from_json->name);
  CHECK(from_yaml->version == "1.0.0");
  CHECK(from_yaml->argv == from_json->argv);
  CHECK(from_yaml->capabilities == from_json->capabilities);
  CHECK(from_yaml->network_domains == from_json->network_domains);
  CHECK(from_yaml->process_commands == from_json->process_commands);
  CHECK(from_yaml->raw == from_json->raw);
}

TEST_CASE("plain scalars are typed, quoted scalars stay strings", "[io][yaml]") {
  std::vector<std::pair<std::string, json>> rows{
      {"true", true},
      {"false", false},
      {"True", true},
      {"FALSE", false},
      {"\"true\"", "true"},
      {"'false'", "false"},
      {"yes", "yes"},
      {"no", "no"},
      {"on", "on"},
      {"42", 42},
      {"-7", -7},
      {"+7", 7},
      {"0", 0},
      {"18446744073709551615", 18446744073709551615ull},
      {"1.5", 1.5},
      {"-0.25", -0.25},
      {"1e3", 1000.0},
      {".5", 0.5},
      {"\"42\"", "42"},
      {"'1.0'", "1.0"},
      {"1.0.0", "1.0.0"},
      {"0x1f", "0x1f"},
      {".inf", ".inf"},
      {".nan", ".nan"},
      {"null", nullptr},
      {"~", nullptr},
      {"", nullptr},
      {"\"null\"", "null"},
      {"''", ""},
      {"!!str 5", "5"},
      {"!!str true", "true"},
      {"hello world", "hello world"},
      {"network:fetch", "network:fetch"},
      {"\"caf\\u00e9\"", "caf\xc3\xa9"},
  };
  for (const auto& [scalar, expected] : rows) {
    CAPTURE(scalar);
    json doc = convert("v: " + scalar + "\n");
    CHECK(doc.at("v") == expected);
    CHECK(doc.at("v").type() == expected.type());
  }
}

TEST_CASE("keys are strings as written, block scalars keep their text", "[io][yaml]") {
  json doc = convert("1: a\ntrue: b\n\"null\": c\ntext: |\n  line one\n  line two\nfolded: >\n  a\n  b\n");
  CHECK(doc.at("1") == "a");
  CHECK(doc.at("true") == "b");
  CHECK(doc.at("null") == "c");
  CHECK(doc.at("text") == "line one\nline two\n");
  CHECK(doc.at("folded") == "a b\n");
}

TEST_CASE("empty or comment-only text is null", "[io][yaml]") {
  CHECK(convert("").is_null());
  CHECK(convert("# nothing here\n").is_null());
}

TEST_CASE("a YAML syntax error names the source, line and column", "[io][yaml]") {
  auto r = yaml_to_json("name: web-tools\nruntime: [a, b\nversion: 1\n", "ext/manifest.yaml");
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::parse_error);
  CHECK_THAT(r.err().message, Catch::Matches(R"(ext/manifest\.yaml:[34]:\d+: invalid YAML: .+)"));

  auto tab = yaml_to_json("a:\n\t- b\n", "m.yaml");
  REQUIRE_FALSE(tab);
  CHECK_THAT(tab.err().message, Catch::StartsWith("m.yaml:2:"));
}

TEST_CASE("nesting deeper than 256 is an error, not a crash", "[io][yaml]") {
  auto nested = [](std::size_t depth) {
    return "v: " + std::string(depth, '[') + "1" + std::string(depth, ']') + "\n";
  };
  CHECK(yaml_to_json(nested(255), "d.yaml"));  // the map plus 255 lists: 256 levels
  for (std::size_t depth : {256u, 300u, 5000u, 100000u}) {
    CAPTURE(depth);
    auto r = yaml_to_json(nested(depth), "d.yaml");
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::parse_error);
    CHECK_THAT(r.err().message, Catch::StartsWith("d.yaml:"));
  }
  auto r = yaml_to_json(nested(300), "d.yaml");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.err().message, Catch::Contains("nested deeper than 256 levels"));

  std::string block;
  for (int i = 0; i < 300; ++i) block += std::string(static_cast<std::size_t>(i), ' ') + "k:\n";
  auto b = yaml_to_json(block, "b.yaml");
  REQUIRE_FALSE(b);
  CHECK_THAT(b.err().message, Catch::Contains("nested deeper than 256 levels"));
}

TEST_CASE("a map key that is not a scalar is an error", "[io][yaml]") {
  for (const char* text : {"? [a, b]\n: 1\n", "{[a]: 1}\n", "? {a: 1}\n: 2\n", "~: 1\n", "null: 1\n"}) {
    CAPTURE(text);
    auto r = yaml_to_json(text, "k.yaml");
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::parse_error);
    CHECK_THAT(r.err().message, Catch::Matches(R"(k\.yaml:\d+:\d+: a map key must be a string.*)"));
  }
}

TEST_CASE("a duplicate key is an error", "[io][yaml]") {
  auto r = yaml_to_json("name: a\nversion: '1'\nname: b\n", "dup.yaml");
  REQUIRE_FALSE(r);
  CHECK(r.err().message == "dup.yaml:3:1: duplicate key 'name'");
}

TEST_CASE("more than one document is an error", "[io][yaml]") {
  auto r = yaml_to_json("a: 1\n---\nb: 2\n", "multi.yaml");
  REQUIRE_FALSE(r);
  CHECK(r.err().message == "multi.yaml:2:1: a second YAML document starts here; expected exactly one");
  CHECK(yaml_to_json("---\na: 1\n...\n", "one.yaml"));
}

TEST_CASE("alias expansion far beyond the text is refused", "[io][yaml]") {
  std::string laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'i'; ++c)
    laughs += std::string(1, c) + ": &" + c + " [*" + static_cast<char>(c - 1) + ", *" + static_cast<char>(c - 1) +
              ", *" + static_cast<char>(c - 1) + ", *" + static_cast<char>(c - 1) + ", *" +
              static_cast<char>(c - 1) + ", *" + static_cast<char>(c - 1) + ", *" + static_cast<char>(c - 1) +
              ", *" + static_cast<char>(c - 1) + ", *" + static_cast<char>(c - 1) + ", *" +
              static_cast<char>(c - 1) + "]\n";
  auto r = yaml_to_json(laughs, "laughs.yaml");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.err().message, Catch::Contains("aliases expand"));

  // Modest reuse is fine.
  json ok = convert("base: &b {type: subprocess}\nother: *b\n");
  CHECK(ok.at("other").at("type") == "subprocess");
}

TEST_CASE("input yaml-cpp would loop on is an error, not an endless parse", "[io][yaml]") {
  // yaml-cpp 0.7 emits empty documents for a lone ',' forever (found by fuzzing).
  for (const char* text : {",", "a: 1\n,\n", "- a\n,"}) {
    CAPTURE(text);
    auto r = yaml_to_json(text, "c.yaml");
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::parse_error);
    CHECK_THAT(r.err().message, Catch::StartsWith("c.yaml:"));
  }
}

TEST_CASE("an alias to the node that contains it is an error", "[io][yaml]") {
  auto r = yaml_to_json("a: &x [1, *x]\n", "r.yaml");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.err().message, Catch::Contains("an alias refers to a node that contains it"));
}

TEST_CASE("invalid UTF-8 is an error", "[io][yaml]") {
  auto r = yaml_to_json("name: caf\xe9\n", "u.yaml");
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::parse_error);
  CHECK_THAT(r.err().message, Catch::Contains("invalid UTF-8"));
}

TEST_CASE("an unquoted YAML version is a clear manifest error", "[io][yaml]") {
  std::string text = manifest_yaml;
  text.replace(text.find("\"1.0.0\""), 7, "1.0");
  auto m = load_manifest_text(text, true, "manifest.yaml");
  REQUIRE_FALSE(m);
  CHECK(m.err().message == "manifest.yaml: version: expected a string, got number; put the value in quotes");
}

TEST_CASE("load_manifest_text reports the format's syntax errors", "[io][yaml]") {
  auto y = load_manifest_text("name: [", true, "manifest.yaml");
  REQUIRE_FALSE(y);
  CHECK_THAT(y.err().message, Catch::StartsWith("manifest.yaml:1:"));
  auto j = load_manifest_text("{\"name\": ", false, "manifest.json");
  REQUIRE_FALSE(j);
  CHECK_THAT(j.err().message, Catch::StartsWith("manifest.json:1:"));
}
