#include "models/cost/speculative.h"

#include <algorithm>
#include <span>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "models/cost/added_passes.h"

namespace servesim::models {
namespace {

// Per-position acceptance, docs/speculative.md "Default acceptance".
// MTP: vLLM pull request 48892, an MTP drafter proposing 8 tokens (GSM8K, temperature 0).
constexpr double kMtpAcceptance[] = {0.7617, 0.6158, 0.5125, 0.4243,
                                     0.3640, 0.3094, 0.2722, 0.2365};
// EAGLE-3: vLLM's tests/v1/spec_decode/test_acceptance_length.py, Llama-3.1-8B-Instruct with its
// EAGLE-3 head proposing 3 tokens (MT-Bench, temperature 0).
constexpr double kEagle3Acceptance[] = {0.7296, 0.5208, 0.3545};

constexpr int64_t kEagle3DraftVocab = 32000;

class SpeculativeCostModel final : public AddedPassesCostModel {
 public:
  SpeculativeCostModel(std::shared_ptr<const IterationCostModel> target,
                       std::shared_ptr<const IterationCostModel> draft,
                       std::shared_ptr<const ModelSpec> draft_spec, SpeculativeDecoding spec)
      : AddedPassesCostModel(std::move(target), std::move(draft)),
        draft_spec_(std::move(draft_spec)),
        spec_(std::move(spec)) {}

  std::string describe() const override {
    return fmt::format(
        "{}; speculative decoding: {} drafter, {} tokens, mean accepted length {:.2f}",
        target().describe(), speculative_method_name(spec_.method), spec_.num_speculative_tokens,
        spec_.mean_accepted_length());
  }

 private:
  // The drafter's passes for `shape` (none without a segment to draft for).
  const std::vector<const BatchShape*>& added_passes(const BatchShape& shape) const override {
    passes_.clear();
    // First pass: every segment, each verification step sampling one draft.
    first_.segments.assign(shape.segments.begin(), shape.segments.end());
    later_.clear();
    for (Segment& s : first_.segments) {
      if (!is_verification(s)) continue;
      s.logit_rows = 1;
      later_.segments.push_back({1, s.context_tokens, 1});
    }
    if (first_.empty()) return passes_;
    passes_.push_back(&first_);
    if (later_.empty()) return passes_;
    for (int pass = 1; pass < spec_.num_speculative_tokens; ++pass) passes_.push_back(&later_);
    return passes_;
  }

