// YAML → JSON with yaml-cpp, bounded in depth and size so that a hostile manifest.yaml can
// neither exhaust the stack nor blow up memory through aliases ("billion laughs").
#include "io/yaml.hpp"

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace dhara::io {
namespace {

using json = nlohmann::json;
using policy::errc;
using policy::error;
using policy::make_error;

constexpr int max_depth = 256;  // the protocol's JSON nesting limit (DESIGN §9)

// Third-party messages may quote the input: keep them printable ASCII.
std::string printable(std::string_view s) {
  std::string out;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
}

std::string at(std::string_view source, const YAML::Mark& mark) {
  std::string s(source);
  if (!mark.is_null()) s += ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
  return s;
}

// nlohmann refuses to dump invalid UTF-8, and the manifest's strings are shown to users.
bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t len;
    std::uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (std::size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    constexpr std::uint32_t min_for_len[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_for_len[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

bool is_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// YAML 1.2 core schema integer: [-+]?[0-9]+ (decimal only).
std::optional<json> as_integer(std::string_view s) {
  std::string_view digits = s;
  if (!digits.empty() && (digits.front() == '-' || digits.front() == '+')) digits.remove_prefix(1);
  if (!is_digits(digits)) return std::nullopt;
  std::string_view parse = s.front() == '+' ? digits : s;
  std::int64_t i = 0;
  auto [p, ec] = std::from_chars(parse.data(), parse.data() + parse.size(), i);
  if (ec == std::errc() && p == parse.data() + parse.size()) return json(i);
  if (s.front() != '-') {
    std::uint64_t u = 0;
    auto [pu, ecu] = std::from_chars(digits.data(), digits.data() + digits.size(), u);
    if (ecu == std::errc() && pu == digits.data() + digits.size()) return json(u);
  }
  return std::nullopt;  // too large: resolved as a float
}

// YAML 1.2 core schema float: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
// (.inf and .nan have no JSON form and stay strings).
std::optional<json> as_float(std::string_view s) {
  std::string_view rest = s;
  if (!rest.empty() && (rest.front() == '-' || rest.front() == '+')) rest.remove_prefix(1);
  std::size_t i = 0, int_digits = 0, frac_digits = 0;
  while (i < rest.size() && rest[i] >= '0' && rest[i] <= '9') ++i, ++int_digits;
  if (i < rest.size() && rest[i] == '.') {
    ++i;
    while (i < rest.size() && rest[i] >= '0' && rest[i] <= '9') ++i, ++frac_digits;
  }
  if (int_digits == 0 && frac_digits == 0) return std::nullopt;
  if (i < rest.size() && (rest[i] == 'e' || rest[i] == 'E')) {
    ++i;
    if (i < rest.size() && (rest[i] == '-' || rest[i] == '+')) ++i;
    if (!is_digits(rest.substr(i))) return std::nullopt;
    i = rest.size();
  }
  if (i != rest.size()) return std::nullopt;
  std::string_view parse = s.front() == '+' ? rest : s;
  double d = 0;
  auto [p, ec] = std::from_chars(parse.data(), parse.data() + parse.size(), d);
  if (ec != std::errc() || p != parse.data() + parse.size()) return std::nullopt;
  return json(d);
}

json resolve_plain(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  // Only the YAML 1.2 booleans: "yes", "no", "on" and "off" stay strings.
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (auto i = as_integer(s)) return *i;
  if (auto d = as_float(s)) return *d;
  return s;
}

class converter {
 public:
  converter(std::string_view source, std::size_t text_size)
      : source_(source),
        // Without aliases a document cannot hold more nodes or scalar bytes than a small
        // multiple of its text; beyond that, aliases are being expanded on purpose.
        nodes_left_(4 * text_size + 1024),
        bytes_left_(4 * text_size + 65536) {}

  std::optional<error> convert(const YAML::Node& node, int depth, json& out) {
    if (nodes_left_ == 0) return too_big(node);
    --nodes_left_;
    switch (node.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        out = nullptr;
        return std::nullopt;
      case YAML::NodeType::Scalar: {
        const std::string& s = node.Scalar();
        if (auto e = check_scalar(node, s)) return e;
        // yaml-cpp tags quoted scalars "!" and plain ones "?": quoting keeps text as text.
        const std::string& tag = node.Tag();
        if (tag == "!" || tag == "tag:yaml.org,2002:str") out = s;
        else out = resolve_plain(s);
        return std::nullopt;
      }
      case YAML::NodeType::Sequence: {
        if (depth >= max_depth) return too_deep(node);
        out = json::array();
        for (const auto& child : node) {
          json value;
          if (auto e = convert(child, depth + 1, value)) return e;
          out.push_back(std::move(value));
        }
        return std::nullopt;
      }
      case YAML::NodeType::Map: {
        if (depth >= max_depth) return too_deep(node);
        out = json::object();
        for (auto it = node.begin(); it != node.end(); ++it) {
          const YAML::Node& key = it->first;
          if (!key.IsScalar())
            return fail(key.Mark(), "a map key must be a string, not a " +
                                        std::string(key.IsNull() ? "null" : key.IsMap() ? "map" : "list"));
          const std::string& k = key.Scalar();
          if (auto e = check_scalar(key, k)) return e;
          // Two parsers picking different duplicates is how policy confusion starts.
          if (out.contains(k)) return fail(key.Mark(), "duplicate key '" + printable(k) + "'");
          json value;
          if (auto e = convert(it->second, depth + 1, value)) return e;
          out.emplace(k, std::move(value));
        }
        return std::nullopt;
      }
    }
    return fail(node.Mark(), "unknown YAML node type");
  }

 private:
  std::optional<error> fail(const YAML::Mark& mark, const std::string& what) const {
    return make_error(errc::parse_error, at(source_, mark) + ": " + what);
  }
  std::optional<error> too_deep(const YAML::Node& node) const {
    return fail(node.Mark(), "nested deeper than 256 levels");
  }
  std::optional<error> too_big(const YAML::Node& node) const {
    return fail(node.Mark(), "aliases expand to far more data than the file holds; refusing");
  }
  std::optional<error> check_scalar(const YAML::Node& node, const std::string& s) {
    if (s.size() > bytes_left_) return too_big(node);
    bytes_left_ -= s.size();
    if (!valid_utf8(s)) return fail(node.Mark(), "invalid UTF-8");
    return std::nullopt;
  }

  std::string_view source_;
  std::size_t nodes_left_;
  std::size_t bytes_left_;
};

}  // namespace

policy::result<nlohmann::json> yaml_to_json(std::string_view text, std::string_view source) {
  try {
    std::vector<YAML::Node> docs = YAML::LoadAll(std::string(text));
    if (docs.empty()) return json(nullptr);
    if (docs.size() > 1)
      return make_error(errc::parse_error, std::string(source) + ": holds " + std::to_string(docs.size()) +
                                               " YAML documents; expected exactly one");
    converter c(source, text.size());
    json out;
    if (auto e = c.convert(docs.front(), 0, out)) return *e;
    return out;
  } catch (const YAML::Exception& e) {
    return make_error(errc::parse_error, at(source, e.mark) + ": invalid YAML: " + printable(e.msg));
  } catch (const std::exception& e) {
    return make_error(errc::parse_error, std::string(source) + ": invalid YAML: " + printable(e.what()));
  } catch (...) {
    return make_error(errc::parse_error, std::string(source) + ": invalid YAML");
  }
}

policy::result<policy::manifest> load_manifest_text(std::string_view text, bool yaml,
                                                    std::string_view source) {
  if (!yaml) return policy::parse_manifest_text(text, source);
  auto doc = yaml_to_json(text, source);
  if (!doc) return doc.err();
  return policy::parse_manifest(*doc, source);
}

}  // namespace dhara::io
