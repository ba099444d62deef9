// Tests for io/audit_log.hpp on real files: the hash chain (checked by an independent Python
// verifier), reopening, rotation, torn-line recovery, tampering found by verify_audit, disk
// full (RLIMIT_FSIZE in a forked child), unwritable places, fsync durability, two writers.
#include "io/audit_log.hpp"
#include "../support/temp_tree.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using dhara::io::audit_log;
using dhara::io::audit_log_options;
using dhara::io::verify_audit;
using dhara::policy::audit_action;
using dhara::policy::audit_durability;
using dhara::policy::audit_entry;
using dhara::policy::audit_lines;
using dhara::policy::decider;

namespace {

const std::string zeros(64, '0');

// A fresh folder, removed (permissions restored first) at scope exit.
struct temp_dir : dhara::testing::temp_tree {
  temp_dir() : temp_tree("dhara-audit-XXXXXX") {}
  std::string file(std::string_view name) const { return *this / name; }
};

// A typical entry; every few are denials with a reason, some carry characters to escape.
audit_entry make_entry(int i) {
  audit_entry e;
  e.timestamp_ms = 1778752800123 + i;
  e.extension = i % 3 == 0 ? "web-tools" : "fs-tools";
  e.capability = i % 3 == 0 ? "network:fetch" : "filesystem:read";
  e.action = i % 5 == 4 ? audit_action::denied : audit_action::allowed;
  if (i % 3 == 0) {
    e.details = {{"url", "https://api.example.com/data?page=" + std::to_string(i)}};
  } else {
    e.details = {{"path", "/home/user/projects/my-app/src/module_" + std::to_string(i) + "/index.ts"}};
  }
  if (e.action == audit_action::denied) e.reason = "path is under a denied entry: \"~/.ssh/\"";
  e.decided_by = decider::rule;
  e.tool = "read";
  e.tool_call_id = "call-" + std::to_string(i);
  e.session = "sess-7f3a";
  return e;
}

std::vector<audit_entry> make_entries(int first, int count) {
  std::vector<audit_entry> out;
  for (int i = 0; i < count; ++i) out.push_back(make_entry(first + i));
  return out;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_all(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  REQUIRE(out.good());
}

void append_raw(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << content;
  REQUIRE(out.good());
}

std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> out;
  std::istringstream in(read_all(path));
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

audit_log open_log(const temp_dir& dir, audit_log_options options = {}) {
  auto log = audit_log::open(dir.str(), options);
  if (!log) FAIL("open failed: " << log.err().message);
  return std::move(log).value();
}

std::uint64_t append_ok(audit_log& log, std::vector<audit_entry> entries) {
  auto r = log.append(entries);
  if (!r) FAIL("append failed: " << r.err().message);
  return *r;
}

std::string sha256_hex(std::string_view data) {
  unsigned char digest[32];
  unsigned int len = 0;
  REQUIRE(EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr) == 1);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : digest) {
    out += hex[c >> 4];
    out += hex[c & 0xF];
  }
  return out;
}

// An independent verifier: Python's json and hashlib recompute the chain from the files.
// Prints "OK <lines> <last seq> anchored|from-start" or "BAD <file> <line> <why>".
constexpr std::string_view python_verifier = R"PY(
import hashlib, json, os, re, sys
d = sys.argv[1]
rot = []
for n in os.listdir(d):
    m = re.fullmatch(r'audit\.([1-9][0-9]*)\.jsonl', n)
    if m:
        rot.append((int(m.group(1)), n))
files = [os.path.join(d, n) for _, n in sorted(rot, reverse=True)]
if os.path.exists(os.path.join(d, 'audit.jsonl')):
    files.append(os.path.join(d, 'audit.jsonl'))
prev = None
prev_seq = None
count = 0
anchored = False
def bad(f, i, why):
    print('BAD %s %d %s' % (os.path.basename(f), i, why))
    sys.exit(1)
for f in files:
    data = open(f, 'rb').read()
    if data and not data.endswith(b'\n'):
        bad(f, 0, 'no final newline')
    for i, line in enumerate(data.split(b'\n')[:-1], 1):
        try:
            obj = json.loads(line)
        except ValueError as e:
            bad(f, i, 'not json')
        keys = list(obj.keys())
        if keys[:4] != ['timestamp', 'extension', 'capability', 'action'] or keys[-2:] != ['seq', 'hash']:
            bad(f, i, 'key order %r' % keys)
        m = re.fullmatch(rb'\{.*,"hash":"([0-9a-f]{64})"\}', line, re.S)
        if not m or m.group(1).decode() != obj['hash'] or len(line) - len(line[:-75]) != 75:
            bad(f, i, 'suffix')
        seq = obj['seq']
        if prev is None:
            if seq == 1:
                prev = '0' * 64
            else:
                anchored = True
                prev, prev_seq = obj['hash'], seq
                count += 1
                continue
        elif seq != prev_seq + 1:
            bad(f, i, 'seq %d after %d' % (seq, prev_seq))
        h = hashlib.sha256(prev.encode('ascii') + line[:-75]).hexdigest()
        if h != obj['hash']:
            bad(f, i, 'hash')
        prev, prev_seq = h, seq
        count += 1
print('OK %d %s %s' % (count, prev_seq, 'anchored' if anchored else 'from-start'))
)PY";

// Runs the Python verifier on `dir` and returns its first output line.
std::string python_verify(const temp_dir& dir) {
  const std::string script = dir.file("verify.py.txt");  // not an audit.* name
  write_all(script, std::string(python_verifier));
  const std::string cmd = "python3 '" + script + "' '" + dir.str() + "' 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  ::pclose(p);
  fs::remove(script);
  if (const auto nl = out.find('\n'); nl != std::string::npos) out.resize(nl);
  return out;
}

std::string hash_field(const std::string& line) { return line.substr(line.size() - 66, 64); }

std::uint64_t seq_field(const std::string& line) {
  const auto at = line.rfind(",\"seq\":");
  return std::stoull(line.substr(at + 7));
}

}  // namespace

