// Path rules: lexical normalization written for speed (one pass, no allocation with a
// reused buffer), globs with `**`, and the allowed/denied check of DESIGN §4.
#include "policy/path_rules.hpp"

#include <cctype>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <unordered_map>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace dhara::policy {
namespace {

// Appends the segments of `p` to `out`, applying `.`, `..` and empty segments.
// `out` holds "" (meaning "/") or "/a/b" with no trailing slash.
void push_segments(std::string_view p, std::string& out) {
  std::size_t i = 0;
  const std::size_t n = p.size();
  while (i < n) {
    while (i < n && p[i] == '/') ++i;
    if (i >= n) break;
    const void* slash = std::memchr(p.data() + i, '/', n - i);
    std::size_t end = slash ? static_cast<std::size_t>(static_cast<const char*>(slash) - p.data()) : n;
    std::size_t len = end - i;
    if (len == 1 && p[i] == '.') {
      // current directory: nothing to add
    } else if (len == 2 && p[i] == '.' && p[i + 1] == '.') {
      std::size_t cut = out.rfind('/');
      out.resize(cut == std::string::npos ? 0 : cut);  // ".." never climbs above "/"
    } else {
      out.push_back('/');
      out.append(p.data() + i, len);
    }
    i = end;
  }
}

// What plain_segments says, one byte at a time: the reference its fast scan falls back to.
bool plain_segments_bytewise(std::string_view s) {
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    if (i < s.size() && s[i] != '/') {
      if (s[i] == '\0') return false;
      continue;
    }
    const std::size_t len = i - start;
    if (len == 0 || (s[start] == '.' && (len == 1 || (len == 2 && s[start + 1] == '.')))) return false;
    start = i + 1;
  }
  return true;
}

constexpr std::uint64_t byte_ones = 0x0101010101010101ULL;
constexpr std::uint64_t low_sevens = 0x7F7F7F7F7F7F7F7FULL;

// 0x80 in every byte of `w` that equals `c`, 0 in the others. Exact: a byte's low seven bits
// plus 0x7F never carry into the next byte.
inline std::uint64_t bytes_equal(std::uint64_t w, unsigned char c) {
  const std::uint64_t x = w ^ (byte_ones * c);
  return ~(((x & low_sevens) + low_sevens) | x) & ~low_sevens;
}

// The eight bytes of `s` from `i` as a little-endian word; past the end, 'a's (no byte the
// scan looks for). A last part of 1 to 7 bytes of a string of 8 or more is read as the
// string's last eight bytes, those already seen shifted out: no call to memcpy of a variable
// length.
inline std::uint64_t word_at(std::string_view s, std::size_t i) {
  constexpr std::uint64_t as = byte_ones * 'a';
  std::uint64_t w;
  const std::size_t n = s.size() - i;
  if (n >= 8) {
    std::memcpy(&w, s.data() + i, sizeof w);
    return w;
  }
  if (s.size() >= 8) {
    std::memcpy(&w, s.data() + s.size() - 8, sizeof w);
    return (w >> (8 * (8 - n))) | (as << (8 * n));
  }
  w = as;
  for (std::size_t k = 0; k < n; ++k) {
    w &= ~(std::uint64_t{0xFF} << (8 * k));
    w |= std::uint64_t{static_cast<unsigned char>(s[i + k])} << (8 * k);
  }
  return w;
}

#if defined(__SSE2__)
// Sixteen bytes from `p`: bit i of each mask set when byte i is '/', '.' or NUL.
struct byte_marks {
  unsigned slashes, dots, nuls;
};
inline byte_marks marks_of_16(const char* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return {static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('/')))),
          static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('.')))),
          static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_setzero_si128())))};
}
#endif

}  // namespace

// A string that is not plain has a NUL byte, ends with a slash, or has a slash (or its start)
// followed by a slash or a dot: an empty segment, or one that begins with a dot. Without any
// of them it is plain; with the last, the segment starting with a dot may still be a name like
// ".git", and the bytewise reference decides. Sixteen bytes at a time with SSE2 (every x86-64),
// eight with the word compares below for a shorter string or another machine.
bool plain_segments(std::string_view s) {
  if (s.empty() || s.back() == '/') return false;
#if defined(__SSE2__)
  if (s.size() >= 16) {
    unsigned after_slash = 1;  // the first byte follows the start, as if a slash
    std::size_t i = 0;
    auto plain_so_far = [&](unsigned slashes, unsigned dots) {
      const bool suspicious = (((slashes << 1) | after_slash) & (slashes | dots)) != 0;
      after_slash = slashes >> 15;  // a slash in the last byte marks the next block's first
      return !suspicious;
    };
    for (; s.size() - i >= 16; i += 16) {
      const byte_marks m = marks_of_16(s.data() + i);
      if (m.nuls != 0) return false;
      if (!plain_so_far(m.slashes, m.dots)) return plain_segments_bytewise(s);
    }
    if (i < s.size()) {  // the last 1 to 15 bytes: the last sixteen, those already seen shifted out
      const auto seen = static_cast<unsigned>(16 - (s.size() - i));
      const byte_marks m = marks_of_16(s.data() + s.size() - 16);
      if ((m.nuls >> seen) != 0) return false;
      if (!plain_so_far(m.slashes >> seen, m.dots >> seen)) return plain_segments_bytewise(s);
    }
    return true;
  }
#endif
  if constexpr (std::endian::native == std::endian::little) {
    std::uint64_t after_slash = 0x80;  // the first byte follows the start, as if a slash
    for (std::size_t i = 0; i < s.size(); i += 8) {
      const std::uint64_t w = word_at(s, i);
      if (bytes_equal(w, '\0') != 0) return false;
      const std::uint64_t slashes = bytes_equal(w, '/');
      if ((((slashes << 8) | after_slash) & (slashes | bytes_equal(w, '.'))) != 0) return plain_segments_bytewise(s);
      after_slash = slashes >> 56;  // a slash in the last byte marks the next word's first
    }
    return true;
  }
  return plain_segments_bytewise(s);
}

bool is_normal_abs_path(std::string_view p) {
  if (p.empty() || p.front() != '/') return false;
  return p.size() == 1 || plain_segments(p.substr(1));
}

