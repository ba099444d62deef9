// Tests for policy/manifest.hpp: manifest validation, extension names and split_command.
#include "policy/manifest.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace dhara::policy;
using json = nlohmann::json;

namespace {

// The example of DESIGN §3.4, with a real description.
json design_example() {
  return json::parse(R"({ "name": "web-tools", "version": "1.0.0", "description": "Fetch web pages",
    "author": "zosmaai",
    "runtime": { "type": "subprocess", "command": "python3 main.py", "protocol": "json-rpc" },
    "capabilities": ["network:fetch", "network:dns"],
    "network": { "outbound": [ { "domain": "api.example.com", "purpose": "the API" } ] },
    "process": { "commands": ["git"] } })");
}

// Sets a value at a JSON pointer ("/runtime/command") in a copy of the example.
json with(const std::string& pointer, json value) {
  json doc = design_example();
  doc[json::json_pointer(pointer)] = std::move(value);
  return doc;
}

json without(const std::string& pointer) {
  json doc = design_example();
  json::json_pointer p(pointer);
  doc[p.parent_pointer()].erase(p.back());
  return doc;
}

}  // namespace

TEST_CASE("the DESIGN example manifest parses into every field", "[policy][manifest]") {
  auto m = parse_manifest(design_example(), "manifest.json");
  REQUIRE(m);
  CHECK(m->name == "web-tools");
  CHECK(m->version == "1.0.0");
  CHECK(m->description == "Fetch web pages");
  REQUIRE(m->author);
  CHECK(m->author->name == "zosmaai");
  CHECK(m->author->email.empty());
  CHECK(m->runtime_command == "python3 main.py");
  CHECK(m->argv == std::vector<std::string>{"python3", "main.py"});
  CHECK(m->protocol == "json-rpc");
  CHECK(m->capabilities.contains(capability::network_fetch));
  CHECK(m->capabilities.contains(capability::network_dns));
  CHECK_FALSE(m->capabilities.contains(capability::network_outbound));
  CHECK(m->capability_names == std::vector<std::string>{"network:fetch", "network:dns"});
  REQUIRE(m->network_domains);
  CHECK(*m->network_domains == std::vector<std::string>{"api.example.com"});
  REQUIRE(m->process_commands);
  CHECK(*m->process_commands == std::vector<std::string>{"git"});
  CHECK(m->raw == design_example());
}

TEST_CASE("optional manifest fields may be absent", "[policy][manifest]") {
  json doc = json::parse(R"({"name": "mini", "version": "0.1",
                             "runtime": {"type": "subprocess", "command": "./run"}})");
  auto m = parse_manifest(doc, "manifest.json");
  REQUIRE(m);
  CHECK(m->protocol == "json-rpc");
  CHECK(m->description.empty());
  CHECK_FALSE(m->author);
  CHECK(m->capabilities.empty());
  CHECK(m->capability_names.empty());
  CHECK_FALSE(m->network_domains);
  CHECK_FALSE(m->process_commands);
}

TEST_CASE("unknown fields are kept in raw", "[policy][manifest]") {
  json doc = with("/tools", json::array({{{"name", "fetch"}}}));
  doc["runtime"]["env"] = {{"A", "1"}};
  auto m = parse_manifest(doc, "manifest.json");
  REQUIRE(m);
  CHECK(m->raw.at("tools").at(0).at("name") == "fetch");
  CHECK(m->raw.at("runtime").at("env").at("A") == "1");
}

TEST_CASE("author may be a string or an object", "[policy][manifest]") {
  struct row {
    json author;
    std::string name, email;
  };
  std::vector<row> rows{
      {"zosmaai", "zosmaai", ""},
      {"Jane Doe <jane@example.com>", "Jane Doe", "jane@example.com"},
      {"  Jane Doe  ", "Jane Doe", ""},
      {{{"name", "Jane"}, {"email", "j@example.com"}}, "Jane", "j@example.com"},
      {{{"name", "Jane"}, {"url", "https://example.com"}}, "Jane", ""},
  };
  for (const auto& r : rows) {
    CAPTURE(r.author.dump());
    auto m = parse_manifest(with("/author", r.author), "manifest.json");
    REQUIRE(m);
    REQUIRE(m->author);
    CHECK(m->author->name == r.name);
    CHECK(m->author->email == r.email);
  }
}

