// libFuzzer target for parse_json_text's fast path: whatever parse_json_fast accepts,
// nlohmann's parser must accept too and build the same document, node for node and type for
// type; and parse_json_text must answer as nlohmann does, with the fast path or without it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "policy/json_fast.hpp"
#include "policy/json_text.hpp"
#include "tests/support/json_same.hpp"

namespace {

using json = nlohmann::json;
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
  }
  return 0;
}
