// Settings (DESIGN §3.1): one config layer parsed into typed optional fields with precise
// errors, and the global → project → CLI merge in which an untrusted project only tightens.
#include "policy/settings.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <span>
#include <unordered_set>
#include <utility>

#include <nlohmann/json.hpp>

#include "policy/json_text.hpp"
#include "policy/path_rules.hpp"
#include "policy/text.hpp"

namespace dhara::policy {

using json = nlohmann::json;

namespace {

// ---- value ranges --------------------------------------------------------------------
// Wide enough for any real use, narrow enough that a typo (a sign, an extra zero, 0 for
// "off") is refused with a clear message instead of becoming a hang or a rotation storm.
struct uint_range {
  std::uint64_t min;
  std::uint64_t max;
};
constexpr std::uint64_t one_day_ms = 86'400'000;
// Below 4 KiB the audit would rotate every few lines; 1 TiB is past any real disk budget.
constexpr uint_range audit_max_bytes_range{4096, std::uint64_t{1} << 40};
// keep 0 would delete the whole trail at each rotation: audit entries must never be lost.
constexpr uint_range audit_keep_range{1, 1000};
constexpr uint_range call_timeout_range{1, one_day_ms};
// A grace of 0 means "go to the next step of the kill chain at once", which is legitimate.
constexpr uint_range grace_range{0, 600'000};
constexpr uint_range max_restarts_range{0, 1000};
constexpr uint_range restart_window_range{1, one_day_ms};
// The initialize reply alone needs about 1 KiB; beyond 1 GiB one line could exhaust memory.
constexpr uint_range max_line_bytes_range{1024, std::uint64_t{1} << 30};

// ---- known keys ----------------------------------------------------------------------
constexpr std::array<std::string_view, 3> top_keys{"security", "extensionDirs", "extensions"};
constexpr std::array<std::string_view, 8> security_keys{
    "level",           "trustedAuthors", "allowedPaths", "deniedPaths", "auditIgnorePatterns",
    "trustedProjects", "audit",          "requireOsSandbox"};
constexpr std::array<std::string_view, 3> audit_keys{"durability", "maxBytes", "keep"};
constexpr std::array<std::string_view, 6> extensions_keys{
    "callTimeoutMs", "cancelGraceMs", "killGraceMs", "maxRestarts", "restartWindowMs",
    "maxLineBytes"};

// Every key with its dotted place, so a key written at the wrong level is still found
// ("level" at the top → "security.level").
struct known_key {
  std::string_view leaf;
  std::string_view dotted;
};
constexpr std::array<known_key, 20> all_keys{{
    {"security", "security"},
    {"extensionDirs", "extensionDirs"},
    {"extensions", "extensions"},
    {"level", "security.level"},
    {"trustedAuthors", "security.trustedAuthors"},
    {"allowedPaths", "security.allowedPaths"},
    {"deniedPaths", "security.deniedPaths"},
    {"auditIgnorePatterns", "security.auditIgnorePatterns"},
    {"trustedProjects", "security.trustedProjects"},
    {"audit", "security.audit"},
    {"requireOsSandbox", "security.requireOsSandbox"},
    {"durability", "security.audit.durability"},
    {"maxBytes", "security.audit.maxBytes"},
    {"keep", "security.audit.keep"},
    {"callTimeoutMs", "extensions.callTimeoutMs"},
    {"cancelGraceMs", "extensions.cancelGraceMs"},
    {"killGraceMs", "extensions.killGraceMs"},
    {"maxRestarts", "extensions.maxRestarts"},
    {"restartWindowMs", "extensions.restartWindowMs"},
    {"maxLineBytes", "extensions.maxLineBytes"},
}};

// ---- settable keys (config get|set) ---------------------------------------------------
// The ranges are the parser's own constants, so the table cannot drift from what loads.
constexpr std::array<setting_key, 17> settable_keys{{
    {"security.level", setting_type::level, project_rule::tighten_only},
    {"security.trustedAuthors", setting_type::name_list, project_rule::tighten_only},
    {"security.allowedPaths", setting_type::path_list, project_rule::tighten_only},
    {"security.deniedPaths", setting_type::path_list, project_rule::added},
    {"security.auditIgnorePatterns", setting_type::pattern_list, project_rule::tighten_only},
    {"security.trustedProjects", setting_type::path_list, project_rule::global_only},
    {"security.audit.durability", setting_type::durability, project_rule::tighten_only},
    {"security.audit.maxBytes", setting_type::whole_number, project_rule::trusted_only,
     audit_max_bytes_range.min, audit_max_bytes_range.max},
    {"security.audit.keep", setting_type::whole_number, project_rule::trusted_only, audit_keep_range.min,
     audit_keep_range.max},
    // true tightens and is always honoured; false is refused from every project file.
    {"security.requireOsSandbox", setting_type::boolean, project_rule::tighten_only},
    {"extensionDirs", setting_type::path_list, project_rule::tighten_only},
    {"extensions.callTimeoutMs", setting_type::whole_number, project_rule::tighten_only,
     call_timeout_range.min, call_timeout_range.max},
    {"extensions.cancelGraceMs", setting_type::whole_number, project_rule::tighten_only, grace_range.min,
     grace_range.max},
    {"extensions.killGraceMs", setting_type::whole_number, project_rule::tighten_only, grace_range.min,
     grace_range.max},
    {"extensions.maxRestarts", setting_type::whole_number, project_rule::tighten_only,
     max_restarts_range.min, max_restarts_range.max},
    {"extensions.restartWindowMs", setting_type::whole_number, project_rule::tighten_only,
     restart_window_range.min, restart_window_range.max},
    {"extensions.maxLineBytes", setting_type::whole_number, project_rule::tighten_only,
     max_line_bytes_range.min, max_line_bytes_range.max},
}};

// ---- message helpers -----------------------------------------------------------------

// A user-supplied string as a JSON string literal: control characters and invalid UTF-8
// cannot reach the terminal raw, and long values are cut.
std::string quote(std::string_view s) {
  constexpr std::size_t limit = 200;
  std::string out = json(std::string(s.substr(0, limit))).dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > limit) out += "...";
  return out;
}

std::string quote_list(const std::vector<std::string>& list) {
  std::string out = "[";
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (i) out += ", ";
    out += quote(list[i]);
  }
  return out + "]";
}

// "string \"strict\"", "number -5", "array": what was found, for "expected X, found Y".
std::string describe(const json& v) {
  std::string out(json_type_name(v));
  if (v.is_string())
    out += " " + quote(v.get_ref<const std::string&>());
  else if (v.is_number() || v.is_boolean())
    out += " " + v.dump();
  return out;
}

std::string range_text(uint_range r) {
  return "a whole number from " + std::to_string(r.min) + " to " + std::to_string(r.max);
}

bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// "~user/…": never guessed (DESIGN §4); only "~" and "~/…" mean $HOME.
bool is_tilde_user(std::string_view s) { return s.size() > 1 && s[0] == '~' && s[1] != '/'; }

std::optional<audit_durability> parse_durability(std::string_view s) {
  for (auto d : {audit_durability::none, audit_durability::write, audit_durability::fsync})
    if (to_string(d) == s) return d;
  return std::nullopt;
}

// ---- one layer -----------------------------------------------------------------------

// What a list holds decides how its entries are checked.
enum class entry_kind {
  path,     ///< allowedPaths, deniedPaths, trustedProjects, extensionDirs
  pattern,  ///< auditIgnorePatterns: globs that may be relative ("match anywhere") or URLs
  name,     ///< trustedAuthors
};

using list_field = std::optional<std::vector<std::string>>;

class layer_parser {
 public:
  layer_parser(std::string_view file, layer_kind kind) : file_(file), kind_(kind) {}