TEST_CASE("every missing required field is named", "[policy][manifest]") {
  std::vector<std::pair<std::string, std::string>> rows{
      {"/name", "manifest.json: name: "},
      {"/version", "manifest.json: version: "},
      {"/runtime", "manifest.json: runtime: "},
      {"/runtime/type", "manifest.json: runtime.type: "},
      {"/runtime/command", "manifest.json: runtime.command: "},
  };
  for (const auto& [pointer, prefix] : rows) {
    CAPTURE(pointer);
    auto m = parse_manifest(without(pointer), "manifest.json");
    REQUIRE_FALSE(m);
    CHECK(m.err().code == errc::missing_field);
    CHECK_THAT(m.err().message, Catch::StartsWith(prefix));
  }
  auto no_author_name = parse_manifest(with("/author", {{"email", "a@b.c"}}), "manifest.json");
  REQUIRE_FALSE(no_author_name);
  CHECK_THAT(no_author_name.err().message, Catch::StartsWith("manifest.json: author.name: "));
  auto no_domain = parse_manifest(with("/network/outbound/0", {{"purpose", "x"}}), "manifest.json");
  REQUIRE_FALSE(no_domain);
  CHECK(no_domain.err().code == errc::missing_field);
  CHECK_THAT(no_domain.err().message, Catch::StartsWith("manifest.json: network.outbound[0].domain: "));
}

TEST_CASE("every mistyped field is named with what was expected and what was found",
          "[policy][manifest]") {
  struct row {
    std::string pointer;
    json value;
    std::string message;
  };
  std::vector<row> rows{
      {"/name", 5, "manifest.json: name: expected a string, got number"},
      {"/version", 1.0, "manifest.json: version: expected a string, got number"},
      {"/description", json::array(), "manifest.json: description: expected a string, got array"},
      {"/author", 5, "manifest.json: author: expected a string or an object {name, email}, got number"},
      {"/author", {{"name", 1}}, "manifest.json: author.name: expected a string, got number"},
      {"/author", {{"name", "a"}, {"email", false}}, "manifest.json: author.email: expected a string, got boolean"},
      {"/runtime", "python3 main.py", "manifest.json: runtime: expected an object, got string"},
      {"/runtime/type", 1, "manifest.json: runtime.type: expected a string, got number"},
      {"/runtime/command", 42, "manifest.json: runtime.command: expected a string, got number"},
      {"/runtime/command", json::array({"python3", "main.py"}), "manifest.json: runtime.command: expected a string, got array"},
      {"/runtime/protocol", 2, "manifest.json: runtime.protocol: expected a string, got number"},
      {"/capabilities", "network:fetch", "manifest.json: capabilities: expected an array, got string"},
      {"/capabilities/1", 3, "manifest.json: capabilities[1]: expected a string, got number"},
      {"/network", json::array(), "manifest.json: network: expected an object, got array"},
      {"/network/outbound", json::object(), "manifest.json: network.outbound: expected an array, got object"},
      {"/network/outbound/0", 5, "manifest.json: network.outbound[0]: expected an object {domain, purpose} or a string, got number"},
      {"/network/outbound/0/domain", 5, "manifest.json: network.outbound[0].domain: expected a string, got number"},
      {"/network/outbound/0/purpose", 5, "manifest.json: network.outbound[0].purpose: expected a string, got number"},
      {"/process", "git", "manifest.json: process: expected an object, got string"},
      {"/process/commands", "git", "manifest.json: process.commands: expected an array, got string"},
      {"/process/commands/0", nullptr, "manifest.json: process.commands[0]: expected a string, got null"},
  };
  for (const auto& r : rows) {
    CAPTURE(r.pointer, r.value.dump());
    auto m = parse_manifest(with(r.pointer, r.value), "manifest.json");
    REQUIRE_FALSE(m);
    CHECK(m.err().code == errc::invalid_type);
    CHECK_THAT(m.err().message, Catch::StartsWith(r.message));
  }
}

TEST_CASE("a number where a string belongs says to quote it", "[policy][manifest]") {
  auto m = parse_manifest(with("/version", 1.5), "manifest.yaml");
  REQUIRE_FALSE(m);
  CHECK(m.err().message == "manifest.yaml: version: expected a string, got number; put the value in quotes");
}

TEST_CASE("a manifest whose top level is not an object is an error", "[policy][manifest]") {
  for (const json& doc : {json::array(), json("x"), json(nullptr)}) {
    auto m = parse_manifest(doc, "manifest.json");
    REQUIRE_FALSE(m);
    CHECK(m.err().code == errc::invalid_type);
    CHECK_THAT(m.err().message, Catch::StartsWith("manifest.json: expected an object at the top level"));
  }
}

