// Tests for policy/permissions.hpp: parsing, serialization, version and folder binding,
// wildcard and deny precedence, record and reset.
#include "policy/permissions.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

using namespace dhara::policy;

namespace {

// DESIGN §3.2, as the seed writes it.
constexpr const char* design_example = R"({ "web-tools": { "version": "1.0.0",
                 "capabilities": { "network:fetch": "approved", "network:dns": "approved",
                                   "filesystem:write": "denied" },
                 "approvedAt": "2026-05-14T10:00:00Z", "approvedBy": "user" } })";

capability_set set_of(std::initializer_list<capability> caps) {
  capability_set s;
  for (auto c : caps) s.insert(c);
  return s;
}

permission_entry entry_with(std::initializer_list<std::pair<const std::string, permission_state>> caps,
                            std::string version = "1.0.0") {
  permission_entry e;
  e.version = std::move(version);
  e.capabilities = caps;
  return e;
}

constexpr auto approved = permission_state::approved;
constexpr auto denied = permission_state::denied;

}  // namespace

TEST_CASE("the DESIGN permissions example parses", "[policy][permissions]") {
  auto p = parse_permissions(design_example);
  REQUIRE(p);
  CHECK(p->warnings.empty());
  REQUIRE(p->value.entries.count("web-tools") == 1);
  const auto& e = p->value.entries.at("web-tools");
  CHECK(e.version == "1.0.0");
  CHECK(e.capabilities.size() == 3);
  CHECK(e.capabilities.at("network:fetch") == approved);
  CHECK(e.capabilities.at("network:dns") == approved);
  CHECK(e.capabilities.at("filesystem:write") == denied);
  CHECK(e.approved_at == "2026-05-14T10:00:00Z");
  CHECK(e.approved_by == "user");
  CHECK_FALSE(e.folder);
  CHECK(e.extra.empty());
}

TEST_CASE("the DESIGN example serializes in the seed's key order and round-trips",
          "[policy][permissions]") {
  auto p = parse_permissions(design_example);
  REQUIRE(p);
  std::string text = serialize_permissions(p->value);
  CHECK(text ==
        "{\n"
        "  \"web-tools\": {\n"
        "    \"version\": \"1.0.0\",\n"
        "    \"capabilities\": {\n"
        "      \"filesystem:write\": \"denied\",\n"
        "      \"network:dns\": \"approved\",\n"
        "      \"network:fetch\": \"approved\"\n"
        "    },\n"
        "    \"approvedAt\": \"2026-05-14T10:00:00Z\",\n"
        "    \"approvedBy\": \"user\"\n"
        "  }\n"
        "}\n");
  auto again = parse_permissions(text);
  REQUIRE(again);
  CHECK(serialize_permissions(again->value) == text);
}

TEST_CASE("the seed's minimal shape parses", "[policy][permissions]") {
  auto p = parse_permissions(R"({"web-tools": {"version": "1.0.0", "capabilities":
                                  {"network:fetch": "approved", "network:dns": "approved"}}})");
  REQUIRE(p);
  const auto& e = p->value.entries.at("web-tools");
  CHECK_FALSE(e.approved_at);
  CHECK_FALSE(e.approved_by);
  auto eff = effective_for(e, "1.0.0", security_level::standard);
  CHECK(eff.approved == set_of({capability::network_fetch, capability::network_dns}));
  CHECK(eff.denied.empty());
}

TEST_CASE("unknown fields are kept and written after the known ones", "[policy][permissions]") {
  auto p = parse_permissions(R"({"a": {"zeta": 1, "note": {"by": "me"}, "folder": "/x/a",
                                  "version": "2", "approvedBy": "user", "capabilities": {}}})");
  REQUIRE(p);
  const auto& e = p->value.entries.at("a");
  CHECK(e.extra.size() == 2);
  CHECK(e.extra.at("note").at("by") == "me");
  CHECK(e.folder == "/x/a");
  std::string text = serialize_permissions(p->value);
  auto pos = [&](const char* key) { return text.find(std::string("\"") + key + "\""); };
  CHECK(pos("version") < pos("capabilities"));
  CHECK(pos("capabilities") < pos("approvedBy"));
  CHECK(pos("approvedBy") < pos("folder"));
  CHECK(pos("folder") < pos("note"));
  CHECK(pos("note") < pos("zeta"));
  auto again = parse_permissions(text);
  REQUIRE(again);
  CHECK(again->value.entries.at("a").extra == e.extra);
  CHECK(serialize_permissions(again->value) == text);
}

