// The host API actor (see host_api.hpp).
#include "actors/host_api.hpp"

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <memory>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/call_replies.hpp"
#include "io/host_ops.hpp"
#include "io/jsonrpc.hpp"
#include "io/path_resolver.hpp"
#include "policy/path_rules.hpp"

namespace dhara::actors {
namespace {

using json = nlohmann::json;
using run_atom = caf::atom_constant<caf::atom("run")>;
using job = std::function<call_result()>;

call_result from(policy::result<json> r) {
  if (r) return {true, std::move(*r), 0, {}, nullptr};
  // Refused at the moment of use: a denial, audited before it is answered (run_on_worker).
  if (r.err().code == policy::errc::refused) return call_error(io::rpc_error::denied, r.err().message);
  return call_error(io::rpc_error::tool_error, r.err().message, json{{"error", std::string(policy::to_string(r.err().code))}});
}

// A parsed request: the checks it needs, and the operation to run once they are allowed.
struct plan {
  std::vector<policy::gate_check> checks;
  std::function<job(const check_outcome&)> make_job;  // null for host/check (a query)
  bool query = false;
};

std::optional<std::string> string_param(const json& params, const char* key) {
  if (!params.is_object()) return std::nullopt;
  auto it = params.find(key);
  if (it == params.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

// The path a file operation opens: the resolution its check matched, carried by the outcome,
// never the path resolved again here. The operation opens it beneath the allowed root and
// refuses any symlink on the way (io/host_ops.hpp), so a link swapped in after the check
// cannot lead it anywhere the check did not allow, a denied folder beneath the root included.
// A check that resolved nothing (a snapshot without a link-following resolver) opens nothing.
policy::result<std::string> checked_path(const check_outcome& o, const std::string& raw) {
  if (o.checked_path.empty() || o.allowed_root.empty())
    return policy::make_error(policy::errc::resolve_failed,
                              "'" + raw + "' was allowed without a resolved path to open; refused");
  return o.checked_path;
}

// The identities of the denied entries of the rules that allowed it (none when it carries none).
std::span<const policy::file_id> denied_ids(const check_outcome& o) {
  return o.denied_ids ? std::span<const policy::file_id>(*o.denied_ids) : std::span<const policy::file_id>();
}

// True when the last part of `path` is empty, "." or "..": open(2) would refuse to create a
// file there (EISDIR), while the normalized path names the folder's own name or its parent.
bool names_a_folder(std::string_view path) {
  std::string_view last = path.substr(path.rfind('/') + 1);  // all of it when there is no '/'
  return last.empty() || last == "." || last == "..";
}

// Builds the plan for a request, or the -32602/-32601 error for a malformed one.
using config_ptr = std::shared_ptr<const host_api_config>;

std::variant<plan, call_result> plan_for(const host_request& r, const config_ptr& shared) {
  const host_api_config& cfg = *shared;
  const json& p = r.params;
  auto bad = [&](std::string what) {
    return call_error(io::rpc_error::invalid_params, r.method + ": " + what);
  };
  using policy::capability;
  using policy::subject_kind;
  if (r.method == "host/check") {
    auto cap_name = string_param(p, "capability");
    if (!cap_name) return bad("expected {capability, details?}");
    auto cap = policy::parse_capability(*cap_name);
    if (!cap) return bad(cap.err().message);
    json details = p.value("details", json::object());
    if (!details.is_object()) return bad("details must be an object");
    plan out;
    out.query = true;
    // A subject of the wrong shape is an error, not a question about the capability alone
    // (`{argv: ["bash"]}` and `{path: 5}` were answered allowed, the spawn then denied).
    auto strings = [](const json& a) {
      return a.is_array() && !a.empty() && std::all_of(a.begin(), a.end(), [](const json& e) { return e.is_string(); });
    };
    // One subject a question: `{argv: ["bash"], path: "a.txt"}` was answered for the path alone,
    // allowed, and audited as the path (a review).
    if (details.contains("path") + details.contains("url") + (details.contains("command") || details.contains("argv")) > 1)
      return bad("details names more than one subject; ask about one of path, url, command or argv at a time");
    if (details.contains("command") && details.contains("argv"))
      return bad("details names both command and argv; give one");
    if (details.contains("path")) {
      if (!details["path"].is_string()) return bad("details.path must be a string");
      out.checks.push_back({*cap, subject_kind::path, details["path"].get<std::string>(), {}, "path"});
    } else if (details.contains("url")) {
      if (!details["url"].is_string()) return bad("details.url must be a string");
      out.checks.push_back({*cap, subject_kind::url, details["url"].get<std::string>(), {}, "url"});
    } else if (details.contains("command") && details["command"].is_string()) {
      out.checks.push_back({*cap, subject_kind::command_string, details["command"].get<std::string>(), {}, "command"});
    } else if (details.contains("command") || details.contains("argv")) {
      const json& a = details.contains("argv") ? details["argv"] : details["command"];
      if (!strings(a)) return bad("details.argv (or command) must be a string or a non-empty array of strings");
      out.checks.push_back({*cap, subject_kind::argv, {}, a.get<std::vector<std::string>>(), "argv"});
    } else {
      out.checks.push_back({*cap, subject_kind::none, {}, {}, {}});
    }
    return out;
  }
  if (r.method == "host/fs/read" || r.method == "host/fs/list") {
    auto path = string_param(p, "path");
    if (!path) return bad("expected {path}");
    std::string encoding = string_param(p, "encoding").value_or("utf8");
    bool list = r.method == "host/fs/list";
    // Malformed params are refused before the check, so no `allowed` line is written for a read
    // that never happens (a review: an unknown encoding was -32001 after an allowed line).
    if (p.contains("encoding") && !p["encoding"].is_string() && !p["encoding"].is_null())
      return bad("encoding must be utf8 or base64");
    if (!list && encoding != "utf8" && encoding != "base64") return bad("encoding must be utf8 or base64");
    plan out;
    out.checks.push_back({capability::filesystem_read, subject_kind::path, *path, {}, "path"});
    out.make_job = [=](const check_outcome& o) -> job {
      auto abs = checked_path(o, *path);
      std::size_t max = shared->max_file_bytes;
      return [=]() -> call_result {
        if (!abs) return from(abs.err());
        return list ? from(io::fs_list(o.allowed_root, *abs, io::max_list_entries, denied_ids(o)))
                    : from(io::fs_read(o.allowed_root, *abs, encoding, max, denied_ids(o)));
      };
    };
    return out;
  }
  if (r.method == "host/fs/write") {
    auto path = string_param(p, "path");
    auto content = string_param(p, "content");
    if (!path || !content) return bad("expected {path, content, encoding?}");
    std::string encoding = string_param(p, "encoding").value_or("utf8");
    if (encoding != "utf8" && encoding != "base64") return bad("encoding must be utf8 or base64");
    if (names_a_folder(*path))
      return bad("'" + *path + "' ends in '/', '.' or '..', so it names a folder; give the file's path");
    // Decoded before the check: content that is not base64 is refused with no `allowed` line.
    auto bytes = std::make_shared<std::string>();
    if (encoding == "base64") {
      auto decoded = io::decode_base64(*content);
      if (!decoded) return bad(decoded.err().message);
      *bytes = std::move(*decoded);
    } else {
      *bytes = std::move(*content);
    }
    plan out;
    out.checks.push_back({capability::filesystem_write, subject_kind::path, *path, {}, "path"});
    out.make_job = [=](const check_outcome& o) -> job {
      auto abs = checked_path(o, *path);
      std::size_t max = shared->max_file_bytes;
      return [=]() -> call_result {
        if (!abs) return from(abs.err());
        return from(io::fs_write(o.allowed_root, *abs, *bytes, max, denied_ids(o)));
      };
    };
    return out;
  }
  if (r.method == "host/env/get") {
    auto name = string_param(p, "name");
    if (!name) return bad("expected {name}");
    if (std::string why = io::env_name_problem(*name); !why.empty()) return bad(why);
    plan out;
    // The variable's name goes to the audit entry as `details.name` (the check is the
    // capability's alone): an entry without it did not say which secret was read (a review).
    out.checks.push_back({capability::secrets_env, subject_kind::none, *name, {}, "name"});
    out.make_job = [=](const check_outcome&) -> job { return [=] { return from(io::env_get(*name)); }; };
    return out;
  }
  if (r.method == "host/net/fetch") {
    auto url = string_param(p, "url");
    if (!url) return bad("expected {url, method?, headers?, body?}");
    for (const char* key : {"method", "body"})
      if (p.contains(key) && !p[key].is_string() && !p[key].is_null()) return bad(std::string(key) + " must be a string");
    std::string method = string_param(p, "method").value_or("GET");
    json headers = p.value("headers", json(nullptr));
    if (auto why = io::fetch_request_problem(method, headers)) return bad(why->message);
    std::string body = string_param(p, "body").value_or("");
    policy::domain_rules rules;
    if (auto it = cfg.domains.find(r.extension); it != cfg.domains.end()) rules = it->second;
    plan out;
    out.checks.push_back({capability::network_fetch, subject_kind::url, *url, {}, "url"});
    out.make_job = [=](const check_outcome&) -> job {
      return [=] { return from(io::net_fetch(*url, method, headers, body, rules, io::fetch_limits{})); };
    };
    return out;
  }
  if (r.method == "host/process/spawn") {
    if (!p.is_object() || !p.contains("argv") || !p["argv"].is_array() || p["argv"].empty())
      return bad("expected {argv: [program, args…], cwd?, timeoutMs?}; a shell string is not accepted");
    std::vector<std::string> argv;
    for (const json& a : p["argv"]) {
      if (!a.is_string()) return bad("every argv element must be a string");
      argv.push_back(a.get<std::string>());
    }
    if (argv.front().empty()) return bad("argv[0] is empty; give the program to run");
    if (p.contains("cwd") && !p["cwd"].is_string()) return bad("cwd must be a string, the folder to run in");
    // Relative to the session's folder; and a relative program path is taken from where it
    // runs, so the check and the spawn see one file (the check located it from the session's
    // folder, the spawn from `cwd`: an extension's own script ran as "/usr/bin/git").
    std::string cwd = string_param(p, "cwd").value_or(cfg.cwd);
    if (cwd.find('\0') != std::string::npos) return bad("cwd holds a NUL byte");
    if (!cwd.starts_with('/')) cwd = cfg.cwd + "/" + cwd;
    if (argv.front().find('/') != std::string::npos && !argv.front().starts_with('/'))
      argv.front() = cwd + "/" + argv.front();
    std::uint64_t timeout = cfg.spawn_timeout_ms;
    if (auto t = p.find("timeoutMs"); t != p.end()) {
      // An extension's bytes: checked, never trusted to have the right type (a string here
      // threw inside the actor).
      if (!t->is_number_unsigned()) return bad("timeoutMs must be a whole number of milliseconds");
      timeout = t->get<std::uint64_t>();
      if (timeout == 0) return bad("timeoutMs must be at least 1");
    }
    std::vector<std::string> env;
    if (auto it = cfg.envs.find(r.extension); it != cfg.envs.end()) env = it->second;
    auto confinement = cfg.confinements.find(r.extension);
    if (confinement == cfg.confinements.end())
      return call_error(io::rpc_error::denied, "host/process/spawn: no sandbox was made for extension '" +
                        r.extension + "' in this session, so nothing is spawned for it",
                        {{"capability", "process:spawn"}, {"reason", "no sandbox was made for this extension"}});
    // The program runs in the extension's own sandbox: what the extension may not do itself, a
    // program it has dhara start may not do either (`git -c alias.x=!…` rewrote config.json).
    std::vector<std::string> launcher = confinement->second.launcher;
    if (!launcher.empty()) {
      std::erase_if(env, [](const std::string& kv) { return kv.starts_with("TMPDIR="); });
      env.push_back("TMPDIR=" + confinement->second.tmpdir);
    }
    plan out;
    // The folder it runs in goes to the audit line with the argv. A folder the extension names
    // is checked as a tool's `cwd` input is (DESIGN §9 "Tool-call gate"): as a write when the
    // extension declares filesystem:write, else as a read when it declares filesystem:read;
    // with neither, its sandbox holds what the program may see there.
    policy::gate_check spawn{capability::process_spawn, subject_kind::argv, {}, argv, "argv"};
    spawn.also_key = "cwd";
    spawn.also = cwd;
    out.checks.push_back(std::move(spawn));
    if (p.contains("cwd")) {
      const auto declared = cfg.declared.find(r.extension);
      const policy::capability_set caps = declared == cfg.declared.end() ? policy::capability_set{} : declared->second;
      if (caps.contains(capability::filesystem_write))
        out.checks.push_back({capability::filesystem_write, subject_kind::path, cwd, {}, "cwd"});
      else if (caps.contains(capability::filesystem_read))
        out.checks.push_back({capability::filesystem_read, subject_kind::path, cwd, {}, "cwd"});
    }
    // The profile the launcher above makes: a spawn that starts after it changed is ended.
    const io::spawn_owner owner{r.extension, io::spawn_profile(r.extension)};
    out.make_job = [=](const check_outcome&) -> job {
      return [=]() -> call_result {
        auto exe = io::path_executable_locator(shared->path_env, cwd).locate(argv.front());
        if (!exe) return call_error(io::rpc_error::tool_error, exe.err().message);
        std::vector<std::string> full = launcher;
        full.push_back(*exe);
        full.insert(full.end(), argv.begin() + 1, argv.end());
        return from(io::process_spawn(full, cwd, timeout, shared->max_output_bytes, env, owner));
      };
    };
    return out;
  }
  return call_error(io::rpc_error::method_not_found, "unknown host method '" + r.method + "'");
}

// Runs one blocking operation on its own detached thread, then ends. Its result goes back with
// the ticket it was sent with.
using worker_actor = caf::typed_actor<caf::replies_to<run_atom, std::uint64_t>::with<call_result>>;

worker_actor::behavior_type worker(worker_actor::pointer self, job work) {
  return {[=](run_atom, std::uint64_t ticket) {
    call_result r = work();
    r.ticket = ticket;
    self->quit();
    return r;
  }};
}

// At most this many host operations of one extension are in flight (checked or running);
// more are refused at once. Each allowed operation runs on a thread of its own and may hold up to
// 16 MiB (a file read): a flood of them made ~1 000 threads, ran dhara out of threads (an
// unhandled exception ended the host API) or out of memory (4.4 GiB at 100 reads).
constexpr int max_in_flight_per_extension = 16;

// Holds one place of an extension's allowance until the request is answered.
class in_flight_place {
 public:
  explicit in_flight_place(std::shared_ptr<std::atomic<int>> count) : count_(std::move(count)) {}
  ~in_flight_place() { count_->fetch_sub(1, std::memory_order_relaxed); }
  in_flight_place(const in_flight_place&) = delete;
  in_flight_place& operator=(const in_flight_place&) = delete;

 private:
  std::shared_ptr<std::atomic<int>> count_;
};

// What the denied host requests of one extension may write into the audit trail in a session,
// counted as each denial's subjects plus a line's own ~300 bytes. Past it, the extension's host
// requests are refused before any check (no entry), for the rest of the session: a flood of
// denied host/checks with large subjects, paced under any rate, rotated an earlier session's
// entries away (~6 MB/s; a review). Denials by a failure (the audit cannot be written) are not
// counted: nothing is written then. Allowed requests are not budgeted (an entry a read).
constexpr std::uint64_t denial_budget_bytes = std::uint64_t{16} << 20;
constexpr std::uint64_t denial_line_bytes = 300;

// The audit bytes a denial of these checks costs.
std::uint64_t denial_cost(const std::vector<policy::gate_check>& checks) {
  std::uint64_t bytes = denial_line_bytes;
  for (const policy::gate_check& c : checks) {
    bytes += c.subject.size() + c.also.size();
    for (const std::string& a : c.argv) bytes += a.size() + 3;  // quoted, a space between
  }
  return bytes;
}

struct host_state {
  config_ptr cfg;  // shared with the workers, which may outlive a request
  std::map<std::string, std::shared_ptr<std::atomic<int>>> in_flight;  // per extension
  std::map<std::string, std::uint64_t, std::less<>> denied_bytes;     // per extension (denial_budget_bytes)
  // The checker's answers and the workers' results, matched by ticket (call_replies.hpp): many
  // host requests may be out at once, and CAF 0.17 would search a list of `request`s for each.
  call_replies replies;
  static inline const char* name = "host_api";
};

using host_ptr = host_api_actor::stateful_pointer<host_state>;

// An operation refused when it ran, after its checks were allowed: the checker audits the
// refusal as a denial of the request's first check, and the request is answered -32002 with
// that capability and the reason once it has (a refusal that could not be audited says so).
void audit_refusal(host_ptr self, check_batch batch, std::string why, caf::typed_response_promise<call_result> rp) {
  const checker_actor& checker = self->state.cfg->checker;
  const std::string capability = batch.checks.empty() ? "" : std::string(policy::to_string(batch.checks.front().cap));
  batch.ticket = self->state.replies.expect_check(
      self, checker, [self, rp, capability, why](check_outcome* o, const caf::error& lost) mutable {
        std::string reason = why;
        if (o == nullptr) reason += " (the refusal could not be audited: " + self->system().render(lost) + ")";
        else if (o->decided_by == policy::decider::failure) reason += " (the refusal could not be audited: " + o->reason + ")";
        rp.deliver(call_error(io::rpc_error::denied, reason, json{{"capability", capability}, {"reason", reason}}));
      });
  self->send(checker, refused_atom::value, std::move(batch), std::move(why));
}

// Runs an allowed operation on a worker of its own; its result, or why none came, answers rp.
// `checked`: the request's checks, which a refusal when it runs is audited against.
void run_on_worker(host_ptr self, job work, caf::typed_response_promise<call_result> rp,
                   std::shared_ptr<in_flight_place> place, check_batch checked) {
  worker_actor w;
  try {
    w = self->spawn<caf::detached>(worker, std::move(work));
  } catch (const std::exception& e) {  // no thread to be had (a process limit): refused, not lost
    rp.deliver(call_error(io::rpc_error::tool_error, std::string("the host operation could not start: ") + e.what()));
    return;
  }
  const std::uint64_t ticket =
      self->state.replies.expect_result(self, w, [self, rp, place, checked = std::move(checked)](call_result* done, const caf::error& lost) mutable {
        if (done && done->code == io::rpc_error::denied)
          return audit_refusal(self, std::move(checked), std::move(done->message), std::move(rp));
        if (done) rp.deliver(std::move(*done));
        else rp.deliver(call_error(io::rpc_error::tool_error, "the host operation failed: " + self->system().render(lost)));
      });
  self->send(w, run_atom::value, ticket);
}

}  // namespace

host_api_actor spawn_host_api(caf::actor_system& sys, host_api_config config) {
  return sys.spawn([](host_ptr self, host_api_config cfg) -> host_api_actor::behavior_type {
    self->state.cfg = std::make_shared<const host_api_config>(std::move(cfg));
    self->set_down_handler([self](caf::down_msg& m) { self->state.replies.down(m); });
    return {
        [=](host_atom, host_request& r) -> caf::typed_response_promise<call_result> {
          auto rp = self->make_response_promise<call_result>();
          auto planned = plan_for(r, self->state.cfg);
          if (auto* err = std::get_if<call_result>(&planned)) {
            rp.deliver(*err);  // a protocol error, not a decision: nothing to audit
            return rp;
          }
          const checker_actor& checker = self->state.cfg->checker;
          if (!checker) {
            rp.deliver(call_error(io::rpc_error::denied, "the capability checker failed: there is no checker",
                                  json{{"reason", "checker failure"}}));
            return rp;
          }
          plan p = std::move(std::get<plan>(planned));
          if (std::string why = policy::oversized_subject(p.checks, policy::host_request_limits); !why.empty()) {
            rp.deliver(call_error(io::rpc_error::invalid_params, r.method + ": " + why));
            return rp;
          }
          if (auto spent = self->state.denied_bytes.find(r.extension);
              spent != self->state.denied_bytes.end() && spent->second > denial_budget_bytes) {
            rp.deliver(call_error(io::rpc_error::tool_error,
                                  r.method + ": this extension's denied host requests passed " +
                                      std::to_string(denial_budget_bytes >> 20) +
                                      " MiB of audit entries; its host requests are refused for the rest of the session"));
            return rp;
          }
          // Operations only: a query (host/check) runs on no thread of its own.
          std::shared_ptr<in_flight_place> place;
          if (!p.query) {
            auto& count = self->state.in_flight[r.extension];
            if (!count) count = std::make_shared<std::atomic<int>>(0);
            if (count->load(std::memory_order_relaxed) >= max_in_flight_per_extension) {
              rp.deliver(call_error(io::rpc_error::tool_error,
                                    r.method + ": " + std::to_string(max_in_flight_per_extension) +
                                        " host operations of this extension are in flight already; send the next "
                                        "when one is answered"));
              return rp;
            }
            count->fetch_add(1, std::memory_order_relaxed);
            place = std::make_shared<in_flight_place>(count);
          }
          check_batch batch{r.extension, r.method, r.tool_call_id, self->state.cfg->session, p.checks};
          batch.opens_paths = true;
          batch.ticket = self->state.replies.expect_check(
              self, checker, [self, rp, p, place, ext = r.extension, method = r.method, call_id = r.tool_call_id](
                                 check_outcome* o, const caf::error& lost) mutable {
                if (o == nullptr) {
                  rp.deliver(call_error(io::rpc_error::denied, "the capability checker failed: " + self->system().render(lost),
                                        json{{"reason", "checker failure"}}));
                  return;
                }
                if (!o->allowed && o->decided_by != policy::decider::failure) {
                  std::uint64_t& spent = self->state.denied_bytes[ext];
                  const bool within = spent <= denial_budget_bytes;
                  spent += denial_cost(p.checks);
                  if (within && spent > denial_budget_bytes) {
                    spdlog::warn("extension {}: its denied host requests passed {} MiB of audit entries; its host "
                                 "requests are refused for the rest of the session",
                                 ext, denial_budget_bytes >> 20);
                  }
                }
                if (p.query) {
                  json result = {{"allowed", o->allowed}};
                  if (!o->allowed) result["reason"] = o->reason;
                  rp.deliver(call_result{true, std::move(result), 0, {}, nullptr});
                  return;
                }
                if (!o->allowed) {
                  rp.deliver(call_error(io::rpc_error::denied, o->reason,
                                        json{{"capability", o->capability}, {"reason", o->reason}}));
                  return;
                }
                check_batch checked{std::move(ext), std::move(method), std::move(call_id), self->state.cfg->session, std::move(p.checks)};
                run_on_worker(self, p.make_job(*o), rp, place, std::move(checked));
              });
          self->send(checker, check_atom::value, std::move(batch));
          return rp;
        },
        [=](check_outcome& o) { self->state.replies.answered(o); },
        [=](check_outcomes& os) { self->state.replies.answered(os); },
        [=](call_result& r) { self->state.replies.answered(r); },
        [=](reconfine_atom, const std::string& extension, std::vector<std::string>& launcher, bool narrower) {
          // A new configuration: the workers running requests keep the one they were given. When
          // it takes something away, the extension's spawns running now end (and any planned
          // under the old one as it starts), as the extension itself starts again in the new
          // profile: a revoked filesystem:write kept a spawn writing until its timeout, up to 24
          // h (a review). Their requests answer with the signal. One that only adds leaves them
          // (a review of that: an approval killed a running build).
          auto it = self->state.cfg->confinements.find(extension);
          if (it == self->state.cfg->confinements.end() || it->second.launcher.empty()) return;
          if (narrower)
            if (std::size_t ended = io::end_spawns_of(extension); ended > 0)
              spdlog::info("extension {}: ended {} running spawn(s): its sandbox lost a capability", extension, ended);
          auto next = std::make_shared<host_api_config>(*self->state.cfg);
          next->confinements[extension].launcher = std::move(launcher);
          self->state.cfg = std::move(next);
        },
    };
  }, std::move(config));
}

}  // namespace dhara::actors
