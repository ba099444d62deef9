// io/permissions_file.hpp against real files in a temporary folder: refusals that leave the
// file's bytes alone, atomic replacement, and no lost or torn update across processes.
#include "io/permissions_file.hpp"
#include "../support/temp_tree.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace dhara;
using policy::permission_state;

namespace {

// A fresh folder under the temp dir, removed at scope exit.
struct temp_tree : dhara::testing::temp_tree {
  temp_tree() : dhara::testing::temp_tree("dhara-permfile-XXXXXX") {}
};

// DESIGN §3.2, as the seed writes it.
constexpr const char* seed_example = R"({ "web-tools": { "version": "1.0.0",
                 "capabilities": { "network:fetch": "approved", "network:dns": "approved",
                                   "filesystem:write": "denied" },
                 "approvedAt": "2026-05-14T10:00:00Z", "approvedBy": "user" } })";

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  REQUIRE(out.good());
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

// What a finished transaction may leave in the folder: the file and its lock, nothing else.
bool only_file_and_lock(const std::string& dir) {
  for (const auto& name : names_in(dir))
    if (name != "permissions.json" && name != "permissions.json.lock") return false;
  return true;
}

struct stat stat_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st;
}

// A change that approves `cap` for `ext` (what `config permissions approve` does).
io::permissions_change approve(std::string ext, std::string cap, bool* called = nullptr) {
  return [ext = std::move(ext), cap = std::move(cap), called](policy::permissions& p) -> policy::result<bool> {
    if (called) *called = true;
    auto r = policy::record(p, ext, cap, permission_state::approved, "1.0.0", "", "2026-05-14T10:00:00Z", policy::security_level::standard, nullptr);
    if (!r) return r.err();
    return true;
  };
}

// Runs `body` in a child process and returns its exit status (or 128 + signal). The child
// never returns into Catch2: it leaves through _exit.
int in_child(const std::function<int()>& body) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 99;
    try {
      code = body();
    } catch (...) {
      code = 98;
    }
    ::_exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

pid_t start_child(const std::function<int()>& body) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 99;
    try {
      code = body();
    } catch (...) {
      code = 98;
    }
    ::_exit(code);
  }
  return pid;
}