TEST_CASE("a new trail chains from 64 zeros, numbers entries and verifies independently", "[io][audit]") {
  temp_dir dir;
  audit_log log = open_log(dir);
  CHECK(log.last_seq() == 0);
  CHECK(log.last_hash() == zeros);
  CHECK(log.recovered().empty());

  std::vector<audit_entry> batch = make_entries(0, 5);
  auto r = log.append(batch);
  REQUIRE(r);
  CHECK(*r == 5);
  for (std::size_t i = 0; i < batch.size(); ++i) CHECK(batch[i].seq == i + 1);

  const auto lines = lines_of(log.path());
  REQUIRE(lines.size() == 5);
  // The first line: SHA-256 over 64 '0's and the line without its 75-byte suffix.
  const std::string body = lines[0].substr(0, lines[0].size() - 75);
  CHECK(lines[0].substr(body.size()) == ",\"hash\":\"" + hash_field(lines[0]) + "\"}");
  CHECK(hash_field(lines[0]) == sha256_hex(zeros + body));
  CHECK(hash_field(lines[1]) == sha256_hex(hash_field(lines[0]) + lines[1].substr(0, lines[1].size() - 75)));
  CHECK(log.last_hash() == hash_field(lines[4]));
  CHECK(seq_field(lines[4]) == 5);

  CHECK(python_verify(dir) == "OK 5 5 from-start");
  auto v = verify_audit(dir.str());
  REQUIRE(v);
  CHECK(v->ok);
  CHECK(v->lines == 5);
  CHECK(v->first_seq == 1);
  CHECK(v->last_seq == 5);
  CHECK_FALSE(v->anchored);
  CHECK(v->files == std::vector<std::string>{log.path()});

  struct stat st {};
  REQUIRE(::stat(log.path().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(::stat(dir.file("audit.lock").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
}

TEST_CASE("an empty batch writes nothing, a 1024-entry batch is numbered in order", "[io][audit]") {
  temp_dir dir;
  audit_log log = open_log(dir);
  std::vector<audit_entry> none;
  auto r = log.append(none);
  REQUIRE(r);
  CHECK(*r == 0);
  CHECK(fs::file_size(log.path()) == 0);

  std::vector<audit_entry> big = make_entries(0, 1024);
  CHECK(append_ok(log, big) == 1024);
  CHECK(lines_of(log.path()).size() == 1024);
  CHECK(python_verify(dir) == "OK 1024 1024 from-start");
}

TEST_CASE("lines serialized by the caller make the same trail as entries, batches in order", "[io][audit]") {
  temp_dir by_entries, by_lines;
  constexpr std::uint64_t max_bytes = 4096;  // rotations inside the batches too
  audit_log a = open_log(by_entries, {audit_durability::write, max_bytes, 20});
  audit_log b = open_log(by_lines, {audit_durability::write, max_bytes, 20});
  int next = 0;
  for (int size : {1, 30, 0, 5}) {
    std::vector<audit_entry> entries = make_entries(next, size);
    next += size;
    // The same entries as three appended batches (the first empty): the writer's pending list.
    std::vector<audit_lines> batches(3);
    for (std::size_t i = 0; i < entries.size(); ++i) batches[i % 2 == 0 ? 1 : 2].add(entries[i]);
    std::vector<audit_entry> ordered;
    for (std::size_t i = 0; i < entries.size(); i += 2) ordered.push_back(entries[i]);
    for (std::size_t i = 1; i < entries.size(); i += 2) ordered.push_back(entries[i]);
    auto r = b.append(std::span<const audit_lines>(batches));
    REQUIRE(r);
    CHECK(append_ok(a, ordered) == *r);
  }
  CHECK(a.last_seq() == 36);
  CHECK(b.last_hash() == a.last_hash());
  CHECK(fs::exists(by_lines.file("audit.1.jsonl")));  // it rotated
  for (const char* name : {"audit.jsonl", "audit.1.jsonl", "audit.2.jsonl", "audit.3.jsonl"}) {
    INFO(name);
    CHECK(read_all(by_lines.file(name)) == read_all(by_entries.file(name)));
  }
  CHECK(python_verify(by_lines).rfind("OK 36", 0) == 0);
}

TEST_CASE("reopening continues seq and hash", "[io][audit]") {
  temp_dir dir;
  std::string last_hash;
  {
    audit_log log = open_log(dir);
    append_ok(log, make_entries(0, 4));
    append_ok(log, make_entries(4, 3));
    last_hash = std::string(log.last_hash());
  }
  audit_log log = open_log(dir);
  CHECK(log.recovered().empty());
  CHECK(log.last_seq() == 7);
  CHECK(log.last_hash() == last_hash);
  CHECK(append_ok(log, make_entries(7, 2)) == 9);

  audit_log moved = std::move(log);  // the writer is handed to its actor by move
  CHECK(append_ok(moved, make_entries(9, 1)) == 10);
  CHECK(python_verify(dir) == "OK 10 10 from-start");
  auto v = verify_audit(dir.str());
  REQUIRE(v);
  CHECK(v->ok);
  CHECK(v->lines == 10);
}

TEST_CASE("escaped and invalid strings still make one valid line each", "[io][audit]") {
  temp_dir dir;
  audit_log log = open_log(dir);
  std::vector<audit_entry> batch = make_entries(0, 3);
  batch[0].details = {{"path", "/tmp/a\nb\"c\\d\r\te"}};
  batch[1].details = {{"path", std::string("/tmp/\xff\xfe\xc0\x80 bad utf8 \xe2\x80\xa8")}};
  batch[2].reason = std::string("nul \0 inside", 12);
  batch[2].action = audit_action::denied;
  append_ok(log, batch);
  CHECK(lines_of(log.path()).size() == 3);
  CHECK(python_verify(dir) == "OK 3 3 from-start");
  auto v = verify_audit(dir.str());
  REQUIRE(v);
  CHECK(v->ok);
}

TEST_CASE("rotation splits the trail across files and the chain continues", "[io][audit]") {
  temp_dir dir;
  constexpr std::uint64_t max_bytes = 4096;  // ~14 lines a file

  SECTION("keep bounds the rotated files; the oldest kept line anchors the chain") {
    audit_log log = open_log(dir, {audit_durability::write, max_bytes, 3});
    int next = 0;
    for (int size : {1, 7, 50, 100, 3, 1, 60, 2}) {  // 100 spans several files: split inside
      append_ok(log, make_entries(next, size));
      next += size;
    }
    CHECK(log.last_seq() == 224);
    CHECK(fs::exists(dir.file("audit.1.jsonl")));
    CHECK(fs::exists(dir.file("audit.2.jsonl")));
    CHECK(fs::exists(dir.file("audit.3.jsonl")));
    CHECK_FALSE(fs::exists(dir.file("audit.4.jsonl")));
    for (const char* name : {"audit.1.jsonl", "audit.2.jsonl", "audit.3.jsonl"}) {
      // Rotation happens before the line that would pass max_bytes, so a rotated file
      // exceeds it only by a lone line larger than the limit (none here).
      CHECK(fs::file_size(dir.file(name)) <= max_bytes);
      CHECK(fs::file_size(dir.file(name)) > max_bytes - 400);
    }
    struct stat st {};
    REQUIRE(::stat(log.path().c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);  // the new file after a rotation too
    // seq continues across the file boundary.
    CHECK(seq_field(lines_of(log.path()).front()) == seq_field(lines_of(dir.file("audit.1.jsonl")).back()) + 1);

    auto v = verify_audit(dir.str());
    REQUIRE(v);
    CHECK(v->ok);
    CHECK(v->anchored);
    CHECK(v->last_seq == 224);
    CHECK(v->first_seq == seq_field(lines_of(dir.file("audit.3.jsonl")).front()));
    REQUIRE(v->files.size() == 4);
    CHECK(v->files.front() == dir.file("audit.3.jsonl"));
    CHECK(v->files.back() == dir.file("audit.jsonl"));
    const std::string py = python_verify(dir);
    CHECK(py.starts_with("OK "));
    CHECK(py.ends_with(" 224 anchored"));
  }

  SECTION("with enough kept files the whole chain verifies from seq 1") {
    audit_log log = open_log(dir, {audit_durability::write, max_bytes, 1000});
    append_ok(log, make_entries(0, 100));
    append_ok(log, make_entries(100, 20));
    CHECK(fs::exists(dir.file("audit.8.jsonl")));
    CHECK(python_verify(dir) == "OK 120 120 from-start");
    auto v = verify_audit(dir.str());
    REQUIRE(v);
    CHECK(v->ok);
    CHECK_FALSE(v->anchored);
    CHECK(v->lines == 120);
  }

  SECTION("a line larger than max_bytes gets a file of its own") {
    audit_log log = open_log(dir, {audit_durability::write, max_bytes, 10});
    append_ok(log, make_entries(0, 3));
    std::vector<audit_entry> batch = make_entries(3, 3);
    batch[1].details = {{"path", "/" + std::string(6000, 'x')}};
    append_ok(log, batch);
    // audit.2: the first 4 lines; audit.1: the big line alone; audit.jsonl: the last one.
    CHECK(lines_of(dir.file("audit.2.jsonl")).size() == 4);
    CHECK(lines_of(dir.file("audit.1.jsonl")).size() == 1);
    CHECK(fs::file_size(dir.file("audit.1.jsonl")) > max_bytes);
    CHECK(lines_of(log.path()).size() == 1);
    CHECK(python_verify(dir) == "OK 6 6 from-start");
  }

  SECTION("a crash in the middle of a rotation loses nothing") {
    {
      audit_log log = open_log(dir, {audit_durability::write, max_bytes, 10});
      append_ok(log, make_entries(0, 40));
    }
    // As if dhara died right after renaming audit.jsonl to audit.1.jsonl (the older files
    // already shifted up), before creating the new audit.jsonl.
    std::vector<int> numbers;
    for (int n = 9; n >= 1; --n) {
      if (fs::exists(dir.file("audit." + std::to_string(n) + ".jsonl"))) numbers.push_back(n);
    }
    for (int n : numbers) {
      fs::rename(dir.file("audit." + std::to_string(n) + ".jsonl"), dir.file("audit." + std::to_string(n + 1) + ".jsonl"));
    }
    fs::rename(dir.file("audit.jsonl"), dir.file("audit.1.jsonl"));
    SECTION("audit.jsonl missing") {}
    SECTION("audit.jsonl created but empty") { write_all(dir.file("audit.jsonl"), ""); }
    audit_log log = open_log(dir, {audit_durability::write, max_bytes, 10});
    CHECK(log.last_seq() == 40);
    CHECK(log.last_hash() == hash_field(lines_of(dir.file("audit.1.jsonl")).back()));
    append_ok(log, make_entries(40, 30));
    CHECK(python_verify(dir) == "OK 70 70 from-start");
    auto v = verify_audit(dir.str());
    REQUIRE(v);
    CHECK(v->ok);
  }
}

TEST_CASE("a torn last line is cut away on open, with a note", "[io][audit]") {
  temp_dir dir;
  const std::string path = dir.file("audit.jsonl");
  const std::string torn = R"({"timestamp":"2026-05-14T10:00:00.123Z","extension":"web-)";

  SECTION("after complete lines") {
    { audit_log log = open_log(dir); append_ok(log, make_entries(0, 4)); }
    const std::string before = read_all(path);
    append_raw(path, torn);
    audit_log log = open_log(dir);
    CHECK(log.recovered().find("torn") != std::string::npos);
    CHECK(log.recovered().find(path) != std::string::npos);
    CHECK(log.recovered().find("web-") != std::string::npos);  // what was removed is shown
    CHECK(read_all(path) == before);
    CHECK(log.last_seq() == 4);
    CHECK(append_ok(log, make_entries(4, 2)) == 6);
    CHECK(python_verify(dir) == "OK 6 6 from-start");
  }

  SECTION("the only line of the trail") {
    write_all(path, torn);
    audit_log log = open_log(dir);
    CHECK_FALSE(log.recovered().empty());
    CHECK(fs::file_size(path) == 0);
    CHECK(log.last_seq() == 0);
    CHECK(log.last_hash() == zeros);
    append_ok(log, make_entries(0, 2));
    CHECK(python_verify(dir) == "OK 2 2 from-start");
  }

  SECTION("a whole line that lost only its newline gets it back, not cut") {
    // An editor or a copy dropped the final newline of a denial; it was deleted as torn,
    // with a note saying no decision was released on it (a review).
    { audit_log log = open_log(dir); append_ok(log, make_entries(0, 4)); }
    const std::string before = read_all(path);
    write_all(path, before.substr(0, before.size() - 1));
    audit_log log = open_log(dir);
    CHECK(log.recovered().find("seq 4") != std::string::npos);
    CHECK(log.recovered().find("newline was added") != std::string::npos);
    CHECK(read_all(path) == before);
    CHECK(log.last_seq() == 4);
    CHECK(append_ok(log, make_entries(4, 2)) == 6);
    CHECK(python_verify(dir) == "OK 6 6 from-start");
  }

  SECTION("a last line without its newline that does not chain is cut as torn") {
    { audit_log log = open_log(dir); append_ok(log, make_entries(0, 4)); }
    std::string text = read_all(path);
    text.pop_back();
    const std::size_t at = text.find("\"seq\":4");
    REQUIRE(at != std::string::npos);
    text.replace(at, 7, "\"seq\":5");  // a hash that is not this line's
    write_all(path, text);
    audit_log log = open_log(dir);
    CHECK(log.recovered().find("torn") != std::string::npos);
    CHECK(log.last_seq() == 3);
  }

  SECTION("a file that cannot continue the chain is refused before anything is cut") {
    std::string garbage(3000, 'x');
    garbage[1000] = '\n';
    write_all(path, garbage);
    auto refused = audit_log::open(dir.str(), {});
    REQUIRE_FALSE(refused);
    CHECK(refused.err().message.find("cannot continue the audit chain") != std::string::npos);
    CHECK(read_all(path) == garbage);
  }

  SECTION("verify reports a torn line it finds") {
    { audit_log log = open_log(dir); append_ok(log, make_entries(0, 3)); }
    append_raw(path, torn);
    auto v = verify_audit(dir.str());
    REQUIRE(v);
    CHECK_FALSE(v->ok);
    CHECK(v->first_bad_line == 4);
    CHECK(v->why.find("newline") != std::string::npos);
  }
}

TEST_CASE("open refuses a last line that cannot continue the chain, and changes nothing", "[io][audit]") {
  temp_dir dir;
  const std::string path = dir.file("audit.jsonl");
  { audit_log log = open_log(dir); append_ok(log, make_entries(0, 3)); }
  const std::string good = read_all(path);
  const std::string hex(64, 'a');
  const auto bad_last_line = GENERATE_COPY(
      std::string("not json at all\n"),
      std::string("\n"),
      R"({"timestamp":"x","seq":4,"hash":")" + std::string(64, 'A') + "\"}\n",  // uppercase hex
      R"({"timestamp":"x","seq":4,"hash":")" + std::string(63, 'a') + "\"}\n",  // short hash
      R"({"timestamp":"x","hash":")" + hex + "\"}\n",                           // no seq
      R"({"timestamp":"x","seq":-4,"hash":")" + hex + "\"}\n",
      R"({"timestamp":"x","seq":"4","hash":")" + hex + "\"}\n",
      R"({"timestamp":"x","seq":0,"hash":")" + hex + "\"}\n",
      R"({"timestamp":"x","seq":4,"seq":5,"hash":")" + hex + "\"}\n",
      R"({"timestamp":"x,"seq":4,"hash":")" + hex + "\"}\n",                    // broken JSON
      R"({"a":[[[[[[{"seq":4}]]]]]],"hash":")" + hex + "\"}\n");               // seq not top-level
  write_all(path, good + bad_last_line);
  auto log = audit_log::open(dir.str(), {});
  REQUIRE_FALSE(log);
  CHECK(log.err().message.find(path) != std::string::npos);
  CHECK(read_all(path) == good + bad_last_line);
}