  std::optional<error> parse(const json& doc) {
    if (!doc.is_object())
      return make_error(errc::invalid_type, file_ + ": the top level must be a JSON object, found " +
                                                describe(doc));
    for (auto it = doc.begin(); it != doc.end(); ++it) {
      const std::string& k = it.key();
      const json& v = it.value();
      std::optional<error> err;
      if (k == "security")
        err = parse_security(v);
      else if (k == "extensionDirs")
        err = read_list(v, "extensionDirs", entry_kind::path, out_.layer.extension_dirs);
      else if (k == "extensions")
        err = parse_extensions(v);
      else
        warn_unknown("", k, top_keys);
      if (err) return err;
    }
    return std::nullopt;
  }

  parsed_layer take() { return std::move(out_); }

 private:
  std::optional<error> parse_security(const json& sec) {
    if (!sec.is_object()) return fail(errc::invalid_type, "security", "an object", sec);
    auto& l = out_.layer;
    for (auto it = sec.begin(); it != sec.end(); ++it) {
      const std::string& k = it.key();
      const json& v = it.value();
      std::optional<error> err;
      if (k == "level") {
        constexpr std::string_view levels = "one of \"paranoid\", \"standard\", \"trusted\", \"yolo\"";
        if (!v.is_string()) return fail(errc::invalid_type, "security.level", levels, v);
        auto lvl = parse_security_level(v.get_ref<const std::string&>());
        if (!lvl) return fail(errc::invalid_value, "security.level", levels, v);
        l.level = *lvl;
      } else if (k == "trustedAuthors") {
        err = read_list(v, "security.trustedAuthors", entry_kind::name, l.trusted_authors);
      } else if (k == "allowedPaths") {
        err = read_list(v, "security.allowedPaths", entry_kind::path, l.allowed_paths);
      } else if (k == "deniedPaths") {
        err = read_list(v, "security.deniedPaths", entry_kind::path, l.denied_paths);
      } else if (k == "auditIgnorePatterns") {
        err = read_list(v, "security.auditIgnorePatterns", entry_kind::pattern, l.audit_ignore_patterns);
      } else if (k == "trustedProjects") {
        err = read_list(v, "security.trustedProjects", entry_kind::path, l.trusted_projects);
        if (!err) warn_glob_projects();
      } else if (k == "audit") {
        err = parse_audit(v);
      } else if (k == "requireOsSandbox") {
        if (!v.is_boolean()) return fail(errc::invalid_type, "security.requireOsSandbox", "true or false", v);
        l.require_os_sandbox = v.get<bool>();
      } else {
        warn_unknown("security.", k, security_keys);
      }
      if (err) return err;
    }
    return std::nullopt;
  }

