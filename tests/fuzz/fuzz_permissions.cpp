// libFuzzer target for permissions.json: parse, and on success the serialization must be a
// fixed point (serialize → parse → serialize gives the same bytes) and deny must win.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "policy/permissions.hpp"

using namespace dhara::policy;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = parse_permissions(text);
  if (!parsed) {
    if (parsed.err().message.empty()) std::abort();
    return 0;
  }

  std::string first = serialize_permissions(parsed->value);
  auto reparsed = parse_permissions(first);
  if (!reparsed) std::abort();
  if (serialize_permissions(reparsed->value) != first) std::abort();
  if (reparsed->value.entries.size() != parsed->value.entries.size()) std::abort();

  constexpr std::array levels{security_level::paranoid, security_level::standard,
                              security_level::trusted, security_level::yolo};
  for (const auto& [name, entry] : parsed->value.entries) {
    for (auto level : levels) {
      for (std::string_view version : {std::string_view(entry.version), std::string_view("fuzz-other")}) {
        auto eff = effective_for(entry, version, level);
        if (!(eff.approved & eff.denied).empty()) std::abort();
        if (!capability_set::all().contains_all(eff.approved | eff.denied)) std::abort();
        if (level == security_level::paranoid && version != entry.version &&
            !(eff.approved.empty() && eff.denied.empty()))
          std::abort();
      }
    }
    (void)entry_applies_to(entry, name, "/fuzz/extensions/" + name, "/fuzz");
  }
  return 0;
}
