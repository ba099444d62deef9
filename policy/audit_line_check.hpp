// What every line of the audit trail must be, read back from disk (`doctor --audit-log
// --verify`, the writer's recovery): the hash suffix, one JSON object, a top-level `seq` ≥ 1.
// Well-formed lines take a fast path (json_fast.hpp) that builds no document; nlohmann's SAX
// parser decides everything else and names what is wrong.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

namespace dhara::policy {

/// The two facts the chain needs from a line.
struct audit_line_facts {
  std::uint64_t seq = 0;
  std::string_view hash;  ///< the 64 hex characters of its suffix; points into the line
};

/// Checks one line (without its newline): it ends with `,"hash":"<64 lowercase hex>"}`, is
/// one JSON object nested at most max_json_depth deep, and its top level holds one `seq`, an
/// integer ≥ 1. Returns the facts, or why the line is not an audit line in one sentence.
/// Never throws.
std::variant<audit_line_facts, std::string> read_audit_line(std::string_view line);

/// The same check by nlohmann's SAX parser alone, whatever the line: the reference that
/// read_audit_line answers exactly like (its tests and fuzz target compare the two).
std::variant<audit_line_facts, std::string> read_audit_line_reference(std::string_view line);

}  // namespace dhara::policy
