// Command rules: argv only, listed basenames, system locations, no shell strings.
#include <catch2/catch.hpp>

#include <map>

#include "policy/command_rules.hpp"

using namespace dhara::policy;

namespace {

// A locator over a fixed table, standing in for PATH lookups in pure tests (the real one
// is tested in tests/io/path_resolver_test.cpp).
class table_locator final : public executable_locator {
 public:
  std::map<std::string, std::string, std::less<>> table{
      {"git", "/usr/bin/git"},          {"sh", "/usr/bin/dash"},
      {"bash", "/usr/bin/bash"},        {"evil", "/home/u/bin/evil"},
      {"/opt/tool/bin/x", "/opt/tool/bin/x"}, {"/usr/bin/git", "/usr/bin/git"},
      {"./git", "/home/u/proj/git"},    {"node", "/usr/local/bin/node"}};
  result<std::string> locate(std::string_view argv0) const override {
    auto it = table.find(argv0);
    if (it == table.end()) return make_error(errc::not_found, "not found");
    return it->second;
  }
};

decision run(const command_rules& r, std::vector<std::string> argv) {
  static const table_locator loc;
  return check_argv(r, argv, &loc);
}

}  // namespace

TEST_CASE("shell metacharacters are detected", "[policy][command]") {
  for (std::string_view s : {"a;b", "a && b", "a|b", "$(id)", "`id`", "a > f", "a < f", "(a)", "{a}", "a\nb", "$HOME"}) {
    CAPTURE(s);
    CHECK(has_shell_metachar(s));
  }
  CHECK_FALSE(has_shell_metachar("git status --short"));
  CHECK(basename_of("/usr/bin/git") == "git");
  CHECK(basename_of("git") == "git");
}

TEST_CASE("without a commands list any argv passes, an empty one never", "[policy][command]") {
  auto open = compile_command_rules(std::nullopt);
  CHECK(run(open, {"anything", "-x"}).allowed());
  CHECK_FALSE(run(open, {}).allowed());
  CHECK_FALSE(run(open, {""}).allowed());
}

TEST_CASE("a commands list allows listed basenames in system directories", "[policy][command]") {
  auto rules = compile_command_rules(std::vector<std::string>{"git", "evil", "node", "/opt/tool/bin/x"});
  struct row { std::vector<std::string> argv; bool allowed; std::string_view why; };
  const row table[] = {
      {{"git", "status"}, true, "listed, /usr/bin"},
      {{"/usr/bin/git", "log"}, true, "absolute path in /usr with a listed basename"},
      {{"node", "x.js"}, true, "listed, /usr/local"},
      {{"sh", "-c", "id"}, false, "shell not listed"},
      {{"bash"}, false, "shell not listed"},
      {{"evil"}, false, "listed basename outside system dirs"},
      {{"./git"}, false, "relative path to a look-alike outside system dirs"},
      {{"/opt/tool/bin/x"}, true, "listed by absolute path"},
      {{"missing-cmd"}, false, "not found"},
  };
  for (const row& r : table) {
    CAPTURE(r.why);
    decision d = run(rules, r.argv);
    CHECK(d.allowed() == r.allowed);
    if (!d.allowed()) CHECK_FALSE(d.reason.empty());
  }
}

TEST_CASE("a shell is allowed only when listed itself", "[policy][command]") {
  auto rules = compile_command_rules(std::vector<std::string>{"sh"});
  CHECK(run(rules, {"sh", "-c", "true"}).allowed());
}

TEST_CASE("command strings with shell syntax are refused, plain ones checked by first word", "[policy][command]") {
  auto rules = compile_command_rules(std::vector<std::string>{"git"});
  static const table_locator loc;
  CHECK(check_command_string(rules, "git status", &loc).allowed());
  CHECK(check_command_string(rules, "  git   log", &loc).allowed());
  for (std::string_view s : {"git status; rm -rf /", "git && sh", "git $(id)", "git `id`", "git > /etc/x", "git\nsh"}) {
    CAPTURE(s);
    decision d = check_command_string(rules, s, &loc);
    CHECK_FALSE(d.allowed());
    CHECK(d.reason.find("argv") != std::string::npos);
  }
  CHECK_FALSE(check_command_string(rules, "'git' x", &loc).allowed());
  CHECK_FALSE(check_command_string(rules, "   ", &loc).allowed());
  CHECK_FALSE(check_command_string(rules, "sh -c x", &loc).allowed());
}

TEST_CASE("a listed command cannot be checked without a locator", "[policy][command]") {
  auto rules = compile_command_rules(std::vector<std::string>{"git"});
  std::vector<std::string> argv{"git"};
  CHECK_FALSE(check_argv(rules, argv, nullptr).allowed());
}
