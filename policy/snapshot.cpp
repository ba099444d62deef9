// Snapshot compilation and decide(): the single place where a capability check is decided.
#include "policy/snapshot.hpp"

#include <algorithm>
#include <cstdint>

namespace dhara::policy {
namespace {

decision deny(std::string reason, decider by = decider::rule, std::string_view rule = {}) {
  return {verdict_kind::deny, std::move(reason), by, rule};
}

path_access access_for(capability cap) {
  return cap == capability::filesystem_write ? path_access::write : path_access::read;
}

// The subject's own rules: paths, URLs, commands.
decision check_subject(const policy_snapshot& s, const extension_policy& ext,
                       const check_request& r, const check_environment& env) {
  static const lexical_resolver lexical;
  switch (r.kind) {
    case subject_kind::none: return {verdict_kind::allow, {}, decider::rule, {}};
    case subject_kind::path:
      return check_path(s.paths, r.subject, s.cwd, s.home, access_for(r.cap),
                        env.paths ? *env.paths : lexical);
    case subject_kind::url: return check_url(ext.domains, r.subject, env.hosts);
    case subject_kind::command_string: return check_command_string(ext.commands, r.subject, env.executables);
    case subject_kind::argv: return check_argv(ext.commands, r.argv, env.executables);
  }
  return deny("unknown subject kind", decider::failure);
}

}  // namespace

void extension_table::place(std::uint64_t hash, std::uint32_t index) {
  const std::size_t mask = slots_.size() - 1;
  std::size_t at = hash >> shift_;
  while (slots_[at] != 0) at = (at + 1) & mask;
  slots_[at] = index + 1;
}

std::pair<extension_table::const_iterator, bool> extension_table::emplace(std::string name, extension_policy ext) {
  if (const_iterator there = find(name); there != end()) return {there, false};
  entries_.emplace_back(std::move(name), std::move(ext));
  if (slots_.size() < 2 * entries_.size()) {  // grown: every entry placed again
    std::size_t n = 8;
    shift_ = 61;
    while (n < 2 * entries_.size()) n *= 2, --shift_;
    slots_.assign(n, 0);
    for (std::size_t i = 0; i < entries_.size(); ++i) place(hash_of(entries_[i].first), static_cast<std::uint32_t>(i));
  } else {
    place(hash_of(entries_.back().first), static_cast<std::uint32_t>(entries_.size() - 1));
  }
  return {&entries_.back(), true};
}

std::size_t extension_table::longest_probe() const {
  std::size_t longest = 0;
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    std::size_t reads = 1;
    for (std::size_t at = hash_of(entries_[i].first) >> shift_; slots_[at] != i + 1; at = (at + 1) & mask) {
      if (slots_[at] == 0 || reads == slots_.size()) return SIZE_MAX;  // not placed: the table is broken
      ++reads;
    }
    longest = std::max(longest, reads);
  }
  return longest;
}

std::string approve_command(std::string_view extension, capability cap) {
  return "dhara config permissions approve " + std::string(extension) + " " + std::string(to_string(cap));
}

result<policy_snapshot> compile_snapshot(const snapshot_input& in, const path_resolver& resolver) {
  if (!in.config) return make_error(errc::missing_field, "no settings to compile a policy snapshot from");
  const settings& cfg = *in.config;
  policy_snapshot snap;
  snap.generation = in.generation;
  snap.level = cfg.level;
  snap.interactive = in.interactive;
  snap.home = in.home;
  snap.cwd = in.cwd;

  path_rules_input paths{cfg.allowed_paths, cfg.denied_paths, in.home, in.dhara_home, in.project_root};
  paths.extension_dirs = cfg.protected_extension_dirs;
  paths.denied_named = cfg.denied_paths_named;
  if (cfg.allowed_confined_to) {
    paths.confine_root = cfg.allowed_confined_to->project_root;
    paths.confine_within = cfg.allowed_confined_to->within;
  }
  auto compiled = compile_path_rules(paths, resolver);
  if (!compiled) return compiled.err();
  snap.paths = std::move(*compiled);
  snap.problems = snap.paths.problems;
  // What yolo keeps: only the built-in state-file denials, everything else allowed.
  path_rules_input state{{"/"}, {}, in.home, in.dhara_home, in.project_root, /*only_state_files=*/true};
  state.extension_dirs = cfg.protected_extension_dirs;
  auto state_rules = compile_path_rules(state, resolver);
  if (!state_rules) return state_rules.err();
  snap.state_files = std::move(*state_rules);

  for (const extension_input& e : in.extensions) {
    if (!e.extension_manifest) continue;
    const manifest& m = *e.extension_manifest;
    extension_policy ext;
    ext.name = m.name;
    ext.version = m.version;
    ext.folder = e.folder;
    ext.declared = m.capabilities;
    if (e.permissions) {
      const capability_scope scope = scope_of(m);
      effective_permissions eff = effective_for(*e.permissions, m.version, cfg.level, &scope);
      ext.approved_by_user = eff.approved;
      ext.denied = eff.denied;
    }
    bool trusted = m.author && is_trusted_author(cfg.trusted_authors, *m.author, m.name);
    ext.pending = pending_rule(cfg.level, trusted);
    if (ext.pending == pending_action::approve_trusted_author)
      ext.approved_by_author = with_implied(ext.declared).minus(ext.denied).minus(ext.approved_by_user);
    ext.domains = compile_domain_rules(m.network_domains);
    ext.commands = compile_command_rules(m.process_commands);
    std::string name = ext.name;
    if (!snap.extensions.emplace(std::move(name), std::move(ext)).second)
      snap.problems.push_back("extension '" + m.name + "' is defined twice; the first one is used");
  }
  return snap;
}

