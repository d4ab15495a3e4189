// Fidelity checks of the profiled cost model against measurements.
//
// leave_one_out(): for every table of a profile, each measured point is predicted from the other
// points of the same table with the same interpolators the cost model uses
// (models/cost/profile_interpolation.h), and the absolute percentage errors are summarised per
// (operator, variant).
// forward_check(): whole forward passes (forward.csv) against a cost model's iteration_time().
// Pure functions of value types; deterministic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "models/cost/cost_model.h"
#include "profiles/profile_tables.h"

namespace servesim::models {

// One (gpu, operator, variant) row of a leave-one-out report.
struct FidelityCell {
  std::string gpu;     // meta.gpu
  std::string source;  // meta.source
  // gemm, attention_prefill, attention_decode, collective, moe, elementwise
  std::string op;
  // gemm: dtype; attention: "q <dtype> kv <kv_dtype>[ bidirectional]"; collective: "<op> <dtype>";
  // moe: dtype; elementwise: op
  std::string variant;
  size_t points = 0;    // points scored
  // Points left out of the score: cache-hot decode points (KV < L2), and GEMM points the table
  // drops as slower than a larger-m GEMM of the same shape (GemmTable::slower_than_larger_m).
  size_t excluded = 0;
  double mape_pct = 0;  // mean absolute percentage error over the scored points
  double p90_ape_pct = 0;
  double max_ape_pct = 0;
  double extrapolated_share = 0;  // of the scored points, those predicted outside the others' grid
};

struct LooOptions {
  int64_t l2_bytes = 0;       // L2 size for the cache-hot guard; 0 = meta.l2_bytes
  double peak_bandwidth = 0;  // caps the decode floor bandwidth; 0 = no cap
};

// Every table of `p` that has rows. Decode points whose KV fits in L2 are still predicted but
// excluded from the score (FidelityCell::excluded): they were timed cache-hot, and the model floors
// every decode prediction at DRAM speed on purpose. GEMM points slower than a larger-m point of the
// same shape are left out of the table, so of the score too.
std::vector<FidelityCell> leave_one_out(const profiles::Profile& p, const LooOptions& options = {});

// Summary statistics of absolute percentage errors (helper of leave_one_out, exposed for tests).
FidelityCell summarize_errors(const std::vector<double>& ape_pct,
                              const std::vector<bool>& extrapolated);

// One forward pass of forward.csv against cost models.
struct ForwardCheckRow {
  profiles::ForwardRow row;
  double measured_s = 0;
  double predicted_s = 0;  // model under test
  double error_pct = 0;    // (predicted - measured) / measured * 100
  double reference_s = 0;  // comparison model (e.g. the roofline); 0 when none
  double reference_error_pct = 0;
};

// The batch shape of one forward.csv row: prefill = `batch` segments of q new tokens with no prefix
// (one logit row each), decode = `batch` segments of one token over context_tokens keys.
BatchShape forward_shape(const profiles::ForwardRow& row);

// Predicts every row of `rows` with `model` (and `reference` when not null). forward.csv times one
// pass between CUDA events on the GPU, without a serving engine's scheduling time: build the models
// with iteration_overhead = 0 to compare like with like.
std::vector<ForwardCheckRow> forward_check(const std::vector<profiles::ForwardRow>& rows,
                                           const IterationCostModel& model,
                                           const IterationCostModel* reference = nullptr);

}  // namespace servesim::models
