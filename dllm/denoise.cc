#include "dllm/denoise.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace servesim::dllm {

namespace {
struct NamedAlgorithm {
  Algorithm a;
  const char* name;
  const char* description;
};
constexpr NamedAlgorithm kAlgorithms[] = {
    {Algorithm::kDllmServe, "dllm-serve",
     "dLLM-Serve: phase-multiplexed greedy scheduler, logit decomposition, logit-aware memory "
     "profiling, head-centric sparse KV"},
    {Algorithm::kFastDllm, "fast-dllm",
     "Fast-dLLM dual cache (baseline): full pass at a block's first step, cache reuse after; "
     "static request-level batching"},
    {Algorithm::kDllmCache, "dllm-cache",
     "dLLM-Cache (baseline): prompt and generation refresh intervals with a transfer ratio; static "
     "request-level batching"},
    {Algorithm::kSparseDllm, "sparse-dllm",
     "Sparse-dLLM (baseline): sparse cache with a shared top-r set; static request-level batching"},
    {Algorithm::kVanilla, "vanilla",
     "LLaDA without caching (baseline): a full pass every step; static request-level batching"}};
}  // namespace

std::string algorithm_name(Algorithm a) {
  for (const auto& n : kAlgorithms) {
    if (n.a == a) return n.name;
  }
  return "?";
}

std::string algorithm_description(Algorithm a) {
  for (const auto& n : kAlgorithms) {
    if (n.a == a) return n.description;
  }
  return "?";
}

std::vector<std::string> algorithm_names() {
  std::vector<std::string> out;
  for (const auto& n : kAlgorithms) out.emplace_back(n.name);
  return out;
}

Algorithm parse_algorithm(const std::string& name) {
  for (const auto& n : kAlgorithms) {
    if (name == n.name) return n.a;
  }
  throw std::invalid_argument(fmt::format("unknown dLLM algorithm \"{}\"; valid values are: {}",
                                          name, fmt::join(algorithm_names(), ", ")));
}

std::string check_denoise_params(const DenoiseParams& p) {
  if (p.gen_length < 1 || p.block < 1 || p.steps < 1) {
    return fmt::format("gen_length, block and steps must be positive, got {}, {}, {}",
                       p.gen_length, p.block, p.steps);
  }
  if (p.gen_length % p.block != 0) {
    return fmt::format("gen_length {} is not a multiple of block {}", p.gen_length, p.block);
  }
  if (p.steps % p.num_blocks() != 0) {
    return fmt::format("steps {} is not a multiple of the number of blocks {}", p.steps,
                       p.num_blocks());
  }
  if (!(p.retention > 0 && p.retention <= 1)) {
    return fmt::format("retention must be in (0, 1], got {}", p.retention);
  }
  if (p.cache_prompt_interval < 1 || p.cache_gen_interval < 1) {
    return "cache intervals must be positive";
  }
  if (!(p.transfer_ratio > 0 && p.transfer_ratio <= 1)) {
    return fmt::format("transfer_ratio must be in (0, 1], got {}", p.transfer_ratio);
  }
  return {};
}

bool is_refresh(StepKind k) { return k == StepKind::kFull || k == StepKind::kFullCache; }

int64_t sparse_kept_tokens(const DenoiseParams& p, int64_t seq_len) {
  const auto kept = static_cast<int64_t>(
      std::floor(p.retention * static_cast<double>(std::max<int64_t>(seq_len - p.block, 0))));
  return std::max<int64_t>(1, kept);
}

std::string check_decode_variation(const DecodeVariation& v, const DenoiseParams& p) {
  if (v.eos_min < 0 || v.eos_max < v.eos_min || (v.eos_max > 0 && v.eos_min < 1)) {
    return fmt::format("eos lengths must satisfy 1 <= min <= max, got [{}, {}]", v.eos_min,
                       v.eos_max);
  }
  if (v.accept_min < 0 || v.accept_max < v.accept_min || (v.accept_max > 0 && v.accept_min < 1)) {
    return fmt::format("tokens accepted per step must satisfy 1 <= min <= max, got [{}, {}]",
                       v.accept_min, v.accept_max);
  }
  if (v.accept_max > p.block) {
    return fmt::format("tokens accepted per step ({}) cannot exceed the block ({})", v.accept_max,
                       p.block);
  }
  return {};
}