TEST_CASE("bad values are named with their field", "[policy][manifest]") {
  struct row {
    std::string pointer;
    json value;
    std::string prefix;
  };
  std::vector<row> rows{
      {"/version", "", "manifest.json: version: is empty"},
      {"/version", "1.0 beta", "manifest.json: version: '1.0 beta' holds whitespace"},
      // An 8-bit CSI (U+009B) or a right-to-left override would redraw or reorder the install
      // review where the version is shown (a review); and no version is longer than 64 bytes.
      {"/version", "1.0\u009b8m", "manifest.json: version: "},
      {"/version", "1.0\u202e", "manifest.json: version: "},
      {"/version", std::string(65, '1'), "manifest.json: version: is longer than 64 bytes"},
      {"/author", "", "manifest.json: author: is empty"},
      {"/author", "evil\x1b[2J", "manifest.json: author: holds control characters"},
      {"/description", "clear\x1b[2Jscreen", "manifest.json: description: holds control characters"},
      {"/runtime/command", "", "manifest.json: runtime.command: the command is empty"},
      {"/runtime/command", "python3 x.py | tee log", "manifest.json: runtime.command: '|' at column 14"},
      {"/runtime/protocol", "grpc", "manifest.json: runtime.protocol: 'grpc' is not supported"},
      {"/process/commands/0", "", "manifest.json: process.commands[0]: is empty"},
  };
  for (const auto& r : rows) {
    CAPTURE(r.pointer, r.value.dump());
    auto m = parse_manifest(with(r.pointer, r.value), "manifest.json");
    REQUIRE_FALSE(m);
    CHECK(m.err().code == errc::invalid_value);
    CHECK_THAT(m.err().message, Catch::StartsWith(r.prefix));
  }
}

TEST_CASE("a description may span lines", "[policy][manifest]") {
  auto m = parse_manifest(with("/description", "line one\nline two\tindented"), "manifest.json");
  REQUIRE(m);
  CHECK(m->description == "line one\nline two\tindented");
}

TEST_CASE("an unknown capability in a manifest names the closest known one", "[policy][manifest]") {
  auto m = parse_manifest(with("/capabilities/1", "network:fech"), "manifest.json");
  REQUIRE_FALSE(m);
  CHECK(m.err().code == errc::unknown_capability);
  CHECK_THAT(m.err().message, Catch::StartsWith("manifest.json: capabilities[1]: unknown capability 'network:fech'"));
  CHECK_THAT(m.err().message, Catch::Contains("did you mean 'network:fetch'?"));

  auto far = parse_manifest(with("/capabilities/0", "teleport"), "manifest.json");
  REQUIRE_FALSE(far);
  CHECK(far.err().code == errc::unknown_capability);
  CHECK_THAT(far.err().message, !Catch::Contains("did you mean"));
}

TEST_CASE("a wildcard is not allowed in a manifest", "[policy][manifest]") {
  auto m = parse_manifest(with("/capabilities/0", "network:*"), "manifest.json");
  REQUIRE_FALSE(m);
  CHECK(m.err().code == errc::unknown_capability);
  CHECK_THAT(m.err().message, Catch::StartsWith("manifest.json: capabilities[0]: 'network:*' is a wildcard"));
  CHECK_THAT(m.err().message, Catch::Contains("network:outbound, network:fetch, network:inbound, network:dns"));
}

TEST_CASE("duplicate capabilities are dropped, first spelling kept in order", "[policy][manifest]") {
  auto m = parse_manifest(with("/capabilities", {"filesystem:read", "network:fetch", "filesystem:read"}),
                          "manifest.json");
  REQUIRE(m);
  CHECK(m->capability_names == std::vector<std::string>{"filesystem:read", "network:fetch"});
  capability_set expected;
  expected.insert(capability::filesystem_read);
  expected.insert(capability::network_fetch);
  CHECK(m->capabilities == expected);
}

TEST_CASE("a runtime type other than subprocess is unsupported", "[policy][manifest]") {
  for (const char* type : {"wasm", "docker", "Subprocess", ""}) {
    CAPTURE(type);
    auto m = parse_manifest(with("/runtime/type", type), "manifest.json");
    REQUIRE_FALSE(m);
    CHECK(m.err().code == errc::unsupported_runtime);
    CHECK_THAT(m.err().message, Catch::StartsWith("manifest.json: runtime.type: "));
    CHECK_THAT(m.err().message, Catch::Contains("only as \"subprocess\""));
  }
}