TEST_CASE("verify names the file and line of the first break", "[io][audit]") {
  temp_dir dir;
  const std::string path = dir.file("audit.jsonl");
  { audit_log log = open_log(dir); append_ok(log, make_entries(0, 10)); }
  auto lines = lines_of(path);
  REQUIRE(lines.size() == 10);
  std::uint64_t bad_line = 0;
  std::string why_part;

  SECTION("a corrupted middle line") {
    lines[4] = "this is not json";
    bad_line = 5;
    why_part = "hash";  // the suffix check comes first
  }
  SECTION("a middle line that is JSON but not an object") {
    lines[4] = "[1,2,3" + lines[4].substr(lines[4].size() - 75);
    bad_line = 5;
    why_part = "not a JSON object";
  }
  SECTION("an edited field") {
    const auto at = lines[3].find("\"action\":\"allowed\"");
    REQUIRE(at != std::string::npos);
    lines[3].replace(at, 18, "\"action\":\"denied\"");
    bad_line = 4;
    why_part = "hash does not match";
  }
  SECTION("an edited hash") {
    lines[6][lines[6].size() - 10] = lines[6][lines[6].size() - 10] == '0' ? '1' : '0';
    bad_line = 7;
    why_part = "hash does not match";
  }
  SECTION("a deleted line") {
    lines.erase(lines.begin() + 5);
    bad_line = 6;
    why_part = "seq 7 follows seq 5";
  }
  SECTION("two swapped lines") {
    std::swap(lines[2], lines[3]);
    bad_line = 3;
    why_part = "seq 4 follows seq 2";
  }
  SECTION("a duplicated line") {
    lines.insert(lines.begin() + 8, lines[7]);
    bad_line = 9;
    why_part = "seq 8 follows seq 8";
  }
  SECTION("an empty line") {
    lines.insert(lines.begin() + 2, "");
    bad_line = 3;
    why_part = "empty";
  }
  write_all(path, join_lines(lines));
  auto v = verify_audit(dir.str());
  REQUIRE(v);
  CHECK_FALSE(v->ok);
  CHECK(v->first_bad_file == path);
  CHECK(v->first_bad_line == bad_line);
  CHECK(v->lines == bad_line - 1);
  INFO("why: " << v->why);
  CHECK(v->why.find(why_part) != std::string::npos);
  CHECK(python_verify(dir).starts_with("BAD audit.jsonl"));  // the independent check agrees
}

