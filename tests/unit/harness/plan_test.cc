#include "plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace servesim::profiling {
namespace {

// Llama-3.1-8B as in models/catalog/models/llama-3.1-8b.json.
constexpr const char* kLlama = R"({"name": "Llama-3.1-8B", "hidden_size": 4096, "num_layers": 32,
  "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
  "intermediate_size": 14336, "vocab_size": 128256, "gated_mlp": true})";

PlanOptions llama_options(bool quick) {
  PlanOptions o;
  o.model = parse_model_shape(kLlama, "llama-3.1-8b");
  o.quick = quick;
  o.num_gpus = 1;
  o.fp8 = true;
  o.gpu_memory_bytes = int64_t{80} << 30;
  return o;
}

TEST(ModelShape, ParsesCatalogFields) {
  ModelShape m = parse_model_shape(kLlama, "llama-3.1-8b");
  EXPECT_EQ(m.key, "llama-3.1-8b");
  EXPECT_EQ(m.hidden_size, 4096);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_TRUE(m.gated_mlp);
  EXPECT_FALSE(m.bidirectional);
}

TEST(ModelShape, DiffusionModelIsBidirectional) {
  ModelShape m = parse_model_shape(
      R"({"hidden_size": 4096, "num_layers": 32, "num_attention_heads": 32,
          "num_key_value_heads": 32, "head_dim": 128, "intermediate_size": 12288,
          "vocab_size": 126464, "gated_mlp": true, "diffusion_llm": {"type": "masked"}})",
      "llada-8b-instruct");
  EXPECT_TRUE(m.bidirectional);
}

TEST(ModelShape, ListsEveryMissingField) {
  try {
    parse_model_shape(R"({"hidden_size": 4096})", "broken");
    FAIL() << "expected HarnessError";
  } catch (const HarnessError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("num_attention_heads"), std::string::npos);
    EXPECT_NE(msg.find("vocab_size"), std::string::npos);
  }
}

TEST(ModelShape, LoadsRepositoryCatalogFile) {
  ModelShape m = load_model_shape("models/catalog/models/llama-3.1-8b.json");
  EXPECT_EQ(m.key, "llama-3.1-8b");
  EXPECT_EQ(m.intermediate_size, 14336);
}

TEST(Plan, TokenGrid) {
  std::vector<int64_t> full = token_grid(false);
  ASSERT_EQ(full.size(), 15u);
  EXPECT_EQ(full.front(), 1);
  EXPECT_EQ(full.back(), 16384);
  for (size_t i = 1; i < full.size(); ++i) {
    EXPECT_EQ(full[i], 2 * full[i - 1]);
  }
  std::vector<int64_t> quick = token_grid(true);
  EXPECT_LT(quick.size(), full.size());
  EXPECT_EQ(quick.back(), 16384);
}

TEST(Plan, Llama8bTp1PointCounts) {
  Plan p = build_plan(llama_options(false));
  // 5 layer shapes x 15 token counts x {bf16, fp8}.
  EXPECT_EQ(p.gemm.size(), 150u);
  // 38 (batch, q) pairs with batch*q <= 32768, times 3 prefixes, causal only.
  EXPECT_EQ(p.prefill.size(), 114u);
  // batch 1..512 x context 128..131072 whose KV cache fits in half of 80 GiB:
  // batch*context <= 2^23 tokens at 4 KiB per token (8 KV heads x 128 x K,V x bf16).
  EXPECT_EQ(p.decode.size(), 104u);
  EXPECT_TRUE(p.collective.empty());
  EXPECT_EQ(p.memcpy.size(), 30u);  // d2d, h2d, d2h x 10 sizes (4 KiB..1 GiB)
  EXPECT_EQ(p.skipped.count("collective"), 1u);
  EXPECT_EQ(p.model_key, "llama-3.1-8b");
}

TEST(Plan, Llama8bTp1GemmShapes) {
  Plan p = build_plan(llama_options(false));
  std::set<std::tuple<std::string, int64_t, int64_t>> shapes;
  for (const GemmPoint& g : p.gemm) {
    shapes.insert({g.layer, g.n, g.k});
  }
  std::set<std::tuple<std::string, int64_t, int64_t>> expected = {{"qkv", 6144, 4096},
                                                                  {"o", 4096, 4096},
                                                                  {"gate_up", 28672, 4096},
                                                                  {"down", 4096, 14336},
                                                                  {"lm_head", 128256, 4096}};
  EXPECT_EQ(shapes, expected);
}

TEST(Plan, TensorParallelShardsShapesAndHeads) {
  PlanOptions o = llama_options(true);
  o.tp = 2;
  Plan p = build_plan(o);
  auto qkv = std::find_if(p.gemm.begin(), p.gemm.end(),
                          [](const GemmPoint& g) { return g.layer == "qkv"; });
  ASSERT_NE(qkv, p.gemm.end());
  EXPECT_EQ(qkv->n, 3072);
  ASSERT_FALSE(p.prefill.empty());
  EXPECT_EQ(p.prefill.front().num_heads, 16);
  EXPECT_EQ(p.prefill.front().num_kv_heads, 4);
  o.tp = 16;  // more GPUs than KV heads: each GPU keeps one replicated KV head
  o.model->num_heads = 32;
  o.model->intermediate_size = 14336;
  Plan p16 = build_plan(o);
  EXPECT_EQ(p16.decode.front().num_kv_heads, 1);
  o.tp = 3;
  EXPECT_THROW(build_plan(o), HarnessError);
}

