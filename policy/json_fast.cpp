// The fast JSON path (see json_fast.hpp). Grammar of RFC 8259; strings are checked as
// nlohmann checks them: no control bytes, the nine escapes, \u surrogates in pairs, UTF-8
// by RFC 3629 (no overlong forms, no encoded surrogates, nothing above U+10FFFF).
#include "policy/json_fast.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "policy/json_bytes.hpp"

namespace dhara::policy {
namespace {

using json = nlohmann::json;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Where the bytes of a string go when no document is built: nowhere.
struct discard {
  void append(const char*, const char*) {}
  void append(const char*, std::size_t) {}
  void push_back(char) {}
};

// The node of a value when no document is built.
struct no_node {};

template <class Out>
void append_utf8(Out& s, std::uint32_t cp) {
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// One grammar, two outputs: with Build, nlohmann's document; without, nothing but the answer
// to "is this text well-formed" (and, for scan_json_object_fast, one top-level member).
template <bool Build>
class parser {
 public:
  using node = std::conditional_t<Build, json, no_node>;

  parser(std::string_view text, std::size_t max_depth)
      : p_(text.data()), end_(text.data() + text.size()), max_depth_(max_depth) {}

  bool document(node& out) {
    skip_space();
    if (!value(out)) return false;
    skip_space();
    return p_ == end_;
  }

  // One object whose top level holds `key` exactly once, with an integer from 0 to 2^64-1.
  bool object_with_member(std::string_view key, std::uint64_t& member) {
    skip_space();
    if (p_ == end_ || *p_ != '{') return false;
    bool found = false;
    std::string name;
    const bool read = container('}', [&] {
      if (!member_name(name)) return false;
      if (name != key) {
        node ignored;
        return value(ignored);
      }
      json number_value;
      if (found || p_ == end_ || !number(number_value) || !number_value.is_number_unsigned()) return false;
      found = true;
      member = number_value.get<std::uint64_t>();
      return true;
    });
    skip_space();
    return read && found && p_ == end_;
  }

  // One object whose members are all among `names`, each at most once, their values built.
  bool object_of(std::span<const std::string_view> names, std::span<json* const> values, std::uint32_t& present) {
    static_assert(Build, "the values are built");
    present = 0;
    skip_space();
    if (p_ == end_ || *p_ != '{') return false;
    std::string name;
    const bool read = container('}', [&] {
      if (!member_name(name)) return false;
      for (std::size_t i = 0; i < names.size(); ++i) {
        if (name != names[i]) continue;
        const std::uint32_t bit = std::uint32_t{1} << i;
        if (present & bit) return false;
        present |= bit;
        return value(*values[i]);
      }
      return false;
    });
    skip_space();
    return read && p_ == end_;
  }

 private:
  void skip_space() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  bool value(node& out) {
    if (p_ == end_) return false;
    switch (*p_) {
      case '{': return object(out);
      case '[': return array(out);
      case '"':
        if constexpr (Build) {
          out = json::string_t();
          return string(out.template get_ref<json::string_t&>());
        } else {
          discard ignored;
          return string(ignored);
        }
      case 't': return literal("true", json(true), out);
      case 'f': return literal("false", json(false), out);
      case 'n': return literal("null", json(nullptr), out);
      default: return number(out);
    }
  }

  bool literal(std::string_view word, json v, node& out) {
    if (static_cast<std::size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word) return false;
    p_ += word.size();
    if constexpr (Build) out = std::move(v);
    return true;
  }

  // At '{' or '[': the entries up to `close`, separated by commas, each read by `entry`.
  template <class Entry>
  bool container(char close, Entry entry) {
    if (++depth_ > max_depth_) return false;
    ++p_;
    skip_space();
    if (p_ != end_ && *p_ == close) {
      ++p_;
      --depth_;
      return true;
    }
    while (true) {
      if (!entry()) return false;
      skip_space();
      if (p_ == end_) return false;
      if (*p_ == close) break;
      if (*p_ != ',') return false;
      ++p_;
      skip_space();
    }
    ++p_;
    --depth_;
    return true;
  }

  // At a member's name: the name (unescaped, into `name`) and its ':'.
  bool member_name(std::string& name) {
    if (p_ == end_ || *p_ != '"') return false;
    name.clear();
    if (!string(name)) return false;
    skip_space();
    if (p_ == end_ || *p_ != ':') return false;
    ++p_;
    skip_space();
    return true;
  }

  bool object(node& out) {
    std::string key;
    if constexpr (Build) {
      out = json::object();
      auto& members = out.template get_ref<json::object_t&>();
      // Parsed in place; a duplicate key's slot is overwritten: the last one wins, as in
      // nlohmann's document.
      return container('}', [&] { return member_name(key) && value(members[key]); });
    } else {
      return container('}', [&] {
        node ignored;
        return member_name(key) && value(ignored);
      });
    }
  }

  bool array(node& out) {
    if constexpr (Build) {
      out = json::array();
      auto& items = out.template get_ref<json::array_t&>();
      return container(']', [&] {
        items.emplace_back();
        return value(items.back());
      });
    } else {
      return container(']', [&] {
        node ignored;
        return value(ignored);
      });
    }
  }

  // At '"': the string's content, unescaped, appended to `s`.
  template <class Out>
  bool string(Out& s) {
    ++p_;
    while (true) {
      const char* run = p_;
      p_ = json_bytes::skip_plain(p_, end_);
      s.append(run, static_cast<std::size_t>(p_ - run));  // by length: a pointer pair takes the slow replace
      if (p_ == end_) return false;
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c == '\\') {
        if (!escape(s)) return false;
      } else if (c < 0x20) {
        return false;
      } else if (!utf8_sequence(s)) {
        return false;
      }
    }
  }

  // At '\\': one escape, its character appended.
  template <class Out>
  bool escape(Out& s) {
    ++p_;
    if (p_ == end_) return false;
    const char c = *p_++;
    switch (c) {
      case '"': s.push_back('"'); return true;
      case '\\': s.push_back('\\'); return true;
      case '/': s.push_back('/'); return true;
      case 'b': s.push_back('\b'); return true;
      case 'f': s.push_back('\f'); return true;
      case 'n': s.push_back('\n'); return true;
      case 'r': s.push_back('\r'); return true;
      case 't': s.push_back('\t'); return true;
      case 'u': break;
      default: return false;
    }
    std::uint32_t cp;
    if (!hex4(cp)) return false;
    if (cp >= 0xDC00 && cp <= 0xDFFF) return false;  // a low surrogate first
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      std::uint32_t low;
      if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
      p_ += 2;
      if (!hex4(low) || low < 0xDC00 || low > 0xDFFF) return false;
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(s, cp);
    return true;
  }

  bool hex4(std::uint32_t& cp) {
    if (end_ - p_ < 4) return false;
    cp = 0;
    for (int i = 0; i < 4; ++i) {
      const int v = hex_value(p_[i]);
      if (v < 0) return false;
      cp = (cp << 4) | static_cast<std::uint32_t>(v);
    }
    p_ += 4;
    return true;
  }

  // At a byte ≥ 0x80: one well-formed UTF-8 sequence, copied.
  template <class Out>
  bool utf8_sequence(Out& s) {
    const auto* u = reinterpret_cast<const unsigned char*>(p_);
    const json_bytes::utf8_step step = json_bytes::next_utf8(u, reinterpret_cast<const unsigned char*>(end_));
    if (!step.valid) return false;
    s.append(p_, step.length);
    p_ += step.length;
    return true;
  }

  static bool digit(char c) { return c >= '0' && c <= '9'; }

  // A number, checked as nlohmann converts it whether or not `out` keeps it (a document's
  // node, or the json of a member asked for).
  template <class Out>
  bool number(Out& out) {
    constexpr bool keep = std::is_same_v<Out, json>;
    const char* start = p_;
    const bool negative = *p_ == '-';
    if (negative) ++p_;
    if (p_ == end_) return false;
    if (*p_ == '0') {
      ++p_;
    } else if (*p_ >= '1' && *p_ <= '9') {
      while (p_ != end_ && digit(*p_)) ++p_;
    } else {
      return false;
    }
    bool integer = true;
    if (p_ != end_ && *p_ == '.') {
      ++p_;
      if (p_ == end_ || !digit(*p_)) return false;
      while (p_ != end_ && digit(*p_)) ++p_;
      integer = false;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || !digit(*p_)) return false;
      while (p_ != end_ && digit(*p_)) ++p_;
      integer = false;
    }
    // nlohmann: an integer that fits is unsigned (≥ 0) or signed (< 0); one that does not
    // fit, and any fraction or exponent, is a double.
    if (integer) {
      if (negative) {
        std::int64_t v;
        if (auto [end, ec] = std::from_chars(start, p_, v); ec == std::errc{} && end == p_) {
          if constexpr (keep) out = json::number_integer_t{v};
          return true;
        }
      } else {
        std::uint64_t v;
        if (auto [end, ec] = std::from_chars(start, p_, v); ec == std::errc{} && end == p_) {
          if constexpr (keep) out = json::number_unsigned_t{v};
          return true;
        }
      }
    }
    double d;
    auto [end, ec] = std::from_chars(start, p_, d);
    // Out of range (overflow: nlohmann refuses it; underflow: strtod's rounding decides):
    // left to nlohmann.
    if (ec != std::errc{} || end != p_ || !std::isfinite(d)) return false;
    if constexpr (keep) out = json::number_float_t{d};
    return true;
  }

  const char* p_;
  const char* end_;
  std::size_t max_depth_;
  std::size_t depth_ = 0;
};

}  // namespace

bool parse_json_members_fast(std::string_view text, std::size_t max_depth, std::span<const std::string_view> names,
                             std::span<nlohmann::json* const> values, std::uint32_t& present) {
  present = 0;
  if (max_depth > fast_json_max_depth || names.size() > 32 || values.size() != names.size()) return false;
  return parser<true>(text, max_depth).object_of(names, values, present);
}

bool parse_json_fast(std::string_view text, std::size_t max_depth, nlohmann::json& out) {
  if (max_depth > fast_json_max_depth) return false;
  return parser<true>(text, max_depth).document(out);
}

bool scan_json_object_fast(std::string_view text, std::size_t max_depth, std::string_view key, std::uint64_t& value) {
  if (max_depth > fast_json_max_depth) return false;
  return parser<false>(text, max_depth).object_with_member(key, value);
}

}  // namespace dhara::policy
