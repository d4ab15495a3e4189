// Hybrid linear attention (Gated DeltaNet: Qwen3-Next, Qwen3.5): imported parameters, the
// recurrent state per sequence, KV capacity on a GPU, and the recurrence's FLOPs and bytes,
// against hand-computed values.
#include <cstdint>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/catalog/hardware.h"
#include "models/catalog/hf_import.h"
#include "models/cost/cost_model.h"
#include "models/cost/memory_model.h"
#include "models/cost/roofline_terms.h"
#include "core/error.h"
#include "tests/unit/models/catalog_fixture.h"
#include "tests/unit/models/unit_rates.h"

namespace servesim::models {
namespace {

using Json = nlohmann::ordered_json;

// Qwen3.5-397B-A17B per layer: full attention q (with its gate) 4096 x 16384, k and v 4096 x 512
// each, o 8192 x 4096, q/k norms 2 x 256; Gated DeltaNet in_proj_qkvz 4096 x (2 x 2048 + 2 x
// 8192), in_proj_ba 4096 x 128, conv1d 12288 x 4, dt_bias and A_log 64 each, gated norm 128,
// out_proj 8192 x 4096.
constexpr int64_t kFullAttention = 4096LL * 16384 + 2 * 4096LL * 512 + 8192LL * 4096 + 2 * 256;
constexpr int64_t kLinearAttention =
    4096LL * 20480 + 4096LL * 128 + 12288LL * 4 + 2 * 64 + 128 + 8192LL * 4096;
// State per sequence and linear layer: 64 value heads x 128 x 128 in fp32 (mamba_ssm_dtype) and
// the convolution's last 3 inputs of 12288 channels in 16 bits.
constexpr int64_t kStatePerLayer = 64LL * 128 * 128 * 4 + 12288LL * 3 * 2;

using LinearAttention = CatalogFixture;

TEST_F(LinearAttention, Qwen35ImportHandComputed) {
  const nlohmann::json doc = catalog_doc("qwen3.5-397b-a17b");
  EXPECT_EQ(doc["param_count_breakdown"]["linear_minus_full_attention_per_layer"],
            kLinearAttention - kFullAttention);
  // The model card: 397 B parameters (its vision tower included, which is not counted here),
  // 17 B activated.
  EXPECT_NEAR(doc["param_count"].get<double>() / 397e9, 1.0, 0.01);
  EXPECT_NEAR(doc["param_count_active_per_token"].get<double>() / 17e9, 1.0, 0.03);
  const ModelSpec& m = models_->get("qwen3.5-397b-a17b");
  ASSERT_TRUE(m.linear_attention.has_value());
  EXPECT_EQ(m.num_linear_layers(), 45);  // 3 of every 4 of 60
  EXPECT_EQ(m.num_full_attention_layers(), 15);
  EXPECT_TRUE(m.attention_output_gate);
  EXPECT_EQ(m.linear_attention->state_bytes_per_layer(), kStatePerLayer);
  EXPECT_EQ(m.recurrent_state_bytes(), 45 * kStatePerLayer);  // 183.2 MiB
  // KV only on the 15 full-attention layers: 2 KV heads of 256, K and V, 16 bit.
  EXPECT_EQ(m.kv_bytes_per_token(Dtype::kBf16), 15 * 2 * 2 * 256 * 2);
  EXPECT_EQ(m.kv_bytes_for_context(1000, Dtype::kFp8), 1000 * 15 * 2 * 2 * 256);
}

// Its vision tower (Qwen3-VL's, 27 blocks of 1152): the patch embedding 3 x 2 x 16 x 16 x 1152 +
// 1152 and 2304 x 1152 position embeddings; per block 2 LayerNorms, qkv and proj with biases and
// the 1152 -> 4304 -> 1152 MLP with biases; the merger's LayerNorm and 4608 -> 4608 -> 4096 MLP.
TEST_F(LinearAttention, Qwen35VisionTowerIsLoadedButNotActive) {
  const int64_t h = 1152, inner = 4304, merged = 4 * 1152;
  const int64_t block = 4 * h + 3 * h * h + 3 * h + h * h + h + 2 * h * inner + inner + h;
  const int64_t tower = 3 * 2 * 16 * 16 * h + h + 2304 * h + 27 * block + 2 * h + merged * merged +
                        merged + merged * 4096 + 4096;
  EXPECT_EQ(tower, 456010480);
  const nlohmann::json doc = catalog_doc("qwen3.5-397b-a17b");
  EXPECT_EQ(doc["param_count_breakdown"]["vision_tower"], tower);
  const nlohmann::json b = doc["param_count_breakdown"];
  const int64_t text = b["embedding"].get<int64_t>() + b["lm_head_untied"].get<int64_t>() +
                       60 * b["per_layer"].get<int64_t>() +
                       45 * b["linear_minus_full_attention_per_layer"].get<int64_t>() + 4096;
  EXPECT_EQ(doc["param_count"].get<int64_t>(), text + tower);
  EXPECT_LT(doc["param_count_active_per_token"].get<int64_t>(), text);  // top-10 of 512 experts
  // Its weights are loaded with the language model's.
  const ModelSpec& m = models_->get("qwen3.5-397b-a17b");
  EXPECT_EQ(m.param_count, text + tower);
}

TEST_F(LinearAttention, StateIsReservedPerSequenceAndShrinksTheKvPool) {
  const ModelSpec& m = models_->get("qwen3.5-397b-a17b");
  MemoryParams p;
  p.max_num_seqs = 64;
  const Deployment d{&m, &gpus_->get("h200_sxm"), 8, Dtype::kFp8, Dtype::kBf16};
  const MemoryPlan plan = plan_memory(d, p);
  // Per GPU: an eighth of each layer's state (rounded up), 45 layers, 64 sequences.
  EXPECT_EQ(plan.recurrent_state_reserve_bytes, 45 * ((kStatePerLayer + 7) / 8) * 64);
  // 2 KV heads on 8 ranks: one replicated head per rank, on the 15 full-attention layers.
  EXPECT_EQ(plan.kv_bytes_per_token_per_gpu, 15 * 2 * 256 * 2);
  EXPECT_EQ(plan.kv_pool_bytes_per_gpu,
            plan.usable_bytes - plan.weight_bytes_per_gpu - plan.runtime_overhead_bytes -
                plan.activation_reserve_bytes - plan.recurrent_state_reserve_bytes);
  EXPECT_EQ(plan.num_blocks,
            plan.kv_pool_bytes_per_gpu / (plan.block_size * plan.kv_bytes_per_token_per_gpu));
  // Too many sequence slots for the GPU: the error names the state they would take.
  MemoryParams crowded;
  crowded.max_num_seqs = 4096;
  try {
    plan_memory(Deployment{&m, &gpus_->get("h200_sxm"), 4, Dtype::kFp8, Dtype::kBf16}, crowded);
    FAIL() << "4096 sequences of 183 MiB of state fit on 4 H200s";
  } catch (const CapacityError& e) {
    EXPECT_NE(std::string(e.what()).find("GiB recurrent state for 4096 sequences (max_num_seqs)"),
              std::string::npos)
        << e.what();
  }
  // Twice the sequence slots: the KV pool gives up exactly that many more states.
  p.max_num_seqs = 128;
  const MemoryPlan more = plan_memory(d, p);
  EXPECT_EQ(plan.kv_pool_bytes_per_gpu - more.kv_pool_bytes_per_gpu,
            plan.recurrent_state_reserve_bytes + more.activation_reserve_bytes -
                plan.activation_reserve_bytes);
}

TEST_F(LinearAttention, RecurrenceFlopsAndStateBytesHandComputed) {
  const ModelSpec& m = models_->get("qwen3.5-397b-a17b");
  const GpuSpec g = unit_gpu();
  const detail::Throughputs x = unit_throughputs();
  const detail::RankShapes s =
      detail::rank_shapes(Deployment{&m, &g, 1, Dtype::kBf16, Dtype::kBf16});
  const detail::Rates r = detail::make_rates(s, x);
  // Per linear layer and token, 64 value heads of 128 x 128: decode 7 x 128 x 128 per head;
  // prefill 6 x 128 x 128 + 2 x 64 x (2 x 128 + 128) per head; the convolution 2 x 4 x 12288.
  const double conv = 2 * 4 * 12288.0;
  EXPECT_DOUBLE_EQ(r.linear_decode_flop_s, 45 * (64 * 7 * 128.0 * 128 + conv));
  EXPECT_DOUBLE_EQ(r.linear_prefill_flop_s,
                   45 * (64 * (6 * 128.0 * 128 + 2 * 64 * (2 * 128 + 128)) + conv));
  EXPECT_DOUBLE_EQ(r.linear_state_s, 45 * 2.0 * kStatePerLayer);  // read and written
  // The q/k/v/o projections run on the 15 full-attention layers, q widened by the gate.
  EXPECT_DOUBLE_EQ(s.qkv_n, (2 * 32 + 2 * 2) * 256.0);
  EXPECT_DOUBLE_EQ(r.qkv.flop_s, 15 * 2 * s.qkv_n * 4096);
  EXPECT_DOUBLE_EQ(r.linear_in.flop_s, 45 * 2 * 20608.0 * 4096);

  // A decode step's linear layers cost the same at any context: only the full-attention layers'
  // part grows with it.
  detail::BatchSums near, far;
  near.has_decode = far.has_decode = true;
  near.decode_query_tokens = far.decode_query_tokens = 4;
  near.decode_key_positions = 4 * 1000;
  near.decode_kv_tokens = 4 * 1001;
  far.decode_key_positions = 4 * 100000;
  far.decode_kv_tokens = 4 * 100001;
  const double linear = detail::linear_attention_time(r, 4, 4, false);
  EXPECT_DOUBLE_EQ(linear, 4 * 45 * 2.0 * kStatePerLayer + 4 * r.linear_act_s);
  EXPECT_DOUBLE_EQ(detail::decode_attention_time(r, near) - linear,
                   detail::attention_time(r.attn_decode, 4000, 4004, 4, 4));
  EXPECT_DOUBLE_EQ(detail::decode_attention_time(r, far) - linear,
                   detail::attention_time(r.attn_decode, 400000, 400004, 4, 4));
  EXPECT_DOUBLE_EQ(r.attn_decode.kv_s, 15 * 2 * 2 * 256 * 2.0);
}

// A tiny Qwen3-Next config: 4 layers, every 2nd full attention (full_attention_interval 2).
Json tiny_qwen3_next() {
  return Json::parse(R"({
      "model_type": "qwen3_next", "hidden_size": 64, "num_hidden_layers": 4,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
      "intermediate_size": 96, "moe_intermediate_size": 8, "shared_expert_intermediate_size": 8,
      "num_experts": 4, "num_experts_per_tok": 2, "decoder_sparse_step": 1, "mlp_only_layers": [],
      "full_attention_interval": 2, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 8,
      "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_value_head_dim": 8,
      "vocab_size": 100, "max_position_embeddings": 4096, "tie_word_embeddings": false})");
}

HfImportOptions options(const std::string& file) {
  HfImportOptions o;
  o.config_file = file;
  o.key = "tiny";
  return o;
}

TEST(LinearAttentionImport, TinyQwen3NextHandComputed) {
  const Json doc = import_hf_config(tiny_qwen3_next(), options("next.json"));
  // Full attention: gated q 64 x 128, k and v 64 x 32, o 64 x 64, q/k norms 2 x 16.
  const int64_t full = 64 * 128 + 2 * 64 * 32 + 64 * 64 + 2 * 16;
  // Gated DeltaNet: qkvz 64 x (2 x 16 + 2 x 32), ba 64 x 8, conv (2 x 16 + 32) x 4, dt_bias and
  // A_log 4 each, norm 8, out 32 x 64.
  const int64_t linear = 64 * 96 + 64 * 8 + 64 * 4 + 8 + 8 + 32 * 64;
  // MoE layer: router 4 x 64, 4 experts + the shared one of 3 x 64 x 8, its gate 64, 2 norms.
  const int64_t moe = 4 * 64 + 4 * 3 * 64 * 8 + 3 * 64 * 8 + 64 + 2 * 64;
  const int64_t moe_active = 4 * 64 + 2 * 3 * 64 * 8 + 3 * 64 * 8 + 64 + 2 * 64;
  EXPECT_EQ(doc["param_count"], 2 * 100 * 64 + 2 * (full + moe) + 2 * (linear + moe) + 64);
  EXPECT_EQ(doc["param_count_active_per_token"],
            2 * 100 * 64 + 2 * (full + moe_active) + 2 * (linear + moe_active) + 64);
  EXPECT_EQ(doc["kv_cache_bytes_per_token_16bit"], 2 * 2 * 2 * 16 * 2);  // 2 full layers
  EXPECT_EQ(doc["linear_attention"]["num_linear_layers"], 2);
  EXPECT_EQ(doc["linear_attention"]["state_bytes"], 2);  // no mamba_ssm_dtype: 16 bit
  EXPECT_EQ(doc["attention_output_gate"], true);

  // layer_types gives the same split; anything else there is refused with its index.
  Json typed = tiny_qwen3_next();
  typed.erase("full_attention_interval");
  typed["layer_types"] = {"linear_attention", "full_attention", "linear_attention",
                          "full_attention"};
  EXPECT_EQ(import_hf_config(typed, options("t.json"))["param_count"], doc["param_count"]);
  typed["layer_types"][2] = "sliding_attention";
  try {
    import_hf_config(typed, options("t.json"));
    FAIL() << "a sliding layer in a Gated DeltaNet model was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("t.json: layer_types[2]: expected \"linear_attention\" "
                                         "or \"full_attention\""),
              std::string::npos)
        << e.what();
  }
  Json missing = tiny_qwen3_next();
  missing.erase("linear_num_value_heads");
  EXPECT_THROW(import_hf_config(missing, options("m.json")), InputError);
}

}  // namespace
}  // namespace servesim::models