  std::optional<error> parse_audit(const json& audit) {
    if (!audit.is_object()) return fail(errc::invalid_type, "security.audit", "an object", audit);
    auto& l = out_.layer;
    for (auto it = audit.begin(); it != audit.end(); ++it) {
      const std::string& k = it.key();
      const json& v = it.value();
      if (k == "durability") {
        constexpr std::string_view what = "one of \"none\", \"write\", \"fsync\"";
        if (!v.is_string()) return fail(errc::invalid_type, "security.audit.durability", what, v);
        auto d = parse_durability(v.get_ref<const std::string&>());
        if (!d) return fail(errc::invalid_value, "security.audit.durability", what, v);
        l.audit_durability = *d;
      } else if (k == "maxBytes") {
        if (auto err = read_uint(v, "security.audit.maxBytes", audit_max_bytes_range, l.audit_max_bytes))
          return err;
      } else if (k == "keep") {
        if (auto err = read_uint(v, "security.audit.keep", audit_keep_range, l.audit_keep)) return err;
      } else {
        warn_unknown("security.audit.", k, audit_keys);
      }
    }
    return std::nullopt;
  }

  std::optional<error> parse_extensions(const json& ext) {
    if (!ext.is_object()) return fail(errc::invalid_type, "extensions", "an object", ext);
    auto& l = out_.layer;
    for (auto it = ext.begin(); it != ext.end(); ++it) {
      const std::string& k = it.key();
      const json& v = it.value();
      std::optional<error> err;
      if (k == "callTimeoutMs")
        err = read_uint(v, "extensions.callTimeoutMs", call_timeout_range, l.call_timeout_ms);
      else if (k == "cancelGraceMs")
        err = read_uint(v, "extensions.cancelGraceMs", grace_range, l.cancel_grace_ms);
      else if (k == "killGraceMs")
        err = read_uint(v, "extensions.killGraceMs", grace_range, l.kill_grace_ms);
      else if (k == "maxRestarts")
        err = read_uint(v, "extensions.maxRestarts", max_restarts_range, l.max_restarts);
      else if (k == "restartWindowMs")
        err = read_uint(v, "extensions.restartWindowMs", restart_window_range, l.restart_window_ms);
      else if (k == "maxLineBytes")
        err = read_uint(v, "extensions.maxLineBytes", max_line_bytes_range, l.max_line_bytes);
      else
        warn_unknown("extensions.", k, extensions_keys);
      if (err) return err;
    }
    return std::nullopt;
  }

  // Whole numbers only; 1e6 and 5000.0 count (JSON has one number type, people write both).
  template <class T>
  std::optional<error> read_uint(const json& v, std::string_view key, uint_range r, std::optional<T>& out) {
    if (!v.is_number()) return fail(errc::invalid_type, key, range_text(r), v);
    bool ok = false;
    std::uint64_t n = 0;
    if (v.is_number_unsigned()) {
      n = v.get<std::uint64_t>();
      ok = true;
    } else if (v.is_number_integer()) {
      auto i = v.get<std::int64_t>();
      ok = i >= 0;
      if (ok) n = static_cast<std::uint64_t>(i);
    } else {
      double d = v.get<double>();
      ok = std::isfinite(d) && d >= 0 && d <= static_cast<double>(r.max) && std::floor(d) == d;
      if (ok) n = static_cast<std::uint64_t>(d);
    }
    if (!ok || n < r.min || n > r.max) return fail(errc::invalid_value, key, range_text(r), v);
    out = static_cast<T>(n);  // every range fits T
    return std::nullopt;
  }

  std::optional<error> read_list(const json& v, std::string_view key, entry_kind what, list_field& out) {
    std::string_view element = what == entry_kind::name      ? "a non-empty name"
                               : what == entry_kind::pattern ? "a non-empty pattern string"
                                                             : "a non-empty path string";
    if (!v.is_array()) {
      std::string expected = "an array of ";
      expected += what == entry_kind::name ? "names" : what == entry_kind::pattern ? "patterns" : "paths";
      return fail(errc::invalid_type, key, expected, v);
    }
    std::vector<std::string> list;
    list.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      std::string at = std::string(key) + "[" + std::to_string(i) + "]";
      const json& e = v[i];
      if (!e.is_string()) return fail(errc::invalid_type, at, element, e);
      const std::string& s = e.get_ref<const std::string&>();
      if (s.empty()) return fail(errc::invalid_value, at, element, e);
      if (what != entry_kind::name) {
        if (s.find('\0') != std::string::npos)
          return fail(errc::invalid_value, at, std::string(element) + " without NUL bytes", e);
        if (s.size() > max_path_bytes)
          return fail(errc::invalid_value, at,
                      std::string(element) + " of at most " + std::to_string(max_path_bytes) + " bytes", e);
        if (is_tilde_user(s))
          return fail(errc::invalid_value, at,
                      "'~' or '~/' (the '~user' form is not supported: write the absolute path)", e);
      }
      // The global file (and the command line) have no project to be relative to; dropping
      // such an entry would silently loosen a denial, so it is refused outright.
      if (what == entry_kind::path && kind_ != layer_kind::project && s[0] != '/' && s[0] != '~')
        return fail(errc::invalid_value, at, "an absolute path or one starting with '~' (only a project file may use relative paths)", e);
      list.push_back(s);
    }
    out = std::move(list);
    return std::nullopt;
  }