int wait_child(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("permissions_path is permissions.json in DHARA_HOME", "[io][permissions]") {
  CHECK(io::permissions_path("/home/u/.dhara") == "/home/u/.dhara/permissions.json");
}

TEST_CASE("a missing permissions file reads as no permissions", "[io][permissions]") {
  temp_tree t;
  auto p = io::read_permissions(t / "permissions.json");
  REQUIRE(p);
  CHECK(p->value.entries.empty());
  CHECK(p->warnings.empty());
  // A DHARA_HOME that does not exist yet is the same: nothing approved.
  auto q = io::read_permissions(t / "no-home/permissions.json");
  REQUIRE(q);
  CHECK(q->value.entries.empty());
  CHECK(!fs::exists(t / "no-home"));  // reading creates nothing
}

TEST_CASE("an empty permissions file reads as no permissions", "[io][permissions]") {
  temp_tree t;
  for (std::string blank : {"", "\n", "  \n\t "}) {
    write_file(t / "permissions.json", blank);
    auto p = io::read_permissions(t / "permissions.json");
    REQUIRE(p);
    CHECK(p->value.entries.empty());
  }
}

TEST_CASE("the DESIGN permissions example reads from a file", "[io][permissions]") {
  temp_tree t;
  write_file(t / "permissions.json", seed_example);
  auto p = io::read_permissions(t / "permissions.json");
  REQUIRE(p);
  REQUIRE(p->value.entries.count("web-tools") == 1);
  const auto& e = p->value.entries.at("web-tools");
  CHECK(e.version == "1.0.0");
  CHECK(e.capabilities.at("network:fetch") == permission_state::approved);
  CHECK(e.capabilities.at("network:dns") == permission_state::approved);
  CHECK(e.capabilities.at("filesystem:write") == permission_state::denied);
  CHECK(e.approved_at == "2026-05-14T10:00:00Z");
  CHECK(e.approved_by == "user");
}

TEST_CASE("parse warnings name the file's path", "[io][permissions]") {
  temp_tree t;
  write_file(t / "permissions.json", R"({"a": {"version": "1", "capabilities": {"network:fetc": "approved"}}})");
  auto p = io::read_permissions(t / "permissions.json");
  REQUIRE(p);
  REQUIRE(p->warnings.size() == 1);
  CHECK(p->warnings[0].rfind(t / "permissions.json", 0) == 0);
}

TEST_CASE("an update creates DHARA_HOME 0700 and writes the file 0600", "[io][permissions]") {
  temp_tree t;
  const std::string home = t / "a/b/home";
  const std::string path = io::permissions_path(home);
  auto r = io::update_permissions(path, approve("web-tools", "network:fetch"));
  REQUIRE(r);
  CHECK(r->entries.at("web-tools").capabilities.at("network:fetch") == permission_state::approved);
  CHECK((stat_of(home).st_mode & 07777) == 0700);
  CHECK((stat_of(t / "a").st_mode & 07777) == 0700);
  CHECK((stat_of(path).st_mode & 07777) == 0600);
  CHECK((stat_of(path + ".lock").st_mode & 07777) == 0600);
  CHECK(only_file_and_lock(home));
  auto back = io::read_permissions(path);
  REQUIRE(back);
  CHECK(back->value.entries.at("web-tools").capabilities.at("network:fetch") == permission_state::approved);
  CHECK(file_bytes(path) == policy::serialize_permissions(*r));
}

TEST_CASE("an update keeps unknown fields and other extensions", "[io][permissions]") {
  temp_tree t;
  const std::string path = t / "permissions.json";
  write_file(path, R"({
    "web-tools": { "version": "1.0.0", "capabilities": { "network:fetch": "approved",
                   "network:fetc": "denied" },
                   "note": { "from": "a future dhara", "list": [1, 2, 3] }, "pinned": true },
    "other": { "version": "2.0.0", "capabilities": {}, "x-origin": "hand-written" } })");
  auto r = io::update_permissions(path, approve("fs-tools", "filesystem:read"));
  REQUIRE(r);
  auto doc = nlohmann::json::parse(file_bytes(path));
  CHECK(doc["web-tools"]["note"] == nlohmann::json::parse(R"({ "from": "a future dhara", "list": [1, 2, 3] })"));
  CHECK(doc["web-tools"]["pinned"] == true);
  CHECK(doc["web-tools"]["capabilities"]["network:fetc"] == "denied");  // unknown key kept
  CHECK(doc["other"]["x-origin"] == "hand-written");
  CHECK(doc["fs-tools"]["capabilities"]["filesystem:read"] == "approved");
}

TEST_CASE("reset through an update removes the entry from the file", "[io][permissions]") {
  temp_tree t;
  const std::string path = t / "permissions.json";
  write_file(path, seed_example);
  auto r = io::update_permissions(path, [](policy::permissions& p) -> policy::result<bool> {
    return policy::reset(p, "web-tools");
  });
  REQUIRE(r);
  CHECK(r->entries.empty());
  CHECK(nlohmann::json::parse(file_bytes(path)) == nlohmann::json::object());
}

