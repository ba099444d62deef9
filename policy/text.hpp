// Small text helpers: "did you mean" suggestions and the names of JSON types for the
// parsers' error messages, and untrusted text made safe to show on a terminal.
#pragma once

#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace dhara::policy {

/// Levenshtein distance between two strings (bytes).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate closest to `word`, or "" when none is plausibly meant
/// (distance more than a third of the longer word, at least 2 allowed).
std::string_view closest_match(std::string_view word, std::span<const std::string_view> candidates);

/// " (did you mean 'x'?)" when a close candidate exists, else "".
std::string did_you_mean(std::string_view word, std::span<const std::string_view> candidates);

/// The JSON type name of a value for error messages: "string", "number", "object", ...
std::string_view json_type_name(const nlohmann::json& value);

/// `text` with every C0 control character and DEL replaced by '?', and so every C1 control,
/// zero-width character, bidirectional override or isolate, line separator and byte that is
/// not well-formed UTF-8; other characters kept. Text from a manifest or an extension (names,
/// tool names, call subjects, dhara's messages on stderr) passes through this before it
/// reaches the terminal, so it cannot move the cursor, clear the screen, reorder or hide what
/// is shown, or end a line and fake a prompt line of its own.
std::string terminal_safe(std::string_view text);

}  // namespace dhara::policy
