// Tests for the settable-key table of policy/settings.hpp (`dhara config get|set|unset`):
// it must agree with parse_settings key by key, range by range, and with the merge's
// project-trust rules.
#include "policy/settings.hpp"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace dhara::policy;
using json = nlohmann::json;

namespace {

constexpr std::string_view global_file = "/home/u/.dhara/config.json";
const merge_context ctx{"/home/u", "/home/u/.dhara", "/home/u/proj"};

// A value every key accepts in a global file.
json valid_sample(const setting_key& k) {
  switch (k.type) {
    case setting_type::level: return "paranoid";
    case setting_type::durability: return "fsync";
    case setting_type::boolean: return true;
    case setting_type::whole_number: return k.min;
    case setting_type::path_list: return json::array({"/tmp/x", "~/y"});
    case setting_type::pattern_list: return json::array({"**/node_modules/**"});
    case setting_type::name_list: return json::array({"zosmaai"});
  }
  return nullptr;
}

// `value` placed at the dotted key, as a file would hold it.
json doc_with(std::string_view dotted, json value) {
  std::vector<std::string> parts;
  std::string part;
  for (char c : dotted) {
    if (c == '.') {
      parts.push_back(part);
      part.clear();
    } else {
      part += c;
    }
  }
  parts.push_back(part);
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) value = json{{*it, value}};
  return value;
}

}  // namespace

TEST_CASE("the table holds exactly the keys of DESIGN 3.1, each found by name", "[policy][settings][keys]") {
  std::vector<std::string_view> names;
  for (const auto& k : setting_keys()) names.emplace_back(k.name);
  CHECK(names == std::vector<std::string_view>{
                     "security.level", "security.trustedAuthors", "security.allowedPaths", "security.deniedPaths",
                     "security.auditIgnorePatterns", "security.trustedProjects", "security.audit.durability",
                     "security.audit.maxBytes", "security.audit.keep", "security.requireOsSandbox", "extensionDirs",
                     "extensions.callTimeoutMs", "extensions.cancelGraceMs", "extensions.killGraceMs",
                     "extensions.maxRestarts", "extensions.restartWindowMs", "extensions.maxLineBytes"});
  for (const auto& k : setting_keys()) CHECK(find_setting_key(k.name) == &k);
  CHECK(find_setting_key("security") == nullptr);
  CHECK(find_setting_key("security.audit") == nullptr);
  CHECK(find_setting_key("level") == nullptr);
  CHECK(find_setting_key("") == nullptr);
}

TEST_CASE("every key in the table is known to the parser (no unknown-key warning)", "[policy][settings][keys]") {
  for (const auto& k : setting_keys()) {
    INFO(k.name);
    auto parsed = parse_settings_json(doc_with(k.name, valid_sample(k)), "g.json", layer_kind::global);
    REQUIRE(parsed);
    CHECK(parsed->warnings.empty());
    CHECK_FALSE(check_setting_value(k, valid_sample(k), "g.json", layer_kind::global).has_value());
  }
}

TEST_CASE("the table's ranges are the parser's: both ends pass, one past either fails", "[policy][settings][keys]") {
  int numbers = 0;
  for (const auto& k : setting_keys()) {
    if (k.type != setting_type::whole_number) continue;
    ++numbers;
    INFO(k.name);
    REQUIRE(k.min <= k.max);
    CHECK_FALSE(check_setting_value(k, k.min, "g.json", layer_kind::global).has_value());
    CHECK_FALSE(check_setting_value(k, k.max, "g.json", layer_kind::global).has_value());
    auto above = check_setting_value(k, k.max + 1, "g.json", layer_kind::global);
    REQUIRE(above.has_value());
    CHECK(above->code == errc::invalid_value);
    if (k.min > 0) {
      auto below = check_setting_value(k, k.min - 1, "g.json", layer_kind::global);
      REQUIRE(below.has_value());
      CHECK(below->code == errc::invalid_value);
    }
  }
  CHECK(numbers == 8);
}

