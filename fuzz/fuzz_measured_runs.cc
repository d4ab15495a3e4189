// Fuzzes app::read_measured_runs() and map_measured_run() (app/measured_runs.h): the measured-runs
// CSV `servesim fidelity` reads, and the scenario each row maps to (not simulated).
#include "app/measured_runs.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const servesim::scenarios::DataRoot root = servesim::scenarios::DataRoot::discover();
  static const servesim::scenarios::Catalogs& catalogs = servesim::scenarios::Catalogs::get(root);
  const std::string path =
      servesim::fuzz::write_scratch("runs.csv", servesim::fuzz::as_text(data, size));
  servesim::fuzz::run_guarded([&] {
    const servesim::app::BenchmarkTemplate bench;
    for (const auto& run : servesim::app::read_measured_runs(path)) {
      servesim::app::map_measured_run(run, catalogs, bench);
    }
  });
  return 0;
}
