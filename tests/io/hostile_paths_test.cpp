// Hostile inputs against the real I/O half (issue 8, "Hostile inputs"): a real temporary
// tree full of traps checked by decide() through the real symlink resolver, then handed to
// the real host operations (io/host_ops) the way the host API does; project config files
// read from disk and merged by the real settings merge; argv spawned for real; URLs fetched
// against a real listener that counts every connection that reaches it.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "io/host_ops.hpp"
#include "io/identity_keeper.hpp"
#include "io/path_resolver.hpp"
#include "io/settings_file.hpp"
#include "policy/snapshot.hpp"
#include "../support/loopback_names.hpp"
#include "../support/policy_fixture.hpp"
#include "../support/temp_tree.hpp"

namespace fs = std::filesystem;
using namespace dhara;
using nlohmann::json;
using policy::capability;
using policy::subject_kind;
using policy::verdict_kind;

namespace {

struct temp_tree : dhara::testing::temp_tree {
  temp_tree() : dhara::testing::temp_tree("dhara-hostile-XXXXXX") {}
};

void put(const std::string& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
  REQUIRE(f.good());
}

std::string get(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// The traps. T = the temp root:
//   T/proj                      the project (allowed)
//   T/secret/key                denied
//   T/data/keys/k               denied through the link T/keys-link (the rule names the link)
//   T/home/.dhara/{permissions.json,audit.jsonl,config.json}   dhara's state
//   T/outside/file              neither allowed nor denied
struct trap_tree {
  temp_tree t;
  io::real_path_resolver resolver;
  policy::settings config;
  dhara::testing::policy_fixture fixture;  // its manifests and approvals (fs-tools: filesystem:*)
  std::shared_ptr<const policy::policy_snapshot> snap;

  trap_tree() {
    for (const char* d : {"proj/src", "secret", "data/keys", "home/.dhara/extensions", "outside", "proj/.dhara"})
      fs::create_directories(t / d);
    put(t / "proj/src/a.ts", "export {}\n");
    put(t / "secret/key", "TOP SECRET\n");
    put(t / "data/keys/k", "KEY\n");
    put(t / "outside/file", "outside\n");
    put(t / "home/.dhara/permissions.json", "{}\n");
    put(t / "home/.dhara/audit.jsonl", "");
    put(t / "home/.dhara/config.json", "{}\n");
    fs::create_directory_symlink(t / "data/keys", t / "keys-link");
    // Links planted in the project by a hostile repository or extension.
    fs::create_directory_symlink(t / "secret", t / "proj/to-secret");
    fs::create_directory_symlink("../secret", t / "proj/rel-secret");
    fs::create_symlink("../../secret/key", t / "proj/src/key-link");
    fs::create_directory_symlink(t / "outside", t / "proj/to-outside");
    fs::create_directory_symlink("../..", t / "proj/src/up2");
    fs::create_symlink(t / "proj/chain2", t / "proj/chain1");
    fs::create_directory_symlink(t / "secret", t / "proj/chain2");
    fs::create_symlink(t / "secret/new.key", t / "proj/dangling");          // denied, does not exist yet
    fs::create_directory_symlink(t.root, t / "proj/parent");               // the parent of everything
    fs::create_directory_symlink(t / "data", t / "proj/data-link");
    fs::create_symlink(t / "home/.dhara/permissions.json", t / "proj/perm-link");
    fs::create_symlink(t / "home/.dhara/audit.jsonl", t / "proj/audit-link");
    fs::create_directory_symlink(t / "home/.dhara", t / "proj/dhara-link");
    fs::create_directory_symlink("/proc/self/root", t / "proj/proc-root");
    fs::create_symlink("/proc/self/environ", t / "proj/proc-env");
    fs::create_symlink(t / "proj/loop-b", t / "proj/loop-a");
    fs::create_symlink(t / "proj/loop-a", t / "proj/loop-b");

    config.allowed_paths = {t / "proj"};
    config.denied_paths = {t / "secret", t / "keys-link", t / "future-secret"};  // the last does not exist
    snap = compile();
  }

  std::shared_ptr<const policy::policy_snapshot> compile() const { return compile(resolver); }

  std::shared_ptr<const policy::policy_snapshot> compile(const policy::path_resolver& with) const {
    policy::snapshot_input in;
    in.config = &config;
    in.home = t / "home";
    in.dhara_home = t / "home/.dhara";
    in.project_root = t / "proj";
    in.cwd = t / "proj";
    for (std::size_t i = 0; i < fixture.manifests.size(); ++i)
      in.extensions.push_back({&fixture.manifests[i], (t.root / "home/.dhara/extensions" / fixture.manifests[i].name).string(),
                               &fixture.perms[i]});
    auto s = policy::compile_snapshot(in, with);
    REQUIRE(s);
    return std::make_shared<const policy::policy_snapshot>(std::move(*s));
  }

  policy::decision decide(std::string_view p, capability cap = capability::filesystem_read) const {
    policy::check_environment env{&resolver, nullptr};
    return policy::decide(*snap, {"fs-tools", cap, subject_kind::path, p, {}}, env);
  }

  // The path the checker allowed: resolved as written (`..` after a link climbs its target).
  std::string resolved(std::string_view p) const {
    std::string abs = p.starts_with('/') ? std::string(p) : (t / "proj") + "/" + std::string(p);
    auto r = resolver.resolve(abs);
    REQUIRE(r);
    return *r;
  }
};

struct path_row {
  std::string path;       // as the extension sends it (relative to the project, or absolute)
  verdict_kind expect;
  std::string reason_has;
};

}  // namespace

TEST_CASE("hostile tree: a denial after resolution names the rule as its config file wrote it", "[io][hostile][path]") {
  trap_tree tr;
  const temp_tree& t = tr.t;
  tr.config.denied_paths_named = {"../secret (deniedPaths in ~/proj/.dhara/config.json)"};  // the first entry only
  tr.snap = tr.compile();
  CHECK(tr.decide("to-secret/key").reason == "'to-secret/key' resolves to '" + (t / "secret/key") +
                                                 "', which is denied by the rule ../secret (deniedPaths in ~/proj/.dhara/config.json)");
  CHECK(tr.decide(t / "secret/key").reason ==
        "'" + (t / "secret/key") + "' is denied by the rule ../secret (deniedPaths in ~/proj/.dhara/config.json)");
  CHECK(tr.decide("data-link/keys/k").reason == "'data-link/keys/k' resolves to '" + (t / "data/keys/k") +
                                                    "', which is denied by the rule " + (t / "keys-link"));
}

TEST_CASE("hostile tree: symlink and dot-dot escapes are denied after resolution", "[io][hostile][path]") {
  trap_tree tr;
  const temp_tree& t = tr.t;
  const std::vector<path_row> rows = {
      {"to-secret/key", verdict_kind::deny, "which is denied by the rule " + (t / "secret")},
      {"rel-secret/key", verdict_kind::deny, "which is denied by the rule " + (t / "secret")},
      {"src/key-link", verdict_kind::deny, "which is denied by the rule " + (t / "secret")},
      {"chain1/key", verdict_kind::deny, "which is denied by the rule " + (t / "secret")},
      {"parent/secret/key", verdict_kind::deny, "which is denied by the rule " + (t / "secret")},
      {"src/up2/secret/key", verdict_kind::deny, "which is denied by the rule " + (t / "secret")},
      {"to-outside/file", verdict_kind::deny, "outside the allowed paths"},
      {"src/up2/outside/file", verdict_kind::deny, "outside the allowed paths"},
      {"src/../../outside/file", verdict_kind::deny, "outside the allowed paths"},
      {"to-secret/../outside/file", verdict_kind::deny, "outside the allowed paths"},  // `..` after a link climbs its target
      {"loop-a", verdict_kind::deny, "too many levels of symbolic links"},
      // Deny rules after resolution: the rule names a link, the request names its target.
      {t / "data/keys/k", verdict_kind::deny, "denied by the rule " + (t / "keys-link")},
      {"data-link/keys/k", verdict_kind::deny, "denied by the rule " + (t / "keys-link")},
      // Controls: plain files and links that stay inside.
      {"src/a.ts", verdict_kind::allow, ""},
      {"src/up2/proj/src/a.ts", verdict_kind::allow, ""},
      {"to-secret/../proj/src/a.ts", verdict_kind::allow, ""},
  };
  for (const path_row& r : rows) {
    INFO("path '" << r.path << "'");
    policy::decision d = tr.decide(r.path);
    INFO("reason: " << d.reason);
    CHECK(d.verdict == r.expect);
    CHECK(d.reason.find(r.reason_has) != std::string::npos);
    if (d.allowed()) {
      // The decision carries the resolution it matched, and the host operation opens it
      // beneath the matched root.
      CHECK(d.resolved == tr.resolved(r.path));
      auto read = io::fs_read(std::string(d.matched_rule), d.resolved, "utf8", 1 << 20);
      CHECK(read);
    }
  }
}

TEST_CASE("hostile tree: a denied path that does not exist yet, reached through a symlinked parent", "[io][hostile][path]") {
  trap_tree tr;
  const temp_tree& t = tr.t;
  const std::vector<path_row> rows = {
      {"dangling", verdict_kind::deny, "resolves to '" + (t / "secret/new.key") + "'"},
      {"to-secret/new.key", verdict_kind::deny, "denied by the rule " + (t / "secret")},
      {"parent/secret/sub/new.key", verdict_kind::deny, "denied by the rule " + (t / "secret")},
      {"parent/future-secret/x", verdict_kind::deny, "denied by the rule " + (t / "future-secret")},
      {"parent/future-secret", verdict_kind::deny, "denied by the rule " + (t / "future-secret")},
      {"src/up2/future-secret/deeper/still/x", verdict_kind::deny, "denied by the rule " + (t / "future-secret")},
      {"src/new-file.ts", verdict_kind::allow, ""},
  };
  for (const path_row& r : rows) {
    INFO("write to '" << r.path << "'");
    policy::decision d = tr.decide(r.path, capability::filesystem_write);
    INFO("reason: " << d.reason);
    CHECK(d.verdict == r.expect);
    CHECK(d.reason.find(r.reason_has) != std::string::npos);
  }
  // Even if a check were skipped, the write beneath the project root cannot land in the
  // denied folder: openat2 refuses the dangling absolute link.
  auto w = io::fs_write(t / "proj", t / "proj/dangling", "pwned", 1 << 20);
  REQUIRE_FALSE(w);
  CHECK(w.err().code == policy::errc::refused);
  CHECK_FALSE(fs::exists(t / "secret/new.key"));
  auto w2 = io::fs_write(t / "proj", t / "proj/parent/future-secret", "pwned", 1 << 20);
  REQUIRE_FALSE(w2);
  CHECK_FALSE(fs::exists(t / "future-secret"));
}

TEST_CASE("hostile tree: a link swapped in after the check cannot escape the allowed root", "[io][hostile][path]") {
  trap_tree tr;
  const temp_tree& t = tr.t;
  fs::create_directory(t / "proj/swap");
  policy::decision d = tr.decide("swap/k", capability::filesystem_write);
  REQUIRE(d.allowed());
  std::string root(d.matched_rule);
  std::string target = d.resolved;
  CHECK(target == t / "proj/swap/k");
  // Between the check and the open, the folder becomes a link to the denied folder.
  fs::remove(t / "proj/swap");
  fs::create_directory_symlink(t / "secret", t / "proj/swap");
  auto w = io::fs_write(root, target, "pwned", 1 << 20);
  REQUIRE_FALSE(w);
  CHECK(w.err().code == policy::errc::refused);
  CHECK_FALSE(fs::exists(t / "secret/k"));
  auto r = io::fs_read(root, t / "proj/swap/key", "utf8", 1 << 20);
  REQUIRE_FALSE(r);
  CHECK(get(t / "secret/key") == "TOP SECRET\n");
}

// A denied folder beneath the allowed root is out of RESOLVE_BENEATH's reach: only opening the
// checked resolution, with no symlink followed, keeps a link retargeted after the check from
// leading the operation into it.
TEST_CASE("hostile tree: a link retargeted into a denied folder beneath the root after the check is not followed",
          "[io][hostile][path]") {
  trap_tree tr;
  const temp_tree& t = tr.t;
  fs::create_directories(t / "proj/private");
  put(t / "proj/private/key", "PRIVATE\n");
  put(t / "proj/src/key", "checked\n");
  fs::create_directory_symlink("src", t / "proj/lib");
  tr.config.denied_paths.push_back(t / "proj/private");
  tr.snap = tr.compile();
  REQUIRE(tr.decide("private/key").verdict == verdict_kind::deny);
  REQUIRE(tr.decide("lib/key").allowed());  // the control: a plain read through the link
  policy::decision d = tr.decide("lib/key");
  const std::string root(d.matched_rule);
  CHECK(root == t / "proj");
  CHECK(d.resolved == t / "proj/src/key");
  policy::decision w = tr.decide("lib/key", capability::filesystem_write);
  REQUIRE(w.allowed());

  // After the check, lib is made a link into the denied folder: the operation opens what was
  // checked, not what the path names now.
  fs::remove(t / "proj/lib");
  fs::create_directory_symlink("private", t / "proj/lib");
  REQUIRE(tr.decide("lib/key").verdict == verdict_kind::deny);  // as a check now would decide
  auto r = io::fs_read(root, d.resolved, "utf8", 1 << 20);
  REQUIRE(r);
  CHECK((*r)["content"] == "checked\n");

  // And a folder of the checked path itself replaced by a link into the denied folder: refused.
  fs::rename(t / "proj/src", t / "proj/src.old");
  fs::create_directory_symlink("private", t / "proj/src");
  auto again = io::fs_read(root, d.resolved, "utf8", 1 << 20);
  REQUIRE_FALSE(again);
  CHECK(again.err().code == policy::errc::refused);
  auto written = io::fs_write(root, w.resolved, "pwned", 1 << 20);
  REQUIRE_FALSE(written);
  CHECK(written.err().code == policy::errc::refused);
  CHECK(get(t / "proj/private/key") == "PRIVATE\n");
  auto listed = io::fs_list(root, t / "proj/src");
  REQUIRE_FALSE(listed);
}

// At yolo every path is allowed beneath "/" but dhara's own files: the decision still names the
// root and the resolution, so host file operations work, and open only what was checked.
TEST_CASE("hostile tree: at yolo host file operations open the checked resolution beneath /", "[io][hostile][path]") {
  trap_tree tr;
  const temp_tree& t = tr.t;
  tr.config.level = policy::security_level::yolo;
  tr.snap = tr.compile();
  policy::decision d = tr.decide("to-outside/file");
  REQUIRE(d.allowed());
  CHECK(d.decided_by == policy::decider::yolo);
  CHECK(std::string(d.matched_rule) == "/");
  CHECK(d.resolved == t / "outside/file");
  // The identities of the rules that allowed it: at yolo, dhara's own files only. The
  // standard rules' denials (here the secret folder) are not yolo's and refuse nothing.
  REQUIRE(tr.snap->state_files.denied_ids);
  const std::vector<policy::file_id>& yolo_ids = *tr.snap->state_files.denied_ids;
  auto r = io::fs_read(std::string(d.matched_rule), d.resolved, "utf8", 1 << 20, yolo_ids);
  REQUIRE(r);
  CHECK((*r)["content"] == "outside\n");
  policy::decision secret = tr.decide("to-secret/key");
  REQUIRE(secret.allowed());
  auto s = io::fs_read(std::string(secret.matched_rule), secret.resolved, "utf8", 1 << 20, yolo_ids);
  REQUIRE(s);
  CHECK((*s)["content"] == "TOP SECRET\n");
  CHECK_FALSE(tr.decide("perm-link", capability::filesystem_write).allowed());  // dhara's own files
}

// Rules name paths. An extension that may write its project can rename the folder that holds a
// denied one; the check then allows the new path, but the host operation knows the denied
// folder by the identity the rules recorded, and refuses it before opening or creating anything.
TEST_CASE("hostile tree: a denied folder whose parent was renamed is refused by its identity", "[io][hostile][path]") {
  trap_tree tr;
  const temp_tree& t = tr.t;
  fs::create_directories(t / "proj/a/private");
  fs::create_directories(t / "proj/notes");
  put(t / "proj/a/private/key", "PRIVATE\n");
  put(t / "proj/a/open.txt", "open\n");
  put(t / "proj/notes/secret.txt", "SECRET FILE\n");
  tr.config.denied_paths.push_back(t / "proj/a/private");
  tr.config.denied_paths.push_back(t / "proj/notes/secret.txt");
  tr.snap = tr.compile();
  REQUIRE(tr.snap->paths.denied_ids);
  const std::vector<policy::file_id>& ids = *tr.snap->paths.denied_ids;
  REQUIRE(tr.decide("a/private/key").verdict == verdict_kind::deny);

  fs::rename(t / "proj/a", t / "proj/z");
  fs::rename(t / "proj/notes", t / "proj/n2");
  const std::string root = t / "proj";
  // The names no longer match a rule: the checks allow, as rules by name must.
  for (const char* p : {"z/private/key", "z/private/new.key", "n2/secret.txt", "z/private", "z/open.txt"}) {
    INFO(p);
    REQUIRE(tr.decide(p).allowed());
  }
  auto read = io::fs_read(root, tr.decide("z/private/key").resolved, "utf8", 1 << 20, ids);
  REQUIRE_FALSE(read);
  CHECK(read.err().code == policy::errc::refused);
  CHECK_THAT(read.err().message, Catch::Contains("lies in a folder the rules deny"));
  auto created = io::fs_write(root, tr.decide("z/private/new.key", capability::filesystem_write).resolved, "x",
                              1 << 20, ids);
  REQUIRE_FALSE(created);
  CHECK_FALSE(fs::exists(t / "proj/z/private/new.key"));
  auto listed = io::fs_list(root, tr.decide("z/private").resolved, io::max_list_entries, ids);
  REQUIRE_FALSE(listed);
  auto file = io::fs_read(root, tr.decide("n2/secret.txt").resolved, "utf8", 1 << 20, ids);
  REQUIRE_FALSE(file);
  CHECK_THAT(file.err().message, Catch::Contains("is itself an entry the rules deny"));
  auto over = io::fs_write(root, tr.decide("n2/secret.txt", capability::filesystem_write).resolved, "pwned", 1 << 20, ids);
  REQUIRE_FALSE(over);
  CHECK(get(t / "proj/n2/secret.txt") == "SECRET FILE\n");
  // What was never denied still opens, beside the moved folder and at the root.
  auto open = io::fs_read(root, tr.decide("z/open.txt").resolved, "utf8", 1 << 20, ids);
  REQUIRE(open);
  CHECK((*open)["content"] == "open\n");
  CHECK(io::fs_list(root, root, io::max_list_entries, ids));
  CHECK(io::fs_write(root, t / "proj/z/new.txt", "fine", 1 << 20, ids));
}

namespace {

policy::file_id id_at(const std::string& path) {
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return {static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
}

bool has_id(const std::vector<policy::file_id>& ids, const policy::file_id& id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// What the permissions store does at a reload: compiles with a pinning resolver, and the
// keeper takes over what it pinned. The identities a host operation is given.
std::shared_ptr<const std::vector<policy::file_id>> compile_and_keep(trap_tree& tr, io::identity_keeper& keeper) {
  io::pinning_resolver pins;
  tr.snap = tr.compile(pins);
  return keeper.refresh(tr.snap->paths, &pins);
}

}  // namespace

// Every permission change compiles the rules again, when a/private may name nothing, a new
// folder an extension made in its place, or nothing that resolves. The keepers (what the
// permissions store uses) still hold the folder the entry named before, while it is linked.
TEST_CASE("hostile tree: a denied folder moved away stays refused after the rules are compiled again", "[io][hostile][path]") {
  trap_tree tr;
  const temp_tree& t = tr.t;
  fs::create_directories(t / "proj/a/private");
  put(t / "proj/a/private/key", "PRIVATE\n");
  tr.config.denied_paths.push_back(t / "proj/a/private");
  io::identity_keeper keeper;
  const policy::file_id first = id_at(t / "proj/a/private");
  REQUIRE(has_id(*compile_and_keep(tr, keeper), first));
  const std::size_t held_at_start = keeper.held();

  fs::rename(t / "proj/a", t / "proj/z");
  const std::vector<std::string> ways = {"a/private names nothing", "a/private is a new folder",
                                         "a is a symlink to itself, so a/private does not resolve"};
  for (const std::string& way : ways) {
    INFO(way);
    if (way == ways[1]) fs::create_directories(t / "proj/a/private");
    if (way == ways[2]) {
      fs::remove_all(t / "proj/a");
      fs::create_symlink("a", t / "proj/a");
    }
    auto ids = compile_and_keep(tr, keeper);
    // The compile alone no longer knows the moved folder: this is what the keeper is for.
    REQUIRE_FALSE(has_id(*tr.snap->paths.denied_ids, first));
    CHECK(has_id(*ids, first));
    if (way == ways[1]) CHECK(has_id(*ids, id_at(t / "proj/a/private")));
    auto read = io::fs_read(t / "proj", tr.decide("z/private/key").resolved, "utf8", 1 << 20, *ids);
    REQUIRE_FALSE(read);
    CHECK_THAT(read.err().message, Catch::Contains("lies in a folder the rules deny"));
  }
  CHECK(keeper.held() == held_at_start);  // the new a/private was let go when a became a link
  // Deleted, it is let go: nothing can reach it by a path any more.
  fs::remove_all(t / "proj/z");
  auto ids = compile_and_keep(tr, keeper);
  CHECK_FALSE(has_id(*ids, first));
  CHECK(keeper.held() == held_at_start - 1);
}

// A compile looks at each denied entry once, and the keeper holds that very look: a folder
// moved between the compile and the keeper taking it over is still held.
TEST_CASE("hostile tree: the keeper holds what the compile saw, not a second look", "[io][hostile][path]") {
  trap_tree tr;
  const temp_tree& t = tr.t;
  fs::create_directories(t / "proj/a/private");
  tr.config.denied_paths.push_back(t / "proj/a/private");
  const policy::file_id first = id_at(t / "proj/a/private");
  io::pinning_resolver pins;
  tr.snap = tr.compile(pins);
  REQUIRE(has_id(*tr.snap->paths.denied_ids, first));
  fs::rename(t / "proj/a", t / "proj/z");
  io::identity_keeper pinned, looked_again;
  CHECK(has_id(*pinned.refresh(tr.snap->paths, &pins), first));
  CHECK(pinned.bare() == 0);
  // The session's first rules are taken by a look now, which no longer finds the folder: the
  // number the compile saw is kept bare (not held open, never let go).
  CHECK(has_id(*looked_again.refresh(tr.snap->paths, nullptr), first));
  CHECK(pinned.held() == looked_again.held() + 1);
  CHECK(looked_again.bare() == 1);
  // The next compile knows it only through what each kept.
  io::pinning_resolver next;
  tr.snap = tr.compile(next);
  REQUIRE_FALSE(has_id(*tr.snap->paths.denied_ids, first));
  CHECK(has_id(*pinned.refresh(tr.snap->paths, &next), first));
  CHECK(has_id(*looked_again.refresh(tr.snap->paths, &next), first));
}

// dhara's own state files are denied by globs (`<project>/.dhara/config.json*`): the entries
// they match when the rules are compiled are known by identity, so a write to the project's
// config through its folder renamed (`mv .dhara y`, write `y/config.json`, `mv y .dhara`)
// is refused, before and after the rules are compiled again.
TEST_CASE("hostile tree: dhara's own files matched by a denied glob are refused in a renamed folder", "[io][hostile][path]") {
  trap_tree tr;
  const temp_tree& t = tr.t;
  fs::create_directories(t / "proj/.dhara");
  put(t / "proj/.dhara/config.json", "{}\n");
  io::identity_keeper keeper;
  auto ids = compile_and_keep(tr, keeper);
  CHECK(has_id(*ids, id_at(t / "proj/.dhara/config.json")));
  REQUIRE_FALSE(tr.decide(".dhara/config.json", capability::filesystem_write).allowed());
  fs::rename(t / "proj/.dhara", t / "proj/y");
  for (int compiled_again = 0; compiled_again < 2; ++compiled_again) {
    INFO("compiled again: " << compiled_again);
    if (compiled_again) ids = compile_and_keep(tr, keeper);
    policy::decision d = tr.decide("y/config.json", capability::filesystem_write);
    REQUIRE(d.allowed());  // no rule names y/config.json
    auto wrote = io::fs_write(t / "proj", d.resolved, "{\"security\":{\"level\":\"yolo\"}}", 1 << 20, *ids);
    REQUIRE_FALSE(wrote);
    CHECK_THAT(wrote.err().message, Catch::Contains("is itself an entry the rules deny"));
    CHECK(get(t / "proj/y/config.json") == "{}\n");
  }
}

TEST_CASE("hostile tree: dhara's own files in folders named with glob characters are known by identity", "[io][hostile][path]") {
  // The built-in globs' folders are taken literally, and glob(3) gets them escaped: a home and a
  // project named `h[1]` and `app[2]` still have their state files identified (so a rename of
  // the folder does not free them), and an `h1` or `app2` beside them is not mistaken for them.
  temp_tree t;
  for (const char* dir : {"h[1]/.dhara", "h1/.dhara", "app[2]/.dhara", "app2/.dhara"}) {
    fs::create_directories(t / dir);
    put(t / (std::string(dir) + "/config.json"), "{}\n");
  }
  io::real_path_resolver resolver;
  policy::path_rules_input in{{t / "app[2]"}, {}, t / "h[1]", t / "h[1]/.dhara", t / "app[2]"};
  auto rules = policy::compile_path_rules(in, resolver);
  REQUIRE(rules);
  const std::vector<policy::file_id>& ids = *rules->denied_ids;
  CHECK(has_id(ids, id_at(t / "h[1]/.dhara/config.json")));
  CHECK(has_id(ids, id_at(t / "app[2]/.dhara/config.json")));
  CHECK_FALSE(has_id(ids, id_at(t / "h1/.dhara/config.json")));
  CHECK_FALSE(has_id(ids, id_at(t / "app2/.dhara/config.json")));
}

TEST_CASE("hostile tree: a denied glob inside a folder named with glob characters says how to write it",
          "[io][hostile][path]") {
  // `<t>/app[2]/*.env` reads `app[2]` as a glob (it matches `app2/…`) and the name as a file
  // `*.env`: neither denies `app[2]/.env`. The folder exists, so the compile says what to write
  // (doctor shows it); written that way, the file is denied.
  temp_tree t;
  for (const char* dir : {"app[2]", "app2"}) {
    fs::create_directories(t / dir);
    put(t / (std::string(dir) + "/.env"), "TOKEN\n");
  }
  io::real_path_resolver resolver;
  auto verdict = [&](const policy::path_rule_set& r, const std::string& p) {
    return policy::check_path(r, p, t / "app[2]", "/nonexistent-home", policy::path_access::read, resolver);
  };
  const std::string allowed = policy::escape_glob(t.root.string());
  policy::path_rules_input unescaped{{allowed}, {t / "app[2]/*.env"}, "/nonexistent-home", t / "d", t / "app[2]"};
  auto loose = policy::compile_path_rules(unescaped, resolver);
  REQUIRE(loose);
  CHECK(verdict(*loose, t / "app[2]/.env").allowed());  // what the hint is for
  CHECK_FALSE(verdict(*loose, t / "app2/.env").allowed());
  const std::string fixed = policy::escape_glob(t / "app[2]") + "/*.env";
  REQUIRE(loose->problems.size() == 1);
  CHECK(loose->problems[0].find("write '" + fixed + "' to deny there") != std::string::npos);
  policy::path_rules_input escaped{{allowed}, {fixed}, "/nonexistent-home", t / "d", t / "app[2]"};
  auto tight = policy::compile_path_rules(escaped, resolver);
  REQUIRE(tight);
  CHECK(tight->problems.empty());
  CHECK_FALSE(verdict(*tight, t / "app[2]/.env").allowed());
  CHECK(verdict(*tight, t / "app2/.env").allowed());
  // The deepest such folder, with a glob anywhere after it; an escape in the folder is read.
  fs::create_directories(t / "app[2]/d");
  fs::create_directories(t / "a[b/c[2]");
  policy::path_rules_input deeper{{allowed},
                                  {t / "app[2]/*/x", policy::escape_glob(t / "a[b") + "/c[2]/*.env"},
                                  "/nonexistent-home", t / "d", t / "app[2]"};
  auto hinted = policy::compile_path_rules(deeper, resolver);
  REQUIRE(hinted);
  REQUIRE(hinted->problems.size() == 2);
  CHECK(hinted->problems[0].find("write '" + policy::escape_glob(t / "app[2]") + "/*/x'") != std::string::npos);
  CHECK(hinted->problems[1].find("write '" + policy::escape_glob(t / "a[b/c[2]") + "/*.env'") != std::string::npos);
  // No folder of that name: a glob meant as one, no hint.
  policy::path_rules_input meant{{allowed}, {t / "ap?[0-9]/*.env"}, "/nonexistent-home", t / "d", t / "app[2]"};
  auto globbed = policy::compile_path_rules(meant, resolver);
  REQUIRE(globbed);
  CHECK(globbed->problems.empty());
  CHECK_FALSE(verdict(*globbed, t / "app2/.env").allowed());
}

TEST_CASE("hostile tree: an untrusted project's narrowing is bounded by the global entries under a home named "
          "with glob characters, taken literally", "[io][hostile][path]") {
  // The global allowedPaths say `~/work`; home is `h[o]me`. Its name is escaped before `~` is
  // expanded, so the bound is the folder `h[o]me/work`, not the glob `h[o]me/work` (which
  // would name `home/work` instead): a project there may narrow to its `src`, and a project
  // under a `home/work` beside it may not borrow the bound.
  temp_tree t;
  for (const char* dir : {"h[o]me/work/proj/src", "home/work/proj/src"}) fs::create_directories(t / dir);
  put(t / "h[o]me/work/proj/src/a.ts", "a\n");
  put(t / "home/work/proj/src/a.ts", "a\n");
  io::real_path_resolver resolver;
  const std::string home = t / "h[o]me";
  auto narrowed = [&](const std::string& project) {
    policy::path_rules_input in{{policy::escape_glob(project) + "/src"}, {}, home, home + "/.dhara", project};
    in.confine_root = project;
    in.confine_within = {"~/work"};
    auto rules = policy::compile_path_rules(in, resolver);
    REQUIRE(rules);
    return policy::check_path(*rules, project + "/src/a.ts", project, home, policy::path_access::read, resolver);
  };
  policy::decision inside = narrowed(t / "h[o]me/work/proj");
  INFO("inside: " << inside.reason);
  CHECK(inside.allowed());
  policy::decision beside = narrowed(t / "home/work/proj");
  INFO("beside: " << beside.reason);
  CHECK(beside.verdict == verdict_kind::deny);
}

// A project may list any number of denied paths; what is held open stays bounded, and what is
// past the bound is kept by number for the rest of the session.
TEST_CASE("hostile tree: many denied entries hold a bounded number of descriptors and lose none", "[io][hostile][path]") {
  trap_tree tr;
  const temp_tree& t = tr.t;
  const std::size_t n = io::max_held + 40;
  std::vector<policy::file_id> named;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string dir = t / ("proj/a/d" + std::to_string(i));
    fs::create_directories(dir);
    tr.config.denied_paths.push_back(dir);
    named.push_back(id_at(dir));
  }
  io::identity_keeper keeper;
  for (bool moved : {false, true}) {
    INFO("parent renamed: " << moved);
    if (moved) fs::rename(t / "proj/a", t / "proj/z");
    io::pinning_resolver pins;
    tr.snap = tr.compile(pins);
    auto ids = keeper.refresh(tr.snap->paths, &pins);
    if (!moved) CHECK(pins.unheld() >= n - io::max_held);  // past the bound: by stat(2) alone
    CHECK(keeper.held() <= io::max_held);
    for (const policy::file_id& id : named) CHECK(has_id(*ids, id));
  }
  CHECK(keeper.bare() >= n - io::max_held);
}

// A denied entry that is a link names its target. Pointed elsewhere since (by whoever may
// write the link), the rules name the new target; the old one stays refused while it is linked
// (decided: the user denied what the link led to).
TEST_CASE("hostile tree: the old target of a denied link pointed elsewhere stays refused", "[io][hostile][path]") {
  trap_tree tr;
  const temp_tree& t = tr.t;
  fs::create_directories(t / "proj/real-secret");
  fs::create_directories(t / "proj/other");
  put(t / "proj/real-secret/key", "PRIVATE\n");
  fs::create_directory_symlink(t / "proj/real-secret", t / "proj/s");
  tr.config.denied_paths.push_back(t / "proj/s");
  io::identity_keeper keeper;
  compile_and_keep(tr, keeper);
  REQUIRE(tr.decide("real-secret/key").verdict == verdict_kind::deny);
  fs::remove(t / "proj/s");
  fs::create_directory_symlink(t / "proj/other", t / "proj/s");
  auto ids = compile_and_keep(tr, keeper);
  REQUIRE(tr.decide("real-secret/key").allowed());  // no rule names it any more
  auto read = io::fs_read(t / "proj", tr.decide("real-secret/key").resolved, "utf8", 1 << 20, *ids);
  REQUIRE_FALSE(read);
  CHECK_THAT(read.err().message, Catch::Contains("lies in a folder the rules deny"));
}

TEST_CASE("hostile tree: /proc/self/root, /proc/*/environ and /dev/fd links are denied", "[io][hostile][proc]") {
  trap_tree tr;
  const temp_tree& t = tr.t;
  const std::string self = std::to_string(::getpid());
  std::vector<path_row> rows = {
      {"/proc/self/root" + (t / "secret/key"), verdict_kind::deny, "built-in: /proc/*/root"},
      {"/proc/self/root" + (t / "proj/src/a.ts"), verdict_kind::deny, "built-in: /proc/*/root"},  // resolves inside, still refused
      {"/proc/" + self + "/root" + (t / "proj/src/a.ts"), verdict_kind::deny, "built-in: /proc/*/root"},
      {"/proc/self/environ", verdict_kind::deny, "built-in: /proc/*/environ"},
      {"/proc/" + self + "/environ", verdict_kind::deny, "built-in: /proc/*/environ"},
      {"/proc/self/task/" + self + "/environ", verdict_kind::deny, "built-in: /proc/*/environ"},
      {"proc-root" + (t / "secret/key"), verdict_kind::deny, "which is denied by the rule " + (t / "secret")},  // a project link into /proc
      {"proc-env", verdict_kind::deny, "built-in: /proc/*/environ"},
  };
  // Descriptors of this process named through /dev/fd (→ /proc/self/fd): a pipe resolves to
  // "/proc/<pid>/fd/pipe:[…]", an open file to the file itself, which is checked again.
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  int key_fd = ::open((t / "secret/key").c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(key_fd >= 0);
  rows.push_back({"/dev/fd/" + std::to_string(pipe_fds[0]), verdict_kind::deny, "built-in: /proc/*/fd"});
  rows.push_back({"/dev/fd/" + std::to_string(key_fd), verdict_kind::deny, "which is denied by the rule " + (t / "secret")});
  rows.push_back({"/proc/self/fd/" + std::to_string(key_fd), verdict_kind::deny, "built-in: /proc/*/fd"});
  for (bool everything : {false, true}) {
    if (everything) {  // the user allowed the whole filesystem: the built-ins still hold
      tr.config.allowed_paths = {"/"};
      tr.snap = tr.compile();
    }
    for (const path_row& r : rows) {
      INFO("allowed " << (everything ? "/" : "the project") << ", path '" << r.path << "'");
      policy::decision d = tr.decide(r.path);
      INFO("reason: " << d.reason);
      CHECK(d.verdict == r.expect);
      CHECK(d.reason.find(r.reason_has) != std::string::npos);
    }
  }
  // The host operation refuses the magic link itself, whatever the checker said.
  auto r = io::fs_read(t / "proj", t / "proj/proc-root" + (t / "proj/src/a.ts"), "utf8", 1 << 20);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == policy::errc::refused);
  auto root = io::fs_read("/proc/self", "/proc/self/root/etc/hostname", "utf8", 1 << 20);
  REQUIRE_FALSE(root);  // a magic link is never followed
  CHECK(root.err().code == policy::errc::refused);
  auto fd = io::fs_read(t / "proj", "/proc/self/fd/" + std::to_string(key_fd), "utf8", 1 << 20);
  REQUIRE_FALSE(fd);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  ::close(key_fd);
}

TEST_CASE("hostile tree: an extension cannot approve itself or edit the audit through the host API", "[io][hostile][state]") {
  trap_tree tr;
  const temp_tree& t = tr.t;
  tr.config.allowed_paths = {t.root.string()};  // even with everything under T allowed
  tr.snap = tr.compile();
  const std::string dhara_home = t / "home/.dhara";
  const std::vector<path_row> rows = {
      {dhara_home + "/permissions.json", verdict_kind::deny, "built-in: $DHARA_HOME/permissions.json*"},
      {dhara_home + "/permissions.json.tmp", verdict_kind::deny, "built-in: $DHARA_HOME/permissions.json*"},
      {dhara_home + "/audit.jsonl", verdict_kind::deny, "built-in: $DHARA_HOME/audit*"},
      {dhara_home + "/audit.1.jsonl", verdict_kind::deny, "built-in: $DHARA_HOME/audit*"},
      {dhara_home + "/config.json", verdict_kind::deny, "built-in: $DHARA_HOME/config.json*"},
      {dhara_home + "/logs/x.log", verdict_kind::deny, "built-in: $DHARA_HOME/logs"},
      {"perm-link", verdict_kind::deny, "built-in: $DHARA_HOME/permissions.json*"},
      {"audit-link", verdict_kind::deny, "built-in: $DHARA_HOME/audit*"},
      {"dhara-link/permissions.json", verdict_kind::deny, "built-in: $DHARA_HOME/permissions.json*"},
      {"dhara-link/../.dhara/config.json", verdict_kind::deny, "is denied by the rule built-in: "},  // both forms are state files
      {".dhara/config.json", verdict_kind::deny, "built-in: <project>/.dhara/config.json"},
      {"parent/proj/.dhara/config.json", verdict_kind::deny, "built-in: <project>/.dhara/config.json"},
      {"src/a.ts", verdict_kind::allow, ""},
  };
  for (const path_row& r : rows) {
    INFO("write to '" << r.path << "'");
    policy::decision d = tr.decide(r.path, capability::filesystem_write);
    INFO("reason: " << d.reason);
    CHECK(d.verdict == r.expect);
    CHECK(d.reason.find(r.reason_has) != std::string::npos);
  }
  // Through the host operation from the project root, the links lead nowhere either.
  for (const char* link : {"perm-link", "audit-link", "dhara-link/permissions.json"}) {
    INFO(link);
    auto w = io::fs_write(t / "proj", (t.root / "proj" / link).string(), R"({"fs-tools":{"capabilities":{"process:spawn":"approved"}}})", 1 << 20);
    REQUIRE_FALSE(w);
    CHECK(w.err().code == policy::errc::refused);
  }
  CHECK(get(dhara_home + "/permissions.json") == "{}\n");
  CHECK(get(dhara_home + "/audit.jsonl").empty());
}

TEST_CASE("hostile commands: argv runs without a shell and look-alikes are refused by the real locator", "[io][hostile][command]") {
  temp_tree t;
  put(t / "git", "#!/bin/sh\ntouch pwned\n");
  fs::permissions(t / "git", fs::perms::owner_all);
  io::path_executable_locator locator("/usr/bin:/bin", t.root.string());
  auto rules = policy::compile_command_rules(std::vector<std::string>{"git", "echo"});
  struct row {
    std::string command;
    verdict_kind expect;
    std::string reason_has;
  };
  const std::vector<row> rows = {
      {"git status; touch " + (t / "pwned"), verdict_kind::deny, "shell metacharacters"},
      {"git log && touch pwned", verdict_kind::deny, "shell metacharacters"},
      {"echo $(touch pwned)", verdict_kind::deny, "shell metacharacters"},
      {"./git status", verdict_kind::deny, "outside /usr, /bin"},
      {t / "git", verdict_kind::deny, "outside /usr, /bin"},
      {"sh -c 'git status'", verdict_kind::deny, "not in the extension's process.commands list"},
      {"git status", verdict_kind::allow, ""},
      // A link named like a listed command, to a program under /usr (found by a review: the
      // name was checked as written, the place as resolved, so this ran /bin/sh).
      {"./links/git -c id", verdict_kind::deny, "a link to '"},
      {"./links/echo -c id", verdict_kind::deny, "a link to '"},
      {t / "links/git", verdict_kind::deny, "a link to '"},
      // A folder that is a link into /usr: the file found is the system's own.
      {"./sys/git status", verdict_kind::allow, ""},
      // A first word a shell does not run: it ran `id` (the locator took `..` back by hand, so
      // the word located as /usr/bin/git although `X=` does not exist).
      {"X=/../../../../../../../../usr/bin/git id", verdict_kind::deny, "an assignment"},
      {"GIT_DIR=x git status", verdict_kind::deny, "an assignment"},
      {"~/git status", verdict_kind::deny, "holds ~, a glob or #"},
      {"/usr/bin/gi? status", verdict_kind::deny, "holds ~, a glob or #"},
      {"nothing/../../../../../../../../usr/bin/git status", verdict_kind::deny, "was not found"},
  };
  fs::create_directory(t / "links");
  fs::create_symlink("/bin/sh", t / "links/git");
  fs::create_symlink("/usr/bin/python3", t / "links/echo");
  fs::create_directory_symlink("/usr/bin", t / "sys");
  for (const row& r : rows) {
    INFO("command '" << r.command << "'");
    policy::decision d = policy::check_command_string(rules, r.command, &locator);
    INFO("reason: " << d.reason);
    CHECK(d.verdict == r.expect);
    CHECK(d.reason.find(r.reason_has) != std::string::npos);
  }
  // What host/process/spawn runs for an allowed argv: metacharacters stay bytes.
  std::vector<std::string> argv{"/usr/bin/echo", "$(touch pwned)", "; touch pwned2", "&& touch pwned3", "`touch pwned4`"};
  REQUIRE(policy::check_argv(rules, argv, &locator).allowed());
  auto run = io::process_spawn(argv, t.root.string(), 10000, 1 << 16, {"PATH=/usr/bin:/bin"});
  REQUIRE(run);
  CHECK((*run)["exitCode"] == 0);
  CHECK((*run)["stdout"] == "$(touch pwned) ; touch pwned2 && touch pwned3 `touch pwned4`\n");
  for (const char* f : {"pwned", "pwned2", "pwned3", "pwned4"}) CHECK_FALSE(fs::exists(t / f));
}

namespace {

// A TCP listener on 127.0.0.1 that answers every connection with a tiny HTTP response and
// counts them, so a test can prove that a refused URL never reached it.
class counting_listener {
 public:
  counting_listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd_, 16) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~counting_listener() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  counting_listener(const counting_listener&) = delete;
  counting_listener& operator=(const counting_listener&) = delete;
  std::string port() const { return std::to_string(port_); }
  int connections() const { return count_.load(); }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      ++count_;
      std::string req;
      char buf[4096];
      while (req.find("\r\n\r\n") == std::string::npos) {
        pollfd q{c, POLLIN, 0};
        if (::poll(&q, 1, 2000) <= 0) break;
        ssize_t n = ::read(c, buf, sizeof buf);
        if (n <= 0) break;
        req.append(buf, static_cast<std::size_t>(n));
      }
      static const char reply[] = "HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
      if (::write(c, reply, sizeof reply - 1) < 0) { /* the client went away */ }
      ::close(c);
    }
  }
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> count_{0};
  std::thread thread_;
};

}  // namespace

