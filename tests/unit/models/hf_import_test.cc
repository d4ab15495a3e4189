#include "models/catalog/hf_import.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/catalog/hardware.h"
#include "core/error.h"

namespace servesim::models {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

const char* const kCatalogDir = "models/catalog/models";
const char* const kHfConfigDir = "models/catalog/hf_configs";
const char* const kBadConfigDir = "tests/golden/bad_hf_config";

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A scratch directory under the system temp dir, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            (std::string("servesim_hf_import_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// The message of the InputError `f` throws; fails the test when it throws nothing.
template <typename F>
std::string input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected InputError";
  return "";
}

HfImportOptions options_for(const std::string& file, const std::string& key) {
  HfImportOptions o;
  o.config_file = file;
  o.key = key;
  return o;
}

HfImportOptions with_hf_id(const std::string& hf_id) {
  HfImportOptions o;
  o.hf_id = hf_id;
  return o;
}

// Imports a config file; the key defaults as `servesim models import` picks it.
Json import_file(const std::string& path, HfImportOptions o = {}) {
  const Json config = read_hf_config(path);
  o.config_file = path;
  if (o.key.empty()) {
    o.key = default_catalog_key(path, config);
  }
  return import_hf_config(config, o);
}

// A small Llama-shaped config to vary in the error tests.
Json tiny_llama() {
  return Json::parse(R"({"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512,
      "vocab_size": 1000, "max_position_embeddings": 2048})");
}

// Qwen1.5-MoE-A2.7B's architecture (qwen2_moe with a shared expert): 14.3 B parameters,
// 2.7 B active per token, as its model card states.
Json qwen15_moe() {
  return Json::parse(R"({"model_type": "qwen2_moe", "hidden_size": 2048,
      "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
      "intermediate_size": 5632, "moe_intermediate_size": 1408,
      "shared_expert_intermediate_size": 5632, "num_experts": 60, "num_experts_per_tok": 4,
      "decoder_sparse_step": 1, "mlp_only_layers": [], "vocab_size": 151936,
      "max_position_embeddings": 8192, "use_sliding_window": false, "sliding_window": 32768,
      "max_window_layers": 21, "tie_word_embeddings": false, "rms_norm_eps": 1e-06,
      "rope_theta": 1000000.0})");
}

