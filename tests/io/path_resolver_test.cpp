// The real resolver against real symlinks in a temporary folder, and path checks through it.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "io/open_batch.hpp"
#include "io/path_resolver.hpp"
#include "../support/temp_tree.hpp"

namespace fs = std::filesystem;
using namespace dhara;

namespace {

// A fresh folder under the temp dir, removed at scope exit. Its path is resolved so that a
// symlinked /tmp does not confuse expectations.
struct temp_tree : dhara::testing::temp_tree {
  temp_tree() : dhara::testing::temp_tree("dhara-resolver-XXXXXX") {}
};

void touch(const std::string& p) { std::ofstream(p) << "x\n"; }

// check_path of a read, relative paths from <t>/proj, through the real resolver with these rules.
auto real_checker(const temp_tree& t, std::vector<std::string> allowed, std::vector<std::string> denied) {
  static const io::real_path_resolver resolver;
  policy::path_rules_input in{std::move(allowed), std::move(denied), "/nonexistent-home", t / "dhara-home", t / "proj"};
  auto rules = policy::compile_path_rules(in, resolver);
  REQUIRE(rules);
  return [rules = std::make_shared<policy::path_rule_set>(std::move(*rules)), proj = t / "proj"](const std::string& p) {
    return policy::check_path(*rules, p, proj, "/nonexistent-home", policy::path_access::read, resolver);
  };
}

}  // namespace

TEST_CASE("resolver follows links in the existing prefix and appends the rest", "[io][resolver]") {
  temp_tree t;
  fs::create_directories(t / "real/dir");
  fs::create_directory_symlink(t / "real", t / "link");
  io::real_path_resolver r;
  CHECK(*r.resolve(t / "link/dir/file-not-yet") == t / "real/dir/file-not-yet");
  CHECK(*r.resolve(t / "real/dir") == t / "real/dir");
  CHECK(*r.resolve("/") == "/");
}

TEST_CASE("a path with a NUL byte is refused, not resolved as the part before it", "[io][resolver][hostile]") {
  temp_tree t;
  fs::create_directories(t / "real");
  fs::create_directory_symlink(t / "real", t / "link");
  io::real_path_resolver r;
  REQUIRE(*r.resolve(t / "link/x") == t / "real/x");  // the link is known to this thread now
  for (const std::string& p : {t / "link" + std::string(1, '\0') + "/x", t / "link/x" + std::string(1, '\0'),
                               t / "real" + std::string(1, '\0') + "/../etc"}) {
    auto got = r.resolve(p);
    REQUIRE_FALSE(got);
    CHECK(got.err().message.find("NUL byte") != std::string::npos);
    CHECK_FALSE(io::real_path_resolver::resolve_by_walk(p));
  }
}

TEST_CASE("resolver handles relative link targets and .. after a link", "[io][resolver]") {
  temp_tree t;
  fs::create_directories(t / "a/b");
  fs::create_directories(t / "c");
  fs::create_directory_symlink("../c", t / "a/up");  // a/up -> ../c (relative to a/)
  io::real_path_resolver r;
  CHECK(*r.resolve(t / "a/up/x") == t / "c/x");
}

TEST_CASE("resolver follows dangling links to where they point", "[io][resolver]") {
  temp_tree t;
  fs::create_directories(t / "allowed");
  fs::create_symlink(t / "denied/new-file", t / "allowed/trap");  // target does not exist yet
  io::real_path_resolver r;
  CHECK(*r.resolve(t / "allowed/trap") == t / "denied/new-file");
}

TEST_CASE("resolver reports a symlink loop instead of spinning", "[io][resolver]") {
  temp_tree t;
  fs::create_symlink(t / "loop2", t / "loop1");
  fs::create_symlink(t / "loop1", t / "loop2");
  io::real_path_resolver r;
  auto got = r.resolve(t / "loop1/x");
  REQUIRE_FALSE(got);
  CHECK(got.err().code == policy::errc::resolve_failed);
}

TEST_CASE("/proc/self/root resolves to the real root", "[io][resolver]") {
  io::real_path_resolver r;
  auto got = r.resolve("/proc/self/root/etc/shadow");
  REQUIRE(got);
  CHECK(*got == "/etc/shadow");
}

TEST_CASE("path checks through the real resolver catch link escapes", "[io][resolver][hostile]") {
  temp_tree t;
  fs::create_directories(t / "proj/src");
  fs::create_directories(t / "secret");
  touch(t / "secret/key");
  touch(t / "proj/src/a.ts");
  fs::create_directory_symlink(t / "secret", t / "proj/to-secret");     // link into a denied dir
  fs::create_directory_symlink("/etc", t / "proj/etc-link");            // link out of the project
  fs::create_symlink(t / "secret/not-yet", t / "proj/dangling");        // dangling link to denied
  fs::create_directory_symlink(t / "proj", t / "proj-alias");            // alias of the allowed dir
  fs::create_symlink(t / "proj/loopA", t / "proj/loopB");
  fs::create_symlink(t / "proj/loopB", t / "proj/loopA");

  auto check = real_checker(t, {t / "proj-alias"}, {t / "secret"});
  CHECK(check(t / "proj/src/a.ts").allowed());              // allowed entry was itself a link
  CHECK(check("src/a.ts").allowed());
  CHECK_FALSE(check(t / "proj/to-secret/key").allowed());    // resolved path is denied
  CHECK(check(t / "proj/to-secret/key").reason.find("resolves to") != std::string::npos);
  CHECK_FALSE(check(t / "proj/etc-link/passwd").allowed());  // resolved path is outside
  CHECK_FALSE(check(t / "proj/dangling").allowed());         // dangling link into denied
  CHECK_FALSE(check(t / "proj/loopA").allowed());            // loop: cannot resolve, denied
  CHECK_FALSE(check("/proc/self/root" + (t / "secret/key")).allowed());
}

// The component walk used to go on as text after a missing part, so a `..` that climbed back
// out of it skipped every link after it: `nope/../to-secret/key` was allowed, resolved to the
// lexical `proj/to-secret/key`. After a file it climbed as if the file were a folder. The
// kernel cannot walk such paths (ENOENT, ENOTDIR), and neither does the walk now.
TEST_CASE("a .. after a missing part is refused and never hides a link after it", "[io][resolver][hostile]") {
  temp_tree t;
  fs::create_directories(t / "proj/src");
  fs::create_directories(t / "proj/secret");
  touch(t / "proj/secret/key");
  touch(t / "proj/src/a.ts");
  fs::create_directory_symlink("secret", t / "proj/to-secret");
  fs::create_directory_symlink("nope/../to-secret", t / "proj/tricky");  // the same, from a link
  fs::create_symlink("src/a.ts/../a.ts", t / "proj/through-a-file");

  auto check = real_checker(t, {t / "proj"}, {t / "proj/secret"});
  for (const std::string p : {"nope/../to-secret/key", "tricky/key", "nope/deeper/../../to-secret/key",
                              "src/a.ts/../../to-secret/key", "through-a-file"}) {
    INFO(p);
    const policy::decision d = check(p);
    CHECK_FALSE(d.allowed());
    CHECK_THAT(d.reason, Catch::Contains("a '..' comes after a part of the path that does not exist or is not a folder"));
    auto walked = io::real_path_resolver::resolve_by_walk(t / "proj/" + p);
    CHECK_FALSE(walked);
  }
  // The controls: a `..` after parts that exist, and a missing part with no `..` after it.
  CHECK(check("src/../src/a.ts").allowed());
  CHECK(check("nope/new.txt").allowed());
  CHECK_FALSE(check("to-secret/../secret/key").allowed());
}

