// "Did you mean" suggestions, JSON type names for error messages, terminal-safe text.
#include "policy/text.hpp"

#include <algorithm>
#include <vector>

#include <nlohmann/json.hpp>

namespace dhara::policy {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + cost});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string_view closest_match(std::string_view word, std::span<const std::string_view> candidates) {
  std::string_view best;
  std::size_t best_distance = static_cast<std::size_t>(-1);
  for (std::string_view c : candidates) {
    std::size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  std::size_t limit = std::max<std::size_t>(2, std::max(word.size(), best.size()) / 3);
  return best_distance <= limit ? best : std::string_view{};
}

std::string did_you_mean(std::string_view word, std::span<const std::string_view> candidates) {
  std::string_view best = closest_match(word, candidates);
  if (best.empty()) return {};
  return " (did you mean '" + std::string(best) + "'?)";
}

std::string_view json_type_name(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::object: return "object";
    case nlohmann::json::value_t::array: return "array";
    case nlohmann::json::value_t::string: return "string";
    case nlohmann::json::value_t::boolean: return "boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float: return "number";
    case nlohmann::json::value_t::binary: return "binary";
    case nlohmann::json::value_t::discarded: return "discarded";
  }
  return "unknown";
}

namespace {

// Code points a terminal acts on or that hide or reorder what is shown: C1 controls (0x9b is
// an 8-bit CSI), zero-width characters, bidirectional marks, overrides and isolates, line and
// paragraph separators, the byte order mark; and those shown as nothing or as a blank, which
// make two different names look alike (a review): the soft hyphen, the combining grapheme
// joiner, the Hangul and Khmer fillers, Mongolian selectors, the blank braille pattern,
// variation selectors, interlinear annotation marks and the tag characters.
bool hidden_or_acting(char32_t c) {
  return (c >= 0x80 && c <= 0x9f) || c == 0xad || c == 0x34f || c == 0x61c || c == 0x115f || c == 0x1160 ||
         c == 0x17b4 || c == 0x17b5 || (c >= 0x180b && c <= 0x180f) || (c >= 0x200b && c <= 0x200f) ||
         (c >= 0x2028 && c <= 0x202e) || (c >= 0x2060 && c <= 0x206f) || c == 0x2800 || c == 0x3164 ||
         (c >= 0xfe00 && c <= 0xfe0f) || c == 0xfeff || c == 0xffa0 || (c >= 0xfff9 && c <= 0xfffb) ||
         (c >= 0xe0000 && c <= 0xe007f) || (c >= 0xe0100 && c <= 0xe01ef);
}

std::string shown_safely(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* const end = p + text.size();
  while (p < end) {
    const unsigned char b = *p;
    if (b < 0x80) {
      out += b >= 0x20 && b != 0x7f ? static_cast<char>(b) : '?';
      ++p;
      continue;
    }
    // A well-formed UTF-8 sequence is kept unless it encodes one of the above; any other
    // byte is shown as '?' (a lone 0x9b is a CSI to a terminal not in UTF-8 mode).
    const int n = b >= 0xf0 && b <= 0xf4 ? 4 : b >= 0xe0 ? 3 : b >= 0xc2 && b <= 0xdf ? 2 : 0;
    if (n == 0 || b > 0xf4 || end - p < n) {
      out += '?';
      ++p;
      continue;
    }
    char32_t c = b & (0xff >> (n + 1));
    bool ok = true;
    for (int i = 1; i < n; ++i) {
      if ((p[i] & 0xc0) != 0x80) ok = false;
      c = (c << 6) | (p[i] & 0x3f);
    }
    const bool overlong = (n == 3 && c < 0x800) || (n == 4 && c < 0x10000);
    if (!ok || overlong || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) {
      out += '?';
      ++p;
      continue;
    }
    if (hidden_or_acting(c)) out += '?';
    else out.append(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n));
    p += n;
  }
  return out;
}

}  // namespace

std::string terminal_safe(std::string_view text) { return shown_safely(text); }

}  // namespace dhara::policy
