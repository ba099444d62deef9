// The host API operations against real files, a real HTTP server on 127.0.0.1 and real
// processes: escapes through symlinks and magic links, address vetting, process-group kills.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "io/host_ops.hpp"
#include "../support/temp_tree.hpp"

namespace fs = std::filesystem;
using namespace dhara;
using nlohmann::json;
using policy::errc;

namespace {

// A fresh folder under the temp dir, removed at scope exit.
struct temp_tree : dhara::testing::temp_tree {
  explicit temp_tree(const char* name = "dhara-host-XXXXXX") : dhara::testing::temp_tree(name) {}
};

void put(const std::string& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

std::string get(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// A process started for a test (fork + execv), killed and reaped at scope exit.
struct child_process {
  pid_t pid = -1;
  explicit child_process(const std::vector<std::string>& argv) {
    std::vector<char*> cargv;
    for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int devnull = ::open("/dev/null", O_RDWR);
      ::dup2(devnull, 0);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
      ::execv(cargv[0], cargv.data());
      ::_exit(127);
    }
  }
  ~child_process() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
};

std::uint16_t free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

bool accepts(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// python3's http.server serving `dir` on 127.0.0.1; ready once it accepts connections.
struct http_server {
  std::uint16_t port;
  child_process proc;
  http_server(const std::string& dir, std::uint16_t p)
      : port(p),
        proc({"/usr/bin/python3", "-m", "http.server", std::to_string(p), "--bind", "127.0.0.1", "--directory", dir}) {
    // Polls for readiness (python needs ~100 ms to start); gives up after 10 s.
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!accepts(port)) {
      REQUIRE(std::chrono::steady_clock::now() < until);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  std::string url(std::string_view path) const { return "http://127.0.0.1:" + std::to_string(port) + std::string(path); }
};

policy::domain_rules rules_of(std::vector<std::string> domains) { return policy::compile_domain_rules(domains); }
policy::domain_rules no_list() { return policy::compile_domain_rules(std::nullopt); }

// A name from /etc/hosts that maps to 127.x and is not a conventional local name, so only the
// resolution step can catch it; empty when there is none.
std::string loopback_alias() {
  std::ifstream hosts("/etc/hosts");
  std::string line;
  while (std::getline(hosts, line)) {
    std::istringstream words(line);
    std::string addr, name;
    if (!(words >> addr) || !addr.starts_with("127.")) continue;
    while (words >> name) {
      if (name.starts_with('#')) break;
      if (name.find("localhost") == std::string::npos && !name.ends_with(".local") &&
          name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-.") == std::string::npos)
        return name;
    }
  }
  return {};
}

// True once `pid` no longer runs (gone, or a zombie waiting for its new parent to reap it).
bool is_dead(pid_t pid) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < until) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    if (!stat) return true;
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    auto paren = text.rfind(')');
    if (paren == std::string::npos || paren + 2 >= text.size()) return true;
    char state = text[paren + 2];
    if (state == 'Z' || state == 'X') return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

const std::vector<std::string> plain_env = {"PATH=/usr/bin:/bin", "LANG=C"};

}  // namespace

// ---------------------------------------------------------------------------------------
// Encodings

TEST_CASE("base64 round-trips bytes and refuses malformed text", "[io][host]") {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (std::size_t n : {0u, 1u, 2u, 3u, 4u, 255u, 256u}) {
    std::string bytes = all.substr(0, n);
    auto back = io::decode_base64(io::encode_base64(bytes));
    REQUIRE(back);
    CHECK(*back == bytes);
  }
  CHECK(io::encode_base64("hi") == "aGk=");
  CHECK(*io::decode_base64("aGk") == "hi");  // padding may be omitted
  for (const char* bad : {"a", "aGk*", "aG k", "aGl=", "a===", "aGk=aGk=", "-_8="}) {
    INFO(bad);
    auto r = io::decode_base64(bad);
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::invalid_value);
  }
}

TEST_CASE("UTF-8 validation refuses overlongs, surrogates and stray bytes", "[io][host]") {
  CHECK(io::is_valid_utf8("plain"));
  CHECK(io::is_valid_utf8("h\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));
  CHECK(io::is_valid_utf8(std::string("nul\0inside", 10)));
  for (const char* bad : {"\xC0\xAF", "\xE0\x80\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xFF", "\xC3", "a\x80"}) {
    INFO(bad);
    CHECK_FALSE(io::is_valid_utf8(bad));
  }
}

// ---------------------------------------------------------------------------------------
// Files

TEST_CASE("fs_read reads a file beneath the root", "[io][host]") {
  temp_tree t;
  fs::create_directories(t / "sub");
  put(t / "sub/a.txt", "hello\n");
  auto r = io::fs_read(t.str(), t / "sub/a.txt", "utf8", 1024);
  REQUIRE(r);
  CHECK((*r)["content"] == "hello\n");
  CHECK((*r)["size"] == 6);
  auto dflt = io::fs_read(t.str(), t / "sub/./a.txt", "", 1024);  // empty encoding = utf8
  REQUIRE(dflt);
  CHECK((*dflt)["content"] == "hello\n");
}

TEST_CASE("fs_read refuses paths that are lexically outside the root", "[io][host]") {
  temp_tree t;
  put(t / "a.txt", "x");
  for (const std::string& p : {t / "../etc/passwd", std::string("/etc/passwd"), t.str() + "x/a.txt",
                               std::string("relative/a.txt")}) {
    INFO(p);
    auto r = io::fs_read(t.str(), p, "utf8", 1 << 20);
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::invalid_path);
  }
}

TEST_CASE("an absolute symlink inside the root pointing outside cannot be read", "[io][host]") {
  // The lexical check passes (the link lives under the root); the open itself must refuse.
  temp_tree t;
  fs::create_symlink("/etc/passwd", t / "passwd");
  auto r = io::fs_read(t.str(), t / "passwd", "utf8", 1 << 20);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::refused);
  CHECK_THAT(r.err().message, Catch::Contains("has a symlink on its path"));

  // A link in a directory component, and a relative link climbing out, are refused too.
  fs::create_directory_symlink("/etc", t / "etc");
  auto via_dir = io::fs_read(t.str(), t / "etc/passwd", "utf8", 1 << 20);
  REQUIRE_FALSE(via_dir);
  CHECK(via_dir.err().code == errc::refused);

  temp_tree outside;
  put(outside / "secret", "top secret");
  fs::create_symlink(fs::relative(outside.root / "secret", t.root), t / "climb");
  auto climb = io::fs_read(t.str(), t / "climb", "utf8", 1 << 20);
  REQUIRE_FALSE(climb);
  CHECK(climb.err().code == errc::refused);
}

// The operations open the resolution the checker matched, which holds no symlink: a link on the
// way means the path changed after its check, even one that stays beneath the root (it could
// lead into a denied folder there), so it is refused. The resolution itself opens.
TEST_CASE("a symlink on the way is refused even when it stays beneath the root", "[io][host]") {
  temp_tree t;
  fs::create_directories(t / "real/deep");
  put(t / "real/deep/f.txt", "inside");
  fs::create_symlink("real/deep/f.txt", t / "link");
  fs::create_directory_symlink("..", t / "real/deep/up");  // goes up, still beneath
  for (const std::string& p : {t / "link", t / "real/deep/up/deep/f.txt"}) {
    INFO(p);
    auto r = io::fs_read(t.str(), p, "utf8", 100);
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::refused);
    CHECK_THAT(r.err().message, Catch::Contains("has a symlink on its path"));
    auto w = io::fs_write(t.str(), p, "over", 100);
    REQUIRE_FALSE(w);
    CHECK(w.err().code == errc::refused);
  }
  auto listed = io::fs_list(t.str(), t / "real/deep/up");
  REQUIRE_FALSE(listed);
  CHECK(listed.err().code == errc::refused);
  CHECK(get(t / "real/deep/f.txt") == "inside");
  auto r = io::fs_read(t.str(), t / "real/deep/f.txt", "utf8", 100);
  REQUIRE(r);
  CHECK((*r)["content"] == "inside");
}

// The root is a resolution too: a symlink in its own path (a folder of it replaced by a link
// since the rules were read) is refused, rather than followed to wherever it leads.
TEST_CASE("an allowed root with a symlink on its path is refused", "[io][host]") {
  temp_tree t, elsewhere;
  fs::create_directories(t / "proj");
  put(t / "proj/a.txt", "project");
  put(elsewhere / "a.txt", "elsewhere");
  CHECK(io::fs_read(t / "proj", t / "proj/a.txt", "utf8", 100));
  // The project folder is moved away and a link to another folder takes its place.
  fs::rename(t / "proj", t / "proj.moved");
  fs::create_directory_symlink(elsewhere.root, t / "proj");
  auto r = io::fs_read(t / "proj", t / "proj/a.txt", "utf8", 100);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::refused);
  CHECK_THAT(r.err().message, Catch::Contains("the allowed folder '" + (t / "proj") + "' has a symlink on its path"));
  auto w = io::fs_write(t / "proj", t / "proj/a.txt", "pwned", 100);
  REQUIRE_FALSE(w);
  CHECK(get(elsewhere / "a.txt") == "elsewhere");
  auto l = io::fs_list(t / "proj", t / "proj");
  REQUIRE_FALSE(l);
  // A link further up the root's path is met as well.
  fs::create_directory_symlink(t.root, elsewhere / "up");
  auto up = io::fs_read(elsewhere / "up/proj.moved", elsewhere / "up/proj.moved/a.txt", "utf8", 100);
  REQUIRE_FALSE(up);
  CHECK(up.err().code == errc::refused);
}

