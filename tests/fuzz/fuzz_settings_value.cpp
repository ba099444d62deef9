// libFuzzer target for `dhara config set KEY VALUE`: the first byte picks a key of the table
// (and the global or project file), the rest is the VALUE as typed. check_setting_value must
// agree with the file parser on the file config set would write, and name the key and file
// when it refuses. For the path lists, path_rules_refusal must pass what the path rules compile
// (an entry it lets through is never refused or ignored there), and refuse nothing else that
// normalization leaves as written.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "policy/json_text.hpp"
#include "policy/path_rules.hpp"
#include "policy/settings.hpp"

using namespace dhara::policy;
using json = nlohmann::json;

namespace {

const merge_context ctx{"/home/u", "/home/u/.dhara", "/home/u/proj"};
constexpr std::string_view global_file = "/home/u/.dhara/config.json";
constexpr std::string_view project_file = "/home/u/proj/.dhara/config.json";

void require(bool ok) {
  if (!ok) std::abort();
}

// The VALUE argument as config set reads it (cli/config_cmd.cpp value_of): JSON when it
// parses (an integral float as a whole number), else a plain string for a non-list key.
std::optional<json> value_of(const setting_key& key, std::string_view text) {
  auto parsed = parse_json_text(text, "");
  if (parsed) {
    if (key.type == setting_type::whole_number && parsed->is_number_float()) {
      double d = parsed->get<double>();
      if (d >= 0 && d <= 9007199254740992.0 && std::floor(d) == d) return json(static_cast<std::uint64_t>(d));
    }
    return std::move(*parsed);
  }
  auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && (text[first] == '[' || text[first] == '{')) return std::nullopt;
  json s = std::string(text);
  try {
    (void)s.dump();
  } catch (const json::exception&) {
    return std::nullopt;  // not UTF-8: refused before the check
  }
  if (is_list(key.type)) return std::nullopt;
  return s;
}

// The file config set writes into an empty one: the value at the dotted key.
json file_with(std::string_view dotted, json value) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t dot = dotted.find('.'); dot != std::string_view::npos; dot = dotted.find('.', start)) {
    parts.emplace_back(dotted.substr(start, dot - start));
    start = dot + 1;
  }
  parts.emplace_back(dotted.substr(start));
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) value = json{{*it, std::move(value)}};
  return value;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto keys = setting_keys();
  const setting_key& key = keys[data[0] % keys.size()];
  const layer_kind kind = data[0] & 0x80 ? layer_kind::project : layer_kind::global;
  const std::string_view file = kind == layer_kind::project ? project_file : global_file;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  auto value = value_of(key, text);
  if (!value) return 0;
  auto refused = check_setting_value(key, *value, file, kind);
  (void)project_refusal(key, *value, global_file);

  // The same verdict from the file as written to disk and read back by parse_settings.
  std::string written;
  try {
    written = file_with(key.name, *value).dump(2);
  } catch (const json::exception&) {
    require(false);  // value_of only lets valid UTF-8 through
  }
  auto reread = parse_settings(written, file, kind);
  require(reread.has_value() == !refused.has_value());

  if (refused) {
    require(refused->message.starts_with(std::string(file) + ": "));
    require(refused->message.find(key.name) != std::string::npos);
    return 0;
  }
  // An accepted value may still draw a warning (a glob in trustedProjects, a project's
  // global-only key), which names the file. In a global file alone a scalar is the
  // effective value (lists are normalized or extended with built-ins).
  for (const auto& w : reread->warnings) require(w.starts_with(std::string(file) + ": "));
  if (kind == layer_kind::global && !is_list(key.type)) {
    settings s = merge_settings(reread->layer, nullptr, nullptr, ctx).effective;
    require(effective_value(s, key) == *value);
  }
  // The rules a session compiles from this file alone (a global file, or a trusted project).
  if (!is_path_rules_key(key.name)) return 0;
  const bool denied = key.name == "security.deniedPaths";
  auto why = path_rules_refusal(key, *value, file);
  settings_layer global;
  if (kind == layer_kind::project) global.trusted_projects = std::vector<std::string>{ctx.project_root};
  const settings s = kind == layer_kind::global ? merge_settings(reread->layer, nullptr, nullptr, ctx).effective
                                                : merge_settings(global, &reread->layer, nullptr, ctx).effective;
  auto rules = compile_path_rules({s.allowed_paths, s.denied_paths, ctx.home, ctx.dhara_home, ctx.project_root},
                                  lexical_resolver{});
  bool ignored = false;  // by the compile's own words for one of the entries (an entry may hold them)
  if (rules)
    for (const auto& p : rules->problems)
      for (const auto& a : s.allowed_paths) ignored = ignored || p.starts_with("allowedPaths entry '" + a + "' ignored: ");
  // What it passes always compiles. What it refuses, the compile refuses too, unless the
  // session's normalization drops the form from an entry (a backslash before a last '/',
  // '/a/[[.x.]]/..'): config set refuses such an entry as written (fail closed).
  require(why.has_value() || (rules && !ignored));
  bool normal = true;
  for (const json& e : *value)
    if (auto n = normalize_path(e.get<std::string>(), "/"); !n || (*n != e.get<std::string>() && *n != "/" + e.get<std::string>()))
      normal = false;
  if (normal) require(!why.has_value() || !rules || ignored);
  if (why) require(why->message.starts_with(std::string(file) + ": " + std::string(key.name) + " entry "));
  return 0;
}