TEST_CASE("hostile and malformed extension names are refused", "[policy][manifest]") {
  std::vector<std::string> bad{
      "../x", "a/b", "@scope/../x", "@scope/..", "..", ".", "Web-Tools", "", std::string(300, 'a'),
      std::string(215, 'a'), ".hidden", "-x", "_x", "@scope", "@/x", "@scope/", "@Scope/x",
      "@scope/x/y", "a..b", "a b", "a\tb", std::string("a\0b", 3), "a\x1b[31m", "caf\xc3\xa9",
      "/abs", "a\\b", "~user", "x/", "@@x/y"};
  for (const auto& name : bad) {
    CAPTURE(name);
    CHECK_FALSE(is_valid_extension_name(name));
    auto m = parse_manifest(with("/name", name), "manifest.json");
    REQUIRE_FALSE(m);
    CHECK(m.err().code == errc::invalid_value);
    CHECK_THAT(m.err().message, Catch::StartsWith("manifest.json: name: "));
    // Untrusted text must not reach the terminal raw.
    CHECK(m.err().message.find('\x1b') == std::string::npos);
    CHECK(m.err().message.size() < 400);
  }
}

TEST_CASE("npm-style names are accepted", "[policy][manifest]") {
  std::vector<std::string> good{"web-tools", "@zosmaai/web-tools", "a", "0day", "a.b_c-d",
                                "x1", std::string(214, 'a'), "@a/b"};
  for (const auto& name : good) {
    CAPTURE(name);
    CHECK(is_valid_extension_name(name));
    auto m = parse_manifest(with("/name", name), "manifest.json");
    CHECK(m);
  }
}

TEST_CASE("the name message says why", "[policy][manifest]") {
  auto upper = parse_manifest(with("/name", "Web-Tools"), "manifest.json");
  REQUIRE_FALSE(upper);
  CHECK_THAT(upper.err().message, Catch::Contains("lowercase"));
  auto dots = parse_manifest(with("/name", "@scope/../x"), "manifest.json");
  REQUIRE_FALSE(dots);
  CHECK_THAT(dots.err().message, Catch::Contains("'..'"));
}

TEST_CASE("split_command splits words like a shell without running one", "[policy][manifest]") {
  using argv_t = std::vector<std::string>;
  std::vector<std::pair<std::string, argv_t>> rows{
      {"python3 main.py", {"python3", "main.py"}},
      {"  node   index.js  ", {"node", "index.js"}},
      {"node\tindex.js", {"node", "index.js"}},
      {R"(node "my dir/x.js")", {"node", "my dir/x.js"}},
      {R"(node 'my dir/x.js')", {"node", "my dir/x.js"}},
      {R"(a\ b)", {"a b"}},
      {R"(./run --flag="a b" c)", {"./run", "--flag=a b", "c"}},
      {R"(x "" y)", {"x", "", "y"}},
      {R"(x '')", {"x", ""}},
      {R"(echo 'a|b;c&d>e<f$(g)`h`')", {"echo", "a|b;c&d>e<f$(g)`h`"}},
      {R"x(echo "a|b;c&d>e<f()")x", {"echo", "a|b;c&d>e<f()"}},
      {R"(echo "\$HOME \"q\" \\ \n")", {"echo", R"($HOME "q" \ \n)"}},
      {R"(echo \| \; \$x \`)", {"echo", "|", ";", "$x", "`"}},
      {R"(a"b"'c'd)", {"abcd"}},
      {"a \\\nb", {"a", "b"}},
      {"node *.js ~/x {a,b} #c", {"node", "*.js", "~/x", "{a,b}", "#c"}},
  };
  for (const auto& [command, expected] : rows) {
    CAPTURE(command);
    auto argv = split_command(command);
    REQUIRE(argv);
    CHECK(*argv == expected);
  }
}

