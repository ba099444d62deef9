// Starting a session's extensions and routing tool names to them.
#include "broker/extension_host.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <chrono>
#include <cstring>
#include <thread>
#include <variant>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "io/files.hpp"
#include "io/host_ops.hpp"
#include "io/path_resolver.hpp"
#include "io/permissions_file.hpp"
#include "policy/path_rules.hpp"
#include "policy/sandbox_profile.hpp"
#include "policy/text.hpp"
#include "policy/tool_gate.hpp"
#include "sandbox/launcher.hpp"

namespace dhara::broker {
namespace {

using json = nlohmann::json;

// Runs argv (absolute argv[0]) without a shell and returns its first stdout line ("" on
// any failure). Used once per interpreter per session.
std::string first_line_of(const std::vector<std::string>& argv) {
  // Everything the child needs is made before the fork: the session's threads already run,
  // and one of them may hold the allocator's lock at the fork, so the child may only make
  // async-signal-safe calls (a push_back there hung the child under ASan).
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return {};
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return {};
  }
  if (pid == 0) {
    ::dup2(fds[1], 1);
    int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) ::dup2(devnull, 0), ::dup2(devnull, 2);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0 && out.size() < 65536) out.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return {};
  return out.substr(0, out.find('\n'));
}

// Whether `path` is an ELF file: a program that is its own real path, with nothing to ask.
bool is_elf(const std::string& path) {
  char magic[4] = {};
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool elf = ::read(fd, magic, sizeof magic) == sizeof magic && std::memcmp(magic, "\x7f" "ELF", 4) == 0;
  ::close(fd);
  return elf;
}


// ---- the kernel follows the approvals -------------------------------------------------
// An extension's OS sandbox allows what is approved when it starts. When that changes in the
// session (a revoke or an approval from another terminal, a serve client's `always`), the
// extension is started again in a profile made for what is allowed now, once its calls in
// flight have ended (a review: a revoked network:outbound kept connecting for the rest of
// the session, also across a crash's restart).

}  // namespace

// What an extension's sandbox is made from, kept to make it again.
struct kernel_entry {
  std::string exe;                    // its interpreter or program, resolved
  std::string tmp;                    // its private temp dir
  std::vector<std::string> program;   // its argv, without the launcher
  std::vector<std::string> argv;      // what it was last started with (launcher and program)
  std::vector<std::string> env_full, env_scrubbed;  // its environment with secrets:env, without
  std::vector<std::string> env;       // what it was last started with
  policy::capability_set granted;     // what the profile it runs in allows
  policy::capability_set extra;       // allowed for the session by a serve client's `always`
  actors::supervisor_actor supervisor;
};

struct kernel_follower_state {
  std::string launcher;
  io::sandbox_support kernel;
  std::vector<sandbox::guarded_link> links;
  std::map<std::string, kernel_entry> table;
  actors::host_api_actor host_api;    // it confines the programs extensions have dhara spawn
  policy::snapshot_ptr snapshot;      // the one in force
  policy::snapshot_ptr good;          // the last that held the extensions (a permissions.json
                                      // that cannot be read makes one that holds none)
  static inline const char* name = "kernel_follower";
};

