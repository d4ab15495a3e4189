// End-to-end speed benchmarks (DESIGN.md §9): simulated requests per wall second, events per
// second, wall time and peak memory for the canonical workloads in bench/scenarios/.
//
//   servesim_bench [--reps N] [SCENARIO ...]
//
// Each scenario is run N times (default 3) in this process; the best wall time is reported.
// Figures are reported, never asserted.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "app/run_scenario.h"
#include "scenarios/scenario.h"

namespace {

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;  // Linux reports KiB
}

}  // namespace

int main(int argc, char** argv) {
  using namespace servesim;
  int reps = 3;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      paths.push_back(a);
    }
  }
  if (paths.empty()) {
    paths = {"bench/scenarios/vidur_llama2_70b_a100.json", "bench/scenarios/azure_conv_8xh100.json",
             "scenarios/quickstart.json"};
  }
  const auto root = scenarios::DataRoot::discover();
  fmt::print("{:<32} {:>9} {:>10} {:>9} {:>13} {:>13} {:>9}\n", "scenario", "requests",
             "sim s", "wall s", "sim req/s", "events/s", "RSS MiB");
  for (const auto& path : paths) {
    try {
      const auto s = scenarios::load_scenario(path, {}, root);
      double best = 1e300;
      app::RunOutcome last;
      for (int r = 0; r < reps; ++r) {
        app::RunOptions opt;
        opt.keep_records = false;
        last = app::run_scenario(s, root, opt);
        best = std::min(best, last.wall_s);
      }
      fmt::print("{:<32} {:>9} {:>10.1f} {:>9.3f} {:>13.0f} {:>13.0f} {:>9.1f}\n", s.name,
                 last.result.requests_finished, last.summary.duration_s, best,
                 last.result.requests_finished / best, last.result.events / best, peak_rss_mib());
    } catch (const std::exception& e) {
      fmt::print(stderr, "{}: {}\n", path, e.what());
      return 1;
    }
  }
  return 0;
}