TEST_CASE("an empty permissions file means no entries", "[policy][permissions]") {
  for (const char* text : {"", "  \n\t", "{}"}) {
    CAPTURE(text);
    auto p = parse_permissions(text);
    REQUIRE(p);
    CHECK(p->value.entries.empty());
  }
  CHECK(serialize_permissions(permissions{}) == "{}\n");
}

TEST_CASE("a state other than approved or denied is an error naming extension and key",
          "[policy][permissions]") {
  for (const char* state : {R"("yes")", R"("Approved")", R"("pending")", "true", "1", "null"}) {
    CAPTURE(state);
    std::string text = std::string(R"({"web-tools": {"version": "1", "capabilities": {"network:fetch": )") +
                       state + "}}}";
    auto p = parse_permissions(text);
    REQUIRE_FALSE(p);
    CHECK(p.err().code == errc::invalid_value);
    CHECK_THAT(p.err().message,
               Catch::StartsWith("permissions.json: 'web-tools': capabilities.network:fetch: expected "
                                 "\"approved\" or \"denied\""));
  }
}

TEST_CASE("wrong permissions shapes are errors naming the place", "[policy][permissions]") {
  struct row {
    std::string text;
    errc code;
    std::string prefix;
  };
  std::vector<row> rows{
      {"[]", errc::invalid_type, "permissions.json: expected an object of extensions at the top level, got array"},
      {R"("x")", errc::invalid_type, "permissions.json: expected an object of extensions"},
      {R"({"a": 1})", errc::invalid_type, "permissions.json: 'a': expected an object, got number"},
      {R"({"a": {"capabilities": {}}})", errc::missing_field, "permissions.json: 'a': version: required"},
      {R"({"a": {"version": 1}})", errc::invalid_type, "permissions.json: 'a': version: expected a string, got number"},
      {R"({"a": {"version": "1", "capabilities": []}})", errc::invalid_type, "permissions.json: 'a': capabilities: expected an object, got array"},
      {R"({"a": {"version": "1", "folder": 3}})", errc::invalid_type, "permissions.json: 'a': folder: expected a string"},
      {R"({"a": {"version": "1", "approvedAt": null}})", errc::invalid_type, "permissions.json: 'a': approvedAt: expected a string"},
      {R"({"a": {"version": "1", "approvedBy": []}})", errc::invalid_type, "permissions.json: 'a': approvedBy: expected a string"},
      {"{\n  \"a\": {\n    \"version\": \"1\",,\n  }\n}", errc::parse_error, "permissions.json:3:20: invalid JSON: "},
      {R"({"a": )" + std::string(1000, '[') + std::string(1000, ']') + "}", errc::parse_error, "permissions.json:1:"},
  };
  for (const auto& r : rows) {
    CAPTURE(r.text.substr(0, 80));
    auto p = parse_permissions(r.text);
    REQUIRE_FALSE(p);
    CHECK(p.err().code == r.code);
    CHECK_THAT(p.err().message, Catch::StartsWith(r.prefix));
  }
}

TEST_CASE("unknown capability keys are kept, warned about, and grant nothing", "[policy][permissions]") {
  auto p = parse_permissions(R"({"a": {"version": "1", "capabilities":
      {"network:fech": "approved", "bogus:*": "approved", "filesystem:read": "approved"}}})");
  REQUIRE(p);
  REQUIRE(p->warnings.size() == 2);
  CHECK_THAT(p->warnings[0], Catch::Contains("'bogus:*'"));
  CHECK_THAT(p->warnings[1], Catch::Contains("'network:fech'"));
  CHECK_THAT(p->warnings[1], Catch::Contains("did you mean 'network:fetch'?"));
  CHECK_THAT(p->warnings[1], Catch::Contains("grants and denies nothing"));
  auto eff = effective_for(p->value.entries.at("a"), "1", security_level::standard);
  CHECK(eff.approved == set_of({capability::filesystem_read}));
  std::string text = serialize_permissions(p->value);
  CHECK_THAT(text, Catch::Contains("\"network:fech\": \"approved\""));
  CHECK_THAT(text, Catch::Contains("\"bogus:*\": \"approved\""));
}

