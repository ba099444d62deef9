// The OS sandbox profile: capabilities to kernel rules, deny beats grant, the JSON form.
#include <catch2/catch.hpp>

#include <algorithm>

#include "policy/path_rules.hpp"
#include "policy/sandbox_profile.hpp"

using namespace dhara::policy;

namespace {

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

sandbox_inputs base_inputs(std::initializer_list<capability> caps) {
  sandbox_inputs in;
  for (capability c : caps) in.granted.insert(c);
  in.allowed_paths = {"/home/u/proj"};
  in.denied_paths = {"/etc/shadow", "/home/u/.ssh", "/home/u/proj/secrets", "/home/u/proj/.env"};
  in.extension_folder = "/home/u/.dhara/extensions/probe";
  in.interpreter = "/usr/bin/python3.11";
  in.interpreter_loader = "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2";
  in.temp_dir = "/tmp/dhara-sandbox-abc";
  return in;
}

}  // namespace

TEST_CASE("no capability: system dirs, curated /etc, own folder, temp dir only", "[policy][sandbox]") {
  sandbox_profile p = compute_sandbox_profile(base_inputs({}));
  CHECK(has(p.read, "/usr"));
  CHECK(has(p.read, "/etc/ld.so.cache"));
  CHECK(has(p.read, "/etc/resolv.conf"));
  CHECK(has(p.read, "/etc/python3.11"));
  CHECK(has(p.read, "/home/u/.dhara/extensions/probe"));
  CHECK_FALSE(has(p.read, "/etc"));
  CHECK_FALSE(has(p.read, "/etc/shadow"));
  CHECK_FALSE(has(p.read, "/home/u/proj"));
  CHECK_FALSE(has(p.write, "/home/u/proj"));
  CHECK(has(p.write, "/tmp/dhara-sandbox-abc"));
  CHECK(has(p.write, "/dev/null"));
  CHECK(p.temp_dir == "/tmp/dhara-sandbox-abc");
  // Without process:spawn only the interpreter and its loader execute.
  CHECK(p.execute == std::vector<std::string>{"/usr/bin/python3.11", "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"});
  CHECK(p.mask.empty());  // nothing denied lies inside what is granted
  CHECK(p.network == sandbox_network{});
  CHECK_FALSE(p.spawn);
}

TEST_CASE("filesystem:read grants the allowed paths read-only, write adds write", "[policy][sandbox]") {
  sandbox_profile r = compute_sandbox_profile(base_inputs({capability::filesystem_read}));
  CHECK(has(r.read, "/home/u/proj"));
  CHECK_FALSE(has(r.write, "/home/u/proj"));
  sandbox_profile w = compute_sandbox_profile(base_inputs({capability::filesystem_write}));
  CHECK(has(w.write, "/home/u/proj"));
  CHECK_FALSE(has(w.read, "/home/u/proj"));  // write covers read
}

TEST_CASE("a denied path inside a granted one becomes a mask, one above removes the grant", "[policy][sandbox]") {
  sandbox_inputs in = base_inputs({capability::filesystem_read});
  in.denied_paths.push_back("/home/u/proj/secrets/deeper");  // already under a mask
  sandbox_profile p = compute_sandbox_profile(in);
  CHECK(p.mask == std::vector<std::string>{"/home/u/proj/.env", "/home/u/proj/secrets"});

  in.denied_paths.push_back("/home/u");  // denies the whole allowed path
  p = compute_sandbox_profile(in);
  CHECK_FALSE(has(p.read, "/home/u/proj"));
  CHECK_FALSE(has(p.read, "/home/u/.dhara/extensions/probe"));
  CHECK(p.mask.empty());
}

TEST_CASE("prefixes are path segments, not strings", "[policy][sandbox]") {
  sandbox_inputs in = base_inputs({capability::filesystem_read});
  in.denied_paths = {"/home/u/projects", "/home/u/pro"};
  sandbox_profile p = compute_sandbox_profile(in);
  CHECK(has(p.read, "/home/u/proj"));
  CHECK(p.mask.empty());
}

