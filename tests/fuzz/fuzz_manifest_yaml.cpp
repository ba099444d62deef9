// libFuzzer target for manifest.yaml: io::yaml_to_json (yaml-cpp underneath) and
// io::load_manifest_text on untrusted bytes from an extension folder. Whatever the bytes:
// an error with a message naming the source, or JSON that serializes (valid UTF-8) and, for a
// manifest, the same manifest the JSON parser makes of that JSON.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "io/yaml.hpp"
#include "policy/manifest.hpp"

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  auto doc = dhara::io::yaml_to_json(text, "fuzz/manifest.yaml");
  if (!doc) {
    require(doc.err().message.starts_with("fuzz/manifest.yaml"));
  } else {
    std::string dumped;
    try {
      dumped = doc->dump();  // every string in it is valid UTF-8
    } catch (const nlohmann::json::exception&) {
      require(false);
    }
    require(nlohmann::json::parse(dumped, nullptr, false) == *doc);
  }

  auto m = dhara::io::load_manifest_text(text, /*yaml=*/true, "fuzz/manifest.yaml");
  if (!m) {
    require(!m.err().message.empty());
    return 0;
  }
  // A YAML manifest is accepted only through the same validation as a JSON one.
  require(doc.has_value());
  auto same = dhara::policy::parse_manifest(*doc, "fuzz/manifest.json");
  require(same.has_value());
  require(same->name == m->name && same->version == m->version && same->argv == m->argv);
  require(same->capabilities == m->capabilities);
  require(same->network_domains == m->network_domains && same->process_commands == m->process_commands);
  require(dhara::policy::is_valid_extension_name(m->name));
  require(!m->version.empty() && !m->argv.empty() && !m->argv.front().empty());
  require(m->protocol == "json-rpc");
  return 0;
}
