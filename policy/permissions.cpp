// The permissions.json model: parsing (strict on what grants, tolerant of unknown fields),
// stable serialization, and what an entry grants at a level after a version change.
#include "policy/permissions.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "policy/json_text.hpp"
#include "policy/manifest.hpp"
#include "policy/text.hpp"

namespace dhara::policy {
namespace {

using json = nlohmann::json;

constexpr std::string_view file_name = "permissions.json";
constexpr std::size_t max_shown_bytes = 64;
constexpr std::size_t max_suggest_bytes = 64;  // edit distance is quadratic: skip huge keys

// The file may be hand-edited; escape what it holds before it reaches a terminal.
std::string shown(std::string_view s) { return "'" + printable_excerpt(s, max_shown_bytes) + "'"; }

bool is_known_key(std::string_view key) {
  return key == "version" || key == "capabilities" || key == "approvedAt" || key == "approvedBy" ||
         key == "folder" || key == "scope";
}

std::string where(std::string_view ext, std::string_view field) {
  return std::string(file_name) + ": " + shown(ext) + ": " + std::string(field) + ": ";
}

std::optional<error> read_string(const json& v, std::string_view ext, std::string_view field,
                                 std::string& out) {
  if (!v.is_string())
    return make_error(errc::invalid_type, where(ext, field) + "expected a string, got " +
                                              std::string(json_type_name(v)));
  out = v.get<std::string>();
  return std::nullopt;
}

constexpr std::string_view scope_keys[] = {"network.outbound", "process.commands"};

// "scope": {"network.outbound": [...] | null, "process.commands": [...] | null}. null: the
// manifest had no list (anything); a key left out reached nothing (an approval then holds for
// no list at all: asked again rather than granted wider).
result<capability_scope> read_scope(const json& v, std::string_view ext) {
  if (!v.is_object())
    return make_error(errc::invalid_type, where(ext, "scope") + "expected an object, got " + std::string(json_type_name(v)));
  capability_scope scope{std::vector<std::string>{}, std::vector<std::string>{}};
  for (const auto& [key, value] : v.items()) {
    const bool network = key == scope_keys[0];
    if (!network && key != scope_keys[1])
      return make_error(errc::invalid_value, where(ext, "scope") + shown(key) + " is not one of \"network.outbound\" and "
                                             "\"process.commands\" (remove it)");
    auto& list = network ? scope.network_domains : scope.process_commands;
    if (value.is_null()) {
      list.reset();
      continue;
    }
    const std::string field = "scope." + key;
    if (!value.is_array())
      return make_error(errc::invalid_type, where(ext, field) + "expected an array of strings or null, got " +
                                                std::string(json_type_name(value)));
    for (const json& item : value) {
      if (!item.is_string())
        return make_error(errc::invalid_type, where(ext, field) + "expected strings, got " + std::string(json_type_name(item)));
      list->push_back(item.get<std::string>());
    }
  }
  return scope;
}

result<permission_entry> parse_entry(std::string_view ext, const json& v,
                                     std::vector<std::string>& warnings) {
  if (!v.is_object())
    return make_error(errc::invalid_type, std::string(file_name) + ": " + shown(ext) +
                                              ": expected an object, got " +
                                              std::string(json_type_name(v)));
  permission_entry e;
  bool has_version = false;
  for (const auto& [key, value] : v.items()) {
    if (key == "version") {
      if (auto err = read_string(value, ext, key, e.version)) return *err;
      has_version = true;
    } else if (key == "capabilities") {
      if (!value.is_object())
        return make_error(errc::invalid_type, where(ext, key) + "expected an object, got " +
                                                  std::string(json_type_name(value)));
      for (const auto& [cap, state] : value.items()) {
        std::string field = "capabilities." + printable_excerpt(cap);
        if (!state.is_string() || (state != "approved" && state != "denied"))
          return make_error(errc::invalid_value,
                            where(ext, field) + "expected \"approved\" or \"denied\", got " +
                                (state.is_string() ? shown(state.get_ref<const std::string&>())
                                                   : std::string(json_type_name(state))) +
                                " (remove the key to make it pending)");
        e.capabilities[cap] = state == "approved" ? permission_state::approved : permission_state::denied;
        if (!parse_capability_pattern(cap)) {
          std::string hint;
          if (cap.size() <= max_suggest_bytes) {
            const auto& names = capability_names();
            hint = did_you_mean(cap, std::span<const std::string_view>(names.data(), names.size()));
          }
          warnings.push_back(std::string(file_name) + ": " + shown(ext) + ": " + shown(cap) +
                             " is not a known capability or group wildcard" + hint +
                             "; it is kept but grants and denies nothing");
        }
      }
    } else if (key == "scope") {
      auto scope = read_scope(value, ext);
      if (!scope) return scope.err();
      e.scope = std::move(*scope);
    } else if (key == "approvedAt" || key == "approvedBy" || key == "folder") {
      std::string s;
      if (auto err = read_string(value, ext, key, s)) return *err;
      (key == "approvedAt" ? e.approved_at : key == "approvedBy" ? e.approved_by : e.folder) = std::move(s);
    } else {
      e.extra[key] = value;
    }
  }
  if (!has_version)
    return make_error(errc::missing_field,
                      where(ext, "version") + "required field is missing (approvals are bound to a version)");
  return e;
}

result<parsed_permissions> parse_json_impl(const json& doc) {
  if (!doc.is_object())
    return make_error(errc::invalid_type, std::string(file_name) +
                                              ": expected an object of extensions at the top level, got " +
                                              std::string(json_type_name(doc)));
  parsed_permissions out;
  for (const auto& [ext, v] : doc.items()) {
    auto entry = parse_entry(ext, v, out.warnings);
    if (!entry) return entry.err();
    if (!is_valid_extension_name(ext))
      out.warnings.push_back(std::string(file_name) + ": " + shown(ext) +
                             " is not a valid extension name, so no extension can load under it; "
                             "the entry is kept but applies to nothing");
    out.value.entries.emplace(ext, std::move(*entry));
  }
  return out;
}

// What a set of stored keys stands for; unknown keys stand for nothing.
capability_set expand(const permission_entry& entry, permission_state wanted) {
  capability_set set;
  for (const auto& [key, state] : entry.capabilities) {
    if (state != wanted) continue;
    if (auto caps = parse_capability_pattern(key)) set = set | *caps;
  }
  return set;
}

}  // namespace

std::string_view to_string(permission_state s) {
  switch (s) {
    case permission_state::approved: return "approved";
    case permission_state::denied: return "denied";
  }
  return "denied";
}

result<parsed_permissions> parse_permissions(std::string_view text) {
  bool blank = std::all_of(text.begin(), text.end(),
                           [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
  if (blank) return parsed_permissions{};  // an empty file means {} (DESIGN §9)
  auto doc = parse_json_document(text, file_name);
  if (!doc) {
    if (doc.err().code != errc::parse_error) return doc.err();
    return make_error(errc::parse_error, doc.err().message + "; fix the file by hand (dhara will not overwrite it)");
  }
  return parse_permissions_json(*doc);
}

result<parsed_permissions> parse_permissions_json(const nlohmann::json& doc) {
  try {
    return parse_json_impl(doc);
  } catch (const std::exception& e) {
    return make_error(errc::invalid_value, std::string(file_name) + ": cannot be read: " + printable_excerpt(e.what()));
  }
}

std::string serialize_permissions(const permissions& p) {
  // ordered_json keeps the seed's key order; unknown fields follow in sorted order, which
  // keeps a parse → serialize round trip byte-stable.
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& [name, e] : p.entries) {
    nlohmann::ordered_json o = nlohmann::ordered_json::object();
    o["version"] = e.version;
    nlohmann::ordered_json caps = nlohmann::ordered_json::object();
    for (const auto& [key, state] : e.capabilities) caps[key] = std::string(to_string(state));
    o["capabilities"] = std::move(caps);
    if (e.approved_at) o["approvedAt"] = *e.approved_at;
    if (e.approved_by) o["approvedBy"] = *e.approved_by;
    if (e.folder) o["folder"] = *e.folder;
    if (e.scope) {
      nlohmann::ordered_json scope = nlohmann::ordered_json::object();
      scope[std::string(scope_keys[0])] = e.scope->network_domains ? nlohmann::ordered_json(*e.scope->network_domains) : nullptr;
      scope[std::string(scope_keys[1])] = e.scope->process_commands ? nlohmann::ordered_json(*e.scope->process_commands) : nullptr;
      o["scope"] = std::move(scope);
    }
    if (e.extra.is_object())
      for (const auto& [key, value] : e.extra.items())
        if (!is_known_key(key)) o[key] = nlohmann::ordered_json(value);
    out[name] = std::move(o);
  }
  // Strings set by callers (a folder path) may not be UTF-8; replacing the bad bytes keeps
  // this from throwing. Only an allocation failure can still throw here.
  return out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

capability_scope scope_of(const manifest& m) { return {m.network_domains, m.process_commands}; }

capability_set widened(const capability_scope& then, const capability_scope& now) {
  using list = std::optional<std::vector<std::string>>;
  auto wider = [](const list& before, const list& after) {
    if (!before) return false;  // anything already
    if (!after) return true;    // a list, now anything
    return std::any_of(after->begin(), after->end(), [&](const std::string& x) {
      return std::find(before->begin(), before->end(), x) == before->end();
    });
  };
  capability_set out;
  if (wider(then.network_domains, now.network_domains)) {
    out.insert(capability::network_fetch);
    out.insert(capability::network_outbound);
  }
  if (wider(then.process_commands, now.process_commands)) out.insert(capability::process_spawn);
  return out;
}

effective_permissions effective_for(const permission_entry& entry, std::string_view current_version,
                                    security_level level, const capability_scope* current) {
  // Paranoid binds every approval to the version the user saw: a new version asks again.
  if (level == security_level::paranoid && entry.version != current_version) return {};
  effective_permissions eff;
  eff.denied = expand(entry, permission_state::denied);
  // Implication first, denial last: "network:outbound" approved with "network:fetch"
  // denied leaves fetch denied.
  eff.approved = with_implied(expand(entry, permission_state::approved)).minus(eff.denied);
  // An approval holds as far as the manifest reached when it was given.
  if (current && entry.scope) eff.approved = eff.approved.minus(widened(*entry.scope, *current));
  return eff;
}

bool entry_applies_to(const permission_entry& entry, std::string_view name, std::string_view folder,
                      std::string_view dhara_home) {
  // No extension can load under a name that is not a safe folder name; refusing it here
  // also keeps "<home>/extensions/../x" from matching.
  if (!is_valid_extension_name(name)) return false;
  if (entry.folder) return *entry.folder == folder;
  // A hand-written entry (seed shape) belongs to the globally installed extension only.
  if (dhara_home.empty()) return false;
  while (dhara_home.size() > 1 && dhara_home.back() == '/') dhara_home.remove_suffix(1);
  std::string expected(dhara_home);
  if (expected != "/") expected += '/';
  expected += "extensions/";
  expected += name;
  return folder == expected;
}

result<permission_entry> record(permissions& p, std::string_view ext, std::string_view pattern,
                                permission_state state, std::string_view version,
                                std::string_view folder, std::string_view now_iso8601, security_level level,
                                const capability_scope* scope) {
  try {
    if (!is_valid_extension_name(ext))
      return make_error(errc::invalid_value, shown(ext) + " is not a valid extension name");
    auto caps = parse_capability_pattern(pattern);
    if (!caps) return caps.err();
    std::optional<std::string> target;
    if (!folder.empty()) target = std::string(folder);

    auto [it, created] = p.entries.try_emplace(std::string(ext));
    permission_entry& e = it->second;
    if (!created && e.folder && e.folder != target) {
      // Approvals given to an extension in another folder are not this one's to inherit.
      e.capabilities.clear();
      e.approved_at.reset();
      e.approved_by.reset();
    }
    rebind_version(e, version, level);
    if (scope) rebind_scope(e, *scope);
    e.folder = std::move(target);
    e.capabilities[std::string(pattern)] = state;
    e.approved_at = std::string(now_iso8601);
    e.approved_by = "user";
    return e;
  } catch (const std::exception& e) {
    return make_error(errc::invalid_value, "cannot record the permission: " + printable_excerpt(e.what()));
  }
}

void rebind_version(permission_entry& entry, std::string_view version, security_level level) {
  if (entry.version == version) return;
  if (level == security_level::paranoid) entry.capabilities.clear();
  entry.version = std::string(version);
}

void rebind_scope(permission_entry& entry, const capability_scope& scope) {
  if (entry.scope) {
    const capability_set wider = widened(*entry.scope, scope);
    if (!wider.empty())
      std::erase_if(entry.capabilities, [&](const auto& kv) {
        if (kv.second != permission_state::approved) return false;
        auto caps = parse_capability_pattern(kv.first);
        return caps && !(with_implied(*caps) & wider).empty();
      });
  }
  entry.scope = scope;
}

bool reset(permissions& p, std::string_view ext) { return p.entries.erase(std::string(ext)) > 0; }

}  // namespace dhara::policy