// allowedPaths may name a single file or a glob: the operation opens beneath the file's own
// folder (the path is the file itself) or the glob's literal folder, links refused as ever.
TEST_CASE("single-file and glob allowed entries can be opened, and only along their path", "[io][host]") {
  temp_tree t, elsewhere;
  fs::create_directories(t / "docs/guide");
  put(t / "notes.txt", "notes\n");
  put(t / "docs/guide/a.md", "guide\n");
  put(elsewhere / "x.txt", "elsewhere\n");
  auto file = io::fs_read(t / "notes.txt", t / "notes.txt", "utf8", 100);
  REQUIRE(file);
  CHECK((*file)["content"] == "notes\n");
  auto created = io::fs_write(t / "new.log", t / "new.log", "made", 100);  // a file entry not there yet
  REQUIRE(created);
  CHECK(get(t / "new.log") == "made");
  auto glob = io::fs_read(t / "docs/**/*.md", t / "docs/guide/a.md", "utf8", 100);
  REQUIRE(glob);
  CHECK((*glob)["content"] == "guide\n");
  auto listed = io::fs_list(t / "do[c]s", t / "docs/guide");  // the literal folder is t itself
  REQUIRE(listed);
  CHECK((*listed)["entries"].size() == 1);
  // With the denied identities too, the file's folder and the file itself are looked at.
  const std::vector<policy::file_id> none_here = {{0, 1}};
  CHECK(io::fs_read(t / "notes.txt", t / "notes.txt", "utf8", 100, none_here));
  struct stat st {};
  REQUIRE(::stat((t / "notes.txt").c_str(), &st) == 0);
  const std::vector<policy::file_id> notes_denied = {{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)}};
  auto denied = io::fs_read(t / "notes.txt", t / "notes.txt", "utf8", 100, notes_denied);
  REQUIRE_FALSE(denied);
  CHECK_THAT(denied.err().message, Catch::Contains("is itself an entry the rules deny"));

  // Nothing but the file itself: not a path beneath it, not its folder, not its neighbour.
  for (const std::string& p : {t / "notes.txt/x", t.str(), t / "docs/guide/a.md"}) {
    INFO(p);
    CHECK_FALSE(io::fs_read(t / "notes.txt", p, "utf8", 100));
  }
  CHECK_FALSE(io::fs_list(t / "notes.txt", t / "notes.txt"));  // a list wants a folder
  // A glob's path must lie under its literal folder.
  CHECK_FALSE(io::fs_read(t / "docs/**/*.md", t / "notes.txt", "utf8", 100));
  // Beneath a glob's literal folder, the walk up by identity starts at the file's own folder
  // and passes every folder between: a denied folder there refuses it.
  REQUIRE(::stat((t / "docs").c_str(), &st) == 0);
  const std::vector<policy::file_id> docs_denied = {{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)}};
  auto walked = io::fs_read(t / "*/**/*.md", t / "docs/guide/a.md", "utf8", 100, docs_denied);
  REQUIRE_FALSE(walked);
  CHECK_THAT(walked.err().message, Catch::Contains("lies in a folder the rules deny"));

  // The file swapped for a link after the check: refused, the link's target untouched.
  fs::remove(t / "notes.txt");
  fs::create_symlink(elsewhere / "x.txt", t / "notes.txt");
  auto linked = io::fs_read(t / "notes.txt", t / "notes.txt", "utf8", 100);
  REQUIRE_FALSE(linked);
  CHECK(linked.err().code == errc::refused);
  CHECK_FALSE(io::fs_write(t / "notes.txt", t / "notes.txt", "pwned", 100));
  CHECK(get(elsewhere / "x.txt") == "elsewhere\n");
  // A link swapped in on the glob's path as well.
  fs::rename(t / "docs/guide", t / "docs/guide.moved");
  fs::create_directory_symlink(elsewhere.root, t / "docs/guide");
  put(elsewhere / "a.md", "not the guide\n");
  CHECK_FALSE(io::fs_read(t / "docs/**/*.md", t / "docs/guide/a.md", "utf8", 100));
}