TEST_CASE("verify finds a break inside a rotated file", "[io][audit]") {
  temp_dir dir;
  { audit_log log = open_log(dir, {audit_durability::write, 4096, 10}); append_ok(log, make_entries(0, 60)); }
  const std::string rotated = dir.file("audit.2.jsonl");
  auto lines = lines_of(rotated);
  REQUIRE(lines.size() > 5);
  lines[2].insert(20, "x");
  write_all(rotated, join_lines(lines));
  auto v = verify_audit(dir.str());
  REQUIRE(v);
  CHECK_FALSE(v->ok);
  CHECK(v->first_bad_file == rotated);
  CHECK(v->first_bad_line == 3);
}

TEST_CASE("verify survives hostile files", "[io][audit]") {
  temp_dir dir;
  const std::string path = dir.file("audit.jsonl");

  SECTION("no trail at all is a valid empty trail") {
    auto v = verify_audit(dir.str());
    REQUIRE(v);
    CHECK(v->ok);
    CHECK(v->lines == 0);
  }
  SECTION("a missing folder is an error, not a verdict") {
    auto v = verify_audit(dir.file("nope"));
    REQUIRE_FALSE(v);
    CHECK(v.err().code == dhara::policy::errc::not_found);
  }
  SECTION("a line over 16 MiB") {
    { audit_log log = open_log(dir); append_ok(log, make_entries(0, 2)); }
    append_raw(path, std::string(17 * 1024 * 1024, 'a') + "\n");
    auto v = verify_audit(dir.str());
    REQUIRE(v);
    CHECK_FALSE(v->ok);
    CHECK(v->first_bad_line == 3);
    CHECK(v->why.find("longer") != std::string::npos);
    // The writer refuses to continue it too.
    CHECK_FALSE(audit_log::open(dir.str(), {}));
  }
  SECTION("deep nesting with a well-formed suffix") {
    append_raw(path, "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + ",\"hash\":\"" +
                         std::string(64, 'a') + "\"}\n");
    auto v = verify_audit(dir.str());
    REQUIRE(v);
    CHECK_FALSE(v->ok);
    CHECK(v->why.find("deeper") != std::string::npos);
  }
  SECTION("binary garbage") {
    std::string junk;
    for (int i = 0; i < 4096; ++i) junk += static_cast<char>((i * 131) & 0xff);
    write_all(path, junk + "\n");
    auto v = verify_audit(dir.str());
    REQUIRE(v);
    CHECK_FALSE(v->ok);
  }
  SECTION("a FIFO planted as a rotated file does not hang") {
    { audit_log log = open_log(dir); append_ok(log, make_entries(0, 2)); }
    REQUIRE(::mkfifo(dir.file("audit.2.jsonl").c_str(), 0600) == 0);
    auto v = verify_audit(dir.str());
    REQUIRE(v);
    CHECK_FALSE(v->ok);
    CHECK(v->first_bad_file == dir.file("audit.2.jsonl"));
    CHECK(v->why.find("regular") != std::string::npos);
  }
  SECTION("a symlink planted as audit.jsonl") {
    write_all(dir.file("elsewhere"), "");
    fs::create_symlink(dir.file("elsewhere"), path);
    auto v = verify_audit(dir.str());
    REQUIRE(v);
    CHECK_FALSE(v->ok);
    CHECK(v->why.find("symbolic link") != std::string::npos);
    CHECK_FALSE(audit_log::open(dir.str(), {}));  // the writer does not follow it either
  }
}

