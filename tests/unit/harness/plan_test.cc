#include "plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

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
  EXPECT_TRUE(p.forward.empty());
  EXPECT_THROW(parse_ops("gemm,flash"), HarnessError);
  EXPECT_EQ(parse_ops("forward"), std::set<Op>{Op::kForward});
  EXPECT_EQ(op_name(Op::kForward), "forward");
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

TEST(Plan, GemmDtypesSelectScalingRecipes) {
  PlanOptions o = llama_options(true);
  o.ops = parse_ops("gemm");
  const size_t per_dtype = build_plan(o).gemm.size() / 2;  // default: bf16, fp8_e4m3
  o.gemm_dtypes = parse_gemm_dtypes("bf16,fp8_rowwise,fp8_block,fp8_rowwise");
  EXPECT_EQ(o.gemm_dtypes, (std::vector<std::string>{"bf16", "fp8_rowwise", "fp8_block"}));
  Plan p = build_plan(o);
  ASSERT_EQ(p.gemm.size(), 3 * per_dtype);
  EXPECT_EQ(p.gemm.front().dtype, "bf16");
  EXPECT_EQ(p.gemm[per_dtype].dtype, "fp8_rowwise");
  EXPECT_EQ(p.gemm.back().dtype, "fp8_block");
  // Without FP8 tensor cores only bf16 is planned, and the note names what was left out.
  o.fp8 = false;
  p = build_plan(o);
  EXPECT_EQ(p.gemm.size(), per_dtype);
  EXPECT_EQ(p.skipped.at("gemm"),
            "fp8_rowwise, fp8_block not measured: the GPU has no fp8 tensor cores (needs sm_89+)");
  EXPECT_THROW(parse_gemm_dtypes("bf16,fp8_per_row"), HarnessError);
  EXPECT_THROW(parse_gemm_dtypes(","), HarnessError);
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
  for (const char* t : {"gemm", "attention_prefill", "attention_decode", "collective", "memcpy",
                        "forward", "total: "}) {
    EXPECT_NE(text.find(t), std::string::npos) << t;
  }
}

// Llama-3.1-8B tp1 on an 80 GiB GPU: 7 + 2 prefill shapes; decode batch {1..256} x context
// {512, 2048, 8192} less the 4 shapes whose KV cache (128 KiB per token over 32 layers) does not
// fit next to 14 GiB of weights in 90% of the memory, each timed eager and as a graph.
TEST(ForwardPlan, Llama8bTp1Grid) {
  Plan p = build_plan(llama_options(false));
  std::vector<std::tuple<int64_t, int64_t>> prefill;
  std::vector<std::tuple<int64_t, int64_t, bool>> decode;
  for (const ForwardPoint& f : p.forward) {
    if (f.kind == "prefill") {
      EXPECT_EQ(f.context_tokens, f.q_tokens);
      EXPECT_FALSE(f.graph);
      prefill.emplace_back(f.batch, f.q_tokens);
    } else {
      ASSERT_EQ(f.kind, "decode");
      EXPECT_EQ(f.q_tokens, 1);
      EXPECT_EQ(f.tokens(), f.batch);
      decode.emplace_back(f.batch, f.context_tokens, f.graph);
    }
  }
  EXPECT_EQ(prefill, (std::vector<std::tuple<int64_t, int64_t>>{{1, 128},
                                                                {1, 256},
                                                                {1, 512},
                                                                {1, 1024},
                                                                {1, 2048},
                                                                {1, 4096},
                                                                {1, 8192},
                                                                {4, 512},
                                                                {8, 1024}}));
  ASSERT_EQ(decode.size(), 28u);
  std::set<std::tuple<int64_t, int64_t>> shapes;
  for (size_t i = 0; i < decode.size(); i += 2) {
    // Each shape eager first, then replayed as a CUDA graph.
    EXPECT_FALSE(std::get<2>(decode[i]));
    EXPECT_TRUE(std::get<2>(decode[i + 1]));
    EXPECT_EQ(std::get<0>(decode[i]), std::get<0>(decode[i + 1]));
    EXPECT_EQ(std::get<1>(decode[i]), std::get<1>(decode[i + 1]));
    shapes.emplace(std::get<0>(decode[i]), std::get<1>(decode[i]));
  }
  for (int64_t b : {1, 8, 32, 64, 128, 256}) {
    for (int64_t ctx : {512, 2048, 8192}) {
      bool too_big = b * ctx > 262144;  // more than 32 GiB of KV cache
      EXPECT_EQ(shapes.count({b, ctx}), too_big ? 0u : 1u) << b << " x " << ctx;
    }
  }
  ASSERT_EQ(p.skipped.count("forward"), 1u);
  EXPECT_EQ(p.skipped.at("forward"),
            "4 decode shapes whose weights, KV cache and activations exceed 90% of the GPU memory "
            "not planned");
  for (const ForwardPoint& f : p.forward) {
    EXPECT_LE(forward_working_set_bytes(p.forward_model, f),
              static_cast<int64_t>(kForwardMemoryFraction * (int64_t{80} << 30)));
  }
}

