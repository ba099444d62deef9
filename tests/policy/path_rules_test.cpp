// Path rules: normalization, globs, and the hostile table of DESIGN §4 (lexical checks;
// real symlinks are tested in tests/io/path_resolver_test.cpp).
#include <catch2/catch.hpp>
#include <fnmatch.h>

#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "policy/path_rules.hpp"

using namespace dhara::policy;

namespace {

const std::string home = "/home/u";

path_rule_set rules(std::vector<std::string> allowed, std::vector<std::string> denied = {}) {
  path_rules_input in{std::move(allowed), std::move(denied), home, "/home/u/.dhara", "/home/u/proj"};
  auto r = compile_path_rules(in, lexical_resolver{});
  REQUIRE(r);
  return *r;
}

decision check(const path_rule_set& r, std::string_view path, std::string_view cwd = "/home/u/proj") {
  return check_path(r, path, cwd, home, path_access::read, lexical_resolver{});
}

}  // namespace

TEST_CASE("lexical normalization handles dots, slashes and relative paths", "[policy][path]") {
  struct row { std::string_view in, base, out; };
  const row table[] = {
      {"/a/b/c", "/", "/a/b/c"},
      {"/a//b///c/", "/", "/a/b/c"},
      {"/a/./b/.", "/", "/a/b"},
      {"/a/b/../c", "/", "/a/c"},
      {"/../../etc/passwd", "/", "/etc/passwd"},
      {"/", "/", "/"},
      {"//", "/", "/"},
      {"/..", "/", "/"},
      {"src/x.ts", "/home/u/proj", "/home/u/proj/src/x.ts"},
      {"../../../etc/shadow", "/home/u/proj", "/etc/shadow"},
      {".", "/home/u/proj", "/home/u/proj"},
      {"a/../../b", "/x/y", "/x/b"},
      {"...", "/x", "/x/..."},
  };
  for (const row& r : table) {
    CAPTURE(r.in, r.base);
    auto got = normalize_path(r.in, r.base);
    REQUIRE(got);
    CHECK(*got == r.out);
  }
}

TEST_CASE("the normal-form tests agree with normalization on every short string, long random ones and every defect's place", "[policy][path]") {
  // The oracle: a path is in normal form when normalization returns it unchanged. The
  // alphabet holds the bytes the fast scan looks for, and '/' and '.' with the top bit set
  // (0xAF, 0xAE), which an inexact byte compare would take for them.
  const char alphabet[] = {'/', '.', 'a', '\0', '\xAF', '\xAE'};
  std::string out;
  auto agree = [&](const std::string& s) {
    const bool abs_oracle = normalize_path_into(s, "/", out) && out == s && !s.empty() && s.front() == '/';
    const std::string joined = "/" + s;
    const bool plain_oracle = !s.empty() && s.front() != '/' && normalize_path_into(joined, "/", out) && out == joined;
    if (is_normal_abs_path(s) != abs_oracle || plain_segments(s) != plain_oracle) {
      FAIL_CHECK("disagree on '" << s << "' (" << s.size() << " bytes): is_normal_abs_path " << is_normal_abs_path(s)
                                 << ", plain_segments " << plain_segments(s));
      return false;
    }
    return true;
  };
  // Every string of up to 8 bytes over the first five (390 625 of 8 bytes).
  std::size_t checked = 0;
  for (std::size_t len = 0; len <= 8; ++len) {
    std::vector<std::size_t> digits(len, 0);
    for (;;) {
      std::string s(len, ' ');
      for (std::size_t i = 0; i < len; ++i) s[i] = alphabet[digits[i]];
      if (!agree(s)) return;
      ++checked;
      std::size_t i = 0;
      while (i < len && ++digits[i] == 5) digits[i++] = 0;
      if (i == len) break;
    }
  }
  CHECK(checked == 488281);  // 5^0 + ... + 5^8
  // Longer ones, mostly plain names with a few bytes that matter, across several words.
  std::mt19937 rng(20261204);
  std::size_t normal = 0;
  for (int n = 0; n < 200000; ++n) {
    std::string s = rng() % 2 ? "/" : "";
    const std::size_t len = rng() % 40;
    for (std::size_t i = 0; i < len; ++i) {
      const unsigned r = rng() % 64;
      s.push_back(r < 6 ? alphabet[r] : r < 14 ? '/' : r < 18 ? '.' : static_cast<char>('a' + r % 26));
    }
    if (!agree(s)) return;
    normal += is_normal_abs_path(s);
  }
  CHECK(normal > 1000);  // the random strings reach both answers
  // Every window of three bytes over the alphabet at every place of plain strings of 9 to 48
  // bytes: each pair of bytes the fast scans compare, across the edges of their eight- and
  // sixteen-byte blocks and in their overlapped last loads.
  for (std::size_t len = 9; len <= 48; len += 13) {
    std::string base;
    for (std::size_t i = 0; i < len; ++i) base.push_back(i % 5 == 4 ? '/' : static_cast<char>('b' + i % 7));
    if (base.back() == '/') base.back() = 'z';
    for (std::size_t at = 0; at + 3 <= len; ++at) {
      for (std::size_t w = 0; w < 6 * 6 * 6; ++w) {
        std::string s = base;
        s[at] = alphabet[w % 6];
        s[at + 1] = alphabet[w / 6 % 6];
        s[at + 2] = alphabet[w / 36];
        if (!agree(s)) return;
      }
    }
  }
  // Each kind of defect at every place of a path of 43 bytes and more: across the edges of the
  // eight- and sixteen-byte blocks the fast scans read.
  const std::string plain_path = "/abcdefgh/ijklmno/pqrstuv/wxyz0123/456789AB";
  for (const std::string_view defect : {std::string_view("//"), std::string_view("/./"), std::string_view("/../"),
                                        std::string_view("/."), std::string_view("\0", 1), std::string_view("/.a"),
                                        std::string_view("/")}) {
    for (std::size_t k = 0; k <= plain_path.size(); ++k) {
      std::string s = plain_path;
      s.insert(k, defect);
      if (!agree(s) || !agree(s.substr(1)) || !agree(s.substr(0, s.size() - 1))) return;
    }
  }
  CHECK(is_normal_abs_path("/home/u/proj/src/app.ts"));
  CHECK(is_normal_abs_path("/home/u/proj/.git/config"));
  CHECK_FALSE(is_normal_abs_path("/home/u/proj/src/app.ts/"));
  CHECK_FALSE(is_normal_abs_path("/home/u/proj//src"));
  CHECK_FALSE(is_normal_abs_path("/home/u/proj/src/.."));
  CHECK(plain_segments("src/app.ts"));
  CHECK(plain_segments("...a/.b"));
  CHECK_FALSE(plain_segments("./src"));
  CHECK_FALSE(plain_segments("/src"));
}