TEST_CASE("the whole filesystem allowed still masks /etc/shadow and ~/.ssh", "[policy][sandbox]") {
  sandbox_inputs in = base_inputs({capability::filesystem_read});
  in.allowed_paths = {"/"};
  sandbox_profile p = compute_sandbox_profile(in);
  CHECK(p.read == std::vector<std::string>{"/"});  // everything else is under it
  CHECK(has(p.mask, "/etc/shadow"));
  CHECK(has(p.mask, "/home/u/.ssh"));
}

TEST_CASE("denied globs: last-segment globs are masked at launch, others are named", "[policy][sandbox]") {
  sandbox_inputs in = base_inputs({capability::filesystem_read});
  in.denied_globs = {"/home/u/proj/.dhara/config.json*", "/home/u/proj/**/*.pem", "/proc/**/root", "/home/**/id_*"};
  sandbox_profile p = compute_sandbox_profile(in);
  CHECK(p.mask_globs == std::vector<std::string>{"/home/u/proj/.dhara/config.json*"});
  REQUIRE(p.unenforced.size() == 2);
  CHECK(p.unenforced[0].find("/home/u/proj/**/*.pem") != std::string::npos);
  CHECK(p.unenforced[1].find("/home/**/id_*") != std::string::npos);
}

TEST_CASE("a denied glob's note names only grants its last segment can match", "[policy][sandbox]") {
  // `~/.dhara/config.json*` matches entries directly in ~/.dhara: not the extensions folder
  // beside them, nor anything below it; a grant it does match is named.
  sandbox_inputs in = base_inputs({});
  in.denied_globs = {"/home/u/.dhara/config.json*"};
  in.extension_folder = "/home/u/.dhara/extensions";
  CHECK(compute_sandbox_profile(in).unenforced.empty());
  in.extension_folder = "/home/u/.dhara/extensions/probe";
  CHECK(compute_sandbox_profile(in).unenforced.empty());
  in.extension_folder = "/home/u/.dhara/config.json.d";
  const sandbox_profile p = compute_sandbox_profile(in);
  REQUIRE(p.unenforced.size() == 1);
  CHECK(p.unenforced[0] == "denied '/home/u/.dhara/config.json*' may match inside granted "
                           "'/home/u/.dhara/config.json.d': enforced by the broker only");
}

TEST_CASE("denied globs are glob(3) patterns: an escaped folder is taken literally", "[policy][sandbox]") {
  sandbox_inputs in = base_inputs({capability::filesystem_write});
  in.allowed_paths = {"/home/u/app[2]", "/home/u/proj"};
  // The project `app[2]`'s config (glob3_pattern escapes the folder), and a folder named `pro*`.
  in.denied_globs = {"/home/u/app\\[2]/.dhara/config.json*", "/home/u/pro\\*/x/*.key"};
  sandbox_profile p = compute_sandbox_profile(in);
  CHECK(p.mask_globs == std::vector<std::string>{"/home/u/app\\[2]/.dhara/config.json*"});
  CHECK(p.unenforced.empty());  // `pro*` is neither in `proj` nor above it
}

TEST_CASE("capabilities map to network and spawn as DESIGN §9 says", "[policy][sandbox]") {
  struct row {
    capability cap;
    sandbox_network net;
    bool spawn;
  };
  const row table[] = {
      {capability::network_outbound, {true, false, false}, false},
      {capability::network_fetch, {true, false, false}, false},
      {capability::network_inbound, {false, true, false}, false},
      {capability::network_dns, {false, false, true}, false},
      {capability::process_spawn, {}, true},
      {capability::process_signal, {}, false},
      {capability::secrets_env, {}, false},
  };
  for (const row& r : table) {
    INFO(to_string(r.cap));
    sandbox_profile p = compute_sandbox_profile(base_inputs({r.cap}));
    CHECK(p.network == r.net);
    CHECK(p.spawn == r.spawn);
  }
}