namespace {

// What the disk-full child checks, one bit each, so the parent can say which failed.
enum child_failure : int {
  child_open = 1,
  child_setrlimit = 2,
  child_append_succeeded = 4,
  child_error_text = 8,
  child_torn_left = 16,
  child_chain_moved = 32,
  child_retry_failed = 64,
};

// Runs `child` in a forked process (its limits and mounts stay its own); its exit status.
int run_child(const std::function<int()>& child) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(child());  // the test's own limits and mounts stay untouched
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

int disk_full_child(const std::string& dir, std::uint64_t room) {
  int failures = 0;
  ::signal(SIGXFSZ, SIG_IGN);  // what dhara does at start: EFBIG instead of death
  auto log = audit_log::open(dir, {});
  if (!log) return child_open;
  const std::string path = log->path();
  struct stat st {};
  ::stat(path.c_str(), &st);
  const auto size_before = static_cast<rlim_t>(st.st_size);
  const std::uint64_t seq_before = log->last_seq();
  rlimit lim{};
  ::getrlimit(RLIMIT_FSIZE, &lim);
  const rlimit original = lim;
  lim.rlim_cur = size_before + room;
  if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return child_setrlimit;

  std::vector<audit_entry> batch = make_entries(100, 20);  // ~6 KiB: a partial write at most
  auto r = log->append(batch);
  if (r) failures |= child_append_succeeded;
  if (!r && (r.err().message.find(path) == std::string::npos ||
             r.err().message.find("File too large") == std::string::npos)) {
    failures |= child_error_text;
  }
  ::stat(path.c_str(), &st);
  if (static_cast<rlim_t>(st.st_size) != size_before) failures |= child_torn_left;
  if (log->last_seq() != seq_before) failures |= child_chain_moved;

  if (::setrlimit(RLIMIT_FSIZE, &original) != 0) return failures | child_setrlimit;
  auto retry = log->append(batch);
  if (!retry || *retry != seq_before + 20) failures |= child_retry_failed;
  return failures;
}

}  // namespace

TEST_CASE("a full disk fails the append without a torn line, and the chain goes on", "[io][audit]") {
  temp_dir dir;
  { audit_log log = open_log(dir); append_ok(log, make_entries(0, 5)); }
  // room 1000: the kernel writes part of the batch, then refuses (partial write path);
  // room 0: the first write is refused outright.
  const std::uint64_t room = GENERATE(1000u, 0u);
  const int failures = run_child([&] { return disk_full_child(dir.str(), room); });
  CHECK((failures & child_open) == 0);
  CHECK((failures & child_setrlimit) == 0);
  CHECK((failures & child_append_succeeded) == 0);
  CHECK((failures & child_error_text) == 0);
  CHECK((failures & child_torn_left) == 0);
  CHECK((failures & child_chain_moved) == 0);
  CHECK((failures & child_retry_failed) == 0);

  audit_log log = open_log(dir);
  CHECK(log.recovered().empty());  // no torn line was left
  CHECK(log.last_seq() == 25);
  CHECK(python_verify(dir) == "OK 25 25 from-start");
  auto v = verify_audit(dir.str());
  REQUIRE(v);
  CHECK(v->ok);
}

TEST_CASE("an unwritable place is a clear error", "[io][audit]") {
  temp_dir dir;

  SECTION("a folder whose parent is a regular file") {
    write_all(dir.file("plain"), "x");
    const std::string target = dir.file("plain") + "/home";
    auto log = audit_log::open(target, {});
    REQUIRE_FALSE(log);
    CHECK(log.err().message.find(target) != std::string::npos);
    CHECK(log.err().message.find("Not a directory") != std::string::npos);
  }

  SECTION("a read-only folder") {
    if (::geteuid() == 0) {
      WARN("running as root: permission bits do not stop root's writes, so the read-only "
           "folder check is skipped (the regular-file parent check covers open failures)");
      return;
    }
    const std::string target = dir.file("ro");
    fs::create_directory(target);
    fs::permissions(target, fs::perms::owner_read | fs::perms::owner_exec);
    auto log = audit_log::open(target, {});
    fs::permissions(target, fs::perms::owner_all);
    REQUIRE_FALSE(log);
    CHECK(log.err().message.find("Permission denied") != std::string::npos);
  }

  SECTION("an old file that cannot be deleted refuses the next rotating batch, before any line") {
    audit_log log = open_log(dir, {audit_durability::write, 4096, 1});
    append_ok(log, make_entries(0, 5));
    // A non-empty folder named like the oldest rotated file cannot be deleted. Rotations
    // delete nothing until their batch is written, so the first batch still goes through
    // (the folder is shifted past keep, and stays) ...
    fs::create_directories(dir.file("audit.1.jsonl") + "/x");
    append_ok(log, make_entries(5, 10));  // one rotation
    CHECK(fs::is_directory(dir.file("audit.2.jsonl")));
    CHECK(log.last_seq() == 15);
    // ... and the next batch that rotates is refused before it writes a line.
    const std::string before = read_all(log.path());
    const std::string rotated = read_all(dir.file("audit.1.jsonl"));
    std::vector<audit_entry> more = make_entries(15, 30);
    auto r = log.append(more);
    REQUIRE_FALSE(r);
    CHECK(r.err().message.find("audit.2.jsonl") != std::string::npos);
    CHECK(read_all(log.path()) == before);
    CHECK(read_all(dir.file("audit.1.jsonl")) == rotated);
    CHECK(log.last_seq() == 15);

    fs::remove_all(dir.file("audit.2.jsonl"));
    std::vector<audit_entry> retry = make_entries(15, 30);
    CHECK(append_ok(log, retry) == 45);
    CHECK_FALSE(fs::exists(dir.file("audit.2.jsonl")));  // keep 1
    auto v = verify_audit(dir.str());
    REQUIRE(v);
    CHECK(v->ok);
    CHECK(v->anchored);
    CHECK(python_verify(dir).starts_with("OK "));
  }
}