TEST_CASE("an entry under a name no extension can have is warned about", "[policy][permissions]") {
  auto p = parse_permissions(R"({"Web-Tools": {"version": "1"}, "web-tools": {"version": "1"}})");
  REQUIRE(p);
  CHECK(p->value.entries.size() == 2);
  REQUIRE(p->warnings.size() == 1);
  CHECK_THAT(p->warnings[0], Catch::StartsWith("permissions.json: 'Web-Tools' is not a valid extension name"));
}

TEST_CASE("a version change asks again at paranoid and keeps approvals at other levels",
          "[policy][permissions]") {
  auto e = entry_with({{"network:fetch", approved}, {"filesystem:write", denied}});
  struct row {
    security_level level;
    std::string version;
    capability_set approved, denied;
  };
  const auto fetch = set_of({capability::network_fetch});
  const auto write = set_of({capability::filesystem_write});
  std::vector<row> rows{
      {security_level::paranoid, "1.0.0", fetch, write},
      {security_level::paranoid, "1.1.0", {}, {}},
      {security_level::standard, "1.0.0", fetch, write},
      {security_level::standard, "1.1.0", fetch, write},
      {security_level::trusted, "1.0.0", fetch, write},
      {security_level::trusted, "1.1.0", fetch, write},
      {security_level::yolo, "1.0.0", fetch, write},
      {security_level::yolo, "1.1.0", fetch, write},
  };
  for (const auto& r : rows) {
    CAPTURE(to_string(r.level), r.version);
    auto eff = effective_for(e, r.version, r.level);
    CHECK(eff.approved == r.approved);
    CHECK(eff.denied == r.denied);
  }
}

TEST_CASE("wildcards expand and deny wins over approve", "[policy][permissions]") {
  struct row {
    permission_entry entry;
    capability_set approved, denied;
  };
  using c = capability;
  std::vector<row> rows{
      {entry_with({{"network:*", approved}, {"network:fetch", denied}}),
       set_of({c::network_outbound, c::network_inbound, c::network_dns}), set_of({c::network_fetch})},
      {entry_with({{"network:outbound", approved}, {"network:fetch", denied}}),
       set_of({c::network_outbound}), set_of({c::network_fetch})},
      {entry_with({{"network:outbound", approved}}), set_of({c::network_outbound, c::network_fetch}), {}},
      {entry_with({{"filesystem:*", denied}, {"filesystem:read", approved}}), {},
       set_of({c::filesystem_read, c::filesystem_write, c::filesystem_watch})},
      {entry_with({{"ui:*", approved}}), set_of({c::ui_render, c::ui_notify}), {}},
      {entry_with({{"network:fetch", denied}, {"network:outbound", denied}}), {},
       set_of({c::network_fetch, c::network_outbound})},
  };
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CAPTURE(i);
    auto eff = effective_for(rows[i].entry, "1.0.0", security_level::standard);
    CHECK(eff.approved == rows[i].approved);
    CHECK(eff.denied == rows[i].denied);
    CHECK((eff.approved & eff.denied).empty());
  }
}

TEST_CASE("an entry applies only to the folder it was approved for", "[policy][permissions]") {
  permission_entry bound = entry_with({{"network:fetch", approved}});
  bound.folder = "/home/u/.dhara/extensions/web-tools";
  permission_entry unbound = entry_with({{"network:fetch", approved}});
  struct row {
    const permission_entry* entry;
    std::string name, folder, home;
    bool applies;
  };
  std::vector<row> rows{
      {&bound, "web-tools", "/home/u/.dhara/extensions/web-tools", "/home/u/.dhara", true},
      {&bound, "web-tools", "/home/u/.dhara/extensions/web-tools/", "/home/u/.dhara", false},
      {&bound, "web-tools", "/proj/.dhara/extensions/web-tools", "/home/u/.dhara", false},
      {&bound, "web-tools", "/home/u/.dhara/extensions/web-tools", "/elsewhere", true},
      {&bound, "Web-Tools", "/home/u/.dhara/extensions/web-tools", "/home/u/.dhara", false},
      {&unbound, "web-tools", "/home/u/.dhara/extensions/web-tools", "/home/u/.dhara", true},
      {&unbound, "web-tools", "/home/u/.dhara/extensions/web-tools", "/home/u/.dhara/", true},
      {&unbound, "web-tools", "/proj/.dhara/extensions/web-tools", "/home/u/.dhara", false},
      {&unbound, "web-tools", "/home/u/.dhara/extensions/web-tools2", "/home/u/.dhara", false},
      {&unbound, "@zosmaai/x", "/home/u/.dhara/extensions/@zosmaai/x", "/home/u/.dhara", true},
      {&unbound, "../web-tools", "/home/u/.dhara/web-tools", "/home/u/.dhara/extensions", false},
      {&unbound, "web-tools", "/extensions/web-tools", "", false},
      {&unbound, "web-tools", "/extensions/web-tools", "/", true},
  };
  for (const auto& r : rows) {
    CAPTURE(r.name, r.folder, r.home);
    CHECK(entry_applies_to(*r.entry, r.name, r.folder, r.home) == r.applies);
  }
}

