// `dhara extensions list`: every discovered extension with its version, state and tools.
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>

#include "cli/commands.hpp"
#include "cli/session.hpp"
#include "policy/text.hpp"

namespace dhara::cli {

namespace {

// "blocked" when a ready extension declares capabilities that are not approved: its tools
// would be denied. The reason names what is missing and the command that approves it.
std::string blocked_reason(const session& s, const actors::extension_info& info) {
  const auto& snap = *s.policy.snapshot;
  if (snap.level == policy::security_level::yolo) return {};
  auto it = snap.extensions.find(info.name);
  if (it == snap.extensions.end()) return {};
  const auto& ext = it->second;
  policy::capability_set missing = ext.declared.minus(ext.approved_by_user).minus(ext.approved_by_author);
  if (missing.empty()) return {};
  return "not approved: " + policy::join_names(missing) + " (run 'dhara config permissions approve " + info.name + " --all')";
}

}  // namespace

namespace {

int extensions_list(const global_options& g, bool as_json) {
  int rc = 0;
  auto s = open_session(g, rc);
  if (!s) return rc;
  using json = nlohmann::json;
  auto state_of = [&](const actors::extension_info& info, std::string& reason) -> std::string {
    reason = info.reason;
    if (info.state != actors::extension_state::ready) return std::string(actors::to_string(info.state));
    reason = blocked_reason(*s, info);
    return reason.empty() ? "ready" : "blocked";
  };
  auto tool_names = [&](const actors::extension_info& info) {
    std::vector<std::string> names;
    for (const json& t : info.tools)
      if (t.is_object() && t.contains("name") && t["name"].is_string()) {
        std::string name = t["name"].get<std::string>();
        if (!s->host->refused_tools().count(info.name + "/" + name)) names.push_back(name);
      }
    return names;
  };
  if (as_json) {
    json out = json::array();
    for (const auto& info : s->host->extensions()) {
      std::string reason;
      std::string state = state_of(info, reason);
      json e = {{"name", info.name}, {"version", info.version}, {"state", state}, {"tools", tool_names(info)}};
      if (!reason.empty()) e["reason"] = reason;
      json refused = json::object();
      for (const auto& [key, why] : s->host->refused_tools())
        if (key.rfind(info.name + "/", 0) == 0) refused[key.substr(info.name.size() + 1)] = why;
      if (!refused.empty()) e["refusedTools"] = refused;
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
    std::string reason;
    std::string state = state_of(info, reason);
    // What an extension said (its version, tools, errors) is shown without its escape sequences.
    std::string tools;
    for (const std::string& t : tool_names(info)) tools += (tools.empty() ? "" : ", ") + policy::terminal_safe(t);
    std::printf("%-24s %-10s %-8s %s\n", policy::terminal_safe(info.name).c_str(),
                policy::terminal_safe(info.version).c_str(), state.c_str(), tools.c_str());
    if (!reason.empty()) std::printf("%-24s reason: %s\n", "", policy::terminal_safe(reason).c_str());
    for (const auto& [key, why] : s->host->refused_tools())
      if (key.rfind(info.name + "/", 0) == 0) std::printf("%-24s %s\n", "", policy::terminal_safe(why).c_str());
  }
  for (const auto& sk : s->host->skipped())
    std::printf("skipped %s: %s\n", policy::terminal_safe(sk.folder).c_str(), policy::terminal_safe(sk.reason).c_str());
  return 0;
}

}  // namespace

void add_extensions_commands(CLI::App& app, command_context& ctx) {
  auto* ext = app.add_subcommand("extensions", "Discovered extensions and their tools; install and remove");
  ext->require_subcommand(1);
  auto json = std::make_shared<bool>(false);
  auto* list = ext->add_subcommand("list", "Start every extension and show its version, state and tools");
  list->add_flag("--json", *json, "Print JSON instead of a table");
  list->footer("Examples:\n  dhara extensions list\n  dhara extensions list --json");
  list->callback([&ctx, json] { ctx.action = [&ctx, json] { return extensions_list(ctx.g, *json); }; });
  add_install_commands(*ext, ctx);
}

}  // namespace dhara::cli