TEST_CASE("hostile urls: IP literals, userinfo and loopback names never reach a local listener", "[io][hostile][url]") {
  counting_listener listener;
  const std::string port = listener.port();
  const io::fetch_limits limits{1 << 16, 5000};
  const auto no_list = policy::compile_domain_rules(std::nullopt);
  const auto api_only = policy::compile_domain_rules(std::vector<std::string>{"api.example.com"});
  struct row {
    std::string url;
    const policy::domain_rules* rules;
    std::string reason_has;
  };
  std::vector<row> rows = {
      {"http://127.0.0.1:" + port + "/", &no_list, "loopback"},
      {"http://2130706433:" + port + "/", &no_list, "loopback"},
      {"http://0x7f.1:" + port + "/", &no_list, "loopback"},
      {"http://0x7f000001:" + port + "/", &no_list, "loopback"},
      {"http://0177.0.0.1:" + port + "/", &no_list, "loopback"},
      {"http://127.1:" + port + "/", &no_list, "loopback"},
      {"http://[::ffff:127.0.0.1]:" + port + "/", &no_list, "loopback"},
      {"http://[::ffff:7f00:1]:" + port + "/", &no_list, "loopback"},
      {"http://[::1]:" + port + "/", &no_list, "loopback"},
      {"http://0.0.0.0:" + port + "/", &no_list, "loopback"},
      {"http://localhost:" + port + "/", &no_list, "local name"},
      {"http://api.example.com@127.0.0.1:" + port + "/", &api_only, "loopback"},
      {"http://api.example.com@2130706433:" + port + "/", &api_only, "loopback"},
      {"http://api.example.com:" + port + "@127.1:" + port + "/", &api_only, "loopback"},
      {"http://2130706433:" + port + "/", &api_only, "loopback"},
  };
  std::vector<std::string> names = testing::loopback_names();
  if (names.empty()) WARN("no plain name in /etc/hosts resolves to loopback here; that row is covered by vet_addresses only");
  for (const std::string& n : names) rows.push_back({"http://" + n + ":" + port + "/", &no_list, "resolves to 127."});
  for (const row& r : rows) {
    INFO("url " << r.url);
    auto got = io::net_fetch(r.url, "GET", json(), "", *r.rules, limits);
    REQUIRE_FALSE(got);
    INFO("error: " << got.err().message);
    CHECK(got.err().code == policy::errc::refused);
    CHECK(got.err().message.find(r.reason_has) != std::string::npos);
  }
  CHECK(listener.connections() == 0);
  // A name resolving to 127.0.0.1 is refused after resolution, whatever it is called.
  auto ip = [](const char* s) { return *policy::parse_ip_literal(s); };
  CHECK_FALSE(io::vet_addresses("rebind.example", {ip("93.184.216.34"), ip("127.0.0.1")}, no_list));
  CHECK_FALSE(io::vet_addresses("metadata.example", {ip("169.254.169.254")}, no_list));
  CHECK_FALSE(io::vet_addresses("v6.example", {ip("::1")}, no_list));

  // The control: listed literally, another spelling of the address does connect, so the
  // listener above would have counted a leak.
  const auto listed = policy::compile_domain_rules(std::vector<std::string>{"127.0.0.1"});
  auto ok = io::net_fetch("http://2130706433:" + port + "/", "GET", json(), "", listed, limits);
  REQUIRE(ok);
  CHECK((*ok)["status"] == 200);
  CHECK(listener.connections() == 1);
}