TEST_CASE("normalization refuses empty paths, NUL bytes and relative bases", "[policy][path]") {
  CHECK_FALSE(normalize_path("", "/"));
  CHECK(normalize_path("", "/").err().code == errc::invalid_path);
  CHECK_FALSE(normalize_path(std::string_view("/etc/sha\0dow", 12), "/"));
  CHECK_FALSE(normalize_path("x", "relative/base"));
  CHECK_FALSE(normalize_path("x", ""));
}

TEST_CASE("tilde expansion supports ~ and ~/ only", "[policy][path]") {
  CHECK(*expand_home("~", home) == "/home/u");
  CHECK(*expand_home("~/.ssh/id_rsa", home) == "/home/u/.ssh/id_rsa");
  CHECK(*expand_home("/abs/~x", home) == "/abs/~x");
  CHECK_FALSE(expand_home("~root/.ssh", home));
  CHECK_FALSE(expand_home("~/x", ""));
}

TEST_CASE("at-or-under respects segment boundaries", "[policy][path]") {
  CHECK(is_at_or_under("/run/host", "/run/host"));
  CHECK(is_at_or_under("/run/host/x", "/run/host"));
  CHECK_FALSE(is_at_or_under("/run/hostage", "/run/host"));
  CHECK_FALSE(is_at_or_under("/run/hos", "/run/host"));
  CHECK(is_at_or_under("/anything", "/"));
  CHECK(is_at_or_under("/", "/"));
}

TEST_CASE("globs: ** spans segments, * and ? stay in one, classes work", "[policy][path]") {
  struct row { std::string_view pattern, path; bool match, under; };
  const row table[] = {
      {"**/node_modules/**", "/p/node_modules/x/y.js", true, true},
      {"**/node_modules/**", "/p/node_modules", true, true},
      {"**/node_modules/**", "/p/node_modulesX/y", false, false},
      {"/home/u/*.txt", "/home/u/a.txt", true, true},
      {"/home/u/*.txt", "/home/u/d/a.txt", false, false},
      {"/home/u/**/*.txt", "/home/u/d/e/a.txt", true, true},
      {"/home/u/**/*.txt", "/home/u/a.txt", true, true},
      {"/proc/**/environ", "/proc/self/environ", true, true},
      {"/proc/**/environ", "/proc/1/task/1/environ", true, true},
      {"/proc/**/root", "/proc/self/root/etc/shadow", false, true},
      {"/a/?", "/a/b", true, true},
      {"/a/?", "/a/bc", false, false},
      {"/a/[bc]d", "/a/cd", true, true},
      {"/a/[!bc]d", "/a/cd", false, false},
      {"/a/[a-c]", "/a/b", true, true},
      {"/a/[unclosed", "/a/[unclosed", true, true},
      {"*.log", "/var/x/app.log", true, true},
      {"/a/*", "/a", false, false},
      {"/a/**", "/a", true, true},
  };
  for (const row& r : table) {
    CAPTURE(r.pattern, r.path);
    CHECK(glob_match(r.pattern, r.path) == r.match);
    CHECK(glob_match_at_or_under(r.pattern, r.path) == r.under);
  }
}