namespace {

bool is_glob_char(char c) { return c == '*' || c == '?' || c == '['; }

// True when a backslash in `text` escapes a character that needs no escape (`a\b`): written
// before escapes existed, such an entry meant the backslash itself.
bool escapes_ordinary(std::string_view text) {
  for (std::size_t i = 0; i + 1 < text.size(); ++i) {
    if (text[i] != '\\') continue;
    const char c = text[++i];  // `!`, `^` and `-` mean something in a bracket
    if (!is_glob_char(c) && std::string_view("]\\!^-").find(c) == std::string_view::npos) return true;
  }
  return false;
}

// One character of a bracket class at `j`, moving past it; a backslash escapes the next one.
unsigned char class_char(std::string_view pat, std::size_t& j) {
  if (pat[j] == '\\' && j + 1 < pat.size()) ++j;
  return static_cast<unsigned char>(pat[j++]);
}

// Whether `u` is in the POSIX class `name` (`alpha` of `[[:alpha:]]`), as in the C locale;
// nullopt for a name that is no class (glob(3) then matches nothing, and so does dhara).
std::optional<bool> in_named_class(std::string_view name, unsigned char u) {
  const bool lower = u >= 'a' && u <= 'z', upper = u >= 'A' && u <= 'Z', digit = u >= '0' && u <= '9';
  const bool graph = u > 32 && u < 127;
  if (name == "alpha") return lower || upper;
  if (name == "digit") return digit;
  if (name == "alnum") return lower || upper || digit;
  if (name == "lower") return lower;
  if (name == "upper") return upper;
  if (name == "xdigit") return digit || (u >= 'a' && u <= 'f') || (u >= 'A' && u <= 'F');
  if (name == "space") return u == ' ' || (u >= '\t' && u <= '\r');
  if (name == "blank") return u == ' ' || u == '\t';
  if (name == "punct") return graph && !(lower || upper || digit);
  if (name == "graph") return graph;
  if (name == "print") return graph || u == ' ';
  if (name == "cntrl") return u < 32 || u == 127;
  return std::nullopt;
}

// At `j` in a bracket, a `[:name:]` (a name of lowercase letters): the index past it, or npos
// when there is none there (the `[` is then a character of the bracket).
std::size_t named_class_end(std::string_view pat, std::size_t j) {
  if (pat[j] != '[' || j + 1 >= pat.size() || pat[j + 1] != ':') return std::string_view::npos;
  std::size_t end = j + 2;
  // glibc's fnmatch ends a class name before a `z` (no class name holds one): so does dhara.
  while (end < pat.size() && pat[end] >= 'a' && pat[end] < 'z') ++end;
  return end + 1 < pat.size() && pat[end] == ':' && pat[end + 1] == ']' ? end + 2 : std::string_view::npos;
}

// Matches one path segment against one pattern segment (`*`, `?`, `[...]`), with the
// classic single-star backtracking: linear in practice, no recursion.
bool match_class(std::string_view pat, std::size_t& pi, char c) {
  // pat[pi] == '['; on return pi is past the closing ']'. An unclosed '[' is literal.
  std::size_t j = pi + 1;
  bool negate = false;
  if (j < pat.size() && (pat[j] == '!' || pat[j] == '^')) {
    negate = true;
    ++j;
  }
  bool matched = false;
  bool first = true;
  const auto u = static_cast<unsigned char>(c);  // ranges by byte value, as glibc's are in the C locale
  bool no_class = false;  // a `[:name:]` that names no class: nothing matches
  while (j < pat.size() && (first || pat[j] != ']')) {
    first = false;
    if (const std::size_t past = named_class_end(pat, j); past != std::string_view::npos) {
      const auto in = in_named_class(pat.substr(j + 2, past - j - 4), u);
      if (!in) no_class = true;
      else if (*in) matched = true;
      j = past;
      continue;
    }
    const unsigned char lo = class_char(pat, j);
    if (j + 1 < pat.size() && pat[j] == '-' && pat[j + 1] != ']') {
      ++j;
      const unsigned char hi = class_char(pat, j);
      if (lo <= u && u <= hi) matched = true;
    } else if (lo == u) {
      matched = true;
    }
  }
  if (j >= pat.size()) {  // no closing bracket: treat '[' as a literal character
    bool literal = c == '[';
    pi += 1;
    return literal;
  }
  pi = j + 1;
  return !no_class && matched != negate;
}

// The first item of `pat`'s brackets, read as match_class reads them, for which `bad(from, past)`
// holds (`pat[from, past)`: a `[:name:]`, a character or a range); empty if there is none.
template <class Bad>
std::string_view first_bracket_item(std::string_view pat, Bad bad) {
  for (std::size_t i = 0; i < pat.size(); ++i) {
    if (pat[i] == '\\') {
      ++i;
      continue;
    }
    if (pat[i] != '[') continue;
    std::size_t j = i + 1;
    if (j < pat.size() && (pat[j] == '!' || pat[j] == '^')) ++j;
    for (bool first = true; j < pat.size() && (first || pat[j] != ']'); first = false) {
      const std::size_t from = j;
      if (const std::size_t past = named_class_end(pat, j); past != std::string_view::npos) {
        j = past;
      } else {
        class_char(pat, j);
        if (j + 1 < pat.size() && pat[j] == '-' && pat[j + 1] != ']') class_char(pat, ++j);
      }
      if (bad(from, j)) return pat.substr(from, j - from);
    }
    if (j < pat.size()) i = j;  // past the bracket; an unclosed `[` is a character
  }
  return {};
}

// The first range of `segment`'s brackets whose first byte is above its last (`[é-z]`: bytes
// compare unsigned, as in glob(3)), which matches no byte; empty if there is none.
std::string_view empty_range_in(std::string_view pat) {
  return first_bracket_item(pat, [pat](std::size_t from, std::size_t past) {
    if (named_class_end(pat, from) != std::string_view::npos) return false;
    const unsigned char lo = class_char(pat, from);
    return from < past && pat[from] == '-' && class_char(pat, ++from) < lo;
  });
}

// The first item of `segment`'s brackets holding a `[` that starts a collating symbol (`[.a.]`)
// or an equivalence class (`[=a=]`) in glob(3)'s reading, which dhara reads as characters;
// empty if there is none.
std::string_view collating_form_in(std::string_view pat) {
  return first_bracket_item(pat, [pat](std::size_t from, std::size_t past) {
    for (std::size_t k = from; k < past; ++k) {
      if (pat[k] == '\\') ++k;
      else if (pat[k] == '[' && k + 1 < pat.size() && (pat[k + 1] == '.' || pat[k + 1] == '=')) return true;
    }
    return false;
  });
}

bool match_segment(std::string_view pat, std::string_view seg) {
  std::size_t pi = 0, si = 0;
  std::size_t star_p = std::string_view::npos, star_s = 0;
  while (si < seg.size()) {
    if (pi < pat.size() && pat[pi] == '*') {
      star_p = ++pi;
      star_s = si;
      continue;
    }
    if (pi < pat.size()) {
      std::size_t next = pi;
      bool ok;
      if (pat[pi] == '?') {
        ok = true;
        next = pi + 1;
      } else if (pat[pi] == '[') {
        ok = match_class(pat, next, seg[si]);
      } else if (pat[pi] == '\\') {  // a backslash with nothing to escape matches nothing, as in glob(3)
        ok = pi + 1 < pat.size() && pat[pi + 1] == seg[si];
        next = pi + 2;
      } else {
        ok = pat[pi] == seg[si];
        next = pi + 1;
      }
      if (ok) {
        pi = next;
        ++si;
        continue;
      }
    }
    if (star_p == std::string_view::npos) return false;
    pi = star_p;
    si = ++star_s;
  }
  while (pi < pat.size() && pat[pi] == '*') ++pi;
  return pi == pat.size();
}

// Reads the segment starting at or after `pos` (skipping slashes); returns it and moves
// `pos` past it. An empty view means no more segments.
[[gnu::always_inline]] inline std::string_view next_segment(std::string_view s, std::size_t& pos) {
  const std::size_t n = s.size();
  while (pos < n && s[pos] == '/') ++pos;
  const std::size_t start = pos;
  while (pos < n && s[pos] != '/') ++pos;
  return {s.data() + start, pos - start};  // start <= pos <= n: no bounds check needed
}

// The first empty range of a pattern (empty_range_in), segment by segment, as the matcher reads it.
std::string_view empty_range(std::string_view pat) {
  std::size_t pos = 0;
  for (std::string_view seg = next_segment(pat, pos); !seg.empty(); seg = next_segment(pat, pos))
    if (std::string_view range = empty_range_in(seg); !range.empty()) return range;
  return {};
}

// Segment-level matching where `**` stands for any number of whole segments. Positions
// are string offsets, so nothing is allocated. With `allow_trailing`, the pattern may end
// while the path goes on (the path is under a match).
bool match_segments(std::string_view pat, std::string_view path, bool allow_trailing) {
  std::size_t pp = 0, sp = 0;
  std::size_t star_pp = std::string_view::npos, star_sp = 0;
  for (;;) {
    std::size_t sp_next = sp;
    std::string_view seg = next_segment(path, sp_next);
    if (seg.empty()) break;
    std::size_t pp_next = pp;
    std::string_view pseg = next_segment(pat, pp_next);
    if (pseg == "**") {
      star_pp = pp = pp_next;
      star_sp = sp;
      continue;
    }
    if (!pseg.empty() && match_segment(pseg, seg)) {
      pp = pp_next;
      sp = sp_next;
      continue;
    }
    if (pseg.empty() && allow_trailing) return true;
    if (star_pp == std::string_view::npos) return false;
    // Let the last `**` swallow one more segment and retry.
    pp = star_pp;
    next_segment(path, star_sp);
    sp = star_sp;
  }
  for (;;) {
    std::size_t pp_next = pp;
    std::string_view pseg = next_segment(pat, pp_next);
    if (pseg.empty()) return true;
    if (pseg != "**") return false;
    pp = pp_next;
  }
}

bool glob_matches(std::string_view pattern, std::string_view path, bool at_or_under) {
  if (!pattern.starts_with('/')) {
    // A relative pattern ("**/node_modules/**", "*.log") matches at any depth.
    for (std::size_t pos = 0;;) {
      if (match_segments(pattern, path.substr(pos), at_or_under)) return true;
      std::size_t next = path.find('/', pos + 1);
      if (next == std::string_view::npos) return false;
      pos = next;
    }
  }
  return match_segments(pattern, path, at_or_under);
}

// The directory part of a glob before its first glob character: "/proc/*/root" → "/proc/".
std::string literal_prefix_of(std::string_view glob) {
  std::size_t first = 0;
  while (first < glob.size() && !is_glob_char(glob[first])) ++first;
  std::size_t slash = glob.rfind('/', first);
  return std::string(glob.substr(0, slash == std::string_view::npos ? 0 : slash + 1));
}

// The literal folder is compared as text and only the rest matched as a glob: a built-in's
// folder (a project named `app[2]`) may hold glob characters, taken literally.
bool glob_entry_matches(const path_entry& e, std::string_view path) {
  if (!path.starts_with(e.literal_prefix)) return false;
  if (e.literal_prefix.empty()) return glob_match_at_or_under(e.normalized, path);
  const std::size_t from = e.literal_prefix.size() - 1;  // keep its last slash: the rest is absolute
  return glob_match_at_or_under(std::string_view(e.normalized).substr(from), path.substr(from));
}

// (parent node, segment) → child node, while the trie is built: a linear scan of the children
// made compiling N sibling entries (100 000 deniedPaths in one folder) O(N²).
using trie_index = std::unordered_map<std::string, std::uint32_t>;

// The trie node for `dir` (a normalized absolute directory), created on the way.
std::uint32_t trie_node_for(std::vector<path_trie_node>& trie, trie_index& children, std::string_view dir) {
  std::uint32_t node = 0;
  std::size_t pos = 0;
  std::string key;
  for (std::string_view seg = next_segment(dir, pos); !seg.empty(); seg = next_segment(dir, pos)) {
    key.assign(std::to_string(node)).push_back('/');
    key.append(seg);
    auto [it, added] = children.try_emplace(key, static_cast<std::uint32_t>(trie.size()));
    if (added) {
      trie.push_back(path_trie_node{std::string(seg), {}, -1, -1, {}, {}});
      trie[node].children.push_back({it->second, static_cast<std::uint32_t>(seg.size()), seg.front()});
    }
    node = it->second;
  }
  return node;
}

// The child of `node` whose segment starts `path` at `pos` (a whole segment: the path ends or
// goes on with '/' after it), or 0; `pos` is moved past that segment when there is one. The
// segment is never looked for on its own: with few children, each is compared at `pos`, most
// told apart by the length and first byte kept with it. Children are sorted by segment
// (build_trie).
std::uint32_t trie_child_at(const std::vector<path_trie_node>& trie, const path_trie_node& node, std::string_view path,
                            std::size_t& pos) {
  const auto& c = node.children;
  const char* at = path.data() + pos;
  const std::size_t left = path.size() - pos;  // > 0, and path[pos] is no '/'
  if (c.size() <= 8) {
    for (const path_trie_child& child : c) {
      if (child.first != at[0] || child.size > left || (child.size < left && at[child.size] != '/')) continue;
      if (std::memcmp(trie[child.node].segment.data(), at, child.size) != 0) continue;
      pos += child.size;
      return child.node;
    }
    return 0;
  }
  const char* end = static_cast<const char*>(std::memchr(at, '/', left));
  const std::string_view seg(at, end ? static_cast<std::size_t>(end - at) : left);
  auto it = std::lower_bound(c.begin(), c.end(), seg, [&](const path_trie_child& child, std::string_view s) {
    return std::string_view(trie[child.node].segment) < s;
  });
  if (it == c.end() || trie[it->node].segment != seg) return 0;
  pos += seg.size();
  return it->node;
}

void build_trie(path_rule_set& set) {
  set.trie.assign(1, path_trie_node{});
  trie_index children;
  auto index = [&](const std::vector<path_entry>& entries, bool denied) {
    for (std::uint32_t i = 0; i < entries.size(); ++i) {
      const path_entry& e = entries[i];
      std::uint32_t node = trie_node_for(set.trie, children, e.glob ? std::string_view(e.literal_prefix) : std::string_view(e.normalized));
      path_trie_node& n = set.trie[node];
      if (e.glob) {
        (denied ? n.denied_globs : n.allowed_globs).push_back(i);
      } else {
        std::int32_t& slot = denied ? n.denied : n.allowed;
        if (slot < 0) slot = static_cast<std::int32_t>(i);  // the first entry names the rule
      }
    }
  };
  index(set.denied, true);
  index(set.allowed, false);
  for (path_trie_node& n : set.trie)
    std::sort(n.children.begin(), n.children.end(), [&](const path_trie_child& x, const path_trie_child& y) {
      return set.trie[x.node].segment < set.trie[y.node].segment;
    });
}

// Visits one trie node on the walk: records the first denied and allowed matches.
[[gnu::always_inline]] inline void visit(const path_rule_set& rules, const path_trie_node& n, std::string_view path,
                                         path_matches& m) {
  if (!m.denied) {
    if (n.denied >= 0) m.denied = &rules.denied[static_cast<std::size_t>(n.denied)];
    for (std::uint32_t g : n.denied_globs)
      if (!m.denied && glob_entry_matches(rules.denied[g], path)) m.denied = &rules.denied[g];
  }
  if (!m.allowed) {
    if (n.allowed >= 0) m.allowed = &rules.allowed[static_cast<std::size_t>(n.allowed)];
    for (std::uint32_t g : n.allowed_globs)
      if (!m.allowed && glob_entry_matches(rules.allowed[g], path)) m.allowed = &rules.allowed[g];
  }
}

std::string_view access_word(path_access a) { return a == path_access::write ? "write" : "read"; }

decision deny(std::string reason, std::string_view rule = {}) {
  return {verdict_kind::deny, std::move(reason), decider::rule, rule};
}

// A built-in denial: `folder` is taken literally (a home or project named `app[2]` is no glob),
// `leaf` (empty, or holding a glob character) is a glob beneath it.
struct builtin_denial {
  std::string folder;
  std::string leaf;
  std::string written;
};

// Built-in denials that no configuration can remove (DESIGN §4, §9).
std::vector<builtin_denial> builtin_denials(const path_rules_input& in) {
  std::vector<builtin_denial> out;
  if (!in.only_state_files) {
    out.push_back({"/etc/shadow", "", "built-in: /etc/shadow"});
    out.push_back({"/etc/gshadow", "", "built-in: /etc/gshadow"});
    if (!in.home.empty()) out.push_back({in.home + "/.ssh", "", "built-in: ~/.ssh/"});
    // /proc magic links and process secrets: they walk around every other rule.
    for (const char* leaf : {"root", "cwd", "exe", "environ", "mem", "fd", "map_files"})
      out.push_back({"/proc", std::string("**/") + leaf, std::string("built-in: /proc/*/") + leaf});
  }
  if (!in.dhara_home.empty()) {
    // dhara's own state: an extension must never read or edit approvals or the audit.
    for (const char* f : {"config.json*", "permissions.json*", "audit*"})
      out.push_back({in.dhara_home, f, std::string("built-in: $DHARA_HOME/") + f});
    out.push_back({in.dhara_home + "/logs", "", "built-in: $DHARA_HOME/logs"});  // plain: resolved, dropped from grants
  }
  if (!in.project_root.empty())
    out.push_back({in.project_root + "/.dhara", "config.json*", "built-in: <project>/.dhara/config.json"});
  for (const std::string& dir : in.extension_dirs)
    if (!dir.empty())
      out.push_back({dir, "", !in.project_root.empty() && dir == in.project_root + (in.project_root == "/" ? ".dhara" : "/.dhara")
                                  ? std::string(project_dhara_rule)
                                  : std::string(extension_dir_rule) + dir});
  return out;
}

}  // namespace