TEST_CASE("check_setting_value refuses a wrong type or value naming the file and the key", "[policy][settings][keys]") {
  const auto& level = *find_setting_key("security.level");
  auto err = check_setting_value(level, "strict", "/h/config.json", layer_kind::global);
  REQUIRE(err.has_value());
  CHECK(err->code == errc::invalid_value);
  CHECK(err->message ==
        "/h/config.json: security.level: expected one of \"paranoid\", \"standard\", \"trusted\", \"yolo\", found "
        "string \"strict\"");

  const auto& timeout = *find_setting_key("extensions.callTimeoutMs");
  err = check_setting_value(timeout, "120000", "/h/config.json", layer_kind::global);
  REQUIRE(err.has_value());
  CHECK(err->code == errc::invalid_type);
  CHECK(err->message.find("extensions.callTimeoutMs") != std::string::npos);
  CHECK_FALSE(check_setting_value(timeout, 1e5, "/h/config.json", layer_kind::global).has_value());
  CHECK(check_setting_value(timeout, -1, "/h/config.json", layer_kind::global).has_value());
  CHECK(check_setting_value(timeout, 1.5, "/h/config.json", layer_kind::global).has_value());

  const auto& sandbox = *find_setting_key("security.requireOsSandbox");
  CHECK(check_setting_value(sandbox, "false", "/h/config.json", layer_kind::global).has_value());
  CHECK(check_setting_value(sandbox, nullptr, "/h/config.json", layer_kind::global).has_value());

  const auto& authors = *find_setting_key("security.trustedAuthors");
  CHECK(check_setting_value(authors, "zosmaai", "/h/config.json", layer_kind::global).has_value());
  CHECK(check_setting_value(authors, json::array({""}), "/h/config.json", layer_kind::global).has_value());
}

TEST_CASE("relative paths: refused for the global file, accepted for a project file", "[policy][settings][keys]") {
  const auto& denied = *find_setting_key("security.deniedPaths");
  auto err = check_setting_value(denied, json::array({"secrets"}), "/h/config.json", layer_kind::global);
  REQUIRE(err.has_value());
  CHECK(err->message.find("security.deniedPaths[0]") != std::string::npos);
  CHECK(err->message.find("absolute path or one starting with '~'") != std::string::npos);
  CHECK_FALSE(check_setting_value(denied, json::array({"secrets"}), "/p/.dhara/config.json", layer_kind::project));
  CHECK(check_setting_value(denied, json::array({"~bob/x"}), "/p/.dhara/config.json", layer_kind::project));
  // Patterns may be relative anywhere: they match at any depth.
  const auto& ignore = *find_setting_key("security.auditIgnorePatterns");
  CHECK_FALSE(check_setting_value(ignore, json::array({"*.log"}), "/h/config.json", layer_kind::global));
}

TEST_CASE("suggest_setting_key finds a mistyped or misplaced key", "[policy][settings][keys]") {
  CHECK(suggest_setting_key("security.levle") == " (did you mean 'security.level'?)");
  CHECK(suggest_setting_key("level") == " (did you mean 'security.level'?)");
  CHECK(suggest_setting_key("extensions.level") == " (did you mean 'security.level'?)");
  CHECK(suggest_setting_key("security.keep") == " (did you mean 'security.audit.keep'?)");
  CHECK(suggest_setting_key("extensions.calltimeoutms") == " (did you mean 'extensions.callTimeoutMs'?)");
  CHECK(suggest_setting_key("extensiondirs") == " (did you mean 'extensionDirs'?)");
  CHECK(suggest_setting_key("extensions.levle") == " (did you mean 'security.level'?)");
  CHECK(suggest_setting_key("security.audit.maxbytes") == " (did you mean 'security.audit.maxBytes'?)");
  CHECK(suggest_setting_key("qqqqqqqqqqqq") == "");
  CHECK(suggest_setting_key("") == "");
}

TEST_CASE("project_refusal: only the global file may say which projects are trusted or drop the OS sandbox",
          "[policy][settings][keys]") {
  auto refusal = project_refusal(*find_setting_key("security.trustedProjects"), json::array({"/p"}), global_file);
  REQUIRE(refusal.has_value());
  CHECK(refusal->find(std::string(global_file)) != std::string::npos);
  const auto& sandbox = *find_setting_key("security.requireOsSandbox");
  refusal = project_refusal(sandbox, false, global_file);
  REQUIRE(refusal.has_value());
  CHECK(refusal->find("even in a trusted project") != std::string::npos);
  CHECK_FALSE(project_refusal(sandbox, true, global_file).has_value());
  for (std::string_view name : {"security.level", "security.trustedAuthors", "security.allowedPaths",
                                "security.auditIgnorePatterns", "extensionDirs", "security.audit.maxBytes"}) {
    INFO(name);
    CHECK_FALSE(project_refusal(*find_setting_key(name), json::array(), global_file).has_value());
  }
}

