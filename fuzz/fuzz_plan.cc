// Fuzzes app::load_plan() (app/plan.h): reading and validating a plan file, no search.
#include "app/plan.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const servesim::scenarios::DataRoot root = servesim::scenarios::DataRoot::discover();
  const std::string path =
      servesim::fuzz::write_scratch("plan.json", servesim::fuzz::as_text(data, size));
  servesim::fuzz::run_guarded([&] { servesim::app::load_plan(path, root); });
  return 0;
}