TEST_CASE("magic links under /proc are refused", "[io][host]") {
  // /proc/self/root and /proc/self/fd/N are lexically under /proc/self but jump to objects.
  auto root_link = io::fs_read("/proc/self", "/proc/self/root/etc/passwd", "utf8", 1 << 20);
  REQUIRE_FALSE(root_link);
  CHECK(root_link.err().code == errc::refused);

  temp_tree outside;
  put(outside / "secret", "top secret");
  int fd = ::open((outside / "secret").c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  auto fd_link = io::fs_read("/proc/self/fd", "/proc/self/fd/" + std::to_string(fd), "utf8", 1 << 20);
  ::close(fd);
  REQUIRE_FALSE(fd_link);
  CHECK(fd_link.err().code == errc::refused);

  // And an absolute symlink to a magic link, from an ordinary root.
  temp_tree t;
  fs::create_directory_symlink("/proc/self/root", t / "sysroot");
  auto via = io::fs_read(t.str(), t / "sysroot/etc/passwd", "utf8", 1 << 20);
  REQUIRE_FALSE(via);
  CHECK(via.err().code == errc::refused);
}

TEST_CASE("fs_read: utf8 refuses binary content, base64 carries it", "[io][host]") {
  temp_tree t;
  const std::string binary("\x00\xFF\xFE\x80 ok", 7);
  put(t / "bin", binary);
  auto as_text = io::fs_read(t.str(), t / "bin", "utf8", 100);
  REQUIRE_FALSE(as_text);
  CHECK(as_text.err().code == errc::invalid_value);
  CHECK_THAT(as_text.err().message, Catch::Contains("base64"));
  auto as_b64 = io::fs_read(t.str(), t / "bin", "base64", 100);
  REQUIRE(as_b64);
  CHECK((*as_b64)["size"] == 7);
  CHECK(*io::decode_base64((*as_b64)["content"].get<std::string>()) == binary);
  auto unknown = io::fs_read(t.str(), t / "bin", "latin1", 100);
  REQUIRE_FALSE(unknown);
  CHECK(unknown.err().code == errc::invalid_value);
}

TEST_CASE("fs_read: size limit, missing files, directories and FIFOs", "[io][host]") {
  temp_tree t;
  put(t / "ten", "0123456789");
  CHECK(io::fs_read(t.str(), t / "ten", "utf8", 10));
  auto big = io::fs_read(t.str(), t / "ten", "utf8", 9);
  REQUIRE_FALSE(big);
  CHECK(big.err().code == errc::invalid_value);
  CHECK_THAT(big.err().message, Catch::Contains("limit"));

  auto missing = io::fs_read(t.str(), t / "nope", "utf8", 10);
  REQUIRE_FALSE(missing);
  CHECK(missing.err().code == errc::not_found);

  fs::create_directory(t / "dir");
  auto dir = io::fs_read(t.str(), t / "dir", "utf8", 10);
  REQUIRE_FALSE(dir);
  CHECK(dir.err().code == errc::invalid_value);

  // A FIFO without a writer would block a plain open forever.
  REQUIRE(::mkfifo((t / "fifo").c_str(), 0600) == 0);
  auto start = std::chrono::steady_clock::now();
  auto fifo = io::fs_read(t.str(), t / "fifo", "utf8", 10);
  REQUIRE_FALSE(fifo);
  CHECK(fifo.err().code == errc::invalid_value);
  CHECK(seconds_since(start) < 1.0);
}

TEST_CASE("fs_write creates and truncates files beneath the root", "[io][host]") {
  temp_tree t;
  auto created = io::fs_write(t.str(), t / "new.txt", "first version", 100);
  REQUIRE(created);
  CHECK((*created)["bytesWritten"] == 13);
  CHECK(get(t / "new.txt") == "first version");
  struct stat st {};
  REQUIRE(::stat((t / "new.txt").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777 & ~0644) == 0);  // 0644 minus the umask, never more

  auto shorter = io::fs_write(t.str(), t / "new.txt", "v2", 100);
  REQUIRE(shorter);
  CHECK(get(t / "new.txt") == "v2");

  auto too_big = io::fs_write(t.str(), t / "new.txt", "0123456789", 9);
  REQUIRE_FALSE(too_big);
  CHECK(too_big.err().code == errc::invalid_value);
  CHECK(get(t / "new.txt") == "v2");  // refused before anything was opened

  auto no_dir = io::fs_write(t.str(), t / "missing/dir/f", "x", 100);
  REQUIRE_FALSE(no_dir);
  CHECK(no_dir.err().code == errc::not_found);
}

TEST_CASE("fs_write through a symlink pointing outside is refused and the target unchanged", "[io][host]") {
  temp_tree t;
  temp_tree outside;
  put(outside / "victim", "original");
  fs::create_symlink(outside / "victim", t / "abs_link");
  fs::create_symlink(fs::relative(outside.root / "victim", t.root), t / "rel_link");
  fs::create_symlink(fs::relative(outside.root / "created", t.root), t / "dangling");
  fs::create_directory_symlink(outside.root, t / "outdir");
  for (const std::string& p : {t / "abs_link", t / "rel_link", t / "dangling", t / "outdir/victim", t / "outdir/new"}) {
    INFO(p);
    auto r = io::fs_write(t.str(), p, "PWNED", 100);
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::refused);
  }
  CHECK(get(outside / "victim") == "original");
  CHECK_FALSE(fs::exists(outside / "created"));
  CHECK_FALSE(fs::exists(outside / "new"));
}

