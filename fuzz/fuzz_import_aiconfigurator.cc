// Fuzzes profiles::import_aiconfigurator() (profiles/import_aiconfigurator.h). The first input
// byte picks which CSV of a system directory the rest of the input becomes (kFiles, modulo its
// size); the other CSVs are absent.
#include <array>
#include <filesystem>

#include "fuzz/fuzz_util.h"
#include "profiles/import_aiconfigurator.h"

namespace {

constexpr std::array<const char*, 6> kFiles = {
    "h100_sxm/vllm_0.1.0/gemm_perf.csv",
    "h100_sxm/vllm_0.1.0/context_attention_perf.csv",
    "h100_sxm/vllm_0.1.0/generation_attention_perf.csv",
    "h100_sxm/vllm_0.1.0/moe_perf.csv",
    "h100_sxm/vllm_0.1.0/custom_allreduce_perf.csv",
    "h100_sxm/nccl_2.0.0/nccl_perf.csv",
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::filesystem::path system = servesim::fuzz::scratch_dir() / "aic";
  std::filesystem::remove_all(system);
  std::filesystem::create_directories(system / "h100_sxm/vllm_0.1.0");
  servesim::fuzz::write_scratch(std::string("aic/") + kFiles[data[0] % kFiles.size()],
                                servesim::fuzz::as_text(data + 1, size - 1));
  servesim::fuzz::run_guarded(
      [&] { servesim::profiles::import_aiconfigurator((system / "h100_sxm").string()); });
  return 0;
}