bool has_dotdot_segment(std::string_view p) {
  for (std::size_t pos = 0; pos < p.size();) {
    std::size_t end = p.find('/', pos);
    if (end == std::string_view::npos) end = p.size();
    if (p.substr(pos, end - pos) == "..") return true;
    pos = end + 1;
  }
  return false;
}

bool normalize_path_into(std::string_view path, std::string_view base, std::string& out) {
  out.clear();
  if (path.empty() || std::memchr(path.data(), '\0', path.size()) != nullptr) return false;
  if (path.front() != '/') {
    if (base.empty() || base.front() != '/' || std::memchr(base.data(), '\0', base.size()) != nullptr)
      return false;
    push_segments(base, out);
  }
  push_segments(path, out);
  if (out.empty()) out.push_back('/');
  return true;
}

result<std::string> normalize_path(std::string_view path, std::string_view base) {
  std::string out;
  if (normalize_path_into(path, base, out)) return out;
  if (path.empty()) return make_error(errc::invalid_path, "the path is empty");
  if (path.find('\0') != std::string_view::npos)
    return make_error(errc::invalid_path, "the path holds a NUL byte");
  return make_error(errc::invalid_path, "the relative path '" + std::string(path) +
                                            "' needs an absolute base directory");
}

result<std::string> expand_home(std::string_view path, std::string_view home) {
  if (!path.starts_with('~')) return std::string(path);
  if (path.size() > 1 && path[1] != '/')
    return make_error(errc::invalid_path, "'" + std::string(path) +
                                              "': only '~' and '~/' are supported, not '~user'");
  if (home.empty() || home.front() != '/')
    return make_error(errc::invalid_path, "cannot expand '~' in '" + std::string(path) +
                                              "': HOME is not an absolute path");
  std::string out(home);
  out.append(path.substr(1));
  return out;
}