TEST_CASE("hostile paths against allowed project and denied entries", "[policy][path][hostile]") {
  auto r = rules({"/home/u/proj", "/run/host"}, {"/home/u/proj/secrets", "~/.aws/", "/home/u/proj/**/.env"});
  struct row { std::string_view path; bool allowed; std::string_view why; };
  const std::string long_path = "/home/u/proj/" + std::string(64 * 1024, 'a');
  const std::string deep = "/home/u/proj/" + [] { std::string s; for (int i = 0; i < 2000; ++i) s += "a/"; return s; }();
  const row table[] = {
      {"src/auth.ts", true, "relative inside the project"},
      {"/home/u/proj", true, "the allowed root itself"},
      {"/home/u/proj/./src/../src/a.ts", true, "dots that stay inside"},
      {"../other/x", false, ".. escape to a sibling"},
      {"src/../../other", false, ".. escape through a subfolder"},
      {"/home/u/proj/../proj2/x", false, ".. to a prefix-sharing sibling"},
      {"/home/u/projX/file", false, "prefix confusion (projX vs proj)"},
      {"/run/hostage/x", false, "prefix confusion (/run/hostage vs /run/host)"},
      {"/run/host/x", true, "inside the second allowed entry"},
      {"//home//u//proj//a", true, "doubled slashes"},
      {"/home/u/proj/a/.", true, "trailing /."},
      {"/home/u/proj/secrets", false, "deny entry itself"},
      {"/home/u/proj/secrets/key.pem", false, "deny inside allow"},
      {"/home/u/proj/secrets/../ok.txt", true, "deny entry left lexically"},
      // Absolute paths not yet in normal form must not take the shortcut for normal ones.
      {"/home/u/proj//secrets/key.pem", false, "doubled slash before a deny entry"},
      {"/home/u/proj/./secrets/key.pem", false, "/./ before a deny entry"},
      {"/home/u/proj/x/../secrets/key.pem", false, "/x/../ before a deny entry"},
      {"/home/u/proj/secrets/", false, "deny entry with a trailing slash"},
      {"/home/u/proj/secrets/.", false, "deny entry with a trailing /."},
      {"/home/u/proj/.../x", true, "a segment of three dots is a name"},
      {"/home/u/proj/sub/.env", false, "deny glob inside allow"},
      {"/home/u/proj/.env", false, "deny glob ** matching zero segments"},
      {"~/.ssh/id_rsa", false, "built-in ~/.ssh via ~"},
      {"/home/u/.ssh/id_rsa", false, "built-in ~/.ssh absolute"},
      {"/home/u/.ssh", false, "the denied folder itself"},
      {"~/.aws/credentials", false, "configured ~ deny entry"},
      {"~root/.ssh/id_rsa", false, "~user form is refused"},
      {"/etc/shadow", false, "built-in /etc/shadow"},
      {"/etc/passwd", false, "outside every allowed entry"},
      {"/proc/self/root/etc/shadow", false, "/proc/self/root magic link"},
      {"/proc/1/environ", false, "/proc/*/environ"},
      {"/home/u/.dhara/permissions.json", false, "dhara's permissions file"},
      {"/home/u/.dhara/audit.1.jsonl", false, "a rotated audit file"},
      {"/home/u/.dhara/config.json", false, "dhara's config file"},
      {"/home/u/proj/.dhara/config.json", false, "the project's config file"},
      {"", false, "empty path"},
      {std::string_view("/home/u/proj/a\0b", 16), false, "NUL byte"},
      {long_path, false, "64 KiB path"},
      {"/", false, "root"},
  };
  for (const row& t : table) {
    CAPTURE(t.why, t.path.substr(0, 80));
    decision d = check(r, t.path);
    CHECK(d.allowed() == t.allowed);
    if (!d.allowed()) CHECK_FALSE(d.reason.empty());
  }
  // A deep path within the limit is normalized and allowed without recursion trouble.
  CHECK(check(r, deep.substr(0, 4000)).allowed());
}

TEST_CASE("a relative path that is a URI is refused, not read as a folder named after its scheme", "[policy][path]") {
  // A review: `file:///home/u/.ssh/id_rsa` was checked as `<cwd>/file:/home/u/.ssh/id_rsa`,
  // inside the project and allowed, while a tool that takes URIs read the key.
  auto r = rules({"/home/u/proj"});
  for (std::string_view uri : {"file:///home/u/.ssh/id_rsa", "file://localhost/etc/passwd", "https://x.org/a",
                               "git+ssh://host/repo", "s3://bucket/key", "file:/home/u/.ssh/id_rsa",
                               "FILE:/home/u/.ssh/id_rsa"}) {
    INFO(uri);
    decision d = check(r, uri);
    CHECK_FALSE(d.allowed());
    CHECK(d.reason == "'" + std::string(uri) + "' is a URI, not a path; give the path itself");
  }
  // Names that only look alike stay paths.
  for (std::string_view path : {"file:name", "a:b/c", "src//x", "1http://x", "a_b://c", ":/x", "src/file:/x"}) {
    INFO(path);
    CHECK(check(r, path).allowed());
  }
}

TEST_CASE("allow inside deny stays denied: deny wins", "[policy][path]") {
  auto r = rules({"/srv/data/public"}, {"/srv/data"});
  CHECK_FALSE(check(r, "/srv/data/public/index.html").allowed());
  CHECK(check(r, "/srv/data/public/index.html").matched_rule == "/srv/data");
}

TEST_CASE("the rules' index finds the entries a path is at or under, as a scan of every entry does", "[policy][path]") {
  // Names that share first bytes and prefixes ("pro", "proj", "proj2"), and enough of them
  // under one folder that its children are searched both ways (a scan up to 8, a search past).
  const std::vector<std::string> names{"a", "ab", "abc", "b", "ba", "a.b", "pro", "proj", "proj2", "p",
                                       "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q9", "q10"};
  std::mt19937 rng(20261205);
  auto pick = [&](std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); };
  auto random_path = [&](std::size_t max_depth, bool strangers) {
    std::string p = "/t";
    for (std::size_t d = 1 + pick(max_depth); d > 0; --d) p += "/" + (strangers && pick(8) == 0 ? "zz" : names[pick(names.size())]);
    return p;
  };
  // The shallowest plain entry (the first written, at the same place) the path is at or under.
  auto first_over = [](const std::vector<path_entry>& entries, const std::string& path) -> const path_entry* {
    const path_entry* best = nullptr;
    for (const path_entry& e : entries)
      if (!e.glob && is_at_or_under(path, e.normalized) && (!best || e.normalized.size() < best->normalized.size()))
        best = &e;
    return best;
  };
  std::size_t denied_seen = 0, allowed_seen = 0, neither_seen = 0;
  for (int set = 0; set < 400; ++set) {
    std::vector<std::string> allowed, denied;
    for (std::size_t i = pick(30); i > 0; --i) allowed.push_back(random_path(3, false));
    for (std::size_t i = pick(12); i > 0; --i) denied.push_back(random_path(4, false));
    const path_rule_set r = rules(allowed, denied);
    for (int k = 0; k < 60; ++k) {
      const std::string path = random_path(6, true);
      const path_matches m = match_path(r, path);
      const path_entry* d = first_over(r.denied, path);
      const path_entry* a = first_over(r.allowed, path);
      // The walk stops at the first denial: an allowed entry below it is not reached.
      if (a && d && !is_at_or_under(d->normalized, a->normalized)) a = nullptr;
      INFO("path " << path);
      REQUIRE((m.denied == nullptr) == (d == nullptr));
      if (d) CHECK(m.denied->normalized == d->normalized);
      REQUIRE((m.allowed == nullptr) == (a == nullptr));
      if (a) CHECK(m.allowed->normalized == a->normalized);
      (d ? denied_seen : a ? allowed_seen : neither_seen)++;
    }
  }
  // Every answer came up often: the comparison above was not of empty results only.
  CHECK(denied_seen > 1000);
  CHECK(allowed_seen > 1000);
  CHECK(neither_seen > 1000);
}

