// Equality of two answers of the audit line check (the same facts, or the same sentence):
// used by its unit tests and the fuzz target that compares the fast path with the reference.
#pragma once

#include <string>
#include <variant>

#include "policy/audit_line_check.hpp"

namespace dhara::test {

inline bool same_answer(const std::variant<policy::audit_line_facts, std::string>& a,
                        const std::variant<policy::audit_line_facts, std::string>& b) {
  if (a.index() != b.index()) return false;
  if (const auto* why = std::get_if<std::string>(&a)) return *why == std::get<std::string>(b);
  const auto& x = std::get<policy::audit_line_facts>(a);
  const auto& y = std::get<policy::audit_line_facts>(b);
  return x.seq == y.seq && x.hash == y.hash;
}

}  // namespace dhara::test
