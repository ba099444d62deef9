// libFuzzer target for parse_json_text's fast path: whatever parse_json_fast accepts,
// nlohmann's parser must accept too and build the same document, node for node and type for
// type; and parse_json_text must answer as nlohmann does, with the fast path or without it.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "policy/json_fast.hpp"
#include "policy/json_text.hpp"

namespace {

using json = nlohmann::json;

void require(bool ok) {
  if (!ok) std::abort();
}

// Equal values of equal types all the way down (json's operator== calls 1, 1u and 1.0 equal).
bool same(const json& a, const json& b) {
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case json::value_t::object: {
      if (a.size() != b.size()) return false;
      auto i = a.begin();
      auto j = b.begin();
      for (; i != a.end(); ++i, ++j)
        if (i.key() != j.key() || !same(*i, *j)) return false;
      return true;
    }
    case json::value_t::array:
      if (a.size() != b.size()) return false;
      for (std::size_t k = 0; k < a.size(); ++k)
        if (!same(a[k], b[k])) return false;
      return true;
    case json::value_t::number_float: {
      const double x = a.get<double>(), y = b.get<double>();
      return x == y && std::signbit(x) == std::signbit(y);
    }
    default: return a == b;
  }
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

  for (std::size_t limit : {std::size_t{2}, std::size_t{dhara::policy::max_json_depth}}) {
    json fast;
    if (dhara::policy::parse_json_fast(in, limit, fast)) {
      require(valid);
      require(depth_of(reference) <= limit);
      require(same(fast, reference));
    }
    const auto full = dhara::policy::parse_json_text(in, "f", limit);
    require(full.has_value() == (valid && depth_of(reference) <= limit));
    if (full) require(same(*full, reference));
  }
  return 0;
}