TEST_CASE("process:spawn executes system dirs and the extension folder", "[policy][sandbox]") {
  sandbox_profile p = compute_sandbox_profile(base_inputs({capability::process_spawn}));
  CHECK(has(p.execute, "/usr"));
  CHECK(has(p.execute, "/home/u/.dhara/extensions/probe"));
  CHECK_FALSE(has(p.execute, "/usr/bin/python3.11"));  // covered by /usr
  CHECK_FALSE(has(p.read, "/usr"));
}

TEST_CASE("an interpreter outside /usr brings its install prefix", "[policy][sandbox]") {
  sandbox_inputs in = base_inputs({});
  in.interpreter = "/home/u/.pyenv/versions/3.11.7/bin/python3.11";
  in.home = "/home/u";
  in.read_only_paths = {"/home/u/.dhara/extensions"};
  sandbox_profile p = compute_sandbox_profile(in);
  CHECK(has(p.read, "/home/u/.pyenv/versions/3.11.7"));
  CHECK(has(p.execute, "/home/u/.pyenv/versions/3.11.7/bin/python3.11"));
}

TEST_CASE("an extension's own program brings its folder, not the folder of every extension", "[policy][sandbox]") {
  // A native extension runs `./tool` from its folder: the parent of that folder's parent is
  // `~/.dhara`, and `bin/tool` in it would make the folder its "prefix" too.
  for (const char* exe : {"/home/u/.dhara/extensions/probe/tool", "/home/u/.dhara/extensions/probe/bin/tool"}) {
    INFO(exe);
    sandbox_inputs in = base_inputs({});
    in.read_only_paths = {"/home/u/.dhara/extensions"};
    in.interpreter = exe;
    sandbox_profile p = compute_sandbox_profile(in);
    CHECK(p.read == std::vector<std::string>{"/bin", "/dev/random", "/dev/urandom", "/etc/ca-certificates",
                                             "/etc/gai.conf", "/etc/group", "/etc/host.conf", "/etc/hosts",
                                             "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
                                             "/etc/localtime", "/etc/mime.types", "/etc/nsswitch.conf",
                                             "/etc/passwd", "/etc/resolv.conf", "/etc/ssl/certs", "/etc/ssl/openssl.cnf",
                                             "/home/u/.dhara/extensions/probe", "/lib", "/lib32", "/lib64",
                                             "/sbin", "/usr"});
    CHECK(has(p.execute, exe));
  }
}

TEST_CASE("a program outside /usr brings no prefix that holds the home, a project or a denied path", "[policy][sandbox]") {
  struct row {
    const char* exe;
    const char* prefix;
    bool granted;
  };
  const row table[] = {
      {"/home/u/bin/tool", "/home/u", false},           // ~/bin: the prefix would be the whole home
      {"/home/bin/tool", "/home", false},               // above the home
      {"/data/u/bin/tool", "/data/u", false},           // the home through a link: holds the resolved ~/.ssh
      {"/home/u/work/bin/node", "/home/u/work", false}, // holds the project /home/u/work/proj
      {"/opt/tools/node", "/opt", false},               // not in a `bin` folder
      {"/bin/tool", "/", false},
      {"/home/u/work/proj/tools/bin/node", "/home/u/work/proj/tools", true},  // inside the project
      {"/opt/node-v20/bin/node", "/opt/node-v20", true},
  };
  for (const row& r : table) {
    INFO(r.exe);
    sandbox_inputs in = base_inputs({});
    in.home = "/home/u";
    in.allowed_paths = {"/home/u/work/proj"};
    in.denied_paths.push_back("/data/u/.ssh");
    in.interpreter = r.exe;
    sandbox_profile p = compute_sandbox_profile(in);
    CHECK(has(p.read, r.prefix) == r.granted);
    CHECK(has(p.execute, r.exe));
  }
}