bool is_at_or_under(std::string_view path, std::string_view dir) {
  if (dir == "/") return path.starts_with('/');
  if (!path.starts_with(dir)) return false;
  return path.size() == dir.size() || path[dir.size()] == '/';
}

// A backslash takes the next character as itself (as glob(3) does): `app\[2]` is the name
// `app[2]`.
std::size_t first_glob_char(std::string_view p) {
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '\\')
      ++i;
    else if (is_glob_char(p[i]))
      return i;
  }
  return std::string_view::npos;
}

bool has_glob(std::string_view text) { return first_glob_char(text) != std::string_view::npos; }

bool escapes_slash(std::string_view text) {
  for (std::size_t i = 0; i + 1 < text.size(); ++i) {
    if (text[i] != '\\') continue;
    if (text[++i] == '/') return true;
  }
  return false;
}

std::string read_apart(std::string_view text) {
  // Segments are split before escapes are read, and glob(3) reads `\/` as `/`.
  if (escapes_slash(text)) return "puts a backslash before '/', which no name can hold: write it without";
  std::size_t pos = 0;
  for (std::string_view seg = next_segment(text, pos); !seg.empty(); seg = next_segment(text, pos))
    if (std::string_view item = collating_form_in(seg); !item.empty())
      return "holds '[.' or '[=' in a bracket, which glob(3) reads as a collating symbol or an equivalence "
             "class and dhara as characters, so the sandbox and the checks would take different paths for it: "
             "write it without";
  return {};
}

