// Loading config, manifests and permissions into a compiled policy snapshot.
#include "broker/policy_loader.hpp"

#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "io/path_resolver.hpp"
#include "io/permissions_file.hpp"
#include "io/yaml.hpp"

namespace dhara::broker {
namespace {

namespace fs = std::filesystem;
using policy::errc;

// Reads and parses one config file; a missing file is an empty layer.
policy::result<policy::parsed_layer> load_layer(const std::string& path, policy::layer_kind kind) {
  auto text = io::read_text_file(path);
  if (!text) {
    if (text.err().code == errc::not_found) return policy::parsed_layer{};
    return text.err();
  }
  return policy::parse_settings(*text, path, kind);
}

// Extension folders in one extension dir: <dir>/<name>/ and <dir>/@scope/<name>/.
std::vector<fs::path> extension_folders(const std::string& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_directory(ec)) continue;
    std::string name = entry.path().filename().string();
    if (name.starts_with('@')) {
      for (const auto& scoped : fs::directory_iterator(entry.path(), ec))
        if (scoped.is_directory(ec)) out.push_back(scoped.path());
    } else if (!name.starts_with('.')) {
      out.push_back(entry.path());
    }
  }
  std::sort(out.begin(), out.end());  // a stable order for listings and duplicate handling
  return out;
}

}  // namespace

policy::result<policy::manifest> load_manifest(const std::filesystem::path& folder) {
  std::string json_path = (folder / "manifest.json").string();
  std::string yaml_path = (folder / "manifest.yaml").string();
  auto json_text = io::read_text_file(json_path);
  auto yaml_text = io::read_text_file(yaml_path);
  bool has_json = json_text || json_text.err().code != policy::errc::not_found;
  bool has_yaml = yaml_text || yaml_text.err().code != policy::errc::not_found;
  if (has_json && has_yaml)
    return policy::make_error(policy::errc::invalid_value,
                              folder.string() + " has both manifest.json and manifest.yaml; remove one");
  if (has_json) {
    if (!json_text) return json_text.err();
    return io::load_manifest_text(*json_text, false, json_path);
  }
  if (has_yaml) {
    if (!yaml_text) return yaml_text.err();
    return io::load_manifest_text(*yaml_text, true, yaml_path);
  }
  return policy::make_error(policy::errc::not_found, folder.string() + " has no manifest.json or manifest.yaml");
}

policy::result<loaded_policy> load_policy(const io::locations& where, bool interactive) {
  loaded_policy out;
  out.where = where;

  auto global = load_layer(where.dhara_home + "/config.json", policy::layer_kind::global);
  if (!global) return global.err();
  std::optional<policy::parsed_layer> project;
  if (where.project_root != where.dhara_home && where.project_dhara_usable()) {
    auto p = load_layer(where.project_root + "/.dhara/config.json", policy::layer_kind::project);
    if (!p) return p.err();
    project = std::move(*p);
  }
  out.warnings = global->warnings;
  if (project) out.warnings.insert(out.warnings.end(), project->warnings.begin(), project->warnings.end());
  policy::merge_context ctx{where.home, where.dhara_home, where.project_root};
  auto merged = policy::merge_settings(global->layer, project ? &project->layer : nullptr, nullptr, ctx);
  out.settings = std::move(merged.effective);
  out.warnings.insert(out.warnings.end(), merged.warnings.begin(), merged.warnings.end());

  // Extensions: global dirs first, so a global extension wins over a project one.
  std::vector<std::pair<std::string, bool>> dirs;
  for (const std::string& d : out.settings.extension_dirs) dirs.emplace_back(d, false);
  if (where.project_dhara_usable())  // else the global folder (listed above when in extensionDirs), or not ours
    dirs.emplace_back(where.project_root + "/.dhara/extensions", true);
  std::map<std::string, std::string> seen;  // name → folder
  for (const auto& [dir, from_project] : dirs) {
    for (const fs::path& folder : extension_folders(dir)) {
      if (from_project && !out.settings.project_trusted) {
        out.skipped.push_back({folder.string(), "project extensions start only in a trusted project; add '" +
                                                    where.project_root + "' to security.trustedProjects in " +
                                                    where.dhara_home + "/config.json"});
        continue;
      }
      auto m = load_manifest(folder);
      if (!m) {
        out.skipped.push_back({folder.string(), m.err().message});
        // Said at every start: its tools are gone, and a bare tool name it shared with another
        // extension then runs there without a word (a review).
        out.warnings.push_back("the extension in " + folder.string() + " is skipped: " + m.err().message);
        continue;
      }
      auto [it, inserted] = seen.emplace(m->name, folder.string());
      if (!inserted) {
        out.skipped.push_back({folder.string(), "another extension named '" + m->name + "' is already loaded from " + it->second});
        out.warnings.push_back("extension '" + m->name + "' in " + folder.string() + " skipped: " + it->second + " has the same name");
        continue;
      }
      out.extensions.push_back({std::move(*m), folder.string(), from_project});
    }
  }

  auto perms = io::read_permissions(io::permissions_path(where.dhara_home));
  if (!perms) return perms.err();  // never guessed, never rewritten: the user fixes the file
  out.permissions = std::move(perms->value);
  for (auto& w : perms->warnings) out.warnings.push_back(w);

  // An installed extension may be a link to a folder elsewhere (a development copy). That
  // folder is protected as the extension folders are (read-only to the sandbox, denied to
  // tools): else an extension allowed to write there could rewrite the other's code, and a
  // sibling could run the programs in it.
  std::vector<std::string> real_dirs;
  for (const std::string& d : out.settings.protected_extension_dirs)
    if (char real[PATH_MAX]; ::realpath(d.c_str(), real)) real_dirs.emplace_back(real);
  for (const discovered_extension& e : out.extensions) {
    char real[PATH_MAX];
    if (!::realpath(e.folder.c_str(), real) || e.folder == real) continue;  // no link on the way
    const std::string folder = real;
    if (std::none_of(real_dirs.begin(), real_dirs.end(),
                     [&](const std::string& d) { return policy::is_at_or_under(folder, d); })) {
      out.settings.protected_extension_dirs.push_back(folder);
      real_dirs.push_back(folder);
    }
  }
  out.inputs = {out.settings, where.home, where.dhara_home, where.project_root, where.cwd, interactive, {}};
  for (const discovered_extension& e : out.extensions) {
    out.inputs.extensions.emplace_back(e.manifest, e.folder);
    auto it = out.permissions.entries.find(e.manifest.name);
    if (it != out.permissions.entries.end() &&
        !policy::entry_applies_to(it->second, e.manifest.name, e.folder, where.dhara_home))
      out.warnings.push_back("permissions recorded for '" + e.manifest.name + "' were given to another folder; " +
                             e.folder + " inherits nothing (pending)");
  }
  io::real_path_resolver resolver;
  auto snap = policy::compile_session(out.inputs, out.permissions, 1, resolver);
  if (!snap) return snap.err();
  out.snapshot = std::make_shared<const policy::policy_snapshot>(std::move(*snap));
  return out;
}

}  // namespace dhara::broker
