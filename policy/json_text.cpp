// Depth-limited, position-reporting JSON parsing (see json_text.hpp).
#include "policy/json_text.hpp"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "policy/json_fast.hpp"

namespace dhara::policy {
namespace {

using json = nlohmann::json;

// nlohmann's message repeats the last token, which may be megabytes of the peer's bytes:
// keep the syntax reason and what was expected, drop the token and the position prefix.
std::string reason_of(std::string_view what) {
  if (what.starts_with("[json.exception.")) {
    auto tag_end = what.find("] ");
    if (tag_end != std::string_view::npos) what.remove_prefix(tag_end + 2);
  }
  if (auto column = what.find("column "); column != std::string_view::npos) {
    if (auto colon = what.find(": ", column); colon != std::string_view::npos) what.remove_prefix(colon + 2);
  }
  auto token = what.find("; last read: '");
  if (token == std::string_view::npos) return printable_excerpt(what);
  std::string reason(what.substr(0, token));
  if (auto expected = what.rfind("; expected "); expected != std::string_view::npos && expected > token)
    reason += what.substr(expected);
  return printable_excerpt(reason);
}

// The DOM builder of json::parse, refusing depth beyond the limit and keeping the position
// of any error (a number too large for a double is reported with no position otherwise).
class limited_dom {
 public:
  limited_dom(json& root, std::size_t max_depth) : dom_(root, false), max_depth_(max_depth) {}

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return dom_.number_float(v, s); }
  bool string(json::string_t& v) { return dom_.string(v); }
  bool binary(json::binary_t& v) { return dom_.binary(v); }
  bool key(json::string_t& v) { return dom_.key(v); }
  bool start_object(std::size_t n) { return enter() && dom_.start_object(n); }
  bool end_object() { return leave() && dom_.end_object(); }
  bool start_array(std::size_t n) { return enter() && dom_.start_array(n); }
  bool end_array() { return leave() && dom_.end_array(); }

  template <class Exception>
  bool parse_error(std::size_t position, const std::string&, const Exception& e) {
    failed_ = true;
    position_ = position;
    reason_ = "invalid JSON: " + reason_of(e.what());
    return false;
  }

  bool failed() const { return failed_; }
  bool too_deep() const { return too_deep_; }
  std::size_t position() const { return position_; }
  const std::string& reason() const { return reason_; }
  void fail_here(std::size_t position, std::string reason) {
    failed_ = true;
    position_ = position;
    reason_ = std::move(reason);
  }

 private:
  bool enter() {
    if (++depth_ <= max_depth_) return true;
    too_deep_ = true;
    return false;
  }
  bool leave() {
    --depth_;
    return true;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::size_t max_depth_;
  std::size_t depth_ = 0;
  bool failed_ = false;
  bool too_deep_ = false;
  std::size_t position_ = 0;
  std::string reason_;
};

// Byte offset of the first bracket beyond the limit, for the error position.
std::size_t deep_position(std::string_view text, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i + 1;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return text.size();
}

}  // namespace

std::string printable_excerpt(std::string_view s, std::size_t max_bytes) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (char ch : s) {
    if (out.size() >= max_bytes) {
      out += "...";
      break;
    }
    auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f) {
      out += ch;
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xf];
    }
  }
  return out;
}

