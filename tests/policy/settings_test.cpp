// Tests for policy/settings.hpp: parsing one config layer (errors, warnings) and the
// global → project → CLI merge where an untrusted project may only tighten.
#include "policy/settings.hpp"

#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace dhara::policy;
using json = nlohmann::json;

namespace {

const merge_context ctx{"/home/u", "/home/u/.dhara", "/home/u/proj"};

constexpr std::string_view trust_hint =
    "; to trust this project add \"/home/u/proj\" to security.trustedProjects in /home/u/.dhara/config.json)";

settings_layer layer_of(std::string_view text, layer_kind kind) {
  auto parsed = parse_settings(text, "test.json", kind);
  INFO(text);
  if (!parsed) FAIL(parsed.err().message);
  return parsed->layer;
}

// The whole effective settings as JSON, so "nothing changed" is one comparison.
json dump(const settings& s) {
  return json{{"level", std::string(to_string(s.level))},
              {"trustedAuthors", s.trusted_authors},
              {"allowedPaths", s.allowed_paths},
              {"deniedPaths", s.denied_paths},
              {"auditIgnorePatterns", s.audit_ignore_patterns},
              {"trustedProjects", s.trusted_projects},
              {"durability", std::string(to_string(s.audit_durability))},
              {"maxBytes", s.audit_max_bytes},
              {"keep", s.audit_keep},
              {"requireOsSandbox", s.require_os_sandbox},
              {"extensionDirs", s.extension_dirs},
              {"callTimeoutMs", s.call_timeout_ms},
              {"cancelGraceMs", s.cancel_grace_ms},
              {"killGraceMs", s.kill_grace_ms},
              {"maxRestarts", s.max_restarts},
              {"restartWindowMs", s.restart_window_ms},
              {"maxLineBytes", s.max_line_bytes}};
}

std::string joined(const std::vector<std::string>& warnings) {
  std::string out;
  for (const auto& w : warnings) out += w + "\n";
  return out;
}

// A global file that sets every list, so tightening and loosening are both observable.
constexpr std::string_view rich_global = R"({
  "security": {
    "trustedAuthors": ["zosmaai", "acme"],
    "allowedPaths": ["~/proj", "/tmp/work"],
    "deniedPaths": ["/etc/passwd"],
    "auditIgnorePatterns": ["**/node_modules/**", "**/.cache/**"]
  },
  "extensionDirs": ["~/.dhara/extensions", "/opt/dhara-ext"]
})";

}  // namespace

// ---- parse -----------------------------------------------------------------------------

TEST_CASE("the DESIGN 3.1 example parses into every field", "[policy][settings]") {
  constexpr std::string_view example = R"({ "security": {
    "level": "standard",
    "trustedAuthors": ["zosmaai"],
    "allowedPaths": ["/home/user/projects/my-app", "/tmp/dhara-workspace"],
    "deniedPaths": ["/etc/shadow", "~/.ssh/"],
    "auditIgnorePatterns": ["**/node_modules/**", "**/.cache/**"],
    "trustedProjects": ["/home/user/projects/my-app"],
    "audit": { "durability": "write", "maxBytes": 104857600, "keep": 5 },
    "requireOsSandbox": true },
  "extensionDirs": ["~/.dhara/extensions"],
  "extensions": { "callTimeoutMs": 120000, "cancelGraceMs": 5000, "killGraceMs": 2000,
                  "maxRestarts": 3, "restartWindowMs": 60000, "maxLineBytes": 8388608 } })";
  auto parsed = parse_settings(example, "config.json", layer_kind::global);
  REQUIRE(parsed);
  CHECK(parsed->warnings.empty());
  const settings_layer& l = parsed->layer;
  CHECK(l.level == security_level::standard);
  CHECK(l.trusted_authors == std::vector<std::string>{"zosmaai"});
  CHECK(l.allowed_paths == std::vector<std::string>{"/home/user/projects/my-app", "/tmp/dhara-workspace"});
  CHECK(l.denied_paths == std::vector<std::string>{"/etc/shadow", "~/.ssh/"});
  CHECK(l.audit_ignore_patterns == std::vector<std::string>{"**/node_modules/**", "**/.cache/**"});
  CHECK(l.trusted_projects == std::vector<std::string>{"/home/user/projects/my-app"});
  CHECK(l.audit_durability == audit_durability::write);
  CHECK(l.audit_max_bytes == 104857600u);
  CHECK(l.audit_keep == 5u);
  CHECK(l.require_os_sandbox == true);
  CHECK(l.extension_dirs == std::vector<std::string>{"~/.dhara/extensions"});
  CHECK(l.call_timeout_ms == 120000u);
  CHECK(l.cancel_grace_ms == 5000u);
  CHECK(l.kill_grace_ms == 2000u);
  CHECK(l.max_restarts == 3u);
  CHECK(l.restart_window_ms == 60000u);
  CHECK(l.max_line_bytes == 8388608u);
}

TEST_CASE("an empty or whitespace-only file means {}", "[policy][settings]") {
  for (std::string_view text : {"", "   ", "\n\t\r\n ", "{}", " { } \n"}) {
    INFO("text: '" << text << "'");
    auto parsed = parse_settings(text, "config.json", layer_kind::global);
    REQUIRE(parsed);
    CHECK(parsed->warnings.empty());
    CHECK_FALSE(parsed->layer.level);
    CHECK_FALSE(parsed->layer.allowed_paths);
    CHECK_FALSE(parsed->layer.denied_paths);
    CHECK_FALSE(parsed->layer.require_os_sandbox);
  }
}

TEST_CASE("invalid JSON is a parse error with file, line and column", "[policy][settings]") {
  struct row {
    std::string_view text;
    std::string_view prefix;  // FILE:LINE:COLUMN:
  };
  const row rows[] = {
      // The position is where the parser gave up: the offending byte, or a bad token's end.
      {R"({"a": 1,,})", "cfg.json:1:9: "},                                    // the second comma
      {"{\n  \"security\": {\n    \"level\": tru\n  }\n}", "cfg.json:3:17: "},  // the byte after `tru`
      {"{\n  \"security\": {}\n  \"extensions\": {}\n}", "cfg.json:3:14: "},   // the key after a missing comma
      {"{", "cfg.json:1:2: "},                                                 // end of input
      {"{\n", "cfg.json:2:1: "},
      {R"({"a":1} x)", "cfg.json:1:9: "},                                      // trailing garbage
      {"// comment\n{}", "cfg.json:1:1: "},                                    // comments are not JSON
      {"{\"a\": \"x\ty\"}", "cfg.json:1:9: "},                                // raw tab in a string
      {"{\n\"\u00e9\u00e9\": 1e400}", "cfg.json:2:13: "},                         // overflow; columns count bytes
  };
  for (const row& r : rows) {
    INFO(r.text);
    auto parsed = parse_settings(r.text, "cfg.json", layer_kind::global);
    REQUIRE_FALSE(parsed);
    CHECK(parsed.err().code == errc::parse_error);
    CHECK_THAT(parsed.err().message, Catch::StartsWith(std::string(r.prefix)));
    CHECK_THAT(parsed.err().message, !Catch::Contains("json.exception"));
  }
}

