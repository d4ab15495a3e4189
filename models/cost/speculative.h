// Speculative decoding as the serving engines run it: a drafter proposes k tokens per decoding
// request (k = num_speculative_tokens), the target model verifies the pending token and the k
// drafts in one pass, and the request keeps the drafts up to the first rejected one plus the
// target's own next token (docs/speculative.md).
//
// Contract:
// - Acceptance is given per draft position, as vLLM's metrics print it ("per-position acceptance
//   rate"): acceptance[i] is the share of verification steps whose draft i was accepted together
//   with every draft before it, so it never rises with i. A step then keeps 1 + a tokens, where
//   a = the number of positions i with u < acceptance[i] for one uniform draw u: exactly
//   P(a >= i + 1) = acceptance[i], and a mean of mean_accepted_length() = 1 + sum(acceptance).
// - Drafters: MTP (the model's own multi-token-prediction layer, run k times: DeepSeek-V3/R1,
//   GLM, MiniMax, Qwen3.5) and EAGLE-3 (a one-layer Llama-style head on the target's hidden
//   states, with a 32k draft vocabulary). draft_model() describes the drafter as a one-layer model
//   so that the same cost and memory models price it.
// - make_speculative_cost_model() prices a pass of verification steps (segments whose logit_rows
//   exceed one: the pending token and its drafts, each sampled) and prompt chunks: the target's
//   time for the whole pass, plus the drafter's k passes (the first over every segment, as the
//   drafter also reads each prompt chunk and each verified token; the other k - 1 over one token
//   per verification step). The draft model is built without a per-iteration overhead
//   (RooflineParams::iteration_overhead 0): the engines run its passes inside the same step, under
//   CUDA graphs; the engine's CPU cost stays the target's.
// - Value types only; deterministic; never sees the simulator.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/cost/cost_model.h"

namespace servesim::models {

enum class SpeculativeMethod { kMtp, kEagle3 };
const char* speculative_method_name(SpeculativeMethod method);  // "mtp", "eagle3"

struct SpeculativeDecoding {
  SpeculativeMethod method = SpeculativeMethod::kMtp;
  int num_speculative_tokens = 0;  // k >= 1
  std::vector<double> acceptance;  // k values in [0, 1], non-increasing (see the contract)

  // 1 + sum(acceptance): the mean tokens a verification step keeps.
  double mean_accepted_length() const;
  // Drafts kept for a draw u in [0, 1): the positions i with u < acceptance[i].
  int accepted_drafts(double u) const;
};

// Published per-position acceptance of `method`, first k positions (docs/speculative.md cites
// them): MTP from vLLM's multi-layer MTP speculator measurements, EAGLE-3 from vLLM's acceptance
// regression test. Throws std::invalid_argument when k exceeds the published positions.
std::vector<double> default_acceptance(SpeculativeMethod method, int k);

// Why `spec` is not usable ("" when it is): k >= 1, k acceptance values, each in [0, 1],
// non-increasing.
std::string speculative_error(const SpeculativeDecoding& spec);

// The drafter of `target` as a one-layer model (key "<target>-mtp" / "<target>-eagle3"):
// - MTP: one of the target's own layers (full attention, MoE where the target is MoE), sharing
//   its embeddings and LM head; param_count is that layer plus the projection of the embedded and
//   hidden states (2 x hidden x hidden).
// - EAGLE-3: one Llama decoder layer of the target's hidden size, attention heads and MLP width
//   (the dense intermediate size), reading 2 x hidden inputs, the fusion of three hidden states
//   (3 x hidden x hidden) and a 32,000-token draft LM head; no MoE, MLA or linear attention.
// param_count counts only what the drafter adds to the target's weights.
ModelSpec draft_model(const ModelSpec& target, SpeculativeMethod method);

// See the contract. `draft` prices the drafter's passes: a plain cost model built for `draft_spec`
// (draft_model() of the target) on the target's GPU and TP degree. The returned model shares all
// three, so the drafter's spec lives as long as the model that points into it.
std::unique_ptr<IterationCostModel> make_speculative_cost_model(
    std::shared_ptr<const IterationCostModel> target,
    std::shared_ptr<const IterationCostModel> draft, std::shared_ptr<const ModelSpec> draft_spec,
    const SpeculativeDecoding& spec);

}  // namespace servesim::models
