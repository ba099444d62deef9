// Names of verdicts and deciders (the audit's `decidedBy` spelling).
#include "policy/decision.hpp"

namespace dhara::policy {

std::string_view to_string(verdict v) {
  switch (v) {
    case verdict::allow: return "allow";
    case verdict::deny: return "deny";
    case verdict::ask: return "ask";
  }
  return "deny";
}

std::string_view to_string(decided_by d) {
  switch (d) {
    case decided_by::rule: return "rule";
    case decided_by::user: return "user";
    case decided_by::trusted_author: return "trusted-author";
    case decided_by::yolo: return "yolo";
    case decided_by::failure: return "failure";
  }
  return "failure";
}

}  // namespace dhara::policy