// Every shipped catalog file whose raw_config has a supported model_type, re-imported with its
// own provenance, reproduces the file: the derived counts exactly, and every other field too
// except the note on how the counts were derived.
TEST(HfImportRoundTrip, EveryShippedConfigReproducesItsCatalogFile) {
  const std::vector<std::string> supported = supported_hf_model_types();
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kCatalogDir)) {
    if (e.path().extension() == ".json") {
      files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  int checked = 0;
  for (const auto& file : files) {
    SCOPED_TRACE(file.string());
    const Json stored = Json::parse(read_text(file));
    ASSERT_TRUE(stored.contains("raw_config"));
    const std::string model_type = stored["raw_config"].value("model_type", "");
    if (std::find(supported.begin(), supported.end(), model_type) == supported.end()) {
      continue;  // opt, llada, Dream: not Hugging Face types this importer reads
    }
    ++checked;
    HfImportOptions o = options_for(file.string(), file.stem().string());
    o.name = stored["name"].get<std::string>();
    o.hf_id = stored["hf_id"].get<std::string>();
    o.source = stored["source"].get<std::string>();
    o.license_note = stored["license_note"].get<std::string>();
    o.expert_routing = stored.value("expert_routing", "");
    o.expert_routing_note = stored.value("expert_routing_note", "");
    const Json got = import_hf_config(stored["raw_config"], o);
    for (const char* key : {"param_count", "param_count_active_per_token", "param_count_breakdown",
                            "kv_cache_bytes_per_token_16bit", "weights_bytes_16bit"}) {
      EXPECT_EQ(got[key], stored[key]) << key;
    }
    std::vector<std::string> got_keys, stored_keys;
    for (auto it = got.begin(); it != got.end(); ++it) {
      got_keys.push_back(it.key());
    }
    for (auto it = stored.begin(); it != stored.end(); ++it) {
      stored_keys.push_back(it.key());
      if (it.key() != "derived_fields_note") {
        EXPECT_EQ(got[it.key()], it.value()) << it.key();
      }
    }
    EXPECT_EQ(got_keys, stored_keys) << "same fields in the same order";
  }
  // 5 llama, 4 qwen2, 1 mixtral shipped before the importer, plus the imported Qwen3 models.
  EXPECT_GE(checked, 10);
}

TEST(HfImportRoundTrip, ShippedHfConfigsMatchTheirCatalogFiles) {
  for (const auto& [config, key] :
       {std::pair{"Qwen--Qwen3-32B.config.json", "qwen3-32b"},
        std::pair{"Qwen--Qwen3-235B-A22B.config.json", "qwen3-235b-a22b"},
        std::pair{"deepseek-ai--DeepSeek-V3.config.json", "deepseek-v3"},
        std::pair{"deepseek-ai--DeepSeek-R1.config.json", "deepseek-r1"},
        std::pair{"openai--gpt-oss-120b.config.json", "gpt-oss-120b"},
        std::pair{"moonshotai--Kimi-K2-Instruct.config.json", "kimi-k2-instruct"},
        std::pair{"zai-org--GLM-4.7.config.json", "glm-4.7"},
        std::pair{"zai-org--GLM-5.config.json", "glm-5"},
        std::pair{"deepseek-ai--DeepSeek-V3.2.config.json", "deepseek-v3.2"},
        std::pair{"Qwen--Qwen3.5-397B-A17B.config.json", "qwen3.5-397b-a17b"},
        std::pair{"Qwen--Qwen3.5-27B.config.json", "qwen3.5-27b"},
        std::pair{"Qwen--Qwen3.5-122B-A10B.config.json", "qwen3.5-122b-a10b"},
        std::pair{"Qwen--Qwen3.5-35B-A3B.config.json", "qwen3.5-35b-a3b"},
        std::pair{"zai-org--GLM-5.1.config.json", "glm-5.1"}}) {
    SCOPED_TRACE(key);
    const std::string path = (fs::path(kHfConfigDir) / config).string();
    const Json stored =
        Json::parse(read_text(fs::path(kCatalogDir) / (std::string(key) + ".json")));
    EXPECT_EQ(stored["raw_config"], read_hf_config(path));
    EXPECT_EQ(default_catalog_key(path, read_hf_config(path)), key);
  }
}

TEST(HfImportCounts, Qwen3_32B) {
  const Json doc = import_file(std::string(kHfConfigDir) + "/Qwen--Qwen3-32B.config.json",
                               with_hf_id("Qwen/Qwen3-32B"));
  // Per layer: q 5120x8192, k and v 5120x1024 each, o 8192x5120, q/k norms 2x128, MLP 3x5120x25600,
  // two RMSNorms of 5120.
  const int64_t per_layer =
      5120LL * 8192 + 2 * 5120LL * 1024 + 8192LL * 5120 + 2 * 128 + 3 * 5120LL * 25600 + 2 * 5120;
  EXPECT_EQ(doc["param_count_breakdown"]["per_layer"], per_layer);
  EXPECT_EQ(doc["param_count_breakdown"]["embedding"], 151936LL * 5120);
  EXPECT_EQ(doc["param_count_breakdown"]["lm_head_untied"], 151936LL * 5120);
  const int64_t total = 2 * 151936LL * 5120 + 64 * per_layer + 5120;
  EXPECT_EQ(total, 32'762'123'264);  // "32.8 B" on the model card
  EXPECT_EQ(doc["param_count"], total);
  EXPECT_EQ(doc["param_count_active_per_token"], total);
  EXPECT_EQ(doc["weights_bytes_16bit"], 2 * total);
  EXPECT_EQ(doc["kv_cache_bytes_per_token_16bit"], 2 * 64 * 8 * 128 * 2);
  EXPECT_TRUE(doc["moe"].is_null());
  EXPECT_EQ(doc["name"], "Qwen3-32B");
  EXPECT_EQ(doc["hf_id"], "Qwen/Qwen3-32B");
  EXPECT_EQ(doc["head_dim"], 128);
  EXPECT_EQ(doc["qkv_bias"], false);
  EXPECT_EQ(doc["rope_theta"], 1e6);
  EXPECT_EQ(doc["norm_eps"], 1e-6);
  EXPECT_EQ(doc["max_position_embeddings"], 40960);
}

TEST(HfImportCounts, Qwen3_235B_A22B) {
  const Json doc = import_file(std::string(kHfConfigDir) + "/Qwen--Qwen3-235B-A22B.config.json");
  const int64_t attention = 4096LL * 8192 + 2 * 4096LL * 512 + 8192LL * 4096 + 2 * 128;
  const int64_t shared = attention + 2 * 4096 + 128 * 4096;  // norms and router
  const int64_t expert = 3 * 4096LL * 1536;
  const int64_t embeddings = 2 * 151936LL * 4096;
  const int64_t total = embeddings + 94 * (shared + 128 * expert) + 4096;
  const int64_t active = embeddings + 94 * (shared + 8 * expert) + 4096;
  EXPECT_EQ(total, 235'093'634'560);  // "235 B total"
  EXPECT_EQ(active, 22'190'763'520);  // "22 B activated"
  EXPECT_EQ(doc["param_count"], total);
  EXPECT_EQ(doc["param_count_active_per_token"], active);
  EXPECT_EQ(doc["param_count_breakdown"]["per_layer"], shared + 128 * expert);
  EXPECT_EQ(doc["kv_cache_bytes_per_token_16bit"], 2 * 94 * 4 * 128 * 2);
  const Json& moe = doc["moe"];
  EXPECT_EQ(moe["num_experts"], 128);
  EXPECT_EQ(moe["top_k"], 8);
  EXPECT_EQ(moe["moe_every_layer"], true);
  EXPECT_EQ(moe["expert_intermediate_size"], 1536);
  EXPECT_EQ(moe["router_aux_loss_coef"], 0.001);
  EXPECT_FALSE(doc.contains("cost_model_approximations"));
  // No hf_id given and no _name_or_path: the name falls back to the key, hf_id is null.
  EXPECT_EQ(doc["name"], "qwen3-235b-a22b");
  EXPECT_TRUE(doc["hf_id"].is_null());
}

TEST(HfImportCounts, HeadDimAndKvHeadsDefault) {
  Json config = tiny_llama();
  config.erase("num_key_value_heads");
  const Json doc = import_hf_config(config, options_for("tiny.json", "tiny"));
  EXPECT_EQ(doc["head_dim"], 64);  // 256 / 4
  EXPECT_EQ(doc["num_key_value_heads"], 4);
  EXPECT_EQ(doc["rope_theta"], 10000.0);
  EXPECT_EQ(doc["name"], "tiny");
  EXPECT_EQ(doc["kv_cache_bytes_per_token_16bit"], 2 * 2 * 4 * 64 * 2);
}

TEST(HfImportCounts, LlamaBiasesAreCounted) {
  Json config = tiny_llama();
  const int64_t plain = import_hf_config(config, options_for("t", "t"))["param_count"];
  config["attention_bias"] = true;
  const Json with_attention = import_hf_config(config, options_for("t", "t"));
  // q (256) + k, v (128 each) + o (256) biases per layer, 2 layers.
  EXPECT_EQ(with_attention["param_count"].get<int64_t>() - plain, 2 * (256 + 2 * 128 + 256));
  EXPECT_EQ(with_attention["qkv_bias"], true);
  EXPECT_EQ(with_attention["linear_bias"], false);
  config["mlp_bias"] = true;
  const Json with_mlp = import_hf_config(config, options_for("t", "t"));
  EXPECT_EQ(with_mlp["param_count"].get<int64_t>() - with_attention["param_count"].get<int64_t>(),
            2 * (2 * 512 + 256));
  EXPECT_EQ(with_mlp["linear_bias"], true);
}

TEST(HfImportCounts, SharedExpertsAreCountedAndModelled) {
  const Json doc =
      import_hf_config(qwen15_moe(), options_for("qwen15.json", "qwen1.5-moe-a2.7b"));
  EXPECT_EQ(doc["param_count"], 14'315'784'192);                  // "14.3 B"
  EXPECT_EQ(doc["param_count_active_per_token"], 2'689'173'504);  // "2.7 B activated"
  EXPECT_EQ(doc["qkv_bias"], true);
  EXPECT_EQ(doc["moe"]["shared_expert_intermediate_size"], 5632);
  EXPECT_FALSE(doc.contains("cost_model_approximations"));
}

// A tiny DeepSeek-V3-style config: 2 layers, the first dense (first_k_dense_replace 1), MLA with
// a query LoRA, 4 routed experts of 16 (top-2) and 1 shared expert, noaux_tc routing.
Json tiny_deepseek() {
  return Json::parse(R"({
      "model_type": "deepseek_v3", "hidden_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 128,
      "moe_intermediate_size": 16, "n_routed_experts": 4, "num_experts_per_tok": 2,
      "n_shared_experts": 1, "first_k_dense_replace": 1, "moe_layer_freq": 1,
      "q_lora_rank": 24, "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8,
      "v_head_dim": 16, "topk_method": "noaux_tc", "vocab_size": 100,
      "max_position_embeddings": 4096, "tie_word_embeddings": false})");
}

TEST(HfImportCounts, TinyDeepSeekMlaSharedExpertDenseFirstLayer) {
  const Json doc = import_hf_config(tiny_deepseek(), options_for("ds.json", "tiny-ds"));
  // Attention: q_a 64*24 + norm 24 + q_b 24*4*24; kv_a 64*(32+8) + norm 32; kv_b 32*4*(16+16);
  // o 4*16*64.
  const int64_t attention =
      64 * 24 + 24 + 24 * 4 * 24 + 64 * 40 + 32 + 32 * 4 * 32 + 4 * 16 * 64;
  const int64_t norms = 2 * 64;
  const int64_t dense_layer = attention + norms + 3 * 64 * 128;
  // Router 4*64 + e_score_correction_bias 4; 4 routed experts + 1 shared, each 3*64*16.
  const int64_t moe_layer = attention + norms + 4 * 64 + 4 + 5 * 3 * 64 * 16;
  const int64_t moe_active = attention + norms + 4 * 64 + 4 + 3 * 3 * 64 * 16;
  EXPECT_EQ(doc["param_count"], 2 * 100 * 64 + dense_layer + moe_layer + 64);
  EXPECT_EQ(doc["param_count_active_per_token"], 2 * 100 * 64 + dense_layer + moe_active + 64);
  EXPECT_EQ(doc["head_dim"], 24);
  EXPECT_EQ(doc["kv_cache_bytes_per_token_16bit"], 2 * (32 + 8) * 2);
  EXPECT_EQ(doc["mla"]["kv_lora_rank"], 32);
  EXPECT_EQ(doc["moe"]["num_moe_layers"], 1);
  EXPECT_EQ(doc["moe"]["shared_expert_intermediate_size"], 16);

  // The catalog reads it back.
  TempDir dir;
  const WrittenModel written =
      write_catalog_model(doc, "tiny-ds", dir.path().string(), /*force=*/false);
  ASSERT_TRUE(written.spec.mla.has_value());
  EXPECT_EQ(written.spec.mla->q_lora_rank, 24);
  EXPECT_EQ(written.spec.moe->num_moe_layers, 1);
  EXPECT_EQ(written.spec.kv_bytes_per_token(Dtype::kBf16), 2 * (32 + 8) * 2);
}

// DeepSeek-V3.2 / GLM-5: the tiny DeepSeek config with a lightning indexer of 2 heads of 8 and a
// top-16 selection.
TEST(HfImportCounts, TinySparseAttentionAddsTheIndexer) {
  Json config = tiny_deepseek();
  config["index_n_heads"] = 2;
  config["index_head_dim"] = 8;
  config["index_topk"] = 16;
  const Json dense = import_hf_config(tiny_deepseek(), options_for("ds.json", "tiny-ds"));
  for (const char* type : {"deepseek_v32", "glm_moe_dsa"}) {
    SCOPED_TRACE(type);
    config["model_type"] = type;
    const Json doc = import_hf_config(config, options_for("dsa.json", "tiny-dsa"));
    // Per layer: wq_b 24 x (2 x 8), wk + weights_proj 64 x (8 + 2), the key's LayerNorm 2 x 8.
    const int64_t indexer = 24 * 16 + 64 * 10 + 2 * 8;
    EXPECT_EQ(doc["param_count"].get<int64_t>(), dense["param_count"].get<int64_t>() + 2 * indexer);
    EXPECT_EQ(doc["param_count_active_per_token"].get<int64_t>(),
              dense["param_count_active_per_token"].get<int64_t>() + 2 * indexer);
    // The latent and rotary key at 16 bits, plus the indexer's FP8 key and one fp32 scale.
    EXPECT_EQ(doc["kv_cache_bytes_per_token_16bit"], 2 * ((32 + 8) * 2 + 8 + 4));
    EXPECT_EQ(doc["dsa"], Json::parse(R"({"index_n_heads": 2, "index_head_dim": 8,
                                          "index_topk": 16})"));
    TempDir dir;
    const WrittenModel written = write_catalog_model(doc, "tiny-dsa", dir.path().string(), false);
    ASSERT_TRUE(written.spec.dsa.has_value());
    EXPECT_EQ(written.spec.dsa->index_topk, 16);
  }
  config["q_lora_rank"] = nullptr;  // the indexer reads the query latent
  EXPECT_NE(input_error([&] { import_hf_config(config, options_for("c.json", "k")); })
                .find("c.json: q_lora_rank: expected a positive integer: the sparse-attention "
                      "indexer reads the query latent"),
            std::string::npos);
  config["q_lora_rank"] = 24;
  config["indexer_types"] = {"full", "shared"};  // GLM-5.2: a layer reusing another's selection
  EXPECT_NE(input_error([&] {
              import_hf_config(config, options_for("c.json", "k"));
            }).find("c.json: indexer_types: expected every layer \"full\""),
            std::string::npos);
  config["indexer_types"] = {"full", "full"};
  EXPECT_NO_THROW(import_hf_config(config, options_for("c.json", "k")));
  config.erase("index_topk");
  EXPECT_NE(input_error([&] {
              import_hf_config(config, options_for("c.json", "k"));
            }).find("c.json: index_topk:"),
            std::string::npos);
}

// A tiny MiniMax-M2-style config: 2 layers, grouped-query attention (4 heads of 8 over a hidden
// size of 16, 2 KV heads) with q/k RMSNorms over every head at once (qk_norm_type per_layer),
// every layer MoE with 4 experts of 12 (top-2), a router score-correction bias, no shared
// expert, and multi-token-prediction modules that the served model does not run.
Json tiny_minimax() {
  return Json::parse(R"({
      "model_type": "minimax_m2", "hidden_size": 16, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
      "intermediate_size": 12, "num_local_experts": 4, "num_experts_per_tok": 2,
      "shared_intermediate_size": 0, "use_qk_norm": true, "qk_norm_type": "per_layer",
      "use_routing_bias": true, "use_mtp": true, "num_mtp_modules": 3, "rotary_dim": 4,
      "vocab_size": 50, "max_position_embeddings": 4096, "tie_word_embeddings": false})");
}

TEST(HfImportCounts, TinyMiniMaxQkNormOverAllHeadsRoutingBias) {
  const Json doc = import_hf_config(tiny_minimax(), options_for("mm.json", "tiny-mm"));
  // Attention: q 16*32, k and v 16*16 each, o 32*16; q norm 4*8 and k norm 2*8 weights.
  const int64_t attention = 16 * 32 + 2 * 16 * 16 + 32 * 16 + 32 + 16;
  const int64_t norms = 2 * 16;
  // Router 4*16 + its score-correction bias 4; experts 3*16*12 each.
  const int64_t layer = attention + norms + 4 * 16 + 4 + 4 * 3 * 16 * 12;
  const int64_t layer_active = attention + norms + 4 * 16 + 4 + 2 * 3 * 16 * 12;
  EXPECT_EQ(doc["param_count"], 2 * 50 * 16 + 2 * layer + 16);
  EXPECT_EQ(doc["param_count_active_per_token"], 2 * 50 * 16 + 2 * layer_active + 16);
  EXPECT_EQ(doc["kv_cache_bytes_per_token_16bit"], 2 * 2 * 2 * 8 * 2);
  EXPECT_EQ(doc["moe"]["expert_intermediate_size"], 12);
  EXPECT_EQ(doc["moe"]["shared_expert_intermediate_size"], 0);
  EXPECT_TRUE(doc["moe"]["moe_every_layer"].get<bool>());

  // Per-head norms (GLM's form) where qk_norm_type says so, none without use_qk_norm.
  Json per_head = tiny_minimax();
  per_head["qk_norm_type"] = "per_head";
  EXPECT_EQ(import_hf_config(per_head, options_for("mm.json", "tiny-mm"))["param_count"],
            doc["param_count"].get<int64_t>() - 2 * (32 + 16 - 2 * 8));
  Json bad_type = tiny_minimax();
  bad_type["qk_norm_type"] = "per_token";
  EXPECT_EQ(input_error([&] { import_hf_config(bad_type, options_for("mm.json", "k")); }),
            "mm.json: qk_norm_type: expected \"per_head\" or \"per_layer\", got \"per_token\"");

  TempDir dir;
  const WrittenModel written =
      write_catalog_model(doc, "tiny-mm", dir.path().string(), /*force=*/false);
  EXPECT_EQ(written.spec.moe->num_experts, 4);
}

// A multimodal wrapper (Kimi-K2.5: model_type kimi_k25) is imported from its text_config: the
// same counts as the language model's config on its own, plus its MoonViT vision tower in
// param_count (not in the active count); errors name the key inside text_config or
// vision_config.
TEST(HfImportMultimodal, KimiK25IsItsTextConfig) {
  Json text = tiny_deepseek();
  text["model_type"] = "kimi_k2";
  Json wrapper = Json::object();
  wrapper["model_type"] = "kimi_k25";
  wrapper["text_config"] = text;
  wrapper["vision_config"] = Json::parse(R"({
      "vt_hidden_size": 32, "vt_num_hidden_layers": 2, "vt_intermediate_size": 64,
      "vt_num_attention_heads": 4, "patch_size": 14, "merge_kernel_size": [2, 2],
      "text_hidden_size": 64, "init_pos_emb_height": 4, "init_pos_emb_width": 4})");
  const Json alone = import_hf_config(text, options_for("k.json", "tiny-k"));
  const Json doc = import_hf_config(wrapper, options_for("k.json", "tiny-k"));
  for (const char* key :
       {"param_count_active_per_token", "kv_cache_bytes_per_token_16bit", "mla", "moe"}) {
    EXPECT_EQ(doc[key], alone[key]) << key;
  }
  // Patch embedding 3 x 14^2 x 32 + 32 and a 4 x 4 x 32 grid (19,360); two blocks of norms 4 x 32,
  // wqkv 3 x 32^2 + 96, wo 32^2 + 32, fc0 and fc1 2 x 32 x 64 + 64 + 32 (8,544 each); the final
  // norm 64; the merger's norm 64, 128^2 + 128 and 128 x 64 + 64 (24,832).
  const int64_t tower = 19'360 + 2 * 8'544 + 64 + 24'832;
  EXPECT_EQ(doc["param_count"], alone["param_count"].get<int64_t>() + tower);
  EXPECT_EQ(doc["vision_encoder"]["param_count"], tower);
  EXPECT_EQ(doc["vision_encoder"]["spatial_merge_size"], 2);
  EXPECT_EQ(doc["vision_encoder"]["num_heads"], 4);
  EXPECT_EQ(doc["model_type"], "kimi_k2");
  EXPECT_EQ(doc["multimodal"]["model_type"], "kimi_k25");
  EXPECT_EQ(doc["raw_config"], wrapper);
  TempDir dir;
  EXPECT_NO_THROW(write_catalog_model(doc, "tiny-k", dir.path().string(), /*force=*/false));

  wrapper["vision_config"]["merge_kernel_size"] = Json::parse("[2, 3]");
  EXPECT_EQ(input_error([&] { import_hf_config(wrapper, options_for("k.json", "k")); }),
            "k.json: vision_config.merge_kernel_size: expected two equal positive integers (a "
            "square kernel), got [2,3]");
  wrapper["text_config"].erase("kv_lora_rank");
  EXPECT_EQ(input_error([&] { import_hf_config(wrapper, options_for("k.json", "k")); }),
            "k.json: text_config.kv_lora_rank: missing; expected a positive integer");
  wrapper.erase("text_config");
  EXPECT_EQ(input_error([&] { import_hf_config(wrapper, options_for("k.json", "k")); }),
            "k.json: text_config: missing; expected an object");
}

// A tiny GLM-4.5-style config: 3 layers, the first dense (first_k_dense_replace 1), grouped-query
// attention (8 heads of 8, 2 KV heads) with q/k/v biases and per-head q/k norms, 4 routed
// experts of 16 (top-2) and 1 shared expert, a score-correction bias in the router, and one
// multi-token-prediction layer that the served model does not run.
Json tiny_glm() {
  return Json::parse(R"({
      "model_type": "glm4_moe", "hidden_size": 64, "num_hidden_layers": 3,
      "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 8,
      "intermediate_size": 128, "moe_intermediate_size": 16, "n_routed_experts": 4,
      "num_experts_per_tok": 2, "n_shared_experts": 1, "first_k_dense_replace": 1,
      "attention_bias": true, "use_qk_norm": true, "partial_rotary_factor": 0.5,
      "num_nextn_predict_layers": 1, "vocab_size": 100, "max_position_embeddings": 4096,
      "tie_word_embeddings": false})");
}

TEST(HfImportCounts, TinyGlmGroupedQueryAttentionSharedExpertDenseFirstLayer) {
  const Json doc = import_hf_config(tiny_glm(), options_for("glm.json", "tiny-glm"));
  // Attention: q 64*64, k and v 64*16 each, o 64*64; q/k/v biases 64 + 16 + 16 (o has none);
  // q and k norms 8 each.
  const int64_t attention = 64 * 64 + 2 * 64 * 16 + 64 * 64 + (64 + 2 * 16) + 2 * 8;
  const int64_t norms = 2 * 64;
  const int64_t dense_layer = attention + norms + 3 * 64 * 128;
  // Router 4*64 + e_score_correction_bias 4; 4 routed experts + 1 shared, each 3*64*16.
  const int64_t moe_layer = attention + norms + 4 * 64 + 4 + 5 * 3 * 64 * 16;
  const int64_t moe_active = attention + norms + 4 * 64 + 4 + 3 * 3 * 64 * 16;
  EXPECT_EQ(doc["param_count"], 2 * 100 * 64 + dense_layer + 2 * moe_layer + 64);
  EXPECT_EQ(doc["param_count_active_per_token"], 2 * 100 * 64 + dense_layer + 2 * moe_active + 64);
  EXPECT_EQ(doc["qkv_bias"], true);
  EXPECT_EQ(doc["linear_bias"], false);
  EXPECT_EQ(doc["norm_eps"], 1e-5);
  EXPECT_EQ(doc["kv_cache_bytes_per_token_16bit"], 3 * 2 * 2 * 8 * 2);
  EXPECT_EQ(doc["moe"]["num_moe_layers"], 2);
  EXPECT_EQ(doc["moe"]["shared_expert_intermediate_size"], 16);
  EXPECT_FALSE(doc.contains("mla"));

  // Without q/k norms or biases the counts lose exactly those weights.
  Json plain = tiny_glm();
  plain["use_qk_norm"] = false;
  plain["attention_bias"] = false;
  const Json plain_doc = import_hf_config(plain, options_for("glm.json", "tiny-glm"));
  EXPECT_EQ(doc["param_count"].get<int64_t>() - plain_doc["param_count"].get<int64_t>(),
            3 * ((64 + 2 * 16) + 2 * 8));

  // The catalog reads it back as a grouped-query MoE model.
  TempDir dir;
  const WrittenModel written =
      write_catalog_model(doc, "tiny-glm", dir.path().string(), /*force=*/false);
  EXPECT_FALSE(written.spec.mla.has_value());
  ASSERT_TRUE(written.spec.moe.has_value());
  EXPECT_EQ(written.spec.moe->num_moe_layers, 2);
  EXPECT_EQ(written.spec.kv_bytes_per_token(Dtype::kBf16), 3 * 2 * 2 * 8 * 2);
}

TEST(HfImportErrors, MissingMlaFieldNamesTheKey) {
  for (const char* key : {"kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"}) {
    Json config = tiny_deepseek();
    config.erase(key);
    EXPECT_EQ(input_error([&] { import_hf_config(config, options_for("ds/config.json", "k")); }),
              std::string("ds/config.json: ") + key + ": missing; expected a positive integer");
  }
  Json config = tiny_deepseek();
  config.erase("q_lora_rank");
  EXPECT_EQ(input_error([&] { import_hf_config(config, options_for("ds/config.json", "k")); }),
            "ds/config.json: q_lora_rank: missing; expected a positive integer, or null for no "
            "query LoRA");
  config["q_lora_rank"] = nullptr;  // DeepSeek-V2-Lite: a plain q projection
  const Json doc = import_hf_config(config, options_for("ds/config.json", "k"));
  EXPECT_EQ(doc["mla"]["q_lora_rank"], 0);
}

TEST(HfImportCounts, DenseLayersBetweenMoeLayers) {
  Json config = read_hf_config(std::string(kHfConfigDir) + "/Qwen--Qwen3-235B-A22B.config.json");
  config["decoder_sparse_step"] = 2;
  config["mlp_only_layers"] = {1, 4};  // layer 1 is a MoE layer by the step rule, 4 is not
  const Json doc = import_hf_config(config, options_for("sparse.json", "s"));
  const Json& b = doc["param_count_breakdown"];
  EXPECT_EQ(b["num_moe_layers"], 46);  // odd layer indices 1, 3, ..., 93 less layer 1
  EXPECT_EQ(b["num_dense_layers"], 48);
  EXPECT_EQ(b["per_dense_layer"].get<int64_t>() - b["per_moe_layer"].get<int64_t>(),
            3 * 4096LL * 12288 - (128 * 4096 + 128 * 3 * 4096LL * 1536));
  EXPECT_EQ(doc["param_count"], b["embedding"].get<int64_t>() + b["lm_head_untied"].get<int64_t>() +
                                    46 * b["per_moe_layer"].get<int64_t>() +
                                    48 * b["per_dense_layer"].get<int64_t>() + 4096);
  EXPECT_EQ(doc["moe"]["moe_every_layer"], false);
  EXPECT_EQ(doc["moe"]["num_moe_layers"], 46);
}

TEST(HfImportErrors, MissingHiddenSizeNamesTheKey) {
  Json config = tiny_llama();
  config.erase("hidden_size");
  EXPECT_EQ(input_error([&] { import_hf_config(config, options_for("cfg/config.json", "k")); }),
            "cfg/config.json: hidden_size: missing; expected a positive integer");
}

TEST(HfImportErrors, WrongTypeNamesTheKeyAndTheValue) {
  Json config = tiny_llama();
  config["num_attention_heads"] = "4";
  EXPECT_EQ(input_error([&] { import_hf_config(config, options_for("c.json", "k")); }),
            "c.json: num_attention_heads: expected a positive integer, got \"4\"");
  config["num_attention_heads"] = 4;
  config["num_key_value_heads"] = 3;
  EXPECT_EQ(input_error([&] { import_hf_config(config, options_for("c.json", "k")); }),
            "c.json: num_key_value_heads: expected a divisor of num_attention_heads (4), got 3");
}

// A quantized checkpoint's quant_method is kept as checkpoint_quantization (the catalog loads it);
// a 16-bit checkpoint has none; a quantization_config without a method is refused.
TEST(HfImportQuantization, CheckpointQuantizationFromQuantMethod) {
  Json config = tiny_llama();
  EXPECT_FALSE(import_hf_config(config, options_for("c.json", "k")).contains(
      "checkpoint_quantization"));
  config["quantization_config"] = Json::parse(R"({"quant_method": "mxfp4"})");
  EXPECT_EQ(import_hf_config(config, options_for("c.json", "k"))["checkpoint_quantization"],
            "mxfp4");
  config["quantization_config"] = Json::parse(R"({"weight_block_size": [128, 128]})");
  EXPECT_EQ(input_error([&] { import_hf_config(config, options_for("c.json", "k")); }),
            "c.json: quantization_config.quant_method: expected a non-empty string (e.g. "
            "\"fp8\", \"mxfp4\")");
  config["quantization_config"] = 4;
  EXPECT_EQ(input_error([&] { import_hf_config(config, options_for("c.json", "k")); }),
            "c.json: quantization_config: expected an object, got 4");
  // The shipped catalog: gpt-oss-120b is published in MXFP4, DeepSeek-V3 in block FP8.
  const ModelCatalog cat = ModelCatalog::load(kCatalogDir);
  EXPECT_EQ(cat.get("gpt-oss-120b").checkpoint_quantization, "mxfp4");
  EXPECT_EQ(cat.get("deepseek-v3").checkpoint_quantization, "fp8");
  EXPECT_EQ(cat.get("qwen3-32b").checkpoint_quantization, "");
}

TEST(HfImportErrors, UnknownModelTypeListsTheSupportedOnes) {
  Json config = tiny_llama();
  config["model_type"] = "phi3";
  EXPECT_EQ(input_error([&] { import_hf_config(config, options_for("c.json", "k")); }),
            "c.json: model_type: \"phi3\" is not supported; supported model types are: "
            "deepseek_v3, deepseek_v32, glm4_moe, glm_moe_dsa, gpt_oss, kimi_k2, kimi_k25, llama, "
            "minimax_m2, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_5, qwen3_5_moe, "
            "qwen3_5_moe_text, qwen3_5_text, qwen3_moe, qwen3_next");
}

TEST(HfImportErrors, MixtralNeedsItsExpertKeys) {
  Json config = tiny_llama();
  config["model_type"] = "mixtral";
  config["num_experts_per_tok"] = 2;
  EXPECT_EQ(input_error([&] { import_hf_config(config, options_for("c.json", "k")); }),
            "c.json: num_local_experts: missing; expected a positive integer");
  config["num_local_experts"] = 1;
  EXPECT_EQ(input_error([&] { import_hf_config(config, options_for("c.json", "k")); }),
            "c.json: num_experts_per_tok: expected at most num_local_experts (1), got 2");
}

TEST(HfImportErrors, InexpressibleArchitecturesAreRefused) {
  Json mla = tiny_llama();
  mla["model_type"] = "deepseek_v2";
  mla["kv_lora_rank"] = 512;
  EXPECT_NE(input_error([&] {
              import_hf_config(mla, options_for("c.json", "k"));
            }).find("c.json: kv_lora_rank: multi-head latent attention (MLA) is imported only"),
            std::string::npos);

  Json mistral = tiny_llama();
  mistral["model_type"] = "mistral";
  mistral["sliding_window"] = 1024;  // below max_position_embeddings 2048
  EXPECT_NE(input_error([&] {
              import_hf_config(mistral, options_for("c.json", "k"));
            }).find("c.json: sliding_window: every layer attends over a sliding window of 1024"),
            std::string::npos);
  mistral.erase("sliding_window");  // the config class's default, 4096, is above the context
  EXPECT_NO_THROW(import_hf_config(mistral, options_for("c.json", "k")));
  mistral["max_position_embeddings"] = 32768;  // now the default window of 4096 is below it
  EXPECT_THROW(import_hf_config(mistral, options_for("c.json", "k")), InputError);
  mistral["sliding_window"] = nullptr;  // Mistral-7B-v0.2 and later: no window
  EXPECT_NO_THROW(import_hf_config(mistral, options_for("c.json", "k")));

  Json qwen2 = tiny_llama();
  qwen2["model_type"] = "qwen2";
  qwen2["sliding_window"] = 1024;
  EXPECT_NO_THROW(import_hf_config(qwen2, options_for("c.json", "k")));  // use_sliding_window off
  qwen2["use_sliding_window"] = true;
  qwen2["max_window_layers"] = 1;
  EXPECT_NE(input_error([&] {
              import_hf_config(qwen2, options_for("c.json", "k"));
            }).find("c.json: use_sliding_window: layers 1 to 1 attend over a sliding window"),
            std::string::npos);

  Json layer_types = tiny_llama();
  layer_types["model_type"] = "qwen3";
  layer_types["layer_types"] = {"full_attention", "chunked_attention"};
  EXPECT_NE(input_error([&] { import_hf_config(layer_types, options_for("c.json", "k")); })
                .find("c.json: layer_types[1]: expected \"full_attention\" or "
                      "\"sliding_attention\", got \"chunked_attention\""),
            std::string::npos);
  layer_types["layer_types"] = {"full_attention", "sliding_attention"};
  layer_types["sliding_window"] = 128;
  const Json doc = import_hf_config(layer_types, options_for("c.json", "k"));
  EXPECT_EQ(doc["attention_window"]["num_sliding_layers"], 1);
  EXPECT_EQ(doc["attention_window"]["sliding_window"], 128);
}

TEST(HfImportErrors, UnreadableAndMalformedFiles) {
  EXPECT_EQ(input_error([] { read_hf_config("no/such/config.json"); }),
            "no/such/config.json: cannot open file");
  TempDir dir;
  const fs::path bad = dir.path() / "bad.json";
  std::ofstream(bad) << "{\n  \"hidden_size\": 1,\n  oops\n}\n";
  EXPECT_NE(input_error([&] { read_hf_config(bad.string()); }).find("bad.json:3: invalid JSON"),
            std::string::npos);
  std::ofstream(bad, std::ios::trunc) << "[1, 2]";
  EXPECT_NE(input_error([&] { read_hf_config(bad.string()); }).find("expected a JSON object"),
            std::string::npos);
}

// Error goldens: tests/golden/bad_hf_config/<case>.config.json fails to import with the message
// in <case>.expected (the InputError text, which `servesim models import` prints after
// "servesim: " and exits 2). SERVESIM_UPDATE_GOLDEN=1 rewrites the expectations.
TEST(HfImportErrors, BadConfigGoldens) {
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(kBadConfigDir)) {
    if (e.path().extension() == ".json") {
      cases.push_back(e.path());
    }
  }
  std::sort(cases.begin(), cases.end());
  ASSERT_GE(cases.size(), 4u);
  const char* update = std::getenv("SERVESIM_UPDATE_GOLDEN");
  for (const auto& file : cases) {
    SCOPED_TRACE(file.string());
    const std::string got =
        input_error([&] { import_file(file.string(), options_for(file.string(), "bad")); }) + "\n";
    std::string name = file.filename().string();
    name = name.substr(0, name.find('.'));
    const fs::path expected = file.parent_path() / (name + ".expected");
    if (update && std::string(update) == "1") {
      std::ofstream(expected, std::ios::binary) << got;
      continue;
    }
    ASSERT_TRUE(fs::exists(expected)) << "run with SERVESIM_UPDATE_GOLDEN=1 to create it";
    EXPECT_EQ(got, read_text(expected));
  }
}

TEST(HfImportKeys, DefaultKeyFromTheFileNameOrNameOrPath) {
  const Json none = Json::object();
  EXPECT_EQ(default_catalog_key("a/b/Qwen--Qwen3-32B.config.json", none), "qwen3-32b");
  EXPECT_EQ(default_catalog_key("Qwen--Qwen2.5-32B_config.json", none), "qwen2.5-32b");
  EXPECT_EQ(default_catalog_key("Mistral-7B.json", none), "mistral-7b");
  const Json named = {{"_name_or_path", "meta-llama/Llama-2-70b-hf"}};
  EXPECT_EQ(default_catalog_key("dl/config.json", named), "llama-2-70b-hf");
  EXPECT_EQ(default_catalog_key("dl/config.json", none), "");
  // A bare config.json in a folder that names a model, or in the Hugging Face cache's layout.
  EXPECT_EQ(default_catalog_key("downloads/Qwen3-32B/config.json", none), "qwen3-32b");
  EXPECT_EQ(default_catalog_key(
                "hub/models--meta-llama--Llama-3.1-8B-Instruct/snapshots/0e9e39f/config.json", none),
            "llama-3.1-8b-instruct");
  EXPECT_EQ(default_catalog_key("downloads/Qwen3-32B/config.json", named), "llama-2-70b-hf");
  EXPECT_TRUE(valid_catalog_key("qwen3-235b-a22b"));
  EXPECT_FALSE(valid_catalog_key("Qwen3"));
  EXPECT_FALSE(valid_catalog_key("../x"));
  EXPECT_FALSE(valid_catalog_key(".hidden"));
  EXPECT_FALSE(valid_catalog_key(""));
}

TEST(HfImportKeys, HfIdAndNameFromNameOrPath) {
  Json config = tiny_llama();
  config["_name_or_path"] = "org/Tiny-Model";
  Json doc = import_hf_config(config, options_for("c.json", "tiny-model"));
  EXPECT_EQ(doc["hf_id"], "org/Tiny-Model");
  EXPECT_EQ(doc["name"], "Tiny-Model");
  config["_name_or_path"] = "/home/me/checkpoints/run1";  // a local path, not a hub id
  doc = import_hf_config(config, options_for("c.json", "run1"));
  EXPECT_TRUE(doc["hf_id"].is_null());
  EXPECT_EQ(doc["name"], "run1");
}

TEST(HfImportWrite, WrittenFileLoadsThroughTheCatalog) {
  TempDir dir;
  const Json doc = import_file(std::string(kHfConfigDir) + "/Qwen--Qwen3-235B-A22B.config.json",
                               with_hf_id("Qwen/Qwen3-235B-A22B"));
  const WrittenModel w = write_catalog_model(doc, "qwen3-235b-a22b", dir.path().string(), false);
  EXPECT_EQ(w.path, (dir.path() / "qwen3-235b-a22b.json").string());
  EXPECT_FALSE(w.replaced);
  EXPECT_EQ(w.catalog_models, 1u);
  const ModelCatalog catalog = ModelCatalog::load(dir.path().string());
  const ModelSpec& m = catalog.get("qwen3-235b-a22b");
  EXPECT_EQ(m.name, "Qwen3-235B-A22B");
  EXPECT_EQ(m.hf_id, "Qwen/Qwen3-235B-A22B");
  EXPECT_EQ(m.param_count, 235'093'634'560);
  EXPECT_EQ(m.num_layers, 94);
  EXPECT_EQ(m.num_kv_heads, 4);
  ASSERT_TRUE(m.moe.has_value());
  EXPECT_EQ(m.moe->num_experts, 128);
  EXPECT_EQ(m.moe->experts_per_token, 8);
  EXPECT_EQ(m.moe->expert_intermediate_size, 1536);
  EXPECT_EQ(m.kv_bytes_per_token(Dtype::kBf16), 2 * 94 * 4 * 128 * 2);
  EXPECT_EQ(Json::parse(read_text(w.path)), doc);
  // Only the model file is left in the folder (no scratch folder, no temporary file).
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    names.push_back(e.path().filename().string());
  }
  EXPECT_EQ(names, std::vector<std::string>{"qwen3-235b-a22b.json"});
}

TEST(HfImportWrite, ExistingKeyIsRefusedWithoutForceAndLeftUntouched) {
  TempDir dir;
  const fs::path existing = dir.path() / "qwen3-32b.json";
  fs::copy_file(fs::path(kCatalogDir) / "llama-3.1-8b.json", existing);
  const std::string before = read_text(existing);
  const auto mtime = fs::last_write_time(existing);

  const Json doc = import_file(std::string(kHfConfigDir) + "/Qwen--Qwen3-32B.config.json");
  EXPECT_EQ(input_error([&] { write_catalog_model(doc, "qwen3-32b", dir.path().string(), false); }),
            existing.string() +
                ": catalog key \"qwen3-32b\" exists already; pass --force to "
                "replace it");
  EXPECT_EQ(read_text(existing), before);
  EXPECT_EQ(fs::last_write_time(existing), mtime);

  const WrittenModel w = write_catalog_model(doc, "qwen3-32b", dir.path().string(), true);
  EXPECT_TRUE(w.replaced);
  EXPECT_EQ(w.spec.param_count, 32'762'123'264);
  EXPECT_EQ(Json::parse(read_text(existing)), doc);
}

TEST(HfImportWrite, DocumentThatDoesNotLoadIsNotWritten) {
  TempDir dir;
  Json doc = import_file(std::string(kHfConfigDir) + "/Qwen--Qwen3-32B.config.json");
  doc["weights_bytes_16bit"] = 1;
  const std::string message =
      input_error([&] { write_catalog_model(doc, "broken", dir.path().string(), false); });
  EXPECT_NE(message.find("broken.json: weights_bytes_16bit: expected 2 * param_count"),
            std::string::npos)
      << message;
  EXPECT_TRUE(fs::is_empty(dir.path()));
  EXPECT_THROW(write_catalog_model(doc, "Not A Key", dir.path().string(), false),
               std::invalid_argument);
}

}  // namespace
}  // namespace servesim::models
