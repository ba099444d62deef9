// Names of verdicts and deciders (the audit's `decidedBy` spelling).
#include "policy/decision.hpp"

namespace dhara::policy {

std::string_view to_string(verdict_kind v) {
  switch (v) {
    case verdict_kind::allow: return "allow";
    case verdict_kind::deny: return "deny";
    case verdict_kind::ask: return "ask";
    case verdict_kind::lookup: return "lookup";
  }
  return "deny";
}

std::string_view to_string(decider d) {
  switch (d) {
    case decider::rule: return "rule";
    case decider::user: return "user";
    case decider::trusted_author: return "trusted-author";
    case decider::yolo: return "yolo";
    case decider::failure: return "failure";
  }
  return "failure";
}

}  // namespace dhara::policy
