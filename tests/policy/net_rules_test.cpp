// URL parsing, domain lists and refusal of private addresses in every spelling.
#include <catch2/catch.hpp>

#include "policy/net_rules.hpp"

using namespace dhara::policy;

TEST_CASE("URLs parse into scheme, host, port and path", "[policy][net]") {
  auto u = parse_url("HTTPS://User:pw@API.Example.COM.:8443/data?q=1");
  REQUIRE(u);
  CHECK(u->scheme == "https");
  CHECK(u->host == "api.example.com");
  CHECK(u->port == 8443);
  CHECK(u->path == "/data?q=1");
  CHECK(parse_url("http://[::1]:80/")->host == "::1");
  CHECK(parse_url("http://example.com")->port == 80);
  for (std::string_view bad : {"ftp://x", "file:///etc/passwd", "example.com", "http://", "http://a b/",
                               "http://x:99999/", "http://x:0/", "http://exa%6dple.com/", "http://a\\b/",
                               "http://[::1/"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_url(bad));
  }
}

TEST_CASE("check_url refuses a URL in parse_url's words and lowers hosts of any length", "[policy][net]") {
  auto absent = compile_domain_rules(std::nullopt);
  for (std::string_view bad : {"ftp://x", "example.com", "http://", "http://a b/", "http://x:99999/",
                               "http://exa%6dple.com/", "http://a\\b/", "http://[::1/", "http://[::1]x/", "http://.../"}) {
    CAPTURE(bad);
    auto parsed = parse_url(bad);
    REQUIRE_FALSE(parsed);
    decision d = check_url(absent, bad);
    CHECK_FALSE(d.allowed());
    CHECK(d.reason == parsed.err().message);
  }
  CHECK(check_url(absent, "ftp://x").reason == "the URL 'ftp://x' does not use http or https");
  // The host part ends at '/', '?' or '#'; what follows may hold any character.
  auto listed = compile_domain_rules(std::vector<std::string>{"example.com", "*.example.org"});
  CHECK(check_url(listed, "https://EXAMPLE.com?q=a b").allowed());
  CHECK(check_url(listed, "HtTp://example.COM.#%").allowed());
  CHECK_FALSE(check_url(listed, "https://example.com.evil?x").allowed());
  // Hosts past the 256 bytes lowered on the stack are lowered on the heap, the same way.
  for (std::size_t label : {200, 243, 244, 245, 400}) {
    CAPTURE(label);
    const std::string host = std::string(label, 'A') + ".EXAMPLE.ORG";
    CHECK(check_url(listed, "https://" + host + "/x").allowed());
    CHECK(parse_url("https://" + host)->host == std::string(label, 'a') + ".example.org");
    decision d = check_url(listed, "https://" + host + ".net/");
    CHECK_FALSE(d.allowed());
    CHECK(d.reason.find("'" + std::string(label, 'a') + ".example.org.net'") != std::string::npos);
  }
}

TEST_CASE("IP literals are recognised in every spelling", "[policy][net]") {
  struct row { std::string_view host; std::string_view canonical; bool refused; };
  const row table[] = {
      {"127.0.0.1", "127.0.0.1", true},
      {"127.1", "127.0.0.1", true},
      {"2130706433", "127.0.0.1", true},
      {"0x7f000001", "127.0.0.1", true},
      {"0177.0.0.1", "127.0.0.1", true},
      {"0x7f.1", "127.0.0.1", true},
      {"::ffff:127.0.0.1", "127.0.0.1", true},
      {"[::ffff:7f00:1]", "127.0.0.1", true},
      {"::1", "::1", true},
      {"::", "::", true},
      {"0.0.0.0", "0.0.0.0", true},
      {"10.1.2.3", "10.1.2.3", true},
      {"100.64.0.1", "100.64.0.1", true},
      {"100.128.0.1", "100.128.0.1", false},
      {"169.254.169.254", "169.254.169.254", true},
      {"172.16.0.1", "172.16.0.1", true},
      {"172.32.0.1", "172.32.0.1", false},
      {"192.168.1.1", "192.168.1.1", true},
      {"fd00::1", "fd00::1", true},
      {"fe80::1", "fe80::1", true},
      {"64:ff9b::7f00:1", "64:ff9b::7f00:1", true},
      {"8.8.8.8", "8.8.8.8", false},
      {"2001:4860:4860::8888", "2001:4860:4860::8888", false},
  };
  for (const row& r : table) {
    CAPTURE(r.host);
    auto ip = parse_ip_literal(r.host);
    REQUIRE(ip);
    CHECK(ip->to_string() == r.canonical);
    CHECK(is_refused_address(*ip) == r.refused);
  }
  CHECK_FALSE(parse_ip_literal("example.com"));
  CHECK_FALSE(parse_ip_literal("deadbeef"));
  CHECK_FALSE(parse_ip_literal("1.2.3.4.5"));
}