TEST_CASE("an empty allowed list allows nothing", "[policy][path]") {
  auto r = rules({});
  CHECK_FALSE(check(r, "/home/u/proj/a").allowed());
  CHECK_FALSE(check(r, "/tmp/x").allowed());
}

TEST_CASE("denial reasons name the rule as written", "[policy][path]") {
  auto r = rules({"/home/u"}, {"~/.aws/"});
  decision d = check(r, "/home/u/.aws/credentials");
  CHECK(d.matched_rule == "~/.aws/");
  CHECK(d.reason.find("~/.aws/") != std::string::npos);
  CHECK(d.decided_by == decider::rule);
  decision outside = check(r, "/etc/hosts");
  CHECK(outside.reason.find("allowedPaths") != std::string::npos);
}

TEST_CASE("a denied entry given a name is named so in reasons, in each of its readings", "[policy][path]") {
  path_rules_input in{{"/home/u"}, {"/home/u/.aws", "/home/u/proj/secrets[old]", "/home/u/tmp"}, home,
                      "/home/u/.dhara", "/home/u/proj"};
  in.denied_named = {"~/.aws/ (deniedPaths in ~/.dhara/config.json)",
                     "secrets[old] (deniedPaths in ~/proj/.dhara/config.json)"};  // none for the third
  auto r = compile_path_rules(in, lexical_resolver{});
  REQUIRE(r);
  decision d = check(*r, "/home/u/.aws/credentials");
  CHECK(d.reason == "'/home/u/.aws/credentials' is denied by the rule ~/.aws/ (deniedPaths in ~/.dhara/config.json)");
  CHECK(d.matched_rule == "/home/u/.aws");  // the rule itself is unchanged
  // `secrets[old]` is denied as the name and as a glob (`secretso`): both say the entry.
  for (std::string_view p : {"secrets[old]/key", "secretso/key"})
    CHECK(check(*r, p).reason ==
          "'" + std::string(p) + "' is denied by the rule secrets[old] (deniedPaths in ~/proj/.dhara/config.json)");
  CHECK(check(*r, "/home/u/tmp/x").reason == "'/home/u/tmp/x' is denied by the rule /home/u/tmp");
  // The built-ins keep their own names.
  CHECK(check(*r, "/home/u/.ssh/id_rsa").reason == "'/home/u/.ssh/id_rsa' is denied by the rule built-in: ~/.ssh/");
}

TEST_CASE("a denied name holding glob characters is denied as written and as a glob", "[policy][path]") {
  // `secrets[old]` as a glob matches `secretso`, not the folder of that name: both are denied.
  auto r = rules({"/home/u/proj"}, {"/home/u/proj/secrets[old]", "/home/u/proj/a*b"});
  for (std::string_view p : {"/home/u/proj/secrets[old]", "/home/u/proj/secrets[old]/key", "/home/u/proj/secretso/key",
                             "/home/u/proj/a*b", "/home/u/proj/axxb/f"}) {
    CAPTURE(p);
    decision d = check(r, p);
    CHECK_FALSE(d.allowed());
    CHECK(d.reason.find("is denied by the rule /home/u/proj/") != std::string::npos);
  }
  CHECK(check(r, "/home/u/proj/secrets").allowed());
  CHECK(check(r, "/home/u/proj/secrets[old").allowed());
  // An allowed entry is read as a glob only: what matches, not the name.
  auto allowed = rules({"/srv/a[1]"});
  CHECK(check(allowed, "/srv/a1/x").allowed());
  CHECK_FALSE(check(allowed, "/srv/a[1]/x").allowed());
  REQUIRE(allowed.problems.size() == 1);  // and says so (`dhara doctor` shows it)
  CHECK(allowed.problems[0].find("'/srv/a[1]' is read as a glob") != std::string::npos);
  CHECK(rules({"/srv/**", "/srv/*.md", "/srv/a?"}).problems.empty());  // these match their own text
}

TEST_CASE("a backslash takes the next character as itself", "[policy][path]") {
  CHECK(glob_match("/a/\\*", "/a/*"));
  CHECK_FALSE(glob_match("/a/\\*", "/a/x"));
  CHECK(glob_match("/a/x\\?*", "/a/x?yz"));
  CHECK_FALSE(glob_match("/a/x\\?*", "/a/xyz"));
  CHECK(glob_match("/a/\\[1]", "/a/[1]"));
  CHECK_FALSE(glob_match("/a/\\[1]", "/a/1"));
  CHECK(glob_match("/a/b\\\\c", "/a/b\\c"));
  CHECK(glob_match("/a/[\\]x]", "/a/]"));  // inside a class too, as glob(3)
  CHECK(glob_match("/a/[\\]x]", "/a/x"));
  CHECK_FALSE(glob_match("/a/[\\]x]", "/a/\\"));
  // Ranges compare bytes as unsigned, as glibc's glob(3) does in the C locale.
  CHECK(glob_match("/a/[#-\xff]", "/a/q"));
  CHECK(glob_match("/a/[#-\xff]", "/a/\xc3"));
  CHECK_FALSE(glob_match("/a/[#-\xff]", "/a/!"));
  CHECK(has_glob("/a/*"));
  CHECK_FALSE(has_glob("/a/\\*\\?\\["));
  CHECK(escape_glob("/a[1]/b*?\\") == "/a\\[1]/b\\*\\?\\\\");
  CHECK(unescape_glob(escape_glob("/a[1]/b*?\\")) == "/a[1]/b*?\\");
  CHECK(glob_literal_folder("/a\\[1]/b/c*/d") == "/a[1]/b");
  CHECK(glob_literal_folder("/a/\\.\\./b/*") == "/b");  // `\.\.` is `..` once read
  CHECK(glob_literal_folder("/a\\*b") == "/a*b");
}