namespace {

// One project file on disk, merged with a fixed global file by the real merge.
struct settings_case {
  temp_tree t;
  std::string project = t / "proj";
  std::string global_path = t / "home/.dhara/config.json";
  std::string project_path = t / "proj/.dhara/config.json";

  settings_case() {
    fs::create_directories(t / "home/.dhara");
    fs::create_directories(t / "proj/.dhara");
    fs::create_directories(t / "proj/src");
    fs::create_directories(t / "outside");
    put(t / "outside/file", "outside\n");
    put(global_path, json{{"security",
                           {{"level", "standard"},
                            {"allowedPaths", {project}},
                            {"deniedPaths", {t / "proj/secrets"}},
                            {"trustedAuthors", {"zosmaai"}},
                            {"auditIgnorePatterns", {"**/node_modules/**"}},
                            {"audit", {{"durability", "write"}, {"maxBytes", 1048576}, {"keep", 5}}}}},
                          {"extensionDirs", {t / "home/.dhara/extensions"}},
                          {"extensions", {{"callTimeoutMs", 60000}, {"maxRestarts", 3}, {"restartWindowMs", 60000},
                                          {"maxLineBytes", 1048576}, {"cancelGraceMs", 5000}, {"killGraceMs", 2000}}}}
                         .dump());
  }

