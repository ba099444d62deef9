// One JSON parser for untrusted text (config, manifests, permissions, protocol lines, batch
// lines): nesting deeper than a limit is refused before the deep value exists (copying and
// dumping a json value recurse once per level), and syntax errors name line and column in
// short, printable text. Well-formed text goes through a fast path (json_fast.hpp) that
// builds the same document; nlohmann's parser decides everything else.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "policy/result.hpp"

namespace dhara::policy {

/// The nesting limit of DESIGN §9 ({} is depth 1).
inline constexpr std::size_t max_json_depth = 256;

/// Parses `text` as one JSON value. Errors are errc::parse_error with the message
/// "SOURCE:LINE:COLUMN: <reason>" ("line L, column C: <reason>" when `source` is empty);
/// columns count bytes; the reason is printable ASCII of at most ~160 bytes, whatever the
/// input held. Never throws.
result<nlohmann::json> parse_json_text(std::string_view text, std::string_view source,
                                       std::size_t max_depth = max_json_depth);

/// parse_json_text for a file dhara reads as settings, permissions or a manifest: also refuses
/// a key that appears twice in one object (errc::parse_error, "SOURCE: the key 'a.b' appears
/// twice in one object; keep one"): the parser keeps the last, so a second `security` or
/// `deniedPaths` silently dropped what the first held. Protocol lines keep parse_json_text.
result<nlohmann::json> parse_json_document(std::string_view text, std::string_view source);

/// `s` made safe for a log line or an error sent to a peer: non-printable bytes as \xNN,
/// cut at `max_bytes` with "...".
std::string printable_excerpt(std::string_view s, std::size_t max_bytes = 160);

}  // namespace dhara::policy
