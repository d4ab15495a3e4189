// DistServe's A100-80GB latency models as a fidelity reference for `servesim validate`.
//
// DistServe profiled its engine over a sweep of (batch, input length) pairs, 16 output tokens
// each (profiles/distserve/profiling_sweep.json), and fitted per (model, tp), by least squares on
// relative error:
//   prefill_ms = a + b * sum(len) + c * sum(len^2)
//   decode_ms  = a + b * sum(context) + c * batch   (one fit for small batches, one for large)
// servesim is compared with those models two ways:
//   - point by point: servesim's prediction of one shape against the model's value there;
//   - fit against fit: servesim's predictions over the same sweep, fitted by the same procedure,
//     against DistServe's model. A measured GEMM table steps by 20-70 % between neighbouring
//     token counts (cuBLAS tile and wave quantization); DistServe's three-term fits smooth those
//     steps out of its measurements, and fitting servesim's predictions smooths them out of
//     servesim's the same way.
// DistServe runs its own kernels, not the vLLM ones servesim's tables measured: servesim's
// predictions are scaled by one engine efficiency (7 per-class factors) fitted on every model in
// the published sweep, minimising the largest relative error; each model is also predicted with
// the efficiency fitted on the others (leave one model out), reported. The bound applies point by
// point to the scaled predictions of the models in the published sweep.
#pragma once

#include <array>
#include <cstdint>
#include <ostream>
#include <vector>

#include "scenarios/scenario.h"

namespace servesim::app {

struct DistServeLatencyModel {
  std::array<double, 3> prefill{};       // a, b, c of the prefill model
  std::array<double, 3> decode_small{};  // a, b, c of the decode model, batch < threshold
  std::array<double, 3> decode_large{};  // batch >= threshold
  int64_t threshold = 95;                // DistServe's decoding_large_small_bs_threshold

  // `batch` requests of `len` prompt tokens each, in one iteration.
  double prefill_ms(int64_t batch, int64_t len) const;
  // One decode step of `batch` requests with `context` tokens each.
  double decode_ms(int64_t batch, int64_t context) const;
};

// One point of a profiling sweep: `batch` identical requests of `input_len` prompt tokens, with
// the engine's prefill time and its mean decode step time over the following output tokens.
struct DistServeSweepPoint {
  int64_t batch = 0;
  int64_t input_len = 0;
  double prefill_ms = 0;
  double decode_ms = 0;
};

// DistServe's fitting procedure: each model minimises the sum of squared relative errors over the
// points (decode: points with batch < threshold for the small-batch model, the rest for the
// large-batch one). A decode piece with fewer than 3 points takes the other piece's coefficients.
// REQUIRES: at least 3 points, every time > 0.
DistServeLatencyModel fit_distserve_model(const std::vector<DistServeSweepPoint>& points,
                                          int64_t threshold = 95);

// Prints the DistServe section of the fidelity report; returns the number of failed checks.
int distserve_report(const scenarios::DataRoot& root, double bound, std::ostream& out);

}  // namespace servesim::app