  policy::merged_settings merge(const json& project_doc, bool trusted = false) {
    if (trusted) {
      auto g = json::parse(get(global_path));
      g["security"]["trustedProjects"] = {project};
      put(global_path, g.dump());
    }
    put(project_path, project_doc.dump());
    auto global = io::read_settings_file(global_path, policy::layer_kind::global);
    REQUIRE(global);
    auto proj = io::read_settings_file(project_path, policy::layer_kind::project);
    REQUIRE(proj);
    policy::merge_context ctx{t / "home", t / "home/.dhara", project};
    return policy::merge_settings(global->parsed.layer, &proj->parsed.layer, nullptr, ctx);
  }
};

json at(std::string_view dotted, json value) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t dot; (dot = dotted.find('.', start)) != std::string_view::npos; start = dot + 1)
    parts.emplace_back(dotted.substr(start, dot - start));
  parts.emplace_back(dotted.substr(start));
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) value = json{{*it, std::move(value)}};
  return value;
}

}  // namespace

TEST_CASE("hostile project config: every loosening is ignored with a warning naming trustedProjects", "[io][hostile][settings]") {
  struct row {
    std::string key;
    json value;
  };
  const std::vector<row> rows = {
      {"security.level", "yolo"},
      {"security.level", "trusted"},
      {"security.trustedAuthors", json::array({"zosmaai", "evil-corp"})},
      {"security.allowedPaths", {"/"}},
      {"security.allowedPaths", {".."}},
      {"security.allowedPaths", {"../outside"}},
      {"security.allowedPaths", {"~"}},
      {"security.allowedPaths", {"/**"}},
      {"security.auditIgnorePatterns", {"**"}},
      {"security.audit.durability", "none"},
      {"security.audit.keep", 1},
      {"security.audit.maxBytes", 4096},
      {"security.requireOsSandbox", false},
      {"extensionDirs", {".dhara/evil-extensions"}},
      {"extensionDirs", {"/tmp"}},
      {"extensions.callTimeoutMs", 86400000},
      {"extensions.maxRestarts", 1000},
      {"extensions.restartWindowMs", 1},
      {"extensions.maxLineBytes", 1073741824},
      {"extensions.killGraceMs", 600000},
  };
  for (const row& r : rows) {
    INFO("project sets " << r.key << " = " << r.value.dump());
    settings_case c;
    auto base = c.merge(json::object());
    auto merged = c.merge(at(r.key, r.value));
    const policy::setting_key* key = policy::find_setting_key(r.key);
    REQUIRE(key);
    CHECK(policy::effective_value(merged.effective, *key) == policy::effective_value(base.effective, *key));
    bool says_how = false;
    for (const std::string& w : merged.warnings) {
      INFO("warning: " << w);
      says_how = says_how || w.find("trustedProjects") != std::string::npos ||
                 (r.key == "security.requireOsSandbox" && w.find(c.global_path) != std::string::npos);
    }
    CHECK(says_how);
  }
  // trustedProjects is never taken from a project file, so it cannot trust itself.
  settings_case c;
  auto merged = c.merge(json{{"security", {{"trustedProjects", {c.project}}, {"level", "yolo"}}}});
  CHECK(merged.effective.trusted_projects.empty());
  CHECK_FALSE(merged.effective.project_trusted);
  CHECK(merged.effective.level == policy::security_level::standard);
  // Denials from the global file cannot be dropped by an empty project list.
  auto denied = c.merge(json{{"security", {{"deniedPaths", json::array()}}}});
  CHECK(std::find(denied.effective.denied_paths.begin(), denied.effective.denied_paths.end(), c.t / "proj/secrets") !=
        denied.effective.denied_paths.end());
}