TEST_CASE("a top level that is not an object is an error", "[policy][settings]") {
  for (std::string_view text : {"[]", "\"security\"", "42", "null", "true"}) {
    INFO(text);
    auto parsed = parse_settings(text, "cfg.json", layer_kind::global);
    REQUIRE_FALSE(parsed);
    CHECK(parsed.err().code == errc::invalid_type);
    CHECK_THAT(parsed.err().message, Catch::StartsWith("cfg.json: the top level must be a JSON object"));
  }
}

TEST_CASE("a wrong type or value names the file, the dotted key and what is expected", "[policy][settings]") {
  struct row {
    std::string_view text;
    errc code;
    std::string_view start;     // "FILE: KEY: expected"
    std::string_view expected;  // a piece of what is expected
  };
  const row rows[] = {
      {R"({"security": []})", errc::invalid_type, "cfg.json: security: expected", "an object"},
      {R"({"security": {"level": 3}})", errc::invalid_type, "cfg.json: security.level: expected", "paranoid"},
      {R"({"security": {"level": "strict"}})", errc::invalid_value, "cfg.json: security.level: expected",
       "found string \"strict\""},
      {R"({"security": {"level": "Paranoid"}})", errc::invalid_value, "cfg.json: security.level: expected", "yolo"},
      {R"({"security": {"trustedAuthors": "zosmaai"}})", errc::invalid_type,
       "cfg.json: security.trustedAuthors: expected", "an array of names"},
      {R"({"security": {"trustedAuthors": [""]}})", errc::invalid_value,
       "cfg.json: security.trustedAuthors[0]: expected", "a non-empty name"},
      {R"({"security": {"deniedPaths": ["/a", "/b", 7]}})", errc::invalid_type,
       "cfg.json: security.deniedPaths[2]: expected", "found number 7"},
      {R"({"security": {"deniedPaths": "/etc/shadow"}})", errc::invalid_type,
       "cfg.json: security.deniedPaths: expected", "an array of paths"},
      {R"({"security": {"allowedPaths": ["/a", ""]}})", errc::invalid_value,
       "cfg.json: security.allowedPaths[1]: expected", "a non-empty path"},
      {R"({"security": {"deniedPaths": ["/etc/\u0000shadow"]}})", errc::invalid_value,
       "cfg.json: security.deniedPaths[0]: expected", "without NUL bytes"},
      {R"({"security": {"deniedPaths": ["~bob/.ssh"]}})", errc::invalid_value,
       "cfg.json: security.deniedPaths[0]: expected", "'~user' form is not supported"},
      {R"({"security": {"trustedProjects": [null]}})", errc::invalid_type,
       "cfg.json: security.trustedProjects[0]: expected", "found null"},
      {R"({"security": {"auditIgnorePatterns": [["**"]]}})", errc::invalid_type,
       "cfg.json: security.auditIgnorePatterns[0]: expected", "found array"},
      {R"({"security": {"audit": "fsync"}})", errc::invalid_type, "cfg.json: security.audit: expected", "an object"},
      {R"({"security": {"audit": {"durability": "sometimes"}}})", errc::invalid_value,
       "cfg.json: security.audit.durability: expected", "\"none\", \"write\", \"fsync\""},
      {R"({"security": {"audit": {"durability": true}}})", errc::invalid_type,
       "cfg.json: security.audit.durability: expected", "\"fsync\""},
      {R"({"security": {"audit": {"maxBytes": "100MB"}}})", errc::invalid_type,
       "cfg.json: security.audit.maxBytes: expected", "a whole number"},
      {R"({"security": {"audit": {"maxBytes": 100}}})", errc::invalid_value,
       "cfg.json: security.audit.maxBytes: expected", "from 4096 to"},
      {R"({"security": {"audit": {"keep": 0}}})", errc::invalid_value, "cfg.json: security.audit.keep: expected",
       "from 1 to 1000"},
      {R"({"security": {"requireOsSandbox": "yes"}})", errc::invalid_type,
       "cfg.json: security.requireOsSandbox: expected", "true or false"},
      {R"({"extensionDirs": "~/ext"})", errc::invalid_type, "cfg.json: extensionDirs: expected", "an array"},
      {R"({"extensions": 5})", errc::invalid_type, "cfg.json: extensions: expected", "an object"},
      {R"({"extensions": {"callTimeoutMs": -5}})", errc::invalid_value,
       "cfg.json: extensions.callTimeoutMs: expected", "found number -5"},
      {R"({"extensions": {"callTimeoutMs": 0}})", errc::invalid_value,
       "cfg.json: extensions.callTimeoutMs: expected", "from 1 to 86400000"},
      {R"({"extensions": {"callTimeoutMs": 1.5}})", errc::invalid_value,
       "cfg.json: extensions.callTimeoutMs: expected", "a whole number"},
      {R"({"extensions": {"callTimeoutMs": "120s"}})", errc::invalid_type,
       "cfg.json: extensions.callTimeoutMs: expected", "a whole number"},
      {R"({"extensions": {"cancelGraceMs": 600001}})", errc::invalid_value,
       "cfg.json: extensions.cancelGraceMs: expected", "from 0 to 600000"},
      {R"({"extensions": {"killGraceMs": -1}})", errc::invalid_value, "cfg.json: extensions.killGraceMs: expected",
       "from 0"},
      {R"({"extensions": {"maxRestarts": 1e9}})", errc::invalid_value, "cfg.json: extensions.maxRestarts: expected",
       "from 0 to 1000"},
      {R"({"extensions": {"restartWindowMs": 0}})", errc::invalid_value,
       "cfg.json: extensions.restartWindowMs: expected", "from 1"},
      {R"({"extensions": {"maxLineBytes": 512}})", errc::invalid_value,
       "cfg.json: extensions.maxLineBytes: expected", "from 1024 to 1073741824"},
      {R"({"extensions": {"maxLineBytes": 1e400}})", errc::parse_error, "cfg.json:1:37: ", "number overflow"},
      {R"({"extensions": {"maxLineBytes": 18446744073709551616}})", errc::invalid_value,
       "cfg.json: extensions.maxLineBytes: expected", "from 1024"},
  };
  for (const row& r : rows) {
    INFO(r.text);
    auto parsed = parse_settings(r.text, "cfg.json", layer_kind::project);
    REQUIRE_FALSE(parsed);
    CHECK(to_string(parsed.err().code) == to_string(r.code));
    CHECK_THAT(parsed.err().message, Catch::StartsWith(std::string(r.start)));
    CHECK_THAT(parsed.err().message, Catch::Contains(std::string(r.expected)));
  }
}

