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

// The activation quantization a quantized GEMM table timed with its GEMMs. An FP8 GEMM's
// activations are quantized first (per tensor, per token or per block); the engines run that as
// one fused pass (a CUDA kernel, or PyTorch code compiled by torch.compile): it reads the 16-bit
// activations and writes the 8-bit ones, kFusedQuantBytes per element with the GEMM's own read.
// A collector that times the layer eagerly runs the PyTorch fallback instead, a chain of
// elementwise kernels over the m x k activations (aiconfigurator's vLLM collector: QuantFP8's
// forward_native, abs / amax / upcast / scale / clamp / cast, about 33 bytes per element).
// It shows in the table's narrowest rows, where the GEMM itself is negligible: their time grows
// with m x k at the rate of that chain. Rate: the median over every k of the smallest-n rows'
// (time(m) - time(m_min)) / ((m - m_min) k), over the rows with m >= kComputeBoundDim.
inline constexpr double kFusedQuantBytes = 4;  // 2 read, 1 written, 1 read again by the GEMM
inline constexpr double kUnfusedFactor = 3;    // a table above 3x a fused pass timed another path
struct ActivationQuantization {
  std::string dtype;
  size_t points = 0;                     // (m, k) pairs the rate was measured on
  double seconds_per_element = 0;        // the table's rate
  double fused_seconds_per_element = 0;  // kFusedQuantBytes / the GPU's memory bandwidth
  bool unfused() const { return seconds_per_element > kUnfusedFactor * fused_seconds_per_element; }
};
// nullopt for 16-bit dtypes and tables without narrow rows (n <= 256) at m >= kComputeBoundDim.
std::optional<ActivationQuantization> activation_quantization(
    const std::vector<profiles::GemmRow>& rows, const std::string& dtype, const GpuSpec& gpu);
// The table's `dtype` rows as the engines run them: when the table timed an unfused
// quantization (unfused()), each row less the excess over a fused pass,
// (seconds_per_element - fused_seconds_per_element) x (m - m_min) x k; otherwise unchanged.
std::vector<profiles::GemmRow> with_fused_activation_quantization(
    const std::vector<profiles::GemmRow>& rows, const ActivationQuantization& q);

}  // namespace servesim::models
