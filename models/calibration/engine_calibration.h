// Calibration of serving engines: the CPU-side and front-end costs that `servesim fidelity --fit`
// fits per engine and GPU class on measured end-to-end runs, and the held-out error it measured,
// kept in a data file (models/engines/calibration.json) and never in the kernel tables.
//
// Contract:
// - A calibration holds few parameters per (engine, GPU class): the per-iteration CPU cost
//   (CpuCostSpec without its `overlapped` flag, which is a fact of the engine), the front end
//   (sim's FrontendSpec values) and two GPU time scales (GpuTimeScale: the engine's kernels
//   against the measured kernel tables, which stay as measured), plus provenance and the
//   leave-one-model-out error band.
// - load() validates every field and throws InputError naming the file and the JSON path; a
//   missing file yields an empty set (every engine then runs uncalibrated, and says so).
// - MoE kernel calibrations (MoeKernelCalibration) sit apart, under "moe_kernels", per engine,
//   GPU class and expert weight format: they never stand in for a class's CPU costs.
// - write() produces the file load() reads, pretty-printed, deterministic (sorted keys).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "models/cost/serving_engine.h"

namespace servesim::models {

// End-to-end error of predictions for models left out of the fit (fractions, 0.12 = 12 %).
struct HeldOutError {
  int64_t rows = 0;
  int64_t models = 0;
  double ttft_mdape = 0;         // median absolute percentage error
  double ttft_p90_ape = 0;       // 90th percentile of the absolute percentage error
  double tpot_mdape = 0;
  double tpot_p90_ape = 0;
  double within_25_both = 0;     // share of rows within 25 % on TTFT and TPOT at once
};

struct EngineCalibration {
  CpuCostSpec cpu;                    // `overlapped` is ignored (the engine's own)
  GpuTimeScale gpu_scale;             // the engine's kernels against the kernel tables
  double frontend_request_us = 0;     // front end per request
  double frontend_token_us = 0;       // front end per prompt token
  std::string fitted_on;              // what the fit used, e.g. "2 models, 310 rows of ..."
  std::optional<HeldOutError> held_out;
};

// An engine's MoE kernels against the measured MoE tables (vLLM's fused-MoE kernels, or the
// grouped-GEMM estimate where no MoE rows of the shape exist), on one GPU class and expert weight
// format, where no table of that engine's own MoE kernels ships: the routed experts' time x
// `scale` (ProfiledParams::moe_kernel_scale). Fitted by `servesim fidelity --fit` on the measured
// MoE rows of that engine, GPU class and weight format, only where they hold two models or more;
// held_out is its leave-one-model-out error.
struct MoeKernelCalibration {
  double scale = 1;
  std::string fitted_on;
  std::optional<HeldOutError> held_out;
};

class EngineCalibrations {
 public:
  // Reads `path` (see the contract). Throws InputError on malformed content.
  static EngineCalibrations load(const std::string& path);
  // Writes every calibration to `path`. Throws Error when the file cannot be written.
  void write(const std::string& path) const;

  // The calibration of `engine` on `gpu_class`, or null.
  const EngineCalibration* find(const std::string& engine, const std::string& gpu_class) const;
  void set(const std::string& engine, const std::string& gpu_class, EngineCalibration c);
  const std::map<std::pair<std::string, std::string>, EngineCalibration>& all() const {
    return entries_;
  }

  // The MoE kernel calibration of `engine` on `gpu_class` for experts of `weight_format` (a
  // dtype name, e.g. "fp8_block"), or null.
  using MoeKey = std::tuple<std::string, std::string, std::string>;  // engine, class, format
  const MoeKernelCalibration* find_moe(const std::string& engine, const std::string& gpu_class,
                                       const std::string& weight_format) const;
  void set_moe(const std::string& engine, const std::string& gpu_class,
               const std::string& weight_format, MoeKernelCalibration c);

 private:
  std::map<std::pair<std::string, std::string>, EngineCalibration> entries_;
  std::map<MoeKey, MoeKernelCalibration> moe_;
};

}  // namespace servesim::models
