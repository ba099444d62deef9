// libFuzzer target for manifest.json parsing and runtime.command splitting: untrusted bytes
// from an extension folder must give a manifest or an error, never a crash or a bad value.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "policy/manifest.hpp"

using namespace dhara::policy;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);

  auto m = parse_manifest_text(text, "fuzz/manifest.json");
  if (m) {
    // What the rest of dhara relies on once a manifest was accepted.
    if (!is_valid_extension_name(m->name)) std::abort();
    if (m->version.empty() || m->argv.empty() || m->argv.front().empty()) std::abort();
    if (m->protocol != "json-rpc") std::abort();
    auto again = split_command(m->runtime_command);
    if (!again || *again != m->argv) std::abort();
    if (m->capability_names.size() > capability_count) std::abort();
    if (!m->raw.is_object()) std::abort();
  } else if (m.err().message.empty()) {
    std::abort();
  }

  auto argv = split_command(text);
  if (argv) {
    if (argv->empty() || argv->front().empty()) std::abort();
    for (const auto& arg : *argv)
      if (arg.find('\0') != std::string::npos) std::abort();
  } else if (argv.err().message.empty()) {
    std::abort();
  }

  (void)is_valid_extension_name(text);
  return 0;
}