TEST_CASE("whole numbers may be written as 5000.0 or 1e6, and range ends are accepted", "[policy][settings]") {
  auto l = layer_of(R"({"security": {"audit": {"maxBytes": 1e6, "keep": 1}},
                        "extensions": {"callTimeoutMs": 5000.0, "cancelGraceMs": 0, "killGraceMs": 600000,
                                       "maxRestarts": 0, "restartWindowMs": 86400000, "maxLineBytes": 1024}})",
                    layer_kind::global);
  CHECK(l.audit_max_bytes == 1000000u);
  CHECK(l.audit_keep == 1u);
  CHECK(l.call_timeout_ms == 5000u);
  CHECK(l.cancel_grace_ms == 0u);
  CHECK(l.kill_grace_ms == 600000u);
  CHECK(l.max_restarts == 0u);
  CHECK(l.restart_window_ms == 86400000u);
  CHECK(l.max_line_bytes == 1024u);
}

TEST_CASE("an unknown key is a warning naming the dotted key and the closest known key", "[policy][settings]") {
  struct row {
    std::string_view text;
    std::string_view key;
    std::string_view suggestion;  // "" = no suggestion expected
  };
  const row rows[] = {
      {R"({"securty": {}})", "\"securty\"", "security"},
      {R"({"security": {"levle": "paranoid"}})", "\"security.levle\"", "security.level"},
      {R"({"security": {"deniedPath": []}})", "\"security.deniedPath\"", "security.deniedPaths"},
      {R"({"security": {"audit": {"durabilty": "fsync"}}})", "\"security.audit.durabilty\"",
       "security.audit.durability"},
      {R"({"extensions": {"callTimeout": 5}})", "\"extensions.callTimeout\"", "extensions.callTimeoutMs"},
      {R"({"level": "paranoid"})", "\"level\"", "security.level"},  // written at the wrong level
      {R"({"security": {"maxLineBytes": 2048}})", "\"security.maxLineBytes\"", "extensions.maxLineBytes"},
      {R"({"zzzzqqqq": 1})", "\"zzzzqqqq\"", ""},
  };
  for (const row& r : rows) {
    INFO(r.text);
    auto parsed = parse_settings(r.text, "cfg.json", layer_kind::global);
    REQUIRE(parsed);
    REQUIRE(parsed->warnings.size() == 1);
    const std::string& w = parsed->warnings[0];
    CHECK_THAT(w, Catch::StartsWith("cfg.json: unknown key " + std::string(r.key) + " is ignored"));
    if (r.suggestion.empty())
      CHECK_THAT(w, !Catch::Contains("did you mean"));
    else
      CHECK_THAT(w, Catch::EndsWith("(did you mean '" + std::string(r.suggestion) + "'?)"));
  }
  // The misspelt key is really ignored, not applied.
  CHECK_FALSE(layer_of(R"({"security": {"levle": "paranoid"}})", layer_kind::global).level);
}