  // A trusted project matches exactly; a glob there would silently trust nothing.
  void warn_glob_projects() {
    const auto& list = *out_.layer.trusted_projects;
    for (std::size_t i = 0; i < list.size(); ++i)
      if (list[i].find_first_of("*?[") != std::string::npos)
        out_.warnings.push_back(file_ + ": security.trustedProjects[" + std::to_string(i) + "] " +
                                quote(list[i]) +
                                " holds a glob character, but trusted projects are matched exactly, "
                                "so it only trusts a folder of that literal name");
  }

  void warn_unknown(std::string_view prefix, std::string_view key, std::span<const std::string_view> siblings) {
    std::string dotted = std::string(prefix) + std::string(key);
    std::string hint;
    std::string_view same = closest_match(key, siblings);
    if (!same.empty()) {
      hint = " (did you mean '" + std::string(prefix) + std::string(same) + "'?)";
    } else {
      std::array<std::string_view, all_keys.size()> leaves{};
      for (std::size_t i = 0; i < all_keys.size(); ++i) leaves[i] = all_keys[i].leaf;
      std::string_view other = closest_match(key, leaves);
      for (const auto& k : all_keys)
        if (!other.empty() && k.leaf == other) hint = " (did you mean '" + std::string(k.dotted) + "'?)";
    }
    out_.warnings.push_back(file_ + ": unknown key " + quote(dotted) + " is ignored" + hint);
  }

  error fail(errc code, std::string_view key, std::string_view expected, const json& found) const {
    return make_error(code, file_ + ": " + std::string(key) + ": expected " + std::string(expected) +
                                ", found " + describe(found));
  }

  std::string file_;
  layer_kind kind_;
  parsed_layer out_;
};

// ---- the merge -----------------------------------------------------------------------

void add_unique(std::vector<std::string>& list, std::string value) {
  if (std::find(list.begin(), list.end(), value) == list.end()) list.push_back(std::move(value));
}

// The lists are the user's and may be long (tens of thousands of deniedPaths): every
// comparison of one list with another goes through a hash set, never pair by pair.
std::vector<std::string> unique(std::vector<std::string> list) {
  std::vector<std::string> out;
  out.reserve(list.size());
  std::unordered_set<std::string_view> seen;  // views of `out`'s strings, which never move (reserved)
  seen.reserve(list.size());
  for (auto& s : list) {
    if (seen.contains(s)) continue;
    out.push_back(std::move(s));
    seen.insert(out.back());
  }
  return out;
}

bool is_subset(const std::vector<std::string>& part, const std::vector<std::string>& whole) {
  const std::unordered_set<std::string_view> in_whole(whole.begin(), whole.end());
  return std::all_of(part.begin(), part.end(), [&](const std::string& s) { return in_whole.contains(s); });
}

class merger {
 public:
  explicit merger(const merge_context& ctx) : ctx_(ctx) {
    auto root = normalize_path(ctx.project_root, "/");
    if (root && ctx.project_root.starts_with('/')) root_ = std::move(*root);
    // Fail closed: without a usable root nothing is allowed by default and nothing is trusted.
    // The root is a name, allowedPaths entries are patterns: `app[2]` is allowed as `app\[2]`.
    if (!root_.empty())
      out_.effective.allowed_paths = {escape_glob(root_)};
    else
      out_.warnings.push_back("settings: the project root " + quote(ctx.project_root) +
                              " is not an absolute path, so no path is allowed by default");
    auto ext = normalize_path(ctx.dhara_home + "/extensions", "/");
    if (ext && ctx.dhara_home.starts_with('/'))
      out_.effective.extension_dirs = {std::move(*ext)};
    else
      out_.warnings.push_back("settings: DHARA_HOME " + quote(ctx.dhara_home) +
                              " is not an absolute path, so there is no default extension folder");
  }

  // The global file and the command line: the user speaking, applied as given.
  void apply_user(const settings_layer& l, layer_kind kind) { apply_as_given(l, kind); }

  void apply_project(const settings_layer& l, bool trusted) {
    if (l.trusted_projects)
      warn(layer_kind::project, "ignored security.trustedProjects " + quote_list(*l.trusted_projects) +
                                    " (only " + global_file() +
                                    " or the command line can say which projects are trusted)");
    if (trusted)
      apply_as_given(l, layer_kind::project);
    else
      apply_tightening(l);
  }

  // Any doubt denies: only an exact match of the normalized root trusts a project. A
  // prefix match would let every checkout below a trusted folder (a cloned repository
  // inside a trusted monorepo, say) loosen the settings.
  bool is_trusted(const std::vector<std::string>& trusted_projects) const {
    if (root_.empty()) return false;
    return std::find(trusted_projects.begin(), trusted_projects.end(), root_) != trusted_projects.end();
  }

  // trustedProjects made absolute; a bad entry is dropped (trusting less is safe) and is
  // reported once, when the layer itself is applied.
  std::vector<std::string> trust_list(const std::vector<std::string>& written, layer_kind kind) const {
    std::vector<std::string> out;
    for (const std::string& w : written)
      if (auto a = absolute(w, kind)) add_unique(out, std::move(*a));
    return out;
  }

  merged_settings finish() { return std::move(out_); }
  settings& effective() { return out_.effective; }

 private:
  std::string global_file() const { return ctx_.dhara_home + "/config.json"; }
  std::string project_file() const { return ctx_.project_root + "/.dhara/config.json"; }

