// A round of first looks (real_path_resolver::look_ahead) that runs out of memory part way:
// every allocation of the round is made to fail in turn, and after each failure the round must
// be over, with nothing of it left to answer a later resolution, and no descriptor left open.
// Its own binary, because it replaces the global operator new and delete
// (support/failing_allocations.hpp).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <new>
#include <string>
#include <vector>

#include "io/path_resolver.hpp"
#include "support/failing_allocations.hpp"
#include "support/temp_tree.hpp"

namespace fs = std::filesystem;
using dhara::io::real_path_resolver;

namespace {

std::size_t open_descriptors() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// A project with a file, a folder, a link whose target is relative (lib -> src) and one whose
// target climbs (shared -> ../outside/shared), in a fresh folder removed with it.
struct project : dhara::testing::temp_tree {
  project() : temp_tree("dhara-look-ahead-alloc-XXXXXX") {
    fs::create_directories(root / "proj/src/auth");
    fs::create_directories(root / "outside/shared");
    fs::create_directories(root / "elsewhere");
    for (const char* f : {"proj/src/a.ts", "proj/src/auth/b.ts", "outside/shared/c.ts"}) std::ofstream(root / f) << "x\n";
    fs::create_directory_symlink("src", root / "proj/lib");
    fs::create_directory_symlink("../outside/shared", root / "proj/shared");
  }

  // A round's paths: files and folders that exist, new ones, repeats, and paths under both
  // links (known to the resolver once `learn` has resolved one under each).
  std::vector<std::string> round() const {
    const project& p = *this;
    return {p / "proj/src/a.ts",     p / "proj/src/auth",        p / "proj/src/new.ts",    p / "proj/lib/auth/b.ts",
            p / "proj/lib/new.ts",   p / "proj/shared/c.ts",     p / "proj/shared/new.ts", p / "proj/src/a.ts",
            p / "proj/lib/auth/b.ts", p / "proj/src/auth/b.ts"};
  }
  void learn(real_path_resolver& r) const {
    const project& p = *this;
    REQUIRE(*r.resolve(p / "proj/lib/auth/b.ts") == p / "proj/src/auth/b.ts");
    REQUIRE(*r.resolve(p / "proj/shared/c.ts") == p / "outside/shared/c.ts");
  }
  // What the round found must not outlive it: the project's src becomes a link elsewhere, so a
  // look of the round kept for a path under it (no link met) would now answer wrongly.
  void change() const {
    const project& p = *this;
    fs::rename(p / "proj/src", p / "elsewhere/src");
    fs::create_directory_symlink("../elsewhere/src", p / "proj/src");
  }
};

}  // namespace

TEST_CASE("a round of looks that runs out of memory ends with nothing of it left to answer", "[io][resolver]") {
  {  // Whether looks go together here at all (io_uring allowed): otherwise nothing to check.
    project p;
    const std::vector<std::string> two = {p / "proj", p / "proj"};
    const bool together = real_path_resolver::look_ahead(two) > 0;
    real_path_resolver::end_look_ahead();
    if (!together) {
      WARN("io_uring cannot be used here: the resolver looks one path at a time, nothing to check");
      return;
    }
  }
  std::size_t failures = 0;
  bool completed = false;
  for (long k = 0; k < 10000 && !completed; ++k) {
    INFO("the allocation made to fail: " << k);
    project p;
    real_path_resolver r;
    p.learn(r);
    const std::vector<std::string> paths = p.round();
    const std::size_t descriptors = open_descriptors();
    bool failed = false;
    dhara::testing::fail_allocation_after(k);
    try {
      real_path_resolver::look_ahead(paths);
    } catch (const std::bad_alloc&) {
      failed = true;
    }
    dhara::testing::fail_allocation_after(-1);
    CHECK(open_descriptors() == descriptors);
    if (!failed) {
      real_path_resolver::end_look_ahead();
      completed = true;
      break;
    }
    ++failures;
    p.change();
    const std::uint64_t used_before = real_path_resolver::looked_ahead_answers();
    for (const std::string& path : paths) {
      INFO(path);
      CHECK(*r.resolve(path) == *real_path_resolver::resolve_by_walk(path));
    }
    CHECK(real_path_resolver::looked_ahead_answers() == used_before);  // the round was over
  }
  CHECK(completed);
  CHECK(failures >= 3);  // the round allocates: a run where nothing failed checked nothing
}