namespace {

using kernel_follower_ptr = caf::stateful_actor<kernel_follower_state>*;

// The launcher argv (no program) of a profile allowing `granted`, or why none can be had.
std::string launcher_for(const kernel_follower_state& k, const policy::policy_snapshot& snap,
                         const policy::extension_policy& ext, const kernel_entry& e, policy::capability_set granted,
                         std::vector<std::string>& out) {
  policy::sandbox_inputs in = sandbox::sandbox_inputs_here(snap, ext, e.exe, e.tmp);
  in.granted = granted;
  policy::sandbox_profile profile = policy::compute_sandbox_profile(in);
  if (std::string blocker = io::launch_blocker(k.kernel, profile.needs_mounts()); !blocker.empty())
    return "the OS sandbox cannot be applied: " + blocker;
  if (std::string link = sandbox::replaceable_link(profile, k.links); !link.empty()) return link;
  out = policy::launcher_argv_inline(k.launcher, profile, {});
  return {};
}

// Starts again every extension whose profile no longer matches what is allowed.
void follow_approvals(kernel_follower_ptr self) {
  auto& k = self->state;
  if (!k.snapshot) return;
  bool holds_them = false;
  for (auto& [name, e] : k.table) {
    const policy::policy_snapshot* snap = k.snapshot.get();
    auto it = snap->extensions.find(name);
    policy::capability_set want;  // none, when the snapshot holds no policy for it
    if (it != snap->extensions.end()) {
      holds_them = true;
      want = policy::sandbox_granted(it->second) | (e.extra & it->second.declared).minus(it->second.denied);
    } else if (k.good && k.good->extensions.find(name) != k.good->extensions.end()) {
      snap = k.good.get();  // its paths, with nothing granted
      it = snap->extensions.find(name);
    } else {
      continue;
    }
    if (want == e.granted) continue;
    std::vector<std::string> argv;
    if (const std::string why = launcher_for(k, *snap, it->second, e, want, argv); !why.empty()) {
      if (want.contains_all(e.granted)) {
        // Only more allowed: it keeps running in the profile it has (the new capability is
        // then dhara's checks and host requests only), as a start would have been refused.
        spdlog::warn("extension {} keeps its sandbox as it was; the one for its new approvals cannot be made: {}", name, why);
        continue;
      }
      // Something was taken away and no profile without it can be made: stopped (fail closed).
      spdlog::error("extension {} is stopped: a capability was taken away and its new sandbox cannot be made: {}", name, why);
      caf::anon_send(e.supervisor, actors::shutdown_atom::value);
      e.granted = {};
      continue;
    }
    // The programs it has dhara spawn are confined as it is: from now on in the new profile.
    // Those already running end when something was taken away, else keep theirs.
    caf::anon_send(k.host_api, actors::reconfine_atom::value, name, argv, !want.contains_all(e.granted));
    argv.insert(argv.end(), e.program.begin(), e.program.end());
    // Only added: should the launcher refuse the new profile, the extension goes on in this one.
    std::vector<std::string> fallback_argv, fallback_env;
    if (want.contains_all(e.granted)) {
      fallback_argv = e.argv;
      fallback_env = e.env;
    }
    std::vector<std::string> env = want.contains(policy::capability::secrets_env) ? e.env_full : e.env_scrubbed;
    spdlog::info("extension {}: what it may do changed; it starts again in a new sandbox profile", name);
    e.argv = argv;
    e.env = env;
    caf::anon_send(e.supervisor, actors::reconfine_atom::value, std::move(argv), std::move(env),
                   std::move(fallback_argv), std::move(fallback_env));
    e.granted = want;
  }
  if (holds_them) k.good = k.snapshot;
}

caf::behavior kernel_follower_behavior(kernel_follower_ptr self, std::shared_ptr<kernel_follower_state> init) {
  self->state = std::move(*init);
  return {
      // The store asks before it gives the checkers a new snapshot: the answer comes once each
      // extension's new profile is on its way to its supervisor.
      [=](actors::snapshot_atom, policy::snapshot_ptr& snap) {
        if (!snap || (self->state.snapshot && snap->generation < self->state.snapshot->generation)) return true;
        self->state.snapshot = std::move(snap);
        follow_approvals(self);
        return true;
      },
      // serve: the client answered `always` for `capability` of `extension`; replies once the
      // extension's new profile is on its way (its next call runs in it).
      [=](caf::add_atom, const std::string& extension, const std::string& capability) {
        auto it = self->state.table.find(extension);
        auto cap = policy::parse_capability(capability);
        if (it == self->state.table.end() || !cap) return false;
        it->second.extra.insert(*cap);
        follow_approvals(self);
        return true;
      },
  };
}

}  // namespace