  void warn(layer_kind kind, const std::string& text) {
    std::string where;
    switch (kind) {
      case layer_kind::global: where = "global config " + global_file(); break;
      case layer_kind::project: where = "project config " + project_file(); break;
      case layer_kind::cli: where = "command line"; break;
    }
    out_.warnings.push_back(where + ": " + text);
  }

  // The sentence every ignored loosening ends with: exactly how to trust the project.
  std::string how_to_trust() const {
    return "; to trust this project add " + quote(root_.empty() ? ctx_.project_root : root_) +
           " to security.trustedProjects in " + global_file();
  }

  void ignored(const std::string& what, std::string_view why) {
    warn(layer_kind::project, "ignored " + what + " (" + std::string(why) + how_to_trust() + ")");
  }

  // `~` expanded, project-relative entries anchored at the project root, then normalized. A
  // `pattern` (an allowedPaths, deniedPaths or auditIgnorePatterns entry) gets the home and the
  // root escaped.
  result<std::string> absolute(std::string_view written, layer_kind kind, bool pattern = false) const {
    auto expanded = expand_home(written, pattern ? escape_glob(ctx_.home) : ctx_.home);
    if (!expanded) return expanded.err();
    if (!expanded->starts_with('/')) {
      if (kind != layer_kind::project)
        return make_error(errc::invalid_value, "a relative path is only allowed in a project file");
      if (root_.empty()) return make_error(errc::invalid_value, "the project root is not absolute");
      return normalize_path(*expanded, pattern ? escape_glob(root_) : root_);
    }
    return normalize_path(*expanded, "/");
  }

  // A denied entry that cannot be understood is kept as written: compiling the path rules
  // then fails (fail closed) instead of quietly dropping a denial. Other lists drop it.
  std::vector<std::string> convert_paths(const std::vector<std::string>& list, layer_kind kind,
                                         std::string_view key, bool keep_bad) {
    std::vector<std::string> out;
    out.reserve(list.size());
    const bool pattern = is_path_rules_key(key);
    for (const std::string& w : list) {
      auto a = absolute(w, kind, pattern);
      if (a) {
        out.push_back(std::move(*a));
      } else if (keep_bad) {
        warn(kind, std::string(key) + " entry " + quote(w) + ": " + a.err().message +
                       "; kept as written, so the path rules will refuse it rather than drop a denial");
        out.push_back(w);
      } else {
        warn(kind, std::string(key) + " entry " + quote(w) + " is ignored: " + a.err().message);
      }
    }
    return out;
  }

  // Patterns may be relative ("**/node_modules/**" matches anywhere) or URLs: only `~`
  // is expanded and absolute paths normalized; the rest stays as written.
  std::vector<std::string> convert_patterns(const std::vector<std::string>& list, layer_kind kind) {
    std::vector<std::string> out;
    for (const std::string& w : list) {
      if (!w.starts_with('~') && !w.starts_with('/')) {
        add_unique(out, w);
        continue;
      }
      auto a = absolute(w, layer_kind::global, true);
      if (a)
        add_unique(out, std::move(*a));
      else  // one ignore pattern fewer only audits more
        warn(kind, "security.auditIgnorePatterns entry " + quote(w) + " is ignored: " + a.err().message);
    }
    return out;
  }

  // A layer's deniedPaths, added to the others' (the first layer to name a path names it in
  // reasons). convert_paths keeps a bad denied entry, so its list lines up with the layer's.
  void add_denied(const settings_layer& l, layer_kind kind) {
    if (!l.denied_paths) return;
    auto converted = convert_paths(*l.denied_paths, kind, "security.deniedPaths", true);
    settings& e = out_.effective;
    for (std::size_t i = 0; i < converted.size() && i < l.denied_paths->size(); ++i) {
      if (!denied_seen_.insert(converted[i]).second) continue;
      e.denied_paths.push_back(std::move(converted[i]));
      e.denied_paths_named.push_back((*l.denied_paths)[i] + " (deniedPaths " + where_said(kind) + ")");
    }
  }

  // Where a layer's entry was written, for a reason: "in ~/.dhara/config.json" (the home
  // shortened to `~` as entries write it), or "on the command line".
  std::string where_said(layer_kind kind) const {
    if (kind == layer_kind::cli) return "on the command line";
    std::string file = kind == layer_kind::global ? global_file() : project_file();
    const std::string& home = ctx_.home;
    if (home.size() > 1 && file.starts_with(home) && file.size() > home.size() && file[home.size()] == '/')
      file = "~" + file.substr(home.size());
    return "in " + file;
  }

