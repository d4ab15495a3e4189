// Fuzzes scenario loading as `servesim run FILE --set K=V ...` does it, up to validation: the
// input is the scenario file, optionally followed by NUL-separated `--set` overrides
// ("cluster.tp=2"), through load_scenario() (which reads dLLM documents too). Nothing is
// simulated.
#include <vector>

#include "fuzz/fuzz_util.h"
#include "scenarios/scenario.h"

namespace ss = servesim::scenarios;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ss::DataRoot root = ss::DataRoot::discover();
  const std::string_view text = servesim::fuzz::as_text(data, size);
  const size_t end = text.find('\0');
  std::vector<std::string> overrides;
  if (end != std::string_view::npos) {
    std::string_view rest = text.substr(end + 1);
    for (;;) {
      const size_t nul = rest.find('\0');
      overrides.emplace_back(rest.substr(0, nul));
      if (nul == std::string_view::npos) break;
      rest.remove_prefix(nul + 1);
    }
  }
  const std::string path = servesim::fuzz::write_scratch("scenario.json", text.substr(0, end));
  servesim::fuzz::run_guarded([&] { ss::load_scenario(path, overrides, root); });
  return 0;
}