  std::shared_ptr<const ModelSpec> draft_spec_;  // what the drafter's model was built for
  SpeculativeDecoding spec_;
  // Scratch: one model per engine, one thread at a time.
  mutable BatchShape first_, later_;
  mutable std::vector<const BatchShape*> passes_;
};

// Parameters of one average decoder layer of `m`: what is left of param_count without the
// embeddings and the LM head, over the layers.
int64_t mean_layer_params(const ModelSpec& m) {
  const int64_t embeddings = m.vocab_size * m.hidden_size * (m.tie_word_embeddings ? 1 : 2);
  return std::max<int64_t>(0, m.param_count - embeddings) / std::max(1, m.num_layers);
}

ModelSpec mtp_drafter(const ModelSpec& target) {
  ModelSpec d = target;
  d.key = target.key + "-mtp";
  d.name = target.name + " MTP layer";
  d.num_layers = 1;
  d.linear_attention.reset();  // the MTP layer is a full-attention layer
  d.sliding_window = 0;
  d.num_sliding_layers = 0;
  if (d.moe) d.moe->num_moe_layers = 1;
  d.param_count = mean_layer_params(target) + 2 * target.hidden_size * target.hidden_size;
  d.weights_bytes_16bit = 2 * d.param_count;
  return d;
}

ModelSpec eagle3_drafter(const ModelSpec& target) {
  ModelSpec d;
  d.key = target.key + "-eagle3";
  d.name = target.name + " EAGLE-3 head";
  d.hidden_size = target.hidden_size;
  d.num_layers = 1;
  d.num_attention_heads = target.num_attention_heads;
  d.num_kv_heads = target.mla ? target.num_attention_heads : target.num_kv_heads;
  d.head_dim = target.head_dim > 0 ? target.head_dim : 128;
  d.intermediate_size = target.intermediate_size;
  d.vocab_size = kEagle3DraftVocab;
  d.max_position_embeddings = target.max_position_embeddings;
  const int64_t h = d.hidden_size;
  const int64_t q = int64_t{d.num_attention_heads} * d.head_dim;
  const int64_t kv = int64_t{d.num_kv_heads} * d.head_dim;
  const int64_t attention = 2 * h * (q + 2 * kv) + q * h;  // q, k, v read embedding + hidden
  const int64_t mlp = 3 * h * d.intermediate_size;
  d.param_count = attention + mlp + 3 * h * h + kEagle3DraftVocab * h;
  d.weights_bytes_16bit = 2 * d.param_count;
  return d;
}

}  // namespace

const char* speculative_method_name(SpeculativeMethod method) {
  return method == SpeculativeMethod::kMtp ? "mtp" : "eagle3";
}

double SpeculativeDecoding::mean_accepted_length() const {
  double sum = 1.0;
  for (const double a : acceptance) sum += a;
  return sum;
}

int SpeculativeDecoding::accepted_drafts(double u) const {
  int kept = 0;
  while (kept < static_cast<int>(acceptance.size()) && u < acceptance[static_cast<size_t>(kept)]) {
    ++kept;
  }
  return kept;
}

std::vector<double> default_acceptance(SpeculativeMethod method, int k) {
  const std::span<const double> table = method == SpeculativeMethod::kMtp
                                            ? std::span<const double>(kMtpAcceptance)
                                            : std::span<const double>(kEagle3Acceptance);
  if (k < 1 || static_cast<size_t>(k) > table.size()) {
    throw std::invalid_argument(fmt::format(
        "no published acceptance for {} speculative tokens of the {} drafter (known: 1 to {}); "
        "give speculative.acceptance, one value per position",
        k, speculative_method_name(method), table.size()));
  }
  return {table.begin(), table.begin() + k};
}

std::string speculative_error(const SpeculativeDecoding& spec) {
  if (spec.num_speculative_tokens < 1) {
    return fmt::format("num_speculative_tokens must be at least 1, got {}",
                       spec.num_speculative_tokens);
  }
  if (spec.acceptance.size() != static_cast<size_t>(spec.num_speculative_tokens)) {
    return fmt::format("acceptance has {} values, expected one per speculative token ({})",
                       spec.acceptance.size(), spec.num_speculative_tokens);
  }
  for (size_t i = 0; i < spec.acceptance.size(); ++i) {
    const double a = spec.acceptance[i];
    if (!(a >= 0.0 && a <= 1.0)) {
      return fmt::format("acceptance[{}] must be in [0, 1], got {}", i, a);
    }
    if (i > 0 && a > spec.acceptance[i - 1]) {
      return fmt::format(
          "acceptance[{}] = {} exceeds acceptance[{}] = {}: a draft is kept only with every draft "
          "before it, so the per-position acceptance never rises",
          i, a, i - 1, spec.acceptance[i - 1]);
    }
  }
  return "";
}

ModelSpec draft_model(const ModelSpec& target, SpeculativeMethod method) {
  return method == SpeculativeMethod::kMtp ? mtp_drafter(target) : eagle3_drafter(target);
}

std::unique_ptr<IterationCostModel> make_speculative_cost_model(
    std::shared_ptr<const IterationCostModel> target,
    std::shared_ptr<const IterationCostModel> draft, std::shared_ptr<const ModelSpec> draft_spec,
    const SpeculativeDecoding& spec) {
  if (const std::string why = speculative_error(spec); !why.empty()) {
    throw std::invalid_argument("speculative decoding: " + why);
  }
  return std::make_unique<SpeculativeCostModel>(std::move(target), std::move(draft),
                                                std::move(draft_spec), spec);
}

}  // namespace servesim::models