policy::result<std::string> interpreter_cache::resolve(const std::string& argv0, const std::string& cwd) {
  std::string key = argv0.find('/') == std::string::npos ? argv0 : cwd + "\n" + argv0;
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  io::path_executable_locator locator(path_env_, cwd);
  auto found = locator.locate(argv0);
  if (!found) return found.err();
  std::string exe = *found;
  // Interpreters behind wrapper scripts (pyenv shims cost ~100 ms per start): ask the real
  // interpreter where it lives, once. The question runs the program outside any sandbox, so
  // only the user's own: a bare name found on PATH, and not in `cwd` (the extension's folder)
  // or below it. `./python3` in an extension's folder is the extension's code: it runs only
  // sandboxed, as itself. The answer must name an executable file, taken at its real path.
  // A program that is an ELF file is not asked: it is what runs (a venv's python, nvm's node),
  // and it may lie where an extension could have rewritten it (a writable home).
  const std::string base(policy::basename_of(argv0));
  char real_cwd[PATH_MAX];  // `exe` is a real path: compared with the folder's real path
  const std::string folder = ::realpath(cwd.c_str(), real_cwd) != nullptr ? real_cwd : cwd;
  const bool on_path = argv0.find('/') == std::string::npos && !policy::is_at_or_under(exe, folder) && !is_elf(exe);
  std::string real;
  if (on_path && (base == "python3" || base == "python"))
    real = first_line_of({exe, "-c", "import sys; print(sys.executable)"});
  else if (on_path && (base == "node" || base == "nodejs"))
    real = first_line_of({exe, "-e", "console.log(process.execPath)"});
  if (!real.empty() && real.front() == '/')
    if (auto answer = locator.locate(real)) exe = *answer;
  cache_[key] = exe;
  return exe;
}

std::vector<std::string> extension_environment(const std::string& name, bool full, char** env) {
  std::vector<std::string> out;
  for (char** e = env; e && *e; ++e) {
    std::string_view kv(*e);
    std::string_view key = kv.substr(0, kv.find('='));
    if (key == "DHARA_EXTENSION") continue;
    bool keep = full || key == "PATH" || key == "HOME" || key == "LANG" || key == "TERM" || key == "TMPDIR" ||
                key.starts_with("LC_");
    if (keep) out.emplace_back(kv);
  }
  out.push_back("DHARA_EXTENSION=" + name);
  return out;
}

extension_host::extension_host(caf::actor_system& sys, const loaded_policy& policy, host_options options)
    : sys_(sys), policy_(policy), loop_(std::make_shared<io::event_loop>()), options_(options) {}

void extension_host::set_approver(const actors::hitl_actor& approver) {
  for (const auto& c : checkers_) caf::anon_send(c, actors::approver_atom::value, approver);
}

extension_host::~extension_host() { shutdown(); }