TEST_CASE("the table's project rules match what the merge does with an untrusted project", "[policy][settings][keys]") {
  // A loosening of a tighten_only or trusted_only key is ignored with a warning naming the
  // key; a global_only key is ignored too; deniedPaths ("added") always applies.
  const std::vector<std::pair<std::string_view, json>> loosenings{
      {"security.level", "yolo"},
      {"security.trustedAuthors", json::array({"someone"})},
      {"security.allowedPaths", json::array({"/etc"})},
      {"security.auditIgnorePatterns", json::array({"**"})},
      {"security.trustedProjects", json::array({"/home/u/proj"})},
      {"security.audit.durability", "none"},
      {"security.audit.maxBytes", 4096},
      {"security.audit.keep", 1},
      {"security.requireOsSandbox", false},
      {"extensionDirs", json::array({"/opt/evil"})},
      {"extensions.callTimeoutMs", 86'400'000},
      {"extensions.cancelGraceMs", 600'000},
      {"extensions.killGraceMs", 600'000},
      {"extensions.maxRestarts", 1000},
      {"extensions.restartWindowMs", 1},
      {"extensions.maxLineBytes", 1 << 30},
  };
  for (const auto& k : setting_keys()) {
    if (k.project == project_rule::added) continue;
    INFO(k.name);
    auto it = std::find_if(loosenings.begin(), loosenings.end(), [&](const auto& p) { return p.first == k.name; });
    REQUIRE(it != loosenings.end());
    auto project = parse_settings_json(doc_with(k.name, it->second), "p.json", layer_kind::project);
    REQUIRE(project);
    auto merged = merge_settings({}, &project->layer, nullptr, ctx);
    CHECK(effective_value(merged.effective, k) == effective_value(merge_settings({}, nullptr, nullptr, ctx).effective, k));
    bool warned = std::any_of(merged.warnings.begin(), merged.warnings.end(), [&](const std::string& w) {
      return w.find("ignored " + std::string(k.name)) != std::string::npos;
    });
    CHECK(warned);
  }
  const auto& denied = *find_setting_key("security.deniedPaths");
  CHECK(denied.project == project_rule::added);
  auto project = parse_settings_json(doc_with(denied.name, json::array({"secrets"})), "p.json", layer_kind::project);
  REQUIRE(project);
  auto merged = merge_settings({}, &project->layer, nullptr, ctx);
  CHECK(effective_value(merged.effective, denied) == json::array({"/home/u/proj/secrets"}));
}

TEST_CASE("effective_value gives the documented defaults and the merged values", "[policy][settings][keys]") {
  auto defaults = merge_settings({}, nullptr, nullptr, ctx).effective;
  auto value = [&](std::string_view name) { return effective_value(defaults, *find_setting_key(name)); };
  CHECK(value("security.level") == "standard");
  CHECK(value("security.allowedPaths") == json::array({"/home/u/proj"}));
  CHECK(value("security.deniedPaths") == json::array());
  CHECK(value("security.audit.durability") == "write");
  CHECK(value("security.audit.maxBytes") == 104857600);
  CHECK(value("security.audit.keep") == 5);
  CHECK(value("security.requireOsSandbox") == true);
  CHECK(value("extensionDirs") == json::array({"/home/u/.dhara/extensions"}));
  CHECK(value("extensions.callTimeoutMs") == 120000);
  CHECK(value("extensions.cancelGraceMs") == 5000);
  CHECK(value("extensions.killGraceMs") == 2000);
  CHECK(value("extensions.maxRestarts") == 3);
  CHECK(value("extensions.restartWindowMs") == 60000);
  CHECK(value("extensions.maxLineBytes") == 8388608);

  auto global = parse_settings(R"({"security": {"level": "paranoid", "deniedPaths": ["~/.aws"]},
                                   "extensions": {"maxRestarts": 7}})",
                               "g.json", layer_kind::global);
  REQUIRE(global);
  auto merged = merge_settings(global->layer, nullptr, nullptr, ctx).effective;
  CHECK(effective_value(merged, *find_setting_key("security.level")) == "paranoid");
  CHECK(effective_value(merged, *find_setting_key("security.deniedPaths")) == json::array({"/home/u/.aws"}));
  CHECK(effective_value(merged, *find_setting_key("extensions.maxRestarts")) == 7);
}

TEST_CASE("is_list is true exactly for the list types", "[policy][settings][keys]") {
  for (const auto& k : setting_keys()) {
    INFO(k.name);
    CHECK(is_list(k.type) == valid_sample(k).is_array());
  }
}