bool has_glob_syntax(std::string_view text) { return text.find_first_of("*?[\\") != std::string_view::npos; }

std::string escape_glob(std::string_view literal) {
  std::string out;
  out.reserve(literal.size() + 4);
  for (char c : literal) {
    if (c == '\\' || is_glob_char(c)) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

std::string unescape_glob(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size());
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) ++i;
    out.push_back(pattern[i]);
  }
  return out;
}

std::string glob_literal_folder(std::string_view pattern) {
  const std::size_t g = first_glob_char(pattern);
  const std::size_t slash = g == std::string_view::npos ? pattern.size() : pattern.rfind('/', g);
  if (slash == 0 || slash == std::string_view::npos) return "/";
  // Unescaped, then normalized again: `\.\.` is the name `..` once read.
  auto folder = normalize_path(unescape_glob(pattern.substr(0, slash)), "/");
  return folder ? std::move(*folder) : std::string();
}

bool glob_match(std::string_view pattern, std::string_view path) {
  return glob_matches(pattern, path, false);
}

bool glob_match_at_or_under(std::string_view pattern, std::string_view path) {
  return glob_matches(pattern, path, true);
}

std::string glob3_pattern(const path_entry& e) {
  std::string out;
  out.reserve(e.normalized.size() + 8);
  const std::size_t literal = e.glob ? e.literal_prefix.size() : e.normalized.size();
  for (std::size_t i = 0; i < e.normalized.size(); ++i) {
    const char c = e.normalized[i];
    if (i < literal && (c == '\\' || is_glob_char(c))) out.push_back('\\');  // the rest keeps its escapes
    out.push_back(c);
  }
  return out;
}