void extension_host::start() {
  const policy::settings& cfg = policy_.settings;
  std::string logs = policy_.where.dhara_home + "/logs";
  ::mkdir(policy_.where.dhara_home.c_str(), 0700);
  ::mkdir(logs.c_str(), 0700);
  // The audit writer and the checker first: refusals at load are audited too.
  actors::audit_writer_config audit_cfg;
  audit_cfg.dhara_home = policy_.where.dhara_home;
  audit_cfg.durability = cfg.audit_durability;
  audit_cfg.max_bytes = cfg.audit_max_bytes;
  audit_cfg.keep = cfg.audit_keep;
  audit_cfg.ignore_patterns = cfg.audit_ignore_patterns;
  audit_ = actors::spawn_audit_writer(sys_, std::move(audit_cfg));
  // One checker per core: the checks of different extensions run in parallel, and no
  // snapshot pointer is shared between them on the check path.
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < cores; ++i) checkers_.push_back(actors::spawn_checker(sys_, policy_.snapshot, audit_, cfg.audit_ignore_patterns));
  actors::permissions_store_config store_cfg;
  store_cfg.inputs = policy_.inputs;
  store_cfg.checkers = checkers_;
  store_cfg.first_generation = policy_.snapshot->generation;
  store_cfg.first = policy_.snapshot;
  store_ = actors::spawn_permissions_store(sys_, loop_, std::move(store_cfg));

  const char* path_env = std::getenv("PATH");
  interpreter_cache interpreters(path_env ? path_env : "/usr/local/bin:/usr/bin:/bin");
  io::allow_spawns();
  actors::host_api_config host_cfg;
  host_cfg.checker = checkers_.front();  // host requests are rare next to tool calls
  host_cfg.session = options_.session_id.empty() ? "session-" + std::to_string(::getpid()) : options_.session_id;
  host_cfg.cwd = policy_.where.cwd;
  host_cfg.home = policy_.where.home;
  host_cfg.path_env = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  for (const discovered_extension& e : policy_.extensions) {
    host_cfg.domains[e.manifest.name] = policy::compile_domain_rules(e.manifest.network_domains);
    host_cfg.envs[e.manifest.name] = extension_environment(e.manifest.name, false, environ);
    host_cfg.declared[e.manifest.name] = e.manifest.capabilities;
  }

  // Capability prompts come before any extension runs, so each starts with its OS sandbox
  // built from the answers (DESIGN §9: prompts at load, before any tool call).
  policy::snapshot_ptr current = policy_.snapshot;
  if (policy_.snapshot->interactive && options_.prompt_at_load) {
    ask_for_pending_capabilities();
    if (quit_) return;
    caf::scoped_actor self{sys_};
    self->request(store_, caf::infinite, actors::snapshot_atom::value)
        .receive([&](policy::snapshot_ptr& s) { if (s) current = std::move(s); }, [](caf::error&) {});
  }

  // Each extension's supervisor is configured first; the host API, which spawns programs as
  // each extension's sandbox confines it, is spawned once every sandbox is known.
  std::vector<actors::supervisor_config> ready;
  for (const discovered_extension& e : policy_.extensions) {
    const policy::manifest& m = e.manifest;
    actors::supervisor_config sc;
    sc.name = m.name;
    sc.version = m.version;
    sc.folder = e.folder;
    sc.argv = m.argv;
    // An extension that cannot start is listed as failed, with the reason.
    auto not_started = [&](std::string reason) {
      actors::extension_info info;
      info.name = m.name;
      info.version = m.version;
      info.state = actors::extension_state::failed;
      info.reason = std::move(reason);
      infos_.push_back(std::move(info));
    };
    auto exe = interpreters.resolve(m.argv.front(), e.folder);
    if (!exe) {
      not_started("cannot start: " + exe.err().message);
      continue;
    }
    sc.argv.front() = *exe;
    bool full_env = cfg.level == policy::security_level::yolo;
    if (auto it = current->extensions.find(m.name); it != current->extensions.end())
      full_env = full_env || (it->second.approved_by_user | it->second.approved_by_author).contains(policy::capability::secrets_env);
    sc.env = extension_environment(m.name, full_env, environ);
    actors::spawn_confinement spawns;
    if (std::string why = confine(sc, *current, m.name, *exe, spawns); !why.empty()) {
      not_started(std::move(why));
      continue;
    }
    host_cfg.confinements[m.name] = std::move(spawns);
    std::string log_name = m.name;
    for (char& c : log_name)
      if (c == '/') c = '+';  // @scope/name → one file
    sc.stderr_log = logs + "/" + log_name + ".log";
    sc.call_timeout_ms = cfg.call_timeout_ms;
    sc.cancel_grace_ms = cfg.cancel_grace_ms;
    sc.kill_grace_ms = cfg.kill_grace_ms;
    sc.max_restarts = cfg.max_restarts;
    sc.restart_window_ms = cfg.restart_window_ms;
    sc.max_line_bytes = cfg.max_line_bytes;
    ready.push_back(std::move(sc));
  }
  host_api_ = actors::spawn_host_api(sys_, std::move(host_cfg));
  std::vector<std::string> started;
  for (actors::supervisor_config& sc : ready) {
    sc.host = host_api_;
    std::string name = sc.name;
    supervisors_.emplace(name, actors::spawn_supervisor(sys_, loop_, std::move(sc)));
    started.push_back(std::move(name));
  }
  // The kernel follows the approvals from here on: the store sends it each new snapshot.
  if (kernel_follow_ && kernel_ && guarded_links_) {
    for (auto it = kernel_follow_->table.begin(); it != kernel_follow_->table.end();) {
      auto sup = supervisors_.find(it->first);
      if (sup == supervisors_.end()) {
        it = kernel_follow_->table.erase(it);
        continue;
      }
      it->second.supervisor = sup->second;
      ++it;
    }
    kernel_follow_->launcher = options_.sandbox_launcher;
    kernel_follow_->host_api = host_api_;
    kernel_follow_->kernel = *kernel_;
    kernel_follow_->links = *guarded_links_;
    kernel_follow_->snapshot = current;
    kernel_follow_->good = current;
    kernel_follower_ = sys_.spawn(kernel_follower_behavior, kernel_follow_);
    caf::anon_send(store_, caf::join_atom::value, kernel_follower_);
  }

  // Every supervisor is starting its process now; collect the handshakes. The session waits
  // for one handshake's time (they run in parallel), not for every retry: an extension that
  // hangs in initialize with the default 3 restarts held the session for 41 s.
  caf::scoped_actor self{sys_};
  const auto handshake = std::chrono::milliseconds(actors::supervisor_config{}.handshake_ms);
  const auto deadline = std::chrono::steady_clock::now() + handshake + std::chrono::seconds(1);
  // In slices of 100 ms when a signal may end the wait (a Ctrl-C was read only once the
  // batch ran, up to the whole handshake later): a slice that times out is asked again.
  const auto slice = std::chrono::milliseconds(options_.interrupted ? 100 : handshake.count() + 1000);
  for (const std::string& name : started) {
    for (bool answered = false; !answered;) {
      if (options_.interrupted && (interrupted_ = options_.interrupted()) != 0) return;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      const auto wait = std::clamp(left, std::chrono::milliseconds(1), slice);
      self->request(supervisors_.at(name), wait, actors::status_atom::value)
          .receive([&](actors::extension_info& info) {
                     infos_.push_back(std::move(info));
                     answered = true;
                   },
                   [&](caf::error& err) {
                     if (err == caf::sec::request_timeout && left > wait) return;  // the next slice
                     actors::extension_info info;
                     info.name = name;
                     info.state = actors::extension_state::failed;
                     info.reason = err == caf::sec::request_timeout
                                       ? "it was not ready within " + std::to_string(handshake.count() / 1000) +
                                             " s (its initialize failed or hung); its tools are not available in this session"
                                       : sys_.render(err);
                     infos_.push_back(std::move(info));
                     answered = true;
                   });
    }
  }
  std::sort(infos_.begin(), infos_.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::vector<policy::audit_entry> refusals;
  for (const actors::extension_info& info : infos_) {
    if (info.state != actors::extension_state::ready) continue;
    policy::capability_set declared;
    for (const discovered_extension& e : policy_.extensions)
      if (e.manifest.name == info.name) declared = e.manifest.capabilities;
    for (const json& t : info.tools) {
      if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) continue;
      std::string tool = t["name"].get<std::string>();
      // A tool's name is shown on the terminal and written into the trail: letters, digits,
      // '_', '-' and '.' only (a name with escape sequences retitled the window and drew over
      // the line above at every session).
      const bool plain_name = !tool.empty() && tool.size() <= 128 && std::all_of(tool.begin(), tool.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
      });
      auto required = plain_name ? policy::tool_required_capabilities(declared, t)
                                 : policy::result<policy::capability_set>(policy::make_error(
                                       policy::errc::invalid_value,
                                       "its name holds characters other than letters, digits, '_', '-' and '.', or is "
                                       "longer than 128 bytes"));
      if (!required) {
        // A tool may not use more than its extension declares: refused at load, audited.
        const std::string shown = plain_name ? tool : policy::terminal_safe(tool);
        std::string reason = "tool '" + shown + "' is refused: " + required.err().message;
        refused_[info.name + "/" + tool] = reason;
        policy::audit_entry e;
        e.timestamp_ms = io::wall_clock_ms();
        e.extension = info.name;
        e.capability = "*";
        e.action = policy::audit_action::denied;
        e.reason = reason;
        e.decided_by = policy::decider::rule;
        e.tool = shown;
        refusals.push_back(std::move(e));
        spdlog::warn("extension {}: {}", info.name, reason);
        continue;
      }
      registered_tool rt{info.name, tool, *required};
      by_bare_name_[rt.name].push_back(rt);
      by_qualified_name_[info.name + "/" + rt.name] = rt;
    }
  }
  if (!refusals.empty()) self->request(audit_, caf::infinite, actors::append_atom::value, std::move(refusals))
                             .receive([](actors::audit_ack&) {}, [](caf::error&) {});
}

