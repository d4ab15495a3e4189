#include "dllm/denoise.h"

#include <gtest/gtest.h>

namespace servesim::dllm {
namespace {

TEST(Denoise, Table3PhaseCountsPerAlgorithm) {
  const DenoiseParams p;  // gen 256, steps 256, block 32
  EXPECT_EQ(p.num_blocks(), 8);
  EXPECT_EQ(p.steps_per_block(), 32);
  const PhaseCounts serve = count_phases(Algorithm::kDllmServe, p, 300);
  EXPECT_EQ(serve.refresh, 16);
  EXPECT_EQ(serve.reuse, 240);
  const PhaseCounts fast = count_phases(Algorithm::kFastDllm, p, 300);
  EXPECT_EQ(fast.refresh, 8);
  EXPECT_EQ(fast.reuse, 248);
  const PhaseCounts sparse = count_phases(Algorithm::kSparseDllm, p, 300);
  EXPECT_EQ(sparse.refresh, 16);
  EXPECT_EQ(sparse.reuse, 240);
  const PhaseCounts vanilla = count_phases(Algorithm::kVanilla, p, 300);
  EXPECT_EQ(vanilla.refresh, 256);
  EXPECT_EQ(vanilla.reuse, 0);
}

TEST(Denoise, DllmCacheStepClasses) {
  const DenoiseParams p;  // Kp 100, Kr 7, rho 0.25
  int both = 0, gen = 0, prompt = 0, none = 0;
  for (int64_t s = 0; s < p.steps; ++s) {
    const StepWork w = step_work(Algorithm::kDllmCache, p, 300, 556, s);
    switch (w.kind) {
      case StepKind::kFullCache: ++both; EXPECT_EQ(w.query_tokens, 556); break;
      case StepKind::kCacheGen: ++gen; EXPECT_EQ(w.query_tokens, 256); break;
      case StepKind::kCachePrompt: ++prompt; EXPECT_EQ(w.query_tokens, 300 + 64); break;
      case StepKind::kCacheNone: ++none; EXPECT_EQ(w.query_tokens, 64); break;
      default: ADD_FAILURE();
    }
    EXPECT_EQ(w.logit_rows, 556);  // dLLM-Cache computes L rows every step
  }
  EXPECT_EQ(both, 1);
  EXPECT_EQ(gen, 36);
  EXPECT_EQ(prompt, 2);
  EXPECT_EQ(none, 217);
}

TEST(Denoise, StepShapesAndLogitRows) {
  const DenoiseParams p;
  const int64_t L = 512;
  // dLLM-Serve: block logits in every phase; Reuse attends to the packed r(L - B) + B keys.
  StepWork w = step_work(Algorithm::kDllmServe, p, 256, L, 0);
  EXPECT_EQ(w.kind, StepKind::kFull);
  EXPECT_EQ(w.query_tokens, L);
  EXPECT_EQ(w.logit_rows, 32);
  w = step_work(Algorithm::kDllmServe, p, 256, L, 1);
  EXPECT_EQ(w.kind, StepKind::kFullCache);
  w = step_work(Algorithm::kDllmServe, p, 256, L, 2);
  EXPECT_EQ(w.kind, StepKind::kReuse);
  EXPECT_EQ(w.query_tokens, 32);
  EXPECT_EQ(w.context_tokens, 240 + 32);
  // Sparse-dLLM: L rows on its Refresh steps.
  EXPECT_EQ(step_work(Algorithm::kSparseDllm, p, 256, L, 33).logit_rows, L);
  // Fast-dLLM: dense Reuse over all L keys.
  w = step_work(Algorithm::kFastDllm, p, 256, L, 5);
  EXPECT_EQ(w.context_tokens, L);
  EXPECT_EQ(w.logit_rows, 32);
  EXPECT_EQ(sparse_kept_tokens(p, 33), 1);  // max(1, floor(0.5 * 1)) = 1
}

TEST(Denoise, ParamChecksAndNames) {
  DenoiseParams p;
  EXPECT_EQ(check_denoise_params(p), "");
  p.gen_length = 250;
  EXPECT_NE(check_denoise_params(p).find("multiple of block"), std::string::npos);
  p = DenoiseParams{};
  p.steps = 100;
  EXPECT_NE(check_denoise_params(p).find("multiple of the number of blocks"), std::string::npos);
  EXPECT_EQ(parse_algorithm("fast-dllm"), Algorithm::kFastDllm);
  EXPECT_THROW(parse_algorithm("fastdllm"), std::invalid_argument);
  for (const auto& n : algorithm_names()) EXPECT_EQ(algorithm_name(parse_algorithm(n)), n);
}

}  // namespace
}  // namespace servesim::dllm