namespace {

// What the children below check, one bit each, so the parent can say which failed.
enum undo_failure : int {
  undo_open = 1,
  undo_limit = 2,              // setrlimit or the tmpfs mount failed
  undo_append_succeeded = 4,
  undo_error_text = 8,
  undo_files_changed = 16,     // a file of the trail is not as before the batch
  undo_chain_moved = 32,
  undo_retry_failed = 64,
  undo_not_verified = 128,
  undo_skip = 255,             // no mount namespace here: the parent skips, saying why
};

// Every file of the trail in `dir`, by name, with its bytes.
std::map<std::string, std::string> trail_files(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("audit.") && name.ends_with(".jsonl")) out[name] = read_all(e.path().string());
  }
  return out;
}

// Appends `batch`, which must fail with `cause` in its message and leave every file of the
// trail as it was; then, with the limit lifted by `lift`, appends it again.
template <typename Lift>
int refused_whole(audit_log& log, const std::string& dir, std::vector<audit_entry> batch, std::string_view cause,
                  Lift lift) {
  int failures = 0;
  const auto files = trail_files(dir);
  const std::uint64_t seq = log.last_seq();
  const std::string hash(log.last_hash());
  auto r = log.append(batch);
  if (r) failures |= undo_append_succeeded;
  if (!r && (r.err().message.find(cause) == std::string::npos ||
             r.err().message.find("stay") != std::string::npos)) {
    failures |= undo_error_text;
  }
  if (trail_files(dir) != files) failures |= undo_files_changed;
  if (log.last_seq() != seq || log.last_hash() != hash) failures |= undo_chain_moved;
  if (!lift()) return failures | undo_limit;
  auto retry = log.append(batch);
  if (!retry || *retry != seq + batch.size()) failures |= undo_retry_failed;
  auto v = verify_audit(dir);
  if (!v || !v->ok || v->last_seq != seq + batch.size()) failures |= undo_not_verified;
  return failures;
}

// A batch whose first line fits in audit.jsonl (`max_bytes` leaves room for it) and whose
// later lines go to new files, where the file-size limit (a full disk's stand-in) refuses the
// `rotations`-th of them.
int file_too_large_child(const std::string& dir, int rotations, std::uint32_t keep, std::uint64_t max_bytes) {
  ::signal(SIGXFSZ, SIG_IGN);
  auto log = audit_log::open(dir, {audit_durability::write, max_bytes, keep});
  if (!log) return undo_open;
  rlimit lim{};
  ::getrlimit(RLIMIT_FSIZE, &lim);
  const rlimit original = lim;
  lim.rlim_cur = 5000;
  if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return undo_limit;
  std::vector<audit_entry> batch = make_entries(1000, 1 + rotations);
  // Each later line passes max_bytes with the one before it (a file of its own, under the
  // limit), the last one passes the limit.
  for (int i = 1; i <= rotations; ++i) {
    batch[static_cast<std::size_t>(i)].details = {{"path", "/" + std::string(i == rotations ? 6000 : 3500, 'x')}};
  }
  return refused_whole(*log, dir, batch, "File too large", [&] { return ::setrlimit(RLIMIT_FSIZE, &original) == 0; });
}

// The same when the new audit.jsonl of a rotation cannot be created: a tmpfs of three inodes
// (its root, audit.lock, audit.jsonl) in a mount namespace of this child's own.
int no_inode_child(const std::string& dir) {
  if (::unshare(CLONE_NEWNS) != 0 && ::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return undo_skip;
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return undo_skip;
  if (::mount("dhara-test", dir.c_str(), "tmpfs", 0, "size=1m,nr_inodes=3,mode=0700") != 0) return undo_skip;
  auto log = audit_log::open(dir, {audit_durability::write, 4096, 5});
  if (!log) return undo_open;
  std::vector<audit_entry> first = make_entries(0, 5);
  if (!log->append(first)) return undo_open;
  // 30 lines: the first ones fit in audit.jsonl, the rest would need a new file.
  return refused_whole(*log, dir, make_entries(5, 30), "No space left on device", [&] {
    return ::mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT, "size=1m,nr_inodes=100,mode=0700") == 0;
  });
}

void check_undo(int failures) {
  CHECK((failures & undo_open) == 0);
  CHECK((failures & undo_limit) == 0);
  CHECK((failures & undo_append_succeeded) == 0);
  CHECK((failures & undo_error_text) == 0);
  CHECK((failures & undo_files_changed) == 0);
  CHECK((failures & undo_chain_moved) == 0);
  CHECK((failures & undo_retry_failed) == 0);
  CHECK((failures & undo_not_verified) == 0);
}

}  // namespace

TEST_CASE("a batch that fails after a rotation leaves no line of it, and no file moved", "[io][audit]") {
  temp_dir dir;
  SECTION("a new file refuses its lines (a full disk)") {
    const int rotations = GENERATE(1, 2);
    const std::uint32_t keep = GENERATE(1u, 5u);
    CAPTURE(rotations, keep);
    {
      // Older files to keep their names: audit.1.jsonl (and audit.2 with keep 5).
      audit_log log = open_log(dir, {audit_durability::write, 4096, keep});
      append_ok(log, make_entries(0, 40));
      append_ok(log, make_entries(40, 2));
    }
    const auto before = trail_files(dir.str());
    REQUIRE(before.contains("audit.1.jsonl"));
    // Room for the batch's first line in audit.jsonl, not for the next.
    const std::uint64_t max_bytes = before.at("audit.jsonl").size() + 1000;
    check_undo(run_child([&] { return file_too_large_child(dir.str(), rotations, keep, max_bytes); }));
    audit_log log = open_log(dir, {audit_durability::write, 4096, keep});
    CHECK(log.recovered().empty());
    CHECK(log.last_seq() == 42 + 1 + static_cast<std::uint64_t>(rotations));
    auto v = verify_audit(dir.str());
    REQUIRE(v);
    CHECK(v->ok);
    if (keep == 5) {  // the retry deleted nothing either: the oldest file is still there
      const auto after = trail_files(dir.str());
      CHECK(std::any_of(after.begin(), after.end(), [&](const auto& f) { return f.second == before.at("audit.1.jsonl"); }));
    }
  }
  SECTION("the new audit.jsonl cannot be created (no inode left)") {
    const int failures = run_child([&] { return no_inode_child(dir.str()); });
    if (failures == undo_skip) {
      WARN("no mount namespace here (unshare or mount refused): the inode-exhaustion case is skipped");
      return;
    }
    check_undo(failures);
  }
}