std::string extension_host::confine(actors::supervisor_config& sc, const policy::policy_snapshot& snap,
                                    const std::string& name, const std::string& exe,
                                    actors::spawn_confinement& spawns) {
  if (options_.sandbox_launcher.empty()) return {};
  if (snap.level == policy::security_level::yolo) {
    spdlog::warn("extension {} runs without an OS sandbox: the security level is yolo", name);
    return {};
  }
  auto it = snap.extensions.find(name);
  if (it == snap.extensions.end()) return "cannot start: no policy was compiled for it";
  const policy::extension_policy& ext = it->second;
  const bool required = policy::os_sandbox_required(policy_.settings);
  if (!kernel_) kernel_ = io::probe_sandbox_support();
  auto refuse = [&](const std::string& missing) -> std::string {
    std::string what = "the OS sandbox cannot be applied: " + missing;
    if (required)
      return "cannot start: " + what + "; run 'dhara doctor' for what the kernel lacks, or set "
             "security.requireOsSandbox to false in " + policy_.where.dhara_home +
             "/config.json to let extensions run confined by the broker only";
    spdlog::warn("extension {} runs without an OS sandbox: {} (security.requireOsSandbox is false)", name, what);
    return {};
  };
  if (std::string blocker = io::launch_blocker(*kernel_, false); !blocker.empty()) return refuse(blocker);

  auto dir = sandbox::make_private_dir("dhara-ext-");
  if (!dir) return "cannot start: " + dir.err().message;
  std::string tmp = dir->path() + "/tmp";
  private_dirs_.push_back(std::move(*dir));
  if (::mkdir(tmp.c_str(), 0700) != 0) return "cannot start: cannot create its private temp dir " + tmp;
  // The kernel allows what is approved, nothing pending. (`dhara serve`, which asks its client
  // at call time, gave the kernel every declared capability not denied, so that a call the
  // client allowed could use it: an extension then used them without any call, through tools
  // declaring none, and after the client's "deny" too (a review, 2026-12-07). What the client
  // allows at call time is allowed to dhara's checks and host requests only.)
  policy::sandbox_inputs in = sandbox::sandbox_inputs_here(snap, ext, exe, tmp);
  policy::sandbox_profile profile = policy::compute_sandbox_profile(in);
  if (std::string blocker = io::launch_blocker(*kernel_, profile.needs_mounts()); !blocker.empty()) return refuse(blocker);
  for (const std::string& u : profile.unenforced) spdlog::debug("extension {}: {}", name, u);
  if (!guarded_links_) guarded_links_ = sandbox::links_to_guard(snap);
  if (std::string link = sandbox::replaceable_link(profile, *guarded_links_); !link.empty())
    return "cannot start: " + link;
  // The launcher's refusals are told from the extension's own stderr by a tag it never sees.
  unsigned char bytes[16];
  if (::getrandom(bytes, sizeof bytes, 0) == static_cast<ssize_t>(sizeof bytes)) {
    static constexpr char hex[] = "0123456789abcdef";
    for (unsigned char b : bytes) sc.launcher_tag += {hex[b >> 4], hex[b & 15]};
  }
  // Kept so that the kernel can follow what the extension may do (kernel_follower).
  if (!kernel_follow_) kernel_follow_ = std::make_shared<kernel_follower_state>();
  kernel_entry& kept = kernel_follow_->table[name];
  kept.exe = exe;
  kept.tmp = tmp;
  kept.program = sc.argv;
  kept.granted = in.granted;
  // The extension and the programs it has dhara spawn start through the same launcher argv
  // (the profile serialized once).
  spawns.launcher = policy::launcher_argv_inline(options_.sandbox_launcher, profile, {});
  spawns.tmpdir = tmp;
  std::vector<std::string> argv = spawns.launcher;
  argv.insert(argv.end(), sc.argv.begin(), sc.argv.end());
  sc.argv = std::move(argv);
  kept.argv = sc.argv;
  auto confined_env = [&](std::vector<std::string> env) {
    std::erase_if(env, [](const std::string& kv) { return kv.starts_with("TMPDIR=") || kv.starts_with("DHARA_LAUNCH_TAG="); });
    env.push_back("TMPDIR=" + tmp);
    if (!sc.launcher_tag.empty()) env.push_back("DHARA_LAUNCH_TAG=" + sc.launcher_tag);  // the launcher takes it out
    return env;
  };
  sc.env = confined_env(std::move(sc.env));
  kept.env = sc.env;
  // Both environments, for when secrets:env is approved or revoked in the session (a review:
  // a revoke restarted the extension with every variable still set).
  kept.env_full = confined_env(extension_environment(name, true, environ));
  kept.env_scrubbed = confined_env(extension_environment(name, false, environ));
  // The kernel refuses a start whose arguments and environment together pass ARG_MAX; that
  // happens only with a profile of tens of thousands of paths, said here with its cause
  // rather than as execve's "argument list too long". (A spawn adds its own argv to this.)
  std::size_t arg_bytes = 0;
  for (const auto* list : {&sc.argv, &sc.env})
    for (const std::string& s : *list) arg_bytes += s.size() + 1 + sizeof(char*);
  if (const long arg_max = ::sysconf(_SC_ARG_MAX); arg_max > 0 && arg_bytes + 4096 > static_cast<std::size_t>(arg_max)) {
    std::size_t profile_bytes = 0;
    for (std::size_t i = 1; i + 1 < spawns.launcher.size(); i += 2)
      if (spawns.launcher[i] == "--profile-json") profile_bytes += spawns.launcher[i + 1].size();
    return "cannot start: its sandbox profile (" + std::to_string(profile_bytes) + " bytes, " +
           std::to_string(profile.mask.size()) + " denied paths to hide) is more than the kernel passes to a program (" +
           std::to_string(arg_max) + " bytes with the environment); deny fewer, wider paths in security.deniedPaths "
           "(one folder or glob covers many)";
  }
  return {};
}

