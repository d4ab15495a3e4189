// DOPD's length-aware prefill batching (policies.md §4.5, Algorithm 1, eq. 16-18) for prefill
// instances: whole prompts, KV for the prompt reserved at admission.
//
// Rule, with L = the length threshold (the forecast mean ISL) and L_acc = the accumulation budget:
// - short prompts (< L) accumulate; once their tokens reach L_acc, or the oldest has waited
//   T_max, a batch of them is chosen as a 0/1 knapsack of capacity L_acc solved greedily: first
//   every short prompt that has waited T_max (FCFS), then the rest by descending benefit per
//   token (benefit 1 each: shortest first, FCFS among equals); the first chosen always runs;
// - otherwise the oldest long prompt (>= L) runs alone;
// - otherwise the instance waits, and asks to be woken when the oldest short prompt reaches T_max.
// Also bounded by max_batch_size prompts and the free KV blocks.
// T_max is eq. 17: max(0, beta * TTFT_SLO - W_q - E[S_p]) with Kingman's W_q (eq. 10) for the
// instance's arrival rate and E[S_p] = the prefill time of an L-token prompt; a fixed timeout
// replaces it when set (and when no TTFT SLO is set).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "sim/policy_api.h"

namespace servesim::policies::dopd {

// Inputs the batcher shares with the cluster controller that forecasts them.
struct LengthForecast {
  double mean_isl = 1000;            // L (the forecast mean ISL)
  double arrival_rate_per_instance = 0;  // lambda per prefill instance, requests/s
};

struct LengthAwareParams {
  int64_t max_batch_size = 64;
  int64_t accumulate_tokens = 0;     // L_acc; 0 = L
  std::optional<Duration> timeout;   // fixed T_max; unset = eq. 17
  double beta = 0.5;                 // eq. 17 safety factor
  double ca2 = 1.0, cs2 = 1.0;       // squared CVs of inter-arrival and service times (eq. 10)
  Duration default_timeout{50'000'000};  // T_max when eq. 17 has no TTFT SLO to work from
};

// eq. 17 with Kingman's approximation (eq. 10): max(0, beta*ttft_slo - W_q - es), where
// W_q = rho/(1-rho) * (ca2+cs2)/2 * es and rho = min(0.95, lambda * es). Seconds.
double length_aware_timeout_s(double beta, double ttft_slo_s, double lambda_per_s, double es_s,
                              double ca2, double cs2);

std::unique_ptr<sim::BatchingPolicy> make_length_aware_batcher(
    const LengthAwareParams& params, const sim::InstanceContext& context,
    std::shared_ptr<const LengthForecast> forecast);

}  // namespace servesim::policies::dopd