result<nlohmann::json> parse_json_text(std::string_view text, std::string_view source, std::size_t max_depth) {
  try {
    json doc;
    // Well-formed text takes the fast path; anything it does not vouch for is parsed again
    // here, and nlohmann decides.
    if (parse_json_fast(text, max_depth, doc)) return doc;
    doc = json();
    limited_dom sax(doc, max_depth);
    bool ok = json::sax_parse(text.begin(), text.end(), &sax, json::input_format_t::json, /*strict=*/true,
                              /*ignore_comments=*/false);
    if (sax.too_deep()) sax.fail_here(deep_position(text, max_depth), "nested deeper than " + std::to_string(max_depth) + " levels");
    if (ok && !sax.failed()) return doc;
    // Positions are 1-based byte counts (size + 1 at the end of the input).
    std::size_t pos = std::min<std::size_t>(sax.position() == 0 ? 0 : sax.position() - 1, text.size());
    std::string_view before = text.substr(0, pos);
    std::size_t line = 1 + static_cast<std::size_t>(std::count(before.begin(), before.end(), '\n'));
    std::size_t nl = before.rfind('\n');
    std::size_t column = pos - (nl == std::string_view::npos ? 0 : nl + 1) + 1;
    std::string where = source.empty() ? "line " + std::to_string(line) + ", column " + std::to_string(column)
                                       : std::string(source) + ":" + std::to_string(line) + ":" + std::to_string(column);
    return make_error(errc::parse_error, where + ": " + (sax.reason().empty() ? "invalid JSON" : sax.reason()));
  } catch (const std::exception& e) {  // allocation failure: the only exception left
    return make_error(errc::parse_error, std::string(source) + ": cannot parse: " + e.what());
  }
}

namespace {

// Walks a document that parsed, stopping at the first key an object already holds; `found` is
// its dotted path ("security.deniedPaths", "[2]" for an array's items).
class duplicate_key_finder {
 public:
  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(json::number_integer_t) { return value(); }
  bool number_unsigned(json::number_unsigned_t) { return value(); }
  bool number_float(json::number_float_t, const json::string_t&) { return value(); }
  bool string(json::string_t&) { return value(); }
  bool binary(json::binary_t&) { return value(); }
  bool start_object(std::size_t) {
    levels_.push_back({{}, {}, false, 0});
    return true;
  }
  bool key(json::string_t& k) {
    level& l = levels_.back();
    if (!l.keys.insert(k).second) {
      found_ = path_to(levels_.size() - 1) + (levels_.size() > 1 ? "." : "") + k;
      return false;
    }
    l.name = k;
    return true;
  }
  bool end_object() { return leave(); }
  bool start_array(std::size_t) {
    levels_.push_back({{}, {}, true, 0});
    return true;
  }
  bool end_array() { return leave(); }
  template <class Exception>
  bool parse_error(std::size_t, const std::string&, const Exception&) {
    return false;
  }
  const std::string& found() const { return found_; }

 private:
  struct level {
    std::set<std::string, std::less<>> keys;
    std::string name;     // the member being read (objects)
    bool array;
    std::size_t index;    // the item being read (arrays)
  };
  bool value() {
    if (!levels_.empty() && levels_.back().array) ++levels_.back().index;
    return true;
  }
  bool leave() {
    levels_.pop_back();
    return value();  // the container is its parent's value
  }
  // The dotted path of the values the first `n` levels are reading.
  std::string path_to(std::size_t n) const {
    std::string out;
    for (std::size_t i = 0; i < n; ++i) {
      if (levels_[i].array) out += "[" + std::to_string(levels_[i].index) + "]";
      else out += (out.empty() ? "" : ".") + levels_[i].name;
    }
    return out;
  }
  std::vector<level> levels_;
  std::string found_;
};

}  // namespace

result<nlohmann::json> parse_json_document(std::string_view text, std::string_view source) {
  auto doc = parse_json_text(text, source);
  if (!doc) return doc;
  try {
    duplicate_key_finder finder;
    json::sax_parse(text.begin(), text.end(), &finder, json::input_format_t::json, /*strict=*/true,
                    /*ignore_comments=*/false);
    if (!finder.found().empty())
      return make_error(errc::parse_error, (source.empty() ? std::string("the JSON") : std::string(source)) +
                                               ": the key '" + printable_excerpt(finder.found()) +
                                               "' appears twice in one object; keep one");
  } catch (const std::exception& e) {  // allocation failure
    return make_error(errc::parse_error, std::string(source) + ": cannot parse: " + e.what());
  }
  return doc;
}

}  // namespace dhara::policy