TEST(Plan, PrefillGridContents) {
  Plan p = build_plan(llama_options(false));
  std::set<int64_t> q, prefix, batch;
  for (const PrefillPoint& pt : p.prefill) {
    q.insert(pt.q_tokens);
    prefix.insert(pt.prefix_tokens);
    batch.insert(pt.batch);
    EXPECT_TRUE(pt.causal);
    EXPECT_LE(pt.batch * pt.q_tokens, 32768);
    EXPECT_EQ(pt.num_heads, 32);
    EXPECT_EQ(pt.num_kv_heads, 8);
  }
  EXPECT_EQ(q, (std::set<int64_t>{128, 256, 512, 1024, 2048, 4096, 8192, 16384}));
  EXPECT_EQ(prefix, (std::set<int64_t>{0, 1024, 4096}));
  EXPECT_EQ(batch, (std::set<int64_t>{1, 2, 4, 8, 16, 32}));
}

TEST(Plan, DecodeBoundedByGpuMemory) {
  PlanOptions o = llama_options(false);
  Plan big = build_plan(o);
  o.gpu_memory_bytes = int64_t{24} << 30;
  Plan small = build_plan(o);
  EXPECT_LT(small.decode.size(), big.decode.size());
  for (const DecodePoint& d : small.decode) {
    EXPECT_LE(decode_working_set_bytes(d), o.gpu_memory_bytes / 2);
  }
  EXPECT_EQ(small.skipped.count("attention_decode"), 1u);
}

TEST(Plan, GenericGridHasBothMasks) {
  PlanOptions o;
  o.quick = true;
  Plan p = build_plan(o);
  EXPECT_EQ(p.model_key, "generic");
  bool causal = false, bidir = false;
  for (const PrefillPoint& pt : p.prefill) {
    (pt.causal ? causal : bidir) = true;
  }
  EXPECT_TRUE(causal);
  EXPECT_TRUE(bidir);
  EXPECT_FALSE(p.gemm.empty());
}

TEST(Plan, QuickIsSmallerAndFaster) {
  Plan full = build_plan(llama_options(false));
  Plan quick = build_plan(llama_options(true));
  EXPECT_LT(quick.gemm.size(), full.gemm.size());
  EXPECT_LT(quick.prefill.size(), full.prefill.size());
  EXPECT_LT(quick.decode.size(), full.decode.size());
  EXPECT_LT(quick.memcpy.size(), full.memcpy.size());
  EXPECT_LT(estimate_plan_seconds(quick), estimate_plan_seconds(full));
}

TEST(Plan, DurationEstimatePositive) {
  Plan p = build_plan(llama_options(false));
  EXPECT_GT(estimate_plan_seconds(p), 0.0);
  for (const GemmPoint& g : p.gemm) {
    EXPECT_GT(estimate_point_us(g), 0.0);
  }
  PlanOptions o = llama_options(true);
  o.ops = {Op::kMemcpy};
  EXPECT_GT(estimate_plan_seconds(build_plan(o)), 0.0);
}

TEST(Plan, OpsSelectTables) {
  PlanOptions o = llama_options(true);
  o.ops = parse_ops("gemm,memcpy");
  Plan p = build_plan(o);
  EXPECT_FALSE(p.gemm.empty());
  EXPECT_TRUE(p.prefill.empty());
  EXPECT_TRUE(p.decode.empty());
  EXPECT_FALSE(p.memcpy.empty());
  EXPECT_THROW(parse_ops("gemm,flash"), HarnessError);
}

TEST(Plan, NoFp8OnOlderGpus) {
  PlanOptions o = llama_options(true);
  o.fp8 = false;
  Plan p = build_plan(o);
  for (const GemmPoint& g : p.gemm) {
    EXPECT_EQ(g.dtype, "bf16");
  }
  EXPECT_EQ(p.skipped.count("gemm"), 1u);
}

TEST(Plan, CollectivesWithSeveralGpus) {
  PlanOptions o = llama_options(false);
  o.num_gpus = 8;
  Plan p = build_plan(o);
  EXPECT_FALSE(p.collective.empty());
  EXPECT_EQ(p.collective.front().num_gpus, 8);
  EXPECT_EQ(p.skipped.count("collective"), 0u);
  EXPECT_TRUE(std::any_of(p.memcpy.begin(), p.memcpy.end(),
                          [](const MemcpyPoint& m) { return m.kind == "peer"; }));
}

TEST(Plan, FormatMentionsEveryTable) {
  std::string text = format_plan(build_plan(llama_options(false)));
  for (const char* t :
       {"gemm", "attention_prefill", "attention_decode", "collective", "memcpy", "total: "}) {
    EXPECT_NE(text.find(t), std::string::npos) << t;
  }
}

}  // namespace
}  // namespace servesim::profiling
