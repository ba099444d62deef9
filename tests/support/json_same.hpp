// Equality of two JSON documents that also compares types, node for node: json's operator==
// calls 1, 1u and 1.0 equal, and -0.0 equal to 0.0; a parser must build the same types.
// Used by the JSON unit tests and the fuzz target that compares the fast path with nlohmann.
#pragma once

#include <cmath>
#include <cstddef>

#include <nlohmann/json.hpp>

namespace dhara::test {

inline bool same_json(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j)
      if (i.key() != j.key() || !same_json(*i, *j)) return false;
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (std::size_t k = 0; k < a.size(); ++k)
      if (!same_json(a[k], b[k])) return false;
    return true;
  }
  if (a.is_number_float()) {
    const double x = a.get<double>(), y = b.get<double>();
    return x == y && std::signbit(x) == std::signbit(y);
  }
  return a == b;
}

}  // namespace dhara::test
