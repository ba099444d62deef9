// `dhara doctor --audit-log [--extension X] [--denied-only] [--since 1h] [-n N] [--json]
// [--verify]` (seed, DESIGN §6): the audit trail across rotated files as an aligned table (in
// colour on a terminal, never with NO_COLOR) or raw JSON lines, and the hash-chain check.
// The files may have been edited by anyone: every line goes through the untrusted parser.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <memory>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>

#include "cli/commands.hpp"
#include "io/audit_log.hpp"
#include "io/files.hpp"
#include "policy/audit_entry.hpp"
#include "policy/json_text.hpp"

namespace dhara::cli {
namespace {

using json = nlohmann::json;

/// Options of `dhara doctor --audit-log`.
struct audit_log_options {
  std::string extension;      ///< only this extension
  bool denied_only = false;
  std::string since;          ///< "1h", "30m", "2d", or an ISO time
  std::size_t limit = 50;     ///< the last N matching entries (0: all)
  bool json = false;          ///< raw JSON lines
  bool verify = false;        ///< check seq and the hash chain instead of listing
};

// The audit files oldest first: audit.N.jsonl … audit.1.jsonl, audit.jsonl.
std::vector<std::string> audit_files(const std::string& dir) {
  std::vector<std::pair<int, std::string>> rotated;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    int n = 0;
    if (std::sscanf(name.c_str(), "audit.%d.jsonl", &n) == 1 && name == "audit." + std::to_string(n) + ".jsonl")
      rotated.push_back({n, e.path().string()});
  }
  std::sort(rotated.begin(), rotated.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (auto& [n, path] : rotated) out.push_back(path);
  out.push_back(dir + "/audit.jsonl");
  return out;
}

// "1h", "30m", "2d", "45s" → an ISO timestamp that long ago; an ISO time is taken as is.
std::optional<std::string> since_timestamp(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char unit = text.back();
  std::string number = text.substr(0, text.size() - 1);
  if (!number.empty() && std::all_of(number.begin(), number.end(), ::isdigit) && std::string("smhd").find(unit) != std::string::npos) {
    long long n = std::stoll(number);
    long long seconds = unit == 's' ? n : unit == 'm' ? n * 60 : unit == 'h' ? n * 3600 : n * 86400;
    auto now = io::wall_clock_ms();
    return policy::format_timestamp(now - seconds * 1000);
  }
  if (text.size() >= 10 && text[4] == '-' && text[7] == '-') return text;  // ISO date or time
  return std::nullopt;
}

std::string subject_of(const json& line) {
  const json& d = line.contains("details") && line["details"].is_object() ? line["details"] : json::object();
  for (const char* key : {"path", "url", "command", "change", "prompt"})
    if (d.contains(key) && d[key].is_string()) return d[key].get<std::string>();
  return line.value("tool", "");
}

std::string field(const json& line, const char* key) {
  auto it = line.find(key);
  return it != line.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

namespace {

int doctor_audit_log(const global_options&, const audit_log_options& o) {
  auto where = io::discover_locations();
  if (!where) {
    std::fprintf(stderr, "dhara: %s\n", where.err().message.c_str());
    return 2;
  }
  const std::string& dir = where->dhara_home;
  if (o.verify) {
    auto v = io::verify_audit(dir);
    if (!v) {
      std::fprintf(stderr, "dhara: %s\n", v.err().message.c_str());
      return 1;
    }
    if (!v->ok) {
      std::printf("audit trail broken: %s line %llu: %s\n", v->first_bad_file.c_str(),
                  static_cast<unsigned long long>(v->first_bad_line), v->why.c_str());
      return 1;
    }
    std::printf("audit trail OK: %llu lines in %zu file(s), seq %llu to %llu%s\n", static_cast<unsigned long long>(v->lines),
                v->files.size(), static_cast<unsigned long long>(v->first_seq), static_cast<unsigned long long>(v->last_seq),
                v->anchored ? " (older files were rotated away: the first kept line anchors the chain)" : "");
    return 0;
  }
  std::optional<std::string> since;
  if (!o.since.empty()) {
    since = since_timestamp(o.since);
    if (!since) {
      std::fprintf(stderr, "dhara: --since '%s' is not a duration (30s, 15m, 1h, 2d) or an ISO time\n", o.since.c_str());
      return 2;
    }
  }
  // Keep the last N matching lines while streaming through every file.
  std::deque<std::pair<std::string, json>> kept;
  std::size_t unreadable = 0;
  for (const std::string& file : audit_files(dir)) {
    std::ifstream in(file);
    for (std::string raw; std::getline(in, raw);) {
      auto parsed = policy::parse_json_text(raw, "");
      if (!parsed || !parsed->is_object()) {
        ++unreadable;
        continue;
      }
      const json& line = *parsed;
      if (!o.extension.empty() && field(line, "extension") != o.extension) continue;
      if (o.denied_only && field(line, "action") != "denied") continue;
      if (since && field(line, "timestamp") < *since) continue;
      kept.emplace_back(std::move(raw), std::move(*parsed));
      if (o.limit && kept.size() > o.limit) kept.pop_front();
    }
  }
  if (unreadable) std::fprintf(stderr, "dhara: warning: %zu audit line(s) are not JSON; run 'dhara doctor --audit-log --verify'\n", unreadable);
  if (o.json) {
    for (const auto& [raw, line] : kept) std::printf("%s\n", raw.c_str());
    return 0;
  }
  if (kept.empty()) {
    std::printf("No audit entries%s.\n", o.extension.empty() && !o.denied_only && o.since.empty() ? "" : " match");
    return 0;
  }
  bool colour = ::isatty(1) == 1 && std::getenv("NO_COLOR") == nullptr;
  std::size_t w_ext = 9, w_cap = 10, w_subject = 7;
  for (const auto& [raw, line] : kept) {
    w_ext = std::max(w_ext, field(line, "extension").size());
    w_cap = std::max(w_cap, field(line, "capability").size());
    w_subject = std::min<std::size_t>(48, std::max(w_subject, subject_of(line).size()));
  }
  std::printf("%-24s %-*s %-*s %-7s %-*s %s\n", "TIME", static_cast<int>(w_ext), "EXTENSION", static_cast<int>(w_cap),
              "CAPABILITY", "ACTION", static_cast<int>(w_subject), "SUBJECT", "REASON");
  for (const auto& [raw, line] : kept) {
    std::string action = field(line, "action");
    std::string subject = subject_of(line);
    if (subject.size() > w_subject) subject = subject.substr(0, w_subject - 3) + "...";
    std::string shown = policy::printable_excerpt(action, 7);
    if (colour) shown = (action == "denied" ? "\033[31m" : "\033[32m") + shown + "\033[0m";
    std::printf("%-24s %-*s %-*s %s%*s %-*s %s\n", field(line, "timestamp").c_str(), static_cast<int>(w_ext),
                policy::printable_excerpt(field(line, "extension")).c_str(), static_cast<int>(w_cap),
                policy::printable_excerpt(field(line, "capability")).c_str(), shown.c_str(),
                static_cast<int>(7 - std::min<std::size_t>(7, action.size())), "", static_cast<int>(w_subject),
                policy::printable_excerpt(subject).c_str(), policy::printable_excerpt(field(line, "reason"), 200).c_str());
  }
  return 0;
}

}  // namespace

void add_doctor_command(CLI::App& app, command_context& ctx) {
  struct options {
    bool audit_log = false;
    audit_log_options audit;
  };
  auto o = std::make_shared<options>();
  auto* doctor = app.add_subcommand("doctor", "Health checks; --audit-log shows and verifies the audit trail");
  doctor->add_flag("--audit-log", o->audit_log, "Show recent audit entries (all rotated files)");
  doctor->add_option("--extension", o->audit.extension, "Only this extension");
  doctor->add_flag("--denied-only", o->audit.denied_only, "Only denials");
  doctor->add_option("--since", o->audit.since, "Only entries since a duration ago (30s, 15m, 1h, 2d) or an ISO time");
  doctor->add_option("-n", o->audit.limit, "The last N entries (0: all)")->capture_default_str();
  doctor->add_flag("--json", o->audit.json, "Raw JSON lines");
  doctor->add_flag("--verify", o->audit.verify, "Check seq and the hash chain; name the first bad line");
  doctor->footer("Examples:\n  dhara doctor\n  dhara doctor --audit-log\n  dhara doctor --audit-log --extension web-tools\n"
                 "  dhara doctor --audit-log --denied-only --since 1h\n  dhara doctor --audit-log --verify");
  doctor->callback([&ctx, o] {
    ctx.action = [&ctx, o] {
      if (!o->audit_log) {
        std::fprintf(stderr, "dhara: the doctor's health report is not available yet; use 'dhara doctor --audit-log'\n");
        return 2;
      }
      return doctor_audit_log(ctx.g, o->audit);
    };
  });
}

}  // namespace dhara::cli