TEST_CASE("a listed host the install review explains: another spelling or a refused address", "[policy][net]") {
  const std::string refused = ", a loopback, private or link-local address";
  CHECK(listed_host_note("2130706433") == "the address 127.0.0.1" + refused);
  CHECK(listed_host_note("0x7f.1") == "the address 127.0.0.1" + refused);
  CHECK(listed_host_note("127.0.0.1") == "the address 127.0.0.1" + refused);
  CHECK(listed_host_note("[::1]") == "the address ::1" + refused);
  CHECK(listed_host_note("10.0.0.5") == "the address 10.0.0.5" + refused);
  CHECK(listed_host_note("134744072") == "the address 8.8.8.8");  // public, spelled otherwise
  CHECK(listed_host_note("8.8.8.8").empty());
  CHECK(listed_host_note("[2001:4860:4860::8888]").empty());
  CHECK(listed_host_note("api.example.com").empty());
  CHECK(listed_host_note("*.example.com").empty());
  const std::string local = "a name of this machine or the local network, not of a public host";
  CHECK(listed_host_note("LocalHost.") == local);
  CHECK(listed_host_note("printer.local") == local);
  CHECK(listed_host_note("localhost.example.com").empty());
}

TEST_CASE("domain lists: exact, *.suffix, empty allows none, absent allows public", "[policy][net]") {
  auto listed = compile_domain_rules(std::vector<std::string>{"api.example.com", "*.cdn.example.org", "10.0.0.5"});
  CHECK(check_url(listed, "https://api.example.com/data").allowed());
  CHECK(check_url(listed, "https://API.example.com./data").allowed());
  CHECK_FALSE(check_url(listed, "https://evil.com/").allowed());
  CHECK_FALSE(check_url(listed, "https://api.example.com.evil.com/").allowed());
  CHECK(check_url(listed, "https://a.cdn.example.org/x").allowed());
  CHECK_FALSE(check_url(listed, "https://cdn.example.org/x").allowed());  // *.x is not x itself
  CHECK(check_url(listed, "http://10.0.0.5/").allowed());                 // private, listed literally
  CHECK(check_url(listed, "http://0x0a000005/").allowed());               // same address, other spelling
  CHECK_FALSE(check_url(listed, "http://10.0.0.6/").allowed());

  auto empty = compile_domain_rules(std::vector<std::string>{});
  decision none = check_url(empty, "https://api.example.com/");
  CHECK_FALSE(none.allowed());
  CHECK(none.reason.find("empty") != std::string::npos);

  auto absent = compile_domain_rules(std::nullopt);
  CHECK(check_url(absent, "https://example.com/").allowed());
  CHECK(check_url(absent, "http://8.8.8.8/").allowed());
  for (std::string_view url : {"http://127.0.0.1/", "http://2130706433/", "http://[::1]/", "http://localhost:8080/",
                               "http://foo.localhost/", "http://169.254.169.254/latest/meta-data",
                               "http://[::ffff:10.0.0.1]/", "ftp://example.com/", "https://x@127.1/"}) {
    CAPTURE(url);
    decision d = check_url(absent, url);
    CHECK_FALSE(d.allowed());
    CHECK_FALSE(d.reason.empty());
  }
}

TEST_CASE("localhost is allowed only when listed by name", "[policy][net]") {
  auto rules = compile_domain_rules(std::vector<std::string>{"localhost"});
  CHECK(check_url(rules, "http://localhost:3000/").allowed());
  CHECK_FALSE(check_url(rules, "http://127.0.0.1:3000/").allowed());
}

