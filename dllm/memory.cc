#include "dllm/memory.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "models/cost/memory_model.h"
#include "core/units.h"

namespace servesim::dllm {
namespace {
constexpr int64_t kLogitBytes = 2;  // bf16 logits
}  // namespace

int64_t logits_bytes(int64_t rows, int64_t vocab, int64_t bytes_per_element) {
  return rows * vocab * bytes_per_element;
}

std::vector<int64_t> logit_chunks(const std::vector<int64_t>& rows_per_request, int64_t max_rows) {
  std::vector<int64_t> chunks;
  for_each_logit_chunk(
      rows_per_request, [](int64_t rows) { return rows; }, max_rows,
      [&chunks](int64_t rows) { chunks.push_back(rows); });
  return chunks;
}

int64_t pages_for_request(double retention, int64_t seq_len) {
  const auto kept = static_cast<int64_t>(std::ceil(retention * static_cast<double>(seq_len)));
  return (kept + kPageTokens - 1) / kPageTokens;
}

namespace {
// Per GPU of a TP-d.tp instance: the weights and the KV heads are sharded over the ranks.
int64_t weight_bytes_per_gpu(const models::Deployment& d) {
  return models::weight_bytes(d.model->param_count, d.weight_dtype, d.tp);
}
int64_t kv_bytes_per_token_per_gpu(const models::Deployment& d) {
  return d.model->kv_bytes_per_token(d.kv_dtype) * models::kv_heads_per_rank(*d.model, d.tp) /
         d.model->num_kv_heads;
}
}  // namespace

int64_t usable_bytes(const models::Deployment& d, const MemoryKnobs& m) {
  return std::llround(static_cast<double>(d.gpu->memory_bytes) * m.gpu_memory_utilization);
}

PagePoolPlan plan_page_pool(const models::Deployment& d, const MemoryKnobs& m,
                            int64_t max_num_batched_tokens, int64_t max_num_logits,
                            bool logit_budgeting) {
  PagePoolPlan plan;
  plan.usable_bytes = usable_bytes(d, m);
  plan.weight_bytes = weight_bytes_per_gpu(d);
  plan.runtime_overhead_bytes = m.runtime_overhead_bytes;
  plan.activation_bytes = models::forward_activation_bytes(d, max_num_batched_tokens);
  const int64_t rows = logit_budgeting ? std::min(max_num_logits, max_num_batched_tokens)
                                       : max_num_batched_tokens;
  plan.logit_reserve_bytes = std::llround(
      m.logit_copies * static_cast<double>(logits_bytes(rows, d.model->vocab_size, kLogitBytes)));
  plan.page_bytes = kPageTokens * kv_bytes_per_token_per_gpu(d);
  const int64_t pool = plan.usable_bytes - plan.weight_bytes - plan.runtime_overhead_bytes -
                       plan.activation_bytes - plan.logit_reserve_bytes;
  plan.num_pages = pool > 0 ? pool / plan.page_bytes : (pool == 0 ? 0 : -1);
  return plan;
}

std::string PagePoolPlan::describe() const {
  return fmt::format(
      "{:.2f} GiB usable - {:.2f} GiB weights - {:.2f} GiB runtime - {:.2f} GiB activations - "
      "{:.2f} GiB logit reserve = {} KV pages of {:.0f} MiB",
      usable_bytes / kBytesPerGiB, weight_bytes / kBytesPerGiB,
      runtime_overhead_bytes / kBytesPerGiB, activation_bytes / kBytesPerGiB,
      logit_reserve_bytes / kBytesPerGiB, std::max<int64_t>(num_pages, 0),
      page_bytes / (1024.0 * 1024.0));
}

SamplerFootprint sampler_footprint(Algorithm a) {
  switch (a) {
    case Algorithm::kFastDllm:
    case Algorithm::kVanilla:
      return {16, false, 8};
    case Algorithm::kSparseDllm:
      return {2, false, 2};
    case Algorithm::kDllmCache:
      return {4, true, 2};
    case Algorithm::kDllmServe:
      break;
  }
  return {4, false, 4};
}

StaticBatchMemory static_batch_memory(Algorithm a, const models::Deployment& d,
                                      const MemoryKnobs& m, const DenoiseParams& p, int64_t batch,
                                      int64_t seq_len) {
  StaticBatchMemory out;
  out.weight_bytes = weight_bytes_per_gpu(d);
  out.runtime_overhead_bytes = m.runtime_overhead_bytes;
  const int64_t kv_token = kv_bytes_per_token_per_gpu(d);
  int64_t cached_tokens = 0;
  switch (a) {
    case Algorithm::kFastDllm:
    case Algorithm::kSparseDllm:
      cached_tokens = seq_len;
      break;
    case Algorithm::kDllmCache:
      cached_tokens = 2 * seq_len;
      break;
    case Algorithm::kVanilla:
    case Algorithm::kDllmServe:
      cached_tokens = 0;
      break;
  }
  out.kv_bytes = batch * cached_tokens * kv_token;
  out.activation_bytes = models::forward_activation_bytes(d, batch * seq_len);
  const int64_t rows = batch * seq_len;
  const SamplerFootprint sampler = sampler_footprint(a);
  const int64_t sampler_rows = sampler.generation_rows_only ? batch * p.gen_length : rows;
  out.logits_bytes = logits_bytes(rows, d.model->vocab_size, kLogitBytes) +
                     logits_bytes(sampler_rows, d.model->vocab_size, sampler.bytes_per_element);
  return out;
}

}  // namespace servesim::dllm
