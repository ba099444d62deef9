// The tool-call gate: required capabilities and the checks each input key produces.
#include <catch2/catch.hpp>

#include "policy/tool_gate.hpp"

using namespace dhara::policy;
using json = nlohmann::json;

namespace {

capability_set caps(std::initializer_list<capability> list) {
  capability_set s;
  for (auto c : list) s.insert(c);
  return s;
}

}  // namespace

TEST_CASE("a tool without a list requires every manifest capability, an empty list requires none", "[policy][gate]") {
  auto manifest = caps({capability::filesystem_read, capability::network_fetch});
  CHECK(*tool_required_capabilities(manifest, json{{"name", "t"}}) == manifest);
  CHECK(tool_required_capabilities(manifest, json{{"name", "t"}, {"capabilities", json::array()}})->empty());
  auto one = tool_required_capabilities(manifest, json{{"capabilities", {"filesystem:read"}}});
  CHECK(*one == caps({capability::filesystem_read}));
}

TEST_CASE("a tool requiring more than its manifest declares is refused", "[policy][gate]") {
  auto manifest = caps({capability::filesystem_read});
  auto more = tool_required_capabilities(manifest, json{{"capabilities", {"filesystem:read", "process:spawn"}}});
  REQUIRE_FALSE(more);
  CHECK(more.err().message.find("process:spawn") != std::string::npos);
  auto unknown = tool_required_capabilities(manifest, json{{"capabilities", {"filesystem:reed"}}});
  REQUIRE_FALSE(unknown);
  CHECK(unknown.err().code == errc::unknown_capability);
  CHECK_FALSE(tool_required_capabilities(manifest, json{{"capabilities", "filesystem:read"}}));
  // network:outbound in the manifest covers a tool asking for network:fetch.
  CHECK(tool_required_capabilities(caps({capability::network_outbound}), json{{"capabilities", {"network:fetch"}}}));
}

TEST_CASE("input keys become checks under the capability that governs them", "[policy][gate]") {
  auto rw = tool_call_checks(caps({capability::filesystem_read, capability::filesystem_write}),
                             json{{"path", "src/a.ts"}, {"cwd", "/tmp"}, {"url", "https://x.org"}, {"text", "hi"}});
  // read bare (no key covers it), then path and cwd as writes; url unchecked without network.
  REQUIRE(rw.size() == 3);
  CHECK(rw[0].cap == capability::filesystem_read);
  CHECK(rw[0].kind == subject_kind::none);
  CHECK(rw[1].cap == capability::filesystem_write);
  CHECK(rw[1].kind == subject_kind::path);
  CHECK(rw[1].subject == "src/a.ts");
  CHECK(rw[2].input_key == "cwd");

  auto ro = tool_call_checks(caps({capability::filesystem_read}), json{{"file", "a"}, {"filePath", "b"}, {"dir", "c"}});
  REQUIRE(ro.size() == 3);
  for (const auto& c : ro) CHECK((c.cap == capability::filesystem_read && c.kind == subject_kind::path));
  auto bare = tool_call_checks(caps({capability::filesystem_read}), json{{"text", "no path"}});
  REQUIRE(bare.size() == 1);
  CHECK(bare[0].kind == subject_kind::none);

  auto none = tool_call_checks(capability_set{}, json{{"path", "/etc/shadow"}, {"url", "http://127.0.0.1"}, {"command", "sh"}});
  CHECK(none.empty());  // unchecked here: the OS sandbox holds such a tool to nothing

  auto net = tool_call_checks(caps({capability::network_outbound}), json{{"url", "https://x.org"}});
  REQUIRE(net.size() == 1);
  CHECK(net[0].cap == capability::network_outbound);
  CHECK(net[0].kind == subject_kind::url);

  auto spawn = tool_call_checks(caps({capability::process_spawn}),
                                json{{"command", "git status"}, {"argv", {"git", "log"}}});
  REQUIRE(spawn.size() == 2);
  CHECK(spawn[0].kind == subject_kind::command_string);
  CHECK(spawn[1].kind == subject_kind::argv);
  CHECK(spawn[1].argv == std::vector<std::string>{"git", "log"});
}

TEST_CASE("values of the wrong type produce checks that deny", "[policy][gate]") {
  auto checks = tool_call_checks(caps({capability::filesystem_read, capability::network_fetch, capability::process_spawn}),
                                 json{{"path", 42}, {"url", json::object()}, {"argv", {"git", 7}}, {"command", {"ls", ""}}});
  REQUIRE(checks.size() == 4);
  CHECK(checks[0].subject.empty());              // path 42 → empty path → denied
  CHECK(checks[1].subject == "(not a string)");  // not a URL → denied
  CHECK(checks[2].argv.empty());                 // [ "ls", "" ] → empty argv → denied
  CHECK(checks[3].argv.empty());                 // [ "git", 7 ] → empty argv → denied
  // And decide() does deny them: the path through the path rules, the rest by their rules.
  path_rules_input in{{"/p"}, {}, "/h", "/d", "/p"};
  auto rules = compile_path_rules(in, lexical_resolver{});
  REQUIRE(rules);
  CHECK_FALSE(check_path(*rules, checks[0].subject, "/p", "/h", path_access::read, lexical_resolver{}).allowed());
  CHECK_FALSE(check_url(compile_domain_rules(std::nullopt), checks[1].subject).allowed());
  CHECK_FALSE(check_argv(compile_command_rules(std::nullopt), checks[2].argv, nullptr).allowed());
}