TEST_CASE("record creates an entry and stamps it", "[policy][permissions]") {
  permissions p;
  auto e = record(p, "web-tools", "network:*", approved, "1.0.0", "/h/extensions/web-tools",
                  "2026-05-14T10:00:00Z", security_level::standard, nullptr);
  REQUIRE(e);
  REQUIRE(p.entries.count("web-tools") == 1);
  const auto& stored = p.entries.at("web-tools");
  CHECK(stored.version == "1.0.0");
  CHECK(stored.folder == "/h/extensions/web-tools");
  CHECK(stored.capabilities.at("network:*") == approved);  // stored as written
  CHECK(stored.approved_at == "2026-05-14T10:00:00Z");
  CHECK(stored.approved_by == "user");
  CHECK(e->capabilities == stored.capabilities);
  CHECK_THAT(serialize_permissions(p), Catch::Contains("\"network:*\": \"approved\""));
}

TEST_CASE("record updates an existing entry's states, version and time", "[policy][permissions]") {
  permissions p;
  REQUIRE(record(p, "web-tools", "network:fetch", approved, "1.0.0", "/f", "t1", security_level::standard, nullptr));
  REQUIRE(record(p, "web-tools", "filesystem:write", denied, "1.0.0", "/f", "t2", security_level::standard, nullptr));
  REQUIRE(record(p, "web-tools", "network:fetch", denied, "1.1.0", "/f", "t3", security_level::standard, nullptr));
  const auto& e = p.entries.at("web-tools");
  CHECK(e.capabilities.size() == 2);
  CHECK(e.capabilities.at("network:fetch") == denied);
  CHECK(e.capabilities.at("filesystem:write") == denied);
  CHECK(e.version == "1.1.0");
  CHECK(e.approved_at == "t3");
}

TEST_CASE("record refuses invalid patterns and names and changes nothing", "[policy][permissions]") {
  permissions p;
  REQUIRE(record(p, "web-tools", "network:fetch", approved, "1", "/f", "t", security_level::standard, nullptr));
  std::string before = serialize_permissions(p);
  for (const char* pattern : {"network:fech", "bogus:*", "*", "", "network:"}) {
    CAPTURE(pattern);
    auto r = record(p, "web-tools", pattern, approved, "2", "/g", "t2", security_level::standard, nullptr);
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::unknown_capability);
  }
  auto bad_name = record(p, "../evil", "network:fetch", approved, "1", "/f", "t", security_level::standard, nullptr);
  REQUIRE_FALSE(bad_name);
  CHECK(bad_name.err().code == errc::invalid_value);
  CHECK(serialize_permissions(p) == before);
}

TEST_CASE("record for another folder starts the entry over", "[policy][permissions]") {
  permissions p;
  REQUIRE(record(p, "web-tools", "filesystem:write", approved, "1", "/home/.dhara/extensions/web-tools", "t1", security_level::standard, nullptr));
  p.entries.at("web-tools").extra["note"] = "kept";
  REQUIRE(record(p, "web-tools", "network:fetch", approved, "1", "/proj/.dhara/extensions/web-tools", "t2", security_level::standard, nullptr));
  const auto& e = p.entries.at("web-tools");
  CHECK(e.folder == "/proj/.dhara/extensions/web-tools");
  CHECK(e.capabilities.size() == 1);
  CHECK(e.capabilities.count("filesystem:write") == 0);
  CHECK(e.extra.at("note") == "kept");
}

TEST_CASE("record binds a hand-written entry without folder and keeps its states", "[policy][permissions]") {
  auto parsed = parse_permissions(R"({"web-tools": {"version": "1.0.0",
                                       "capabilities": {"network:dns": "approved"}}})");
  REQUIRE(parsed);
  permissions p = parsed->value;
  REQUIRE(record(p, "web-tools", "network:fetch", approved, "1.0.0", "/h/extensions/web-tools", "t", security_level::standard, nullptr));
  const auto& e = p.entries.at("web-tools");
  CHECK(e.folder == "/h/extensions/web-tools");
  CHECK(e.capabilities.at("network:dns") == approved);
  CHECK(e.capabilities.at("network:fetch") == approved);
}

