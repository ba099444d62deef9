// `dhara config permissions list | show | approve | revoke | reset` (seed, DESIGN §6, §9):
// the seed's `show` format byte for byte, atomic locked updates of permissions.json, and an
// audit entry (decidedBy: user, details.change) for every change.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/policy_loader.hpp"
#include <CLI/CLI.hpp>

#include "cli/commands.hpp"
#include "cli/permissions_ops.hpp"
#include "io/files.hpp"
#include "io/audit_log.hpp"
#include "io/permissions_file.hpp"
#include "policy/text.hpp"

namespace dhara::cli {
namespace {

using json = nlohmann::json;

// What the commands know about one extension: installed (a manifest) and/or recorded.
struct known_extension {
  const broker::discovered_extension* installed = nullptr;
  const policy::permission_entry* recorded = nullptr;
};

struct context {
  broker::loaded_policy policy;
  std::map<std::string, known_extension> known;
};

std::optional<context> load(int& rc) {
  auto loaded = load_policy_for_command(rc);
  if (!loaded) return std::nullopt;
  context c{std::move(*loaded), {}};
  for (const auto& e : c.policy.extensions) c.known[e.manifest.name].installed = &e;
  for (const auto& [name, entry] : c.policy.permissions.entries) c.known[name].recorded = &entry;
  return c;
}

// The extension named, or exit 2 with the closest known name.
const known_extension* find(const context& c, const std::string& name, int& rc) {
  if (auto it = c.known.find(name); it != c.known.end()) return &it->second;
  std::vector<std::string_view> names;
  for (const auto& [n, k] : c.known) names.push_back(n);
  std::fprintf(stderr, "dhara: unknown extension '%s'%s; 'dhara config permissions list' shows them\n",
               policy::terminal_safe(name).c_str(), policy::terminal_safe(policy::did_you_mean(name, names)).c_str());
  rc = 2;
  return nullptr;
}

std::string version_of(const known_extension& k) {
  return k.installed ? k.installed->manifest.version : k.recorded ? k.recorded->version : std::string();
}

// Catalog position of a stored key ("network:*" sorts with its group's first member).
std::size_t catalog_rank(const std::string& key) {
  auto set = policy::parse_capability_pattern(key);
  if (!set || set->empty()) return policy::capability_count;  // unknown keys last
  std::size_t rank = policy::capability_count;
  set->for_each([&](policy::capability c) { rank = std::min(rank, static_cast<std::size_t>(c)); });
  return rank;
}

// One row of `show`: the state a session holds, and why when that is not what is recorded
// (a trusted author's or the yolo level's grant).
struct row {
  std::string state;  // approved, denied, pending
  std::string key;
  std::string note;
};

// The rows of `show`: approved, then denied, then pending, each in catalog order. A recorded
// state a session does not hold for the installed manifest is pending: every state after an
// upgrade at paranoid, an approval whose reach the manifest widened since (effective_for), and
// an entry given to another folder (entry_applies_to: the installed one inherits nothing).
// What the level grants besides is shown approved, with the reason: a trusted author's
// pending capabilities at `trusted`, everything at `yolo` (they read pending or denied while
// sessions granted them: a review).
std::vector<row> rows_of(const std::string& name, const known_extension& k, const context& c) {
  const policy::security_level level = c.policy.settings.level;
  std::vector<row> approved, denied, pending;
  policy::capability_set covered, lost_approved, lost_denied, user_approved, user_denied;
  const bool applies = !(k.recorded && k.installed &&
                         !policy::entry_applies_to(*k.recorded, name, k.installed->folder, c.policy.where.dhara_home));
  if (!applies) {
    lost_approved = lost_denied = policy::capability_set::all();
  } else if (k.recorded && k.installed) {
    const policy::manifest& m = k.installed->manifest;
    const policy::capability_scope scope = policy::scope_of(m);
    const policy::effective_permissions eff = policy::effective_for(*k.recorded, m.version, level, &scope);
    user_approved = eff.approved;
    user_denied = eff.denied;
    policy::capability_set stored_approved, stored_denied;
    for (const auto& [key, state] : k.recorded->capabilities)
      if (auto set = policy::parse_capability_pattern(key)) {
        auto& into = state == policy::permission_state::approved ? stored_approved : stored_denied;
        into = into | *set;
      }
    lost_approved = policy::with_implied(stored_approved).minus(eff.approved).minus(eff.denied);
    lost_denied = stored_denied.minus(eff.denied);
  }
  // What the level grants beyond the user's answers (policy/snapshot.cpp decides the same way).
  policy::capability_set by_level;
  std::string level_note;
  if (k.installed && level == policy::security_level::yolo) {
    by_level = policy::capability_set::all();
    level_note = "security level yolo";
  } else if (k.installed && level == policy::security_level::trusted) {
    const policy::manifest& m = k.installed->manifest;
    if (m.author && policy::is_trusted_author(c.policy.settings.trusted_authors, *m.author, m.name)) {
      by_level = policy::with_implied(m.capabilities).minus(user_denied).minus(user_approved);
      level_note = "trusted author " + m.author->name;
    }
  }
  // A known capability (or group) wholly granted by the level, not approved already, is shown
  // approved with the reason.
  auto place = [&](std::string state, std::string key, const policy::capability_set* set) {
    if (state != "approved" && set && !set->empty() && set->minus(by_level).empty())
      return approved.push_back({"approved", std::move(key), level_note + (state == "denied" ? "; recorded: denied" : "")});
    (state == "approved" ? approved : state == "denied" ? denied : pending).push_back({std::move(state), std::move(key), {}});
  };
  if (k.recorded) {
    for (const auto& [key, state] : k.recorded->capabilities) {
      bool ok = state == policy::permission_state::approved;
      auto set = policy::parse_capability_pattern(key);
      const policy::capability_set* cap_set = set ? &*set : nullptr;
      if (set && !(*set & (ok ? lost_approved : lost_denied)).empty()) place("pending", key, cap_set);
      else place(ok ? "approved" : "denied", key, cap_set);
      if (set) covered = covered | *set;
    }
  }
  if (k.installed)
    k.installed->manifest.capabilities.minus(covered).for_each([&](policy::capability x) {
      policy::capability_set one;
      one.insert(x);
      place("pending", std::string(policy::to_string(x)), &one);
    });
  auto by_catalog = [](const row& a, const row& b) {
    return std::pair(catalog_rank(a.key), a.key) < std::pair(catalog_rank(b.key), b.key);
  };
  std::vector<row> out;
  for (auto* group : {&approved, &denied, &pending}) {
    std::sort(group->begin(), group->end(), by_catalog);
    out.insert(out.end(), group->begin(), group->end());
  }
  return out;
}

}  // namespace

namespace {

int permissions_list(const global_options&, bool as_json) {
  int rc = 0;
  auto c = load(rc);
  if (!c) return rc;
  json out = json::array();
  for (const auto& [name, k] : c->known) {
    int approved = 0, denied = 0, pending = 0;
    for (const row& r : rows_of(name, k, *c)) {
      if (r.state == "approved") ++approved;
      else if (r.state == "denied") ++denied;
      else ++pending;
    }
    if (as_json) {
      out.push_back({{"name", name}, {"version", version_of(k)}, {"installed", k.installed != nullptr},
                     {"approved", approved}, {"denied", denied}, {"pending", pending}});
      continue;
    }
    // Names and versions may come from a hand-edited permissions.json: shown terminal-safe.
    std::printf("%-24s v%-10s %d approved, %d denied, %d pending%s\n", policy::terminal_safe(name).c_str(),
                policy::terminal_safe(version_of(k)).c_str(), approved,
                denied, pending, k.installed ? "" : " (not installed)");
  }
  if (as_json) std::printf("%s\n", out.dump(2).c_str());
  else if (c->known.empty()) std::printf("No extensions installed or recorded.\n");
  return 0;
}

int permissions_show(const global_options&, const std::string& name, bool as_json) {
  int rc = 0;
  auto c = load(rc);
  if (!c) return rc;
  const known_extension* k = find(*c, name, rc);
  if (!k) return rc;
  auto rows = rows_of(name, *k, *c);
  if (as_json) {
    json caps = json::object(), granted = json::object();
    for (const row& r : rows) {
      caps[r.key] = r.state;
      if (!r.note.empty()) granted[r.key] = r.note;
    }
    json out = {{"name", name}, {"version", version_of(*k)}, {"capabilities", caps}};
    if (!granted.empty()) out["grantedBy"] = granted;
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("Extension: %s v%s\n", policy::terminal_safe(name).c_str(), policy::terminal_safe(version_of(*k)).c_str());
  for (const row& r : rows)
    std::printf("  %-10s %s%s\n", ("[" + r.state + "]").c_str(), policy::terminal_safe(r.key).c_str(),
                r.note.empty() ? "" : ("  (" + policy::terminal_safe(r.note) + ")").c_str());
  return 0;
}

int permissions_change(const global_options&, const std::string& action, const std::string& name,
                       const std::string& cap, bool all) {
  int rc = 0;
  auto c = load(rc);
  if (!c) return rc;
  const known_extension* k = find(*c, name, rc);
  if (!k) return rc;
  std::string path = io::permissions_path(c->policy.where.dhara_home);
  std::vector<policy::audit_entry> entries;

  if (action == "reset") {
    if (!k->recorded) {
      std::fprintf(stderr, "dhara: '%s' has no recorded permissions; nothing to reset\n", name.c_str());
      return 2;
    }
    auto done = io::update_permissions(path, [&](policy::permissions& p) -> policy::result<bool> { return policy::reset(p, name); });
    if (!done) {
      std::fprintf(stderr, "dhara: %s\n", done.err().message.c_str());
      return 1;
    }
    entries.push_back(user_change_entry(name, "*", false, "reset"));
    std::printf("%s: permissions reset; every capability is pending again\n", name.c_str());
    return audit_user_changes(c->policy, std::move(entries)) ? 0 : 1;
  }

  std::vector<std::string> caps;
  if (all) {
    if (!k->installed) {
      std::fprintf(stderr, "dhara: --all needs the installed manifest of '%s' to know what it declares\n", name.c_str());
      return 2;
    }
    k->installed->manifest.capabilities.for_each([&](policy::capability x) { caps.emplace_back(policy::to_string(x)); });
    if (caps.empty()) {
      std::printf("%s declares no capabilities; nothing to approve\n", name.c_str());
      return 0;
    }
  } else {
    auto set = policy::parse_capability_pattern(cap);
    if (!set) {
      std::fprintf(stderr, "dhara: %s\n", set.err().message.c_str());
      return 2;
    }
    if (k->installed) {
      // A group that covers some declared capability grants those now: the warning said it
      // granted nothing (a review, with the docs' own `approve web-tools 'network:*'`).
      const policy::capability_set declared = policy::with_implied(k->installed->manifest.capabilities);
      const policy::capability_set covered = *set & declared;
      auto listed = [](policy::capability_set caps_of) {
        std::string out;
        caps_of.for_each([&](policy::capability x) { out += (out.empty() ? "" : ", ") + std::string(policy::to_string(x)); });
        return out;
      };
      if (covered.empty())
        std::fprintf(stderr, "dhara: warning: %s does not declare %s; recorded anyway (it grants nothing until a "
                     "manifest declares it)\n", name.c_str(), cap.c_str());
      else if (!declared.contains_all(*set))
        std::fprintf(stderr, "dhara: note: %s covers %s, which %s declares; the rest of it applies only once a "
                     "manifest declares it\n", cap.c_str(), listed(covered).c_str(), name.c_str());
    }
    caps.push_back(cap);
  }
  bool approve = action == "approve";
  std::string version = version_of(*k);
  std::string folder = k->installed ? k->installed->folder : (k->recorded && k->recorded->folder ? *k->recorded->folder : "");
  auto stamp = policy::format_timestamp(io::wall_clock_ms());
  for (const std::string& x : caps) entries.push_back(user_change_entry(name, x, approve, approve ? "approve" : "revoke"));
  // An approval is audited before it is recorded: one the trail cannot hold is not made (made
  // first, it was in force with no line saying so). A revocation is recorded first: made
  // without its line, it takes away, never grants.
  if (approve && !audit_user_changes(c->policy, entries, "nothing was approved: the approval could not be audited"))
    return 1;
  std::optional<policy::permission_entry> recorded;  // the entry as this change left it
  std::optional<policy::capability_scope> scope;       // what the installed manifest reaches
  if (k->installed) scope = policy::scope_of(k->installed->manifest);
  auto done = io::update_permissions(path, [&](policy::permissions& p) -> policy::result<bool> {
    for (const std::string& x : caps) {
      auto r = policy::record(p, name, x, approve ? policy::permission_state::approved : policy::permission_state::denied,
                              version, folder, stamp, c->policy.settings.level, scope ? &*scope : nullptr);
      if (!r) return r.err();
      recorded = std::move(*r);
    }
    return true;
  });
  if (!done) {
    std::fprintf(stderr, "dhara: %s%s\n", done.err().message.c_str(),
                 approve ? " (the approval is in the audit trail, but it was not recorded: nothing was approved)" : "");
    return 1;
  }
  for (const std::string& x : caps)
    std::printf("%s: %s %s\n", name.c_str(), x.c_str(), approve ? "approved" : "revoked (denied)");
  if (approve) {
    // A denial recorded for a wider pattern ("filesystem:*") wins over this approval: said, or
    // the user believes the capability approved while every call stays denied.
    const policy::capability_set still = policy::effective_for(*recorded, version, c->policy.settings.level).denied;
    for (const std::string& x : caps) {
      auto asked = policy::parse_capability_pattern(x);
      if (!asked || (*asked & still).empty()) continue;
      std::string wider;
      for (const auto& [pattern, state] : recorded->capabilities)
        if (state == policy::permission_state::denied && pattern != x)
          wider += (wider.empty() ? "'" : ", '") + policy::terminal_safe(pattern) + "'";
      std::fprintf(stderr, "dhara: warning: %s stays denied for %s: %s is recorded as denied, and a denial wins; "
                           "approve that, or 'dhara config permissions reset %s' and approve what it needs\n",
                   x.c_str(), name.c_str(), wider.empty() ? "a wider pattern" : wider.c_str(), name.c_str());
    }
    return 0;
  }
  return audit_user_changes(c->policy, std::move(entries)) ? 0 : 1;
}

}  // namespace

std::optional<broker::loaded_policy> load_policy_for_command(int& rc) {
  auto where = io::discover_locations();
  if (!where) {
    std::fprintf(stderr, "dhara: %s\n", where.err().message.c_str());
    rc = 2;
    return std::nullopt;
  }
  auto loaded = broker::load_policy(*where, false);
  if (!loaded) {
    std::fprintf(stderr, "dhara: %s\n", loaded.err().message.c_str());
    rc = 2;
    return std::nullopt;
  }
  return std::move(*loaded);
}

policy::audit_entry user_change_entry(const std::string& extension, const std::string& capability, bool allowed,
                                      const std::string& change) {
  return policy::user_decision_entry(io::wall_clock_ms(), extension, capability, allowed, "change", change,
                                     change == "reset" ? "permissions reset by the user" : "revoked by the user");
}

bool audit_user_changes(const broker::loaded_policy& loaded, std::vector<policy::audit_entry> entries,
                        std::string_view failed) {
  // A file-size limit must fail the write (EFBIG), not kill dhara (see io::audit_log).
  std::signal(SIGXFSZ, SIG_IGN);
  const auto& s = loaded.settings;
  auto log = io::audit_log::open(loaded.where.dhara_home, {s.audit_durability, s.audit_max_bytes, s.audit_keep});
  if (log) {
    auto written = log->append(entries);
    if (written) return true;
    std::fprintf(stderr, "dhara: %.*s: %s\n", static_cast<int>(failed.size()), failed.data(), written.err().message.c_str());
    return false;
  }
  std::fprintf(stderr, "dhara: %.*s: %s\n", static_cast<int>(failed.size()), failed.data(), log.err().message.c_str());
  return false;
}

void add_permissions_commands(CLI::App& config, command_context& ctx) {
  struct options {
    bool json = false, all = false;
    std::string extension, capability;
  };
  auto o = std::make_shared<options>();
  auto* perms = config.add_subcommand("permissions", "What each extension may do ($DHARA_HOME/permissions.json)");
  perms->require_subcommand(1);
  // The catalog, with each capability's meaning: error messages about an unknown capability
  // point here.
  std::string catalog = "\nCapabilities (a group: 'network:*'):\n";
  for (std::size_t i = 0; i < policy::capability_count; ++i) {
    auto c = static_cast<policy::capability>(i);
    std::string name(policy::to_string(c));
    catalog += "  " + name + std::string(name.size() < 22 ? 22 - name.size() : 1, ' ') + std::string(policy::meaning(c)) + "\n";
  }
  perms->footer("Examples:\n  dhara config permissions list\n  dhara config permissions show web-tools\n"
                "  dhara config permissions approve web-tools network:fetch\n"
                "  dhara config permissions approve web-tools --all\n"
                "  dhara config permissions revoke web-tools network:fetch\n  dhara config permissions reset web-tools\n" +
                catalog);
  auto* list = perms->add_subcommand("list", "Every installed or recorded extension, with counts");
  list->add_flag("--json", o->json, "Print JSON");
  list->callback([&ctx, o] { ctx.action = [&ctx, o] { return permissions_list(ctx.g, o->json); }; });
  auto* show = perms->add_subcommand("show", "One extension's capabilities: [approved], [denied], [pending]");
  show->add_option("extension", o->extension, "Extension name")->required();
  show->add_flag("--json", o->json, "Print JSON");
  show->callback([&ctx, o] { ctx.action = [&ctx, o] { return permissions_show(ctx.g, o->extension, o->json); }; });
  auto* approve = perms->add_subcommand("approve", "Approve a capability (or a group, 'network:*'; --all: every declared one)");
  approve->add_option("extension", o->extension, "Extension name")->required();
  auto* cap = approve->add_option("capability", o->capability, "Capability, e.g. network:fetch");
  cap->excludes(approve->add_flag("--all", o->all, "Every capability the manifest declares"));
  approve->callback([&ctx, o] {
    if (o->capability.empty() && !o->all)
      throw CLI::ValidationError("give a capability (e.g. network:fetch) or --all");
    ctx.action = [&ctx, o] { return permissions_change(ctx.g, "approve", o->extension, o->capability, o->all); };
  });
  auto* revoke = perms->add_subcommand("revoke", "Deny a capability from now on (running sessions too)");
  revoke->add_option("extension", o->extension, "Extension name")->required();
  revoke->add_option("capability", o->capability, "Capability, e.g. network:fetch")->required();
  revoke->callback([&ctx, o] {
    ctx.action = [&ctx, o] { return permissions_change(ctx.g, "revoke", o->extension, o->capability, false); };
  });
  auto* reset = perms->add_subcommand("reset", "Forget an extension's permissions: everything pending again");
  reset->add_option("extension", o->extension, "Extension name")->required();
  reset->callback([&ctx, o] { ctx.action = [&ctx, o] { return permissions_change(ctx.g, "reset", o->extension, "", false); }; });
}

}  // namespace dhara::cli