TEST_CASE("split_command refuses shell syntax and malformed commands", "[policy][manifest]") {
  std::vector<std::pair<std::string, std::string>> rows{
      {"python3 x.py | tee", "'|' at column 14 is a pipe"},
      {"a; rm -rf /", "';'"},
      {"a && b", "'&'"},
      {"a & ", "'&'"},
      {"a > out", "'>'"},
      {"a < in", "'<'"},
      {"a $(id)", "'$'"},
      {"a $HOME", "'$'"},
      {"a `id`", "'`'"},
      {"(a)", "'('"},
      {"a\nb", "newline"},
      {"a\rb", "newline"},
      {R"(echo "$HOME")", "'$' at column 7"},
      {R"(echo "`id`")", "'`' at column 7"},
      {"echo 'open", "single quote at column 6 is never closed"},
      {R"(echo "open)", "double quote at column 6 is never closed"},
      {R"(echo "a\")", "never closed"},
      {"echo \\", "lone backslash"},
      {"", "the command is empty"},
      {"   \t ", "the command is empty"},
      {"'' x", "the program name is empty"},
      {std::string("a\0b", 3), "NUL"},
  };
  for (const auto& [command, needle] : rows) {
    CAPTURE(command);
    auto argv = split_command(command);
    REQUIRE_FALSE(argv);
    CHECK(argv.err().code == errc::invalid_value);
    CHECK_THAT(argv.err().message, Catch::Contains(needle));
  }
}

TEST_CASE("network.outbound accepts strings and objects and normalizes domains", "[policy][manifest]") {
  json outbound = json::array({"API.Example.com", {{"domain", "*.Example.org"}}, "[::1]", "127.0.0.1",
                               {{"domain", "api.example.com"}, {"purpose", "again"}}, "my_host.internal"});
  auto m = parse_manifest(with("/network/outbound", outbound), "manifest.json");
  REQUIRE(m);
  REQUIRE(m->network_domains);
  CHECK(*m->network_domains ==
        std::vector<std::string>{"api.example.com", "*.example.org", "::1", "127.0.0.1", "my_host.internal"});

  auto empty = parse_manifest(with("/network/outbound", json::array()), "manifest.json");
  REQUIRE(empty);
  REQUIRE(empty->network_domains);  // present but empty: allows no host at all
  CHECK(empty->network_domains->empty());

  auto absent = parse_manifest(with("/network", json::object()), "manifest.json");
  REQUIRE(absent);
  CHECK_FALSE(absent->network_domains);
}

TEST_CASE("network.outbound refuses what is not a host name", "[policy][manifest]") {
  for (const char* domain : {"https://api.example.com", "api.example.com/x", "api.example.com:443", "*",
                             "*.", "*example.com", "a b.com", "", "-a.com", "a..com", "b\xc3\xbc.de",
                             "a.com.", "[::1", "*.*.com"}) {
    CAPTURE(domain);
    auto m = parse_manifest(with("/network/outbound/0/domain", domain), "manifest.json");
    REQUIRE_FALSE(m);
    CHECK(m.err().code == errc::invalid_value);
    CHECK_THAT(m.err().message, Catch::StartsWith("manifest.json: network.outbound[0].domain: "));
  }
}

TEST_CASE("parse_manifest_text reports JSON syntax errors with line and column", "[policy][manifest]") {
  auto m = parse_manifest_text("{\n  \"name\": \"x\",\n  oops\n}\n", "ext/manifest.json");
  REQUIRE_FALSE(m);
  CHECK(m.err().code == errc::parse_error);
  CHECK_THAT(m.err().message, Catch::StartsWith("ext/manifest.json:3:3: invalid JSON: "));

  auto empty = parse_manifest_text("", "manifest.json");
  REQUIRE_FALSE(empty);
  CHECK(empty.err().code == errc::parse_error);
  CHECK_THAT(empty.err().message, Catch::StartsWith("manifest.json:1:1: invalid JSON: "));
}

TEST_CASE("parse_manifest_text accepts the example and refuses deep nesting", "[policy][manifest]") {
  auto m = parse_manifest_text(design_example().dump(2), "manifest.json");
  REQUIRE(m);
  CHECK(m->name == "web-tools");

  std::string deep = R"({"name":"x","deep":)" + std::string(100000, '[') + std::string(100000, ']') + "}";
  auto d = parse_manifest_text(deep, "manifest.json");
  REQUIRE_FALSE(d);
  CHECK(d.err().code == errc::parse_error);
  CHECK_THAT(d.err().message, Catch::Contains("nested deeper than 256 levels"));

  // Brackets inside strings do not count.
  json doc = design_example();
  doc["description"] = std::string(1000, '[');
  CHECK(parse_manifest_text(doc.dump(), "manifest.json"));
}