void extension_host::ask_for_pending_capabilities() {
  // Prompts come when the extensions load, before any tool call (DESIGN §9), one at a time.
  const policy::policy_snapshot& snap = *policy_.snapshot;
  auto approver = actors::spawn_approval(sys_);
  caf::scoped_actor self{sys_};
  std::string perms_path = io::permissions_path(policy_.where.dhara_home);
  bool changed = false;
  for (const discovered_extension& e : policy_.extensions) {
    auto it = snap.extensions.find(e.manifest.name);
    if (it == snap.extensions.end()) continue;
    const policy::extension_policy& ext = it->second;
    policy::capability_set pending =
        ext.declared.minus(ext.approved_by_user).minus(ext.approved_by_author).minus(ext.denied);
    if (pending.empty()) continue;
    if (ext.pending != policy::pending_action::ask_package && ext.pending != policy::pending_action::ask_each_capability) continue;
    actors::approval_request req;
    req.extension = e.manifest.name;
    req.version = e.manifest.version;
    if (e.manifest.author) req.author = e.manifest.author->name.empty() ? e.manifest.author->email : e.manifest.author->name;
    pending.for_each([&](policy::capability c) { req.capabilities.emplace_back(policy::to_string(c)); });
    req.per_capability = ext.pending == policy::pending_action::ask_each_capability;
    actors::approval_answer answer;
    self->request(approver, caf::infinite, actors::ask_atom::value, req)
        .receive([&](actors::approval_answer& a) { answer = std::move(a); },
                 [&](caf::error& err) { answer.failure = sys_.render(err); });
    if (answer.quit) {
      quit_ = true;
      break;
    }
    if (!answer.failure.empty()) {
      // A lost prompt records nothing: the capabilities stay pending, and pending denies.
      spdlog::warn("no answer for {}: {}; its capabilities stay pending", e.manifest.name, answer.failure);
      continue;
    }
    // Every answer is audited as the user's decision, before it is recorded: an answer whose
    // entry cannot be written records nothing (it was saved with no entry when the trail was
    // unwritable, and later sessions allowed what no line showed approved).
    std::vector<policy::audit_entry> entries;
    for (const auto& [list, allowed] : {std::pair{&answer.approved, true}, std::pair{&answer.denied, false}})
      for (const std::string& cap : *list)
        entries.push_back(policy::user_decision_entry(io::wall_clock_ms(), e.manifest.name, cap, allowed, "prompt",
                                                      req.per_capability ? "capability" : "package",
                                                      "denied by the user at the prompt"));
    std::string unaudited;
    self->request(audit_, caf::infinite, actors::append_atom::value, std::move(entries))
        .receive([&](actors::audit_ack& ack) { unaudited = ack.error; },
                 [&](caf::error& err) { unaudited = "the audit writer is gone: " + sys_.render(err); });
    if (!unaudited.empty()) {
      spdlog::error("cannot audit the answers for {}: {}; nothing was recorded, and its capabilities stay pending",
                    e.manifest.name, unaudited);
      continue;
    }
    auto written = io::update_permissions(perms_path, [&](policy::permissions& p) -> policy::result<bool> {
      auto stamp = policy::format_timestamp(io::wall_clock_ms());
      const policy::capability_scope scope = policy::scope_of(e.manifest);
      for (const auto& [list, state] : {std::pair{&answer.approved, policy::permission_state::approved},
                                        std::pair{&answer.denied, policy::permission_state::denied}})
        for (const std::string& cap : *list) {
          auto r = policy::record(p, e.manifest.name, cap, state, e.manifest.version, e.folder, stamp,
                                  policy_.settings.level, &scope);
          if (!r) return r.err();
        }
      return true;
    });
    if (!written) {
      spdlog::error("cannot record the answers for {}: {}; they were audited, but its capabilities stay pending",
                    e.manifest.name, written.err().message);
      continue;
    }
    changed = true;
  }
  // Anonymous: an exit from `self` makes the approver unlink from it, locking `self` while
  // ~scoped_actor frees it on this thread (a race TSan reported in CI).
  caf::anon_send_exit(approver, caf::exit_reason::user_shutdown);
  // The answers are in the next snapshot before the first call.
  if (changed) self->request(store_, caf::infinite, caf::put_atom::value).receive([](std::uint64_t) {}, [](caf::error&) {});
}

