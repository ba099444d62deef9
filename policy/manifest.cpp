// Extension manifest validation and the shell-free command splitter. A manifest comes
// from a folder the user has not reviewed yet, so every field is checked and echoed safely.
#include "policy/manifest.hpp"

#include <algorithm>
#include <stdexcept>

#include "policy/json_text.hpp"
#include "policy/text.hpp"

namespace dhara::policy {
namespace {

using json = nlohmann::json;

constexpr std::size_t max_name_bytes = 214;  // npm's limit; the name becomes a folder name
constexpr std::size_t max_shown_bytes = 64;
constexpr std::size_t max_suggest_bytes = 64;  // edit distance is quadratic: skip huge words

// Values from an untrusted manifest end up on the user's terminal: escape control and
// non-ASCII bytes (no escape sequences, no bidi tricks) and cut long values.
std::string shown(std::string_view s) { return "'" + printable_excerpt(s, max_shown_bytes) + "'"; }

std::string suggestion(std::string_view word) {
  if (word.size() > max_suggest_bytes) return {};
  const auto& names = capability_names();
  return did_you_mean(word, std::span<const std::string_view>(names.data(), names.size()));
}

bool has_control(std::string_view s, bool allow_newlines) {
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (allow_newlines && (c == '\n' || c == '\t')) continue;
    if (c < 0x20 || c == 0x7f) return true;
  }
  return false;
}

// ASCII-only classes (<cctype> follows the process locale): these checks guard folder
// and host names.
bool is_lower(unsigned char c) { return c >= 'a' && c <= 'z'; }
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_hex(unsigned char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Builds "manifest.json: runtime.command: …" messages.
struct reporter {
  std::string_view source;

  error missing(const std::string& field) const {
    return make_error(errc::missing_field,
                      std::string(source) + ": " + field + ": required field is missing");
  }
  error type(const std::string& field, std::string_view expected, const json& got) const {
    std::string msg = std::string(source) + ": " + field + ": expected " + std::string(expected) +
                      ", got " + std::string(json_type_name(got));
    // YAML turns unquoted 1.0 or true into a number or boolean; say how to keep the text.
    if (expected == "a string" && (got.is_number() || got.is_boolean()))
      msg += "; put the value in quotes";
    return make_error(errc::invalid_type, std::move(msg));
  }
  error value(const std::string& field, const std::string& sentence,
              errc code = errc::invalid_value) const {
    return make_error(code, std::string(source) + ": " + field + ": " + sentence);
  }
};

// Reads an optional string field; a present non-string is an error.
std::optional<error> optional_string(const reporter& r, const json& obj, const char* key,
                                     const std::string& field, std::optional<std::string>& out) {
  auto it = obj.find(key);
  if (it == obj.end()) return std::nullopt;
  if (!it->is_string()) return r.type(field, "a string", *it);
  out = it->get<std::string>();
  return std::nullopt;
}

// Why one part of a name (the scope or the bare name) is invalid, or "".
std::string part_problem(std::string_view part) {
  if (part.empty()) return "has an empty scope or name part";
  for (char c : part) {
    if (c >= 'A' && c <= 'Z') return "has uppercase letters; extension names are lowercase";
    if (c == '/') return "contains '/'; only a scoped name '@scope/name' may, once";
  }
  auto first = static_cast<unsigned char>(part.front());
  if (!is_lower(first) && !is_digit(first)) return "must start with a lowercase letter or a digit";
  for (char ch : part) {
    auto c = static_cast<unsigned char>(ch);
    if (!(is_lower(c) || is_digit(c) || c == '.' || c == '_' || c == '-'))
      return "may hold only lowercase letters, digits, '.', '_' and '-'";
  }
  return {};
}

// Why a name is not a valid extension name, or "" when it is.
std::string name_problem(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name.size() > max_name_bytes)
    return "is " + std::to_string(name.size()) + " bytes long; the limit is 214";
  if (name.find("..") != std::string_view::npos)
    return "contains '..'; the name becomes a folder name and must stay inside the extensions folder";
  if (name.front() != '@') return part_problem(name);
  auto slash = name.find('/');
  if (slash == std::string_view::npos) return "starts with '@' but has no '/name' after the scope";
  if (auto p = part_problem(name.substr(1, slash - 1)); !p.empty()) return p;
  return part_problem(name.substr(slash + 1));
}

bool is_ipv6_literal(std::string_view h) {
  if (h.size() < 2 || h.size() > 45) return false;
  std::size_t colons = 0;
  for (char c : h) {
    if (c == ':') ++colons;
    else if (!(is_hex(static_cast<unsigned char>(c)) || c == '.')) return false;
  }
  return colons >= 2;
}

// DNS host name: labels of [a-z0-9_-], 1–63 bytes, not starting or ending with '-'.
bool is_hostname(std::string_view h) {
  if (h.empty() || h.size() > 253) return false;
  std::size_t start = 0;
  while (true) {
    auto dot = h.find('.', start);
    auto label = h.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') return false;
    for (char ch : label) {
      auto c = static_cast<unsigned char>(ch);
      if (!(is_lower(c) || is_digit(c) || c == '-' || c == '_')) return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// Lowercases and validates one network.outbound domain; nullopt and `why` on failure.
std::optional<std::string> normalize_domain(std::string_view raw, std::string& why) {
  std::string d;
  d.reserve(raw.size());
  for (char ch : raw) d += (ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch - 'A' + 'a') : ch;
  if (d.find("://") != std::string::npos || d.find('/') != std::string::npos) {
    why = "is not a host name: give the host alone, e.g. 'api.example.com'";
    return std::nullopt;
  }
  for (char ch : d)
    if (static_cast<unsigned char>(ch) >= 0x80) {
      why = "is not an ASCII host name: write international names in their 'xn--' form";
      return std::nullopt;
    }
  if (d.size() > 2 && d.front() == '[' && d.back() == ']' && is_ipv6_literal(std::string_view(d).substr(1, d.size() - 2)))
    return d.substr(1, d.size() - 2);
  if (is_ipv6_literal(d)) return d;
  if (d.starts_with("*.")) {
    if (is_hostname(std::string_view(d).substr(2))) return d;
    why = "is not a valid wildcard: use '*.' followed by a host name, e.g. '*.example.com'";
    return std::nullopt;
  }
  if (is_hostname(d)) return d;
  why = "is not a host name or '*.suffix' (no scheme, port, path or spaces)";
  return std::nullopt;
}

std::string operator_name(char c) {
  switch (c) {
    case '|': return "a pipe";
    case '&': return "a background or '&&' operator";
    case ';': return "a command separator";
    case '<':
    case '>': return "a redirection";
    case '(':
    case ')': return "a subshell";
    case '$': return "a variable or command substitution";
    case '`': return "a command substitution";
    default: return "shell syntax";
  }
}

bool is_shell_operator(char c) {
  switch (c) {
    case '|': case '&': case ';': case '<': case '>': case '(': case ')': case '$': case '`':
      return true;
    default:
      return false;
  }
}

error split_error(std::string sentence) {
  return make_error(errc::invalid_value, std::move(sentence));
}

result<author_info> parse_author_field(const reporter& r, const json& a) {
  author_info info;
  if (a.is_string()) {
    info = parse_author(a.get_ref<const std::string&>());
  } else if (a.is_object()) {
    auto name = a.find("name");
    if (name == a.end()) return r.missing("author.name");
    if (!name->is_string()) return r.type("author.name", "a string", *name);
    info.name = name->get<std::string>();
    auto email = a.find("email");
    if (email != a.end()) {
      if (!email->is_string()) return r.type("author.email", "a string", *email);
      info.email = email->get<std::string>();
    }
  } else {
    return r.type("author", "a string or an object {name, email}", a);
  }
  if (info.name.empty() && info.email.empty())
    return r.value("author", "is empty; give a name, or remove the field");
  // The author is shown in approval prompts: no terminal control characters.
  if (has_control(info.name, false) || has_control(info.email, false))
    return r.value("author", "holds control characters");
  return info;
}

result<std::vector<std::string>> parse_domains(const reporter& r, const json& list) {
  if (!list.is_array()) return r.type("network.outbound", "an array", list);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& item = list[i];
    std::string field = "network.outbound[" + std::to_string(i) + "]";
    const json* domain = &item;
    if (item.is_object()) {
      auto d = item.find("domain");
      if (d == item.end()) return r.missing(field + ".domain");
      auto purpose = item.find("purpose");
      if (purpose != item.end() && !purpose->is_string())
        return r.type(field + ".purpose", "a string", *purpose);
      domain = &*d;
      field += ".domain";
    } else if (!item.is_string()) {
      return r.type(field, "an object {domain, purpose} or a string", item);
    }
    if (!domain->is_string()) return r.type(field, "a string", *domain);
    const auto& text = domain->get_ref<const std::string&>();
    std::string why;
    auto normalized = normalize_domain(text, why);
    if (!normalized) return r.value(field, shown(text) + " " + why);
    if (std::find(out.begin(), out.end(), *normalized) == out.end()) out.push_back(std::move(*normalized));
  }
  return out;
}

result<std::vector<std::string>> parse_commands(const reporter& r, const json& list) {
  if (!list.is_array()) return r.type("process.commands", "an array", list);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    std::string field = "process.commands[" + std::to_string(i) + "]";
    if (!list[i].is_string()) return r.type(field, "a string", list[i]);
    const auto& cmd = list[i].get_ref<const std::string&>();
    if (cmd.empty()) return r.value(field, "is empty");
    if (has_control(cmd, false)) return r.value(field, shown(cmd) + " holds control characters");
    out.push_back(cmd);
  }
  return out;
}

result<manifest> parse_manifest_impl(const json& doc, std::string_view source) {
  reporter r{source};
  if (!doc.is_object())
    return make_error(errc::invalid_type, std::string(source) + ": expected an object at the top level, got " +
                                              std::string(json_type_name(doc)));
  manifest m;

  auto name = doc.find("name");
  if (name == doc.end()) return r.missing("name");
  if (!name->is_string()) return r.type("name", "a string", *name);
  m.name = name->get<std::string>();
  if (auto problem = name_problem(m.name); !problem.empty())
    return r.value("name", shown(m.name) + " is not a valid extension name: it " + problem +
                               " (use lowercase npm-style names such as 'web-tools' or '@scope/web-tools')");

  auto version = doc.find("version");
  if (version == doc.end()) return r.missing("version");
  if (!version->is_string()) return r.type("version", "a string", *version);
  m.version = version->get<std::string>();
  if (m.version.empty()) return r.value("version", "is empty");
  // Printable ASCII only: the version is shown in the install review and prompts, where an
  // 8-bit control (U+009B, a CSI) or a bidi override would redraw or reorder what follows.
  for (char ch : m.version) {
    auto c = static_cast<unsigned char>(ch);
    if (c <= 0x20 || c >= 0x7f)
      return r.value("version", shown(m.version) + " holds whitespace, control or non-ASCII characters (a version "
                                                     "is plain ASCII, such as '1.2.0')");
  }
  if (m.version.size() > 64) return r.value("version", "is longer than 64 bytes");

  std::optional<std::string> description;
  if (auto e = optional_string(r, doc, "description", "description", description)) return *e;
  if (description) {
    if (has_control(*description, true)) return r.value("description", "holds control characters");
    m.description = std::move(*description);
  }

  if (auto a = doc.find("author"); a != doc.end()) {
    auto author = parse_author_field(r, *a);
    if (!author) return author.err();
    m.author = std::move(*author);
  }

  auto runtime = doc.find("runtime");
  if (runtime == doc.end()) return r.missing("runtime");
  if (!runtime->is_object()) return r.type("runtime", "an object", *runtime);
  auto type = runtime->find("type");
  if (type == runtime->end()) return r.missing("runtime.type");
  if (!type->is_string()) return r.type("runtime.type", "a string", *type);
  if (type->get_ref<const std::string&>() != "subprocess")
    return r.value("runtime.type",
                   shown(type->get_ref<const std::string&>()) +
                       " is not supported: dhara runs extensions only as \"subprocess\" (a separate "
                       "process speaking JSON-RPC over stdin/stdout)",
                   errc::unsupported_runtime);
  auto command = runtime->find("command");
  if (command == runtime->end()) return r.missing("runtime.command");
  if (!command->is_string()) return r.type("runtime.command", "a string", *command);
  m.runtime_command = command->get<std::string>();
  auto argv = split_command(m.runtime_command);
  if (!argv) return r.value("runtime.command", argv.err().message);
  m.argv = std::move(*argv);
  std::optional<std::string> protocol;
  if (auto e = optional_string(r, *runtime, "protocol", "runtime.protocol", protocol)) return *e;
  m.protocol = protocol.value_or("json-rpc");
  if (m.protocol != "json-rpc")
    return r.value("runtime.protocol", shown(m.protocol) + " is not supported: use \"json-rpc\"");

  if (auto caps = doc.find("capabilities"); caps != doc.end()) {
    if (!caps->is_array()) return r.type("capabilities", "an array", *caps);
    for (std::size_t i = 0; i < caps->size(); ++i) {
      const json& c = (*caps)[i];
      std::string field = "capabilities[" + std::to_string(i) + "]";
      if (!c.is_string()) return r.type(field, "a string", c);
      const auto& cap_name = c.get_ref<const std::string&>();
      auto cap = parse_capability(cap_name);
      if (!cap) {
        // A manifest states exactly what it needs, so the user sees each capability.
        if (cap_name.ends_with(":*")) {
          auto group = parse_capability_pattern(cap_name);
          std::string members = group ? " (" + join_names(*group) + ")" : std::string();
          return r.value(field, shown(cap_name) + " is a wildcard; a manifest must list each capability it needs" +
                                    members, errc::unknown_capability);
        }
        return r.value(field, "unknown capability " + shown(cap_name) + suggestion(cap_name) +
                                  "; see 'dhara config permissions --help' for the catalog",
                       errc::unknown_capability);
      }
      if (m.capabilities.contains(*cap)) continue;
      m.capabilities.insert(*cap);
      m.capability_names.push_back(cap_name);
    }
  }

  if (auto net = doc.find("network"); net != doc.end()) {
    if (!net->is_object()) return r.type("network", "an object", *net);
    if (auto out = net->find("outbound"); out != net->end()) {
      auto domains = parse_domains(r, *out);
      if (!domains) return domains.err();
      m.network_domains = std::move(*domains);
    }
  }

  if (auto proc = doc.find("process"); proc != doc.end()) {
    if (!proc->is_object()) return r.type("process", "an object", *proc);
    if (auto cmds = proc->find("commands"); cmds != proc->end()) {
      auto commands = parse_commands(r, *cmds);
      if (!commands) return commands.err();
      m.process_commands = std::move(*commands);
    }
  }

  m.raw = doc;
  return m;
}

}  // namespace

bool is_valid_extension_name(std::string_view name) { return name_problem(name).empty(); }

result<std::vector<std::string>> split_command(std::string_view command) {
  if (command.find('\0') != std::string_view::npos)
    return split_error("the command holds a NUL byte");
  std::vector<std::string> argv;
  std::string word;
  bool in_word = false;
  auto finish_word = [&] {
    if (in_word) argv.push_back(std::move(word));
    word.clear();
    in_word = false;
  };
  const std::size_t n = command.size();
  std::size_t i = 0;
  while (i < n) {
    char c = command[i];
    if (c == ' ' || c == '\t') {
      finish_word();
      ++i;
    } else if (c == '\n' || c == '\r') {
      return split_error("a newline at column " + std::to_string(i + 1) +
                         " would start a second command in a shell; give a single command");
    } else if (c == '\\') {
      if (i + 1 >= n) return split_error("the command ends with a lone backslash");
      // Backslash-newline is a line continuation in a shell: it disappears.
      if (command[i + 1] != '\n') {
        word += command[i + 1];
        in_word = true;
      }
      i += 2;
    } else if (c == '\'') {
      // Single quotes: everything literal up to the next quote, as in a shell.
      auto close = command.find('\'', i + 1);
      if (close == std::string_view::npos)
        return split_error("the single quote at column " + std::to_string(i + 1) + " is never closed");
      word.append(command.substr(i + 1, close - i - 1));
      in_word = true;
      i = close + 1;
    } else if (c == '"') {
      std::size_t open = i++;
      in_word = true;
      while (true) {
        if (i >= n)
          return split_error("the double quote at column " + std::to_string(open + 1) + " is never closed");
        char d = command[i];
        if (d == '"') {
          ++i;
          break;
        }
        // A shell expands these even inside double quotes, so taking them literally would
        // run something other than what the author tested; single quotes make them literal.
        if (d == '$' || d == '`')
          return split_error("'" + std::string(1, d) + "' at column " + std::to_string(i + 1) +
                             " would be " + operator_name(d) +
                             " inside double quotes in a shell; dhara runs no shell, so use "
                             "single quotes for a literal '" + std::string(1, d) + "'");
        if (d == '\\' && i + 1 < n) {
          char e = command[i + 1];
          if (e == '"' || e == '\\' || e == '$' || e == '`') {
            word += e;
            i += 2;
            continue;
          }
          if (e == '\n') {
            i += 2;
            continue;
          }
        }
        word += d;
        ++i;
      }
    } else if (is_shell_operator(c)) {
      return split_error("'" + std::string(1, c) + "' at column " + std::to_string(i + 1) + " is " +
                         operator_name(c) +
                         ", but dhara runs the command without a shell; put shell logic in a "
                         "script and run that, or quote the character if it is meant literally");
    } else {
      word += c;
      in_word = true;
      ++i;
    }
  }
  finish_word();
  if (argv.empty()) return split_error("the command is empty");
  if (argv.front().empty()) return split_error("the program name is empty");
  return argv;
}

result<manifest> parse_manifest(const nlohmann::json& doc, std::string_view source) {
  try {
    return parse_manifest_impl(doc, source);
  } catch (const std::exception& e) {
    // Only allocation failures are expected here; they must not escape policy/.
    return make_error(errc::invalid_value, std::string(source) + ": cannot be read: " + printable_excerpt(e.what()));
  }
}

result<manifest> parse_manifest_text(std::string_view json_text, std::string_view source) {
  auto doc = parse_json_document(json_text, source);
  if (!doc) return doc.err();
  return parse_manifest(*doc, source);
}

}  // namespace dhara::policy
