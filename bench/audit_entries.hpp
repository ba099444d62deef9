// The audit entries the audit benchmarks write: what a busy session audits (file reads and
// fetches, one denial in ten, every optional key present), so line sizes are realistic.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "policy/audit_entry.hpp"

namespace dhara::bench {

inline std::vector<policy::audit_entry> typical_audit_entries(std::size_t n) {
  std::vector<policy::audit_entry> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    policy::audit_entry& e = out[i];
    e.timestamp_ms = 1778752800123 + static_cast<std::int64_t>(i);
    const bool fetch = i % 4 == 0;
    e.extension = fetch ? "web-tools" : "fs-tools";
    e.capability = fetch ? "network:fetch" : "filesystem:read";
    e.action = i % 10 == 9 ? policy::audit_action::denied : policy::audit_action::allowed;
    if (fetch) {
      e.details = {{"url", "https://api.example.com/v1/items?page=" + std::to_string(i)}};
    } else {
      e.details = {{"path", "/home/user/projects/my-app/src/components/module_" + std::to_string(i) + "/index.ts"}};
    }
    if (e.action == policy::audit_action::denied) e.reason = "path is under a denied entry";
    e.decided_by = policy::decider::rule;
    e.tool = fetch ? "fetch" : "read";
    e.tool_call_id = "call_" + std::to_string(100000 + i);
    e.session = "sess-7f3a9c";
  }
  return out;
}

}  // namespace dhara::bench
