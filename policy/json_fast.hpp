// The fast path of parse_json_text: well-formed JSON within the depth limit, parsed in one
// pass that copies plain string runs in bulk (nlohmann's lexer handles every byte on its
// own, ~80 instructions a byte of a long string). It vouches only for text it accepts; for
// anything else the caller parses again with nlohmann, which decides and names the error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include <nlohmann/json.hpp>

namespace dhara::policy {

/// The deepest limit the fast path takes (it recurses once per level); a caller asking for
/// more goes to nlohmann's parser, which does not recurse.
inline constexpr std::size_t fast_json_max_depth = 512;

/// Parses `text` into `out` and returns true when it is one well-formed JSON value nested at
/// most `max_depth` deep; `out` is then the document nlohmann builds from it (the same value
/// types: unsigned for integers ≥ 0, signed below, double for fractions and exponents and
/// for integers out of 64-bit range; the last of duplicate keys). Returns false, `out`
/// unspecified, for anything else: invalid text, a byte-order mark, a number it does not
/// convert exactly as nlohmann does, or `max_depth` above fast_json_max_depth.
bool parse_json_fast(std::string_view text, std::size_t max_depth, nlohmann::json& out);

/// The same grammar without building a document: true when `text` is one object that
/// parse_json_fast would accept and whose top level holds `key` exactly once (its name
/// unescaped), with an integer from 0 to 2^64-1 (what nlohmann reads as unsigned): stores it in
/// `value`. False for anything else, `value` unspecified; the caller then asks nlohmann.
bool scan_json_object_fast(std::string_view text, std::size_t max_depth, std::string_view key, std::uint64_t& value);

/// The same grammar for one object whose members are all named in `names` (names unescaped,
/// at most 32), each at most once: the value of the member named names[i] is built into
/// *values[i] as parse_json_fast builds it, and bit i of `present` is set. The object itself
/// is never built. False for anything else, the values unspecified: another member, a name
/// twice (nlohmann would keep the last), text parse_json_fast refuses. The caller then parses
/// the whole text.
bool parse_json_members_fast(std::string_view text, std::size_t max_depth, std::span<const std::string_view> names,
                             std::span<nlohmann::json* const> values, std::uint32_t& present);

}  // namespace dhara::policy