TEST_CASE("fs_write refuses FIFOs without blocking", "[io][host]") {
  temp_tree t;
  REQUIRE(::mkfifo((t / "fifo").c_str(), 0600) == 0);
  auto start = std::chrono::steady_clock::now();
  auto r = io::fs_write(t.str(), t / "fifo", "x", 10);
  REQUIRE_FALSE(r);
  CHECK(seconds_since(start) < 1.0);
}

TEST_CASE("fs_list reports types and sizes sorted by name", "[io][host]") {
  temp_tree t;
  put(t / "b.txt", "12345");
  fs::create_directory(t / "a_dir");
  fs::create_symlink("/etc/passwd", t / "c_link");
  REQUIRE(::mkfifo((t / "d_fifo").c_str(), 0600) == 0);
  auto r = io::fs_list(t.str(), t.str());
  REQUIRE(r);
  const json& e = (*r)["entries"];
  REQUIRE(e.size() == 4);
  CHECK(e[0]["name"] == "a_dir");
  CHECK(e[0]["type"] == "dir");
  CHECK(e[1]["name"] == "b.txt");
  CHECK(e[1]["type"] == "file");
  CHECK(e[1]["size"] == 5);
  CHECK(e[2]["name"] == "c_link");
  CHECK(e[2]["type"] == "symlink");
  CHECK(e[2]["size"] == std::string("/etc/passwd").size());  // the link itself, not followed
  CHECK(e[3]["name"] == "d_fifo");
  CHECK(e[3]["type"] == "other");
  CHECK((*r)["truncated"] == false);
}

TEST_CASE("fs_list caps the entries and keeps the first names", "[io][host]") {
  temp_tree t;
  for (const char* n : {"e", "b", "d", "a", "c"}) put(t / n, "");
  auto r = io::fs_list(t.str(), t.str(), 2);
  REQUIRE(r);
  const json& e = (*r)["entries"];
  REQUIRE(e.size() == 2);
  CHECK(e[0]["name"] == "a");
  CHECK(e[1]["name"] == "b");
  CHECK((*r)["truncated"] == true);
}