TEST_CASE("rebind_version forgets approvals only at paranoid", "[policy][permissions]") {
  auto e = entry_with({{"network:fetch", approved}});
  auto kept = e;
  rebind_version(kept, "2.0.0", security_level::standard);
  CHECK(kept.version == "2.0.0");
  CHECK(kept.capabilities.size() == 1);
  auto same = e;
  rebind_version(same, "1.0.0", security_level::paranoid);
  CHECK(same.capabilities.size() == 1);
  auto forgotten = e;
  rebind_version(forgotten, "2.0.0", security_level::paranoid);
  CHECK(forgotten.version == "2.0.0");
  CHECK(forgotten.capabilities.empty());
  CHECK(effective_for(forgotten, "2.0.0", security_level::paranoid).approved.empty());
}

TEST_CASE("record moves an entry to a new version as the level binds approvals", "[policy][permissions]") {
  for (security_level level : {security_level::standard, security_level::paranoid}) {
    CAPTURE(to_string(level));
    permissions p;
    REQUIRE(record(p, "web-tools", "network:fetch", approved, "1.0.0", "/f", "t1", level, nullptr));
    REQUIRE(record(p, "web-tools", "network:dns", approved, "1.0.0", "/f", "t1", level, nullptr));
    // One revocation for 2.0.0: at paranoid nothing given to 1.0.0 stays.
    REQUIRE(record(p, "web-tools", "network:dns", denied, "2.0.0", "/f", "t2", level, nullptr));
    const auto& e = p.entries.at("web-tools");
    CHECK(e.version == "2.0.0");
    CHECK(e.capabilities.at("network:dns") == denied);
    CHECK(e.capabilities.count("network:fetch") == (level == security_level::paranoid ? 0u : 1u));
  }
}

TEST_CASE("an approval holds as far as the manifest reached when it was given", "[policy][permissions]") {
  // At standard a new version keeps its approvals (DESIGN §3.2): one that widened
  // process.commands to `bash`, or dropped network.outbound, ran with them unasked (a review).
  using list = std::vector<std::string>;
  const capability_scope then{list{"api.example.com"}, list{"git"}};
  CHECK(widened(then, then).empty());
  CHECK(widened(then, {list{}, list{}}).empty());  // narrower
  CHECK(widened(then, {list{"api.example.com", "evil.example"}, list{"git"}}) ==
        set_of({capability::network_fetch, capability::network_outbound}));
  CHECK(widened(then, {std::nullopt, list{"git"}}) == set_of({capability::network_fetch, capability::network_outbound}));
  CHECK(widened(then, {list{"api.example.com"}, list{"git", "bash"}}) == set_of({capability::process_spawn}));
  CHECK(widened(then, {list{"api.example.com"}, std::nullopt}) == set_of({capability::process_spawn}));
  CHECK(widened({std::nullopt, std::nullopt}, {list{"x"}, list{"y"}}).empty());  // anything already

  auto e = entry_with({{"network:fetch", approved}, {"process:spawn", approved}, {"filesystem:read", approved},
                       {"network:dns", denied}});
  e.scope = then;
  const capability_scope wider_commands{list{"api.example.com"}, list{"git", "bash"}};
  for (security_level level : {security_level::standard, security_level::trusted}) {
    auto eff = effective_for(e, "2.0.0", level, &wider_commands);
    CHECK(eff.approved == set_of({capability::network_fetch, capability::filesystem_read}));
    CHECK(eff.denied == set_of({capability::network_dns}));
  }
  const capability_scope any_host{std::nullopt, list{"git"}};
  CHECK(effective_for(e, "1.0.0", security_level::standard, &any_host).approved ==
        set_of({capability::process_spawn, capability::filesystem_read}));
  CHECK(effective_for(e, "1.0.0", security_level::standard, &then).approved ==
        set_of({capability::network_fetch, capability::process_spawn, capability::filesystem_read}));
  // A hand-written entry records no scope, and is compared with nothing.
  auto hand = e;
  hand.scope.reset();
  CHECK(effective_for(hand, "2.0.0", security_level::standard, &wider_commands).approved.contains(capability::process_spawn));
}

