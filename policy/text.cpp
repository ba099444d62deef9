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

std::string terminal_safe(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return out;
}

}  // namespace dhara::policy