TEST_CASE("fs_list refuses directories reached through links out of the root", "[io][host]") {
  temp_tree t;
  fs::create_directory_symlink("/etc", t / "etc");
  auto r = io::fs_list(t.str(), t / "etc");
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::refused);
  put(t / "file", "x");
  auto not_dir = io::fs_list(t.str(), t / "file");
  REQUIRE_FALSE(not_dir);
  CHECK(not_dir.err().code == errc::not_found);
}

TEST_CASE("fs_list marks names that are not UTF-8", "[io][host]") {
  temp_tree t;
  put(t / "caf\xE9", "");
  auto r = io::fs_list(t.str(), t.str());
  REQUIRE(r);
  const json& e = (*r)["entries"][0];
  CHECK(e["name"] == "caf\xEF\xBF\xBD");
  CHECK(*io::decode_base64(e["nameBase64"].get<std::string>()) == "caf\xE9");
  CHECK_NOTHROW((*r).dump());
}

TEST_CASE("env_get returns a value or null", "[io][host]") {
  ::setenv("DHARA_HOST_OPS_TEST", "some value", 1);
  ::unsetenv("DHARA_HOST_OPS_TEST_UNSET");
  auto set = io::env_get("DHARA_HOST_OPS_TEST");
  REQUIRE(set);
  CHECK((*set)["value"] == "some value");
  auto unset = io::env_get("DHARA_HOST_OPS_TEST_UNSET");
  REQUIRE(unset);
  CHECK((*unset)["value"].is_null());
  CHECK_FALSE(io::env_get(""));
  CHECK_FALSE(io::env_get("A=B"));
}

// ---------------------------------------------------------------------------------------
// Network

TEST_CASE("address vetting after resolution", "[io][host]") {
  auto ip = [](const char* s) { return *policy::parse_ip_literal(s); };
  SECTION("a name resolving to a refused address is refused unless listed by name") {
    auto r = io::vet_addresses("internal.example", {ip("93.184.216.34"), ip("127.0.0.1")}, no_list());
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::refused);
    CHECK_THAT(r.err().message, Catch::Contains("127.0.0.1"));
    CHECK(io::vet_addresses("internal.example", {ip("10.1.2.3")}, rules_of({"internal.example"})));
    CHECK(io::vet_addresses("a.corp.example", {ip("192.168.1.1")}, rules_of({"*.corp.example"})));
    CHECK_FALSE(io::vet_addresses("corp.example", {ip("192.168.1.1")}, rules_of({"*.corp.example"})));
    CHECK_FALSE(io::vet_addresses("x.example", {ip("::ffff:10.0.0.1")}, no_list()));
    CHECK_FALSE(io::vet_addresses("x.example", {ip("fe80::1")}, no_list()));
  }
  SECTION("an address of this machine's own interfaces is refused unless listed, whatever its range") {
    // A fetch of the machine's eth0 address reached a service listening on all addresses, as
    // 127.0.0.1 would have (a review). Found here with getifaddrs, as dhara does.
    std::vector<std::string> own;
    ifaddrs* all = nullptr;
    REQUIRE(::getifaddrs(&all) == 0);
    for (const ifaddrs* i = all; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
      char text[INET_ADDRSTRLEN];
      ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
      if (!policy::is_refused_address(ip(text))) own.emplace_back(text);  // not already refused by range
    }
    ::freeifaddrs(all);
    if (own.empty()) {
      WARN("skipped: this machine has no IPv4 interface address outside the refused ranges");
      return;
    }
    auto r = io::vet_addresses(own.front(), {ip(own.front().c_str())}, no_list());
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::refused);
    CHECK_THAT(r.err().message, Catch::Contains("this machine's own"));
    auto named = io::vet_addresses("app.example", {ip("93.184.216.34"), ip(own.front().c_str())}, no_list());
    REQUIRE_FALSE(named);
    CHECK_THAT(named.err().message, Catch::Contains("this machine's own address"));
    CHECK(io::vet_addresses(own.front(), {ip(own.front().c_str())}, rules_of({own.front()})));  // listed literally
    CHECK(io::vet_addresses("app.example", {ip(own.front().c_str())}, rules_of({"app.example"})));  // by name
  }
  SECTION("public addresses pass, an empty answer does not") {
    auto r = io::vet_addresses("public.example", {ip("93.184.216.34"), ip("2606:2800:220:1::1")}, no_list());
    REQUIRE(r);
    CHECK(r->size() == 2);
    CHECK_FALSE(io::vet_addresses("public.example", {}, no_list()));
  }
  SECTION("IP literals must be listed literally") {
    CHECK_FALSE(io::vet_addresses("127.0.0.1", {ip("127.0.0.1")}, no_list()));
    CHECK(io::vet_addresses("127.0.0.1", {ip("127.0.0.1")}, rules_of({"127.0.0.1"})));
    CHECK(io::vet_addresses("0x7f000001", {ip("127.0.0.1")}, rules_of({"127.0.0.1"})));
  }
}