TEST_CASE("a denied entry that is a link denies both its name and its target", "[io][resolver]") {
  temp_tree t;
  fs::create_directories(t / "data/keys");
  fs::create_directory_symlink(t / "data/keys", t / "keys-link");
  io::real_path_resolver resolver;
  policy::path_rules_input in{{t / "data"}, {t / "keys-link"}, "/h", "/d", "/p"};
  auto rules = policy::compile_path_rules(in, resolver);
  REQUIRE(rules);
  auto d = policy::check_path(*rules, t / "data/keys/k", "/", "/h", policy::path_access::read, resolver);
  CHECK_FALSE(d.allowed());
}

TEST_CASE("executable locator finds commands on PATH and resolves their links", "[io][locator]") {
  io::path_executable_locator loc("/nonexistent:/usr/bin:/bin", "/");
  auto sh = loc.locate("sh");
  REQUIRE(sh);
  CHECK(sh->front() == '/');
  CHECK(access(sh->c_str(), X_OK) == 0);
  CHECK_FALSE(loc.locate("definitely-not-a-command-xyz"));
  CHECK_FALSE(loc.locate("/etc/passwd"));  // exists but is not executable
  io::path_executable_locator relative_only("bin:.", "/");
  CHECK_FALSE(relative_only.locate("sh"));  // relative PATH entries are ignored
}

TEST_CASE("the kernel's one-walk resolution agrees with the component walk", "[io][resolver]") {
  // Every shape of link the walk knows, resolved both ways: resolve() takes the kernel's
  // answer where the whole path exists, resolve_by_walk() never does.
  temp_tree t;
  fs::create_directories(t / "real/deep/er");
  fs::create_directories(t / "other/side");
  touch(t / "real/deep/er/file.txt");
  touch(t / "other/side/f");
  fs::create_directory_symlink(t / "real", t / "abs");                 // absolute target
  fs::create_directory_symlink("real/deep", t / "rel");                // relative target
  fs::create_directory_symlink("../../other/side", t / "real/deep/up"); // climbs out
  fs::create_directory_symlink(t / "abs", t / "chain");                // a link to a link
  fs::create_symlink("er/file.txt", t / "real/deep/to-file");          // a link to a file
  fs::create_directory_symlink(".//./deep/", t / "real/messy");        // a target with ./ and //
  fs::create_directory_symlink("../../../../../../../..", t / "real/root-up");  // past the root
  fs::create_directory_symlink("er/../../deep", t / "real/deep/back");  // a `..` after a name
  fs::create_symlink(t / "missing/file", t / "dangling");
  fs::create_symlink("/proc/self/root", t / "magic");                  // through /proc
  const std::vector<std::string> paths{
      t / "real/deep/er/file.txt", t / "abs/deep/er/file.txt", t / "rel/er", t / "real/deep/up/f",
      t / "chain/deep/to-file",    t / "real/messy/er",        t / "real/root-up/etc",
      t / "abs/deep/up/../side/f", t / "rel/../deep/er/..",    t / "abs/deep/er/file.txt/..",
      t / "dangling",              t / "abs/not-yet/file",     t / "magic/etc/hostname",
      "/proc/self/root/etc",       "/",                        t / "real/deep/to-file",
      t / "real/deep/er/file.txt/x",  // through a regular file (ENOTDIR)
      t / "real//deep/./er",          t / "real/deep/er/",        t / "abs/deep/../missing/x",
      t / "real/missing/deeper/y",    t / "real",
      // Ending in a link to a folder: the first look asks for a folder (O_DIRECTORY), and a
      // link there must still be met as a link, not taken for the folder it names.
      t / "abs",                      t / "chain",                t / "real/deep/up",
      t / "real/deep/back/er/file.txt", t / "rel/back/er",
  };
  io::real_path_resolver r;
  // Three times: the later rounds find the links the first met in this thread's known links
  // (read anew and spliced in), or their folders in its hint (the kernel's one walk at once).
  for (int round = 0; round < 3; ++round) {
    for (const std::string& p : paths) {
      INFO(round << ": " << p);
      auto fast = r.resolve(p);
      auto walked = io::real_path_resolver::resolve_by_walk(p);
      REQUIRE(static_cast<bool>(fast) == static_cast<bool>(walked));
      if (fast) CHECK(*fast == *walked);
    }
  }
  // The kernel answers where the whole path exists through plain links, and only there.
  if (!io::real_path_resolver::resolve_in_kernel("/")) {
    WARN("this kernel has no openat2 (Linux 5.6 or later): only the walk resolves, the kernel's answers are not checked");
    return;
  }
  CHECK(io::real_path_resolver::resolve_in_kernel(t / "chain/deep/to-file") == t / "real/deep/er/file.txt");
  CHECK(io::real_path_resolver::resolve_in_kernel(t / "real/root-up/etc") == "/etc");
  CHECK_FALSE(io::real_path_resolver::resolve_in_kernel(t / "dangling"));
  CHECK_FALSE(io::real_path_resolver::resolve_in_kernel(t / "abs/not-yet/file"));
  CHECK_FALSE(io::real_path_resolver::resolve_in_kernel(t / "magic/etc/hostname"));  // a magic link
  CHECK(*r.resolve(t / "chain/deep/to-file") == t / "real/deep/er/file.txt");
  CHECK(*r.resolve(t / "real/deep/up/f") == t / "other/side/f");
}

TEST_CASE("a folder remembered for its links never answers for a path in it", "[io][resolver]") {
  // The hint says where the last walk met a link; each path is still resolved anew, so a
  // link that became a plain file, or a file that became a link again, is seen at once.
  temp_tree t;
  fs::create_directories(t / "proj");
  fs::create_directories(t / "elsewhere");
  touch(t / "elsewhere/secret");
  fs::create_symlink(t / "elsewhere/secret", t / "proj/notes");  // proj/notes -> elsewhere/secret
  touch(t / "proj/plain");
  io::real_path_resolver r;
  CHECK(*r.resolve(t / "proj/notes") == t / "elsewhere/secret");  // proj is now hinted
  CHECK(*r.resolve(t / "proj/plain") == t / "proj/plain");        // and un-hinted by this
  CHECK(*r.resolve(t / "proj/notes") == t / "elsewhere/secret");  // hinted again
  fs::remove(t / "proj/notes");
  touch(t / "proj/notes");  // the link is now a plain file
  CHECK(*r.resolve(t / "proj/notes") == t / "proj/notes");
  fs::remove(t / "proj/notes");
  fs::create_symlink(t / "elsewhere/secret", t / "proj/notes");  // and a link again
  CHECK(*r.resolve(t / "proj/notes") == t / "elsewhere/secret");
  CHECK(*r.resolve(t / "proj/missing") == t / "proj/missing");
}