result<path_rule_set> compile_path_rules(const path_rules_input& in, const path_resolver& resolver) {
  path_rule_set set;
  // The bounds of a confined (untrusted project) allowed list, in their resolved forms; an
  // unresolvable bound bounds nothing, so entries under it are dropped (fail closed).
  std::optional<std::string> confine_root;
  std::vector<std::string> confine_within;
  std::vector<std::string> confine_globs;
  // `name` is a name (the project root), not a pattern.
  auto resolved_bound = [&](std::string_view name) -> std::optional<std::string> {
    auto normal = normalize_path(name, "/");
    if (!normal || !name.starts_with('/')) return std::nullopt;
    auto r = resolver.resolve(*normal);
    if (!r) return std::nullopt;
    return std::move(*r);
  };
  if (!in.confine_root.empty() && resolver.follows_links()) {
    confine_root = resolved_bound(in.confine_root);
    for (const std::string& w : in.confine_within) {  // allowedPaths entries: patterns
      auto expanded = expand_home(w, escape_glob(in.home));
      if (!expanded || !read_apart(*expanded).empty()) continue;  // the compile refuses it too
      if (has_glob(*expanded)) {
        if (auto g = normalize_path(*expanded, "/")) confine_globs.push_back(std::move(*g));  // matched as written
      } else if (auto r = resolved_bound(unescape_glob(*expanded))) {
        confine_within.push_back(std::move(*r));
      }
    }
  }
  auto confined = [&](const std::string& resolved) {
    if (!confine_root || !is_at_or_under(resolved, *confine_root)) return false;
    for (const std::string& b : confine_within)
      if (is_at_or_under(resolved, b)) return true;
    for (const std::string& g : confine_globs)
      if (glob_match_at_or_under(g, resolved)) return true;
    return false;
  };
  std::vector<file_id> denied_ids;
  // The entries a denied glob matches now are known by identity too, when its glob is in its
  // last segment only (dhara's own state files): a host file operation in their folder moved
  // elsewhere then still refuses them. At most 64 a glob (`audit*` matches the rotated files).
  auto identify_matches = [&](const path_entry& e) {
    if (e.normalized.find('/', e.literal_prefix.size()) != std::string::npos) return;
    for (const std::string& match : resolver.expand(glob3_pattern(e), 64)) {
      auto resolved = resolver.resolve(match);
      if (!resolved) continue;
      if (auto id = resolver.identify(*resolved)) denied_ids.push_back(*id);
      set.denied_targets.push_back(std::move(*resolved));
    }
  };
  // A plain entry: resolved, confined, and denied by identity too.
  auto add_plain = [&](std::vector<path_entry>& list, path_entry e, bool is_denied) {
    if (!resolver.follows_links()) {
      list.push_back(std::move(e));
      return;
    }
    auto resolved = resolver.resolve(e.normalized);
    if (!resolved) {
      // Denied: keep the lexical form (still denied). Allowed: drop it (less is allowed).
      set.problems.push_back("cannot resolve '" + e.written + "': " + resolved.err().message);
      if (is_denied) list.push_back(std::move(e));
      return;
    }
    if (!is_denied && !in.confine_root.empty() && !confined(*resolved)) {
      set.problems.push_back("allowedPaths entry '" + e.written + "' ignored: it resolves to '" + *resolved +
                             "', outside the project or the allowed paths it may narrow");
      return;  // less is allowed
    }
    if (is_denied) {
      if (auto id = resolver.identify(*resolved)) denied_ids.push_back(*id);
      set.denied_targets.push_back(*resolved);
    }
    if (is_denied && *resolved != e.normalized) {
      path_entry lexical = e;  // deny both the name and what it points at
      list.push_back(std::move(lexical));
    }
    e.normalized = std::move(*resolved);
    list.push_back(std::move(e));  // allowed entries count only in their resolved form
  };
  // A glob entry: denied ones are known by identity too; an allowed glob that does not match
  // its own name is a problem doctor shows.
  auto add_glob = [&](std::vector<path_entry>& list, path_entry e, bool is_denied) {
    if (is_denied && resolver.follows_links()) identify_matches(e);
    if (const std::string_view range = empty_range(std::string_view(e.normalized).substr(e.literal_prefix.size()));
        !range.empty()) {
      std::string problem = std::string(is_denied ? "deniedPaths" : "allowedPaths") + " entry '" + e.written +
                            "' holds the range '" + std::string(range) + "', whose first byte comes after its last " +
                            "(bytes compare as unsigned values, as in glob(3)): the range matches no byte";
      if (std::find(set.problems.begin(), set.problems.end(), problem) == set.problems.end())  // one per entry
        set.problems.push_back(std::move(problem));
    }
    const std::size_t from = e.literal_prefix.size() - 1;  // the rest, from the folder's last slash
    const std::string_view rest = std::string_view(e.normalized).substr(from);
    if (!is_denied && !glob_match(rest, unescape_glob(rest)))
      set.problems.push_back("allowedPaths entry '" + e.written + "' is read as a glob ('[', '*' and '?' match " +
                             "other names; write '\\[', '\\*' or '\\?' for the character itself, each backslash " +
                             "doubled in JSON): it does not allow a path of that name");
    // Denied: also in its folder's resolved form, as a plain entry is. A home reached through
    // a link (`/home/u` → `/data/u`) would leave `$DHARA_HOME/config.json*` matching only the
    // name through the link: the grants are resolved, so the sandbox masked nothing there.
    std::optional<path_entry> resolved_form;
    if (is_denied && resolver.follows_links()) {
      const std::size_t slash = e.literal_prefix.rfind('/');
      const std::string folder = slash == 0 ? "/" : e.literal_prefix.substr(0, slash);
      auto there = resolver.resolve(folder);
      if (there && *there != folder && e.normalized.starts_with(e.literal_prefix.substr(0, slash + 1))) {
        path_entry r = e;
        const std::string to = *there == "/" ? "" : *there;
        r.normalized = to + e.normalized.substr(slash);
        r.literal_prefix = to + e.literal_prefix.substr(slash);
        resolved_form = std::move(r);
      }
    }
    list.push_back(std::move(e));
    if (resolved_form) list.push_back(std::move(*resolved_form));
  };
  // `pattern` (normalized) read into `e`: the folder before the first glob character is a name
  // (unescaped, compared as text), the rest stays a pattern. False if the folder is unusable.
  auto read_pattern = [](path_entry& e, const std::string& pattern) {
    std::string folder = glob_literal_folder(pattern);
    if (folder.empty()) return false;
    const std::size_t g = first_glob_char(pattern);
    e.glob = g != std::string::npos;
    if (!e.glob) {
      e.normalized = std::move(folder);
      return true;
    }
    e.literal_prefix = folder == "/" ? "/" : folder + "/";
    e.normalized = e.literal_prefix + pattern.substr(pattern.rfind('/', g) + 1);
    return true;
  };
  // With `builtin`, `text` is taken literally and `leaf` is a glob beneath it (none if empty).
  // A user's entry is a pattern: `*`, `?` and `[` are glob characters, and a backslash takes
  // the next character as itself (`app\[2]` names the folder `app[2]`).
  auto add = [&](std::vector<path_entry>& list, std::string_view text, std::string written, bool is_denied,
                 bool builtin = false, std::string_view leaf = {}) -> std::optional<error> {
    // A user's entry is a pattern, so `~` stands for the home escaped (a home named `u[1]`).
    auto expanded = expand_home(text, builtin ? in.home : escape_glob(in.home));
    if (!expanded) return expanded.err();
    if (expanded->empty() || expanded->front() != '/')
      return make_error(errc::invalid_path, "'" + std::string(text) + "' is not an absolute path");
    // Refused where glob(3) and dhara would take the entry apart differently (read_apart).
    if (!builtin)
      if (std::string why = read_apart(*expanded); !why.empty())
        return make_error(errc::invalid_path, "'" + std::string(text) + "' " + why);
    auto normal = normalize_path(*expanded, "/");
    if (!normal) return normal.err();
    path_entry e{std::move(written), std::move(*normal), false, {}};
    if (builtin) {
      if (has_glob(leaf)) {
        e.glob = true;
        e.literal_prefix = e.normalized == "/" ? "/" : e.normalized + "/";
        e.normalized = e.literal_prefix + std::string(leaf);
        e.literal_prefix += literal_prefix_of(leaf);
        add_glob(list, std::move(e), is_denied);
      } else {
        add_plain(list, std::move(e), is_denied);
      }
      return std::nullopt;
    }
    if (!has_glob_syntax(e.normalized)) {
      add_plain(list, std::move(e), is_denied);
      return std::nullopt;
    }
    const std::string raw = e.normalized;
    if (!read_pattern(e, raw)) return make_error(errc::invalid_path, "'" + std::string(text) + "' is not a usable path");
    if (!is_denied && escapes_ordinary(raw))
      set.problems.push_back("allowedPaths entry '" + e.written + "' takes each backslash as an escape of the " +
                             "character after it, so it allows '" + e.normalized +
                             "', not a name holding a backslash: write two backslashes for one (four in JSON)");
    path_entry as_written{e.written, raw, false, {}};
    const bool glob = e.glob;
    if (e.glob)
      add_glob(list, std::move(e), is_denied);
    else
      add_plain(list, std::move(e), is_denied);
    if (!is_denied) return std::nullopt;  // allowed: the pattern only (doctor names an odd one)
    // `/w/app[2]/*.env` where a folder `app[2]` exists: no reading denies `app[2]/.env` (the
    // glob matches `app2/…`, the name is a file `*.env`). Doctor says how to write it, for the
    // deepest such folder (one whose own name holds a glob character) with a glob after it.
    for (std::size_t cut = raw.rfind('/'); glob && resolver.follows_links() && cut != 0 && cut != std::string::npos;
         cut = raw.rfind('/', cut - 1)) {
      const std::string_view before = std::string_view(raw).substr(0, cut), after = std::string_view(raw).substr(cut);
      if (!has_glob(after)) continue;  // the name as written covers what follows
      if (!has_glob(before.substr(before.rfind('/')))) continue;
      const std::string folder = unescape_glob(before);
      auto there = resolver.resolve(folder);
      if (!there || !resolver.identify(*there)) continue;
      set.problems.push_back("deniedPaths entry '" + as_written.written + "' reads '[', '*' and '?' in its folder as " +
                             "glob characters, so it denies nothing inside the folder '" + folder +
                             "' that exists: write '" + escape_glob(folder) + std::string(after) +
                             "' to deny there (in JSON, each backslash is doubled)");
      break;
    }
    // Denied: every other reading too (fail closed). As a glob, `secrets[old]` matches
    // `secretso`, not itself; `a\b` names `ab`. So the name as written is denied, and, when a
    // backslash is there, the glob that takes it as a character (`back\slash*`).
    if (raw.find('\\') != std::string::npos && raw.find_first_of("*?[") != std::string::npos) {
      path_entry no_escapes = as_written;
      std::string doubled;
      for (char c : raw) {
        if (c == '\\') doubled.push_back('\\');
        doubled.push_back(c);
      }
      if (read_pattern(no_escapes, doubled) && no_escapes.glob) add_glob(list, std::move(no_escapes), true);
    }
    add_plain(list, std::move(as_written), true);
    return std::nullopt;
  };

  for (auto& b : builtin_denials(in))
    if (auto err = add(set.denied, b.folder, std::move(b.written), true, true, b.leaf)) return *err;
  // `add`'s messages name the entry ("'X' is not an absolute path"). Said after the entry is
  // named, the message goes on without it: "deniedPaths entry 'X' is not an absolute path",
  // "allowedPaths entry 'X' ignored: it is not …". nullopt for a message that does not.
  auto said_of = [](const std::string& entry, const std::string& message) -> std::optional<std::string> {
    const std::string quoted = "'" + entry + "' ";
    if (!message.starts_with(quoted)) return std::nullopt;
    return message.substr(quoted.size());
  };
  for (std::size_t i = 0; i < in.denied.size(); ++i) {
    const std::string& d = in.denied[i];
    const std::size_t before = set.denied.size();
    if (auto err = add(set.denied, d, d, true)) {
      const auto rest = said_of(d, err->message);
      return make_error(err->code, "deniedPaths entry '" + d + "'" + (rest ? " " + *rest : ": " + err->message));
    }
    if (i < in.denied_named.size())  // the entries this one added (none when an earlier one covers it)
      for (std::size_t k = before; k < set.denied.size(); ++k) set.denied[k].named_as = in.denied_named[i];
  }
  for (const std::string& a : in.allowed)
    if (auto err = add(set.allowed, a, a, false)) {
      const auto rest = said_of(a, err->message);
      set.problems.push_back("allowedPaths entry '" + a + "' ignored: " + (rest ? "it " + *rest : err->message));
    }
  set.denied_ids = std::make_shared<const std::vector<file_id>>(std::move(denied_ids));
  build_trie(set);
  return set;
}

