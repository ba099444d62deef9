// libFuzzer target for the sandbox profile that `dhara-launch` reads: parse_sandbox_profile
// must refuse what is not a current-version profile of absolute normalized paths, and whatever it
// accepts must survive to_json and back unchanged (the launcher sees what dhara computed).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/sandbox_profile.hpp"

using namespace dhara::policy;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

// Absolute and normalized, written the obvious way: "/" or "/seg/seg" with no empty, "."
// or ".." segment, and no NUL (the launcher hands paths to the kernel as C strings).
bool plain_absolute(std::string_view p) {
  if (p.empty() || p.front() != '/' || p.find('\0') != std::string_view::npos) return false;
  if (p == "/") return true;
  std::size_t start = 1;
  while (true) {
    std::size_t end = p.find('/', start);
    std::string_view seg = p.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (seg.empty() || seg == "." || seg == "..") return false;
    if (end == std::string_view::npos) return true;
    start = end + 1;
  }
}

void check_paths(const std::vector<std::string>& paths) {
  for (const auto& p : paths) require(plain_absolute(p));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = parse_sandbox_profile(text);
  if (!parsed) {
    require(!parsed.err().message.empty());
    return 0;
  }
  const sandbox_profile& p = *parsed;
  // Only the current version is read: a version that merely converts to it is another format.
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  require(doc.is_object() && doc.contains("version") && doc["version"].is_number_integer() &&
          doc["version"] == sandbox_profile_version);
  check_paths(p.read);
  check_paths(p.write);
  check_paths(p.execute);
  check_paths(p.mask);
  for (const auto& g : p.mask_globs) require(!g.empty() && g.front() == '/' && g.find('\0') == std::string::npos);
  require(p.temp_dir.empty() || plain_absolute(p.temp_dir));

  // Round trip: what dhara writes, the launcher reads back as the same profile.
  std::string once;
  try {
    once = to_json(p);
  } catch (const nlohmann::json::exception&) {
    require(false);  // every accepted string came from valid JSON, so it serializes
  }
  auto again = parse_sandbox_profile(once);
  require(again.has_value());
  require(*again == p);
  require(to_json(*again) == once);
  return 0;
}