TEST_CASE("one segment matches as the C library's fnmatch(3) matches it", "[policy][path]") {
  // The sandbox finds its masks with glob(3), the broker matches with dhara's own matcher: the
  // two must read a pattern alike. Random well-formed patterns (escapes, ranges, negation,
  // POSIX classes) against random names, compared with fnmatch(3) in the C locale.
  std::mt19937 rng(20261204);
  auto pick = [&](std::initializer_list<const char*> l) { return std::string(l.begin()[rng() % l.size()]); };
  int matched = 0;
  for (int i = 0; i < 60000; ++i) {
    std::string p, name;
    for (int k = 0, n = static_cast<int>(rng() % 5) + 1; k < n; ++k) {
      switch (rng() % 4) {
        case 0: p += pick({"a", "b", ":", "-", "!", "^", "]", ".", "A", "1"}); break;
        case 1: p += pick({"*", "?", "**"}); break;
        case 2: p += pick({"\\*", "\\?", "\\[", "\\\\", "\\a", "\\]"}); break;
        default:
          p += "[";
          if (rng() % 3 == 0) p += pick({"!", "^"});
          for (int m = 0, items = static_cast<int>(rng() % 3) + 1; m < items; ++m)
            p += pick({"a", "b", ":", "^", "!", "*", "?", "1", "A", "a-b", "0-9", "A-Z", "\\]", "\\-", "\\\\",
                       "[:alpha:]", "[:digit:]", "[:upper:]", "[:punct:]", "[:space:]"});
          p += "]";
      }
    }
    for (int k = 0, n = static_cast<int>(rng() % 5) + 1; k < n; ++k)
      name += pick({"a", "b", ":", "-", "!", "^", "]", "[", ".", "A", "1", "*", "?", "\\", "z", " "});
    const bool theirs = ::fnmatch(p.c_str(), name.c_str(), 0) == 0;
    INFO("pattern " << p << ", name " << name);
    CHECK(glob_match("/" + p, "/" + name) == theirs);
    matched += theirs ? 1 : 0;
  }
  CHECK(matched > 3000);  // the table is not all misses
  // A class name that is none matches nothing, as there, negated or not; a lone backslash at
  // the end too. A class name ends before a `z`, as glibc reads it.
  CHECK_FALSE(glob_match("/[[:nope:]]", "/n"));
  CHECK_FALSE(glob_match("/[![:nope:]]", "/n"));
  CHECK(::fnmatch("[![:nope:]]", "n", 0) != 0);
  for (const char* name : {"kz]", "k:", "kz"}) {
    CAPTURE(name);
    CHECK(glob_match(std::string("/k[[:z:]]"), std::string("/") + name) == (::fnmatch("k[[:z:]]", name, 0) == 0));
  }
  CHECK(glob_match("/k[[:z:]]", "/kz]"));
  CHECK_FALSE(glob_match("/a\\", "/a\\"));
}

TEST_CASE("a bracket glob(3) reads otherwise than dhara is refused", "[policy][path]") {
  // glob(3) reads `[.a.]` and `[=a=]` in a bracket as a collating symbol and an equivalence
  // class; dhara reads their characters. Each of these names something one reader matches and
  // the other does not, and read_apart says so.
  auto differs = [](const std::string& p) {
    for (int c = 1; c < 256; ++c) {
      const std::string b(1, static_cast<char>(c));
      for (const std::string& name : {b, b + "x", "x" + b, b + "]x"})
        if (c != '/' && glob_match("/" + p, "/" + name) != (::fnmatch(p.c_str(), name.c_str(), 0) == 0)) return true;
    }
    return false;
  };
  for (const std::string p : {"[[.a.]]", "[[=a=]]", "[%-[.a.]]", "[[.a.]-c]", "[[=a=]-c]", "[a[.]", "[[.]", "[[.].]]x",
                              "x[[.-.]a]", "[b-[.d.]]"}) {
    CAPTURE(p);
    CHECK(differs(p));
    CHECK(read_apart("/srv/" + p).find("holds '[.' or '[=' in a bracket") != std::string::npos);
  }
  // Random patterns, well-formed or not, with such forms among their items: whatever
  // read_apart lets through, fnmatch(3) and dhara match alike.
  std::mt19937 rng(20261205);
  auto pick = [&](std::initializer_list<const char*> l) { return std::string(l.begin()[rng() % l.size()]); };
  int refused = 0, through = 0;
  for (int i = 0; i < 40000; ++i) {
    std::string p, name;
    for (int k = 0, n = static_cast<int>(rng() % 4) + 1; k < n; ++k) {
      if (rng() % 2) {
        p += pick({"a", ".", "=", "[", "]", "-", "*", "\\[", "\\.", "x"});
        continue;
      }
      p += "[";
      if (rng() % 4 == 0) p += "!";
      for (int m = 0, items = static_cast<int>(rng() % 3) + 1; m < items; ++m)
        p += pick({"a", ".", "=", "-", "[", "[.a.]", "[=a=]", "[.", "[=", ".]", "=]", "[.-.]", "a-[.c.]", "[:alpha:]",
                   "\\[", "b-d"});
      if (rng() % 5) p += "]";
    }
    for (int k = 0, n = static_cast<int>(rng() % 3) + 1; k < n; ++k)
      name += pick({"a", "b", "c", ".", "=", "[", "]", "-", "x", ":"});
    if (!read_apart("/" + p).empty()) {
      ++refused;
      continue;
    }
    ++through;
    INFO("pattern " << p << ", name " << name);
    CHECK(glob_match("/" + p, "/" + name) == (::fnmatch(p.c_str(), name.c_str(), 0) == 0));
  }
  CHECK(refused > 5000);
  CHECK(through > 5000);
  // Brackets without those forms, and the characters outside a bracket, are read alike and pass.
  for (const std::string p : {"[.a]*", "x[.", "[a=]", "\\[.x]", "[[:alpha:]]*", "[a-z]", ".[!.]*"}) {
    CAPTURE(p);
    CHECK(read_apart("/srv/" + p).empty());
    CHECK_FALSE(differs(p));
  }
  // In the rules: a denied entry with such a bracket stops them compiling, an allowed one is
  // ignored, and the reason is given.
  path_rules_input denied{{"/srv"}, {"/srv/[[.s.]]ecret*"}, home, "/d", "/p"};
  auto refused_rules = compile_path_rules(denied, lexical_resolver{});
  REQUIRE_FALSE(refused_rules);
  // The entry is named once: "deniedPaths entry 'X' holds …", not "… 'X': 'X' holds …".
  CHECK(refused_rules.err().message.starts_with(
      "deniedPaths entry '/srv/[[.s.]]ecret*' holds '[.' or '[=' in a bracket"));
  auto ignored = rules({"/srv/[[=a=]]pp"});
  REQUIRE(ignored.problems.size() == 1);
  CHECK(ignored.problems[0].starts_with("allowedPaths entry '/srv/[[=a=]]pp' ignored: it holds '[.' or '[='"));
  CHECK_FALSE(check(ignored, "/srv/app/x").allowed());
}