path_matches match_path(const path_rule_set& rules, std::string_view path) {
  path_matches m;
  if (rules.trie.empty()) return m;
  const path_trie_node* node = &rules.trie[0];
  visit(rules, *node, path, m);
  const std::size_t n = path.size();
  for (std::size_t pos = 0; !m.denied;) {
    while (pos < n && path[pos] == '/') ++pos;
    if (pos == n) break;
    const std::uint32_t next = trie_child_at(rules.trie, *node, path, pos);
    if (next == 0) break;  // nothing is indexed below this point
    node = &rules.trie[next];
    visit(rules, *node, path, m);
  }
  return m;
}

namespace {

// A path as check_path reads it: `input` is `raw` with `~` expanded, `lexical` its normal form
// (in thread-local buffers, reused: the common check allocates nothing).
struct path_forms {
  std::string_view input;
  std::string_view lexical;
  bool no_dotdot = false;  // `input` has no `..` segment: it was in normal form, or plain
};

// Whether the session folder `cwd` is in normal form. A session's checks all ask about the
// same folder: the last one this thread found in normal form is remembered, and a folder equal
// to it, byte for byte, is not read again.
bool cwd_is_normal(std::string_view cwd) {
  thread_local std::string last_normal;
  if (!last_normal.empty() && cwd == last_normal) return true;
  if (!is_normal_abs_path(cwd)) return false;
  last_normal.assign(cwd);
  return true;
}

// Whether a relative `path` begins with a URI's scheme and a slash (`file:///…`, `file:/…`,
// `https://…`): its first segment is a scheme and a colon.
bool names_a_uri(std::string_view path) {
  const void* slash = std::memchr(path.data(), '/', path.size());
  if (slash == nullptr) return false;
  const std::size_t colon = static_cast<std::size_t>(static_cast<const char*>(slash) - path.data()) - 1;
  if (colon == 0 || colon == std::string_view::npos || path[colon] != ':' ||
      !std::isalpha(static_cast<unsigned char>(path[0])))
    return false;
  for (std::size_t i = 1; i < colon; ++i) {
    const char c = path[i];
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') return false;
  }
  return true;
}

// The first steps of check_path: `raw` checked for form, `~` expanded, the lexical normal form
// made into `f`. A denial when the path cannot be checked.
[[gnu::always_inline]] inline std::optional<decision> read_path(std::string_view raw, std::string_view cwd,
                                                                std::string_view home, path_forms& f) {
  if (raw.empty()) return deny("the path is empty");
  if (std::memchr(raw.data(), '\0', raw.size()) != nullptr) return deny("the path holds a NUL byte");
  if (raw.size() > max_path_bytes) return deny("the path is longer than " + std::to_string(max_path_bytes) + " bytes");

  thread_local std::string lexical;
  thread_local std::string expanded;
  f.input = raw;
  if (raw.front() == '~') {
    auto e = expand_home(raw, home);
    if (!e) return deny(e.err().message);
    expanded = std::move(*e);
    f.input = expanded;
  }
  // `file:///home/u/.ssh/id_rsa` (or `file:/home/…`) read as a relative path is a folder
  // `file:` in the session folder, allowed, while a tool that takes URIs reads the key (two
  // reviews). One look at the byte before the first slash of a relative path.
  if (f.input.front() != '/' && names_a_uri(f.input))
    return deny("'" + std::string(raw) + "' is a URI, not a path; give the path itself");
  bool ok;
  if (f.input.front() != '/' && cwd_is_normal(cwd)) {
    // The session folder in normal form (cwd_is_normal): copy it, then add the relative path,
    // in one piece when it has no segment to apply (the usual "src/app.ts").
    lexical.assign(cwd.size() == 1 ? std::string_view{} : cwd);
    if (plain_segments(f.input)) {
      lexical.push_back('/');
      lexical.append(f.input);
      f.no_dotdot = true;
    } else {
      push_segments(f.input, lexical);
      if (lexical.empty()) lexical.push_back('/');
    }
    ok = true;
  } else if (is_normal_abs_path(f.input)) {
    lexical.assign(f.input);  // already in the form normalization returns: one scan, one copy
    ok = true;
    f.no_dotdot = true;
  } else {
    ok = normalize_path_into(f.input, cwd, lexical);
  }
  if (!ok)
    return decision{verdict_kind::deny, "the session directory '" + std::string(cwd) + "' is not absolute",
                    decider::failure, {}};
  f.lexical = lexical;
  return std::nullopt;
}

// What a resolver that follows links is asked to resolve. `..` after a symlink climbs out of
// the link's *target* when the kernel opens the path (and a tool given the path opens it that
// way), while lexical normalization drops the link: "to-secret/../outside" would be checked as
// "<cwd>/outside". So a path with a `..` segment is resolved as written (into `physical`),
// component by component; the lexical form is checked for denials, and only the physical one
// can allow.
std::string_view to_resolve(const path_forms& f, std::string_view cwd, std::string& physical) {
  if (f.no_dotdot || !has_dotdot_segment(f.input)) return f.lexical;
  physical.clear();
  if (f.input.front() != '/') physical.assign(cwd.size() == 1 ? std::string_view{} : cwd).push_back('/');
  physical.append(f.input);
  return physical;
}

}  // namespace