  void apply_as_given(const settings_layer& l, layer_kind kind) {
    settings& e = out_.effective;
    if (l.level) e.level = *l.level;
    if (l.trusted_authors) e.trusted_authors = unique(*l.trusted_authors);
    if (l.allowed_paths) {
      e.allowed_paths = unique(convert_paths(*l.allowed_paths, kind, "security.allowedPaths", false));
      e.allowed_confined_to.reset();  // a trusted layer chose these paths itself
    }
    add_denied(l, kind);
    if (l.audit_ignore_patterns) e.audit_ignore_patterns = convert_patterns(*l.audit_ignore_patterns, kind);
    if (l.trusted_projects && kind != layer_kind::project)
      e.trusted_projects = unique(convert_paths(*l.trusted_projects, kind, "security.trustedProjects", false));
    if (l.audit_durability) e.audit_durability = *l.audit_durability;
    if (l.audit_max_bytes) e.audit_max_bytes = *l.audit_max_bytes;
    if (l.audit_keep) e.audit_keep = *l.audit_keep;
    if (l.require_os_sandbox) {
      if (*l.require_os_sandbox || kind != layer_kind::project)
        e.require_os_sandbox = *l.require_os_sandbox;
      else
        warn_sandbox_off();
    }
    if (l.extension_dirs) e.extension_dirs = unique(convert_paths(*l.extension_dirs, kind, "extensionDirs", false));
    if (l.call_timeout_ms) e.call_timeout_ms = *l.call_timeout_ms;
    if (l.cancel_grace_ms) e.cancel_grace_ms = *l.cancel_grace_ms;
    if (l.kill_grace_ms) e.kill_grace_ms = *l.kill_grace_ms;
    if (l.max_restarts) e.max_restarts = *l.max_restarts;
    if (l.restart_window_ms) e.restart_window_ms = *l.restart_window_ms;
    if (l.max_line_bytes) e.max_line_bytes = *l.max_line_bytes;
  }

  // Trusting a project does not help here, so this warning points at the global file.
  void warn_sandbox_off() {
    warn(layer_kind::project, "ignored security.requireOsSandbox false (a project file cannot turn the "
                              "OS sandbox requirement off, even in a trusted project; set it in " +
                                  global_file() + " or on the command line)");
  }

  void apply_tightening(const settings_layer& l) {
    settings& e = out_.effective;
    if (l.level) {
      if (at_least_as_strict(*l.level, e.level))
        e.level = *l.level;
      else
        ignored("security.level " + quote(to_string(*l.level)),
                "a project file may only tighten security, toward paranoid; the level is " +
                    quote(to_string(e.level)));
    }
    add_denied(l, layer_kind::project);  // adding a denial is always a tightening
    if (l.allowed_paths) narrow_allowed(*l.allowed_paths);
    // A list that only drops entries narrows; anything new would loosen.
    if (l.trusted_authors) {
      if (is_subset(*l.trusted_authors, e.trusted_authors))
        e.trusted_authors = unique(*l.trusted_authors);
      else
        ignored("security.trustedAuthors " + quote_list(*l.trusted_authors),
                "a project file may only tighten security, and this would trust more authors");
    }
    if (l.audit_ignore_patterns) {
      auto patterns = convert_patterns(*l.audit_ignore_patterns, layer_kind::project);
      if (is_subset(patterns, e.audit_ignore_patterns))
        e.audit_ignore_patterns = std::move(patterns);
      else
        ignored("security.auditIgnorePatterns " + quote_list(*l.audit_ignore_patterns),
                "a project file may only tighten security, and this would leave more out of the audit");
    }
    if (l.extension_dirs) {
      auto dirs = unique(convert_paths(*l.extension_dirs, layer_kind::project, "extensionDirs", false));
      if (is_subset(dirs, e.extension_dirs))
        e.extension_dirs = std::move(dirs);
      else
        ignored("extensionDirs " + quote_list(*l.extension_dirs),
                "a project file may only tighten security, and this would load extensions from "
                "more folders");
    }
    if (l.audit_durability) {
      if (static_cast<int>(*l.audit_durability) >= static_cast<int>(e.audit_durability))
        e.audit_durability = *l.audit_durability;
      else
        ignored("security.audit.durability " + quote(to_string(*l.audit_durability)),
                "a project file may only raise the audit durability; it is " +
                    quote(to_string(e.audit_durability)));
    }
    // Rotation settings cut both ways (fewer files lose history, huge ones fill the disk).
    if (l.audit_max_bytes)
      ignored("security.audit.maxBytes " + std::to_string(*l.audit_max_bytes),
              "a project file cannot change audit rotation");
    if (l.audit_keep)
      ignored("security.audit.keep " + std::to_string(*l.audit_keep), "a project file cannot change audit rotation");
    if (l.require_os_sandbox) {
      if (*l.require_os_sandbox)
        e.require_os_sandbox = true;
      else
        warn_sandbox_off();
    }
    lower_only("extensions.callTimeoutMs", l.call_timeout_ms, e.call_timeout_ms);
    lower_only("extensions.cancelGraceMs", l.cancel_grace_ms, e.cancel_grace_ms);
    lower_only("extensions.killGraceMs", l.kill_grace_ms, e.kill_grace_ms);
    lower_only("extensions.maxRestarts", l.max_restarts, e.max_restarts);
    lower_only("extensions.maxLineBytes", l.max_line_bytes, e.max_line_bytes);
    // Restarts are counted per window: a shorter window allows more restarts, so only a
    // longer one tightens.
    if (l.restart_window_ms) {
      if (*l.restart_window_ms >= e.restart_window_ms)
        e.restart_window_ms = *l.restart_window_ms;
      else
        ignored("extensions.restartWindowMs " + std::to_string(*l.restart_window_ms),
                "a project file may only lengthen it, which counts restarts over a longer time; it is " +
                    std::to_string(e.restart_window_ms));
    }
  }

  template <class T>
  void lower_only(std::string_view key, const std::optional<T>& value, T& current) {
    if (!value) return;
    if (*value <= current)
      current = *value;
    else
      ignored(std::string(key) + " " + std::to_string(*value),
              "a project file may only lower it; it is " + std::to_string(current));
  }

