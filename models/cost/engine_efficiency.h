// Serving-engine efficiency: how much slower (or faster) each operator class runs in a given
// serving engine than in the kernels a cost model was calibrated with. servesim's tables are
// measured with vLLM's kernels; another engine (DistServe's, an older vLLM) runs the same shapes
// with other kernels. An EngineEfficiency scales each class of a cost model's breakdown.
//
// Contract:
// - scale_by_engine(inner, e).iteration_time(s) == sum over classes of factor x the class's
//   time in inner.breakdown(s) (overhead included as a class), rounded to the nanosecond.
// - fit_engine_efficiency() minimises the squared relative error over the samples (linear least
//   squares in the factors, weighted by 1/reference) plus ridge x sum of (factor - 1)^2 per
//   sample: without a pull toward 1, classes that move together (elementwise and overhead,
//   all-reduce and GEMMs) trade off into unphysical values. Factors are kept >= min_factor by
//   fixing a class that comes out below it and refitting the others. With minimax_rounds, the
//   samples are reweighted (Lawson) toward the largest relative error. Deterministic.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/cost/cost_model.h"

namespace servesim::models {

struct EngineEfficiency {
  std::string name = "vllm";  // the engine the factors describe
  // QKV, output, MLP and LM-head GEMMs. An engine's GEMM kernels can trail (or lead) vLLM's by
  // different amounts when weight-streaming bound (few tokens) and when compute bound (many):
  // the factor is gemm + (gemm_compute - gemm) * m / (m + gemm_ridge_tokens) for an iteration
  // of m query tokens. gemm_ridge_tokens = 0 applies `gemm` at every m.
  double gemm = 1;
  double gemm_compute = 1;
  double gemm_ridge_tokens = 0;  // the GPU's FLOP/s over its bytes/s per weight element
  double attention_prefill = 1;
  double attention_decode = 1;
  double allreduce = 1;
  double elementwise = 1;     // norms, activations, rotary
  double overhead = 1;        // per-iteration scheduling / launch overhead

  bool identity() const;
  // "gemm x1.03 weight-bound, x1.17 compute-bound (ridge 153 tokens), prefill attention x1.09,
  // ..." (one GEMM factor without a ridge).
  std::string describe() const;
};

std::unique_ptr<IterationCostModel> scale_by_engine(std::shared_ptr<const IterationCostModel> inner,
                                                    const EngineEfficiency& efficiency);

struct EngineSample {
  OperatorTimes breakdown;   // the calibrated model's prediction for the shape
  int64_t query_tokens = 0;  // the shape's total_query_tokens()
  double reference_ms = 0;   // the engine's measured (or fitted) time for the same shape
};

struct EngineFitOptions {
  // > 0: fit gemm and gemm_compute separately, blended at this many query tokens; 0: one GEMM
  // factor (gemm_compute = gemm).
  double gemm_ridge_tokens = 0;
  double ridge = 0.01;       // pull of each factor toward 1, per sample
  double min_factor = 0.2;   // no factor below this
  // 0: least squares on the relative errors. > 0: that many Lawson reweighting rounds, each
  // weighting a sample by its relative error so far, which approaches the factors minimising the
  // largest relative error (the criterion of a per-point error bound).
  int minimax_rounds = 0;
};

// REQUIRES: at least 7 samples with reference_ms > 0.
EngineEfficiency fit_engine_efficiency(const std::vector<EngineSample>& samples,
                                       const std::string& name,
                                       const EngineFitOptions& options = {});

}  // namespace servesim::models