TEST_CASE("a program or loader in another extension's folder is not granted, nor its folder", "[policy][sandbox]") {
  // `../victim/bin/node` as a command: the prefix would be victim's whole folder.
  sandbox_inputs in = base_inputs({});
  in.home = "/home/u";
  in.read_only_paths = {"/home/u/.dhara/extensions"};
  in.interpreter = "/home/u/.dhara/extensions/victim/bin/node";
  sandbox_profile p = compute_sandbox_profile(in);
  CHECK_FALSE(has(p.read, "/home/u/.dhara/extensions/victim"));
  CHECK_FALSE(has(p.execute, "/home/u/.dhara/extensions/victim/bin/node"));
  // Its loader likewise; the extension's own folder may hold either.
  in.interpreter = "/home/u/.dhara/extensions/probe/tool";
  in.interpreter_loader = "/home/u/.dhara/extensions/victim/ld.so";
  p = compute_sandbox_profile(in);
  CHECK(has(p.execute, "/home/u/.dhara/extensions/probe/tool"));  // its own program
  CHECK_FALSE(has(p.execute, "/home/u/.dhara/extensions/victim/ld.so"));
  in.interpreter_loader = "/home/u/.dhara/extensions/probe/ld.so";
  CHECK(has(compute_sandbox_profile(in).execute, "/home/u/.dhara/extensions/probe/ld.so"));
}

TEST_CASE("a loader outside the system folders and the extension's own is not granted", "[policy][sandbox]") {
  // A native program names its loader (PT_INTERP) itself; its grant reads and executes it.
  for (const char* loader : {"/home/u/.aws/credentials", "/home/u/proj/src", "/opt/x/ld.so"}) {
    INFO(loader);
    sandbox_inputs in = base_inputs({});
    in.interpreter_loader = loader;
    sandbox_profile p = compute_sandbox_profile(in);
    CHECK_FALSE(has(p.execute, loader));
    CHECK_FALSE(has(p.read, loader));
  }
  sandbox_inputs in = base_inputs({});
  in.interpreter_loader = "/lib64/ld-linux-x86-64.so.2";  // on a system whose /lib64 is not a link
  CHECK(has(compute_sandbox_profile(in).execute, "/lib64/ld-linux-x86-64.so.2"));
}

TEST_CASE("the launcher follows links on the fixed system grants only", "[policy][sandbox]") {
  // Every grant a profile makes whatever its inputs is a fixed system path, where links are
  // part of the system (/bin into /usr): a fixed grant added without being listed would stop
  // every extension from starting on a merged-/usr system.
  sandbox_inputs in = base_inputs({capability::process_spawn, capability::network_outbound});
  in.allowed_paths.clear();
  in.extension_folder.clear();
  in.interpreter = "/usr/bin/python3.11";
  in.interpreter_loader.clear();
  in.temp_dir.clear();
  sandbox_profile p = compute_sandbox_profile(in);
  std::vector<std::string> fixed;
  for (auto* l : {&p.read, &p.write, &p.execute}) fixed.insert(fixed.end(), l->begin(), l->end());
  std::erase(fixed, "/usr/bin/python3.11");  // resolved before it was given
  CHECK(fixed.size() > 20);
  for (const std::string& g : fixed) CHECK(sandbox_path_follows_links(g));
  for (const char* g : {"/bin", "/lib64", "/etc/resolv.conf", "/etc/localtime", "/dev/null", "/etc/python3.11"})
    CHECK(sandbox_path_follows_links(g));
  // Everything else was resolved when the profile was computed: the extension's folder, its
  // temp dir, the allowed paths, the interpreter, its loader and prefix.
  for (const char* g : {"/home/u/proj", "/tmp/dhara-ext-abc/tmp", "/home/u/.dhara/extensions/probe",
                        "/usr/bin/python3.11", "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "/usr/bin",
                        "/etc", "/etc/python3.11/sitecustomize.py", "/etc/shadow", "/dev", "/", "/etc/pythonic/x",
                        "/home/u/etc/python3.11"})
    CHECK_FALSE(sandbox_path_follows_links(g));
}