int64_t RequestPlan::in_block_step(int64_t step, const DenoiseParams& p) const {
  if (block_steps.empty()) return step % p.steps_per_block();
  for (const int32_t n : block_steps) {
    if (step < n) return step;
    step -= n;
  }
  return step;  // past the last block: not a step of this plan
}

RequestPlan plan_request(const DenoiseParams& p, const DecodeVariation& v, RngStream& rng) {
  RequestPlan plan;
  int64_t blocks = p.num_blocks();
  if (v.early_stop()) {
    const int64_t answer = std::min(rng.uniform_int(v.eos_min, v.eos_max), p.gen_length);
    blocks = (answer + p.block - 1) / p.block;
  }
  plan.tokens = blocks * p.block;
  if (!v.threshold_decoding()) {
    plan.steps = blocks * p.steps_per_block();
    return plan;
  }
  plan.block_steps.reserve(static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b) {
    int32_t n = 0;
    for (int64_t left = p.block; left > 0; left -= rng.uniform_int(v.accept_min, v.accept_max)) ++n;
    plan.block_steps.push_back(n);
    plan.steps += n;
  }
  return plan;
}

StepWork step_work(Algorithm a, const DenoiseParams& p, int64_t prompt, int64_t seq_len,
                   int64_t step) {
  return step_work_at(a, p, prompt, seq_len, step % p.steps_per_block(), step);
}

StepWork step_work_at(Algorithm a, const DenoiseParams& p, int64_t prompt, int64_t seq_len,
                      int64_t k, int64_t step) {
  const int64_t L = seq_len;
  const int64_t B = std::min(p.block, L);
  StepWork w;
  switch (a) {
    case Algorithm::kVanilla:
      w = {StepKind::kFull, L, L, L, 0};
      break;
    case Algorithm::kFastDllm:
      w = k == 0 ? StepWork{StepKind::kFullCache, L, L, L, 0}
                 : StepWork{StepKind::kReuse, B, L, B, 0};
      break;
    case Algorithm::kDllmServe:
    case Algorithm::kSparseDllm: {
      // dLLM-Serve takes logits of the active block only, in every phase.
      const int64_t full_rows = a == Algorithm::kDllmServe ? B : L;
      if (k == 0) {
        w = {StepKind::kFull, L, L, full_rows, 0};
      } else if (k == 1) {
        w = {StepKind::kFullCache, L, L, full_rows, 0};
      } else {
        w = {StepKind::kReuse, B, sparse_kept_tokens(p, L) + B, B, 0};
      }
      break;
    }
    case Algorithm::kDllmCache: {
      const int64_t g = step;  // (global step - 1)
      const bool refresh_prompt = g % p.cache_prompt_interval == 0;
      const bool refresh_gen = g % p.cache_gen_interval == 0;
      const int64_t G = L - prompt;  // generation region (incl. padding of a static batch)
      const auto moved = static_cast<int64_t>(std::ceil(p.transfer_ratio * static_cast<double>(G)));
      if (refresh_prompt && refresh_gen) {
        w = {StepKind::kFullCache, L, L, L, 0};
      } else if (refresh_gen) {
        w = {StepKind::kCacheGen, G, L, L, 0};
      } else if (refresh_prompt) {
        w = {StepKind::kCachePrompt, prompt + moved, L, L, 0};
      } else {
        w = {StepKind::kCacheNone, moved, L, L, 0};
      }
      if (w.kind == StepKind::kCachePrompt || w.kind == StepKind::kCacheNone) {
        // V-projection of all G tokens to rank them by similarity: d^2 of a layer's ~(4 d^2 +
        // 3 d d_ff) weights, i.e. about G / 13 token-equivalents for LLaDA-8B (policies.md 6.3);
        // priced as G / 13 side tokens.
        w.side_tokens = (G + 12) / 13;
      }
      break;
    }
  }
  return w;
}

PhaseCounts count_phases(Algorithm a, const DenoiseParams& p, int64_t prompt) {
  PhaseCounts c;
  const int64_t L = prompt + p.gen_length;
  for (int64_t s = 0; s < p.steps; ++s) {
    const StepWork w = step_work(a, p, prompt, L, s);
    if (w.query_tokens == L) {
      ++c.refresh;
    } else {
      ++c.reuse;
    }
  }
  return c;
}

}  // namespace servesim::dllm