TEST_CASE("an unknown key holding control characters cannot reach the terminal raw", "[policy][settings]") {
  auto parsed = parse_settings(R"({"\u001b[31mred": 1})", "cfg.json", layer_kind::global);
  REQUIRE(parsed);
  REQUIRE(parsed->warnings.size() == 1);
  CHECK(parsed->warnings[0].find('\x1b') == std::string::npos);
  CHECK_THAT(parsed->warnings[0], Catch::Contains("\\u001b[31mred"));
}

TEST_CASE("a relative path in the global file or on the command line is refused", "[policy][settings]") {
  const std::string_view keys[] = {"security.allowedPaths", "security.deniedPaths", "security.trustedProjects",
                                   "extensionDirs"};
  for (layer_kind kind : {layer_kind::global, layer_kind::cli}) {
    for (std::string_view dotted : keys) {
      for (std::string_view rel : {"src", "./secrets", "../x", "*.pem"}) {
        json doc;
        json list = json::array({"/ok", std::string(rel)});
        if (dotted.starts_with("security."))
          doc["security"][std::string(dotted.substr(9))] = list;
        else
          doc[std::string(dotted)] = list;
        INFO(doc.dump());
        auto parsed = parse_settings(doc.dump(), "cfg.json", kind);
        REQUIRE_FALSE(parsed);
        CHECK(parsed.err().code == errc::invalid_value);
        CHECK_THAT(parsed.err().message, Catch::StartsWith("cfg.json: " + std::string(dotted) + "[1]: expected"));
        CHECK_THAT(parsed.err().message, Catch::Contains("absolute path or one starting with '~'"));
      }
    }
  }
}

TEST_CASE("absolute, ~ and glob paths are accepted in the global file, relative ones in a project file",
          "[policy][settings]") {
  auto g = layer_of(R"({"security": {"deniedPaths": ["/etc/shadow", "~", "~/.ssh/", "/home/*/.aws/**"]}})",
                    layer_kind::global);
  CHECK(g.denied_paths == std::vector<std::string>{"/etc/shadow", "~", "~/.ssh/", "/home/*/.aws/**"});
  auto p = layer_of(R"({"security": {"deniedPaths": ["secrets", "./.env", "build/**"]}})", layer_kind::project);
  CHECK(p.denied_paths == std::vector<std::string>{"secrets", "./.env", "build/**"});
  // Patterns are not paths: a relative pattern matches anywhere, even in the global file.
  auto a = layer_of(R"({"security": {"auditIgnorePatterns": ["**/node_modules/**", "https://x.test/**"]}})",
                    layer_kind::global);
  CHECK(a.audit_ignore_patterns == std::vector<std::string>{"**/node_modules/**", "https://x.test/**"});
}

TEST_CASE("a glob in trustedProjects warns that projects are matched exactly", "[policy][settings]") {
  auto parsed = parse_settings(R"({"security": {"trustedProjects": ["/home/u/*"]}})", "cfg.json", layer_kind::global);
  REQUIRE(parsed);
  REQUIRE(parsed->warnings.size() == 1);
  CHECK_THAT(parsed->warnings[0], Catch::Contains("security.trustedProjects[0]"));
  CHECK_THAT(parsed->warnings[0], Catch::Contains("matched exactly"));
}

TEST_CASE("parse_settings_json reads an already parsed value the same way", "[policy][settings]") {
  json doc = {{"security", {{"level", "paranoid"}, {"deniedPaths", {"~/.aws"}}}}};
  auto parsed = parse_settings_json(doc, "--set", layer_kind::cli);
  REQUIRE(parsed);
  CHECK(parsed->layer.level == security_level::paranoid);
  CHECK(parsed->layer.denied_paths == std::vector<std::string>{"~/.aws"});
  auto bad = parse_settings_json(json{{"security", {{"level", "strict"}}}}, "--set", layer_kind::cli);
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.err().message, Catch::StartsWith("--set: security.level: expected"));
}

TEST_CASE("audit durability names round-trip", "[policy][settings]") {
  CHECK(to_string(audit_durability::none) == "none");
  CHECK(to_string(audit_durability::write) == "write");
  CHECK(to_string(audit_durability::fsync) == "fsync");
}

// ---- merge -----------------------------------------------------------------------------

TEST_CASE("merging nothing gives the documented defaults", "[policy][settings]") {
  auto m = merge_settings(settings_layer{}, nullptr, nullptr, ctx);
  CHECK(m.warnings.empty());
  const settings& e = m.effective;
  CHECK(e.level == security_level::standard);
  CHECK(e.allowed_paths == std::vector<std::string>{"/home/u/proj"});
  CHECK(e.extension_dirs == std::vector<std::string>{"/home/u/.dhara/extensions"});
  CHECK(e.denied_paths.empty());
  CHECK(e.trusted_authors.empty());
  CHECK(e.audit_durability == audit_durability::write);
  CHECK(e.audit_max_bytes == 104857600u);
  CHECK(e.audit_keep == 5u);
  CHECK(e.require_os_sandbox);
  CHECK(e.call_timeout_ms == 120000u);
  CHECK(e.cancel_grace_ms == 5000u);
  CHECK(e.kill_grace_ms == 2000u);
  CHECK(e.max_restarts == 3u);
  CHECK(e.restart_window_ms == 60000u);
  CHECK(e.max_line_bytes == 8388608u);
  CHECK_FALSE(e.project_trusted);
}

TEST_CASE("~ is expanded with HOME and every path is normalized", "[policy][settings]") {
  auto g = layer_of(R"({"security": {
      "allowedPaths": ["~/proj/", "/tmp//work/./a/.."],
      "deniedPaths": ["~/.ssh/", "~", "/home/u/proj/.git/../secrets/"],
      "trustedProjects": ["~/other"]},
    "extensionDirs": ["~/.dhara/extensions/"]})",
                    layer_kind::global);
  auto m = merge_settings(g, nullptr, nullptr, ctx);
  CHECK(m.warnings.empty());
  CHECK(m.effective.allowed_paths == std::vector<std::string>{"/home/u/proj", "/tmp/work"});
  CHECK(m.effective.denied_paths == std::vector<std::string>{"/home/u/.ssh", "/home/u", "/home/u/proj/secrets"});
  CHECK(m.effective.trusted_projects == std::vector<std::string>{"/home/u/other"});
  CHECK(m.effective.extension_dirs == std::vector<std::string>{"/home/u/.dhara/extensions"});
}

TEST_CASE("every extension folder stays protected when a project narrows extensionDirs", "[policy][settings]") {
  auto g = layer_of(R"({"extensionDirs": ["~/.dhara/extensions", "/opt/dhara-ext"]})", layer_kind::global);
  auto p = layer_of(R"({"extensionDirs": ["/opt/dhara-ext"]})", layer_kind::project);
  auto m = merge_settings(g, &p, nullptr, ctx);
  CHECK(m.effective.extension_dirs == std::vector<std::string>{"/opt/dhara-ext"});  // narrowed: loads less
  // ...but the extensions of the folder it dropped still run in other sessions: still denied.
  // The project's own .dhara (its config and extensions) is protected too, trusted or not.
  CHECK(m.effective.protected_extension_dirs ==
        std::vector<std::string>{"/home/u/.dhara/extensions", "/opt/dhara-ext", "/home/u/proj/.dhara"});
  CHECK(merge_settings(settings_layer{}, nullptr, nullptr, ctx).effective.protected_extension_dirs ==
        std::vector<std::string>{"/home/u/.dhara/extensions", "/home/u/proj/.dhara"});
}

TEST_CASE("project paths are relative to the project root", "[policy][settings]") {
  auto p = layer_of(R"({"security": {"deniedPaths": ["secrets", "./build/../.env", "~/.aws", "/var/db", "logs/**"],
                                     "allowedPaths": ["src", "./docs/"]}})",
                    layer_kind::project);
  auto m = merge_settings(settings_layer{}, &p, nullptr, ctx);
  CHECK(m.warnings.empty());
  CHECK(m.effective.denied_paths == std::vector<std::string>{"/home/u/proj/secrets", "/home/u/proj/.env",
                                                             "/home/u/.aws", "/var/db", "/home/u/proj/logs/**"});
  CHECK(m.effective.allowed_paths == std::vector<std::string>{"/home/u/proj/src", "/home/u/proj/docs"});
}

TEST_CASE("audit ignore patterns keep their meaning: relative ones match anywhere, ~ is expanded",
          "[policy][settings]") {
  auto g = layer_of(R"({"security": {"auditIgnorePatterns": ["**/node_modules/**", "~/.cache/**", "*.log"]}})",
                    layer_kind::global);
  auto m = merge_settings(g, nullptr, nullptr, ctx);
  CHECK(m.effective.audit_ignore_patterns ==
        std::vector<std::string>{"**/node_modules/**", "/home/u/.cache/**", "*.log"});
}

TEST_CASE("deniedPaths accumulate across every layer and are never replaced", "[policy][settings]") {
  auto g = layer_of(R"({"security": {"deniedPaths": ["/etc/passwd", "~/.ssh"]}})", layer_kind::global);
  auto p = layer_of(R"({"security": {"deniedPaths": ["secrets", "/etc/passwd"]}})", layer_kind::project);
  auto c = layer_of(R"({"security": {"deniedPaths": ["/var/x"]}})", layer_kind::cli);
  const std::vector<std::string> all{"/etc/passwd", "/home/u/.ssh", "/home/u/proj/secrets", "/var/x"};
  CHECK(merge_settings(g, &p, &c, ctx).effective.denied_paths == all);

  // A trusted project adds too; it cannot take a global denial away.
  auto gt = layer_of(R"({"security": {"deniedPaths": ["/etc/passwd", "~/.ssh"], "trustedProjects": ["/home/u/proj"]}})",
                     layer_kind::global);
  auto pt = layer_of(R"({"security": {"deniedPaths": []}})", layer_kind::project);
  auto m = merge_settings(gt, &pt, nullptr, ctx);
  CHECK(m.effective.project_trusted);
  CHECK(m.effective.denied_paths == std::vector<std::string>{"/etc/passwd", "/home/u/.ssh"});
}

TEST_CASE("long lists merge each entry once in the order first given", "[policy][settings]") {
  // Tens of thousands of deniedPaths merged pair by pair took minutes (a review): the merge
  // compares through hash sets now. What it gives must not change.
  std::string global = R"({"security": {"trustedAuthors": [)", project = R"({"security": {"deniedPaths": [)";
  std::string global_denied;
  for (int i = 0; i < 20000; ++i) {
    global_denied += (i ? ",\"/g/" : "\"/g/") + std::to_string(i % 15000) + "\"";  // 5 000 named twice
    project += (i ? ",\"/g/" : "\"/g/") + std::to_string(10000 + i) + "\"";      // 5 000 the global file names
    global += (i ? ",\"a" : "\"a") + std::to_string(i % 7) + "\"";
  }
  global += R"(], "deniedPaths": [)" + global_denied + "]}}";
  project += "]}}";
  auto e = merge_settings(layer_of(global, layer_kind::global), nullptr, nullptr, ctx).effective;
  CHECK(e.trusted_authors == std::vector<std::string>{"a0", "a1", "a2", "a3", "a4", "a5", "a6"});
  auto g = layer_of(global, layer_kind::global);
  auto pr = layer_of(project, layer_kind::project);
  e = merge_settings(g, &pr, nullptr, ctx).effective;
  REQUIRE(e.denied_paths.size() == 30000);
  REQUIRE(e.denied_paths_named.size() == 30000);
  for (int i : {0, 9999, 14999}) CHECK(e.denied_paths[i] == "/g/" + std::to_string(i));
  CHECK(e.denied_paths_named[14999] == "/g/14999 (deniedPaths in ~/.dhara/config.json)");
  CHECK(e.denied_paths[15000] == "/g/15000");
  CHECK(e.denied_paths_named[15000] == "/g/15000 (deniedPaths in ~/proj/.dhara/config.json)");
  CHECK(e.denied_paths.back() == "/g/29999");
}

TEST_CASE("each denied path is named in reasons as its layer wrote it, and where", "[policy][settings]") {
  auto g = layer_of(R"({"security": {"deniedPaths": ["/etc/passwd", "~/.ssh/"]}})", layer_kind::global);
  g.denied_paths->push_back("~bob/x");  // as a file edited after parsing could not hold it: kept, and named
  auto p = layer_of(R"({"security": {"deniedPaths": ["./secrets/", "/etc/passwd", "~/.ssh", "*.pem"]}})",
                    layer_kind::project);
  auto c = layer_of(R"({"security": {"deniedPaths": ["/var/x"]}})", layer_kind::cli);
  auto e = merge_settings(g, &p, &c, ctx).effective;
  // The first layer to name a path names it; a bad entry is kept as written, and named too.
  CHECK(e.denied_paths == std::vector<std::string>{"/etc/passwd", "/home/u/.ssh", "~bob/x", "/home/u/proj/secrets",
                                                   "/home/u/proj/*.pem", "/var/x"});
  CHECK(e.denied_paths_named == std::vector<std::string>{
                                    "/etc/passwd (deniedPaths in ~/.dhara/config.json)",
                                    "~/.ssh/ (deniedPaths in ~/.dhara/config.json)",
                                    "~bob/x (deniedPaths in ~/.dhara/config.json)",
                                    "./secrets/ (deniedPaths in ~/proj/.dhara/config.json)",
                                    "*.pem (deniedPaths in ~/proj/.dhara/config.json)",
                                    "/var/x (deniedPaths on the command line)",
                                });
  // A file outside the home is named whole; a home of "/" shortens nothing.
  const merge_context elsewhere{"/home/u", "/srv/dhara", "/work/app"};
  CHECK(merge_settings(g, &p, nullptr, elsewhere).effective.denied_paths_named[1] ==
        "~/.ssh/ (deniedPaths in /srv/dhara/config.json)");
  CHECK(merge_settings(p, nullptr, nullptr, {"/", "/d", "/w"}).effective.denied_paths_named.back() ==
        "*.pem (deniedPaths in /d/config.json)");
}

TEST_CASE("every loosening from an untrusted project is ignored with a warning saying how to trust it",
          "[policy][settings]") {
  struct row {
    std::string_view project;
    std::string_view key;  // named in the warning
  };
  const row rows[] = {
      {R"({"security": {"level": "yolo"}})", "security.level \"yolo\""},
      {R"({"security": {"level": "trusted"}})", "security.level \"trusted\""},
      {R"({"security": {"trustedAuthors": ["evil"]}})", "security.trustedAuthors [\"evil\"]"},
      {R"({"security": {"trustedAuthors": ["zosmaai", "evil"]}})", "security.trustedAuthors"},
      {R"({"security": {"allowedPaths": ["/etc"]}})", "security.allowedPaths entry \"/etc\""},
      {R"({"security": {"allowedPaths": ["../other"]}})", "security.allowedPaths entry \"../other\""},
      {R"({"security": {"allowedPaths": ["~"]}})", "security.allowedPaths entry \"~\""},
      {R"({"security": {"allowedPaths": ["/**"]}})", "security.allowedPaths entry \"/**\""},
      {R"({"security": {"allowedPaths": [".."]}})", "security.allowedPaths entry \"..\""},
      {R"({"security": {"auditIgnorePatterns": ["**"]}})", "security.auditIgnorePatterns [\"**\"]"},
      {R"({"extensionDirs": ["exts"]})", "extensionDirs [\"exts\"]"},
      {R"({"security": {"audit": {"durability": "none"}}})", "security.audit.durability \"none\""},
      {R"({"security": {"audit": {"maxBytes": 4096}}})", "security.audit.maxBytes 4096"},
      {R"({"security": {"audit": {"keep": 1000}}})", "security.audit.keep 1000"},
      {R"({"extensions": {"callTimeoutMs": 86400000}})", "extensions.callTimeoutMs 86400000"},
      {R"({"extensions": {"cancelGraceMs": 600000}})", "extensions.cancelGraceMs 600000"},
      {R"({"extensions": {"killGraceMs": 2001}})", "extensions.killGraceMs 2001"},
      {R"({"extensions": {"maxRestarts": 4}})", "extensions.maxRestarts 4"},
      {R"({"extensions": {"maxLineBytes": 8388609}})", "extensions.maxLineBytes 8388609"},
      {R"({"extensions": {"restartWindowMs": 1}})", "extensions.restartWindowMs 1"},
  };
  auto g = layer_of(rich_global, layer_kind::global);
  const json baseline = dump(merge_settings(g, nullptr, nullptr, ctx).effective);
  for (const row& r : rows) {
    INFO(r.project);
    auto p = layer_of(r.project, layer_kind::project);
    auto m = merge_settings(g, &p, nullptr, ctx);
    CHECK_FALSE(m.effective.project_trusted);
    CHECK(dump(m.effective) == baseline);
    REQUIRE_FALSE(m.warnings.empty());
    INFO(joined(m.warnings));
    const std::string& w = m.warnings[0];
    CHECK_THAT(w, Catch::StartsWith("project config /home/u/proj/.dhara/config.json: ignored " + std::string(r.key)));
    CHECK_THAT(w, Catch::EndsWith(std::string(trust_hint)));
  }
}

TEST_CASE("the level warning reads as one exact sentence", "[policy][settings]") {
  auto p = layer_of(R"({"security": {"level": "yolo"}})", layer_kind::project);
  auto m = merge_settings(settings_layer{}, &p, nullptr, ctx);
  REQUIRE(m.warnings.size() == 1);
  CHECK(m.warnings[0] ==
        "project config /home/u/proj/.dhara/config.json: ignored security.level \"yolo\" (a project file may only "
        "tighten security, toward paranoid; the level is \"standard\"; to trust this project add \"/home/u/proj\" "
        "to security.trustedProjects in /home/u/.dhara/config.json)");
  CHECK(m.effective.level == security_level::standard);
}

TEST_CASE("every tightening from an untrusted project is accepted without a warning", "[policy][settings]") {
  struct row {
    std::string_view project;
    std::string_view field;  // key in dump()
    json expected;
  };
  const row rows[] = {
      {R"({"security": {"level": "paranoid"}})", "level", "paranoid"},
      {R"({"security": {"level": "standard"}})", "level", "standard"},
      {R"({"security": {"deniedPaths": ["secrets"]}})", "deniedPaths", {"/etc/passwd", "/home/u/proj/secrets"}},
      {R"({"security": {"allowedPaths": ["src"]}})", "allowedPaths", {"/home/u/proj/src"}},
      {R"({"security": {"allowedPaths": ["/home/u/proj/src", "lib/**"]}})", "allowedPaths",
       {"/home/u/proj/src", "/home/u/proj/lib/**"}},
      {R"({"security": {"allowedPaths": ["."]}})", "allowedPaths", {"/home/u/proj"}},
      {R"({"security": {"allowedPaths": []}})", "allowedPaths", json::array()},
      {R"({"security": {"trustedAuthors": ["acme"]}})", "trustedAuthors", {"acme"}},
      {R"({"security": {"trustedAuthors": []}})", "trustedAuthors", json::array()},
      {R"({"security": {"auditIgnorePatterns": ["**/.cache/**"]}})", "auditIgnorePatterns", {"**/.cache/**"}},
      {R"({"security": {"auditIgnorePatterns": []}})", "auditIgnorePatterns", json::array()},
      {R"({"extensionDirs": ["/opt/dhara-ext"]})", "extensionDirs", {"/opt/dhara-ext"}},
      {R"({"security": {"audit": {"durability": "fsync"}}})", "durability", "fsync"},
      {R"({"security": {"audit": {"durability": "write"}}})", "durability", "write"},
      {R"({"security": {"requireOsSandbox": true}})", "requireOsSandbox", true},
      {R"({"extensions": {"callTimeoutMs": 1000}})", "callTimeoutMs", 1000},
      {R"({"extensions": {"cancelGraceMs": 0}})", "cancelGraceMs", 0},
      {R"({"extensions": {"killGraceMs": 2000}})", "killGraceMs", 2000},
      {R"({"extensions": {"maxRestarts": 0}})", "maxRestarts", 0},
      {R"({"extensions": {"maxLineBytes": 2048}})", "maxLineBytes", 2048},
      {R"({"extensions": {"restartWindowMs": 3600000}})", "restartWindowMs", 3600000},
  };
  auto g = layer_of(rich_global, layer_kind::global);
  const json baseline = dump(merge_settings(g, nullptr, nullptr, ctx).effective);
  for (const row& r : rows) {
    INFO(r.project);
    auto p = layer_of(r.project, layer_kind::project);
    auto m = merge_settings(g, &p, nullptr, ctx);
    INFO(joined(m.warnings));
    CHECK(m.warnings.empty());
    json expected = baseline;
    expected[std::string(r.field)] = r.expected;
    CHECK(dump(m.effective) == expected);
  }
}

TEST_CASE("an untrusted project's allowedPaths keep only entries inside the project and the global ones",
          "[policy][settings]") {
  SECTION("the accepted entries replace the list, the others are reported") {
    auto p = layer_of(R"({"security": {"allowedPaths": ["src", "/etc", "../sibling"]}})", layer_kind::project);
    auto m = merge_settings(settings_layer{}, &p, nullptr, ctx);
    CHECK(m.effective.allowed_paths == std::vector<std::string>{"/home/u/proj/src"});
    REQUIRE(m.warnings.size() == 2);
    CHECK_THAT(m.warnings[0], Catch::Contains("\"/etc\"") && Catch::Contains("trustedProjects"));
    CHECK_THAT(m.warnings[1], Catch::Contains("\"../sibling\"") && Catch::Contains("trustedProjects"));
  }
  SECTION("an entry inside the project but outside the global allowed paths is refused") {
    auto g = layer_of(R"({"security": {"allowedPaths": ["/home/u/proj/src"]}})", layer_kind::global);
    auto p = layer_of(R"({"security": {"allowedPaths": ["docs"]}})", layer_kind::project);
    auto m = merge_settings(g, &p, nullptr, ctx);
    CHECK(m.effective.allowed_paths == std::vector<std::string>{"/home/u/proj/src"});
    REQUIRE(m.warnings.size() == 2);
    CHECK_THAT(m.warnings[1], Catch::Contains("the global allowed paths stay"));
  }
  SECTION("a global glob entry covers the project") {
    auto g = layer_of(R"({"security": {"allowedPaths": ["/home/*/proj"]}})", layer_kind::global);
    auto p = layer_of(R"({"security": {"allowedPaths": ["src"]}})", layer_kind::project);
    auto m = merge_settings(g, &p, nullptr, ctx);
    CHECK(m.warnings.empty());
    CHECK(m.effective.allowed_paths == std::vector<std::string>{"/home/u/proj/src"});
  }
  SECTION("a name that only shares a prefix with the project is outside it") {
    auto p = layer_of(R"({"security": {"allowedPaths": ["/home/u/project-evil", "/home/u/proj*"]}})",
                      layer_kind::project);
    auto m = merge_settings(settings_layer{}, &p, nullptr, ctx);
    CHECK(m.effective.allowed_paths == std::vector<std::string>{"/home/u/proj"});
    CHECK(m.warnings.size() == 3);
  }
}

