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

}  // namespace dhara::cli