TEST_CASE("approve mode shows the subject DESIGN names, in its order", "[policy][gate]") {
  struct row {
    json input;
    std::string text;
    bool is_path;
  };
  const std::vector<row> rows = {
      {{{"path", "src/auth.ts"}, {"url", "https://x.org"}}, "src/auth.ts; url: https://x.org", true},
      // A command beside a path is shown too (the human approved `rm -rf src` seeing README.md).
      {{{"path", "README.md"}, {"argv", {"rm", "-rf", "src"}}}, "README.md; argv: rm -rf src", true},
      {{{"file", "a.txt"}}, "a.txt", true},
      {{{"filePath", "/abs/b.md"}}, "/abs/b.md", true},
      {{{"query", "q"}, {"url", "https://x.org/a"}}, "https://x.org/a; query: q", false},
      {{{"command", "git status"}}, "git status", false},
      {{{"argv", {"git", "commit", "-m", "fix it", "it's"}}}, "git commit -m 'fix it' 'it'\\''s'", false},
      {{{"command", {"ls", "-la", "a;b"}}}, "ls -la 'a;b'", false},
      {{{"query", "select"}, {"pattern", "p"}}, "select; pattern: p", false},
      {{{"pattern", "TODO"}}, "TODO", false},
      // Every other input follows, `dir` and `cwd` first, a value that is not a string as JSON.
      {{{"ms", 5}, {"text", "hi"}}, "text=hi; ms: 5", false},
      {{{"command", "rm -rf build"}, {"cwd", "/work/other"}}, "rm -rf build; cwd: /work/other", false},
      {{{"path", "a"}, {"dir", "d"}, {"cwd", "c"}, {"b", {{"x", 1}}}}, "a; dir: d; cwd: c; b: {\"x\":1}", true},
      {{{"text", "rm -rf x" + std::string(3000, ' ') + "ls"}}, "text=rm -rf x [3000 spaces] ls", false},
      {{{"a", std::string(600, 'y')}}, "a=" + std::string(510, 'y') + "… (90 more bytes)", false},
      {{{"path", "p"}, {"z", std::string(200, 'z')}}, "p; z: " + std::string(160, 'z') + "… (40 more bytes)", true},
      {{{"path", "p"}, {std::string(100, 'k'), "v"}}, "p; " + std::string(64, 'k') + "… (36 more bytes): v", true},
      {{{"ms", 5}}, "", false},
      {json::object(), "", false},
      {{{"path", "evil\x1b[2Jname\n"}}, "evil?[2Jname?", true},  // no escape sequences reach the terminal
  };
  for (const row& r : rows) {
    INFO(r.input.dump());
    call_subject s = approval_subject(r.input);
    CHECK(s.whole() == r.text);
    CHECK(s.is_path == r.is_path);
  }
}

TEST_CASE("shell quoting leaves plain words alone and quotes the rest", "[policy][gate]") {
  CHECK(shell_quote("git") == "git");
  CHECK(shell_quote("a/b.c:d=e@f%g+h-i_j") == "a/b.c:d=e@f%g+h-i_j");
  CHECK(shell_quote("") == "''");
  CHECK(shell_quote("a b") == "'a b'");
  CHECK(shell_quote("a,b") == "'a,b'");
  CHECK(shell_quote("$(x)") == "'$(x)'");
  CHECK(shell_quote("it's") == "'it'\\''s'");
}

TEST_CASE("subjects larger than what dhara checks are named, with the limits of each caller", "[policy][gate]") {
  auto command = [](std::size_t n) { return std::vector<gate_check>{{capability::process_spawn, subject_kind::command_string, std::string(n, 'x'), {}, "command"}}; };
  auto argv = [](std::size_t words, std::size_t each) {
    return std::vector<gate_check>{{capability::process_spawn, subject_kind::argv, {}, std::vector<std::string>(words, std::string(each, 'a')), "argv"}};
  };
  // A tool may take a command on its input (std's bash): 141 KB and 5 001 words pass there, not
  // for a program dhara spawns itself (a review).
  CHECK(oversized_subject(command(141 * 1000), tool_call_limits).empty());
  CHECK(oversized_subject(argv(5001, 8), tool_call_limits).empty());
  CHECK(oversized_subject(argv(2, 70 * 1000), tool_call_limits).empty());
  CHECK(oversized_subject(command(141 * 1000), host_request_limits) == "the command is 141000 bytes long, over the 131072 a command may have");
  CHECK(oversized_subject(argv(5001, 8), host_request_limits) ==
        "the argv has 5001 arguments of 45009 bytes, over the 4096 arguments and 131072 bytes dhara checks");
  CHECK(oversized_subject(command(1024 * 1024 + 1), tool_call_limits) == "the command is 1048577 bytes long, over the 1048576 a command may have");
  std::vector<gate_check> path{{capability::filesystem_read, subject_kind::path, std::string(4097, 'p'), {}, "path"}};
  CHECK(oversized_subject(path, tool_call_limits) == "the path is 4097 bytes long, over the 4096 a path may have");
  path[0].subject.resize(4096);
  CHECK(oversized_subject(path, tool_call_limits).empty());
  gate_check spawn{capability::process_spawn, subject_kind::argv, {}, {"ls"}, "argv"};
  spawn.also_key = "cwd";
  spawn.also = std::string(5000, 'c');
  CHECK(oversized_subject({spawn}, host_request_limits) == "the cwd is 5000 bytes long, over the 4096 a path may have");
}
