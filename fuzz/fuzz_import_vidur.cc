// Fuzzes profiles::import_vidur() (profiles/import_vidur.h). The first input byte picks which CSV
// of a Vidur profiling directory the rest of the input becomes (kFiles, modulo its size); the
// other CSVs are absent.
#include <array>
#include <filesystem>

#include "fuzz/fuzz_util.h"
#include "profiles/import_vidur.h"

namespace {

constexpr std::array<const char*, 3> kFiles = {
    "compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv",
    "network/h100_dgx/all_reduce.csv",
    "network/h100_dgx/send_recv.csv",
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::filesystem::path root = servesim::fuzz::scratch_dir() / "vidur";
  std::filesystem::remove_all(root);
  servesim::fuzz::write_scratch(std::string("vidur/") + kFiles[data[0] % kFiles.size()],
                                servesim::fuzz::as_text(data + 1, size - 1));
  servesim::fuzz::run_guarded([&] { servesim::profiles::import_vidur(root.string()); });
  return 0;
}