TEST_CASE("a project named with glob characters is allowed by name: allowedPaths entries are patterns",
          "[policy][settings]") {
  // A path rule is a pattern; the project root is a name, so it is written escaped.
  const merge_context odd{"/home/u", "/home/u/.dhara", "/home/u/app[2]*"};
  auto m = merge_settings(settings_layer{}, nullptr, nullptr, odd);
  CHECK(m.effective.allowed_paths == std::vector<std::string>{"/home/u/app\\[2]\\*"});
  // Relative entries of its project file are anchored at the escaped root, and they narrow.
  auto p = layer_of(R"({"security": {"allowedPaths": ["src", "lib/*.ts", "/home/u/app2"],
                                     "deniedPaths": ["secret[s]"]}})",
                    layer_kind::project);
  auto narrowed = merge_settings(settings_layer{}, &p, nullptr, odd);
  CHECK(narrowed.effective.allowed_paths ==
        std::vector<std::string>{"/home/u/app\\[2]\\*/src", "/home/u/app\\[2]\\*/lib/*.ts"});
  CHECK(narrowed.effective.denied_paths == std::vector<std::string>{"/home/u/app\\[2]\\*/secret[s]"});
  REQUIRE(narrowed.warnings.size() == 1);  // the sibling the unescaped root would have matched
  CHECK_THAT(narrowed.warnings[0], Catch::Contains("\"/home/u/app2\"") && Catch::Contains("trustedProjects"));
  // The confinement bound stays the name.
  REQUIRE(narrowed.effective.allowed_confined_to);
  CHECK(narrowed.effective.allowed_confined_to->project_root == "/home/u/app[2]*");
  // So is the home, where a pattern says `~`.
  const merge_context odd_home{"/home/u[1]", "/home/u[1]/.dhara", "/srv/p"};
  auto g_home = layer_of(R"({"security": {"allowedPaths": ["~/work"], "deniedPaths": ["~/work/k*"],
                                          "auditIgnorePatterns": ["~/cache/**"], "trustedProjects": ["~/p"]}})",
                         layer_kind::global);
  auto homed = merge_settings(g_home, nullptr, nullptr, odd_home);
  CHECK(homed.effective.allowed_paths == std::vector<std::string>{"/home/u\\[1]/work"});
  CHECK(homed.effective.denied_paths == std::vector<std::string>{"/home/u\\[1]/work/k*"});
  CHECK(homed.effective.audit_ignore_patterns == std::vector<std::string>{"/home/u\\[1]/cache/**"});
  CHECK(homed.effective.trusted_projects == std::vector<std::string>{"/home/u[1]/p"});
  // A trusted entry that escapes a `/` is refused by the compile: it narrows nothing here either.
  const merge_context slashed{"/home/u", "/home/u/.dhara", "/r/x/y/proj"};
  auto p_src = layer_of(R"({"security": {"allowedPaths": ["src"]}})", layer_kind::project);
  for (const char* global : {R"({"security": {"allowedPaths": ["/r/x\\/y"]}})",
                             R"({"security": {"allowedPaths": ["/r/x\\/y/*"]}})"}) {
    INFO(global);
    auto g_slash = layer_of(global, layer_kind::global);
    auto not_narrowed = merge_settings(g_slash, &p_src, nullptr, slashed);
    CHECK(not_narrowed.effective.allowed_paths == merge_settings(g_slash, nullptr, nullptr, slashed).effective.allowed_paths);
    CHECK_THAT(joined(not_narrowed.warnings), Catch::Contains("security.allowedPaths entry \"src\""));
  }
  // A trusted entry is read as the compile reads it: `\.\.` spells `..`, normalized again.
  auto g_dots = layer_of(R"({"security": {"allowedPaths": ["/r/b/\\.\\./x"]}})", layer_kind::global);
  auto dots = merge_settings(g_dots, &p_src, nullptr, slashed);
  CHECK(dots.warnings.empty());
  CHECK(dots.effective.allowed_paths == std::vector<std::string>{"/r/x/y/proj/src"});
  // Trusted projects and extension folders are names, not patterns.
  auto g = layer_of(R"({"security": {"trustedProjects": ["/home/u/app[2]*"]}})", layer_kind::global);
  auto ext = layer_of(R"({"extensionDirs": ["exts"]})", layer_kind::project);
  auto trusted = merge_settings(g, &ext, nullptr, odd);
  CHECK(trusted.effective.extension_dirs == std::vector<std::string>{"/home/u/app[2]*/exts"});
}

TEST_CASE("requireOsSandbox false is honoured only from the global file and the command line",
          "[policy][settings]") {
  auto off_global = layer_of(R"({"security": {"requireOsSandbox": false}})", layer_kind::global);
  CHECK_FALSE(merge_settings(off_global, nullptr, nullptr, ctx).effective.require_os_sandbox);
  auto off_cli = layer_of(R"({"security": {"requireOsSandbox": false}})", layer_kind::cli);
  CHECK_FALSE(merge_settings(settings_layer{}, nullptr, &off_cli, ctx).effective.require_os_sandbox);

  auto off_project = layer_of(R"({"security": {"requireOsSandbox": false}})", layer_kind::project);
  for (bool trusted : {false, true}) {
    INFO("trusted project: " << trusted);
    auto g = layer_of(trusted ? R"({"security": {"trustedProjects": ["/home/u/proj"]}})" : "{}", layer_kind::global);
    auto m = merge_settings(g, &off_project, nullptr, ctx);
    CHECK(m.effective.project_trusted == trusted);
    CHECK(m.effective.require_os_sandbox);
    REQUIRE(m.warnings.size() == 1);
    CHECK_THAT(m.warnings[0], Catch::Contains("ignored security.requireOsSandbox false"));
    CHECK_THAT(m.warnings[0], Catch::Contains("/home/u/.dhara/config.json"));
  }
  // A project may switch it back on after the global file turned it off.
  auto on_project = layer_of(R"({"security": {"requireOsSandbox": true}})", layer_kind::project);
  CHECK(merge_settings(off_global, &on_project, nullptr, ctx).effective.require_os_sandbox);
}

TEST_CASE("a project cannot set trustedProjects, not even to trust itself", "[policy][settings]") {
  auto g = layer_of(R"({"security": {"trustedProjects": ["/srv/a"]}})", layer_kind::global);
  for (std::string_view text : {R"({"security": {"trustedProjects": ["."]}})",
                                R"({"security": {"trustedProjects": ["/home/u/proj"], "level": "yolo"}})"}) {
    INFO(text);
    auto p = layer_of(text, layer_kind::project);
    auto m = merge_settings(g, &p, nullptr, ctx);
    CHECK_FALSE(m.effective.project_trusted);
    CHECK(m.effective.trusted_projects == std::vector<std::string>{"/srv/a"});
    CHECK(m.effective.level == security_level::standard);
    REQUIRE_FALSE(m.warnings.empty());
    CHECK_THAT(m.warnings[0], Catch::Contains("ignored security.trustedProjects"));
  }
  // The same from a trusted project.
  auto gt = layer_of(R"({"security": {"trustedProjects": ["/home/u/proj"]}})", layer_kind::global);
  auto p = layer_of(R"({"security": {"trustedProjects": ["/srv/evil"]}})", layer_kind::project);
  auto m = merge_settings(gt, &p, nullptr, ctx);
  CHECK(m.effective.project_trusted);
  CHECK(m.effective.trusted_projects == std::vector<std::string>{"/home/u/proj"});
  REQUIRE(m.warnings.size() == 1);
  CHECK_THAT(m.warnings[0], Catch::Contains("ignored security.trustedProjects [\"/srv/evil\"]"));
}

TEST_CASE("a trusted project's settings apply as given", "[policy][settings]") {
  auto g = layer_of(R"({"security": {"trustedProjects": ["~/proj/"], "deniedPaths": ["/etc/passwd"]}})",
                    layer_kind::global);
  auto p = layer_of(R"({"security": {"level": "yolo", "trustedAuthors": ["someone"],
                                     "allowedPaths": ["/etc", "../sibling", "."],
                                     "auditIgnorePatterns": ["**"], "deniedPaths": ["secrets"],
                                     "audit": {"durability": "none", "maxBytes": 4096, "keep": 2}},
                        "extensionDirs": ["tools/ext"],
                        "extensions": {"callTimeoutMs": 86400000, "restartWindowMs": 1}})",
                    layer_kind::project);
  auto m = merge_settings(g, &p, nullptr, ctx);
  INFO(joined(m.warnings));
  CHECK(m.warnings.empty());
  const settings& e = m.effective;
  CHECK(e.project_trusted);
  CHECK(e.level == security_level::yolo);
  CHECK(e.trusted_authors == std::vector<std::string>{"someone"});
  CHECK(e.allowed_paths == std::vector<std::string>{"/etc", "/home/u/sibling", "/home/u/proj"});
  CHECK(e.audit_ignore_patterns == std::vector<std::string>{"**"});
  CHECK(e.denied_paths == std::vector<std::string>{"/etc/passwd", "/home/u/proj/secrets"});
  CHECK(e.audit_durability == audit_durability::none);
  CHECK(e.audit_max_bytes == 4096u);
  CHECK(e.audit_keep == 2u);
  CHECK(e.extension_dirs == std::vector<std::string>{"/home/u/proj/tools/ext"});
  CHECK(e.call_timeout_ms == 86400000u);
  CHECK(e.restart_window_ms == 1u);
}