TEST_CASE("a forked child resolves through its own descriptors and not through its parent's", "[io][resolver]") {
  // The kernel's answer is read from /proc/self/fd, whose descriptor each thread keeps open.
  // One kept from before a fork names the parent's table: in the child, descriptor N would be
  // whatever the parent has under N. Here the child's openat2 gets the number the parent
  // still uses for a decoy file, so a stale folder would answer "decoy".
  temp_tree t;
  fs::create_directories(t / "real/deep");
  touch(t / "real/deep/f");
  touch(t / "decoy");
  fs::create_directory_symlink(t / "real", t / "link");
  io::real_path_resolver r;
  if (!io::real_path_resolver::resolve_in_kernel("/")) {
    WARN("this kernel has no openat2 (Linux 5.6 or later): only the walk resolves, nothing to check");
    return;
  }
  REQUIRE(*r.resolve(t / "link/deep/f") == t / "real/deep/f");  // this thread's folder is open now
  const int decoy = ::open((t / "decoy").c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(decoy >= 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(decoy);  // the lowest free number in the child, still the decoy in the parent
    // The kernel's answer itself: resolve() would now take the link it knows, which reads
    // no descriptor's entry.
    auto got = io::real_path_resolver::resolve_in_kernel(t / "link/deep/f");
    // And through the link the parent's thread knew, which the child's copy of it knows.
    const std::uint64_t before = io::real_path_resolver::known_link_answers();
    auto known = r.resolve(t / "link/deep/f");
    const bool through_known = io::real_path_resolver::known_link_answers() == before + 1;
    ::_exit(got && *got == t / "real/deep/f" && known && *known == t / "real/deep/f" && through_known ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  ::close(decoy);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("a link known from an earlier path is read anew for every path under it", "[io][resolver]") {
  // After a first path through proj/lib, a path under it is resolved by reading the link and
  // walking its target spliced in. Whatever the link became meanwhile, each answer must be the
  // component walk's, and the known link must answer only where it can.
  if (!io::real_path_resolver::resolve_in_kernel("/")) {
    WARN("this kernel has no openat2 (Linux 5.6 or later): only the walk resolves, nothing to check");
    return;
  }
  temp_tree t;
  fs::create_directories(t / "proj/src");
  fs::create_directories(t / "elsewhere");
  fs::create_directories(t / "other");
  touch(t / "proj/src/a.ts");
  touch(t / "elsewhere/a.ts");
  touch(t / "proj/file.txt");
  fs::create_directory_symlink(t / "elsewhere", t / "proj/x");  // met only by a `..` after a name
  fs::create_directory_symlink("src", t / "proj/x2");           // a link the target can go through
  fs::create_directory_symlink("src", t / "proj/lib");
  io::real_path_resolver r;
  auto check = [&](const std::string& path, const std::string& expected, bool through_known_link) {
    std::error_code no_link;
    INFO(path << " (proj/lib -> '" << fs::read_symlink(t / "proj/lib", no_link).string() << "')");
    const std::uint64_t before = io::real_path_resolver::known_link_answers();
    auto got = r.resolve(path);
    REQUIRE(got);
    CHECK(*got == expected);
    auto walked = io::real_path_resolver::resolve_by_walk(path);
    REQUIRE(walked);
    CHECK(*walked == expected);
    CHECK((io::real_path_resolver::known_link_answers() == before + 1) == through_known_link);
  };
  auto relink = [&](const std::string& target) {
    fs::remove(t / "proj/lib");
    fs::create_symlink(target, t / "proj/lib");
  };
  const std::string a = t / "proj/lib/a.ts";

  check(a, t / "proj/src/a.ts", false);  // the first look meets the link, which is kept
  check(a, t / "proj/src/a.ts", true);
  check(t / "proj/lib/new/b.ts", t / "proj/src/new/b.ts", true);  // not there yet
  check(t / "proj/lib", t / "proj/src", true);                    // the link itself
  relink("../elsewhere");  // a relative target that climbs: walked beneath "/" to its end
  check(a, t / "elsewhere/a.ts", true);
  // Not there: that walk stops short, so the target is walked to its end and the rest from it.
  check(t / "proj/lib/b.ts", t / "elsewhere/b.ts", true);
  check(t / "proj/lib/new/b.ts", t / "elsewhere/new/b.ts", true);
  relink("../elsewhere/a.ts");  // a file: what is under it is written out, as the walk writes it
  check(t / "proj/lib/x", t / "elsewhere/a.ts/x", true);
  relink("../gone");  // dangling: the link itself has no rest to walk apart, and the walk answers
  check(t / "proj/lib", t / "gone", false);
  check(t / "proj/lib/b.ts", t / "gone/b.ts", false);
  // A target missing before its `..`: the kernel cannot go back out of it, and the component
  // walk refuses it; the target's own walk stops short too, and nothing is answered.
  relink("gone/../../elsewhere");
  {
    INFO("proj/lib -> gone/../../elsewhere");
    const std::uint64_t before = io::real_path_resolver::known_link_answers();
    CHECK_FALSE(r.resolve(t / "proj/lib/b.ts"));
    CHECK_FALSE(io::real_path_resolver::resolve_by_walk(t / "proj/lib/b.ts"));
    CHECK(io::real_path_resolver::known_link_answers() == before);
  }
  relink(t / "other");  // an absolute one
  check(a, t / "other/a.ts", true);

  // A `..` after a file: the kernel's walks stop at file.txt (ENOTDIR), and the component walk
  // does too (it went on through the file and met x until 2026-12-03, sixth session): no answer.
  relink("file.txt/../x");
  {
    INFO("proj/lib -> file.txt/../x");
    CHECK_FALSE(r.resolve(a));
    CHECK_FALSE(io::real_path_resolver::resolve_by_walk(a));
  }
  relink("src");
  check(a, t / "proj/src/a.ts", true);

  // A target through another link: the spliced walk meets x2, and from then on the usual way
  // answers for the paths under lib, without a first look.
  relink("x2");
  check(t / "proj/lib/d2/c.ts", t / "proj/src/d2/c.ts", false);
  relink("src");
  check(t / "proj/lib/d3/c.ts", t / "proj/src/d3/c.ts", false);

  // The link became a folder: forgotten once a path under it resolves to itself.
  fs::remove(t / "proj/lib");
  fs::create_directories(t / "proj/lib");
  check(t / "proj/lib/d4/c.ts", t / "proj/lib/d4/c.ts", false);

  // A link again, and then its own folder became a link: the relative target, read through
  // that link, is spliced under proj, whose walk now meets a link.
  fs::remove(t / "proj/lib");
  fs::create_directory_symlink("src", t / "proj/lib");
  check(t / "proj/lib/d5/c.ts", t / "proj/src/d5/c.ts", false);  // kept again
  check(t / "proj/lib/d5/c.ts", t / "proj/src/d5/c.ts", true);
  fs::rename(t / "proj", t / "proj-real");
  fs::create_directory_symlink("proj-real", t / "proj");
  check(t / "proj/lib/d6/c.ts", t / "proj-real/src/d6/c.ts", false);
}

TEST_CASE("a known link whose target climbs never answers with a link its walk skipped", "[io][resolver][hostile]") {
  // lib -> ../../s, known while s was a folder; s is then a link to a denied folder. Another
  // thread keeps moving lib's folder away and back. Read lexically, the target's `..` would
  // skip the walk's folders: a rename between the readlink and the walk (the walk then fails
  // before the `..`) or during the walk (the `..` then leads to the folder's new parent)
  // would answer "<root>/p/s/key", a path through the link s. Every answer must be the
  // secret's, the path itself (while the folder is away), or where a walk that went up from
  // the moved folder really ended (q/s/key).
  if (!io::real_path_resolver::resolve_in_kernel("/")) {
    WARN("this kernel has no openat2 (Linux 5.6 or later): only the walk resolves, nothing to check");
    return;
  }
  temp_tree t;
  fs::create_directories(t / "p/a/b");
  fs::create_directories(t / "q");
  fs::create_directories(t / "secret");
  fs::create_directories(t / "p/s");
  fs::create_directories(t / "q/s");  // where a `..` taken from the moved folder leads
  touch(t / "q/s/key");
  fs::create_directory_symlink("../../s", t / "p/a/b/lib");
  io::real_path_resolver r;
  REQUIRE(*r.resolve(t / "p/a/b/lib/x") == t / "p/s/x");  // learned
  fs::remove(t / "p/s");
  fs::create_directory_symlink(t / "secret", t / "p/s");
  std::atomic<bool> stop{false};
  std::thread mover([&] {
    const std::string here = t / "p/a", away = t / "q/a";
    while (!stop.load()) {
      ::rename(here.c_str(), away.c_str());
      ::rename(away.c_str(), here.c_str());
    }
  });
  const std::string path = t / "p/a/b/lib/key";
  std::size_t resolutions = 0, secret = 0, itself = 0, moved = 0, failed = 0;
  std::vector<std::string> other;
  auto count = [&](const policy::result<std::string>& got) {
    ++resolutions;
    if (!got) ++failed;  // the component walk met a change half-way: a denial, which is safe
    else if (*got == t / "secret/key") ++secret;
    else if (*got == path) ++itself;
    else if (*got == t / "q/s/key") ++moved;  // the kernel's walk went up from the moved folder
    else if (other.size() < 3) other.push_back(*got);
  };
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until) count(r.resolve(path));
  stop = true;
  mover.join();
  INFO(resolutions << " resolutions: " << secret << " the secret's, " << itself << " the path itself, " << moved
                   << " through the moved folder, " << failed << " failed");
  CHECK(other == std::vector<std::string>{});
  CHECK(secret > 0);
}

TEST_CASE("a round's walk of a known link whose target climbs never answers with a link it skipped",
          "[io][resolver][hostile]") {
  // As above, in rounds: the link read and its target walked beneath "/" at the round's start,
  // the rest of each path with the round's looks (io_uring, where it can be used). Hints are
  // per thread, and a link whose walk met one stops splicing: so each round runs on a thread of
  // its own, which learns the link while the tree is at rest, and the folder moves only while
  // the round's walks are made. An answer found ahead could only be the lexical
  // "<root>/p/s/key", through the link s, had the kernel not failed the `..` of a walk a rename
  // overtook.
  temp_tree t;
  fs::create_directories(t / "p/a/b");
  fs::create_directories(t / "q/s");  // where a `..` taken from the moved folder leads
  fs::create_directories(t / "secret");
  touch(t / "q/s/key");
  fs::create_directory_symlink("../../s", t / "p/a/b/lib");
  fs::create_directory_symlink(t / "secret", t / "p/s");
  std::atomic<bool> stop{false}, racing{false}, parked{true};
  std::thread mover([&] {
    const std::string here = t / "p/a", away = t / "q/a";
    while (!stop.load()) {
      if (!racing.load()) {
        parked = true;
        continue;
      }
      parked = false;
      ::rename(here.c_str(), away.c_str());
      ::rename(away.c_str(), here.c_str());
    }
  });
  const std::string path = t / "p/a/b/lib/key";
  const std::vector<std::string> round = {path, t / "p/a/b/lib/other"};
  std::size_t rounds = 0, read_ahead = 0, answered_ahead = 0;
  std::vector<std::string> wrong;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until) {
    std::thread([&] {
      io::real_path_resolver r;
      const bool learned = r.resolve(path).has_value();  // the tree at rest: lib is known from here
      const std::uint64_t reads = io::real_path_resolver::links_read_ahead();
      const std::uint64_t used = io::real_path_resolver::looked_ahead_answers();
      racing = true;
      io::real_path_resolver::look_ahead(round);
      racing = false;
      while (!parked.load()) {
      }
      auto got = r.resolve(round[0]);
      (void)r.resolve(round[1]);
      io::real_path_resolver::end_look_ahead();
      ++rounds;
      read_ahead += learned && io::real_path_resolver::links_read_ahead() > reads;
      answered_ahead += io::real_path_resolver::looked_ahead_answers() > used;
      // At rest, the secret's (the rest appended); from the round, the walk's real end.
      if (got && *got != t / "secret/key" && *got != t / "q/s/key" && wrong.size() < 3) wrong.push_back(*got);
    }).join();
  }
  stop = true;
  mover.join();
  INFO(rounds << " rounds, " << read_ahead << " read the link ahead, " << answered_ahead << " answered ahead");
  CHECK(wrong == std::vector<std::string>{});
  CHECK(rounds > 0);
  CHECK(read_ahead == rounds);  // every round walked beneath "/": the test tested something
}

namespace {

std::size_t open_descriptors() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// Whether this thread can take first looks together (io_uring allowed here): two looks at "/".
bool looks_go_together() {
  const std::vector<std::string> two = {"/", "/"};
  const bool yes = io::real_path_resolver::look_ahead(two) > 0;
  io::real_path_resolver::end_look_ahead();
  return yes;
}

// Ends the test, with the reason, where this thread cannot take first looks together.
#define SKIP_UNLESS_LOOKS_GO_TOGETHER()                                                              \
  do {                                                                                               \
    if (!looks_go_together()) {                                                                      \
      WARN("io_uring cannot be used here: the resolver looks one path at a time, nothing to check"); \
      return;                                                                                        \
    }                                                                                                \
  } while (false)

}  // namespace

TEST_CASE("opens made together answer as the same openat2 calls made one by one", "[io][resolver]") {
  temp_tree t;
  fs::create_directories(t / "dir/sub");
  touch(t / "dir/file");
  fs::create_symlink(t / "dir/file", t / "link");
  std::vector<std::string> paths;
  // 300 paths: more than one submission's 128, so the chunks are tested too.
  for (int i = 0; i < 60; ++i)
    for (const char* rel : {"dir", "dir/file", "missing/x", "link", "dir/file/below"}) paths.push_back(t / rel);
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC | O_DIRECTORY;
  how.resolve = RESOLVE_NO_SYMLINKS;
  std::vector<io::batched_open> opens;
  for (const auto& p : paths) opens.push_back({p.c_str(), 0});
  // The thread's ring is set up by its first use and kept: counted in `before`.
  if (!io::open_all({}, how)) {
    WARN("io_uring cannot be used here: the resolver makes its calls one by one, nothing to compare");
    return;
  }
  const std::size_t before = open_descriptors();
  if (!io::open_all(opens, how)) {
    WARN("io_uring cannot be used here: the resolver makes its calls one by one, nothing to compare");
    return;
  }
  std::vector<int> fds;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    INFO(paths[i]);
    const long alone = ::syscall(SYS_openat2, AT_FDCWD, paths[i].c_str(), &how, sizeof how);
    const int alone_result = alone >= 0 ? 0 : -errno;
    if (alone >= 0) ::close(static_cast<int>(alone));
    if (opens[i].result >= 0) {
      fds.push_back(opens[i].result);
      CHECK(alone_result == 0);
    } else {
      CHECK(opens[i].result == alone_result);
    }
  }
  CHECK(fds.size() == 60);  // the folder, each time
  io::close_all(fds);
  CHECK(open_descriptors() == before);
}

TEST_CASE("opens made together with a folder and an open_how of their own answer as the same calls", "[io][resolver]") {
  temp_tree t;
  fs::create_directories(t / "dir");
  touch(t / "dir/file");
  fs::create_symlink(t / "dir/file", t / "link");
  const int root = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(root >= 0);
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC | O_DIRECTORY;
  how.resolve = RESOLVE_NO_SYMLINKS;
  open_how beneath{};
  beneath.flags = O_PATH | O_CLOEXEC;
  beneath.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS;
  const std::string below = (t / "dir/file").substr(1), link_below = (t / "link").substr(1);
  std::string above;
  for (int i = 0; i < 40; ++i) above += "../";
  above += "etc";
  const std::string file = t / "dir/file", dir = t / "dir";
  // Beneath "/" from its descriptor: a file (a descriptor), a link (ELOOP), above "/" (EXDEV);
  // with the batch's own: a file (ENOTDIR) and a folder, between them.
  std::vector<io::batched_open> opens = {{below.c_str(), 0, root, &beneath},
                                         {file.c_str(), 0},
                                         {link_below.c_str(), 0, root, &beneath},
                                         {dir.c_str(), 0},
                                         {above.c_str(), 0, root, &beneath}};
  if (!io::open_all(opens, how)) {
    ::close(root);
    WARN("io_uring cannot be used here: the resolver makes its calls one by one, nothing to compare");
    return;
  }
  std::vector<int> fds;
  for (const io::batched_open& o : opens) {
    INFO(o.path);
    const open_how& h = o.how != nullptr ? *o.how : how;
    const long alone = ::syscall(SYS_openat2, o.dir, o.path, &h, sizeof h);
    const int alone_result = alone >= 0 ? 0 : -errno;
    if (alone >= 0) ::close(static_cast<int>(alone));
    if (o.result >= 0) fds.push_back(o.result);
    CHECK((o.result >= 0 ? 0 : o.result) == alone_result);
  }
  CHECK(opens[2].result == -ELOOP);
  CHECK(opens[4].result == -EXDEV);
  CHECK(fds.size() == 2);  // the file beneath "/", and the folder
  io::close_all(fds);
  ::close(root);
}

TEST_CASE("first looks taken together give the answers resolve gives alone", "[io][resolver]") {
  temp_tree t;
  fs::create_directories(t / "real/dir");
  touch(t / "real/dir/file");
  fs::create_directory_symlink(t / "real", t / "link");
  fs::create_symlink(t / "real/dir/file", t / "file-link");
  fs::create_symlink(t / "nowhere/x", t / "dangling");
  SKIP_UNLESS_LOOKS_GO_TOGETHER();
  const std::vector<std::string> paths = {
      t / "real/dir/file", t / "real/dir",     t / "real/missing/x", t / "link/dir/file", t / "file-link",
      t / "dangling",      t / "real/dir/file/below", t / "real/dir/file", t / "link",   t / "real"};
  std::vector<std::string> expected;
  for (const auto& p : paths) expected.push_back(*io::real_path_resolver::resolve_by_walk(p));
  io::real_path_resolver r;
  const std::size_t before = open_descriptors();
  const std::uint64_t used_before = io::real_path_resolver::looked_ahead_answers();
  const std::size_t taken = io::real_path_resolver::look_ahead(paths);
  CHECK(taken >= 6);  // the paths without links at least
  CHECK(open_descriptors() == before);  // the folders' descriptors were closed
  for (std::size_t i = 0; i < paths.size(); ++i) {
    INFO(paths[i]);
    CHECK(*r.resolve(paths[i]) == expected[i]);
  }
  io::real_path_resolver::end_look_ahead();
  CHECK(io::real_path_resolver::looked_ahead_answers() - used_before >= 6);
}

TEST_CASE("a path named several times in a round is looked at once, and each naming is answered",
          "[io][resolver]") {
  temp_tree t;
  fs::create_directories(t / "real/dir");
  touch(t / "real/dir/file");
  fs::create_directory_symlink(t / "real", t / "link");
  SKIP_UNLESS_LOOKS_GO_TOGETHER();
  const std::string file = t / "real/dir/file", missing = t / "real/missing", linked = t / "link/dir/file";
  const std::vector<std::string> paths = {file, missing, file, linked, file, missing, linked};
  io::real_path_resolver r;
  const std::uint64_t used_before = io::real_path_resolver::looked_ahead_answers();
  const std::uint64_t asked_before = io::real_path_resolver::looks_asked_ahead();
  CHECK(io::real_path_resolver::look_ahead(paths) == paths.size());  // the repeats share the first's look
  CHECK(io::real_path_resolver::looks_asked_ahead() - asked_before == 3);  // the three paths, once each
  std::vector<std::string> got;
  for (const auto& p : paths) got.push_back(*r.resolve(p));
  io::real_path_resolver::end_look_ahead();
  CHECK(got == std::vector<std::string>{file, missing, file, file, file, missing, file});
  // Every naming took its answer from the round, but the linked path's second: its first
  // found the link, and a path under a known link takes no look.
  CHECK(io::real_path_resolver::looked_ahead_answers() - used_before == paths.size() - 1);
}

TEST_CASE("paths under a known link are walked through it together, the link read once a round",
          "[io][resolver]") {
  temp_tree t;
  fs::create_directories(t / "proj/src/auth");
  touch(t / "proj/src/auth/login.ts");
  touch(t / "proj/src/index.ts");
  fs::create_directory_symlink("src", t / "proj/lib");
  SKIP_UNLESS_LOOKS_GO_TOGETHER();
  io::real_path_resolver r;
  REQUIRE(*r.resolve(t / "proj/lib/index.ts") == t / "proj/src/index.ts");  // meets the link: now known
  const std::string login = t / "proj/lib/auth/login.ts", fresh = t / "proj/lib/auth/new.ts";
  const std::vector<std::string> paths = {login, t / "proj/lib/index.ts", fresh, t / "proj/lib", login,
                                          t / "proj/src/index.ts"};
  const std::vector<std::string> expected = {t / "proj/src/auth/login.ts", t / "proj/src/index.ts",
                                             t / "proj/src/auth/new.ts",   t / "proj/src",
                                             t / "proj/src/auth/login.ts", t / "proj/src/index.ts"};
  const std::uint64_t read_before = io::real_path_resolver::links_read_ahead();
  const std::uint64_t asked_before = io::real_path_resolver::looks_asked_ahead();
  const std::uint64_t known_before = io::real_path_resolver::known_link_answers();
  const std::uint64_t used_before = io::real_path_resolver::looked_ahead_answers();
  const std::size_t descriptors = open_descriptors();
  CHECK(io::real_path_resolver::look_ahead(paths) == paths.size());
  CHECK(io::real_path_resolver::links_read_ahead() - read_before == 1);  // one link, read once
  CHECK(io::real_path_resolver::looks_asked_ahead() - asked_before == 5);  // login once
  CHECK(open_descriptors() == descriptors);  // proj/src's walk made a descriptor: closed
  std::vector<std::string> got;
  for (const auto& p : paths) got.push_back(*r.resolve(p));
  io::real_path_resolver::end_look_ahead();
  CHECK(got == expected);
  for (std::size_t i = 0; i < paths.size(); ++i) CHECK(*io::real_path_resolver::resolve_by_walk(paths[i]) == expected[i]);
  CHECK(io::real_path_resolver::known_link_answers() - known_before == 5);  // all but the plain path
  CHECK(io::real_path_resolver::looked_ahead_answers() - used_before == paths.size());
}

TEST_CASE("a known link walked through ahead answers as of its round, once, and only where the walk met no link",
          "[io][resolver][hostile]") {
  temp_tree t;
  fs::create_directories(t / "proj/src");
  fs::create_directories(t / "secret");
  fs::create_directories(t / "elsewhere");
  touch(t / "proj/src/a.ts");
  touch(t / "secret/a.ts");
  touch(t / "elsewhere/a.ts");
  fs::create_directory_symlink("src", t / "proj/x2");
  SKIP_UNLESS_LOOKS_GO_TOGETHER();
  io::real_path_resolver r;
  // Each part has a link of its own, proj/<name> -> src, known from a first path through it,
  // then changed to `target` before its round: the round's paths are <name>/a.ts and b.ts.
  auto known_then = [&](const std::string& name, const std::string& target) {
    fs::create_directory_symlink("src", t / ("proj/" + name));
    const std::string a = t / ("proj/" + name + "/a.ts");
    REQUIRE(*r.resolve(a) == t / "proj/src/a.ts");  // meets the link: now known
    REQUIRE(*r.resolve(a) == t / "proj/src/a.ts");
    fs::remove(t / ("proj/" + name));
    if (target == "a folder") fs::create_directories(t / ("proj/" + name));
    else fs::create_symlink(target, t / ("proj/" + name));
    return std::vector<std::string>{a, t / ("proj/" + name + "/b.ts")};
  };
  // A round of `p` that finds no answer ahead: `asked` walks asked of the kernel, no descriptor
  // left open, each path then resolved the usual way to its `expected` (nothing: refused).
  auto nothing_ahead = [&](const std::vector<std::string>& p, std::uint64_t asked,
                           const std::vector<std::optional<std::string>>& expected) {
    const std::uint64_t asked_before = io::real_path_resolver::looks_asked_ahead();
    const std::uint64_t used_before = io::real_path_resolver::looked_ahead_answers();
    const std::size_t descriptors = open_descriptors();
    CHECK(io::real_path_resolver::look_ahead(p) == 0);
    CHECK(open_descriptors() == descriptors);
    CHECK(io::real_path_resolver::looks_asked_ahead() - asked_before == asked);
    for (std::size_t i = 0; i < p.size(); ++i) {
      INFO(p[i]);
      const auto got = r.resolve(p[i]);
      CHECK(got.has_value() == expected[i].has_value());
      if (got && expected[i]) CHECK(*got == *expected[i]);
    }
    io::real_path_resolver::end_look_ahead();
    CHECK(io::real_path_resolver::looked_ahead_answers() == used_before);
  };

  SECTION("retargeted after the round read it: the round's answer, once; the same path again reads the link anew") {
    const auto p = known_then("lib", "src");
    CHECK(io::real_path_resolver::look_ahead(p) == 2);
    fs::remove(t / "proj/lib");
    fs::create_directory_symlink(t / "secret", t / "proj/lib");
    CHECK(*r.resolve(p[0]) == t / "proj/src/a.ts");
    CHECK(*r.resolve(p[0]) == t / "secret/a.ts");
    io::real_path_resolver::end_look_ahead();
    CHECK(*r.resolve(p[1]) == t / "secret/b.ts");  // never after its round
  }
  SECTION("an answer a round did not use is never used by a later round") {
    const auto p = known_then("lib", "src");
    CHECK(io::real_path_resolver::look_ahead(std::vector<std::string>{p[1], p[0]}) == 2);
    CHECK(*r.resolve(p[0]) == t / "proj/src/a.ts");  // b's answer passed over, left unused
    io::real_path_resolver::end_look_ahead();
    fs::remove(t / "proj/lib");
    fs::create_directory_symlink(t / "secret", t / "proj/lib");
    // A round of b alone takes nothing ahead; without io_uring, nothing either. Neither may
    // find the first round's answer in its entry.
    CHECK(io::real_path_resolver::look_ahead(std::vector<std::string>{p[1]}) == 0);
    CHECK(*r.resolve(p[1]) == t / "secret/b.ts");
    io::real_path_resolver::end_look_ahead();
    io::allow_open_batches(false);
    CHECK(io::real_path_resolver::look_ahead(std::vector<std::string>{p[1], p[0]}) == 0);
    const std::string b_got = *r.resolve(p[1]);
    io::real_path_resolver::end_look_ahead();
    io::allow_open_batches(true);
    CHECK(b_got == t / "secret/b.ts");
  }
  SECTION("a target through another link: the walk meets it, nothing is answered ahead") {
    const auto p = known_then("lib", "x2");
    const std::uint64_t known_before = io::real_path_resolver::known_link_answers();
    const std::uint64_t read_before = io::real_path_resolver::links_read_ahead();
    nothing_ahead(p, 2, {t / "proj/src/a.ts", t / "proj/src/b.ts"});
    CHECK(io::real_path_resolver::links_read_ahead() - read_before == 1);
    CHECK(io::real_path_resolver::known_link_answers() == known_before);
  }
  SECTION("a target that climbs: walked beneath \"/\" once, each path's rest from where it led") {
    const auto p = known_then("lib", "../elsewhere");
    io::real_path_resolver::look_ahead(p);  // once before counting: "/" is opened once, and kept
    io::real_path_resolver::end_look_ahead();
    const std::uint64_t read_before = io::real_path_resolver::links_read_ahead();
    const std::uint64_t asked_before = io::real_path_resolver::looks_asked_ahead();
    const std::uint64_t known_before = io::real_path_resolver::known_link_answers();
    const std::uint64_t used_before = io::real_path_resolver::looked_ahead_answers();
    const std::size_t descriptors = open_descriptors();
    CHECK(io::real_path_resolver::look_ahead(p) == 2);  // a.ts is there, b.ts is not: both answered
    CHECK(open_descriptors() == descriptors);  // the target's descriptor: closed
    CHECK(io::real_path_resolver::links_read_ahead() - read_before == 1);
    CHECK(io::real_path_resolver::looks_asked_ahead() - asked_before == 2);
    CHECK(*r.resolve(p[0]) == t / "elsewhere/a.ts");
    CHECK(*r.resolve(p[1]) == t / "elsewhere/b.ts");
    io::real_path_resolver::end_look_ahead();
    CHECK(io::real_path_resolver::known_link_answers() - known_before == 2);
    CHECK(io::real_path_resolver::looked_ahead_answers() - used_before == 2);  // both from the round
    // The link itself is left to resolve(), which walks its target beneath "/" to the end.
    CHECK(io::real_path_resolver::look_ahead(std::vector<std::string>{t / "proj/lib", p[0]}) == 1);
    CHECK(*r.resolve(t / "proj/lib") == t / "elsewhere");
    CHECK(*r.resolve(p[0]) == t / "elsewhere/a.ts");
    io::real_path_resolver::end_look_ahead();
    CHECK(io::real_path_resolver::known_link_answers() - known_before == 4);
    CHECK(io::real_path_resolver::looked_ahead_answers() - used_before == 3);
    // Alone, a new file: the walk beneath "/" stops short, the target and the rest are walked
    // apart, and the target's descriptor is closed.
    const std::size_t alone_before = open_descriptors();
    CHECK(*r.resolve(t / "proj/lib/new/c.ts") == t / "elsewhere/new/c.ts");
    CHECK(open_descriptors() == alone_before);
    CHECK(io::real_path_resolver::known_link_answers() - known_before == 5);
  }
  SECTION("a target that climbs to a file: the rest under it answered as the walk writes it") {
    const auto p = known_then("lib", "../elsewhere/a.ts");
    CHECK(io::real_path_resolver::look_ahead(p) == 2);
    CHECK(*r.resolve(p[0]) == t / "elsewhere/a.ts/a.ts");
    CHECK(*r.resolve(p[1]) == t / "elsewhere/a.ts/b.ts");
    io::real_path_resolver::end_look_ahead();
    CHECK(*io::real_path_resolver::resolve_by_walk(p[0]) == t / "elsewhere/a.ts/a.ts");
  }
  SECTION("a target written out of normal form (`./src//`): walked as written, answered in normal form") {
    const auto p = known_then("lib", "./src//");
    const std::vector<std::string> round = {p[0], p[1], t / "proj/lib"};
    const std::uint64_t asked_before = io::real_path_resolver::looks_asked_ahead();
    CHECK(io::real_path_resolver::look_ahead(round) == 3);
    CHECK(io::real_path_resolver::looks_asked_ahead() - asked_before == 3);
    CHECK(*r.resolve(round[0]) == t / "proj/src/a.ts");
    CHECK(*r.resolve(round[1]) == t / "proj/src/b.ts");
    CHECK(*r.resolve(round[2]) == t / "proj/src");  // the link itself
    io::real_path_resolver::end_look_ahead();
    CHECK(*r.resolve(t / "proj/lib") == t / "proj/src");  // alone
    CHECK(*r.resolve(p[1]) == t / "proj/src/b.ts");
  }
  SECTION("a target out of normal form through another link (`./x2//`): the walk meets it, nothing answered") {
    nothing_ahead(known_then("lib", "./x2//"), 2, {t / "proj/src/a.ts", t / "proj/src/b.ts"});
  }
  SECTION("a spliced path too long for the kernel, though its normal form is not: not asked ahead") {
    std::string dots;
    while (dots.size() < PATH_MAX - 16) dots += "./";
    nothing_ahead(known_then("lib", dots + "src"), 0, {t / "proj/src/a.ts", t / "proj/src/b.ts"});
  }
  SECTION("a target that climbs to \"/\" exactly: the answers start at \"/\" with one slash") {
    std::string up;
    for (const auto& part : fs::path(t / "proj").relative_path()) up += "../", (void)part;
    auto p = known_then("root", up);
    p.push_back(t / "proj/root" + t / "elsewhere/a.ts");  // back down to a file
    CHECK(io::real_path_resolver::look_ahead(p) == 3);
    CHECK(*r.resolve(p[0]) == "/a.ts");
    CHECK(*r.resolve(p[1]) == "/b.ts");
    CHECK(*r.resolve(p[2]) == t / "elsewhere/a.ts");
    io::real_path_resolver::end_look_ahead();
    for (std::size_t i = 0; i < p.size(); ++i) CHECK(*r.resolve(p[i]) == *io::real_path_resolver::resolve_by_walk(p[i]));
  }
  SECTION("a target that is \"/\": the link itself is \"/\", a path under it starts there") {
    const auto p = known_then("abs", "/");
    const std::vector<std::string> round = {t / "proj/abs", p[0]};
    CHECK(io::real_path_resolver::look_ahead(round) == 2);
    CHECK(*r.resolve(round[0]) == "/");
    CHECK(*r.resolve(round[1]) == "/a.ts");
    io::real_path_resolver::end_look_ahead();
  }
  SECTION("a target that climbs, then a link past it: the walk from the target meets it, not answered") {
    known_then("lib", "../elsewhere");
    fs::create_directories(t / "elsewhere/sub");
    touch(t / "elsewhere/sub/a.ts");
    fs::create_directory_symlink("sub", t / "elsewhere/ln");  // stays beneath the target
    nothing_ahead({t / "proj/lib/ln/a.ts", t / "proj/lib/ln/b.ts"}, 2,
                  {t / "elsewhere/sub/a.ts", t / "elsewhere/sub/b.ts"});
  }
  SECTION("a target that climbs and is missing before its `..`: nothing walked ahead, refused") {
    nothing_ahead(known_then("lib", "gone/../../elsewhere"), 0, {std::nullopt, std::nullopt});
  }
  SECTION("a target that climbs and leads through another link: its walk met the link, nothing asked") {
    const auto p = known_then("lib", "../proj/x2");
    const std::uint64_t read_before = io::real_path_resolver::links_read_ahead();
    nothing_ahead(p, 0, {t / "proj/src/a.ts", t / "proj/src/b.ts"});
    CHECK(io::real_path_resolver::links_read_ahead() - read_before == 1);
  }
  SECTION("a target that climbs above \"/\": refused beneath it ahead, as resolve() refuses it, and answered the usual way") {
    std::string above;
    for (int i = 0; i < 40; ++i) above += "../";
    const auto p = known_then("lib", above + fs::path(t / "elsewhere").relative_path().string());
    const std::uint64_t known_before = io::real_path_resolver::known_link_answers();
    nothing_ahead(p, 0, {t / "elsewhere/a.ts", t / "elsewhere/b.ts"});
    CHECK(io::real_path_resolver::known_link_answers() == known_before);
  }
  SECTION("no link any more: nothing walked ahead; each path resolves to itself") {
    const auto p = known_then("lib", "a folder");
    nothing_ahead(p, 0, {p[0], p[1]});
  }
}

TEST_CASE("paths under a known link take their round's entries, so a later path's look is found",
          "[io][resolver]") {
  temp_tree t;
  fs::create_directories(t / "proj/src");
  touch(t / "proj/plain.ts");
  touch(t / "proj/plain2.ts");
  fs::create_directory_symlink("src", t / "proj/x2");
  fs::create_directory_symlink("x2", t / "proj/lib");  // through another link: never spliced
  SKIP_UNLESS_LOOKS_GO_TOGETHER();
  io::real_path_resolver r;
  std::vector<std::string> paths;
  for (int i = 0; i < 9; ++i) {
    touch(t / ("proj/src/f" + std::to_string(i)));
    paths.push_back(t / ("proj/lib/f" + std::to_string(i)));
  }
  REQUIRE(*r.resolve(paths[0]) == t / "proj/src/f0");  // the link is known from here on
  REQUIRE(*r.resolve(paths[0]) == t / "proj/src/f0");  // and found not to splice
  // The tenth and eleventh: past the window of 8 unless the nine took their entries.
  paths.push_back(t / "proj/plain.ts");
  paths.push_back(t / "proj/plain2.ts");
  const std::uint64_t used_before = io::real_path_resolver::looked_ahead_answers();
  const std::uint64_t asked_before = io::real_path_resolver::looks_asked_ahead();
  CHECK(io::real_path_resolver::look_ahead(paths) == 2);
  CHECK(io::real_path_resolver::looks_asked_ahead() - asked_before == 2);
  for (std::size_t i = 0; i < 9; ++i) CHECK(*r.resolve(paths[i]) == t / ("proj/src/f" + std::to_string(i)));
  CHECK(*r.resolve(paths[9]) == paths[9]);
  CHECK(*r.resolve(paths[10]) == paths[10]);
  io::real_path_resolver::end_look_ahead();
  CHECK(io::real_path_resolver::looked_ahead_answers() - used_before == 2);
}

TEST_CASE("paths chosen to collide in a round's table are each looked at, and answered", "[io][resolver][hostile]") {
  temp_tree t;
  fs::create_directories(t / "proj");
  SKIP_UNLESS_LOOKS_GO_TOGETHER();
  // Twenty names whose hashes share their low seven bits: the table of a round of 40 paths
  // has 128 slots, so every one of them starts at the same slot. The first sixteen find a free
  // slot within the sixteen a path may probe; the last four find none, are not remembered,
  // and each naming of them is looked at itself.
  std::vector<std::string> names;
  std::size_t home = 0;
  for (std::size_t k = 0; names.size() < 20; ++k) {
    const std::string p = t / ("proj/f" + std::to_string(k));
    const std::size_t slot = std::hash<std::string_view>{}(p) & 127;
    if (names.empty()) home = slot;
    if (slot == home) names.push_back(p);
  }
  std::vector<std::string> paths = names;
  paths.insert(paths.end(), names.begin(), names.end());  // each named twice
  const std::uint64_t asked_before = io::real_path_resolver::looks_asked_ahead();
  CHECK(io::real_path_resolver::look_ahead(paths) == paths.size());
  CHECK(io::real_path_resolver::looks_asked_ahead() - asked_before == 16 + 4 * 2);
  io::real_path_resolver r;
  for (const auto& p : paths) CHECK(*r.resolve(p) == p);
  io::real_path_resolver::end_look_ahead();
}

TEST_CASE("a look taken ahead answers once and never after its round", "[io][resolver][hostile]") {
  temp_tree t;
  fs::create_directories(t / "proj");
  fs::create_directories(t / "secret");
  touch(t / "proj/notes");
  touch(t / "proj/other");
  SKIP_UNLESS_LOOKS_GO_TOGETHER();
  io::real_path_resolver r;
  const std::string notes = t / "proj/notes";
  const std::vector<std::string> paths = {notes, t / "proj/other"};
  REQUIRE(io::real_path_resolver::look_ahead(paths) == 2);
  // The file becomes a link to the secret folder after the look: within the round the look
  // answers, as if the path had been resolved when the round began.
  fs::remove(notes);
  fs::create_directory_symlink(t / "secret", notes);
  CHECK(*r.resolve(notes) == notes);
  // Used once: the same path again looks for itself and meets the link.
  CHECK(*r.resolve(notes) == t / "secret");
  io::real_path_resolver::end_look_ahead();
  // Never after the round, even for a path whose look was not used.
  const std::string other = t / "proj/other";
  fs::remove(other);
  fs::create_directory_symlink(t / "secret", other);
  CHECK(*r.resolve(other) == t / "secret");
}

TEST_CASE("a folder where a link could not be followed is not looked at ahead until a path in it has none",
          "[io][resolver]") {
  temp_tree t;
  fs::create_directories(t / "proj");
  fs::create_symlink(t / "proj/loop", t / "proj/loop");  // a link to itself: no resolution
  SKIP_UNLESS_LOOKS_GO_TOGETHER();
  io::real_path_resolver r;
  const std::vector<std::string> paths = {t / "proj/a", t / "proj/b"};
  REQUIRE(io::real_path_resolver::look_ahead(paths) == 2);
  io::real_path_resolver::end_look_ahead();
  // Its first look meets the link, which cannot be resolved nor kept as a known link: the
  // folder is remembered, and its paths go to the kernel's one walk at once, without a look.
  CHECK_FALSE(r.resolve(t / "proj/loop"));
  CHECK(io::real_path_resolver::look_ahead(paths) == 0);
  // A path there that resolves to itself has no link: the folder is forgotten.
  CHECK(*r.resolve(t / "proj/a") == t / "proj/a");
  io::real_path_resolver::end_look_ahead();
  CHECK(io::real_path_resolver::look_ahead(paths) == 2);
  io::real_path_resolver::end_look_ahead();
}

TEST_CASE("without io_uring the resolver takes every look itself", "[io][resolver]") {
  temp_tree t;
  fs::create_directories(t / "real");
  touch(t / "real/file");
  fs::create_directory_symlink(t / "real", t / "link");
  io::allow_open_batches(false);
  const std::vector<std::string> paths = {t / "real/file", t / "link/file", t / "real/missing"};
  const std::uint64_t used_before = io::real_path_resolver::looked_ahead_answers();
  const std::size_t taken = io::real_path_resolver::look_ahead(paths);
  io::real_path_resolver r;
  std::vector<std::string> got;
  for (const auto& p : paths) got.push_back(*r.resolve(p));
  io::real_path_resolver::end_look_ahead();
  io::allow_open_batches(true);
  CHECK(taken == 0);
  CHECK(io::real_path_resolver::looked_ahead_answers() == used_before);
  CHECK(got == std::vector<std::string>{t / "real/file", t / "real/file", t / "real/missing"});
}

namespace {

// Lowers this process's open-file limit to `limit` while it lives (tests that fill the table).
struct file_limit {
  rlimit old{};
  explicit file_limit(rlim_t limit) {
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
    rlimit low = old;
    low.rlim_cur = limit;
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  }
  ~file_limit() { ::setrlimit(RLIMIT_NOFILE, &old); }
};

}  // namespace

TEST_CASE("a look the kernel refused is never taken for a look without a link", "[io][resolver][hostile]") {
  temp_tree t;
  fs::create_directories(t / "real/dir");
  fs::create_directories(t / "secret");
  fs::create_directory_symlink(t / "secret", t / "real/dir/link");
  fs::create_directory_symlink(t / "secret", t / "real/dir/link2");
  SKIP_UNLESS_LOOKS_GO_TOGETHER();  // sets up this thread's ring too
  // Two paths, not one twice: a path named twice in a round is looked at once.
  const std::vector<std::string> paths = {t / "real/dir/link", t / "real/dir/link2"};
  std::size_t taken = 0;
  {
    file_limit limit(256);
    std::vector<int> filler;
    for (int fd; (fd = ::dup(0)) >= 0;) filler.push_back(fd);  // every open now fails with EMFILE
    taken = io::real_path_resolver::look_ahead(paths);
    for (int fd : filler) ::close(fd);
  }
  CHECK(taken == 0);
  io::real_path_resolver r;
  CHECK(*r.resolve(paths[0]) == t / "secret");
  CHECK(*r.resolve(paths[1]) == t / "secret");
  io::real_path_resolver::end_look_ahead();
}

TEST_CASE("a look passed over is not used by a later path of the round", "[io][resolver][hostile]") {
  temp_tree t;
  fs::create_directories(t / "proj");
  fs::create_directories(t / "secret");
  touch(t / "proj/a");
  touch(t / "proj/b");
  SKIP_UNLESS_LOOKS_GO_TOGETHER();
  const std::string a = t / "proj/a", b = t / "proj/b";
  REQUIRE(io::real_path_resolver::look_ahead(std::vector<std::string>{a, b}) == 2);
  fs::remove(a);
  fs::create_directory_symlink(t / "secret", a);
  io::real_path_resolver r;
  CHECK(*r.resolve(b) == b);             // b's look, passing a's over
  CHECK(*r.resolve(a) == t / "secret");  // a's was passed over: it looks itself and meets the link
  io::real_path_resolver::end_look_ahead();
}

TEST_CASE("a round of many folders holds at most one submission's descriptors at a time", "[io][resolver]") {
  temp_tree t;
  std::vector<std::string> folders;
  for (int i = 0; i < 300; ++i) {
    folders.push_back(t / ("d" + std::to_string(i)));
    fs::create_directory(folders.back());
  }
  SKIP_UNLESS_LOOKS_GO_TOGETHER();
  const std::size_t before = open_descriptors();
  std::size_t taken = 0;
  {
    // Room for one submission's 128 descriptors and a few more, not for all 300 at once.
    file_limit limit(static_cast<rlim_t>(before + 160));
    taken = io::real_path_resolver::look_ahead(folders);
  }
  CHECK(taken == folders.size());
  CHECK(open_descriptors() == before);
  io::real_path_resolver r;
  for (const auto& f : folders) CHECK(*r.resolve(f) == f);
  io::real_path_resolver::end_look_ahead();
}