TEST_CASE("granted comes from approvals the manifest declares, minus denials", "[policy][sandbox]") {
  extension_policy e;
  e.declared.insert(capability::filesystem_read);
  e.declared.insert(capability::network_fetch);
  e.approved_by_user.insert(capability::filesystem_read);
  e.approved_by_user.insert(capability::network_fetch);
  e.approved_by_user.insert(capability::process_spawn);  // not declared
  e.denied.insert(capability::network_fetch);
  capability_set g = sandbox_granted(e);
  CHECK(g.contains(capability::filesystem_read));
  CHECK_FALSE(g.contains(capability::network_fetch));
  CHECK_FALSE(g.contains(capability::process_spawn));
}

TEST_CASE("inputs from a snapshot: plain entries as paths, globs apart", "[policy][sandbox]") {
  policy_snapshot s;
  s.paths.allowed = {{"~/proj", "/home/u/proj", false, ""}, {"/data/*", "/data/*", true, "/data"}};
  s.paths.denied = {{"built-in", "/etc/shadow", false, ""}, {"x", "/home/u/proj/*.key", true, "/home/u/proj"},
                    {std::string(extension_dir_rule) + "/home/u/.dhara/extensions", "/home/u/.dhara/extensions", false, ""}};
  extension_policy e;
  e.folder = "/ext";
  sandbox_inputs in = sandbox_inputs_for(s, e, "/usr/bin/node", "", "/tmp/t");
  CHECK(in.allowed_paths == std::vector<std::string>{"/home/u/proj"});
  CHECK(in.denied_paths == std::vector<std::string>{"/etc/shadow"});
  CHECK(in.read_only_paths == std::vector<std::string>{"/home/u/.dhara/extensions"});  // read-only, not masked
  CHECK(in.denied_globs == std::vector<std::string>{"/home/u/proj/*.key"});
  CHECK(in.extension_folder == "/ext");
}

TEST_CASE("extension folders stay read-only inside a write grant and the extension reads its own", "[policy][sandbox]") {
  sandbox_inputs in = base_inputs({capability::filesystem_write});
  in.allowed_paths = {"/home/u"};  // allowedPaths ["~"]: covers $DHARA_HOME/extensions
  in.read_only_paths = {"/home/u/.dhara/extensions", "/opt/dhara-ext"};
  sandbox_profile p = compute_sandbox_profile(in);
  CHECK(has(p.write, "/home/u"));
  CHECK(p.read_only == std::vector<std::string>{"/home/u/.dhara/extensions"});  // /opt is not writable anyway
  // Its own folder is readable through the write grant on /home/u (not masked); the mount
  // stops the writes.
  CHECK_FALSE(has(p.mask, "/home/u/.dhara/extensions"));
  CHECK_FALSE(has(p.mask, "/home/u/.dhara/extensions/probe"));
  // Read-only only narrows a grant: read grants need no mount, and a write grant at or under
  // an extensions folder becomes a read grant.
  in.granted = capability_set{};
  in.granted.insert(capability::filesystem_read);
  CHECK(compute_sandbox_profile(in).read_only.empty());
  in.granted.insert(capability::filesystem_write);
  in.allowed_paths = {"/home/u/.dhara/extensions/probe", "/home/u/proj"};
  sandbox_profile q = compute_sandbox_profile(in);
  CHECK(has(q.read, "/home/u/.dhara/extensions/probe"));
  CHECK_FALSE(has(q.write, "/home/u/.dhara/extensions/probe"));
  CHECK(has(q.write, "/home/u/proj"));
  CHECK(q.read_only.empty());
}

