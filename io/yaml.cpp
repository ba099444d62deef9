// YAML → JSON with yaml-cpp, bounded in depth and size so that a hostile manifest.yaml can
// neither exhaust the stack nor blow up memory through aliases ("billion laughs").
#include "io/yaml.hpp"

#include <charconv>
#include <cstdint>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "policy/json_text.hpp"

namespace dhara::io {
namespace {

using json = nlohmann::json;
using policy::errc;
using policy::error;
using policy::make_error;

constexpr std::size_t max_depth = policy::max_json_depth;  // the same limit as for JSON (DESIGN §9)

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

// Thrown out of the event handler to stop the parser at the first problem.
struct conversion_failure {
  error err;
};

// Builds JSON from yaml-cpp's parse events. Working on events rather than YAML::Node keeps
// the nesting on an explicit stack, sees aliases as aliases, and lets the caller stop after
// one document (yaml-cpp 0.7 loops forever emitting empty documents for a lone ',').
class json_builder final : public YAML::EventHandler {
 public:
  json_builder(std::string_view source, std::size_t text_size)
      : source_(source),
        // Without aliases a document cannot hold more nodes or scalar bytes than a small
        // multiple of its text; beyond that, aliases are being expanded on purpose.
        nodes_left_(4 * text_size + 1024),
        bytes_left_(4 * text_size + 65536) {}

  json take_root() { return std::move(root_); }
  const YAML::Mark& document_start() const { return start_; }

  void OnDocumentStart(const YAML::Mark& mark) override { start_ = mark; }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    if (expecting_key()) fail(mark, "a map key must be a string, not null");
    charge(mark, {1, 0});
    add(nullptr, {1, 0}, anchor);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    if (expecting_key()) fail(mark, "a map key must be a string, not an alias");
    auto it = anchors_.find(anchor);
    // yaml-cpp already refuses undefined anchors; an open one means the node contains itself.
    if (it == anchors_.end()) fail(mark, "an alias refers to a node that contains it");
    charge(mark, it->second.total);
    add(it->second.value, it->second.total, 0);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    cost c{1, value.size()};
    charge(mark, c);
    if (!valid_utf8(value)) fail(mark, "invalid UTF-8");
    if (expecting_key()) {
      frame& f = stack_.back();
      // Two parsers picking different duplicates is how policy confusion starts.
      if (f.value.contains(value)) fail(mark, "duplicate key '" + policy::printable_excerpt(value) + "'");
      f.key = value;
      if (anchor) anchors_[anchor] = {json(value), c};
      return;
    }
    // yaml-cpp tags quoted scalars "!" and plain ones "?": quoting keeps text as text.
    if (tag == "!" || tag == "tag:yaml.org,2002:str") add(json(value), c, anchor);
    else add(resolve_plain(value), c, anchor);
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, json::array(), anchor, "a list");
  }
  void OnSequenceEnd() override { close(); }

  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, json::object(), anchor, "a map");
  }
  void OnMapEnd() override { close(); }

 private:
  struct cost {
    std::size_t nodes = 0;
    std::size_t bytes = 0;
  };
  struct frame {
    json value;
    YAML::anchor_t anchor;
    cost total;
    std::optional<std::string> key;  // maps: the key waiting for its value
  };
  struct anchored {
    json value;
    cost total;
  };

  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& what) const {
    throw conversion_failure{make_error(errc::parse_error, at(source_, mark) + ": " + what)};
  }

  void charge(const YAML::Mark& mark, cost c) {
    if (c.nodes > nodes_left_ || c.bytes > bytes_left_)
      fail(mark, "aliases expand to far more data than the file holds; refusing");
    nodes_left_ -= c.nodes;
    bytes_left_ -= c.bytes;
  }

  bool expecting_key() const { return !stack_.empty() && stack_.back().value.is_object() && !stack_.back().key; }

  void open(const YAML::Mark& mark, json empty, YAML::anchor_t anchor, const char* what) {
    if (expecting_key()) fail(mark, std::string("a map key must be a string, not ") + what);
    if (stack_.size() >= max_depth) fail(mark, "nested deeper than 256 levels");
    charge(mark, {1, 0});
    stack_.push_back({std::move(empty), anchor, {1, 0}, std::nullopt});
  }

  void close() {
    frame f = std::move(stack_.back());
    stack_.pop_back();
    add(std::move(f.value), f.total, f.anchor);
  }

  void add(json value, cost c, YAML::anchor_t anchor) {
    if (anchor) anchors_[anchor] = {value, c};
    if (stack_.empty()) {
      root_ = std::move(value);
      return;
    }
    frame& parent = stack_.back();
    parent.total.nodes += c.nodes;
    parent.total.bytes += c.bytes;
    if (parent.value.is_object()) {
      parent.value.emplace(std::move(*parent.key), std::move(value));
      parent.key.reset();
    } else {
      parent.value.push_back(std::move(value));
    }
  }

  std::string_view source_;
  std::size_t nodes_left_;
  std::size_t bytes_left_;
  std::vector<frame> stack_;
  std::map<YAML::anchor_t, anchored> anchors_;
  json root_;
  YAML::Mark start_;
};

// Only notes where a further document starts; its content is never built.
struct document_counter final : YAML::EventHandler {
  YAML::Mark start;
  void OnDocumentStart(const YAML::Mark& mark) override { start = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

}  // namespace

policy::result<nlohmann::json> yaml_to_json(std::string_view text, std::string_view source) {
  try {
    std::istringstream in{std::string(text)};
    YAML::Parser parser(in);
    json_builder builder(source, text.size());
    if (!parser.HandleNextDocument(builder)) return json(nullptr);  // empty or comments only
    // A second document is refused rather than ignored: the file would mean two things.
    // Stopping here also ends yaml-cpp's endless empty documents for some malformed input.
    document_counter counter;
    if (parser.HandleNextDocument(counter)) {
      // A "document" where the last one started means the parser made no progress: a token
      // such as a stray ',' that yaml-cpp 0.7 neither consumes nor reports.
      if (counter.start.pos == builder.document_start().pos)
        return make_error(errc::parse_error, at(source, counter.start) + ": invalid YAML: unexpected character");
      return make_error(errc::parse_error, at(source, counter.start) +
                                               ": a second YAML document starts here; expected exactly one");
    }
    return builder.take_root();
  } catch (const conversion_failure& f) {
    return f.err;
  } catch (const YAML::Exception& e) {
    return make_error(errc::parse_error, at(source, e.mark) + ": invalid YAML: " + policy::printable_excerpt(e.msg));
  } catch (const std::exception& e) {
    return make_error(errc::parse_error, std::string(source) + ": invalid YAML: " + policy::printable_excerpt(e.what()));
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