TEST_CASE("net_fetch against a loopback HTTP server", "[io][host]") {
  temp_tree site;
  put(site / "hello.txt", "hello from the server\n");
  put(site / "big.bin", std::string(100000, 'x'));
  fs::create_directory(site / "sub");
  put(site / "sub/index.html", "sub index");
  http_server server(site.str(), free_loopback_port());
  const std::string port = std::to_string(server.port);
  const io::fetch_limits limits{1 << 20, 10000};

  SECTION("a literally listed 127.0.0.1 is fetched, headers lower-cased") {
    auto r = io::net_fetch(server.url("/hello.txt"), "GET", json(), "", rules_of({"127.0.0.1"}), limits);
    REQUIRE(r);
    CHECK((*r)["status"] == 200);
    CHECK((*r)["body"] == "hello from the server\n");
    CHECK((*r)["truncated"] == false);
    const json& h = (*r)["headers"];
    CHECK(h.contains("content-type"));  // python sends "Content-type"
    CHECK(h["content-length"] == "22");
    for (const auto& [name, value] : h.items()) {
      std::string lowered = name;
      for (char& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      CHECK(name == lowered);
      CHECK(value.is_string());
    }
  }
  SECTION("unlisted 127.0.0.1 is refused as loopback") {
    auto r = io::net_fetch(server.url("/hello.txt"), "GET", json(), "", no_list(), limits);
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::refused);
    CHECK_THAT(r.err().message, Catch::Contains("loopback"));
    auto hex = io::net_fetch("http://0x7f000001:" + port + "/hello.txt", "GET", json(), "", no_list(), limits);
    REQUIRE_FALSE(hex);
    CHECK(hex.err().code == errc::refused);
  }
  SECTION("another spelling of a listed address reaches the same server") {
    auto r = io::net_fetch("http://2130706433:" + port + "/hello.txt", "GET", json(), "", rules_of({"127.0.0.1"}), limits);
    REQUIRE(r);
    CHECK((*r)["status"] == 200);
  }
  SECTION("localhost is refused unless listed by name") {
    auto refused = io::net_fetch("http://localhost:" + port + "/hello.txt", "GET", json(), "", no_list(), limits);
    REQUIRE_FALSE(refused);
    CHECK(refused.err().code == errc::refused);
    auto listed_ip = io::net_fetch("http://localhost:" + port + "/hello.txt", "GET", json(), "",
                                   rules_of({"127.0.0.1", "*.localhost"}), limits);
    REQUIRE_FALSE(listed_ip);  // listing the address does not list the name
    auto allowed = io::net_fetch("http://localhost:" + port + "/hello.txt", "GET", json(), "", rules_of({"localhost"}), limits);
    REQUIRE(allowed);
    CHECK((*allowed)["status"] == 200);
    CHECK((*allowed)["body"] == "hello from the server\n");
  }
  SECTION("a plain name resolving to loopback is refused after resolution") {
    std::string alias = loopback_alias();
    if (alias.empty()) {
      WARN("no non-localhost loopback name in /etc/hosts; resolution tested through vet_addresses only");
      return;
    }
    auto refused = io::net_fetch("http://" + alias + ":" + port + "/hello.txt", "GET", json(), "", no_list(), limits);
    REQUIRE_FALSE(refused);
    CHECK(refused.err().code == errc::refused);
    CHECK_THAT(refused.err().message, Catch::Contains("resolves to 127."));
    auto allowed = io::net_fetch("http://" + alias + ":" + port + "/hello.txt", "GET", json(), "", rules_of({alias}), limits);
    REQUIRE(allowed);
    CHECK((*allowed)["status"] == 200);
  }
  SECTION("an unresolvable name is refused") {
    auto r = io::net_fetch("http://no-such-host.invalid:" + port + "/", "GET", json(), "", no_list(), limits);
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::refused);
  }
  SECTION("a body over the limit is truncated") {
    auto r = io::net_fetch(server.url("/big.bin"), "GET", json(), "", rules_of({"127.0.0.1"}), io::fetch_limits{1000, 10000});
    REQUIRE(r);
    CHECK((*r)["status"] == 200);
    CHECK((*r)["truncated"] == true);
    CHECK((*r)["body"].get<std::string>() == std::string(1000, 'x'));
  }
  SECTION("a redirect is returned, not followed") {
    auto r = io::net_fetch(server.url("/sub"), "GET", json(), "", rules_of({"127.0.0.1"}), limits);
    REQUIRE(r);
    CHECK((*r)["status"] == 301);
    CHECK((*r)["headers"]["location"] == "/sub/");
    CHECK((*r)["body"] != "sub index");
  }
  SECTION("methods, headers and bodies are passed through; injection is refused") {
    auto post = io::net_fetch(server.url("/hello.txt"), "POST", json{{"X-Test", "1"}}, "payload", rules_of({"127.0.0.1"}), limits);
    REQUIRE(post);
    CHECK((*post)["status"] == 501);  // http.server has no POST
    auto empty_post = io::net_fetch(server.url("/hello.txt"), "POST", json(), "", rules_of({"127.0.0.1"}), limits);
    REQUIRE(empty_post);
    CHECK((*empty_post)["status"] == 501);
    auto head = io::net_fetch(server.url("/hello.txt"), "HEAD", json(), "", rules_of({"127.0.0.1"}), limits);
    REQUIRE(head);
    CHECK((*head)["status"] == 200);
    CHECK((*head)["body"] == "");
    auto crlf = io::net_fetch(server.url("/"), "GET", json{{"X-A", "b\r\nX-Evil: 1"}}, "", rules_of({"127.0.0.1"}), limits);
    REQUIRE_FALSE(crlf);
    CHECK(crlf.err().code == errc::invalid_value);
    auto bad_name = io::net_fetch(server.url("/"), "GET", json{{"X A", "b"}}, "", rules_of({"127.0.0.1"}), limits);
    REQUIRE_FALSE(bad_name);
    auto bad_method = io::net_fetch(server.url("/"), "GE T", json(), "", rules_of({"127.0.0.1"}), limits);
    REQUIRE_FALSE(bad_method);
    auto not_string = io::net_fetch(server.url("/"), "GET", json{{"X-A", 1}}, "", rules_of({"127.0.0.1"}), limits);
    REQUIRE_FALSE(not_string);
    CHECK(not_string.err().code == errc::invalid_type);
  }
  SECTION("the Host and the framing headers are dhara's to set") {
    // A Host of the extension's choosing reached another site on the listed address (a review).
    for (const char* name : {"Host", "host", "Connection", "Transfer-Encoding", "Content-Length", "Upgrade", "TE",
                             "Trailer", "Proxy-Authorization"}) {
      INFO(name);
      auto r = io::net_fetch(server.url("/hello.txt"), "GET", json{{name, "169.254.169.254"}}, "", rules_of({"127.0.0.1"}), limits);
      REQUIRE_FALSE(r);
      CHECK(r.err().code == errc::invalid_value);
      CHECK_THAT(r.err().message, Catch::Contains("is dhara's to set"));
    }
    auto fine = io::net_fetch(server.url("/hello.txt"), "GET", json{{"Accept", "text/plain"}, {"X-Hostname", "a"}}, "",
                              rules_of({"127.0.0.1"}), limits);
    REQUIRE(fine);
    CHECK((*fine)["status"] == 200);
  }
  SECTION("other schemes and a domain list that does not match are refused") {
    CHECK_FALSE(io::net_fetch("file:///etc/passwd", "GET", json(), "", no_list(), limits));
    CHECK_FALSE(io::net_fetch("ftp://127.0.0.1:" + port + "/", "GET", json(), "", rules_of({"127.0.0.1"}), limits));
    CHECK_FALSE(io::net_fetch(server.url("/hello.txt"), "GET", json(), "", rules_of({"example.com"}), limits));
    CHECK_FALSE(io::net_fetch(server.url("/hello.txt"), "GET", json(), "", rules_of({}), limits));
  }
}

