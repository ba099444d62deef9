// A realistic policy snapshot for tests and benchmarks: 8 allowed and 8 denied paths,
// 20 extensions with a mix of approvals. Built from values, no files.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "policy/snapshot.hpp"

namespace dhara::testing {

struct policy_fixture {
  policy::settings config;
  std::vector<policy::manifest> manifests;
  std::vector<policy::permission_entry> perms;

  /// `level` applies to the whole snapshot; `interactive` says whether pending can ask.
  explicit policy_fixture(policy::security_level level = policy::security_level::standard) {
    config.level = level;
    config.trusted_authors = {"zosmaai"};
    config.allowed_paths = {"/home/u/proj", "/tmp/dhara-workspace", "/srv/shared", "/home/u/notes",
                            "/opt/data", "/var/tmp/cache", "/home/u/work/app", "/mnt/scratch"};
    config.denied_paths = {"/home/u/proj/secrets", "~/.aws/", "~/.gnupg", "/home/u/proj/.git/hooks",
                           "/srv/shared/private", "/opt/data/keys", "/home/u/work/app/.env", "/etc/ssl/private"};
    for (int i = 0; i < 20; ++i) {
      policy::manifest m;
      m.name = i == 0 ? "web-tools" : i == 1 ? "fs-tools" : i == 2 ? "shell-tools" : "ext-" + std::to_string(i);
      m.version = "1.0.0";
      m.author = policy::author_info{i % 2 ? "zosmaai" : "someone", ""};
      m.argv = {"python3", "main.py"};
      for (auto c : {policy::capability::filesystem_read, policy::capability::filesystem_write,
                     policy::capability::network_fetch, policy::capability::network_dns})
        m.capabilities.insert(c);
      if (i == 0) m.network_domains = std::vector<std::string>{"api.example.com", "*.example.org"};
      if (i == 2) {
        m.capabilities.insert(policy::capability::process_spawn);
        m.process_commands = std::vector<std::string>{"git"};
      }
      manifests.push_back(std::move(m));
    }
    for (int i = 0; i < 20; ++i) {
      policy::permission_entry e;
      e.version = "1.0.0";
      if (i % 3 == 0) {  // approved read/fetch/dns, denied write
        e.capabilities = {{"filesystem:read", policy::permission_state::approved},
                          {"network:fetch", policy::permission_state::approved},
                          {"network:dns", policy::permission_state::approved},
                          {"filesystem:write", policy::permission_state::denied}};
      } else if (i % 3 == 1) {  // everything through a wildcard
        e.capabilities = {{"filesystem:*", policy::permission_state::approved},
                          {"network:*", policy::permission_state::approved},
                          {"process:spawn", policy::permission_state::approved}};
      }  // i % 3 == 2: nothing recorded (pending)
      perms.push_back(std::move(e));
    }
  }

  /// Compiles the snapshot (lexical resolver unless one is given).
  std::shared_ptr<const policy::policy_snapshot> compile(bool interactive = false,
                                                         const policy::path_resolver* resolver = nullptr) const {
    return compile_at("/home/u", "/home/u/proj", interactive, resolver);
  }

  /// The same with HOME and the project elsewhere (a tree on disk): DHARA_HOME is
  /// `home`/.dhara and the session's cwd is the project. The config's paths are as set.
  std::shared_ptr<const policy::policy_snapshot> compile_at(const std::string& home, const std::string& project,
                                                            bool interactive = false,
                                                            const policy::path_resolver* resolver = nullptr) const {
    policy::snapshot_input in;
    in.config = &config;
    in.home = home;
    in.dhara_home = home + "/.dhara";
    in.project_root = project;
    in.cwd = project;
    in.interactive = interactive;
    for (std::size_t i = 0; i < manifests.size(); ++i)
      in.extensions.push_back({&manifests[i], in.dhara_home + "/extensions/" + manifests[i].name, &perms[i]});
    static const policy::lexical_resolver lexical;
    auto snap = policy::compile_snapshot(in, resolver ? *resolver : lexical);
    if (!snap) return nullptr;
    return std::make_shared<const policy::policy_snapshot>(std::move(*snap));
  }
};

}  // namespace dhara::testing
