// Multimodal models' vision encoders: the towers read from vision_config (parameters hand-counted),
// images cut into patches and tokens as the image processors resize them, the tower as a model the
// cost models price (FLOPs hand-computed), and the encoder pass added to the target's.
#include "models/cost/vision.h"

#include <gtest/gtest.h>

#include <memory>

#include "tests/unit/models/catalog_fixture.h"

namespace servesim::models {
namespace {

class Vision : public CatalogFixture {};

TEST_F(Vision, KimiK25MoonVitHandCounted) {
  const ModelSpec& kimi = models_->get("kimi-k2.5");
  ASSERT_TRUE(kimi.vision.has_value());
  const VisionEncoderSpec& v = *kimi.vision;
  EXPECT_EQ(v.num_layers, 27);
  EXPECT_EQ(v.hidden_size, 1152);
  EXPECT_EQ(v.intermediate_size, 4304);
  EXPECT_EQ(v.num_heads, 16);
  EXPECT_EQ(v.patch_size, 14);
  EXPECT_EQ(v.spatial_merge, 2);
  // Patch embedding 3 x 14 x 14 x 1152 + 1152 and the 64 x 64 x 1152 position grid; per block
  // norms 4 x 1152, wqkv 3456 x 1152 + 3456, wo 1152^2 + 1152, fc0 4304 x 1152 + 4304, fc1
  // 1152 x 4304 + 1152 (15,239,504); the final norm 2 x 1152; the merger's norm 2 x 1152,
  // 4608^2 + 4608 and 7168 x 4608 + 7168.
  const int64_t embed = 677'376 + 1'152 + 4'718'592;
  const int64_t block =
      4'608 + 3'981'312 + 3'456 + 1'327'104 + 1'152 + 4'958'208 + 4'304 + 4'958'208 + 1'152;
  EXPECT_EQ(block, 15'239'504);
  const int64_t merger = 2'304 + 21'233'664 + 4'608 + 33'030'144 + 7'168;
  EXPECT_EQ(v.param_count, embed + 27 * block + 2'304 + merger);
  EXPECT_EQ(v.param_count, 471'143'920);
  // In the weights, not in what a text token activates.
  EXPECT_EQ(catalog_doc("kimi-k2.5")["param_count_breakdown"]["vision_tower"], v.param_count);
}

TEST_F(Vision, Qwen35EncoderIsQwen3VlsTower) {
  const ModelSpec& qwen = models_->get("qwen3.5-397b-a17b");
  ASSERT_TRUE(qwen.vision.has_value());
  EXPECT_EQ(qwen.vision->num_layers, 27);
  EXPECT_EQ(qwen.vision->patch_size, 16);
  EXPECT_EQ(qwen.vision->param_count,
            catalog_doc("qwen3.5-397b-a17b")["param_count_breakdown"]["vision_tower"]);
  EXPECT_FALSE(models_->get("qwen3-32b").vision.has_value());
}

TEST_F(Vision, ImagesBecomePatchesAndTokensAsTheProcessorsResizeThem) {
  const VisionEncoderSpec& qwen = *models_->get("qwen3.5-27b").vision;  // 32-pixel tokens
  EXPECT_EQ(qwen.image_patches(1024, 1024), 4096);
  EXPECT_EQ(qwen.image_tokens(1024, 1024), 1024);
  // 1280 / 32 = 40 and 720 / 32 = 22.5, rounded to 23: 920 tokens of 4 patches.
  EXPECT_EQ(qwen.image_tokens(1280, 720), 920);
  EXPECT_EQ(qwen.image_patches(1280, 720), 3680);
  EXPECT_EQ(qwen.image_tokens(10, 10), 1);                            // at least one token a side
  const VisionEncoderSpec& kimi = *models_->get("kimi-k2.5").vision;  // 28-pixel tokens
  // 1024 / 28 = 36.6, rounded to 37.
  EXPECT_EQ(kimi.image_tokens(1024, 1024), 37 * 37);
  EXPECT_EQ(kimi.image_patches(1024, 1024), 4 * 37 * 37);
}

TEST_F(Vision, TheTowerAsAModel) {
  const ModelSpec& qwen = models_->get("qwen3.5-27b");
  const ModelSpec e = vision_encoder_model(qwen);
  EXPECT_EQ(e.num_layers, 27);
  EXPECT_EQ(e.head_dim, 72);
  EXPECT_EQ(e.num_kv_heads, 16);
  EXPECT_FALSE(e.gated_mlp);
  EXPECT_EQ(e.vocab_size, 0);
  EXPECT_FALSE(e.moe.has_value());
  EXPECT_EQ(e.param_count, qwen.vision->param_count);
  EXPECT_EQ(vision_encoder_tp(qwen, 8), 8);
  EXPECT_EQ(vision_encoder_tp(qwen, 32), 16);  // no more ranks than heads
  EXPECT_EQ(vision_encoder_tp(qwen, 6), 2);
  EXPECT_THROW(vision_encoder_model(models_->get("llama-3.1-8b")), std::invalid_argument);
}

// An encoder pass of one 4096-patch image on the roofline at full efficiency: its GEMMs' and
// attention's peak bound is their FLOPs over the bf16 peak. Per layer, the GEMMs
// 2 x P x (4 h^2 + 2 h x inter) (qkv, out, an ungated MLP) and the attention of every patch over
// every other 4 x P^2 x h.
TEST_F(Vision, AnEncoderPassCostsTheTowersFlops) {
  const ModelSpec& qwen = models_->get("qwen3.5-27b");
  auto encoder = std::make_shared<const ModelSpec>(vision_encoder_model(qwen));
  const GpuSpec& gpu = gpus_->get("h100_sxm");
  RooflineParams exact;
  exact.compute_efficiency = 1.0;
  std::shared_ptr<const IterationCostModel> enc =
      make_roofline_cost_model({encoder.get(), &gpu, 1}, exact);
  std::shared_ptr<const IterationCostModel> text =
      make_roofline_cost_model({&qwen, &gpu, 1}, exact);
  const auto mm = make_vision_cost_model(text, enc, encoder);

  BatchShape prompt;
  prompt.segments.push_back({1024, 1024, 1});
  BatchShape with_image = prompt;
  with_image.encoder_inputs.push_back({1, 4096});
  const double p = 4096, h = 1152, inter = 4304, layers = 27;
  const double flops = layers * (2 * p * (4 * h * h + 2 * h * inter) + 4 * p * p * h);
  const auto compute_s = [](const OperatorTimes& t) {
    return to_seconds(t.qkv_gemm + t.o_gemm + t.mlp_gemm + t.attention_prefill);
  };
  const double added_s = compute_s(mm->peak_bound_breakdown(with_image)) -
                         compute_s(text->peak_bound_breakdown(prompt));
  EXPECT_NEAR(added_s, flops / gpu.bf16_flops_per_s, 0.005 * flops / gpu.bf16_flops_per_s);
  EXPECT_EQ(mm->peak_bound_time(with_image),
            text->peak_bound_time(prompt) + enc->peak_bound_time({{{4096, 6144, 0}}, {}}));
  // Without images the pass is the target's alone, through every path.
  EXPECT_EQ(mm->iteration_time(prompt), text->iteration_time(prompt));
  const DecodePass decode{8, 8 * 2000, 8};
  EXPECT_EQ(mm->decode_iteration_time(decode), text->decode_iteration_time(decode));
  EXPECT_GT(mm->iteration_time(with_image), text->iteration_time(prompt));
  EXPECT_GT(mm->mixed_iteration_time(decode, with_image),
            text->mixed_iteration_time(decode, prompt));
  EXPECT_NE(mm->describe().find("vision encoder: 27 layers of 1152"), std::string::npos);
}

}  // namespace
}  // namespace servesim::models
