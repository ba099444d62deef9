// Computing, writing and reading an extension's OS sandbox profile.
#include "policy/sandbox_profile.hpp"

#include <algorithm>
#include <optional>
#include <tuple>

#include <nlohmann/json.hpp>

#include "policy/command_rules.hpp"
#include "policy/path_rules.hpp"

namespace dhara::policy {
namespace {

using json = nlohmann::json;

// Sorted, unique, and without entries lying under another entry of the same list (a
// Landlock rule on a folder already covers everything below it).
void tidy(std::vector<std::string>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::vector<std::string> out;
  for (const std::string& p : v)
    if (out.empty() || !is_at_or_under(p, out.back())) out.push_back(p);
  v = std::move(out);
}

std::string parent_of(std::string_view p) {
  auto slash = p.rfind('/');
  if (slash == std::string_view::npos || slash == 0) return "/";
  return std::string(p.substr(0, slash));
}

// The install prefix of an interpreter run from outside /usr, which it reads its library from
// (pyenv's `<prefix>/bin/python3` reads `<prefix>/lib`, nvm's node `<prefix>/lib`); "" when
// the program is not one. Only a program in a folder named `bin`, outside the extension's own
// folder, has one: the extension's own program lives in its folder, already granted, and that
// folder's parent holds every other installed extension. And never a folder that holds the
// home, a project, a denied path (`~/.ssh`, resolved, stands in for a home reached through a
// link), the extension folders or the temp dir: `~/bin/tool` would grant the whole home.
std::string interpreter_prefix(const sandbox_inputs& in) {
  const std::string& exe = in.interpreter;
  if (exe.empty() || is_at_or_under(exe, "/usr")) return "";
  if (!in.extension_folder.empty() && is_at_or_under(exe, in.extension_folder)) return "";
  const std::string bin = parent_of(exe);
  if (basename_of(bin) != "bin") return "";
  std::string prefix = parent_of(bin);
  // Neither above nor inside what must stay closed: `../victim/bin/node` would bring the
  // folder of the extension `victim`.
  auto near = [&](const std::string& p) {
    return !p.empty() && (is_at_or_under(p, prefix) || is_at_or_under(prefix, p));
  };
  auto holds = [&](const std::string& p) { return !p.empty() && is_at_or_under(p, prefix); };
  if (prefix == "/" || holds(in.home) || near(in.extension_folder) || near(in.temp_dir) ||
      std::any_of(in.allowed_paths.begin(), in.allowed_paths.end(), holds) ||
      std::any_of(in.denied_paths.begin(), in.denied_paths.end(), near) ||
      std::any_of(in.read_only_paths.begin(), in.read_only_paths.end(), near))
    return "";
  return prefix;
}

// Whether the program (or its ELF loader) may be executed: not from another extension's
// folder (the extension folders are read-only paths), where its own folder is the only one it
// gets. A loader must also lie in the system folders or the extension's own folder: a native
// program names its loader itself, and the grant reads and executes whatever file that is.
bool may_execute(const sandbox_inputs& in, const std::string& file, bool loader) {
  const bool own = !in.extension_folder.empty() && is_at_or_under(file, in.extension_folder);
  if (own) return true;
  if (std::any_of(in.read_only_paths.begin(), in.read_only_paths.end(),
                  [&](const std::string& r) { return is_at_or_under(file, r); }))
    return false;
  if (!loader) return true;
  const auto& system = sandbox_system_dirs();
  return std::any_of(system.begin(), system.end(), [&](const std::string& d) { return is_at_or_under(file, d); });
}

bool normalized_abs(std::string_view p) {
  std::string n;
  return !p.empty() && p.front() == '/' && normalize_path_into(p, "/", n) && n == p;
}

}  // namespace

const std::vector<std::string>& sandbox_etc_files() {
  static const std::vector<std::string> files = {
      "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/passwd",      "/etc/group",
      "/etc/hosts",       "/etc/host.conf",  "/etc/resolv.conf",  "/etc/nsswitch.conf", "/etc/gai.conf",
      "/etc/localtime",   "/etc/ssl/certs",  "/etc/ssl/openssl.cnf", "/etc/ca-certificates", "/etc/mime.types"};
  // Of /etc/ssl only the certificates and openssl.cnf: /etc/ssl/private holds the host's TLS
  // keys, readable by root (dhara in a container) and the group ssl-cert (a review).
  return files;
}

const std::vector<std::string>& sandbox_system_dirs() {
  // /bin, /lib, /lib64 and /sbin resolve into /usr on merged-/usr systems; listed for the
  // others. The launcher skips the ones that do not exist.
  static const std::vector<std::string> dirs = {"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32"};
  return dirs;
}

namespace {
const std::vector<std::string> dev_read = {"/dev/urandom", "/dev/random"};
const std::vector<std::string> dev_write = {"/dev/null", "/dev/zero", "/dev/full"};

// `/etc/python3.11`: the configuration folder of the interpreter `python3.11`.
bool python_etc(std::string_view path) {
  return parent_of(path) == "/etc" && basename_of(path).starts_with("python");
}
}  // namespace

bool sandbox_path_follows_links(std::string_view path) {
  auto listed = [&](const std::vector<std::string>& l) { return std::find(l.begin(), l.end(), path) != l.end(); };
  return listed(sandbox_system_dirs()) || listed(sandbox_etc_files()) || listed(dev_read) || listed(dev_write) ||
         python_etc(path);
}

capability_set sandbox_granted(const extension_policy& ext) {
  return ((ext.approved_by_user | ext.approved_by_author) & ext.declared).minus(ext.denied);
}

sandbox_inputs sandbox_inputs_for(const policy_snapshot& snapshot, const extension_policy& ext,
                                  std::string interpreter, std::string interpreter_loader,
                                  std::string temp_dir) {
  sandbox_inputs in;
  in.granted = sandbox_granted(ext);
  for (const path_entry& e : snapshot.paths.allowed)
    if (!e.glob) in.allowed_paths.push_back(e.normalized);  // an allowed glob grants nothing here
  for (const path_entry& e : snapshot.paths.denied) {
    if (!e.glob && (e.written.starts_with(extension_dir_rule) || e.written == project_dhara_rule))
      in.read_only_paths.push_back(e.normalized);
    else if (e.glob) in.denied_globs.push_back(glob3_pattern(e));
    else in.denied_paths.push_back(e.normalized);
  }
  in.extension_folder = ext.folder;
  in.home = snapshot.home;
  in.interpreter = std::move(interpreter);
  in.interpreter_loader = std::move(interpreter_loader);
  in.temp_dir = std::move(temp_dir);
  return in;
}

sandbox_profile compute_sandbox_profile(const sandbox_inputs& in) {
  sandbox_profile p;
  const bool spawn = in.granted.contains(capability::process_spawn);
  const bool fs_read = in.granted.contains(capability::filesystem_read);
  const bool fs_write = in.granted.contains(capability::filesystem_write);

  for (const std::string& d : sandbox_system_dirs()) (spawn ? p.execute : p.read).push_back(d);
  for (const std::string& f : sandbox_etc_files()) p.read.push_back(f);
  p.read.insert(p.read.end(), dev_read.begin(), dev_read.end());
  p.write.insert(p.write.end(), dev_write.begin(), dev_write.end());
  if (!in.extension_folder.empty()) (spawn ? p.execute : p.read).push_back(in.extension_folder);
  if (!in.interpreter.empty() && may_execute(in, in.interpreter, false)) {
    p.execute.push_back(in.interpreter);
    std::string base(basename_of(in.interpreter));
    // The interpreter's own config (/etc/python3.11) and, outside /usr, its install prefix.
    if (std::string etc = "/etc/" + base; python_etc(etc)) p.read.push_back(std::move(etc));
    if (std::string prefix = interpreter_prefix(in); !prefix.empty()) p.read.push_back(std::move(prefix));
  }
  if (!in.interpreter_loader.empty() && may_execute(in, in.interpreter_loader, true))
    p.execute.push_back(in.interpreter_loader);
  if (!in.temp_dir.empty()) {
    p.temp_dir = in.temp_dir;
    p.write.push_back(in.temp_dir);
  }
  if (fs_read || fs_write)
    for (const std::string& a : in.allowed_paths) (fs_write ? p.write : p.read).push_back(a);

  // Deny beats grant: a grant at or under a denied path goes; a denied path under a grant
  // is masked.
  auto drop_denied = [&](std::vector<std::string>& list) {
    std::erase_if(list, [&](const std::string& g) {
      return std::any_of(in.denied_paths.begin(), in.denied_paths.end(),
                         [&](const std::string& d) { return is_at_or_under(g, d); });
    });
  };
  drop_denied(p.read);
  drop_denied(p.write);
  drop_denied(p.execute);
  // Read-only beats write: a write grant at or under a read-only path reads only; a read-only
  // path under a write grant is mounted read-only.
  auto read_only = [&](const std::string& g) {
    return std::any_of(in.read_only_paths.begin(), in.read_only_paths.end(),
                       [&](const std::string& r) { return is_at_or_under(g, r); });
  };
  for (const std::string& w : p.write)
    if (read_only(w)) p.read.push_back(w);
  std::erase_if(p.write, read_only);
  for (const std::string& r : in.read_only_paths)
    for (const std::string& w : p.write)
      if (is_at_or_under(r, w)) p.read_only.push_back(r);
  std::vector<std::string> granted;
  for (auto* l : {&p.read, &p.write, &p.execute}) granted.insert(granted.end(), l->begin(), l->end());
  for (const std::string& d : in.denied_paths)
    for (const std::string& g : granted)
      if (d != g && is_at_or_under(d, g)) p.mask.push_back(d);
  for (const std::string& d : in.denied_globs) {
    // The folder before the first glob character (unescaped: glob3_pattern), and whether
    // globbing stops there.
    const std::string dir = glob_literal_folder(d);
    const std::size_t first = first_glob_char(d);
    const bool last_segment_only = first == std::string::npos || d.find('/', first) == std::string::npos;
    for (const std::string& g : granted) {
      if (is_at_or_under(dir, g)) {
        if (last_segment_only) p.mask_globs.push_back(d);
        else p.unenforced.push_back("denied '" + d + "' inside granted '" + g + "' is enforced by the broker only");
        break;
      }
      // A glob in its last segment matches only entries directly in `dir`: a grant deeper
      // below `dir` cannot hold a match (e.g. `$DHARA_HOME/config.json*` and an extension's
      // folder under `$DHARA_HOME/extensions`).
      if (last_segment_only && g != dir && parent_of(g) != dir) continue;
      // Nor can a grant directly in `dir` that the pattern does not match (dhara's matcher: its
      // `*` also takes a name's leading dot, as glob(3)'s does not, so a note too many at worst).
      if (last_segment_only && g != dir && !glob_match(d, g)) continue;
      if (is_at_or_under(g, dir)) {
        p.unenforced.push_back("denied '" + d + "' may match inside granted '" + g +
                               "': enforced by the broker only");
        break;
      }
    }
  }
  for (auto* l : {&p.read, &p.write, &p.execute, &p.mask, &p.read_only}) tidy(*l);
  std::sort(p.mask_globs.begin(), p.mask_globs.end());
  p.mask_globs.erase(std::unique(p.mask_globs.begin(), p.mask_globs.end()), p.mask_globs.end());
  // What a stronger list covers need not be repeated in a weaker one.
  std::erase_if(p.read, [&](const std::string& r) {
    auto under = [&](const std::vector<std::string>& l) {
      return std::any_of(l.begin(), l.end(), [&](const std::string& x) { return is_at_or_under(r, x); });
    };
    return under(p.write) || under(p.execute);
  });
  p.network.connect = in.granted.contains(capability::network_outbound) ||
                      in.granted.contains(capability::network_fetch);
  p.network.bind = in.granted.contains(capability::network_inbound);
  p.network.udp = in.granted.contains(capability::network_dns);
  p.spawn = spawn;
  return p;
}

std::string to_json(const sandbox_profile& p) {
  json j = {{"version", sandbox_profile_version},
            {"read", p.read},
            {"write", p.write},
            {"execute", p.execute},
            {"mask", p.mask},
            {"readOnly", p.read_only},
            {"maskGlobs", p.mask_globs},
            {"network", {{"connect", p.network.connect}, {"bind", p.network.bind}, {"udp", p.network.udp}}},
            {"spawn", p.spawn},
            {"tempDir", p.temp_dir},
            {"unenforced", p.unenforced}};
  return j.dump();
}

result<sandbox_profile> parse_sandbox_profile(std::string_view text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return make_error(errc::parse_error, "the sandbox profile is not a JSON object");
  auto bad = [](errc c, const std::string& field, const std::string& what) {
    return make_error(c, "sandbox profile: '" + field + "' " + what);
  };
  auto v = j.find("version");
  if (v == j.end() || !v->is_number_integer() || v->get<std::int64_t>() != sandbox_profile_version)
    return bad(errc::invalid_value, "version", "must be " + std::to_string(sandbox_profile_version));
  sandbox_profile p;
  auto paths = [&](const char* key, std::vector<std::string>& out, bool must_be_path) -> std::optional<error> {
    auto it = j.find(key);
    if (it == j.end()) return std::nullopt;
    if (!it->is_array()) return bad(errc::invalid_type, key, "must be an array of strings");
    for (const json& e : *it) {
      if (!e.is_string()) return bad(errc::invalid_type, key, "must be an array of strings");
      std::string s = e.get<std::string>();
      if (must_be_path && s.find('\0') != std::string::npos)
        return bad(errc::invalid_path, key, "holds a path with a NUL character");
      if (must_be_path && !normalized_abs(s))
        return bad(errc::invalid_path, key, "holds '" + s + "', not an absolute normalized path");
      out.push_back(std::move(s));
    }
    return std::nullopt;
  };
  for (auto [key, out, is_path] :
       {std::tuple{"read", &p.read, true}, std::tuple{"write", &p.write, true}, std::tuple{"execute", &p.execute, true},
        std::tuple{"mask", &p.mask, true}, std::tuple{"readOnly", &p.read_only, true},
        std::tuple{"maskGlobs", &p.mask_globs, false},
        std::tuple{"unenforced", &p.unenforced, false}})
    if (auto e = paths(key, *out, is_path)) return *e;
  for (const std::string& g : p.mask_globs) {
    // The launcher hands patterns on as C strings: a NUL would cut one short.
    if (g.find('\0') != std::string::npos) return bad(errc::invalid_path, "maskGlobs", "holds a pattern with a NUL character");
    if (g.empty() || g.front() != '/') return bad(errc::invalid_path, "maskGlobs", "holds '" + g + "', not absolute");
  }
  if (auto n = j.find("network"); n != j.end()) {
    if (!n->is_object()) return bad(errc::invalid_type, "network", "must be an object");
    for (auto [key, out] : {std::pair{"connect", &p.network.connect}, std::pair{"bind", &p.network.bind},
                            std::pair{"udp", &p.network.udp}}) {
      auto it = n->find(key);
      if (it == n->end()) continue;
      if (!it->is_boolean()) return bad(errc::invalid_type, std::string("network.") + key, "must be true or false");
      *out = it->get<bool>();
    }
  }
  if (auto s = j.find("spawn"); s != j.end()) {
    if (!s->is_boolean()) return bad(errc::invalid_type, "spawn", "must be true or false");
    p.spawn = s->get<bool>();
  }
  if (auto t = j.find("tempDir"); t != j.end()) {
    if (!t->is_string()) return bad(errc::invalid_type, "tempDir", "must be a string");
    p.temp_dir = t->get<std::string>();
    if (!p.temp_dir.empty() && !normalized_abs(p.temp_dir))
      return bad(errc::invalid_path, "tempDir", "must be an absolute normalized path");
  }
  return p;
}

std::vector<std::string> launcher_argv(std::string_view launcher, std::string_view profile_file,
                                       const std::vector<std::string>& argv) {
  std::vector<std::string> out = {std::string(launcher), "--profile", std::string(profile_file), "--"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

std::vector<std::string> launcher_argv_inline(std::string_view launcher, const sandbox_profile& profile,
                                              const std::vector<std::string>& argv) {
  std::vector<std::string> out = {std::string(launcher)};
  const std::string text = to_json(profile);
  for (std::size_t at = 0; at < text.size(); at += max_inline_profile_part) {
    out.emplace_back("--profile-json");
    out.push_back(text.substr(at, max_inline_profile_part));
  }
  out.emplace_back("--");
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

}  // namespace dhara::policy