std::variant<registered_tool, resolve_error> extension_host::resolve(const std::string& tool,
                                                                     const std::string& extension) const {
  std::string qualified = extension.empty() ? tool : extension + "/" + tool;
  if (auto it = by_qualified_name_.find(qualified); it != by_qualified_name_.end()) return it->second;
  if (extension.empty()) {
    if (auto it = by_bare_name_.find(tool); it != by_bare_name_.end()) {
      if (it->second.size() == 1) return it->second.front();
      std::string names;
      for (const registered_tool& t : it->second) names += (names.empty() ? "" : ", ") + t.extension + "/" + t.name;
      return resolve_error{"the tool name '" + tool + "' is ambiguous; use one of " + names, {}};
    }
  }
  // Name the reason when the tool would belong to an extension that is not running.
  std::string ext = extension;
  if (ext.empty() && tool.find('/') != std::string::npos) ext = tool.substr(0, tool.rfind('/'));
  if (auto it = refused_.find(qualified); it != refused_.end()) return resolve_error{it->second, it->second};
  if (extension.empty() && tool.find('/') == std::string::npos)
    for (const auto& [name, reason] : refused_)
      if (name.ends_with("/" + tool)) return resolve_error{reason, reason};
  for (const actors::extension_info& info : infos_)
    if (info.name == ext && info.state != actors::extension_state::ready)
      return resolve_error{"extension '" + ext + "' is " + std::string(actors::to_string(info.state)), info.reason};
  for (const skipped_extension& s : policy_.skipped)
    if (!ext.empty() && s.folder.ends_with("/" + ext)) return resolve_error{"extension '" + ext + "' was skipped", s.reason};
  return resolve_error{"unknown tool '" + qualified + "'; 'dhara extensions list' shows the tools", {}};
}

