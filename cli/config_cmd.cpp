// `dhara config get|set|unset` (DESIGN §6, §9 "Config commands and errors") and the
// permissions subcommands. get shows what a session in this folder would use; set and unset
// change one file under its lock and never write what the session's parser would refuse.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "io/files.hpp"
#include "io/path_resolver.hpp"
#include "io/settings_file.hpp"
#include "policy/json_text.hpp"
#include "policy/path_rules.hpp"
#include "policy/settings.hpp"
#include "policy/text.hpp"

namespace dhara::cli {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

struct config_options {
  std::string key, value, add, remove;
  bool global = false, project = false, json = false;
};

// ---- keys and documents ----------------------------------------------------------------

std::vector<std::string> split_key(std::string_view dotted) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    auto dot = dotted.find('.', start);
    parts.emplace_back(dotted.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

// The value at a dotted key, or nullptr when it (or an object on the way) is absent.
const ordered_json* find_at(const ordered_json& doc, std::string_view dotted) {
  const ordered_json* at = &doc;
  for (const std::string& part : split_key(dotted)) {
    if (!at->is_object()) return nullptr;
    auto it = at->find(part);
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

// Sets a dotted key, creating the objects on the way. An object on the way that holds
// something else is never replaced (that would lose what the user wrote there).
policy::result<bool> set_at(ordered_json& doc, std::string_view dotted, const ordered_json& value,
                            const std::string& file) {
  const auto parts = split_key(dotted);
  ordered_json* at = &doc;
  std::string walked;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    walked += (walked.empty() ? "" : ".") + parts[i];
    auto it = at->find(parts[i]);
    if (it == at->end()) {
      at = &((*at)[parts[i]] = ordered_json::object());
      continue;
    }
    if (!it->is_object())
      return policy::make_error(policy::errc::invalid_type,
                                file + ": " + walked + " holds " + std::string(policy::json_type_name(json(it->type()))) +
                                    ", not an object, so " + std::string(dotted) +
                                    " cannot be set inside it; fix the file by hand; nothing was changed");
    at = &*it;
  }
  ordered_json& slot = (*at)[parts.back()];
  if (slot == value) return false;
  slot = value;
  return true;
}

// Removes a dotted key; objects this emptied are removed too, so set-then-unset leaves the
// file as it was.
bool erase_at(ordered_json& doc, const std::vector<std::string>& parts, std::size_t i = 0) {
  if (!doc.is_object()) return false;
  auto it = doc.find(parts[i]);
  if (it == doc.end()) return false;
  if (i + 1 == parts.size()) {
    doc.erase(it);
    return true;
  }
  bool removed = erase_at(*it, parts, i + 1);
  if (removed && it->is_object() && it->empty()) doc.erase(it);
  return removed;
}

// Keys under a group name ("security.audit" → its three keys); empty when not a group.
std::vector<const policy::setting_key*> keys_under(std::string_view group) {
  std::vector<const policy::setting_key*> out;
  for (const auto& k : policy::setting_keys())
    if (k.name.size() > group.size() && k.name.starts_with(group) && k.name[group.size()] == '.') out.push_back(&k);
  return out;
}

int unknown_key(std::string_view key) {
  std::fprintf(stderr, "dhara: unknown setting '%s'%s; 'dhara config get' lists every setting\n",
               policy::printable_excerpt(key).c_str(), policy::suggest_setting_key(key).c_str());
  return 2;
}

// get's output: strings alone, everything else as compact JSON (so is a string holding
// control characters, which must not reach the terminal raw).
template <class Json>
std::string shown(const Json& v, bool as_json) {
  if (!as_json && v.is_string()) {
    const auto& s = v.template get_ref<const std::string&>();
    if (std::none_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
      return s;
  }
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

// A warning that is about `key`: it names it as a whole word ("security.audit" does not
// match "security.auditIgnorePatterns").
bool mentions(const std::string& warning, std::string_view key) {
  for (auto at = warning.find(key); at != std::string::npos; at = warning.find(key, at + 1)) {
    std::size_t end = at + key.size();
    if (end == warning.size() || !(std::isalnum(static_cast<unsigned char>(warning[end])) || warning[end] == '.' ||
                                   warning[end] == '_'))
      return true;
  }
  return false;
}

void warn(const std::string& text) { std::fprintf(stderr, "dhara: warning: %s\n", text.c_str()); }

// ---- what a session in this folder reads --------------------------------------------------

struct session_view {
  io::settings_file global;
  std::optional<io::settings_file> project;  ///< absent when the project is DHARA_HOME itself
  policy::merged_settings merged;
  std::vector<std::string> warnings;  ///< the session's: parse warnings, then the merge's
};

// The same files, parser and merge as broker::load_policy, without manifests and approvals
// (a broken permissions.json must not hide the settings).
policy::result<session_view> load_view(const io::locations& where) {
  session_view v;
  auto global = io::read_settings_file(io::global_settings_path(where.dhara_home), policy::layer_kind::global);
  if (!global) return global.err();
  v.global = std::move(*global);
  if (where.project_root != where.dhara_home && where.project_dhara_usable()) {
    auto project = io::read_settings_file(io::project_settings_path(where.project_root), policy::layer_kind::project);
    if (!project) return project.err();
    v.project = std::move(*project);
  }
  v.warnings = v.global.parsed.warnings;
  if (v.project) v.warnings.insert(v.warnings.end(), v.project->parsed.warnings.begin(), v.project->parsed.warnings.end());
  policy::merge_context ctx{where.home, where.dhara_home, where.project_root};
  v.merged = policy::merge_settings(v.global.parsed.layer, v.project ? &v.project->parsed.layer : nullptr, nullptr, ctx);
  v.warnings.insert(v.warnings.end(), v.merged.warnings.begin(), v.merged.warnings.end());
  return v;
}

std::optional<io::locations> locate(int& rc) {
  auto where = io::discover_locations();
  if (!where) {
    std::fprintf(stderr, "dhara: %s\n", where.err().message.c_str());
    rc = 2;
    return std::nullopt;
  }
  return std::move(*where);
}

// The file `--project` (or not) names, or exit 2 when the project has no file of its own: the
// folder is DHARA_HOME itself (a session there reads no project file, so writing one would
// change nothing), or the root's `.dhara` is dhara's own folder or not the user's.
std::optional<std::string> target_file(const io::locations& where, bool project, int& rc) {
  if (!project) return io::global_settings_path(where.dhara_home);
  const std::string dhara_dir = (where.project_root == "/" ? std::string() : where.project_root) + "/.dhara";
  std::string why;
  if (where.project_root == where.dhara_home)
    why = "the current folder is DHARA_HOME (" + where.dhara_home + "), which is not a project; run this in a project "
          "folder, or drop --project to change the global file";
  else if (where.project_dhara_is_state)  // a repository's `.dhara` linking to ~/.dhara edited the global file
    why = dhara_dir + " is dhara's own folder (" + where.dhara_home + ", or a link to it), not a project's; a project "
          "file there would be the global one. Remove that link and run 'mkdir .dhara' for a project folder, or drop "
          "--project to change the global file";
  else if (where.project_dhara_foreign)
    why = dhara_dir + " is not a folder of yours (another user's, or a link one made), so it is no project's; move it "
          "away and run 'mkdir .dhara' for a project folder, or drop --project to change the global file";
  if (!why.empty()) {
    std::fprintf(stderr, "dhara: %s\n", why.c_str());
    rc = 2;
    return std::nullopt;
  }
  return io::project_settings_path(where.project_root);
}

// ---- get -------------------------------------------------------------------------------

int config_get(const config_options& o) {
  int rc = 0;
  auto where = locate(rc);
  if (!where) return rc;
  const policy::setting_key* key = o.key.empty() ? nullptr : policy::find_setting_key(o.key);
  std::vector<const policy::setting_key*> keys;
  if (o.key.empty())
    for (const auto& k : policy::setting_keys()) keys.push_back(&k);
  else if (key)
    keys.push_back(key);
  else
    keys = keys_under(o.key);
  if (keys.empty()) return unknown_key(o.key);

  // One file as written.
  if (o.global || o.project) {
    auto file = target_file(*where, o.project, rc);
    if (!file) return rc;
    auto read = io::read_settings_file(*file, o.project ? policy::layer_kind::project : policy::layer_kind::global);
    if (!read) {
      std::fprintf(stderr, "dhara: %s\n", read.err().message.c_str());
      return 2;
    }
    for (const auto& w : read->parsed.warnings) warn(w);
    if (!o.key.empty()) {
      const ordered_json* v = find_at(read->doc, o.key);
      if (!v) {
        std::fprintf(stderr, "dhara: %s is not set in %s%s\n", o.key.c_str(), file->c_str(),
                     read->exists ? "" : " (the file does not exist)");
        if (o.json) std::printf("null\n");
        return 0;
      }
      std::printf("%s\n", shown(*v, o.json).c_str());
      return 0;
    }
    ordered_json all = ordered_json::object();
    for (const auto* k : keys)
      if (const ordered_json* v = find_at(read->doc, k->name)) all[std::string(k->name)] = *v;
    if (o.json)
      std::printf("%s\n", all.dump(2).c_str());
    else
      for (const auto& [name, v] : all.items()) std::printf("%s %s\n", name.c_str(), shown(v, false).c_str());
    return 0;
  }

  // What a session here uses.
  auto view = load_view(*where);
  if (!view) {
    std::fprintf(stderr, "dhara: %s\n", view.err().message.c_str());
    return 2;
  }
  for (const auto& w : view->warnings) warn(w);
  const auto& eff = view->merged.effective;
  if (key) {
    std::printf("%s\n", shown(policy::effective_value(eff, *key), o.json).c_str());
    return 0;
  }
  if (!o.key.empty()) {  // a group: its keys nested as in the file
    ordered_json group = ordered_json::object();
    for (const auto* k : keys)
      (void)set_at(group, k->name.substr(o.key.size() + 1), ordered_json(policy::effective_value(eff, *k)), "");
    std::printf("%s\n", o.json ? group.dump(2).c_str() : group.dump().c_str());
    return 0;
  }
  if (o.json) {
    ordered_json all = ordered_json::object();
    for (const auto* k : keys) all[std::string(k->name)] = ordered_json(policy::effective_value(eff, *k));
    std::printf("%s\n", all.dump(2).c_str());
  } else {
    for (const auto* k : keys)
      std::printf("%s %s\n", std::string(k->name).c_str(), shown(policy::effective_value(eff, *k), false).c_str());
  }
  return 0;
}

// ---- set / unset -------------------------------------------------------------------------

// A command-line value: JSON when it parses as JSON ('["a","b"]', true, 120000, "\"x\""),
// else the text as a plain string. Text that starts like an array or object but is broken
// JSON is an error rather than a string nobody meant.
std::optional<json> value_of(const policy::setting_key& key, const std::string& text) {
  auto parsed = policy::parse_json_text(text, "");
  if (parsed) {
    // 1e5 and 5000.0 are whole numbers to the parser; write them as such.
    if (key.type == policy::setting_type::whole_number && parsed->is_number_float()) {
      double d = parsed->get<double>();
      if (d >= 0 && d <= 9007199254740992.0 && std::floor(d) == d) return json(static_cast<std::uint64_t>(d));
    }
    return std::move(*parsed);
  }
  auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (text[first] == '[' || text[first] == '{')) {
    std::fprintf(stderr, "dhara: the value for %s is not valid JSON (%s); quote it for the shell, e.g. '[\"a\", \"b\"]'\n",
                 std::string(key.name).c_str(), parsed.err().message.c_str());
    return std::nullopt;
  }
  json s = text;
  try {
    (void)s.dump();
  } catch (const json::exception&) {
    std::fprintf(stderr, "dhara: the value for %s is not valid UTF-8 text\n", std::string(key.name).c_str());
    return std::nullopt;
  }
  if (policy::is_list(key.type)) {
    std::fprintf(stderr,
                 "dhara: %s is a list: give the whole list as JSON, e.g. '[\"%s\"]', or change one entry with "
                 "--add or --remove\n",
                 std::string(key.name).c_str(), policy::printable_excerpt(text).c_str());
    return std::nullopt;
  }
  return s;
}

// The default a list key falls back to when the file does not set it, for the note that
// --add on an absent key replaces it; extensionDirs' default is kept by writing it out.
std::optional<std::string> list_default(const policy::setting_key& key, const io::locations& where) {
  if (key.name == "security.allowedPaths") return "the project root";
  if (key.name == "extensionDirs") return where.dhara_home + "/extensions";
  return std::nullopt;
}

// What the session would say about this key after the change: the written file's own
// warnings and the merge's (every ignored loosening, with how to trust the project), and,
// after a global change, a note when this project's file overrides it.
void report_effect(const io::locations& where, const policy::setting_key* key, std::string_view name,
                   const io::settings_file& written, bool project) {
  for (const auto& w : written.parsed.warnings)
    if (mentions(w, name)) warn(w);
  auto view = load_view(where);
  if (!view) {
    warn(view.err().message + " (a session here will refuse to start until that is fixed)");
    return;
  }
  for (const auto& w : view->merged.warnings)
    if (mentions(w, name)) warn(w);
  // What the path rules compiled from the merged lists say of this list's entries (a range
  // that matches no byte, an allowed glob that misses its own name, a folder whose name holds
  // glob characters), as doctor shows them. Refused entries never got this far.
  if (key && policy::is_path_rules_key(key->name)) {
    const auto& eff = view->merged.effective;
    const std::string list = std::string(key->name.substr(key->name.find('.') + 1)) + " entry ";
    auto rules = policy::compile_path_rules(
        {eff.allowed_paths, eff.denied_paths, where.home, where.dhara_home, where.project_root},
        io::real_path_resolver{});
    if (!rules)  // an entry written by hand: config set refuses to write one
      warn(rules.err().message + " (a session here will refuse to start until that is fixed)");
    else
      for (const auto& p : rules->problems)
        if (p.starts_with(list)) warn(p);
  }
  if (key && !project && view->project && find_at(view->project->doc, name))
    std::fprintf(stderr, "dhara: note: %s also sets %s; a session in %s uses %s\n",
                 io::project_settings_path(where.project_root).c_str(), std::string(name).c_str(),
                 where.project_root.c_str(), shown(policy::effective_value(view->merged.effective, *key), false).c_str());
}

int finish_update(const io::settings_update& u) {
  switch (u.what) {
    case io::settings_update::outcome::written:
    case io::settings_update::outcome::unchanged: return 0;
    case io::settings_update::outcome::refused: std::fprintf(stderr, "dhara: %s\n", u.message.c_str()); return 2;
    case io::settings_update::outcome::failed: std::fprintf(stderr, "dhara: %s\n", u.message.c_str()); return 1;
  }
  return 1;
}

int config_set(const config_options& o) {
  int rc = 0;
  auto where = locate(rc);
  if (!where) return rc;
  const policy::setting_key* key = policy::find_setting_key(o.key);
  if (!key) {
    if (auto under = keys_under(o.key); !under.empty()) {
      std::string names;
      for (const auto* k : under) names += (names.empty() ? "" : ", ") + std::string(k->name);
      std::fprintf(stderr, "dhara: %s is a group of settings; set one of them: %s\n", o.key.c_str(), names.c_str());
      return 2;
    }
    return unknown_key(o.key);
  }
  auto file = target_file(*where, o.project, rc);
  if (!file) return rc;
  const auto kind = o.project ? policy::layer_kind::project : policy::layer_kind::global;
  const std::string name(key->name);
  const bool adding = !o.add.empty(), removing = !o.remove.empty();
  if ((adding || removing) && !policy::is_list(key->type)) {
    std::fprintf(stderr, "dhara: %s is not a list, so --%s does not apply; give the value: dhara config set %s VALUE\n",
                 name.c_str(), adding ? "add" : "remove", name.c_str());
    return 2;
  }

  // The value alone first: a wrong one is refused before any file is touched.
  json value;
  if (adding || removing) {
    value = json::array({adding ? o.add : o.remove});
    try {
      (void)value.dump();
    } catch (const json::exception&) {
      std::fprintf(stderr, "dhara: the entry for %s is not valid UTF-8 text\n", name.c_str());
      return 2;
    }
  } else {
    auto v = value_of(*key, o.value);
    if (!v) return 2;
    value = std::move(*v);
  }
  if (adding || !removing) {
    auto err = policy::check_setting_value(*key, value, *file, kind);
    if (!err) err = policy::path_rules_refusal(*key, value, *file);
    if (err) {
      // The entry was checked alone, as a list of one: "[0]" named the file's first entry,
      // which was fine (a review).
      std::string message = err->message;
      if (const std::string one = name + "[0]"; adding)
        if (const auto at = message.find(one); at != std::string::npos)
          message.replace(at, one.size(), name + " (the entry --add gives)");
      std::fprintf(stderr, "dhara: %s; nothing was changed\n", message.c_str());
      return 2;
    }
    if (o.project)
      if (auto why = policy::project_refusal(*key, value, io::global_settings_path(where->dhara_home))) {
        std::fprintf(stderr, "dhara: %s; nothing was changed\n", why->c_str());
        return 2;
      }
  }

  std::string done;   // what stdout says happened
  std::string note;   // said after a successful write
  auto update = io::update_settings_file(*file, kind, [&](ordered_json& doc) -> policy::result<bool> {
    const ordered_json* current = find_at(doc, name);
    if (!adding && !removing) {
      done = "set " + name + " to " + shown(value, false) + " in " + *file;
      return set_at(doc, name, ordered_json(value), *file);
    }
    const std::string& entry = adding ? o.add : o.remove;
    if (current && !current->is_array())
      return policy::make_error(policy::errc::invalid_type,
                                *file + ": " + name + " is " + std::string(policy::json_type_name(json(current->type()))) +
                                    ", not a list; replace it with dhara config set " + name +
                                    " '[...]'; nothing was changed");
    ordered_json list = current ? *current : ordered_json::array();
    auto it = std::find(list.begin(), list.end(), ordered_json(entry));
    if (adding) {
      if (it != list.end()) {
        done = policy::printable_excerpt(entry) + " is already in " + name + " in " + *file;
        return false;
      }
      if (!current)
        if (auto def = list_default(*key, *where)) {
          if (key->name == "extensionDirs" && !o.project) {
            list.push_back(*def);  // keep the default folder, where `extensions install` puts things
            note = "the default extension folder " + *def + " was written out too, so it stays in use";
          } else if (!o.project) {
            note = "the global file did not set " + name + ", so this list replaces the default (" + *def + ")";
          }
        }
      list.push_back(entry);
      done = "added " + policy::printable_excerpt(entry) + " to " + name + " in " + *file;
    } else {
      if (it == list.end()) {
        std::vector<std::string> held;
        for (const auto& e : list)
          if (e.is_string()) held.push_back(e.get<std::string>());
        std::vector<std::string_view> views(held.begin(), held.end());
        return policy::make_error(policy::errc::not_found,
                                  policy::printable_excerpt(entry) + " is not in " + name + " in " + *file +
                                      policy::did_you_mean(entry, views) + "; nothing was changed");
      }
      list.erase(it);
      if (list.empty())
        note = name + " is now an empty list" +
               (key->name == "security.allowedPaths" ? std::string(", which allows no path at all") : std::string()) +
               "; 'dhara config unset " + name + (o.project ? " --project" : "") + "' restores the default";
      done = "removed " + policy::printable_excerpt(entry) + " from " + name + " in " + *file;
    }
    return set_at(doc, name, list, *file);
  });
  if (int code = finish_update(update); code != 0) return code;
  if (update.what == io::settings_update::outcome::unchanged && !adding)
    done = name + " is already " + shown(value, false) + " in " + *file + "; nothing was written";
  std::printf("%s\n", done.c_str());
  if (update.what == io::settings_update::outcome::written && !note.empty())
    std::fprintf(stderr, "dhara: note: %s\n", note.c_str());
  report_effect(*where, key, name, update.after, o.project);
  return 0;
}

int config_unset(const config_options& o) {
  int rc = 0;
  auto where = locate(rc);
  if (!where) return rc;
  auto file = target_file(*where, o.project, rc);
  if (!file) return rc;
  const auto kind = o.project ? policy::layer_kind::project : policy::layer_kind::global;
  const policy::setting_key* key = policy::find_setting_key(o.key);
  if (!key) {
    // An unknown key may still be removed from the file that holds it (a typo the session
    // keeps warning about); anything else is a mistake.
    auto read = io::read_settings_file(*file, kind);
    if (!read || !find_at(read->doc, o.key)) return unknown_key(o.key);
  }
  bool removed = false;
  auto update = io::update_settings_file(*file, kind, [&](ordered_json& doc) -> policy::result<bool> {
    removed = erase_at(doc, split_key(o.key));
    return removed;
  });
  if (int code = finish_update(update); code != 0) return code;
  if (!removed) {
    std::printf("%s is not set in %s; nothing was changed\n", o.key.c_str(), file->c_str());
    return 0;
  }
  std::printf("removed %s from %s\n", policy::printable_excerpt(o.key).c_str(), file->c_str());
  report_effect(*where, nullptr, o.key, update.after, o.project);
  if (key)
    if (auto view = load_view(*where))
      std::fprintf(stderr, "dhara: note: a session in %s now uses %s %s\n", where->project_root.c_str(), o.key.c_str(),
                   shown(policy::effective_value(view->merged.effective, *key), false).c_str());
  return 0;
}

// What a key takes, for --help.
std::string value_text(const policy::setting_key& k) {
  switch (k.type) {
    case policy::setting_type::level: return "paranoid | standard | trusted | yolo";
    case policy::setting_type::durability: return "none | write | fsync";
    case policy::setting_type::boolean: return "true | false";
    case policy::setting_type::whole_number: return std::to_string(k.min) + ".." + std::to_string(k.max);
    case policy::setting_type::path_list: return "list of paths";
    case policy::setting_type::pattern_list: return "list of glob patterns";
    case policy::setting_type::name_list: return "list of names";
  }
  return {};
}

std::string key_list() {
  std::string out;
  for (const auto& k : policy::setting_keys()) {
    std::string name(k.name);
    name.resize(std::max<std::size_t>(name.size() + 2, 31), ' ');
    out += "  " + name + value_text(k) + "\n";
  }
  return out;
}

}  // namespace

void add_config_commands(CLI::App& app, command_context& ctx) {
  auto* config = app.add_subcommand("config", "Settings and permissions");
  config->require_subcommand(1);
  auto o = std::make_shared<config_options>();

  auto* get = config->add_subcommand("get", "Print a setting as a session here uses it (global merged with project)");
  get->add_option("key", o->key, "Dotted key, e.g. security.level (none: every setting)");
  auto* g_global = get->add_flag("--global", o->global, "The value written in $DHARA_HOME/config.json");
  get->add_flag("--project", o->project, "The value written in <project>/.dhara/config.json")->excludes(g_global);
  get->add_flag("--json", o->json, "Print JSON (strings quoted)");
  get->footer("Strings print alone, other values as compact JSON; a value not set in the file\n"
              "named by --global/--project prints nothing (null with --json).\n\nExamples:\n"
              "  dhara config get security.level\n  dhara config get security.allowedPaths --json\n"
              "  dhara config get --project security.level\n  dhara config get security.audit\n"
              "  dhara config get\n\nKeys:\n" + key_list() + "Every key is described in docs/configuration.md.");
  get->callback([&ctx, o] { ctx.action = [o] { return config_get(*o); }; });

  auto* set = config->add_subcommand("set", "Change a setting in $DHARA_HOME/config.json (--project: the project file)");
  set->add_option("key", o->key, "Dotted key, e.g. security.level")->required();
  set->add_option("value", o->value, "JSON when it parses as JSON, else a plain string");
  auto* s_project = set->add_flag("--project", o->project, "Write <project>/.dhara/config.json");
  set->add_flag("--global", o->global, "Write $DHARA_HOME/config.json (the default)")->excludes(s_project);
  auto* add = set->add_option("--add", o->add, "Append one entry to a list key");
  auto* remove = set->add_option("--remove", o->remove, "Remove one entry (as written) from a list key")->excludes(add);
  set->footer("VALUE is JSON when it parses as JSON (true, 120000, '[\"a\",\"b\"]'), else a plain string\n"
              "(paranoid). A list is replaced whole by a JSON array; --add/--remove change one entry.\n"
              "The global file takes absolute or ~ paths only; a project file may use paths relative\n"
              "to the project. A project may only tighten security unless it is listed in the global\n"
              "security.trustedProjects: a loosening is written but ignored, with the session's warning.\n"
              "security.trustedProjects and requireOsSandbox false are refused in a project file.\n\nExamples:\n"
              "  dhara config set security.level paranoid\n"
              "  dhara config set security.deniedPaths '[\"~/.aws\", \"/etc/passwd\"]'\n"
              "  dhara config set security.deniedPaths --add ~/.kube\n"
              "  dhara config set security.trustedProjects --add ~/src/my-app\n"
              "  dhara config set extensions.callTimeoutMs 300000\n"
              "  dhara config set --project security.allowedPaths '[\"src\", \"docs\"]'\n\nKeys:\n" +
              key_list() + "Every key is described in docs/configuration.md.");
  set->callback([&ctx, o, add, remove] {
    // An empty entry is not a missing one (it said "give a VALUE" to `--add ''`: a review).
    for (const CLI::Option* opt : {add, remove})
      if (opt->count() > 0 && !opt->results().empty() && opt->results().back().empty())
        throw CLI::ValidationError(opt->get_name() + " was given an empty entry; give the entry itself");
    int given = !o->value.empty() + !o->add.empty() + !o->remove.empty();
    if (given != 1)
      throw CLI::ValidationError(given == 0 ? "give a VALUE (or --add/--remove ENTRY for a list key)"
                                            : "give either a VALUE or --add/--remove, not both");
    ctx.action = [o] { return config_set(*o); };
  });

  auto* unset = config->add_subcommand("unset", "Remove a setting from $DHARA_HOME/config.json (--project: the project file)");
  unset->add_option("key", o->key, "Dotted key, e.g. security.level")->required();
  auto* u_project = unset->add_flag("--project", o->project, "Remove it from <project>/.dhara/config.json");
  unset->add_flag("--global", o->global, "Remove it from $DHARA_HOME/config.json (the default)")->excludes(u_project);
  unset->footer("The setting falls back to the other file or the default. An unknown key is removed\n"
                "too when the file holds it (a typo the session warns about).\n\nExamples:\n"
                "  dhara config unset security.level\n  dhara config unset --project extensions.callTimeoutMs");
  unset->callback([&ctx, o] { ctx.action = [o] { return config_unset(*o); }; });

  add_permissions_commands(*config, ctx);
}

}  // namespace dhara::cli