// ---------------------------------------------------------------------------------------
// Processes

TEST_CASE("an extension's spawns end when its profile changes, one planned before and started after too",
          "[io][host]") {
  // A spawn kept the profile it started in (a revoked filesystem:write kept writing up to
  // 24 h: a review); one planned under the old profile and started after the change runs the
  // old launcher, so it is ended as it starts.
  const io::spawn_owner planned{"ext-a", io::spawn_profile("ext-a")};
  std::thread running([] {
    auto r = io::process_spawn({"/bin/sleep", "30"}, "", 60000, 1 << 16, plain_env, {"ext-a", io::spawn_profile("ext-a")});
    REQUIRE(r);
    CHECK((*r)["signal"] == "SIGKILL");
  });
  const auto started = std::chrono::steady_clock::now();
  std::size_t ended = 0;
  while (ended == 0 && std::chrono::steady_clock::now() - started < std::chrono::seconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ended = io::end_spawns_of("ext-a");  // none until the sleep has started
  }
  running.join();
  CHECK(ended == 1);
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(25));
  auto late = io::process_spawn({"/bin/echo", "late"}, "", 5000, 1 << 16, plain_env, planned);
  REQUIRE(late);
  CHECK((*late)["signal"] == "SIGKILL");
  auto other = io::process_spawn({"/bin/echo", "other"}, "", 5000, 1 << 16, plain_env, {"ext-b", io::spawn_profile("ext-b")});
  REQUIRE(other);
  CHECK((*other)["stdout"] == "other\n");  // another extension's profile did not change
  auto now = io::process_spawn({"/bin/echo", "now"}, "", 5000, 1 << 16, plain_env, {"ext-a", io::spawn_profile("ext-a")});
  REQUIRE(now);
  CHECK((*now)["stdout"] == "now\n");
}

TEST_CASE("process_spawn runs argv without a shell", "[io][host]") {
  auto r = io::process_spawn({"/bin/echo", "hi"}, "", 5000, 1 << 16, plain_env);
  REQUIRE(r);
  CHECK((*r)["exitCode"] == 0);
  CHECK((*r)["signal"].is_null());
  CHECK((*r)["stdout"] == "hi\n");
  CHECK((*r)["stderr"] == "");
  CHECK((*r)["truncated"] == false);
  CHECK((*r)["timedOut"] == false);

  // Shell metacharacters are plain arguments.
  auto meta = io::process_spawn({"/bin/echo", "$HOME; rm -rf /"}, "", 5000, 1 << 16, plain_env);
  REQUIRE(meta);
  CHECK((*meta)["stdout"] == "$HOME; rm -rf /\n");
}

