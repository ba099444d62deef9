// Security levels, pending rules and trusted-author matching.
#include <catch2/catch.hpp>

#include "policy/level.hpp"

using namespace dhara::policy;

TEST_CASE("levels parse by name and order by strictness", "[policy][level]") {
  CHECK(*parse_security_level("paranoid") == security_level::paranoid);
  CHECK(*parse_security_level("yolo") == security_level::yolo);
  auto bad = parse_security_level("strict");
  REQUIRE_FALSE(bad);
  CHECK(bad.err().code == errc::unknown_level);
  CHECK(bad.err().message.find("paranoid, standard, trusted or yolo") != std::string::npos);
  CHECK(at_least_as_strict(security_level::paranoid, security_level::standard));
  CHECK_FALSE(at_least_as_strict(security_level::yolo, security_level::trusted));
  for (auto l : {security_level::paranoid, security_level::standard, security_level::trusted, security_level::yolo})
    CHECK(*parse_security_level(to_string(l)) == l);
}

TEST_CASE("what each level does with a pending capability", "[policy][level]") {
  struct row { security_level level; bool trusted; pending_action action; };
  const row table[] = {
      {security_level::paranoid, false, pending_action::ask_each_capability},
      {security_level::paranoid, true, pending_action::ask_each_capability},
      {security_level::standard, false, pending_action::ask_package},
      {security_level::standard, true, pending_action::ask_package},
      {security_level::trusted, false, pending_action::ask_package},
      {security_level::trusted, true, pending_action::approve_trusted_author},
      {security_level::yolo, false, pending_action::grant_yolo},
  };
  for (const row& r : table) {
    CAPTURE(to_string(r.level), r.trusted);
    CHECK(pending_rule(r.level, r.trusted) == r.action);
  }
}

TEST_CASE("authors parse from 'Name <email>' and bare names", "[policy][level]") {
  CHECK(parse_author("Zosma AI <dev@zosma.ai>") == author_info{"Zosma AI", "dev@zosma.ai"});
  CHECK(parse_author("  zosmaai ") == author_info{"zosmaai", ""});
  CHECK(parse_author("<only@mail>") == author_info{"", "only@mail"});
}

TEST_CASE("trusted authors match name, email or npm scope", "[policy][level]") {
  std::vector<std::string> trusted{"zosmaai", "alice@example.com", "@acme"};
  CHECK(is_trusted_author(trusted, {"zosmaai", ""}, "web-tools"));
  CHECK(is_trusted_author(trusted, {"ZosmaAI", ""}, "web-tools"));
  CHECK(is_trusted_author(trusted, {"Alice", "alice@example.com"}, "x"));
  CHECK(is_trusted_author(trusted, {"Someone", ""}, "@acme/tool"));
  CHECK(is_trusted_author(trusted, {"", ""}, "@zosmaai/tool"));
  CHECK_FALSE(is_trusted_author(trusted, {"zosmaai-evil", ""}, "web-tools"));
  CHECK_FALSE(is_trusted_author(trusted, {"Mallory", "mallory@example.com"}, "acme-tool"));
  CHECK_FALSE(is_trusted_author(trusted, {"Mallory", ""}, "@acmex/tool"));
  const std::vector<std::string> empty_entry{""}, none;
  CHECK_FALSE(is_trusted_author(empty_entry, {"", ""}, "x"));  // an empty entry never matches
  CHECK_FALSE(is_trusted_author(none, {"zosmaai", ""}, "web-tools"));
}
