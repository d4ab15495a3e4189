// Fuzzes traces::load_mooncake() (traces/loaders.h) on one file.
#include "fuzz/fuzz_util.h"
#include "traces/loaders.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      servesim::fuzz::write_scratch("trace.jsonl", servesim::fuzz::as_text(data, size));
  servesim::fuzz::run_guarded([&] { servesim::traces::load_mooncake(path); });
  return 0;
}