TEST(ForwardPlan, Llama8bShapesAndBytes) {
  ForwardModel m = forward_model(parse_model_shape(kLlama, "llama-3.1-8b"), 1);
  EXPECT_EQ(m.num_layers, 32);
  EXPECT_EQ(m.hidden, 4096);
  EXPECT_EQ(m.num_heads, 32);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.qkv_n, 6144);
  EXPECT_EQ(m.mlp_n, 28672);
  EXPECT_EQ(m.mlp_inner, 14336);
  EXPECT_EQ(m.vocab, 128256);
  EXPECT_TRUE(m.causal);
  // The catalog's weights_bytes_16bit (16060522496) less the input embedding (525336576 x 2),
  // which the pass does not read.
  EXPECT_EQ(forward_weight_bytes(m), 15009849344);
  ForwardPoint d{"decode", 1, 1, 8192, false};
  EXPECT_EQ(forward_kv_bytes(m, d), int64_t{8192} * 131072);  // kv_cache_bytes_per_token_16bit
  ForwardPoint pf{"prefill", 8, 1024, 1024, false};
  EXPECT_EQ(pf.tokens(), 8192);
  EXPECT_EQ(forward_kv_bytes(m, pf), int64_t{8192} * 131072);
  EXPECT_GT(forward_activation_bytes(m, pf), forward_activation_bytes(m, d));
  EXPECT_EQ(forward_working_set_bytes(m, pf),
            forward_weight_bytes(m) + forward_kv_bytes(m, pf) + forward_activation_bytes(m, pf));

  ForwardModel tp2 = forward_model(parse_model_shape(kLlama, "llama-3.1-8b"), 2);
  EXPECT_EQ(tp2.num_heads, 16);
  EXPECT_EQ(tp2.num_kv_heads, 4);
  EXPECT_EQ(tp2.qkv_n, 3072);
  EXPECT_EQ(tp2.mlp_inner, 7168);
  EXPECT_EQ(tp2.vocab, 64128);
  // GEMM weights halve; the 65 norm vectors (2 per layer and the final one) are replicated.
  EXPECT_EQ(forward_weight_bytes(tp2), forward_weight_bytes(m) / 2 + 65 * 4096);
}

TEST(ForwardPlan, EstimateGrowsWithWork) {
  Plan p = build_plan(llama_options(false));
  const ForwardModel& m = p.forward_model;
  double prefill_128 = estimate_point_us(m, ForwardPoint{"prefill", 1, 128, 128, false});
  double prefill_8192 = estimate_point_us(m, ForwardPoint{"prefill", 1, 8192, 8192, false});
  double decode_1 = estimate_point_us(m, ForwardPoint{"decode", 1, 1, 2048, false});
  double decode_256 = estimate_point_us(m, ForwardPoint{"decode", 256, 1, 2048, false});
  EXPECT_GT(prefill_8192, 20 * prefill_128);
  EXPECT_GT(decode_256, decode_1);
  // Batch-1 decode streams ~15 GB of weights: a few milliseconds on an H100.
  EXPECT_GT(decode_1, 4000.0);
  EXPECT_LT(decode_1, 8000.0);
  PlanOptions o = llama_options(false);
  o.ops = {Op::kForward};
  EXPECT_GT(estimate_plan_seconds(build_plan(o)), 3.0);
}

TEST(ForwardPlan, QuickGridIsSmaller) {
  Plan full = build_plan(llama_options(false));
  Plan quick = build_plan(llama_options(true));
  EXPECT_LT(quick.forward.size(), full.forward.size());
  EXPECT_FALSE(quick.forward.empty());
}

TEST(ForwardPlan, BoundedByGpuMemory) {
  PlanOptions o = llama_options(false);
  o.gpu_memory_bytes = int64_t{24} << 30;
  Plan small = build_plan(o);
  Plan big = build_plan(llama_options(false));
  EXPECT_LT(small.forward.size(), big.forward.size());
  EXPECT_FALSE(small.forward.empty());
  for (const ForwardPoint& f : small.forward) {
    EXPECT_LE(forward_working_set_bytes(small.forward_model, f),
              static_cast<int64_t>(kForwardMemoryFraction * o.gpu_memory_bytes));
  }
  o.gpu_memory_bytes = int64_t{14} << 30;  // 14 GiB of weights do not fit in 90% of 14 GiB
  Plan none = build_plan(o);
  EXPECT_TRUE(none.forward.empty());
  ASSERT_EQ(none.skipped.count("forward"), 1u);
  EXPECT_NE(none.skipped.at("forward").find("do not fit"), std::string::npos);
}

TEST(ForwardPlan, GenericGridAndDiffusionModels) {
  PlanOptions generic;
  generic.quick = true;
  Plan g = build_plan(generic);
  EXPECT_TRUE(g.forward.empty());
  EXPECT_EQ(g.skipped.count("forward"), 1u);

  PlanOptions o = llama_options(false);
  o.model = parse_model_shape(
      R"({"hidden_size": 4096, "num_layers": 32, "num_attention_heads": 32,
          "num_key_value_heads": 32, "head_dim": 128, "intermediate_size": 12288,
          "vocab_size": 126464, "gated_mlp": true, "diffusion_llm": {"type": "masked"}})",
      "llada-8b-instruct");
  Plan d = build_plan(o);
  EXPECT_FALSE(d.forward_model.causal);
  EXPECT_EQ(d.forward.size(), 9u);
  for (const ForwardPoint& f : d.forward) {
    EXPECT_EQ(f.kind, "prefill");
  }
  ASSERT_EQ(d.skipped.count("forward"), 1u);
  EXPECT_NE(d.skipped.at("forward").find("diffusion"), std::string::npos);
}

}  // namespace
}  // namespace servesim::profiling