TEST_CASE("fsync durability writes, rotates and verifies", "[io][audit]") {
  temp_dir dir;
  {
    audit_log log = open_log(dir, {audit_durability::fsync, 8192, 10});
    for (int i = 0; i < 5; ++i) append_ok(log, make_entries(i * 40, 40));
    CHECK(log.last_seq() == 200);
  }
  CHECK(fs::exists(dir.file("audit.1.jsonl")));
  CHECK(python_verify(dir) == "OK 200 200 from-start");
  audit_log log = open_log(dir, {audit_durability::fsync, 8192, 10});
  CHECK(log.last_seq() == 200);
  auto v = verify_audit(dir.str());
  REQUIRE(v);
  CHECK(v->ok);
  CHECK(v->lines == 200);
}

TEST_CASE("two writers on one trail (a session and a CLI command) keep one chain", "[io][audit]") {
  temp_dir dir;
  const audit_log_options options{audit_durability::write, 4096, 100};
  audit_log session = open_log(dir, options);
  audit_log cli = open_log(dir, options);
  int next = 0;
  for (int round = 0; round < 12; ++round) {
    audit_log& writer = round % 3 == 1 ? cli : session;
    const int size = round % 2 == 0 ? 7 : 1;
    append_ok(writer, make_entries(next, size));
    next += size;
  }
  CHECK(session.last_seq() == static_cast<std::uint64_t>(next));
  CHECK(fs::exists(dir.file("audit.1.jsonl")));  // rotations by both
  CHECK(python_verify(dir) == "OK " + std::to_string(next) + " " + std::to_string(next) + " from-start");
  auto v = verify_audit(dir.str());
  REQUIRE(v);
  CHECK(v->ok);
}

TEST_CASE("verify is consistent while another process appends and rotates", "[io][audit]") {
  temp_dir dir;
  const audit_log_options options{audit_durability::write, 4096, 3};
  { audit_log log = open_log(dir, options); append_ok(log, make_entries(0, 10)); }
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto log = audit_log::open(dir.str(), options);
    if (!log) ::_exit(1);
    std::vector<audit_entry> batch = make_entries(0, 37);
    for (int i = 0; i < 300; ++i) {
      if (!log->append(batch)) ::_exit(2);
    }
    ::_exit(0);
  }
  int runs = 0;
  int bad = 0;
  std::string first_problem;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    auto v = verify_audit(dir.str());
    ++runs;
    if (!v || !v->ok) {
      ++bad;
      if (first_problem.empty()) first_problem = v ? v->first_bad_file + ":" + std::to_string(v->first_bad_line) + " " + v->why : v.err().message;
    }
  }
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  INFO("verifications during the writes: " << runs << ", first problem: " << first_problem);
  CHECK(bad == 0);
  CHECK(runs > 1);
  auto v = verify_audit(dir.str());
  REQUIRE(v);
  CHECK(v->ok);
  CHECK(v->last_seq == 10 + 300 * 37);
}

// Whether another open file description could take audit.lock now (as another process would).
bool lock_is_free(const temp_dir& dir) {
  const int fd = ::open(dir.file("audit.lock").c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(fd >= 0);
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);  // and with it the lock, if taken
  return free;
}

TEST_CASE("a kept lock shuts other writers out until released, and the chain stays one", "[io][audit]") {
  temp_dir dir;
  const audit_log_options options{audit_durability::write, 4096, 100};
  audit_log session = open_log(dir, options);
  audit_log cli = open_log(dir, options);
  CHECK(lock_is_free(dir));
  append_ok(session, make_entries(0, 3));
  CHECK_FALSE(session.holds_lock());
  CHECK(lock_is_free(dir));  // by default every append gives the lock back

  session.keep_lock(true);
  append_ok(session, make_entries(3, 3));
  CHECK(session.holds_lock());
  CHECK_FALSE(lock_is_free(dir));
  int next = 6;
  for (int round = 0; round < 8; ++round, next += 7) append_ok(session, make_entries(next, 7));  // rotates, lock kept
  CHECK(fs::exists(dir.file("audit.1.jsonl")));
  CHECK_FALSE(lock_is_free(dir));
  session.release_lock();
  CHECK_FALSE(session.holds_lock());
  CHECK(lock_is_free(dir));

  // Another writer appends and rotates meanwhile: the session's next append, which takes the
  // lock again, follows it.
  for (int round = 0; round < 4; ++round, next += 7) append_ok(cli, make_entries(next, 7));
  append_ok(session, make_entries(next, 2));
  next += 2;
  CHECK(session.holds_lock());
  CHECK(session.last_seq() == static_cast<std::uint64_t>(next));

  // A roll back while the lock is kept keeps it.
  audit_log_options fsync = options;
  fsync.durability = audit_durability::fsync;
  temp_dir other;
  audit_log log = open_log(other, fsync);
  log.keep_lock(true);
  append_ok(log, make_entries(0, 4));
  std::vector<audit_entry> more = make_entries(4, 3);
  REQUIRE(log.append(more, dhara::io::audit_sync::deferred));
  CHECK_FALSE(log.roll_back(log.last_append_start()).has_value());
  CHECK(log.holds_lock());
  CHECK_FALSE(lock_is_free(other));
  CHECK(log.last_seq() == 4);

  // Closing the log gives a kept lock back.
  { audit_log moved = std::move(session); }
  CHECK(lock_is_free(dir));
  CHECK(python_verify(dir) == "OK " + std::to_string(next) + " " + std::to_string(next) + " from-start");
}

