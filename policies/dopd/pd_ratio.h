// DOPD's optimal prefill/decode ratio (policies.md §4.2, eq. 11-14) from the offline-profiled cost
// models of a prefill and a decode instance.
//
// Contract (all pure functions of their inputs, deterministic):
// - Concurrency of one decode instance C_max = floor(eta * min(C_kv, C_bw)), where
//   C_kv = floor(KV blocks / ceil(l_ctx / block))                       (eq. 11 and 13, in blocks)
//   C_bw = the largest batch whose decode step at context l_ctx takes at most the TPOT SLO on the
//          decode cost model (eq. 12 with the calibrated model in place of B_hbm; unbounded, i.e.
//          C_kv, when no TPOT SLO is set)
//   and l_ctx = l_in + l_out / 2 (the time-averaged context, as the released planner).
// - T_p = TTFT_prof(l_in): one l_in-token prefill on the prefill cost model.
//   T_d = ITL_prof(C_max, l_ctx): one decode step of C_max requests at context l_ctx, times the
//   decode correction factor c_d.
// - R* = N_P / N_D = C_max * T_p / (l_out * T_d)                        (eq. 14)
#pragma once

#include <cstdint>
#include <optional>

#include "models/cost/cost_model.h"
#include "core/time.h"

namespace servesim::policies::dopd {

struct RatioInputs {
  const models::IterationCostModel* prefill_cost = nullptr;
  const models::IterationCostModel* decode_cost = nullptr;
  int64_t decode_num_blocks = 0;
  int64_t block_size = 16;
  double l_in = 1000;   // mean input tokens
  double l_out = 200;   // mean output tokens
  std::optional<Duration> tpot_slo;
  double eta = 1.0;          // C_use = eta * C_max (burst headroom)
  double decode_correction = 1.0;  // c_d

  bool operator==(const RatioInputs&) const = default;
};

struct RatioResult {
  int64_t ctx_tokens = 0;  // l_ctx
  int64_t c_kv = 0;
  int64_t c_bw = 0;
  int64_t c_max = 0;       // after eta
  double t_p_s = 0;
  double t_d_s = 0;
  double ratio = 0;        // R*
};

// REQUIRES: both cost models set, decode_num_blocks > 0, l_in >= 1, l_out >= 1.
RatioResult compute_pd_ratio(const RatioInputs& in);

// TTFT_prof(isl): one isl-token prefill, seconds.
double prefill_time_s(const models::IterationCostModel& cost, int64_t isl);
// ITL_prof(batch, ctx): one decode step of `batch` requests at context `ctx`, seconds.
double decode_step_s(const models::IterationCostModel& cost, int64_t batch, int64_t ctx);

struct InstanceCounts {
  int64_t prefill = 1;
  int64_t decode = 1;
};

// Instance counts for a forecast load: lambda requests/s, decode residency l_out * T_d per
// request, so the decode concurrency C = lambda * l_out * T_d (Little) and
//   N_D = ceil(C / C_max),  N_P = ceil(R* * C / C_max / rho_p)  (= ceil(lambda * T_p / rho_p)),
// i.e. the ratio applied to the fractional decode demand, with the prefill pool kept at
// utilisation rho_p (eq. 16) so that its queue stays bounded; at least 1 each.
InstanceCounts instance_counts(const RatioResult& r, double lambda_per_s, double l_out,
                               double rho_p = 1.0);
// Prefill instances that keep up with `lambda_per_s` prompts of T_p seconds each at utilisation
// rho_p: N_P = ceil(lambda * T_p / rho_p) (0 for no load). REQUIRES: rho_p > 0.
int64_t prefill_instances(double lambda_per_s, double t_p_s, double rho_p);
// Burst bypass: prefill instances that serve `lambda_per_s` and drain `queued` prompts within
// `drain_s` (the time a new instance takes to start), at utilisation rho_p:
//   N_P = ceil((lambda * T_p + queued * T_p / drain_s) / rho_p).
// REQUIRES: drain_s > 0, rho_p > 0.
int64_t burst_prefill_instances(double lambda_per_s, double t_p_s, double queued, double drain_s,
                                double rho_p);
// Prompt tokens per second one decode instance prefills locally (PD aggregation) while it decodes
// `concurrency` requests at context `ctx_tokens`: each iteration fills its token budget with a
// prompt chunk of (budget - concurrency) tokens of a `prompt_tokens`-token prompt, attending to
// half the prompt on average. 0 when the decodes fill the budget, or when such a mixed iteration
// would exceed the TPOT SLO (the decodes must keep it). REQUIRES: budget, prompt_tokens >= 1.
double local_prefill_tokens_per_s(const models::IterationCostModel& decode_cost, int64_t budget,
                                  int64_t concurrency, int64_t ctx_tokens, int64_t prompt_tokens,
                                  std::optional<Duration> tpot_slo);

// The released planner's variant: N_P = ceil(R*), N_D = ceil(requests / C_max).
InstanceCounts released_instance_counts(const RatioResult& r, double requests);

}  // namespace servesim::policies::dopd
