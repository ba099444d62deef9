// Fuzzes the path, glob, URL and command rules with invariants, not just "no crash":
// normalized paths are canonical and idempotent, the fast normal-form tests agree with
// normalization, and an allowed path is never under a denied entry.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "policy/command_rules.hpp"
#include "policy/net_rules.hpp"
#include "policy/path_rules.hpp"

using namespace dhara::policy;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

bool canonical(std::string_view p) {
  if (p.empty() || p.front() != '/') return false;
  if (p == "/") return true;
  if (p.back() == '/') return false;
  return p.find("//") == std::string_view::npos && p.find("/./") == std::string_view::npos &&
         p.find("/../") == std::string_view::npos && !p.ends_with("/.") && !p.ends_with("/..");
}

const path_rule_set& rules() {
  static const path_rule_set r = [] {
    path_rules_input in{{"/home/u/proj", "/tmp/ws"}, {"/home/u/proj/secret", "/home/u/proj/**/.env"},
                        "/home/u", "/home/u/.dhara", "/home/u/proj"};
    return *compile_path_rules(in, lexical_resolver{});
  }();
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string_view first = input.substr(0, input.find('\n'));
  std::string_view second = first.size() < input.size() ? input.substr(first.size() + 1) : std::string_view{};

  std::string out;
  // The fast normal-form tests say what normalization does: a path is in normal form when it
  // comes back unchanged; plain segments appended after a slash stay so.
  require(is_normal_abs_path(input) ==
          (normalize_path_into(input, "/", out) && out == input && input.starts_with('/')));
  const std::string joined = "/" + std::string(input);
  require(plain_segments(input) ==
          (!input.empty() && !input.starts_with('/') && normalize_path_into(joined, "/", out) && out == joined));
  // What a resolver that follows links is asked: the normal form when the path has no `..`
  // segment, else the path as written, joined to the session folder (the fast join of a plain
  // relative path included).
  for (const std::string_view cwd : {std::string_view("/home/u/proj"), std::string_view("/")}) {
    std::string asked;
    if (!path_to_resolve(input, cwd, "/home/u", asked)) continue;
    auto expanded = expand_home(input, "/home/u");
    require(static_cast<bool>(expanded));
    std::string written = *expanded;
    if (!written.starts_with('/')) written = (cwd == "/" ? "" : std::string(cwd)) + "/" + written;
    if (has_dotdot_segment(*expanded)) require(asked == written);
    else require(normalize_path_into(*expanded, cwd, out) && asked == out);
  }
  if (normalize_path_into(input, "/home/u/proj", out)) {
    require(canonical(out));
    require(is_normal_abs_path(out));
    std::string again;
    require(normalize_path_into(out, "/", again) && again == out);  // idempotent
    require(normalize_path_into(input, "/home/u/proj", again) && again == out);  // deterministic
  }

  decision d = check_path(rules(), input, "/home/u/proj", "/home/u", path_access::read, lexical_resolver{});
  if (d.allowed()) {
    require(normalize_path_into(input.starts_with('~') ? std::string_view{} : input, "/home/u/proj", out) || input.starts_with('~'));
    if (!input.starts_with('~')) {
      require(is_at_or_under(out, "/home/u/proj") || is_at_or_under(out, "/tmp/ws"));
      require(!is_at_or_under(out, "/home/u/proj/secret"));
      require(!is_at_or_under(out, "/home/u/.ssh"));
    }
  } else {
    require(!d.reason.empty());
  }

  // Globs: pattern on the first line, path on the rest; "under" must include "exact".
  std::string path;
  if (normalize_path_into(second.empty() ? "/x" : second, "/", path)) {
    bool exact = glob_match(first, path);
    bool under = glob_match_at_or_under(first, path);
    require(!exact || under);
  }

  (void)expand_home(input, "/home/u");
  // URLs: check_url refuses exactly what parse_url refuses, in the same words, and a URL whose
  // host is listed by the very name parse_url gives is allowed.
  const decision public_hosts = check_url(compile_domain_rules(std::nullopt), input);
  if (auto url = parse_url(input)) {
    require(!url->host.empty());
    require(check_url(compile_domain_rules(std::vector<std::string>{url->host}), input).allowed());
  } else {
    require(!public_hosts.allowed() && public_hosts.reason == url.err().message);
  }
  if (auto ip = parse_ip_literal(first)) (void)is_refused_address(*ip);
  (void)check_command_string(compile_command_rules(std::nullopt), input, nullptr);
  return 0;
}