TEST_CASE("path entries take escaped glob characters as names", "[policy][path]") {
  // An allowed folder named `app[2]`, written escaped: the folder, not its sibling `app2`.
  auto r = rules({"/srv/app\\[2]", "/srv/x/\\*/*.txt"});
  CHECK(r.problems.empty());
  CHECK(check(r, "/srv/app[2]/f").allowed());
  CHECK(check(r, "/srv/app[2]").allowed());
  CHECK_FALSE(check(r, "/srv/app2/f").allowed());
  CHECK(check(r, "/srv/x/*/a.txt").allowed());
  CHECK_FALSE(check(r, "/srv/x/y/a.txt").allowed());
  CHECK_FALSE(check(r, "/srv/x/*/a.md").allowed());
  // Denied: the escaped reading, the name as written, and the glob that takes a backslash as a
  // character (a name may hold one; before escapes, that was how `se\[c]*` read).
  auto d = rules({"/srv"}, {"/srv/p/\\*", "/srv/p/se\\[c]*", "/srv/q\\b"});
  for (std::string_view p : {"/srv/p/*", "/srv/p/*/k", "/srv/p/\\*", "/srv/p/se[c]ret", "/srv/p/se\\[c]*",
                             "/srv/p/se\\cret", "/srv/qb", "/srv/q\\b"}) {
    CAPTURE(p);
    CHECK_FALSE(check(d, p).allowed());
  }
  for (std::string_view p : {"/srv/p/x", "/srv/p/sec", "/srv/p/secret", "/srv/q"}) {
    CAPTURE(p);
    CHECK(check(d, p).allowed());
  }
  // Both globs go to the sandbox as glob(3) patterns: the escapes mean the same there.
  std::vector<std::string> globs;
  for (const path_entry& e : d.denied)
    if (e.written == "/srv/p/se\\[c]*" && e.glob) {
      CHECK(e.literal_prefix == "/srv/p/");
      globs.push_back(glob3_pattern(e));
    }
  CHECK(globs == std::vector<std::string>{"/srv/p/se\\[c]*", "/srv/p/se\\\\[c]*"});
  // An allowed glob whose folder is escaped matches its own name: doctor stays quiet.
  CHECK(rules({"/srv/a\\[1]/*.md"}).problems.empty());
  auto odd = rules({"/srv/a[1]/*.md"});
  REQUIRE(odd.problems.size() == 1);
  CHECK(odd.problems[0].find("write '\\[', '\\*' or '\\?'") != std::string::npos);
}