TEST_CASE("trust needs the exact project root, not a parent folder", "[policy][settings]") {
  auto p = layer_of(R"({"security": {"level": "yolo"}})", layer_kind::project);
  for (std::string_view text : {R"({"security": {"trustedProjects": ["/home/u"]}})",
                                R"({"security": {"trustedProjects": ["/"]}})",
                                R"({"security": {"trustedProjects": ["/home/u/proj/sub"]}})",
                                R"({"security": {"trustedProjects": ["/home/u/pro"]}})",
                                R"({"security": {"trustedProjects": ["/home/u/*"]}})"}) {
    INFO(text);
    auto g = layer_of(text, layer_kind::global);
    auto m = merge_settings(g, &p, nullptr, ctx);
    CHECK_FALSE(m.effective.project_trusted);
    CHECK(m.effective.level == security_level::standard);
  }
  for (std::string_view text : {R"({"security": {"trustedProjects": ["/home/u/proj"]}})",
                                R"({"security": {"trustedProjects": ["/home/u/proj/"]}})",
                                R"({"security": {"trustedProjects": ["/home/u/x/../proj"]}})",
                                R"({"security": {"trustedProjects": ["~/proj"]}})"}) {
    INFO(text);
    auto g = layer_of(text, layer_kind::global);
    auto m = merge_settings(g, &p, nullptr, ctx);
    CHECK(m.effective.project_trusted);
    CHECK(m.effective.level == security_level::yolo);
  }
}

TEST_CASE("the command line applies as given, after the project", "[policy][settings]") {
  auto g = layer_of(R"({"security": {"allowedPaths": ["/a"], "trustedAuthors": ["x"], "level": "trusted"}})",
                    layer_kind::global);
  auto p = layer_of(R"({"security": {"level": "paranoid"}})", layer_kind::project);
  auto c = layer_of(R"({"security": {"level": "yolo", "allowedPaths": ["/b", "~/c"], "trustedAuthors": ["y"],
                                     "audit": {"durability": "none"}},
                        "extensions": {"callTimeoutMs": 999999}})",
                    layer_kind::cli);
  auto m = merge_settings(g, &p, &c, ctx);
  CHECK(m.warnings.empty());
  CHECK(m.effective.level == security_level::yolo);
  CHECK(m.effective.allowed_paths == std::vector<std::string>{"/b", "/home/u/c"});
  CHECK(m.effective.trusted_authors == std::vector<std::string>{"y"});
  CHECK(m.effective.audit_durability == audit_durability::none);
  CHECK(m.effective.call_timeout_ms == 999999u);
}

TEST_CASE("trustedProjects given on the command line decide trust like the global file", "[policy][settings]") {
  auto p = layer_of(R"({"security": {"level": "yolo"}})", layer_kind::project);
  auto trust = layer_of(R"({"security": {"trustedProjects": ["/home/u/proj"]}})", layer_kind::cli);
  auto m = merge_settings(settings_layer{}, &p, &trust, ctx);
  CHECK(m.effective.project_trusted);
  CHECK(m.effective.level == security_level::yolo);

  auto g = layer_of(R"({"security": {"trustedProjects": ["/home/u/proj"]}})", layer_kind::global);
  auto untrust = layer_of(R"({"security": {"trustedProjects": []}})", layer_kind::cli);
  auto m2 = merge_settings(g, &p, &untrust, ctx);
  CHECK_FALSE(m2.effective.project_trusted);
  CHECK(m2.effective.level == security_level::standard);
  CHECK(m2.effective.trusted_projects.empty());
}

TEST_CASE("a denied entry the merge cannot understand is kept, never dropped", "[policy][settings]") {
  // Built by hand: parse_settings refuses these, but the merge must stay safe on its own.
  settings_layer g;
  g.denied_paths = std::vector<std::string>{"~bob/.ssh", "relative/secret", "/ok"};
  g.allowed_paths = std::vector<std::string>{"~bob/work", "/ok"};
  auto m = merge_settings(g, nullptr, nullptr, ctx);
  CHECK(m.effective.denied_paths == std::vector<std::string>{"~bob/.ssh", "relative/secret", "/ok"});
  CHECK(m.effective.allowed_paths == std::vector<std::string>{"/ok"});
  CHECK(m.warnings.size() == 3);
}

TEST_CASE("a context without absolute paths allows nothing and trusts nothing", "[policy][settings]") {
  auto g = layer_of(R"({"security": {"trustedProjects": ["/home/u/proj"]}})", layer_kind::global);
  auto p = layer_of(R"({"security": {"level": "yolo", "allowedPaths": ["src"]}})", layer_kind::project);
  auto m = merge_settings(g, &p, nullptr, merge_context{"/home/u", "/home/u/.dhara", "proj"});
  CHECK_FALSE(m.effective.project_trusted);
  CHECK(m.effective.allowed_paths.empty());
  CHECK(m.effective.level == security_level::standard);
}