TEST_CASE("process_spawn reports exit codes, signals, stderr, cwd and env", "[io][host]") {
  auto code = io::process_spawn({"/bin/sh", "-c", "echo oops >&2; exit 3"}, "", 5000, 1 << 16, plain_env);
  REQUIRE(code);
  CHECK((*code)["exitCode"] == 3);
  CHECK((*code)["stderr"] == "oops\n");
  auto sig = io::process_spawn({"/bin/sh", "-c", "kill -TERM $$"}, "", 5000, 1 << 16, plain_env);
  REQUIRE(sig);
  CHECK((*sig)["exitCode"].is_null());
  CHECK((*sig)["signal"] == "SIGTERM");

  temp_tree t;
  auto pwd = io::process_spawn({"/bin/pwd"}, t.str(), 5000, 1 << 16, plain_env);
  REQUIRE(pwd);
  CHECK((*pwd)["stdout"] == t.str() + "\n");

  ::setenv("DHARA_SHOULD_NOT_LEAK", "1", 1);
  auto env = io::process_spawn({"/usr/bin/env"}, "", 5000, 1 << 16, {"ONLY=this"});
  REQUIRE(env);
  CHECK((*env)["stdout"] == "ONLY=this\n");

  auto cat = io::process_spawn({"/bin/cat"}, "", 5000, 1 << 16, plain_env);  // stdin is /dev/null
  REQUIRE(cat);
  CHECK((*cat)["exitCode"] == 0);
  CHECK((*cat)["timedOut"] == false);
}

TEST_CASE("process_spawn refuses bad argv and reports missing programs", "[io][host]") {
  CHECK(io::process_spawn({}, "", 1000, 100, plain_env).err().code == errc::invalid_value);
  CHECK(io::process_spawn({"echo", "hi"}, "", 1000, 100, plain_env).err().code == errc::invalid_value);
  CHECK(io::process_spawn({"/bin/echo"}, "relative", 1000, 100, plain_env).err().code == errc::invalid_value);
  CHECK(io::process_spawn({"/bin/echo"}, "", 1000, 100, {"NOEQUALS"}).err().code == errc::invalid_value);
  CHECK(io::process_spawn({"/bin/echo"}, "", 0, 100, plain_env).err().code == errc::invalid_value);
  CHECK(io::process_spawn({"/no/such/program"}, "", 1000, 100, plain_env).err().code == errc::not_found);
}

TEST_CASE("process_spawn kills the child when the timeout passes", "[io][host]") {
  auto start = std::chrono::steady_clock::now();
  auto r = io::process_spawn({"/bin/sleep", "5"}, "", 200, 1 << 16, plain_env);
  double took = seconds_since(start);
  REQUIRE(r);
  CHECK((*r)["signal"] == "SIGKILL");
  CHECK((*r)["exitCode"].is_null());
  CHECK((*r)["timedOut"] == true);
  CHECK(took >= 0.2);
  CHECK(took < 2.0);
}

TEST_CASE("process_spawn caps output and drains the rest", "[io][host]") {
  auto r = io::process_spawn({"/usr/bin/seq", "1", "100000"}, "", 10000, 1000, plain_env);
  REQUIRE(r);
  CHECK((*r)["exitCode"] == 0);  // ran to completion: the rest was read and dropped
  CHECK((*r)["truncated"] == true);
  CHECK((*r)["stdout"].get<std::string>().size() == 1000);
  CHECK((*r)["stdout"].get<std::string>().starts_with("1\n2\n3\n"));
}

TEST_CASE("process_spawn output that is not UTF-8 comes back as base64", "[io][host]") {
  auto r = io::process_spawn({"/usr/bin/printf", "\\377\\376"}, "", 5000, 100, plain_env);
  REQUIRE(r);
  CHECK((*r)["stdoutEncoding"] == "base64");
  CHECK(*io::decode_base64((*r)["stdout"].get<std::string>()) == "\xFF\xFE");
  CHECK_NOTHROW((*r).dump());
}

TEST_CASE("nothing the child started in its group survives the call", "[io][host]") {
  SECTION("a background grandchild holding the output open is killed at the timeout") {
    auto start = std::chrono::steady_clock::now();
    auto r = io::process_spawn({"/bin/sh", "-c", "/bin/sleep 30 & echo $!"}, "", 300, 1 << 16, plain_env);
    REQUIRE(r);
    CHECK(seconds_since(start) < 2.0);
    CHECK((*r)["timedOut"] == true);
    CHECK((*r)["exitCode"] == 0);  // the shell itself exited normally
    pid_t grandchild = std::stoi((*r)["stdout"].get<std::string>());
    REQUIRE(grandchild > 0);
    CHECK(is_dead(grandchild));
  }
  SECTION("a detached grandchild is killed when the call ends") {
    auto r = io::process_spawn({"/bin/sh", "-c", "/bin/sleep 30 >/dev/null 2>&1 & echo $!"}, "", 10000, 1 << 16, plain_env);
    REQUIRE(r);
    CHECK((*r)["timedOut"] == false);
    pid_t grandchild = std::stoi((*r)["stdout"].get<std::string>());
    REQUIRE(grandchild > 0);
    CHECK(is_dead(grandchild));
  }
}

TEST_CASE("process_spawn does not leak dhara's descriptors or terminal", "[io][host]") {
  int fd = ::open("/dev/null", O_RDONLY);  // deliberately without O_CLOEXEC
  REQUIRE(fd >= 0);
  REQUIRE(::dup2(fd, 100) == 100);
  ::close(fd);
  auto r = io::process_spawn({"/bin/ls", "/proc/self/fd"}, "", 5000, 1 << 16, plain_env);
  ::close(100);
  REQUIRE(r);
  std::istringstream lines((*r)["stdout"].get<std::string>());
  std::string line;
  while (std::getline(lines, line)) CHECK(line != "100");
  // A new session has no controlling terminal.
  auto tty = io::process_spawn({"/bin/sh", "-c", "exec 3</dev/tty"}, "", 5000, 1 << 16, plain_env);
  REQUIRE(tty);
  CHECK((*tty)["exitCode"] != 0);
}
