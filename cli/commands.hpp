// The subcommands of the dhara executable, one function each; main.cpp wires them to CLI11.
#pragma once

#include <cstddef>
#include <string>

namespace dhara::cli {

/// Options every command shares.
struct global_options {
  bool verbose = false;
  bool no_prompt = false;  ///< never ask, even with a terminal (pending capabilities are denied)
};

/// `dhara demo`.
int run_demo();

/// `dhara extensions list [--json]`: starts every extension and shows its state and tools.
int extensions_list(const global_options& g, bool json);

/// `dhara run --calls FILE|- [-j N] [--mode auto]`.
int run_calls(const global_options& g, const std::string& calls_file, std::size_t concurrency,
              const std::string& mode);

/// `dhara config permissions list [--json]`: every installed or recorded extension.
int permissions_list(const global_options& g, bool json);

/// `dhara config permissions show <ext> [--json]`: the seed's format.
int permissions_show(const global_options& g, const std::string& extension, bool json);

/// `dhara config permissions approve|revoke <ext> <cap>` (or `approve <ext> --all`) and
/// `reset <ext>`: `action` is "approve", "revoke" or "reset".
int permissions_change(const global_options& g, const std::string& action, const std::string& extension,
                       const std::string& capability, bool all);

/// Options of `dhara doctor --audit-log`.
struct audit_log_options {
  std::string extension;      ///< only this extension
  bool denied_only = false;
  std::string since;          ///< "1h", "30m", "2d", or an ISO time
  std::size_t limit = 50;     ///< the last N matching entries (0: all)
  bool json = false;          ///< raw JSON lines
  bool verify = false;        ///< check seq and the hash chain instead of listing
};

/// `dhara doctor --audit-log …`.
int doctor_audit_log(const global_options& g, const audit_log_options& options);

}  // namespace dhara::cli
