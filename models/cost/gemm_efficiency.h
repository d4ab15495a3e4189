// How hard a measured GEMM table drives its GPU, and the tables that contradict the hardware.
//
// A kernel table can be wrong without any of its points being noisy: it can time a slower path
// than the engines run (a quantisation pass, an untuned kernel). The leave-one-out check cannot
// see that, since every point agrees with its neighbours. Two facts about the hardware can:
// - Lower precision is never slower per unit of work. With per-tensor or per-channel scales,
//   applied in the epilogue, an FP8 GEMM runs the same main loop as the BF16 one at twice the
//   tensor-core rate on half the operand bytes, so a kernel of the same quality takes half the
//   BF16 time in both the compute- and the memory-bound regime (servesim's own harness tables,
//   cuBLASLt on an H100 and an H200: 0.52-0.57 at every m). FP4 takes a quarter.
// - A GPU with a higher peak for a dtype is not slower on the same compute-bound shape.
//
// Contract: pure functions of the rows and the GPU catalog entries; "compute-bound" means
// m, n, k >= kComputeBoundDim, far above the ridge point of every catalogued GPU in every dtype;
// ratios are medians over the shapes both tables measured (no interpolation).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "models/catalog/hardware.h"
#include "profiles/profile_tables.h"

namespace servesim::models {

inline constexpr int64_t kComputeBoundDim = 2048;

// Peak FLOP/s of a GEMM table dtype ("bf16", "fp8_e4m3", "nvfp4", ...) on `gpu`; 0 if unknown.
double gemm_table_peak(const GpuSpec& gpu, const std::string& table_dtype);

// One dtype of one table: its compute-bound rows' achieved FLOP/s as a share of the dtype's peak.
struct GemmEfficiency {
  std::string dtype;
  size_t rows = 0;  // compute-bound rows
  double median = 0, max = 0;
};
std::vector<GemmEfficiency> gemm_efficiency(const std::vector<profiles::GemmRow>& rows,
                                            const GpuSpec& gpu);

// Median over the compute-bound (m, n, k) that both dtypes measured of time(low) / time(high);
// nullopt when they share no such shape.
struct TimeRatio {
  size_t shapes = 0;
  double median = 0;
};
std::optional<TimeRatio> compute_bound_time_ratio(const std::vector<profiles::GemmRow>& low_rows,
                                                  const std::string& low_dtype,
                                                  const std::vector<profiles::GemmRow>& high_rows,
                                                  const std::string& high_dtype);

// A lower-precision dtype whose table is slower per unit of work than a higher-precision table
// of the same profile: time ratio above 1 where the peaks say peak(high) / peak(low).
struct PrecisionInversion {
  std::string low, high;  // table dtypes
  TimeRatio ratio;
  double expected = 0;  // peak(high) / peak(low)
};
std::vector<PrecisionInversion> precision_inversions(const std::vector<profiles::GemmRow>& rows,
                                                     const GpuSpec& gpu);

// True when `low_dtype`'s rows are slower than `high_dtype`'s on their shared compute-bound
// shapes (a PrecisionInversion between them).
bool inverted(const std::vector<profiles::GemmRow>& rows, const std::string& low_dtype,
              const std::string& high_dtype);

// Whether the profiled cost model prices an inverted `table_dtype` table on `gpu` from the same
// profile's bf16 kernel instead (ProfiledCostModel: the faster of the table and the bf16 time
// above its fixed latency x peak(bf16) / peak(dtype)). Only per-tensor FP8 ("fp8_e4m3") on
// Blackwell: reasons in the definition.
bool reprices_when_inverted(const GpuSpec& gpu, const std::string& table_dtype);

}  // namespace servesim::models