  // An entry of an untrusted project narrows the allowed paths only when everything it can
  // match lies inside the project and inside an entry already allowed.
  bool narrows(std::string_view entry) const {
    // What the compile refuses (read_apart: `\/`, `[.`) narrows nothing.
    if (root_.empty() || !read_apart(entry).empty()) return false;
    const std::string dir = glob_literal_folder(entry);  // a name: the root is one too
    if (dir.empty() || !is_at_or_under(dir, root_)) return false;
    for (const std::string& a : out_.effective.allowed_paths) {
      if (!read_apart(a).empty()) continue;
      if (has_glob(a)) {
        if (glob_match_at_or_under(a, dir)) return true;
      } else if (const std::string name = glob_literal_folder(a); !name.empty() && is_at_or_under(dir, name)) {
        return true;  // the name `a` spells, normalized again (`\.\.` is `..`)
      }
    }
    return false;
  }

  void narrow_allowed(const std::vector<std::string>& written) {
    std::vector<std::string> accepted;
    for (const std::string& w : written) {
      auto a = absolute(w, layer_kind::project, true);
      if (!a) {
        warn(layer_kind::project, "security.allowedPaths entry " + quote(w) + " is ignored: " + a.err().message);
        continue;
      }
      if (narrows(*a))
        add_unique(accepted, std::move(*a));
      else
        ignored("security.allowedPaths entry " + quote(w),
                "a project file may only narrow the allowed paths to inside the project and inside "
                "the global security.allowedPaths");
    }
    // An empty list that was given means "allow nothing": the tightest narrowing there is.
    if (!accepted.empty() || written.empty()) {
      out_.effective.allowed_confined_to = settings::allowed_confinement{root_, out_.effective.allowed_paths};
      out_.effective.allowed_paths = std::move(accepted);
    }
    else
      warn(layer_kind::project, "no security.allowedPaths entry was accepted, so the global allowed paths stay");
  }

  const merge_context& ctx_;
  std::string root_;
  merged_settings out_;
  std::unordered_set<std::string> denied_seen_;  // out_.effective.denied_paths, to add each once
};

}  // namespace

std::string_view to_string(audit_durability d) {
  switch (d) {
    case audit_durability::none: return "none";
    case audit_durability::write: return "write";
    case audit_durability::fsync: return "fsync";
  }
  return "write";
}

result<parsed_layer> parse_settings(std::string_view text, std::string_view file, layer_kind kind) {
  if (std::all_of(text.begin(), text.end(), is_json_space)) return parse_settings_json(json::object(), file, kind);
  auto doc = parse_json_document(text, file);
  if (!doc) return doc.err();
  return parse_settings_json(*doc, file, kind);
}

result<parsed_layer> parse_settings_json(const nlohmann::json& doc, std::string_view file, layer_kind kind) {
  try {
    layer_parser p(file, kind);
    if (auto err = p.parse(doc)) return *err;
    return p.take();
  } catch (const std::exception& e) {  // only allocation failure is expected here
    return make_error(errc::invalid_value, std::string(file) + ": cannot read the settings: " + e.what());
  }
}

merged_settings merge_settings(const settings_layer& global, const settings_layer* project,
                               const settings_layer* cli, const merge_context& ctx) {
  merger m(ctx);
  m.apply_user(global, layer_kind::global);
  // Every folder some layer made an extension folder stays protected, even when a later
  // layer narrows extensionDirs: the extensions there still run in other sessions.
  std::vector<std::string> protect;
  auto keep_protected = [&] {
    for (const std::string& d : m.effective().extension_dirs)
      if (std::find(protect.begin(), protect.end(), d) == protect.end()) protect.push_back(d);
  };
  keep_protected();
  // A project's own .dhara folder (its extensions and its config) is protected as the global
  // extension folders are, trusted or not: else an extension allowed to write the project
  // rewrote another's code and ran with its approvals, planted one that runs once the project
  // is trusted, or wrote a config.json (created new, no mask hid it in the sandbox) that
  // loosens the rules of a trusted project at its next session.
  if (!ctx.project_root.empty()) {
    std::string own = ctx.project_root == "/" ? "/.dhara" : ctx.project_root + "/.dhara";
    if (std::find(protect.begin(), protect.end(), own) == protect.end()) protect.push_back(std::move(own));
  }
  // The command line is the user too, so its trustedProjects (when given) decide trust as
  // the global file's do; a project can never vouch for itself.
  std::vector<std::string> trusted = m.effective().trusted_projects;
  if (cli && cli->trusted_projects) trusted = m.trust_list(*cli->trusted_projects, layer_kind::cli);
  bool project_trusted = m.is_trusted(trusted);
  if (project) m.apply_project(*project, project_trusted);
  keep_protected();
  if (cli) m.apply_user(*cli, layer_kind::cli);
  keep_protected();
  merged_settings out = m.finish();
  out.effective.project_trusted = project_trusted;
  out.effective.protected_extension_dirs = std::move(protect);
  return out;
}

std::span<const setting_key> setting_keys() { return settable_keys; }

const setting_key* find_setting_key(std::string_view name) {
  for (const setting_key& k : settable_keys)
    if (k.name == name) return &k;
  return nullptr;
}

