#include "dllm/config.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "core/units.h"

namespace servesim::dllm {
namespace {

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

StepCostKnobs cost_knobs(const DllmConfig& c) {
  StepCostKnobs k;
  const bool chunked = c.algorithm == Algorithm::kDllmServe && c.logit_budgeting;
  k.max_num_logits = chunked ? c.max_num_logits : 0;
  k.softmax_bytes = sampler_footprint(c.algorithm).softmax_bytes;
  k.step_overhead = c.step_overhead;
  k.request_overhead = c.request_overhead;
  return k;
}

void check_config(const DllmConfig& config) {
  if (const std::string e = check_denoise_params(config.denoise); !e.empty()) {
    throw std::invalid_argument("dllm: " + e);
  }
  if (const std::string e = check_decode_variation(config.variation, config.denoise); !e.empty()) {
    throw std::invalid_argument("dllm: " + e);
  }
  if (config.max_num_batched_tokens < 1 || config.max_num_seqs < 1 || config.max_num_logits < 1) {
    throw std::invalid_argument(
        "dllm: max_num_batched_tokens, max_num_seqs and max_num_logits must be positive");
  }
}

DllmMetrics compute_metrics(const DllmRunResult& r) {
  DllmMetrics m;
  std::vector<double> lat;
  int64_t first_arrival = -1;
  for (const auto& q : r.requests) {
    if (first_arrival < 0 || q.arrival_ns < first_arrival) first_arrival = q.arrival_ns;
    if (q.done_ns < 0) continue;
    lat.push_back(static_cast<double>(q.done_ns - q.arrival_ns) * 1e-9);
    m.generated_tokens += q.output_tokens;
  }
  m.finished = static_cast<int64_t>(lat.size());
  if (lat.empty()) return m;
  m.duration_s = static_cast<double>(r.end_ns - first_arrival) * 1e-9;
  m.throughput_tok_s = m.duration_s > 0 ? static_cast<double>(m.generated_tokens) / m.duration_s : 0;
  double sum = 0;
  for (double x : lat) sum += x;
  m.mean_latency_s = sum / static_cast<double>(lat.size());
  double var = 0;
  for (double x : lat) var += (x - m.mean_latency_s) * (x - m.mean_latency_s);
  m.std_latency_s = std::sqrt(var / static_cast<double>(lat.size()));
  m.p50_latency_s = percentile(lat, 0.5);
  m.p90_latency_s = percentile(lat, 0.9);
  m.p99_latency_s = percentile(lat, 0.99);
  m.min_latency_s = *std::min_element(lat.begin(), lat.end());
  m.max_latency_s = *std::max_element(lat.begin(), lat.end());
  m.mean_batch = r.forward_passes > 0 ? static_cast<double>(r.batch_slots) /
                                            static_cast<double>(r.forward_passes)
                                      : 0;
  return m;
}

std::string memory_shortfall(const DllmConfig& config, const models::Deployment& d,
                             int64_t seq_len) {
  if (config.algorithm == Algorithm::kDllmServe) {
    const PagePoolPlan pool = plan_page_pool(d, config.memory, config.max_num_batched_tokens,
                                             config.max_num_logits, config.logit_budgeting);
    if (pool.num_pages >= pages_for_request(config.denoise.retention, seq_len)) return "";
    return fmt::format("dllm-serve on {} with {}: {} holds no request of {} tokens", d.gpu->key,
                       d.model->key, pool.describe(), seq_len);
  }
  const auto need =
      static_batch_memory(config.algorithm, d, config.memory, config.denoise, 1, seq_len);
  const int64_t usable = usable_bytes(d, config.memory);
  if (need.total() <= usable) return "";
  return fmt::format(
      "{} on {} with {} cannot hold one request of {} tokens: {:.2f} GiB > {:.2f} "
      "GiB usable",
      algorithm_name(config.algorithm), d.gpu->key, d.model->key, seq_len,
      need.total() / kBytesPerGiB, usable / kBytesPerGiB);
}

}  // namespace servesim::dllm