TEST_CASE("a file dhara cannot parse is refused and never overwritten", "[io][permissions]") {
  // Each of these must leave the bytes exactly as they were.
  const std::string seed(seed_example);
  const std::vector<std::pair<const char*, std::string>> hostile = {
      {"truncated in the middle", seed.substr(0, seed.size() / 2)},
      {"truncated before the last brace", seed.substr(0, seed.size() - 1)},
      {"a lone brace", "{"},
      {"a top level that is not an object", "[]"},
      {"an entry that is not an object", R"({"web-tools": 1})"},
      {"a state other than approved/denied", R"({"web-tools": {"version": "1", "capabilities": {"network:fetch": "yes"}}})"},
      {"an entry without a version", R"({"web-tools": {"capabilities": {}}})"},
      {"a NUL byte", std::string("{\"a\"\0: 1}", 9)},
      {"invalid UTF-8", "{\"\xff\xfe\": {}}"},
      {"nesting deeper than the limit", std::string(300, '[') + std::string(300, ']')},
  };
  for (const auto& [what, bytes] : hostile) {
    SECTION(what) {
      temp_tree t;
      const std::string path = t / "permissions.json";
      write_file(path, bytes);
      auto before = stat_of(path);

      auto read = io::read_permissions(path);
      REQUIRE(!read);
      CHECK(contains(read.err().message, path));
      CHECK((contains(read.err().message, "fix") && contains(read.err().message, "dhara")));

      bool called = false;
      auto r = io::update_permissions(path, approve("web-tools", "network:fetch", &called));
      REQUIRE(!r);
      CHECK(contains(r.err().message, path));
      CHECK(!called);
      CHECK(file_bytes(path) == bytes);
      CHECK(stat_of(path).st_ino == before.st_ino);
      CHECK(only_file_and_lock(t.root.string()));
    }
  }
}

TEST_CASE("a directory at the permissions path is refused", "[io][permissions]") {
  temp_tree t;
  const std::string path = t / "permissions.json";
  fs::create_directory(path);
  auto read = io::read_permissions(path);
  REQUIRE(!read);
  CHECK(contains(read.err().message, path));
  CHECK(contains(read.err().message, "directory"));
  bool called = false;
  auto r = io::update_permissions(path, approve("web-tools", "network:fetch", &called));
  REQUIRE(!r);
  CHECK(!called);
  CHECK(fs::is_directory(path));
  CHECK(only_file_and_lock(t.root.string()));
}

TEST_CASE("a FIFO at the permissions path is refused without blocking", "[io][permissions]") {
  temp_tree t;
  const std::string path = t / "permissions.json";
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  auto read = io::read_permissions(path);  // would hang on open() without O_NONBLOCK
  REQUIRE(!read);
  CHECK(contains(read.err().message, "FIFO"));
  auto r = io::update_permissions(path, approve("web-tools", "network:fetch"));
  REQUIRE(!r);
  CHECK(S_ISFIFO(stat_of(path).st_mode));
}

TEST_CASE("a symlink at the permissions path is refused, its target untouched", "[io][permissions]") {
  temp_tree t;
  const std::string path = t / "home/permissions.json";
  const std::string target = t / "elsewhere.json";
  fs::create_directory(t / "home");
  write_file(target, seed_example);  // a valid file: the link itself is the problem
  fs::create_symlink(target, path);

  auto read = io::read_permissions(path);
  REQUIRE(!read);
  CHECK(contains(read.err().message, path));
  CHECK(contains(read.err().message, "symbolic link"));

  bool called = false;
  auto r = io::update_permissions(path, approve("web-tools", "filesystem:write", &called));
  REQUIRE(!r);
  CHECK(contains(r.err().message, "symbolic link"));
  CHECK(!called);
  CHECK(fs::is_symlink(path));
  CHECK(file_bytes(target) == seed_example);
  CHECK(only_file_and_lock(t / "home"));

  SECTION("a dangling link does not get its target created") {
    const std::string missing = t / "created-through-link.json";
    fs::remove(path);
    fs::create_symlink(missing, path);
    CHECK(!io::update_permissions(path, approve("web-tools", "network:fetch")));
    CHECK(!fs::exists(missing));
  }
  SECTION("a symlinked lock file is refused") {
    fs::remove(path);
    fs::remove(path + ".lock");  // left by the refused update above
    const std::string lock_target = t / "lock-target";
    fs::create_symlink(lock_target, path + ".lock");
    auto locked = io::update_permissions(path, approve("web-tools", "network:fetch"));
    REQUIRE(!locked);
    CHECK(contains(locked.err().message, ".lock"));
    CHECK(!fs::exists(lock_target));
    CHECK(!fs::exists(path));
  }
}

