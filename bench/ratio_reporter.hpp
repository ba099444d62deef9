// The console reporter every Google Benchmark suite here uses: the usual table, then the
// suite's summary of ratios against the baselines measured in the same run (DESIGN §7).
// It keeps items/s and CPU time per iteration of each run, by name, for the summary: of a run
// repeated (a suite's own Repetitions, or --benchmark_repetitions), the median of its
// repetitions. With --benchmark_enable_random_interleaving=true the repetitions of dhara's
// cases and of their baselines come in a shuffled order, so that both meet the machine's
// phases alike.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include <benchmark/benchmark.h>

namespace dhara::bench {

class ratio_reporter : public benchmark::ConsoleReporter {
 public:
  /// In colour on a terminal only, as Google Benchmark's own reporter by default (the
  /// --benchmark_color flag reaches only that one): escape codes would clutter a saved table.
  ratio_reporter() : ConsoleReporter(::isatty(STDOUT_FILENO) == 1 ? OO_ColorTabular : OO_Tabular) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      const bool wanted = r.repetitions > 1 ? r.run_type == Run::RT_Aggregate && r.aggregate_name == "median"
                                            : r.run_type == Run::RT_Iteration;
      if (!wanted) continue;
      const std::string name = r.run_name.str();  // without the aggregate's "_median"
      if (auto it = r.counters.find("items_per_second"); it != r.counters.end()) rate_[name] = it->second.value;
      cpu_ns_[name] = r.GetAdjustedCPUTime();  // per iteration, in ns (the default unit)
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    summary();
  }

 protected:
  /// Prints the suite's ratios, after the table.
  virtual void summary() = 0;

  /// Items/s of the run named `name`; 0 when it did not run.
  double rate(const std::string& name) const {
    auto it = rate_.find(name);
    return it == rate_.end() ? 0.0 : it->second;
  }
  /// Items/s of the first run whose name starts with `prefix` (the suffixes such as
  /// iterations:4 or real_time follow the registration).
  double rate_prefix(const std::string& prefix) const {
    auto it = rate_.lower_bound(prefix);
    return it == rate_.end() || it->first.compare(0, prefix.size(), prefix) != 0 ? 0.0 : it->second;
  }
  /// Nanoseconds per item of the run named `name`; 0 when it did not run.
  double ns_per_item(const std::string& name) const {
    double r = rate(name);
    return r <= 0 ? 0.0 : 1e9 / r;
  }
  /// CPU nanoseconds per iteration of the run named `name`; 0 when it did not run.
  double cpu_ns(const std::string& name) const {
    auto it = cpu_ns_.find(name);
    return it == cpu_ns_.end() ? 0.0 : it->second;
  }

 private:
  std::map<std::string, double> rate_;
  std::map<std::string, double> cpu_ns_;
};

}  // namespace dhara::bench