actors::supervisor_actor extension_host::supervisor(const std::string& extension) const {
  auto it = supervisors_.find(extension);
  return it == supervisors_.end() ? actors::supervisor_actor{} : it->second;
}

void extension_host::shutdown() {
  if (stopped_) return;
  stopped_ = true;
  if (kernel_follower_) caf::anon_send_exit(kernel_follower_, caf::exit_reason::user_shutdown);  // no restart now
  if (!supervisors_.empty()) {
    caf::scoped_actor self{sys_};
    // All requests first, so every extension stops in parallel; the kill chain bounds each.
    auto bound = std::chrono::milliseconds(policy_.settings.cancel_grace_ms + policy_.settings.kill_grace_ms + 1000);
    using handle = decltype(self->request(supervisors_.begin()->second, bound, actors::shutdown_atom::value));
    std::vector<handle> pending;
    for (auto& [name, sup] : supervisors_) pending.push_back(self->request(sup, bound, actors::shutdown_atom::value));
    for (auto& h : pending) h.receive([](bool) {}, [](caf::error&) {});
  }
  // No extension is left to ask for a spawn; what one started ends with the session (a spawn
  // of `sleep` kept dhara from exiting until its timeout).
  io::end_running_spawns();
  loop_->stop(policy_.settings.kill_grace_ms);
  supervisors_.clear();
  // The checker and the audit writer end last, so every entry of this session is written.
  caf::anon_send_exit(host_api_, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(store_, caf::exit_reason::user_shutdown);
  for (auto& c : checkers_) caf::anon_send_exit(c, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(audit_, caf::exit_reason::user_shutdown);
  private_dirs_.clear();  // each removed
}

}  // namespace dhara::broker