TEST_CASE("hostile project config: allowedPaths through a symlink inside the project cannot reach outside", "[io][hostile][settings]") {
  settings_case c;
  fs::create_directory_symlink(c.t / "outside", c.t / "proj/docs");  // the repository ships docs -> ..
  fs::create_directory_symlink("/", c.t / "proj/rootfs");
  io::real_path_resolver resolver;
  dhara::testing::policy_fixture fixture;
  auto check = [&](const policy::settings& s, const std::string& p) {
    policy::snapshot_input in;
    in.config = &s;
    in.home = c.t / "home";
    in.dhara_home = c.t / "home/.dhara";
    in.project_root = c.project;
    in.cwd = c.project;
    in.extensions.push_back({&fixture.manifests[1], c.t / "home/.dhara/extensions/fs-tools", &fixture.perms[1]});
    auto snap = policy::compile_snapshot(in, resolver);
    REQUIRE(snap);
    return policy::decide(*snap, {"fs-tools", capability::filesystem_read, subject_kind::path, p, {}},
                          {&resolver, nullptr});
  };
  for (const char* entry : {"docs", "rootfs", "src/../docs"}) {
    INFO("project allowedPaths [" << entry << "]");
    auto merged = c.merge(json{{"security", {{"allowedPaths", {entry}}}}});
    policy::decision outside = check(merged.effective, c.t / "outside/file");
    INFO("reason: " << outside.reason);
    CHECK(outside.verdict == verdict_kind::deny);
    CHECK(check(merged.effective, "/etc/hostname").verdict == verdict_kind::deny);
    CHECK(check(merged.effective, c.t / "home/.bashrc").verdict == verdict_kind::deny);
  }
  // A narrowing that stays inside still works, and a trusted project may point outside.
  auto inside = c.merge(json{{"security", {{"allowedPaths", {"src"}}}}});
  CHECK(check(inside.effective, "src/x").allowed());
  CHECK(check(inside.effective, "README.md").verdict == verdict_kind::deny);
  auto trusted = c.merge(json{{"security", {{"allowedPaths", {"docs"}}}}}, /*trusted=*/true);
  CHECK(trusted.effective.project_trusted);
  CHECK(check(trusted.effective, c.t / "outside/file").allowed());
}