std::string suggest_setting_key(std::string_view name) {
  auto leaf_of = [](std::string_view s) {
    auto dot = s.rfind('.');
    return dot == std::string_view::npos ? s : s.substr(dot + 1);
  };
  auto hint = [](std::string_view key) { return " (did you mean '" + std::string(key) + "'?)"; };
  // A known key written at the wrong place ("level", "security.keep") is meant exactly.
  std::string_view leaf = leaf_of(name);
  for (const setting_key& k : settable_keys)
    if (!leaf.empty() && leaf_of(k.name) == leaf) return hint(k.name);
  std::array<std::string_view, settable_keys.size()> names{};
  for (std::size_t i = 0; i < settable_keys.size(); ++i) names[i] = settable_keys[i].name;
  if (std::string_view best = closest_match(name, names); !best.empty()) return hint(best);
  // Else a typo in a misplaced key ("extensions.levle"): the closest last segment.
  std::array<std::string_view, settable_keys.size()> leaves{};
  for (std::size_t i = 0; i < settable_keys.size(); ++i) leaves[i] = leaf_of(settable_keys[i].name);
  if (leaf.empty()) return {};
  std::string_view best = closest_match(leaf, leaves);
  if (best.empty()) return {};
  for (const setting_key& k : settable_keys)
    if (leaf_of(k.name) == best) return hint(k.name);
  return {};
}

bool is_list(setting_type type) {
  switch (type) {
    case setting_type::path_list:
    case setting_type::pattern_list:
    case setting_type::name_list: return true;
    case setting_type::level:
    case setting_type::durability:
    case setting_type::boolean:
    case setting_type::whole_number: return false;
  }
  return false;
}

bool is_path_rules_key(std::string_view name) {
  return name == "security.allowedPaths" || name == "security.deniedPaths";
}

std::optional<error> check_setting_value(const setting_key& key, const nlohmann::json& value,
                                         std::string_view file, layer_kind kind) {
  try {
    // The value alone in an otherwise empty file: the parser is the one judge of a value.
    json doc = value;
    std::string_view rest = key.name;
    std::vector<std::string_view> parts;
    for (auto dot = rest.find('.'); dot != std::string_view::npos; dot = rest.find('.')) {
      parts.push_back(rest.substr(0, dot));
      rest.remove_prefix(dot + 1);
    }
    parts.push_back(rest);
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) doc = json{{std::string(*it), std::move(doc)}};
    auto parsed = parse_settings_json(doc, file, kind);
    if (!parsed) return parsed.err();
    return std::nullopt;
  } catch (const std::exception& e) {  // allocation failure
    return make_error(errc::invalid_value, std::string(file) + ": cannot check " + std::string(key.name) + ": " + e.what());
  }
}

std::optional<error> path_rules_refusal(const setting_key& key, const nlohmann::json& value, std::string_view file) {
  if (!is_path_rules_key(key.name) || !value.is_array()) return std::nullopt;
  for (const json& e : value) {
    if (!e.is_string()) continue;
    // Relative (project) entries and `~` are anchored at an escaped root or home, which adds
    // neither form, so the entry as written is what to read.
    const std::string& entry = e.get_ref<const std::string&>();
    if (std::string why = read_apart(entry); !why.empty())
      return make_error(errc::invalid_value,
                        std::string(file) + ": " + std::string(key.name) + " entry " + quote(entry) + " " + why);
  }
  return std::nullopt;
}

std::optional<std::string> project_refusal(const setting_key& key, const nlohmann::json& value,
                                           std::string_view global_file) {
  if (key.project == project_rule::global_only)
    return std::string(key.name) + " is read only from the global file " + std::string(global_file) +
           " (a project cannot vouch for itself); set it there";
  if (key.name == "security.requireOsSandbox" && value.is_boolean() && !value.get<bool>())
    return "a project file cannot turn security.requireOsSandbox off, even in a trusted project; set it in "
           "the global file " + std::string(global_file);
  return std::nullopt;
}

json effective_value(const settings& s, const setting_key& key) {
  const std::string_view n = key.name;
  if (n == "security.level") return std::string(to_string(s.level));
  if (n == "security.trustedAuthors") return s.trusted_authors;
  if (n == "security.allowedPaths") return s.allowed_paths;
  if (n == "security.deniedPaths") return s.denied_paths;
  if (n == "security.auditIgnorePatterns") return s.audit_ignore_patterns;
  if (n == "security.trustedProjects") return s.trusted_projects;
  if (n == "security.audit.durability") return std::string(to_string(s.audit_durability));
  if (n == "security.audit.maxBytes") return s.audit_max_bytes;
  if (n == "security.audit.keep") return s.audit_keep;
  if (n == "security.requireOsSandbox") return s.require_os_sandbox;
  if (n == "extensionDirs") return s.extension_dirs;
  if (n == "extensions.callTimeoutMs") return s.call_timeout_ms;
  if (n == "extensions.cancelGraceMs") return s.cancel_grace_ms;
  if (n == "extensions.killGraceMs") return s.kill_grace_ms;
  if (n == "extensions.maxRestarts") return s.max_restarts;
  if (n == "extensions.restartWindowMs") return s.restart_window_ms;
  if (n == "extensions.maxLineBytes") return s.max_line_bytes;
  return nullptr;  // not a key of the table
}

}  // namespace dhara::policy
