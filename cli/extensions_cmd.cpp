// `dhara extensions list`: every discovered extension with its version, state and tools.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/session.hpp"

namespace dhara::cli {

int extensions_list(const global_options& g, bool as_json) {
  int rc = 0;
  auto s = open_session(g, rc);
  if (!s) return rc;
  using json = nlohmann::json;
  if (as_json) {
    json out = json::array();
    for (const auto& info : s->host->extensions()) {
      json tools = json::array();
      for (const json& t : info.tools)
        if (t.is_object() && t.contains("name")) tools.push_back(t["name"]);
      json e = {{"name", info.name}, {"version", info.version}, {"state", actors::to_string(info.state)}, {"tools", tools}};
      if (!info.reason.empty()) e["reason"] = info.reason;
      out.push_back(std::move(e));
    }
    for (const auto& sk : s->host->skipped())
      out.push_back({{"folder", sk.folder}, {"state", "skipped"}, {"reason", sk.reason}});
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  if (s->host->extensions().empty() && s->host->skipped().empty()) {
    std::printf("No extensions found in %s.\n", s->policy.settings.extension_dirs.empty()
                                                    ? "the extension dirs"
                                                    : s->policy.settings.extension_dirs.front().c_str());
    return 0;
  }
  for (const auto& info : s->host->extensions()) {
    std::string tools;
    for (const json& t : info.tools)
      if (t.is_object() && t.contains("name") && t["name"].is_string())
        tools += (tools.empty() ? "" : ", ") + t["name"].get<std::string>();
    std::printf("%-24s %-10s %-8s %s\n", info.name.c_str(), info.version.c_str(),
                std::string(actors::to_string(info.state)).c_str(), tools.c_str());
    if (!info.reason.empty()) std::printf("%-24s reason: %s\n", "", info.reason.c_str());
  }
  for (const auto& sk : s->host->skipped()) std::printf("skipped %s: %s\n", sk.folder.c_str(), sk.reason.c_str());
  return 0;
}

}  // namespace dhara::cli