bool path_to_resolve(std::string_view raw, std::string_view cwd, std::string_view home, std::string& out) {
  path_forms f;
  if (read_path(raw, cwd, home, f)) return false;
  std::string physical;
  out.assign(to_resolve(f, cwd, physical));
  return true;
}

decision check_path(const path_rule_set& rules, std::string_view raw, std::string_view cwd,
                    std::string_view home, path_access access, const path_resolver& resolver) {
  path_forms f;
  if (auto denied = read_path(raw, cwd, home, f)) return std::move(*denied);
  const std::string_view lexical = f.lexical;

  path_matches lexical_match = match_path(rules, lexical);
  if (const path_entry* d = lexical_match.denied)
    return deny("'" + std::string(raw) + "' is denied by the rule " + rule_name(*d), d->written);

  std::string_view effective = lexical;
  std::string resolved_storage;
  const path_entry* allowed = lexical_match.allowed;
  if (resolver.follows_links()) {
    std::string physical;  // see to_resolve
    auto resolved = resolver.resolve(to_resolve(f, cwd, physical));
    if (!resolved)
      return deny("cannot resolve '" + std::string(raw) + "': " + resolved.err().message);
    resolved_storage = std::move(*resolved);
    effective = resolved_storage;
    if (effective != lexical) {
      path_matches resolved_match = match_path(rules, effective);
      if (const path_entry* d = resolved_match.denied)
        return deny("'" + std::string(raw) + "' resolves to '" + resolved_storage +
                        "', which is denied by the rule " + rule_name(*d),
                    d->written);
      allowed = resolved_match.allowed;  // only the resolved form counts for allowing
    }
  }

  // An allow names the resolved allowed root and the resolution it matched: host file
  // operations open that path beneath that root.
  if (allowed) return {verdict_kind::allow, {}, decider::rule, allowed->normalized, std::move(resolved_storage)};
  std::string reason = std::string(access_word(access)) + " of '" + std::string(raw) + "'";
  if (effective != lexical) reason += " (resolves to '" + std::string(effective) + "')";
  reason += " is outside the allowed paths; add its folder to security.allowedPaths to allow it";
  return deny(std::move(reason));
}

}  // namespace dhara::policy
