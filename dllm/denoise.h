// The dLLM request model and the per-step work of each decoding algorithm (policies.md 5.1-5.2).
//
// Contract: pure functions of value types. A request has a prompt of P tokens and a canvas of G
// masked tokens in G / block blocks. By default it runs exactly `steps` denoising forward passes
// (no early exit) and finishes after the last one; step s (0-based) lies in block s / S_b at
// in-block index k = s mod S_b, S_b = steps / n_blocks. Two request-level variations, both off by
// default (DecodeVariation): early stop at EOS (the request stops after the block holding its EOS)
// and confidence-threshold decoding (a random number of tokens accepted per step, so a random
// number of steps per block); plan_request() draws a request's plan from a seeded stream. Each algorithm turns (P, L, s) into the query tokens,
// attended keys and logit rows of that step; the cost model prices them. Units: tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/rng.h"

namespace servesim::dllm {

enum class Algorithm {
  kDllmServe,   // FULL (k=0), FULL + sparse cache (k=1), REUSE over the packed cache; block logits
  kFastDllm,    // dual cache: FULL (k=0) caching all L tokens, REUSE for k >= 1; L logits on FULL
  kDllmCache,   // prompt / generation refresh intervals with a transfer ratio; L logits every step
  kSparseDllm,  // like dllm-serve's phases with a shared (uniform) top-r set; L logits on FULL
  kVanilla,     // LLaDA without caching: FULL every step, L logits
};

// Registry name ("dllm-serve", "fast-dllm", "dllm-cache", "sparse-dllm", "vanilla").
std::string algorithm_name(Algorithm a);
// Throws std::invalid_argument listing the valid names.
Algorithm parse_algorithm(const std::string& name);
std::vector<std::string> algorithm_names();
// One line saying what the algorithm is (servesim list policies).
std::string algorithm_description(Algorithm a);

// Denoising knobs (Table 3 defaults).
struct DenoiseParams {
  int64_t gen_length = 256;  // G
  int64_t steps = 256;       // denoising forward passes per request
  int64_t block = 32;        // B_blk; G % block == 0 and steps % (G / block) == 0
  double retention = 0.5;    // r: share of the non-block context kept by sparse caches
  int64_t pool_kernel = 3;   // saliency max-pool width (quality only; no cost effect)
  int64_t cache_prompt_interval = 100;  // dLLM-Cache Kp
  int64_t cache_gen_interval = 7;       // dLLM-Cache Kr
  double transfer_ratio = 0.25;         // dLLM-Cache rho

  int64_t num_blocks() const { return gen_length / block; }
  int64_t steps_per_block() const { return steps / num_blocks(); }
};

// Returns an empty string when `p` is consistent, else what is wrong.
std::string check_denoise_params(const DenoiseParams& p);

// Request semantics beyond the fixed schedule (all off by default: every request denoises
// gen_length tokens in `steps` passes).
struct DecodeVariation {
  // Early stop at EOS: the answer length (tokens up to and including EOS) is uniform in
  // [eos_min, eos_max] (clipped to gen_length); the request stops after the block holding it.
  // 0: off.
  int64_t eos_min = 0, eos_max = 0;
  // Fast-dLLM's confidence-threshold decoding: every step accepts a number of tokens uniform in
  // [accept_min, accept_max] (at least one, as the threshold rule always takes the most confident
  // token); a block takes as many steps as it needs to accept all its tokens. 0: off (steps_per_
  // block steps per block).
  int64_t accept_min = 0, accept_max = 0;
  bool early_stop() const { return eos_max > 0; }
  bool threshold_decoding() const { return accept_max > 0; }
  bool any() const { return early_stop() || threshold_decoding(); }
};
// Empty when `v` is consistent with `p`, else what is wrong.
std::string check_decode_variation(const DecodeVariation& v, const DenoiseParams& p);

// One request's denoising schedule.
struct RequestPlan {
  int64_t tokens = 0;  // tokens denoised: blocks run x block (G without early stop)
  int64_t steps = 0;   // forward passes it runs
  // Steps of each block it runs; empty when every block takes steps_per_block() steps.
  std::vector<int32_t> block_steps;
  // In-block index of step `step` (0 <= step < steps).
  int64_t in_block_step(int64_t step, const DenoiseParams& p) const;
};
// The plan of one request, drawing from `rng` only for the variations that are on (no draw at
// all by default, so default runs do not depend on the stream). REQUIRES: both checks passed.
RequestPlan plan_request(const DenoiseParams& p, const DecodeVariation& v, RngStream& rng);

enum class StepKind {
  kFull,       // whole sequence as queries, no cache written
  kFullCache,  // whole sequence as queries, cache (dense or sparse) written
  kReuse,      // active block as queries over the cache
  kCacheGen,     // dLLM-Cache: generation region refreshed
  kCachePrompt,  // dLLM-Cache: prompt region refreshed, rho*G tokens updated
  kCacheNone,    // dLLM-Cache: rho*G tokens updated
};
bool is_refresh(StepKind k);  // kFull, kFullCache or a dLLM-Cache step that refreshes both

// The work one request contributes to one forward pass.
struct StepWork {
  StepKind kind = StepKind::kFull;
  int64_t query_tokens = 0;    // tokens whose hidden states are computed
  int64_t context_tokens = 0;  // keys every query attends to (bidirectional), incl. the queries
  int64_t logit_rows = 0;      // rows through the LM head
  // Extra linear work in query-token equivalents attending only to themselves (dLLM-Cache's
  // V-projection of the generation region, used to rank tokens by similarity).
  int64_t side_tokens = 0;
};

// Tokens kept per head by a sparse cache: max(1, floor(r * (L - block))).
int64_t sparse_kept_tokens(const DenoiseParams& p, int64_t seq_len);

// The work of step `step` (0 <= step < p.steps) of a request with `prompt` tokens run at sequence
// length `seq_len` (P + G, or the padded length of a static batch). REQUIRES: params checked,
// prompt >= 1, seq_len >= prompt + G.
StepWork step_work(Algorithm a, const DenoiseParams& p, int64_t prompt, int64_t seq_len,
                   int64_t step);
// The same with the in-block index given: step `step` of the request sits at in-block index
// `k` (a RequestPlan's in_block_step()).
StepWork step_work_at(Algorithm a, const DenoiseParams& p, int64_t prompt, int64_t seq_len,
                      int64_t k, int64_t step);

// Forward passes of one request by class: refresh (whole sequence as queries) and reuse.
struct PhaseCounts {
  int64_t refresh = 0;
  int64_t reuse = 0;
};
PhaseCounts count_phases(Algorithm a, const DenoiseParams& p, int64_t prompt);

}  // namespace servesim::dllm
