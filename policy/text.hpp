// Small text helpers shared by the parsers: "did you mean" suggestions and the
// names of JSON types in error messages.
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

}  // namespace dhara::policy
