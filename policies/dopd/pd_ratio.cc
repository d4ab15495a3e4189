#include "policies/dopd/pd_ratio.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace servesim::policies::dopd {

double prefill_time_s(const models::IterationCostModel& cost, int64_t isl) {
  models::BatchShape shape;
  shape.segments.push_back({isl, isl, 1});
  return to_seconds(cost.iteration_time(shape));
}

double decode_step_s(const models::IterationCostModel& cost, int64_t batch, int64_t ctx) {
  models::BatchShape shape;
  shape.segments.assign(static_cast<size_t>(std::max<int64_t>(batch, 1)), {1, ctx, 1});
  return to_seconds(cost.iteration_time(shape));
}

RatioResult compute_pd_ratio(const RatioInputs& in) {
  if (!in.prefill_cost || !in.decode_cost || in.decode_num_blocks <= 0 || in.block_size <= 0 ||
      in.l_in < 1 || in.l_out < 1) {
    throw std::invalid_argument("compute_pd_ratio: needs both cost models, KV blocks and l_in, "
                                "l_out >= 1");
  }
  RatioResult r;
  r.ctx_tokens = static_cast<int64_t>(std::llround(in.l_in + in.l_out / 2));
  const int64_t blocks_per_request = (r.ctx_tokens + in.block_size - 1) / in.block_size;
  r.c_kv = in.decode_num_blocks / blocks_per_request;
  r.c_bw = r.c_kv;
  if (in.tpot_slo) {
    const double slo_s = to_seconds(*in.tpot_slo);
    // Decode step time grows with the batch: bisect for the largest batch within the SLO.
    int64_t lo = 0, hi = std::max<int64_t>(r.c_kv, 1) * 4;
    while (hi < (int64_t{1} << 20) && decode_step_s(*in.decode_cost, hi, r.ctx_tokens) <= slo_s) hi *= 2;
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (decode_step_s(*in.decode_cost, mid, r.ctx_tokens) <= slo_s) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    r.c_bw = lo;
  }
  r.c_max = std::max<int64_t>(1, static_cast<int64_t>(std::floor(in.eta * std::min(r.c_kv, r.c_bw))));
  r.t_p_s = prefill_time_s(*in.prefill_cost, static_cast<int64_t>(std::llround(in.l_in)));
  r.t_d_s = decode_step_s(*in.decode_cost, r.c_max, r.ctx_tokens) * in.decode_correction;
  r.ratio = static_cast<double>(r.c_max) * r.t_p_s / (in.l_out * r.t_d_s);
  return r;
}

InstanceCounts instance_counts(const RatioResult& r, double lambda_per_s, double l_out,
                               double rho_p) {
  const double conc = std::max(0.0, lambda_per_s) * l_out * r.t_d_s;
  const double d_frac = conc / static_cast<double>(r.c_max);
  InstanceCounts c;
  c.decode = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(d_frac - 1e-9)));
  c.prefill = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(r.ratio * d_frac / rho_p - 1e-9)));
  return c;
}

int64_t prefill_instances(double lambda_per_s, double t_p_s, double rho_p) {
  return static_cast<int64_t>(std::ceil(std::max(0.0, lambda_per_s) * t_p_s / rho_p - 1e-9));
}

int64_t burst_prefill_instances(double lambda_per_s, double t_p_s, double queued, double drain_s,
                                double rho_p) {
  return prefill_instances(std::max(0.0, lambda_per_s) + std::max(0.0, queued) / drain_s, t_p_s,
                           rho_p);
}

double local_prefill_tokens_per_s(const models::IterationCostModel& decode_cost, int64_t budget,
                                  int64_t concurrency, int64_t ctx_tokens, int64_t prompt_tokens,
                                  std::optional<Duration> tpot_slo) {
  const int64_t decodes = std::max<int64_t>(concurrency, 0);
  const int64_t chunk = std::min(budget - decodes, prompt_tokens);
  if (chunk <= 0) return 0;
  models::BatchShape shape;
  shape.segments.assign(static_cast<size_t>(decodes), {1, ctx_tokens, 1});
  shape.segments.push_back({chunk, std::max(chunk, prompt_tokens / 2), 0});
  const Duration t = decode_cost.iteration_time(shape);
  if (tpot_slo && t > *tpot_slo) return 0;
  return static_cast<double>(chunk) / to_seconds(t);
}

InstanceCounts released_instance_counts(const RatioResult& r, double requests) {
  InstanceCounts c;
  c.prefill = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(r.ratio - 1e-9)));
  c.decode = std::max<int64_t>(
      1, static_cast<int64_t>(std::ceil(std::max(0.0, requests) / static_cast<double>(r.c_max) - 1e-9)));
  return c;
}

}  // namespace servesim::policies::dopd
