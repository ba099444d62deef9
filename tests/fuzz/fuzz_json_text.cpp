// libFuzzer target for parse_json_text's fast path: whatever parse_json_fast accepts,
// nlohmann's parser must accept too and build the same document, node for node and type for
// type; and parse_json_text must answer as nlohmann does, with the fast path or without it.
// parse_json_members_fast likewise, member for member. The audit line check's fast path
// (scan_json_object_fast) likewise: what it vouches for is an object nlohmann reads with that
// "seq", and read_audit_line answers every line, the input and the input with a hash suffix,
// exactly as its SAX reference does.
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "policy/audit_line_check.hpp"
#include "policy/json_fast.hpp"
#include "policy/json_text.hpp"
#include "tests/support/audit_line_same.hpp"
#include "tests/support/json_same.hpp"

namespace {

using json = nlohmann::json;
using dhara::test::same_answer;
using dhara::test::same_json;

void require(bool ok) {
  if (!ok) std::abort();
}

std::size_t depth_of(const json& v) {
  std::size_t deepest = 0;
  if (v.is_structured())
    for (const auto& item : v) deepest = std::max(deepest, depth_of(item));
  return v.is_structured() ? deepest + 1 : 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const json reference = json::parse(in, nullptr, /*allow_exceptions=*/false);
  const bool valid = !reference.is_discarded();
  const std::size_t depth = valid ? depth_of(reference) : 0;

  for (std::size_t limit : {std::size_t{2}, std::size_t{dhara::policy::max_json_depth}}) {
    json fast;
    if (dhara::policy::parse_json_fast(in, limit, fast)) {
      require(valid);
      require(depth <= limit);
      require(same_json(fast, reference));
    }
    const auto full = dhara::policy::parse_json_text(in, "f", limit);
    require(full.has_value() == (valid && depth <= limit));
    if (full) require(same_json(*full, reference));
    // The members-only path: what it vouches for is an object nlohmann reads with exactly
    // those members, each the value it built.
    static constexpr std::string_view names[] = {"jsonrpc", "id", "result"};
    json members[3];
    json* const values[] = {&members[0], &members[1], &members[2]};
    std::uint32_t present = 0;
    if (dhara::policy::parse_json_members_fast(in, limit, names, values, present)) {
      require(valid && depth <= limit && reference.is_object());
      require(reference.size() == static_cast<std::size_t>(std::popcount(present)));
      for (std::size_t i = 0; i < 3; ++i) {
        const auto it = reference.find(names[i]);
        require((it != reference.end()) == ((present >> i) & 1u));
        if (it != reference.end()) require(same_json(members[i], *it));
      }
    }
    std::uint64_t seq = 0;
    if (dhara::policy::scan_json_object_fast(in, limit, "seq", seq)) {
      require(valid && depth <= limit && reference.is_object());
      const auto it = reference.find("seq");
      require(it != reference.end() && it->is_number_unsigned() && it->get<std::uint64_t>() == seq);
    }
  }
  using dhara::policy::read_audit_line;
  using dhara::policy::read_audit_line_reference;
  require(same_answer(read_audit_line(in), read_audit_line_reference(in)));
  const std::string as_line = std::string(in) + R"(,"hash":")" + std::string(64, '0') + R"("})";
  require(same_answer(read_audit_line(as_line), read_audit_line_reference(as_line)));
  return 0;
}