TEST_CASE("the JSON form round-trips", "[policy][sandbox]") {
  sandbox_inputs in = base_inputs({capability::filesystem_write, capability::network_fetch, capability::process_spawn});
  in.denied_globs = {"/home/u/proj/.dhara/config.json*"};
  in.allowed_paths = {"/home/u"};
  in.read_only_paths = {"/home/u/.dhara/extensions"};
  sandbox_profile p = compute_sandbox_profile(in);
  auto back = parse_sandbox_profile(to_json(p));
  REQUIRE(back);
  CHECK(*back == p);
}

TEST_CASE("hostile profiles are refused with the field named", "[policy][sandbox]") {
  const std::pair<const char*, const char*> table[] = {
      {"", "not a JSON object"},
      {"[]", "not a JSON object"},
      {R"({"version":1})", "'version'"},
      {R"({"read":[]})", "'version'"},
      {R"({"version":2,"read":"/usr"})", "'read'"},
      {R"({"version":2,"read":["usr"]})", "'read'"},
      {R"({"version":2,"write":["/tmp/../etc"]})", "'write'"},
      {R"({"version":2,"mask":["/a//b"]})", "'mask'"},
      {R"({"version":2,"read":["/a\u0000b"]})", "'read' holds a path with a NUL"},
      {R"({"version":2,"execute":[1]})", "'execute'"},
      {R"({"version":2,"network":{"connect":"yes"}})", "'network.connect'"},
      {R"({"version":2,"spawn":1})", "'spawn'"},
      {R"({"version":2,"maskGlobs":["*.key"]})", "'maskGlobs'"},
      {R"({"version":2,"maskGlobs":["/a\u0000b"]})", "'maskGlobs' holds a pattern with a NUL"},
      {R"({"version":2,"tempDir":"tmp"})", "'tempDir'"},
  };
  for (auto [text, field] : table) {
    INFO(text);
    auto r = parse_sandbox_profile(text);
    REQUIRE_FALSE(r);
    CHECK(r.err().message.find(field) != std::string::npos);
  }
  auto empty = parse_sandbox_profile(R"({"version":2})");
  REQUIRE(empty);  // everything absent: nothing granted
  CHECK(empty->read.empty());
  CHECK_FALSE(empty->spawn);
}

TEST_CASE("the launcher argv puts the profile before the command", "[policy][sandbox]") {
  CHECK(launcher_argv("/opt/dhara/dhara-launch", "/run/p.json", {"/usr/bin/node", "main.js"}) ==
        std::vector<std::string>{"/opt/dhara/dhara-launch", "--profile", "/run/p.json", "--", "/usr/bin/node", "main.js"});
}

TEST_CASE("a profile longer than one argument may hold goes to the launcher in parts", "[policy][sandbox]") {
  sandbox_profile p;
  for (int i = 0; i < 4000; ++i) p.mask.push_back("/work/project/generated/entry-" + std::to_string(i) + "/secret.txt");
  const std::string whole = to_json(p);
  REQUIRE(whole.size() > 2 * max_inline_profile_part);
  auto argv = launcher_argv_inline("/opt/dhara/dhara-launch", p, {"/usr/bin/node", "main.js"});
  REQUIRE(argv.size() > 4);
  CHECK(argv.front() == "/opt/dhara/dhara-launch");
  CHECK(std::vector<std::string>(argv.end() - 3, argv.end()) == std::vector<std::string>{"--", "/usr/bin/node", "main.js"});
  std::string joined;
  for (std::size_t i = 1; i + 3 < argv.size(); i += 2) {
    CHECK(argv[i] == "--profile-json");
    CHECK(argv[i + 1].size() <= max_inline_profile_part);
    joined += argv[i + 1];
  }
  CHECK(joined == whole);
  auto back = parse_sandbox_profile(joined);
  REQUIRE(back);
  CHECK(back->mask == p.mask);
  // A profile of the usual size stays one argument.
  CHECK(launcher_argv_inline("/l", sandbox_profile{}, {"/bin/true"}) ==
        std::vector<std::string>{"/l", "--profile-json", to_json(sandbox_profile{}), "--", "/bin/true"});
}
