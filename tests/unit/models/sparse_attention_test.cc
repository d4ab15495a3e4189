// DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): the imported parameters, the KV bytes with the
// indexer's key cache, and the attention FLOPs and bytes per token at 8k, 32k and 128k context
// against hand-computed values and against dense MLA (DeepSeek-V3).
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/catalog/hardware.h"
#include "models/cost/cost_model.h"
#include "models/cost/memory_model.h"
#include "models/cost/roofline_terms.h"
#include "tests/unit/models/catalog_fixture.h"
#include "tests/unit/models/unit_rates.h"

namespace servesim::models {
namespace {

class SparseAttention : public CatalogFixture {
 protected:
  // Rates of a whole model on one GPU (TP 1: per-token counts of the model).
  static detail::Rates unit_rates(const ModelSpec& m) {
    static const GpuSpec g = unit_gpu();
    const Deployment d{&m, &g, 1, Dtype::kBf16, Dtype::kBf16};
    return detail::make_rates(detail::rank_shapes(d), unit_throughputs());
  }
};

// Indexer per layer: wq_b 1536 x (64 x 128), wk + weights_proj 7168 x (128 + 64), and the
// LayerNorm's 2 x 128.
constexpr int64_t kV32IndexerParams = 1536 * 64 * 128 + 7168 * (128 + 64) + 2 * 128;

TEST_F(SparseAttention, ImportCountsTheIndexerOnTopOfDeepSeekV3) {
  const ModelSpec& v3 = models_->get("deepseek-v3");
  const ModelSpec& v32 = models_->get("deepseek-v3.2");
  ASSERT_TRUE(v32.dsa.has_value());
  EXPECT_EQ(v32.dsa->index_heads, 64);
  EXPECT_EQ(v32.dsa->index_head_dim, 128);
  EXPECT_EQ(v32.dsa->index_topk, 2048);
  EXPECT_EQ(v32.param_count, v3.param_count + 61 * kV32IndexerParams);
  // GLM-5's model card: 744 B parameters, 40 B active (rounded); active counts leave out the
  // input embedding, as ParameterTotalsMatchPublishedCounts does.
  const nlohmann::json glm = catalog_doc("glm-5");
  const double active = glm["param_count_active_per_token"].get<double>() -
                        glm["param_count_breakdown"]["embedding"].get<double>();
  EXPECT_NEAR(glm["param_count"].get<double>() / 744e9, 1.0, 0.01);
  EXPECT_NEAR(active / 40e9, 1.0, 0.03);
  EXPECT_EQ(models_->get("glm-5").dsa->index_heads, 32);
}

TEST_F(SparseAttention, KvBytesAddTheIndexerKeyAndUseTheSparseFp8Layout) {
  const ModelSpec& m = models_->get("deepseek-v3.2");
  EXPECT_EQ(m.dsa->index_key_bytes_per_token(), 128 + 4);  // FP8 key + one fp32 scale
  // 16 bit: the latent and rotary key (512 + 64) x 2; FP8: 512 FP8 + 4 fp32 scales + 64 x 2.
  EXPECT_EQ(m.kv_bytes_per_token(Dtype::kBf16), 61 * (1152 + 132));
  EXPECT_EQ(m.kv_bytes_per_token(Dtype::kFp8), 61 * (656 + 132));
  EXPECT_EQ(catalog_doc("deepseek-v3.2")["kv_cache_bytes_per_token_16bit"].get<int64_t>(),
            61 * (1152 + 132));
  // No heads to shard: every TP rank keeps the whole of it, and it is never windowed.
  Deployment d{&m, &gpus_->get("h200_sxm"), 8, Dtype::kFp8Block, Dtype::kFp8};
  const MemoryPlan plan = plan_memory(d, {});
  EXPECT_EQ(plan.kv_bytes_per_token_per_gpu, 61 * (656 + 132));
  EXPECT_EQ(plan.window_kv_reserve_bytes, 0);
  EXPECT_EQ(m.kv_bytes_for_context(100000, Dtype::kFp8), int64_t{100000} * 61 * (656 + 132));
}

// Per layer at TP 1, for a query at position L (DeepSeek-V3.2: 128 heads, latent 512, rope 64,
// indexer 64 x 128, top 2048):
//   indexer    2 x 64 x 128 + 2 x 64 = 16,512 FP8 FLOPs per scored key, every one of the L keys
//   attention  2 x 128 x (2 x 512 + 64) = 278,528 FLOPs per attended key, min(L, 2048) of them
//   dense MLA (DeepSeek-V3): decode 278,528 per key over all L; prefill in the decompressed form
//              2 x 128 x 192 + 2 x 128 x 128 = 81,920 per key over all L.
TEST_F(SparseAttention, FlopsPerTokenAt8k32k128kHandComputed) {
  const detail::Rates dsa = unit_rates(models_->get("deepseek-v3.2"));
  const detail::Rates mla = unit_rates(models_->get("deepseek-v3"));
  EXPECT_DOUBLE_EQ(dsa.indexer.flop_s, 61 * 16512.0);
  EXPECT_DOUBLE_EQ(dsa.window_decode.flop_s, 61 * 278528.0);
  EXPECT_DOUBLE_EQ(dsa.window_prefill.flop_s, 61 * 278528.0);
  EXPECT_DOUBLE_EQ(dsa.attn_decode.flop_s, 0);  // every layer is sparse
  EXPECT_DOUBLE_EQ(mla.attn_prefill.flop_s, 61 * 81920.0);
  for (const int64_t context : {8192, 32768, 131072}) {
    SCOPED_TRACE(context);
    const double l = static_cast<double>(context);
    const double attended = static_cast<double>(std::min<int64_t>(context, 2048));
    const double sparse = 16512 * l + 278528 * attended;
    // Decode: one query at context L (3.2x fewer FLOPs than the dense model at 8k, 8.2x at 32k,
    // 13.4x at 128k: decode_ratio below).
    BatchShape decode;
    decode.segments = {{1, context, 1}};
    const detail::BatchSums d = detail::sum_segments(decode, 2048);
    EXPECT_DOUBLE_EQ(dsa.indexer.flop_s * d.decode_key_positions +
                         dsa.window_decode.flop_s * d.window_decode_key_positions,
                     61 * sparse);
    EXPECT_DOUBLE_EQ(mla.attn_decode.flop_s * d.decode_key_positions, 61 * 278528 * l);
    // Bytes read by the decode: the index keys of all L tokens (+ their logits), the latents of
    // the 2048 selected ones; the dense model reads every latent.
    const double sparse_bytes = (l + 1) * (132 + 8) + (attended + 1) * 1152;
    EXPECT_DOUBLE_EQ(
        dsa.indexer.kv_s * d.decode_kv_tokens + dsa.window_decode.kv_s * d.window_decode_kv_tokens,
        61 * sparse_bytes);
    EXPECT_DOUBLE_EQ(mla.attn_decode.kv_s * d.decode_kv_tokens, 61 * (l + 1) * 1152);
  }
  // The ratios the DeepSeek-V3.2 report's cost curves show: decode cheaper at every length and
  // increasingly so, prefill about even at 8k (its short-prefill regime) and cheaper at 128k.
  const auto decode_ratio = [](double l) {
    return 278528 * l / (16512 * l + 278528 * std::min(l, 2048.0));
  };
  const auto prefill_ratio = [](double l) {
    return 81920 * l / (16512 * l + 278528 * std::min(l, 2048.0));
  };
  EXPECT_NEAR(decode_ratio(8192), 3.2, 0.05);
  EXPECT_NEAR(decode_ratio(131072), 13.35, 0.05);
  EXPECT_NEAR(prefill_ratio(8192), 0.95, 0.01);
  EXPECT_NEAR(prefill_ratio(131072), 3.93, 0.01);
}

TEST_F(SparseAttention, BelowTopKTheSparseModelPaysTheIndexerOnTop) {
  // At 1,000 keys every key is selected: the attention is dense MLA's decode plus the indexer.
  const detail::Rates dsa = unit_rates(models_->get("deepseek-v3.2"));
  BatchShape shape;
  shape.segments = {{1, 1000, 1}, {1, 500, 1}};
  const detail::BatchSums s = detail::sum_segments(shape, 2048);
  const double attention = detail::attention_time(dsa.window_decode, 1500, 1502, 2, 2);
  const double indexer = detail::attention_time(dsa.indexer, 1500, 1502, 2, 0);
  EXPECT_DOUBLE_EQ(detail::decode_attention_time(dsa, s), attention + indexer);
  // The indexer's projections sit in the QKV GEMM, replicated on every TP rank.
  const ModelSpec& m = models_->get("deepseek-v3.2");
  const GpuSpec& h200 = gpus_->get("h200_sxm");
  const detail::RankShapes tp1 =
      detail::rank_shapes(Deployment{&m, &h200, 1, Dtype::kFp8Block, Dtype::kFp8});
  const detail::RankShapes tp8 =
      detail::rank_shapes(Deployment{&m, &h200, 8, Dtype::kFp8Block, Dtype::kFp8});
  const double indexer_n = (1536.0 * 64 * 128 + 7168.0 * (128 + 64)) / 7168;
  const double mla_n = (7168.0 * 1536 + 7168.0 * 576) / 7168;  // replicated q_a and kv_a
  const double q_b_n = 1536.0 * 128 * 192 / 7168;              // sharded over the ranks
  EXPECT_NEAR(tp1.qkv_n, indexer_n + mla_n + q_b_n, 1e-9);
  EXPECT_NEAR(tp8.qkv_n, indexer_n + mla_n + q_b_n / 8, 1e-9);
}

}  // namespace
}  // namespace servesim::models