TEST_CASE("entries escapes cannot read alike, or that read otherwise than before, are named", "[policy][path]") {
  // A backslash before an ordinary character: written before escapes, it meant itself.
  auto old = rules({"/srv/a\\b", "/srv/c\\\\d"});
  CHECK(check(old, "/srv/ab/f").allowed());
  CHECK_FALSE(check(old, "/srv/a\\b/f").allowed());
  CHECK(check(old, "/srv/c\\d/f").allowed());  // two backslashes are one, as written
  REQUIRE(old.problems.size() == 1);
  CHECK(old.problems[0].find("'/srv/a\\b' takes each backslash as an escape") != std::string::npos);
  CHECK(old.problems[0].find("it allows '/srv/ab'") != std::string::npos);
  // `\/`: glob(3) reads it as `/`, dhara's segments would not. Denied: the rules fail.
  path_rules_input slash{{"/srv"}, {"/srv/*\\/x"}, home, "/d", "/p"};
  auto refused = compile_path_rules(slash, lexical_resolver{});
  REQUIRE_FALSE(refused);
  CHECK(refused.err().message == "deniedPaths entry '/srv/*\\/x' puts a backslash before '/', which no name can "
                                 "hold: write it without");
  auto ignored = rules({"/srv", "/srv/a\\/b"});
  REQUIRE(ignored.problems.size() == 1);
  CHECK(ignored.problems[0] == "allowedPaths entry '/srv/a\\/b' ignored: it puts a backslash before '/', which no "
                               "name can hold: write it without");
  // A message that does not begin with the entry keeps it after a colon.
  path_rules_input relative{{"/srv"}, {"srv/x"}, home, "/d", "/p"};
  auto not_absolute = compile_path_rules(relative, lexical_resolver{});
  REQUIRE_FALSE(not_absolute);
  CHECK(not_absolute.err().message == "deniedPaths entry 'srv/x' is not an absolute path");
  // A range whose first byte is above its last matches nothing (bytes compare unsigned, as in
  // glob(3); before, `[\xc3\xa9-z]` compared as signed and spanned ASCII): said.
  auto empty = rules({"/srv"}, {"/srv/[\xc3\xa9-z]*"});
  CHECK(check(empty, "/srv/secret").allowed());
  REQUIRE(empty.problems.size() == 1);
  CHECK(empty.problems[0].find("holds the range '\xa9-z'") != std::string::npos);
  CHECK(rules({"/srv"}, {"/srv/[a-z]*", "/srv/[[:alpha:]-]*", "/srv/[!0-9]*", "/srv/[z-]*"}).problems.empty());
  // Said once an entry (its reading without escapes holds the same range), of the range only
  // (negated, the bracket matches every byte), and not across a `/` (no bracket spans one).
  auto twice = rules({"/srv"}, {"/srv/a\\b/[!z-a]*"});
  REQUIRE(twice.problems.size() == 1);
  CHECK(twice.problems[0].find("holds the range 'z-a'") != std::string::npos);
  CHECK(twice.problems[0].find("the range matches no byte") != std::string::npos);
  CHECK(rules({"/srv/[a/z-b]"}).problems.empty());
  // Escapes that mean something in a bracket are no upgrade surprise.
  CHECK(rules({"/srv/[\\!a]*", "/srv/[a\\-z]*", "/srv/[\\^a]*"}).problems.size() == 3);  // globs not matching their text
  for (const std::string& problem : rules({"/srv/[\\!a]*", "/srv/[a\\-z]*", "/srv/[\\^a]*"}).problems) {
    CAPTURE(problem);
    CHECK(problem.find("takes each backslash") == std::string::npos);
  }
}

TEST_CASE("a home holding glob characters is taken as a name where an entry says ~", "[policy][path]") {
  path_rules_input in{{"~/work"}, {"~/work/secret*"}, "/home/a[1]", "/d", "/p"};
  auto r = compile_path_rules(in, lexical_resolver{});
  REQUIRE(r);
  CHECK(r->problems.empty());
  auto verdict = [&](std::string_view p) { return check_path(*r, p, "/p", "/home/a[1]", path_access::read, lexical_resolver{}); };
  CHECK(verdict("/home/a[1]/work/x").allowed());
  CHECK(verdict("~/work/x").allowed());
  CHECK_FALSE(verdict("/home/a1/work/x").allowed());
  CHECK_FALSE(verdict("/home/a[1]/work/secret.txt").allowed());
}

TEST_CASE("built-in denials take a home or project holding glob characters literally", "[policy][path]") {
  // Folders named `app[2]` or `*`: the built-ins' folders are no globs, only their last part is.
  const std::string h = "/home/u[1]", dh = "/home/u[1]/.d*", proj = "/home/u[1]/app[2]";
  path_rules_input in{{"/home/**"}, {}, h, dh, proj};
  auto r = compile_path_rules(in, lexical_resolver{});
  REQUIRE(r);
  auto verdict = [&](const std::string& p) { return check_path(*r, p, proj, h, path_access::write, lexical_resolver{}); };
  for (const std::string& p : {proj + "/.dhara/config.json", proj + "/.dhara/config.json.tmp", dh + "/config.json",
                               dh + "/permissions.json", dh + "/audit.jsonl", dh + "/logs/x.log", h + "/.ssh/id_rsa"}) {
    CAPTURE(p);
    decision d = verdict(p);
    CHECK_FALSE(d.allowed());
    CHECK(d.matched_rule.starts_with("built-in: "));
  }
  // What the built-ins would match if their folders were globs stays allowed.
  for (const std::string& p : {std::string("/home/u1/app2/.dhara/config.json"), proj + "/.dhara/other.json",
                               h + "/.dxyz/config.json", h + "/.sshx"}) {
    CAPTURE(p);
    CHECK(verdict(p).allowed());
  }
  // The sandbox and glob(3) get the folder escaped and the glob as it is.
  bool found = false;
  for (const path_entry& e : r->denied)
    if (e.written == "built-in: <project>/.dhara/config.json") {
      found = true;
      CHECK(e.glob);
      CHECK(glob3_pattern(e) == "/home/u\\[1]/app\\[2]/.dhara/config.json*");
    }
  CHECK(found);
  // A built-in without a glob character stays a plain entry (resolved; the sandbox drops grants
  // beneath it).
  bool logs = false;
  for (const path_entry& e : r->denied)
    if (e.written == "built-in: $DHARA_HOME/logs") {
      logs = true;
      CHECK_FALSE(e.glob);
      CHECK(e.normalized == dh + "/logs");
    }
  CHECK(logs);
  path_entry plain{"x", "/a\\b[c]*", false, {}};
  CHECK(glob3_pattern(plain) == "/a\\\\b\\[c]\\*");
  path_entry tail{"x", "/a[1]/x\\*y*", true, "/a[1]/"};  // the literal part escaped, the rest as it is
  CHECK(glob3_pattern(tail) == "/a\\[1]/x\\*y*");
}