TEST_CASE("hosts a client reads as loopback are never taken for public names", "[policy][net]") {
  // Found by a review: each was allowed as a public name, and curl or Node's fetch reached a
  // loopback service with it.
  const auto open = compile_domain_rules(std::nullopt);
  struct row {
    std::string url, reason_has;
  };
  const std::vector<row> rows = {
      {"http://" + std::string(70, '0') + "177.0.0.1/", "loopback, private or link-local"},  // no length cap
      {"http://0x" + std::string(70, '0') + "7f000001/", "loopback, private or link-local"},
      {"http://\xef\xbd\x8c\xef\xbd\x8f\xef\xbd\x83\xef\xbd\x81\xef\xbd\x8c\xef\xbd\x88\xef\xbd\x8f\xef\xbd\x93\xef\xbd\x94/",
       "not ASCII"},                                                  // fullwidth localhost
      {"http://127\xe3\x80\x82" "0\xe3\x80\x82" "0\xe3\x80\x82" "1/", "not ASCII"},  // U+3002 as dots
      {"http://0x:18080/", "ends in a number"},                     // 0.0.0.0 to WHATWG
      {"http://0x.0x.0x.0x/", "ends in a number"},
      {"http://example.0x/", "ends in a number"},
      {"http://127.0.0.1:80:80/", "outside brackets"},
      {"http://::1/", "outside brackets"},
      {"http://[::f&ff:127.0.0.1]/", "no IPv6 address"},
      {"http://a*b.example/", "no host name holds"},
  };
  for (const row& r : rows) {
    INFO(r.url);
    const decision d = check_url(open, r.url);
    INFO(d.reason);
    CHECK_FALSE(d.allowed());
    CHECK(d.reason.find(r.reason_has) != std::string::npos);
    if (r.reason_has != "loopback, private or link-local") CHECK_FALSE(parse_url(r.url));  // refused alike
  }
  // Names with digits, underscores and punycode stay names.
  for (const char* ok : {"http://a1.example/", "http://_srv.example.com/", "http://xn--bcher-kva.example/",
                         "http://example.com./", "http://[::ffff:8.8.8.8]/", "http://8.8.8.8/"})
    CHECK(check_url(open, ok).allowed());
}

namespace {

// The answers a check is given about host names, as the checker gives them: here fixed, and
// counting what was asked.
struct fixed_answers final : host_lookup {
  std::vector<std::pair<std::string, host_addresses>> known;
  mutable std::vector<std::string> asked;
  const host_addresses* find(std::string_view host) const override {
    asked.emplace_back(host);
    for (const auto& [name, answer] : known)
      if (name == host) return &answer;
    return nullptr;
  }
};

}  // namespace

TEST_CASE("a host that is not listed is vetted by what it resolves to", "[policy][net]") {
  auto ip = [](const char* s) { return *parse_ip_literal(s); };
  fixed_answers hosts;
  hosts.known = {{"public.example", {{ip("93.184.216.34"), ip("2606:2800:220:1::1")}, {}}},
                 {"rebind.example", {{ip("93.184.216.34"), ip("127.0.0.1")}, {}}},
                 {"metadata.example", {{ip("169.254.169.254")}, {}}},
                 {"v6.example", {{ip("fd00::1")}, {}}},
                 {"gone.example", {{}, "Name or service not known"}}};
  const domain_rules open = compile_domain_rules(std::nullopt);

  CHECK(check_url(open, "https://Public.Example./x", &hosts).allowed());
  CHECK(hosts.asked == std::vector<std::string>{"public.example"});  // lowered, no trailing dot
  for (const char* refused : {"http://rebind.example/", "http://metadata.example/", "http://v6.example/"}) {
    const decision d = check_url(open, refused, &hosts);
    INFO(refused << ": " << d.reason);
    CHECK(d.verdict == verdict_kind::deny);
    CHECK(d.reason.find("a loopback, private or link-local address; list the host by name") != std::string::npos);
  }
  const decision gone = check_url(open, "http://gone.example/", &hosts);
  CHECK(gone.verdict == verdict_kind::deny);
  CHECK(gone.reason == "the host 'gone.example' could not be resolved (Name or service not known); a host that is not "
                       "listed must resolve to a public address: check its spelling, or list it in network.outbound");

  // Not known yet: the verdict says which host to look up, and is no allow.
  const decision unknown = check_url(open, "http://New.Example:8080/", &hosts);
  CHECK(unknown.verdict == verdict_kind::lookup);
  CHECK(unknown.resolved == "new.example");
  CHECK_FALSE(unknown.allowed());

  // Listed by name: never looked up (a listed name may be local, DESIGN §4); not listed
  // against a list: refused without a lookup; IP literals and local names as before.
  hosts.asked.clear();
  const domain_rules list = compile_domain_rules(std::vector<std::string>{"rebind.example", "*.corp.example"});
  CHECK(check_url(list, "http://rebind.example/", &hosts).allowed());
  CHECK(check_url(list, "http://git.corp.example/", &hosts).allowed());
  CHECK_FALSE(check_url(list, "http://public.example/", &hosts).allowed());
  CHECK_FALSE(check_url(open, "http://127.0.0.1/", &hosts).allowed());
  CHECK_FALSE(check_url(open, "http://localhost/", &hosts).allowed());
  CHECK(check_url(open, "http://8.8.8.8/", &hosts).allowed());
  CHECK(hosts.asked.empty());

  // Without answers to ask (the host API's own pre-check): a name is allowed as written.
  CHECK(check_url(open, "http://gone.example/").allowed());
}