result<policy_snapshot> compile_session(const session_inputs& inputs, const permissions& perms,
                                        std::uint64_t generation, const path_resolver& resolver) {
  snapshot_input in;
  in.config = &inputs.config;
  in.home = inputs.home;
  in.dhara_home = inputs.dhara_home;
  in.project_root = inputs.project_root;
  in.cwd = inputs.cwd;
  in.interactive = inputs.interactive;
  in.generation = generation;
  for (const auto& [m, folder] : inputs.extensions) {
    const permission_entry* entry = nullptr;
    if (auto it = perms.entries.find(m.name);
        it != perms.entries.end() && entry_applies_to(it->second, m.name, folder, inputs.dhara_home))
      entry = &it->second;
    in.extensions.push_back({&m, folder, entry});
  }
  return compile_snapshot(in, resolver);
}

policy_snapshot failed_snapshot(std::string reason, std::uint64_t generation) {
  policy_snapshot snap;
  snap.generation = generation;
  snap.level = security_level::paranoid;
  snap.failure = std::move(reason);
  return snap;
}

decision decide(const policy_snapshot& s, const check_request& r, const check_environment& env) {
  if (!s.failure.empty()) return failure_decision(s.failure);
  auto it = s.extensions.find(r.extension);
  if (it == s.extensions.end())
    return deny("'" + std::string(r.extension) + "' is not a loaded extension");
  const extension_policy& ext = it->second;

  if (s.level == security_level::yolo) {
    if (r.kind == subject_kind::path) {
      static const lexical_resolver lexical;
      decision d = check_path(s.state_files, r.subject, s.cwd, s.home, access_for(r.cap),
                              env.paths ? *env.paths : lexical);
      if (!d.allowed()) return d;
      // Allowed beneath "/", the state files' one allowed entry: the root and the resolution
      // go with it, so host file operations work at yolo too.
      d.reason = "yolo";
      d.decided_by = decider::yolo;
      return d;
    }
    return {verdict_kind::allow, "yolo", decider::yolo, {}};
  }

  // A capability is usable only if declared (network:fetch also through network:outbound).
  if (!with_implied(ext.declared).contains(r.cap))
    return deny("'" + ext.name + "' does not declare " + std::string(to_string(r.cap)) + " in its manifest");

  decider by;
  if (ext.denied.contains(r.cap)) {
    return deny(std::string(to_string(r.cap)) + " is denied for '" + ext.name + "'; to allow it run '" +
                    approve_command(ext.name, r.cap) + "'",
                decider::user);
  } else if (ext.approved_by_user.contains(r.cap)) {
    by = decider::user;
  } else if (ext.approved_by_author.contains(r.cap)) {
    by = decider::trusted_author;
  } else {
    // Pending: the subject's rules still apply first, so a prompt is never shown for a
    // request that would be refused anyway.
    decision subject = check_subject(s, ext, r, env);
    if (!subject.allowed()) return subject;
    if (!s.interactive)
      return deny(std::string(to_string(r.cap)) + " is not approved for '" + ext.name +
                  "' and this session cannot ask; run '" + approve_command(ext.name, r.cap) + "'");
    // The subject's match (for a path: the allowed root it lies under) goes with the question,
    // so an allowed answer can be acted on like any allowed path.
    return {verdict_kind::ask, std::string(to_string(r.cap)) + " is pending approval", decider::rule,
            subject.matched_rule, std::move(subject.resolved)};
  }

  decision subject = check_subject(s, ext, r, env);
  if (!subject.allowed()) return subject;
  subject.decided_by = by;
  return subject;
}

}  // namespace dhara::policy
