// decide() on a realistic snapshot (8 allowed, 8 denied paths, 20 extensions): the cost of
// one lexical check on one core, the scaling with two threads that each hold their own
// snapshot pointer, and baselines measured in the same run. Prints the ratios at the end.
#include <benchmark/benchmark.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include "policy/snapshot.hpp"
#include "support/policy_fixture.hpp"

using namespace dhara::policy;

namespace {

// Paths a coding agent typically touches: relative and absolute, inside the project.
constexpr std::array<std::string_view, 8> paths{
    "src/auth/login.ts",         "/home/u/proj/package.json", "test/../src/index.ts",
    "/home/u/proj/src/a/b/c.ts", "docs/README.md",            "/tmp/dhara-workspace/out.log",
    "./lib/util.js",             "/home/u/proj/src/components/Button.tsx"};

const dhara::testing::policy_fixture& fixture() {
  static const dhara::testing::policy_fixture f;
  return f;
}

void BM_Decide_LexicalPath_8Rules(benchmark::State& state) {
  // Each thread compiles nothing and shares nothing mutable: it takes its own copy of the
  // snapshot pointer once, as a checker worker does.
  static const auto shared = fixture().compile();
  const auto snap = shared;
  std::size_t i = 0, allowed = 0;
  for (auto _ : state) {
    check_request r{"web-tools", capability::filesystem_read, subject_kind::path, paths[i++ & 7], {}};
    decision d = decide(*snap, r);
    allowed += d.allowed();
    benchmark::DoNotOptimize(d);
  }
  if (allowed != static_cast<std::size_t>(state.iterations())) state.SkipWithError("a benchmark path was denied");
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Decide_LexicalPath_8Rules)->Threads(1)->Threads(2)->UseRealTime();

void BM_Decide_DeniedPath_8Rules(benchmark::State& state) {
  static const auto shared = fixture().compile();
  const auto snap = shared;
  for (auto _ : state) {
    check_request r{"web-tools", capability::filesystem_read, subject_kind::path, "/home/u/proj/secrets/key.pem", {}};
    benchmark::DoNotOptimize(decide(*snap, r));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Decide_DeniedPath_8Rules);

void BM_Decide_CapabilityOnly(benchmark::State& state) {
  static const auto shared = fixture().compile();
  const auto snap = shared;
  for (auto _ : state) {
    check_request r{"web-tools", capability::network_dns, subject_kind::none, {}, {}};
    benchmark::DoNotOptimize(decide(*snap, r));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Decide_CapabilityOnly);

// Baseline: the least a hand-written check must do — find the extension, test a bit,
// normalize the path into a reused buffer, compare against 8 allowed prefixes.
void BM_Baseline_HandWrittenCheck(benchmark::State& state) {
  std::map<std::string, std::uint32_t, std::less<>> caps;
  for (const auto& m : fixture().manifests) caps[m.name] = m.capabilities.bits();
  const auto& allowed = fixture().config.allowed_paths;
  std::string buf;
  buf.reserve(256);
  std::size_t i = 0;
  for (auto _ : state) {
    std::string_view p = paths[i++ & 7];
    auto it = caps.find(std::string_view("web-tools"));
    bool ok = it != caps.end() && (it->second & 1u);
    normalize_path_into(p, "/home/u/proj", buf);
    bool in = false;
    for (const auto& a : allowed) in |= is_at_or_under(buf, a);
    benchmark::DoNotOptimize(ok && in);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Baseline_HandWrittenCheck);

void BM_Normalize_Dhara(benchmark::State& state) {
  std::string out;
  out.reserve(256);
  std::size_t i = 0;
  for (auto _ : state) {
    normalize_path_into(paths[i++ & 7], "/home/u/proj", out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Normalize_Dhara);

void BM_Normalize_StdFilesystem(benchmark::State& state) {
  const std::filesystem::path base("/home/u/proj");
  std::size_t i = 0;
  for (auto _ : state) {
    auto p = (base / std::filesystem::path(paths[i++ & 7])).lexically_normal();
    benchmark::DoNotOptimize(p);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Normalize_StdFilesystem);

// Collects items/s per run so the ratios can be printed after the normal table.
class ratio_reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred || r.run_type != Run::RT_Iteration) continue;
      auto it = r.counters.find("items_per_second");
      if (it != r.counters.end()) rate_[r.benchmark_name()] = it->second.value;
      ns_[r.benchmark_name()] = r.GetAdjustedRealTime();
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    auto rate = [&](const std::string& k) { auto it = rate_.find(k); return it == rate_.end() ? 0.0 : it->second; };
    double one = rate("BM_Decide_LexicalPath_8Rules/real_time/threads:1");
    double two = rate("BM_Decide_LexicalPath_8Rules/real_time/threads:2");
    double base = rate("BM_Baseline_HandWrittenCheck");
    double ours = rate("BM_Normalize_Dhara"), std_fs = rate("BM_Normalize_StdFilesystem");
    std::printf("\n== decide() summary (ratios measured in this run) ==\n");
    if (one > 0) std::printf("lexical check, 1 thread : %.1f ns/check (%.1f M checks/s; target <= 100 ns)\n", 1e9 / one, one / 1e6);
    if (one > 0 && two > 0) std::printf("2 threads / 1 thread   : %.2fx (%.1f M checks/s total; target >= 1.8x)\n", two / one, two / 1e6);
    if (one > 0 && base > 0) std::printf("decide / hand-written  : %.2fx the baseline's time (baseline %.1f ns)\n", base / one, 1e9 / base);
    if (ours > 0 && std_fs > 0) std::printf("normalize: dhara %.1f ns, std::filesystem %.1f ns (%.1fx faster)\n", 1e9 / ours, 1e9 / std_fs, ours / std_fs);
  }

 private:
  std::map<std::string, double> rate_;
  std::map<std::string, double> ns_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (!fixture().compile()) {
    std::fprintf(stderr, "bench: the fixture snapshot did not compile\n");
    return 1;
  }
  ratio_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
