// libFuzzer target for policy/settings: config bytes parsed as every layer kind and merged,
// checking that nothing crashes and that an untrusted project never loosens the result.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "policy/path_rules.hpp"
#include "policy/settings.hpp"

using namespace dhara::policy;

namespace {

const merge_context ctx{"/home/u", "/home/u/.dhara", "/home/u/proj"};

// An invariant the merge must keep, whatever the input: abort so libFuzzer records it.
void require(bool ok) {
  if (!ok) std::abort();
}

bool contains(const std::vector<std::string>& list, const std::string& s) {
  for (const auto& e : list)
    if (e == s) return true;
  return false;
}

// Each denied path has its name for reasons: as a layer wrote it, then where.
const settings& check_named(const settings& s) {
  require(s.denied_paths_named.size() == s.denied_paths.size());
  for (const auto& n : s.denied_paths_named)
    require(n.find(" (deniedPaths ") != std::string::npos && n.ends_with(")"));
  return s;
}

// What a project may never do unless trusted: everything in `base` (the merge without the
// project) must still hold in `merged`.
void check_only_tightened(const settings& base, const settings& merged) {
  if (merged.project_trusted) return;
  require(at_least_as_strict(merged.level, base.level));
  for (const auto& d : base.denied_paths) require(contains(merged.denied_paths, d));
  for (const auto& a : merged.trusted_authors) require(contains(base.trusted_authors, a));
  for (const auto& p : merged.audit_ignore_patterns) require(contains(base.audit_ignore_patterns, p));
  for (const auto& e : merged.extension_dirs) require(contains(base.extension_dirs, e));
  require(merged.trusted_projects == base.trusted_projects);
  require(merged.require_os_sandbox || !base.require_os_sandbox);
  require(static_cast<int>(merged.audit_durability) >= static_cast<int>(base.audit_durability));
  require(merged.audit_max_bytes == base.audit_max_bytes && merged.audit_keep == base.audit_keep);
  require(merged.call_timeout_ms <= base.call_timeout_ms);
  require(merged.cancel_grace_ms <= base.cancel_grace_ms);
  require(merged.kill_grace_ms <= base.kill_grace_ms);
  require(merged.max_restarts <= base.max_restarts);
  require(merged.max_line_bytes <= base.max_line_bytes);
  require(merged.restart_window_ms >= base.restart_window_ms);
  // Every allowed entry lies inside the project (literal entries; globs are anchored by
  // their literal directory, which the merge checks the same way).
  if (merged.allowed_paths == base.allowed_paths) return;
  bool literal_base = true;
  for (const auto& b : base.allowed_paths) literal_base = literal_base && !has_glob(b);
  for (const auto& a : merged.allowed_paths) {
    if (has_glob(a)) continue;
    require(is_at_or_under(a, ctx.project_root));
    if (!literal_base) continue;
    bool under_base = false;
    for (const auto& b : base.allowed_paths) under_base = under_base || is_at_or_under(a, b);
    require(under_base);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view all(reinterpret_cast<const char*>(data), size);
  for (layer_kind kind : {layer_kind::global, layer_kind::project, layer_kind::cli}) {
    auto parsed = parse_settings(all, "fuzz.json", kind);
    if (!parsed) {
      require(!parsed.err().message.empty());
      continue;
    }
    switch (kind) {
      case layer_kind::global: check_named(merge_settings(parsed->layer, nullptr, nullptr, ctx).effective); break;
      case layer_kind::project: check_named(merge_settings(settings_layer{}, &parsed->layer, nullptr, ctx).effective); break;
      case layer_kind::cli: check_named(merge_settings(settings_layer{}, nullptr, &parsed->layer, ctx).effective); break;
    }
  }

  // Two files in one input, split at the first 0xFF byte (never valid in JSON text): a
  // global file and a project file, checked for "the project only tightened".
  std::size_t cut = all.find('\xff');
  if (cut == std::string_view::npos) return 0;
  auto global = parse_settings(all.substr(0, cut), "global.json", layer_kind::global);
  auto project = parse_settings(all.substr(cut + 1), "project.json", layer_kind::project);
  if (!global || !project) return 0;
  settings base = merge_settings(global->layer, nullptr, nullptr, ctx).effective;
  merged_settings merged = merge_settings(global->layer, &project->layer, nullptr, ctx);
  check_only_tightened(check_named(base), check_named(merged.effective));
  return 0;
}
