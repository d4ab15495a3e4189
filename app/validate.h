// `servesim validate`: the fidelity report of the calibrated cost model.
//
// (a) Leave-one-out on every measured table: each point predicted from the others with the
//     interpolators the cost model uses; MAPE, p90 and max error per GPU x operator x dtype.
// (b) GEMM efficiency: each table dtype's compute-bound FLOP/s as a share of its peak, and the
//     inversions (a lower precision slower per unit of work than a higher one of the same table;
//     a GPU with the higher peak slower than another on the same source's shapes), flagged.
// (c) Iteration-level checks against published measurements:
//     - DOPD Table I: prefill time of LLaMa-3.3-70B-FP8 on one H100 for 100..1700 prompt tokens;
//     - DistServe's fitted A100-80GB latency models (OPT-13B, OPT-66B) over the sweep they were
//       fitted on (app/distserve_check.h);
//     - whole forward passes of Llama-3.1-8B measured by servesim-profile on an H100.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "scenarios/scenario.h"

namespace servesim::app {

// Acceptance bounds of the report; a check above its bound is marked FAIL.
struct ValidateBounds {
  double loo_gemm_mape = 0.08;
  double loo_prefill_mape = 0.08;
  double loo_decode_mape = 0.12;
  double loo_collective_mape = 0.12;
  double iteration_error = 0.15;  // DOPD Table I points and DistServe models
};

struct ValidateOptions {
  bool leave_one_out = true;
  bool iterations = true;
  bool efficiency = true;  // GEMM efficiency against the peaks and the inversion check
  std::vector<std::string> gpus;  // empty: every GPU with tables
  // When set, receives the report as JSON (schema in docs/results.md): every leave-one-out cell, every
  // iteration-level point and forward pass, the failure counts.
  scenarios::Json* json = nullptr;
};

// Prints the report. Returns the number of failed checks.
int run_validation(const scenarios::DataRoot& root, const ValidateOptions& options,
                   const ValidateBounds& bounds, std::ostream& out);

}  // namespace servesim::app