TEST_CASE("a denied entry that cannot be understood fails compilation", "[policy][path]") {
  path_rules_input in{{"/p"}, {"relative/deny"}, home, "/d", "/p"};
  auto r = compile_path_rules(in, lexical_resolver{});
  REQUIRE_FALSE(r);
  CHECK(r.err().message.find("relative/deny") != std::string::npos);
  path_rules_input user_form{{"/p"}, {"~bob/x"}, home, "/d", "/p"};
  CHECK_FALSE(compile_path_rules(user_form, lexical_resolver{}));
}

TEST_CASE("a bad allowed entry is dropped and reported, never widened", "[policy][path]") {
  path_rules_input in{{"relative/allow", "/ok"}, {}, home, "/d", "/p"};
  auto r = compile_path_rules(in, lexical_resolver{});
  REQUIRE(r);
  CHECK(r->problems.size() == 1);
  CHECK(check(*r, "/ok/x").allowed());
  CHECK_FALSE(check(*r, "/relative/allow").allowed());
}

TEST_CASE("a relative path with a non-absolute session cwd is a failure", "[policy][path]") {
  auto r = rules({"/home/u/proj"});
  decision d = check(r, "x", "not/absolute");
  CHECK_FALSE(d.allowed());
  CHECK(d.decided_by == decider::failure);
}

TEST_CASE("a session folder not in normal form is normalized after one of the same length that was", "[policy][path]") {
  // The last folder found in normal form is remembered: a folder of the same length that
  // differs, with a `..` in it, must still be read and normalized.
  auto r = rules({"/home/u/proj"}, {"/home/p/secret"});
  CHECK(check(r, "secret/key", "/home/u/proj").allowed());
  const decision d = check(r, "secret/key", "/home/u/../p");  // as long as /home/u/proj
  CHECK_FALSE(d.allowed());
  CHECK(d.reason.find("denied by the rule /home/p/secret") != std::string::npos);
  CHECK(check(r, "x", "/home/u/proj/").allowed());  // a trailing slash: normalized
  CHECK(check(r, "secret/key", "/home/u/proj").allowed());
}

namespace {

// Records what check_path asks it to resolve, and answers with the path unchanged.
class recording_resolver final : public path_resolver {
 public:
  mutable std::vector<std::string> asked;
  result<std::string> resolve(std::string_view normalized_abs) const override {
    asked.emplace_back(normalized_abs);
    return std::string(normalized_abs);
  }
};

}  // namespace

TEST_CASE("path_to_resolve names the path check_path resolves", "[policy][paths]") {
  const auto r = rules({"/home/u/proj", "/tmp"}, {"/home/u/proj/secrets"});
  const std::vector<std::string> raws = {
      "src/a.ts",      "/home/u/proj/src/a.ts", "./lib/../src/b.ts", "~/proj/x",       "src//c/./d/",
      "../proj/e",     "/home/u/proj/",         "/tmp/../home/u/f",  "link/../../up",  ".",
      "/",             "~",                     "a/b/..",            "/home/u/proj/secrets/../g"};
  for (const std::string& raw : raws) {
    INFO(raw);
    recording_resolver rec;
    check_path(r, raw, "/home/u/proj", home, path_access::read, rec);
    std::string named;
    REQUIRE(path_to_resolve(raw, "/home/u/proj", home, named));
    if (rec.asked.empty()) continue;  // denied lexically before anything was resolved
    REQUIRE(rec.asked.size() == 1);
    CHECK(named == rec.asked[0]);
  }
  std::string named;
  CHECK_FALSE(path_to_resolve("", "/home/u/proj", home, named));
  CHECK_FALSE(path_to_resolve(std::string("a\0b", 3), "/home/u/proj", home, named));
  CHECK_FALSE(path_to_resolve("~other/x", "/home/u/proj", home, named));
}

namespace {

// The home `/home/u` is a link to `/data/u`; every path under it resolves there.
class home_link_resolver final : public path_resolver {
 public:
  result<std::string> resolve(std::string_view p) const override {
    if (p == "/home/u" || p.starts_with("/home/u/")) return "/data/u" + std::string(p.substr(7));
    return std::string(p);
  }
};

}  // namespace

TEST_CASE("a denied glob is denied in its folder's resolved form too", "[policy][paths]") {
  // The grants are resolved; a glob kept only through the link (`/home/u/.dhara/config.json*`)
  // matched nothing the sandbox granted, so it masked nothing there.
  home_link_resolver links;
  path_rules_input in{{"~"}, {"~/notes/*.key"}, "/home/u", "/home/u/.dhara", "/home/u/proj"};
  auto set = compile_path_rules(in, links);
  REQUIRE(set);
  auto denied_glob = [&](const std::string& pattern) {
    return std::any_of(set->denied.begin(), set->denied.end(),
                       [&](const path_entry& e) { return e.glob && e.normalized == pattern; });
  };
  for (const char* g : {"/home/u/.dhara/config.json*", "/data/u/.dhara/config.json*", "/home/u/notes/*.key",
                        "/data/u/notes/*.key", "/data/u/.dhara/permissions.json*"})
    CHECK(denied_glob(g));
  for (const path_entry& e : set->denied)
    if (e.glob && e.normalized.starts_with("/data/u/")) CHECK(e.literal_prefix.starts_with("/data/u/"));
  // The broker refuses a new file there, which no identity known at the start covers.
  CHECK_FALSE(check_path(*set, "/data/u/.dhara/config.json.new", "/home/u/proj", "/home/u", path_access::write, links)
                  .allowed());
  CHECK_FALSE(check_path(*set, "/home/u/notes/b.key", "/home/u/proj", "/home/u", path_access::read, links).allowed());
  CHECK(check_path(*set, "/home/u/notes/b.txt", "/home/u/proj", "/home/u", path_access::read, links).allowed());
}