TEST_CASE("recording under a wider scope forgets the approvals it widens", "[policy][permissions]") {
  using list = std::vector<std::string>;
  const capability_scope v1{list{"api.example.com"}, list{"git"}};
  const capability_scope v2{list{"api.example.com"}, list{"git", "bash"}};
  permissions p;
  for (const char* cap : {"network:fetch", "process:*", "filesystem:read"})
    REQUIRE(record(p, "tools", cap, approved, "1.0.0", "/f", "t1", security_level::standard, &v1));
  REQUIRE(record(p, "tools", "process:signal", denied, "1.0.0", "/f", "t1", security_level::standard, &v1));
  CHECK(p.entries.at("tools").scope == v1);
  // One approval for 2.0.0, which may run bash: `process:*`, given for git alone, does not
  // come back with it; the denial stays.
  REQUIRE(record(p, "tools", "network:dns", approved, "2.0.0", "/f", "t2", security_level::standard, &v2));
  const auto& e = p.entries.at("tools");
  CHECK(e.scope == v2);
  CHECK(e.capabilities == std::map<std::string, permission_state>{{"network:fetch", approved}, {"filesystem:read", approved},
                                                                    {"process:signal", denied}, {"network:dns", approved}});
  // Approved again under v2, it holds under v2.
  REQUIRE(record(p, "tools", "process:spawn", approved, "2.0.0", "/f", "t3", security_level::standard, &v2));
  CHECK(effective_for(p.entries.at("tools"), "2.0.0", security_level::standard, &v2).approved.contains(capability::process_spawn));
  // Without a manifest at hand (nullptr) the recorded scope stays.
  REQUIRE(record(p, "tools", "network:dns", denied, "2.0.0", "/f", "t4", security_level::standard, nullptr));
  CHECK(p.entries.at("tools").scope == v2);
}

TEST_CASE("the recorded scope is read and written as the file holds it", "[policy][permissions]") {
  auto parsed = parse_permissions(R"({"t": {"version": "1", "capabilities": {"process:spawn": "approved"},
      "scope": {"network.outbound": null, "process.commands": ["git", "ls"]}}})");
  REQUIRE(parsed);
  const auto& e = parsed->value.entries.at("t");
  REQUIRE(e.scope);
  CHECK_FALSE(e.scope->network_domains);
  CHECK(e.scope->process_commands == std::vector<std::string>{"git", "ls"});
  const std::string text = serialize_permissions(parsed->value);
  CHECK(text.find(R"("network.outbound": null)") != std::string::npos);
  auto again = parse_permissions(text);
  REQUIRE(again);
  CHECK(again->value.entries.at("t").scope == e.scope);
  CHECK(serialize_permissions(again->value) == text);
  // A key left out reached nothing: any list now is wider.
  auto partial = parse_permissions(R"({"t": {"version": "1", "capabilities": {}, "scope": {}}})");
  REQUIRE(partial);
  CHECK(partial->value.entries.at("t").scope == capability_scope{std::vector<std::string>{}, std::vector<std::string>{}});
  for (const char* bad : {R"({"t": {"version": "1", "scope": []}})",
                          R"({"t": {"version": "1", "scope": {"process.commands": "git"}}})",
                          R"({"t": {"version": "1", "scope": {"process.commands": [1]}}})",
                          R"({"t": {"version": "1", "scope": {"network.inbound": []}}})"}) {
    INFO(bad);
    auto r = parse_permissions(bad);
    REQUIRE_FALSE(r);
    CHECK(r.err().message.find("scope") != std::string::npos);
  }
}

TEST_CASE("reset forgets an extension", "[policy][permissions]") {
  auto parsed = parse_permissions(design_example);
  REQUIRE(parsed);
  permissions p = parsed->value;
  CHECK(reset(p, "web-tools"));
  CHECK(p.entries.empty());
  CHECK_FALSE(reset(p, "web-tools"));
  CHECK(serialize_permissions(p) == "{}\n");
}

TEST_CASE("permission states have names", "[policy][permissions]") {
  CHECK(to_string(approved) == "approved");
  CHECK(to_string(denied) == "denied");
}

TEST_CASE("serialization never throws on bytes that are not UTF-8", "[policy][permissions]") {
  permissions p;
  REQUIRE(record(p, "web-tools", "network:fetch", approved, "1", "/home/caf\xe9", "t", security_level::standard, nullptr));
  std::string text = serialize_permissions(p);
  CHECK_THAT(text, Catch::Contains("/home/caf\xef\xbf\xbd"));
  CHECK(parse_permissions(text));
}