TEST_CASE("a writer sees when it waited for the lock, and a holder sees who waits", "[io][audit]") {
  temp_dir dir;
  audit_log log = open_log(dir);
  append_ok(log, make_entries(0, 2));
  CHECK_FALSE(log.waited_for_lock());
  CHECK_FALSE(log.others_wait_for_lock());

  // Another process holds audit.lock: the append waits for it, and says so.
  const int other = ::open(dir.file("audit.lock").c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(other >= 0);
  REQUIRE(::flock(other, LOCK_EX) == 0);
  auto appending = std::async(std::launch::async, [&] {
    std::vector<audit_entry> e = make_entries(2, 3);
    return log.append(e).has_value();
  });
  CHECK(appending.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout);  // it waits
  ::flock(other, LOCK_UN);
  CHECK(appending.get());
  CHECK(log.waited_for_lock());
  append_ok(log, make_entries(5, 1));
  CHECK_FALSE(log.waited_for_lock());

  // The log keeps the lock; another process blocks in flock for it: the holder sees it waiting.
  log.keep_lock(true);
  append_ok(log, make_entries(6, 1));
  REQUIRE(log.holds_lock());
  auto waiting = std::async(std::launch::async, [&] { return ::flock(other, LOCK_EX) == 0; });
  bool seen = false;
  for (int i = 0; i < 500 && !seen; ++i) {
    seen = log.others_wait_for_lock();
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(seen);
  log.release_lock();
  CHECK(waiting.get());  // the waiter got it
  CHECK_FALSE(log.others_wait_for_lock());  // holding is not waiting
  ::close(other);
  CHECK(python_verify(dir) == "OK 7 7 from-start");
}

TEST_CASE("a deferred sync is left to the caller, and unconfirmed lines can be cut away", "[io][audit]") {
  temp_dir dir;
  const audit_log_options fsync{audit_durability::fsync, 104857600, 5};

  SECTION("only fsync durability with audit_sync::deferred leaves a file to sync") {
    audit_log log = open_log(dir, fsync);
    std::vector<audit_entry> a = make_entries(0, 10);
    REQUIRE(log.append(a, dhara::io::audit_sync::deferred));
    REQUIRE(log.sync_handle());
    CHECK(lines_of(log.path()).size() == 10);  // written at once, synced by the caller
    CHECK(log.sync_handle().sync().empty());
    CHECK(log.last_append_start().seq == 0);
    const dhara::io::audit_sync_handle first = log.sync_handle();
    const std::size_t size_a = read_all(log.path()).size();
    std::vector<audit_entry> b = make_entries(10, 5);
    REQUIRE(log.append(b, dhara::io::audit_sync::deferred));
    CHECK(log.sync_handle().same_file(first));  // one descriptor per file, not one per batch
    CHECK(log.last_append_start().seq == 10);
    CHECK(log.last_append_start().size == size_a);
    CHECK(log.last_append_start().hash == hash_field(lines_of(log.path())[9]));
    std::vector<audit_entry> c = make_entries(15, 5);
    REQUIRE(log.append(c));  // audit_sync::now
    CHECK_FALSE(log.sync_handle());

    temp_dir other;
    audit_log plain = open_log(other);  // durability write: nothing is ever synced
    std::vector<audit_entry> d = make_entries(0, 3);
    REQUIRE(plain.append(d, dhara::io::audit_sync::deferred));
    CHECK_FALSE(plain.sync_handle());
  }

  SECTION("a roll back cuts every line since the checkpoint, and the chain goes on") {
    audit_log log = open_log(dir, fsync);
    append_ok(log, make_entries(0, 5));
    const std::string confirmed = read_all(log.path());
    std::vector<audit_entry> a = make_entries(5, 10);
    REQUIRE(log.append(a, dhara::io::audit_sync::deferred));
    const dhara::io::audit_checkpoint from = log.last_append_start();
    std::vector<audit_entry> b = make_entries(15, 7);
    REQUIRE(log.append(b, dhara::io::audit_sync::deferred));  // a second batch written on top
    CHECK(lines_of(log.path()).size() == 22);
    CHECK_FALSE(log.roll_back(from).has_value());
    CHECK(read_all(log.path()) == confirmed);
    CHECK(log.last_seq() == 5);
    CHECK(append_ok(log, make_entries(5, 3)) == 8);
    CHECK(python_verify(dir) == "OK 8 8 from-start");
  }

  SECTION("a roll back refuses when another process appended since, and appends then fail") {
    audit_log session = open_log(dir, fsync);
    append_ok(session, make_entries(0, 5));
    std::vector<audit_entry> a = make_entries(5, 4);
    REQUIRE(session.append(a, dhara::io::audit_sync::deferred));
    const dhara::io::audit_checkpoint from = session.last_append_start();
    audit_log cli = open_log(dir, fsync);
    append_ok(cli, make_entries(9, 2));  // `dhara config permissions …` meanwhile
    const std::string before = read_all(session.path());
    auto err = session.roll_back(from);
    REQUIRE(err.has_value());
    CHECK(err->message.find("could not be cut away") != std::string::npos);
    CHECK(read_all(session.path()) == before);  // the other process's lines stay
    std::vector<audit_entry> more = make_entries(11, 1);
    auto r = session.append(more);
    REQUIRE_FALSE(r);
    CHECK(r.err().message.find("reopen the audit log") != std::string::npos);
    CHECK(python_verify(dir) == "OK 11 11 from-start");
  }

  SECTION("a roll back refuses once the file rotated") {
    audit_log log = open_log(dir, {audit_durability::fsync, 4096, 10});
    std::vector<audit_entry> a = make_entries(0, 3);
    REQUIRE(log.append(a, dhara::io::audit_sync::deferred));
    const dhara::io::audit_checkpoint from = log.last_append_start();
    std::vector<audit_entry> b = make_entries(3, 40);
    REQUIRE(log.append(b, dhara::io::audit_sync::deferred));
    REQUIRE(fs::exists(dir.file("audit.1.jsonl")));
    CHECK(log.roll_back(from).has_value());
    CHECK(python_verify(dir) == "OK 43 43 from-start");
  }
}

TEST_CASE("a digest's hex digits are the same from the vector code and the table, and as printf writes them",
          "[io][audit]") {
  // Every byte value in every position of the 32, then random digests.
  std::mt19937 rng(20261205);
  for (int round = 0; round < 300; ++round) {
    unsigned char digest[32];
    for (int i = 0; i < 32; ++i) digest[i] = static_cast<unsigned char>(round < 256 ? (round + 37 * i) & 0xFF : rng());
    char fast[65] = {}, table[65] = {}, printed[65] = {};
    dhara::io::detail::digest_hex(digest, fast);
    dhara::io::detail::digest_hex_portable(digest, table);
    for (int i = 0; i < 32; ++i) std::snprintf(printed + 2 * i, 3, "%02x", digest[i]);
    INFO("round " << round);
    CHECK(std::string(fast, 64) == std::string(printed, 64));
    CHECK(std::string(table, 64) == std::string(printed, 64));
    CHECK(fast[64] == '\0');  // nothing written past the 64 digits
    CHECK(table[64] == '\0');
  }
}