TEST_CASE("an unreadable permissions file is refused", "[io][permissions]") {
  temp_tree t;
  const std::string path = t / "permissions.json";
  write_file(path, seed_example);
  REQUIRE(::chmod(path.c_str(), 0) == 0);
  if (::geteuid() == 0) {
    // Root reads a mode-000 file anyway, so the refusal cannot be provoked here.
    WARN("running as root: mode 000 does not stop reads; unreadable-file check skipped");
    return;
  }
  auto read = io::read_permissions(path);
  REQUIRE(!read);
  CHECK(contains(read.err().message, path));
  CHECK(contains(read.err().message, "cannot be read"));
  bool called = false;
  CHECK(!io::update_permissions(path, approve("web-tools", "network:fetch", &called)));
  CHECK(!called);
  REQUIRE(::chmod(path.c_str(), 0600) == 0);
  CHECK(file_bytes(path) == seed_example);
}

TEST_CASE("a no-op change writes nothing", "[io][permissions]") {
  temp_tree t;
  const std::string path = t / "permissions.json";
  write_file(path, seed_example);
  auto before = stat_of(path);

  SECTION("the change reports no change") {
    // It scribbles on its argument first: the result must still be the file as read.
    auto r = io::update_permissions(path, [](policy::permissions& p) -> policy::result<bool> {
      p.entries.clear();
      return false;
    });
    REQUIRE(r);
    CHECK(r->entries.count("web-tools") == 1);
  }
  SECTION("the change aborts with an error") {
    auto r = io::update_permissions(path, [](policy::permissions& p) -> policy::result<bool> {
      p.entries.clear();
      return policy::make_error(policy::errc::invalid_value, "no such extension");
    });
    REQUIRE(!r);
    CHECK(r.err().message == "no such extension");
  }
  SECTION("the change throws") {
    auto r = io::update_permissions(path, [](policy::permissions&) -> policy::result<bool> {
      throw std::runtime_error("boom");
    });
    REQUIRE(!r);
    CHECK(contains(r.err().message, "boom"));
    CHECK(contains(r.err().message, "nothing was changed"));
  }
  auto after = stat_of(path);
  CHECK(after.st_ino == before.st_ino);
  CHECK(after.st_mtim.tv_sec == before.st_mtim.tv_sec);
  CHECK(after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
  CHECK(file_bytes(path) == seed_example);
  CHECK(only_file_and_lock(t.root.string()));
}

TEST_CASE("a change that leaves the bytes as they are does not replace the file", "[io][permissions]") {
  temp_tree t;
  const std::string path = t / "permissions.json";
  REQUIRE(io::update_permissions(path, approve("web-tools", "network:fetch")));
  auto before = stat_of(path);
  auto r = io::update_permissions(path, [](policy::permissions&) -> policy::result<bool> { return true; });
  REQUIRE(r);
  CHECK(stat_of(path).st_ino == before.st_ino);
}

TEST_CASE("writes replace the file by rename and keep one lock file", "[io][permissions]") {
  temp_tree t;
  const std::string path = t / "permissions.json";
  REQUIRE(io::update_permissions(path, approve("web-tools", "network:fetch")));
  auto file_before = stat_of(path);
  auto lock_before = stat_of(path + ".lock");
  REQUIRE(io::update_permissions(path, approve("web-tools", "network:dns")));
  // A new inode: the old file was replaced whole, not rewritten in place.
  CHECK(stat_of(path).st_ino != file_before.st_ino);
  // The lock file is never replaced, or waiters would lock a file nobody else locks.
  CHECK(stat_of(path + ".lock").st_ino == lock_before.st_ino);
  CHECK(only_file_and_lock(t.root.string()));
}

TEST_CASE("a failed write leaves the old file and no temp file", "[io][permissions]") {
  temp_tree t;
  const std::string path = t / "permissions.json";
  write_file(path, seed_example);
  // In a child, cap the size of files it may write so that the temp file cannot be written.
  int code = in_child([&] {
    std::signal(SIGXFSZ, SIG_IGN);  // get EFBIG instead of being killed
    struct rlimit lim {64, 64};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return 10;
    auto r = io::update_permissions(path, [](policy::permissions& p) -> policy::result<bool> {
      p.entries["web-tools"].extra["padding"] = std::string(4096, 'x');
      return true;
    });
    if (r) return 1;
    return contains(r.err().message, "nothing was changed") ? 0 : 2;
  });
  CHECK(code == 0);
  CHECK(file_bytes(path) == seed_example);
  CHECK(only_file_and_lock(t.root.string()));
}

TEST_CASE("a held lock makes an update wait, then fail with a clear error", "[io][permissions]") {
  temp_tree t;
  const std::string path = t / "permissions.json";
  write_file(path, seed_example);
  // flock locks belong to the open file description: a second open() in this process
  // conflicts with update_permissions' own, as another process would.
  int holder = ::open((path + ".lock").c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0600);
  REQUIRE(holder >= 0);
  REQUIRE(::flock(holder, LOCK_EX) == 0);

  bool called = false;
  auto start = std::chrono::steady_clock::now();
  auto r = io::update_permissions(path, approve("web-tools", "network:fetch", &called),
                                  std::chrono::milliseconds(300));
  auto waited = std::chrono::steady_clock::now() - start;
  REQUIRE(!r);
  CHECK(contains(r.err().message, "another dhara is holding the permissions lock"));
  CHECK(!called);
  CHECK(waited >= std::chrono::milliseconds(300));
  CHECK(waited < std::chrono::seconds(5));
  CHECK(file_bytes(path) == seed_example);

  ::close(holder);  // released: the next update goes through
  CHECK(io::update_permissions(path, approve("web-tools", "network:fetch"), std::chrono::milliseconds(300)));
}

TEST_CASE("concurrent updates from 8 processes lose nothing", "[io][permissions][concurrency]") {
  temp_tree t;
  constexpr int children = 8;
  constexpr int rounds = 50;
  // DHARA_HOME does not exist yet: the children also race to create it.
  const std::string path = io::permissions_path(t / "home");

  auto child = [&](int i) {
    const std::string ext = "ext-" + std::to_string(i);
    for (int j = 0; j < rounds; ++j) {
      bool lost = false;
      auto r = io::update_permissions(
          path,
          [&](policy::permissions& p) -> policy::result<bool> {
            // A counter every process increments: a lost update shows as a short total.
            auto& shared = p.entries["shared"];
            shared.version = "1";
            shared.extra["total"] = shared.extra.value("total", 0) + 1;
            // This process's own counter must be what it wrote last time.
            auto it = p.entries.find(ext);
            int mine = it == p.entries.end() ? 0 : it->second.extra.value("count", 0);
            if (mine != j) lost = true;
            if (j == 0) {
              auto a = policy::record(p, ext, "network:fetch", permission_state::approved, "1.0.0", "", "now", policy::security_level::standard, nullptr);
              if (!a) return a.err();
            }
            auto s = policy::record(p, ext, "filesystem:read",
                                    j % 2 == 0 ? permission_state::approved : permission_state::denied, "1.0.0",
                                    "", "now", policy::security_level::standard, nullptr);
            if (!s) return s.err();
            p.entries[ext].extra["count"] = j + 1;
            return true;
          },
          std::chrono::seconds(60));
      if (!r) return 2;
      if (lost) return 3;
    }
    return 0;
  };

  auto start = std::chrono::steady_clock::now();
  std::vector<pid_t> pids;
  for (int i = 0; i < children; ++i) pids.push_back(start_child([&, i] { return child(i); }));
  std::vector<int> codes;
  for (pid_t pid : pids) codes.push_back(wait_child(pid));
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  INFO("8 x 50 updates took " << ms.count() << " ms");
  CHECK(codes == std::vector<int>(children, 0));

  auto p = io::read_permissions(path);
  REQUIRE(p);
  CHECK(p->value.entries.at("shared").extra.value("total", 0) == children * rounds);
  for (int i = 0; i < children; ++i) {
    const auto& e = p->value.entries.at("ext-" + std::to_string(i));
    CHECK(e.extra.value("count", 0) == rounds);
    CHECK(e.capabilities.at("network:fetch") == permission_state::approved);
    CHECK(e.capabilities.at("filesystem:read") == permission_state::denied);  // last round is odd
  }
  CHECK(only_file_and_lock(t / "home"));
}

TEST_CASE("readers never see a torn file while others write", "[io][permissions][concurrency]") {
  temp_tree t;
  constexpr int writers = 4;
  constexpr int readers = 4;
  constexpr int rounds = 25;
  constexpr std::size_t padding = 128 * 1024;  // big enough that an in-place write is seen half done
  const std::string home = t / "home";
  const std::string path = io::permissions_path(home);
  const std::string stop = t / "stop";
  REQUIRE(io::update_permissions(path, [&](policy::permissions& p) -> policy::result<bool> {
    p.entries["bulk"].version = "1";
    p.entries["bulk"].extra["padding"] = std::string(padding, 'x');
    return true;
  }));

  // A read is whole when it parses, the padding is all there and the total never goes back.
  auto check_read = [&](int& last_total) {
    auto p = io::read_permissions(path);
    if (!p) return false;
    auto bulk = p->value.entries.find("bulk");
    if (bulk == p->value.entries.end()) return false;
    if (bulk->second.extra.value("padding", std::string()).size() != padding) return false;
    auto shared = p->value.entries.find("shared");
    int total = shared == p->value.entries.end() ? 0 : shared->second.extra.value("total", 0);
    if (total < last_total) return false;
    last_total = total;
    return true;
  };

  std::vector<pid_t> writer_pids, reader_pids;
  for (int i = 0; i < writers; ++i)
    writer_pids.push_back(start_child([&] {
      int last = 0;
      for (int j = 0; j < rounds; ++j) {
        auto r = io::update_permissions(
            path,
            [](policy::permissions& p) -> policy::result<bool> {
              auto& shared = p.entries["shared"];
              shared.version = "1";
              shared.extra["total"] = shared.extra.value("total", 0) + 1;
              return true;
            },
            std::chrono::seconds(60));
        if (!r) return 2;
        if (!check_read(last)) return 4;  // writers read between their writes too
      }
      return 0;
    }));
  for (int i = 0; i < readers; ++i)
    reader_pids.push_back(start_child([&] {
      int last = 0;
      long reads = 0;
      while (!fs::exists(stop)) {
        if (!check_read(last)) return 4;
        ++reads;
      }
      return reads > 0 ? 0 : 5;
    }));

  int last = 0;
  long parent_reads = 0;
  bool parent_ok = true;
  std::vector<int> writer_codes;
  for (pid_t pid : writer_pids) {
    // Read while this writer (and the others) are still running, then collect its status.
    int status = 0;
    pid_t done = 0;
    while ((done = ::waitpid(pid, &status, WNOHANG)) == 0) {
      if (parent_ok) parent_ok = check_read(last);
      ++parent_reads;
    }
    writer_codes.push_back(done == pid && WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  write_file(stop, "");
  std::vector<int> reader_codes;
  for (pid_t pid : reader_pids) reader_codes.push_back(wait_child(pid));

  INFO("parent reads: " << parent_reads);
  CHECK(parent_ok);
  CHECK(writer_codes == std::vector<int>(writers, 0));
  CHECK(reader_codes == std::vector<int>(readers, 0));
  auto p = io::read_permissions(path);
  REQUIRE(p);
  CHECK(p->value.entries.at("shared").extra.value("total", 0) == writers * rounds);
  CHECK(only_file_and_lock(home));
}
