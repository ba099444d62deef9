// Byte-level helpers shared by the JSON writer (audit lines) and the fast JSON reader: the
// run of bytes a JSON string holds unchanged, and one UTF-8 sequence checked by RFC 3629.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace dhara::policy::json_bytes {

constexpr std::uint64_t ones = 0x0101010101010101ULL;
constexpr std::uint64_t highs = 0x8080808080808080ULL;

// Bytes that end a plain run: controls, '"', '\\' and every non-ASCII byte (validated
// separately). Non-zero high bits mark them; on a little-endian load the lowest set bit is
// exactly the first such byte, because the borrow tricks only give false positives above a
// true one.
inline std::uint64_t special_bytes(std::uint64_t w) {
  const std::uint64_t control = (w - ones * 0x20) & ~w;
  const std::uint64_t q = w ^ (ones * static_cast<unsigned char>('"'));
  const std::uint64_t quote = (q - ones) & ~q;
  const std::uint64_t b = w ^ (ones * static_cast<unsigned char>('\\'));
  const std::uint64_t backslash = (b - ones) & ~b;
  return (control | quote | backslash | w) & highs;
}

constexpr bool is_special(unsigned char c) { return c < 0x20 || c == '"' || c == '\\' || c >= 0x80; }

// Advances past bytes that go out unchanged, eight at a time where possible.
inline const char* skip_plain(const char* p, const char* end) {
  if constexpr (std::endian::native == std::endian::little) {
    const char* const start = p;
    while (end - p >= 8) {
      std::uint64_t w;
      std::memcpy(&w, p, sizeof w);
      if (const std::uint64_t m = special_bytes(w); m != 0) {
        return p + std::countr_zero(m) / 8;
      }
      p += 8;
    }
    // The last 1 to 7 bytes of a run of 8 or more: one load of its last eight, the marks of
    // the bytes already passed shifted out (plain, they mark nothing and borrow nothing).
    if (p != end && end - start >= 8) {
      std::uint64_t w;
      std::memcpy(&w, end - 8, sizeof w);
      const auto passed = static_cast<unsigned>(8 - (end - p));
      const std::uint64_t m = special_bytes(w) >> (8 * passed);
      return m != 0 ? p + std::countr_zero(m) / 8 : end;
    }
  }
  while (p != end && !is_special(static_cast<unsigned char>(*p))) ++p;
  return p;
}

// skip_plain that copies what it passes to `out`: both advance to the first byte that does not
// go out unchanged (or to end). Whole words are stored, so `out` needs room for 8 bytes past
// where it stops; the last word of a run of 8 or more rewrites the bytes before `out` it
// overlaps with the same bytes (this call copied them one for one).
[[gnu::always_inline]] inline void copy_plain(const char*& p, const char* end, char*& out) {
  if constexpr (std::endian::native == std::endian::little) {
    const char* const start = p;
    while (end - p >= 8) {
      std::uint64_t w;
      std::memcpy(&w, p, sizeof w);
      std::memcpy(out, &w, sizeof w);
      if (const std::uint64_t m = special_bytes(w); m != 0) {
        const auto n = static_cast<std::size_t>(std::countr_zero(m) / 8);
        p += n;
        out += n;
        return;
      }
      p += 8;
      out += 8;
    }
    if (p != end && end - start >= 8) {
      std::uint64_t w;
      std::memcpy(&w, end - 8, sizeof w);
      const auto passed = static_cast<std::size_t>(8 - (end - p));
      std::memcpy(out - passed, &w, sizeof w);
      const std::uint64_t m = special_bytes(w) >> (8 * passed);
      const auto n = m != 0 ? static_cast<std::size_t>(std::countr_zero(m) / 8) : static_cast<std::size_t>(end - p);
      p += n;
      out += n;
      return;
    }
    // A string of 1 to 7 bytes left: its bytes gathered into one word by loads that overlap
    // (within it), the rest of the word 'a's, which are not special and borrow nothing.
    if (p != end) {
      const auto n = static_cast<std::size_t>(end - p);
      std::uint64_t w;
      if (n >= 4) {
        std::uint32_t lo, hi;
        std::memcpy(&lo, p, sizeof lo);
        std::memcpy(&hi, end - 4, sizeof hi);
        w = lo | (std::uint64_t{hi} << (8 * (n - 4)));
      } else {
        const auto byte = [&](std::size_t i) { return std::uint64_t{static_cast<unsigned char>(p[i])} << (8 * i); };
        w = byte(0) | byte(n / 2) | byte(n - 1);
      }
      w |= (ones * 'a') << (8 * n);
      std::memcpy(out, &w, sizeof w);
      const std::uint64_t m = special_bytes(w);
      const auto k = m != 0 ? static_cast<std::size_t>(std::countr_zero(m) / 8) : n;
      p += k;
      out += k;
      return;
    }
  }
  while (p != end && !is_special(static_cast<unsigned char>(*p))) *out++ = *p++;
}

// One step of UTF-8 validation (Unicode Table 3-7, "well-formed byte sequences"):
// the length of a valid sequence, or of the maximal invalid subpart that U+FFFD replaces
// (at least one byte). Overlongs, surrogates and > U+10FFFF fail on the second byte.
struct utf8_step {
  std::size_t length;
  bool valid;
};

inline utf8_step next_utf8(const unsigned char* p, const unsigned char* end) {
  const unsigned char c = p[0];
  std::size_t trail = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    trail = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    trail = 2;
    if (c == 0xE0) lo = 0xA0;  // below: overlong
    if (c == 0xED) hi = 0x9F;  // above: UTF-16 surrogates D800..DFFF
  } else if (c >= 0xF0 && c <= 0xF4) {
    trail = 3;
    if (c == 0xF0) lo = 0x90;  // below: overlong
    if (c == 0xF4) hi = 0x8F;  // above: beyond U+10FFFF
  } else {
    return {1, false};  // 80..C1 (continuation byte or overlong lead), F5..FF
  }
  for (std::size_t i = 1; i <= trail; ++i) {
    if (p + i == end || p[i] < lo || p[i] > hi) return {i, false};
    lo = 0x80;
    hi = 0xBF;
  }
  return {trail + 1, true};
}

}  // namespace dhara::policy::json_bytes
