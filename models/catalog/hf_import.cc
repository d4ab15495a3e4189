#include "models/catalog/hf_import.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

#include <boost/algorithm/string/case_conv.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "models/catalog/json_fields.h"
#include "core/error.h"

namespace servesim::models {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// When a MoE router carries a score-correction bias (e_score_correction_bias, one per expert).
enum class ScoreBias { kNone, kUnderNoauxTc, kAlways };

// How one Hugging Face model_type lays out its weights, and the defaults its transformers config
// class applies to keys a config.json leaves out.
struct ArchRules {
  const char* model_type;
  bool moe = false;
  const char* experts_key = nullptr;  // "num_local_experts" (Mixtral) or "num_experts" (Qwen)
  bool expert_size_key = false;      // moe_intermediate_size (Qwen); Mixtral uses intermediate_size
  bool shared_expert = false;        // Qwen2-MoE: a shared expert MLP and its sigmoid gate
  const char* plain_shared_size_key = nullptr;  // MiniMax-M2: a shared expert MLP of this size
  bool shared_experts_count = false;  // DeepSeek: n_shared_experts of moe_intermediate_size
  bool sparse_layers = false;        // decoder_sparse_step / mlp_only_layers (Qwen MoE)
  bool first_k_dense = false;        // first_k_dense_replace / moe_layer_freq (DeepSeek)
  ScoreBias router_score_bias = ScoreBias::kNone;  // DeepSeek-V3: under noaux_tc; GLM-4.5: always
  bool router_bias = false;          // gpt-oss: the router Linear has a bias
  const char* router_bias_key = nullptr;  // MiniMax-M2: a score-correction bias when this is true
  bool expert_bias = false;          // gpt-oss: gate_up and down biases per expert
  bool attention_sinks = false;      // gpt-oss: one sink logit per head and layer
  bool mla = false;                  // multi-head latent attention (DeepSeek-V3, Kimi-K2)
  bool dsa = false;                  // DeepSeek Sparse Attention over MLA (DeepSeek-V3.2, GLM-5)
  // Gated DeltaNet hybrids (Qwen3-Next, Qwen3.5): linear-attention layers from layer_types or
  // full_attention_interval, and gated full attention (always, or under attn_output_gate).
  bool linear_attention = false;
  const char* output_gate_key = nullptr;  // nullptr with linear_attention: always gated
  bool qkv_bias = false;             // q/k/v projections always carry a bias (Qwen2)
  bool attention_bias_key = false;   // attention_bias adds q/k/v/o biases (Llama, Qwen3)
  bool attention_bias_qkv_only = false;  // GLM-4.5: attention_bias adds q/k/v biases, o has none
  bool mlp_bias_key = false;         // mlp_bias adds gate/up/down biases (Llama)
  bool qk_norm = false;              // per-head RMSNorm of q and k, head_dim weights each (Qwen3)
  // GLM-4.5, MiniMax-M2: q/k norms when this key is true: per head (head_dim weights each), or
  // over every head at once (heads x head_dim and kv_heads x head_dim) where the config's
  // qk_norm_type is "per_layer" (MiniMax-M2).
  const char* qk_norm_key = nullptr;
  bool qwen_sliding = false;         // use_sliding_window / max_window_layers (Qwen); copied out
  bool sliding_every_layer = false;  // sliding_window, when set, applies to every layer (Mistral)
  int64_t default_sliding_window = 0;  // Mistral's config class: 4096; 0 = none
  double default_rope_theta = 10000.0;
  double default_norm_eps = 1e-6;
};

const std::vector<ArchRules>& arch_rules() {
  static const std::vector<ArchRules> rules = [] {
    std::vector<ArchRules> r;
    ArchRules llama{"llama"};
    llama.attention_bias_key = true;
    llama.mlp_bias_key = true;
    r.push_back(llama);

    ArchRules mistral{"mistral"};
    mistral.sliding_every_layer = true;
    mistral.default_sliding_window = 4096;
    r.push_back(mistral);

    ArchRules mixtral{"mixtral"};
    mixtral.moe = true;
    mixtral.experts_key = "num_local_experts";
    mixtral.sliding_every_layer = true;
    mixtral.default_rope_theta = 1e6;
    mixtral.default_norm_eps = 1e-5;
    r.push_back(mixtral);

    ArchRules qwen2{"qwen2"};
    qwen2.qkv_bias = true;
    qwen2.qwen_sliding = true;
    qwen2.default_sliding_window = 4096;
    r.push_back(qwen2);

    ArchRules qwen2_moe{"qwen2_moe"};
    qwen2_moe.moe = true;
    qwen2_moe.experts_key = "num_experts";
    qwen2_moe.expert_size_key = true;
    qwen2_moe.shared_expert = true;
    qwen2_moe.sparse_layers = true;
    qwen2_moe.qkv_bias = true;
    qwen2_moe.qwen_sliding = true;
    qwen2_moe.default_sliding_window = 4096;
    r.push_back(qwen2_moe);

    ArchRules qwen3{"qwen3"};
    qwen3.attention_bias_key = true;
    qwen3.qk_norm = true;
    qwen3.qwen_sliding = true;
    qwen3.default_sliding_window = 4096;
    r.push_back(qwen3);

    // DeepSeek-V3 / R1 and Kimi-K2 (whose config declares DeepseekV3ForCausalLM).
    ArchRules deepseek_v3{"deepseek_v3"};
    deepseek_v3.moe = true;
    deepseek_v3.experts_key = "n_routed_experts";
    deepseek_v3.expert_size_key = true;
    deepseek_v3.shared_experts_count = true;
    deepseek_v3.first_k_dense = true;
    deepseek_v3.router_score_bias = ScoreBias::kUnderNoauxTc;
    deepseek_v3.attention_bias_key = true;
    deepseek_v3.mla = true;
    r.push_back(deepseek_v3);
    ArchRules kimi_k2 = deepseek_v3;
    kimi_k2.model_type = "kimi_k2";
    r.push_back(kimi_k2);

    // DeepSeek-V3.2 (DeepseekV32ForCausalLM) and GLM-5 (GlmMoeDsaForCausalLM): DeepSeek-V3's
    // layout plus a lightning indexer in every layer (DeepSeek Sparse Attention).
    ArchRules deepseek_v32 = deepseek_v3;
    deepseek_v32.model_type = "deepseek_v32";
    deepseek_v32.dsa = true;
    r.push_back(deepseek_v32);
    ArchRules glm_moe_dsa = deepseek_v32;
    glm_moe_dsa.model_type = "glm_moe_dsa";
    glm_moe_dsa.default_norm_eps = 1e-5;
    r.push_back(glm_moe_dsa);

    // GLM-4.5 / 4.6 / 4.7 (Glm4MoeForCausalLM): DeepSeek-V3's MoE layout (routed and shared
    // experts, first_k_dense_replace dense layers, a score-correction bias in every router) with
    // grouped-query attention: q/k/v biases under attention_bias, per-head q/k RMSNorm under
    // use_qk_norm; its multi-token-prediction layer (num_nextn_predict_layers) is not counted.
    ArchRules glm4_moe = deepseek_v3;
    glm4_moe.model_type = "glm4_moe";
    glm4_moe.mla = false;
    glm4_moe.router_score_bias = ScoreBias::kAlways;
    glm4_moe.attention_bias_qkv_only = true;
    glm4_moe.qk_norm_key = "use_qk_norm";
    glm4_moe.default_norm_eps = 1e-5;
    r.push_back(glm4_moe);

    // MiniMax-M2 / M2.5 (MiniMaxM2ForCausalLM): grouped-query attention with q/k RMSNorms over
    // all heads (use_qk_norm, qk_norm_type per_layer), every layer MoE with experts of
    // intermediate_size, a sigmoid router with a score-correction bias (use_routing_bias); its
    // multi-token-prediction modules (use_mtp, num_mtp_modules) are not counted.
    ArchRules minimax_m2{"minimax_m2"};
    minimax_m2.moe = true;
    minimax_m2.experts_key = "num_local_experts";
    minimax_m2.plain_shared_size_key = "shared_intermediate_size";
    minimax_m2.router_bias_key = "use_routing_bias";
    minimax_m2.qk_norm_key = "use_qk_norm";
    r.push_back(minimax_m2);

    ArchRules gpt_oss{"gpt_oss"};
    gpt_oss.moe = true;
    gpt_oss.experts_key = "num_local_experts";
    gpt_oss.attention_bias_key = true;
    gpt_oss.router_bias = true;
    gpt_oss.expert_bias = true;
    gpt_oss.attention_sinks = true;
    gpt_oss.default_norm_eps = 1e-5;
    r.push_back(gpt_oss);

    ArchRules qwen3_moe = qwen3;
    qwen3_moe.model_type = "qwen3_moe";
    qwen3_moe.moe = true;
    qwen3_moe.experts_key = "num_experts";
    qwen3_moe.expert_size_key = true;
    qwen3_moe.sparse_layers = true;
    r.push_back(qwen3_moe);

    // Qwen3-Next (Qwen3NextForCausalLM): Gated DeltaNet layers with gated full attention every
    // full_attention_interval layers, Qwen3-MoE's experts plus Qwen2-MoE's gated shared expert;
    // its multi-token-prediction layers are not counted. Qwen3.5's language models (the
    // text_config of the qwen3_5 / qwen3_5_moe wrappers) have the same layers, the output gate
    // under attn_output_gate.
    ArchRules qwen3_next = qwen3_moe;
    qwen3_next.model_type = "qwen3_next";
    qwen3_next.shared_expert = true;
    qwen3_next.qwen_sliding = false;
    qwen3_next.linear_attention = true;
    r.push_back(qwen3_next);
    ArchRules qwen3_5_moe_text = qwen3_next;
    qwen3_5_moe_text.model_type = "qwen3_5_moe_text";
    qwen3_5_moe_text.output_gate_key = "attn_output_gate";
    r.push_back(qwen3_5_moe_text);
    ArchRules qwen3_5_text = qwen3;
    qwen3_5_text.model_type = "qwen3_5_text";
    qwen3_5_text.qwen_sliding = false;
    qwen3_5_text.linear_attention = true;
    qwen3_5_text.output_gate_key = "attn_output_gate";
    r.push_back(qwen3_5_text);
    return r;
  }();
  return rules;
}

// Typed access to the top level of one config.json. Every failure throws InputError naming the
// file and the key. Optional keys treat null as absent (Hugging Face writes "head_dim": null).
class ConfigReader {
 public:
  // `prefix` is the config's path inside the file ("text_config" for a multimodal wrapper's
  // language model; "" for the top level), named in every error.
  ConfigReader(const Json& config, std::string file, std::string prefix = "")
      : config_(config), fields_(std::move(file)), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& message) const {
    fields_.fail(key.empty() ? prefix_ : join_path(prefix_, key), message);
  }

  const Json* find(const char* key) const {
    return JsonFieldReader<Json>::find_optional(config_, key);
  }

  bool has(const char* key) const { return find(key) != nullptr; }

  // A required object member (a multimodal wrapper's text_config).
  const Json& object(const char* key) const { return fields_.object(config_, prefix_, key); }
  bool present(const char* key) const { return config_.contains(key); }

  // Positive integers are capped at 1e9: counts and sizes beyond that are not a model config
  // (the catalog loader refuses them too).
  int64_t positive_integer(const char* key) const {
    return fields_.positive_int(config_, prefix_, key);
  }

  int64_t optional_positive_integer(const char* key, int64_t fallback) const {
    return has(key) ? positive_integer(key) : fallback;
  }

  // A non-negative integer (0 allowed, e.g. "no shared expert").
  int64_t non_negative_integer(const char* key) const {
    return fields_.non_negative_integer(config_, prefix_, key);
  }

  double optional_positive_number(const char* key, double fallback) const {
    return fields_.optional_positive_number(config_, prefix_, key, fallback, "a positive number");
  }

  // MLA's q_lora_rank: a positive integer, or null for a plain q projection (DeepSeek-V2-Lite);
  // required either way.
  int64_t mla_rank(const char* key) const {
    if (!present(key)) {
      fail(key, "missing; expected a positive integer, or null for no query LoRA");
    }
    return has(key) ? positive_integer(key) : 0;
  }

  bool optional_bool(const char* key, bool fallback) const {
    return has(key) ? fields_.boolean(config_, prefix_, key) : fallback;
  }

  std::string string(const char* key) const { return fields_.string(config_, prefix_, key); }

  std::string optional_string(const char* key, const std::string& fallback) const {
    return fields_.optional_string(config_, prefix_, key, fallback);
  }

  // A square kernel's side: an array of two equal positive integers ([2, 2]).
  int64_t square_kernel(const char* key) const {
    const Json* value = find(key);
    if (value == nullptr || !value->is_array() || value->size() != 2 ||
        !(*value)[0].is_number_integer() || (*value)[0].get<int64_t>() < 1 ||
        (*value)[0] != (*value)[1]) {
      fail(key, "expected two equal positive integers (a square kernel), got " +
                    (value ? render(*value) : std::string("nothing")));
    }
    return (*value)[0].get<int64_t>();
  }

  // Layer indices in [0, num_layers); absent or null reads as none.
  std::set<int64_t> layer_list(const char* key, int64_t num_layers) const {
    std::set<int64_t> layers;
    const Json* value = find(key);
    if (!value) {
      return layers;
    }
    if (!value->is_array()) {
      fail(key, "expected an array of layer indices, got " + render(*value));
    }
    for (size_t i = 0; i < value->size(); ++i) {
      const Json& v = (*value)[i];
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= num_layers) {
        fail(fmt::format("{}[{}]", key, i),
             fmt::format("expected a layer index in [0, {}), got {}", num_layers, render(v)));
      }
      layers.insert(v.get<int64_t>());
    }
    return layers;
  }

 private:
  const Json& config_;
  JsonFieldReader<Json> fields_;
  std::string prefix_;
};

// Multi-head latent attention is read only for the model types whose rules say so; any other
// config carrying its keys is refused (checked before the model_type so that, say, a DeepSeek-V2
// config is told why).
void refuse_inexpressible(const ConfigReader& in) {
  const Json* type = in.find("model_type");
  const bool mla_type =
      type != nullptr && type->is_string() &&
      std::any_of(arch_rules().begin(), arch_rules().end(), [&](const ArchRules& r) {
        return r.mla && type->get<std::string>() == r.model_type;
      });
  if (!mla_type) {
    for (const char* key : {"kv_lora_rank", "q_lora_rank"}) {
      if (in.has(key)) {
        in.fail(key,
                "multi-head latent attention (MLA) is imported only for model types deepseek_v3 "
                "and kimi_k2 (DeepSeek-V3/R1, Kimi-K2), deepseek_v32 and glm_moe_dsa "
                "(DeepSeek-V3.2, GLM-5)");
      }
    }
  }
}

// Layers of type `counted` in layer_types, an array of num_hidden_layers strings each
// "full_attention" or `counted`; -1 when the config has none. Any other entry fails with
// "expected <expected>, got <entry><note>".
int64_t count_layer_types(const ConfigReader& in, int64_t num_layers, const char* counted,
                          const char* expected, const char* note) {
  const Json* types = in.find("layer_types");
  if (types == nullptr) {
    return -1;
  }
  if (!types->is_array() || static_cast<int64_t>(types->size()) != num_layers) {
    in.fail("layer_types", fmt::format("expected an array of num_hidden_layers ({}) strings, got {}",
                                       num_layers, render(*types)));
  }
  int64_t count = 0;
  for (size_t i = 0; i < types->size(); ++i) {
    const Json& t = (*types)[i];
    const std::string type = t.is_string() ? t.get<std::string>() : "";
    if (type == counted) {
      ++count;
    } else if (type != "full_attention") {
      in.fail(fmt::format("layer_types[{}]", i),
              fmt::format("expected {}, got {}{}", expected, render(t), note));
    }
  }
  return count;
}

// Layers that attend over a sliding window, from layer_types: "full_attention" or
// "sliding_attention" per layer (gpt-oss); anything else is refused.
int64_t sliding_layers_from_types(const ConfigReader& in, int64_t num_layers) {
  const int64_t sliding = count_layer_types(
      in, num_layers, "sliding_attention", "\"full_attention\" or \"sliding_attention\"",
      ": servesim's cost and memory models have no other attention layers "
      "(chunked, linear)");
  if (sliding == num_layers) {
    in.fail("layer_types", "every layer is sliding_attention; servesim needs at least one "
                           "full_attention layer (its paged KV holds the full layers)");
  }
  return std::max<int64_t>(sliding, 0);
}

// One block of a vision encoder: two LayerNorms (weight and bias), qkv and the output
// projection with biases, and a two-layer MLP with biases.
int64_t vision_block_params(const VisionEncoderSpec& e) {
  const int64_t h = e.hidden_size;
  return 4 * h + 3 * h * h + 3 * h + h * h + h + 2 * h * e.intermediate_size + e.intermediate_size +
         h;
}

// The config keys of a vision tower's sizes (layers, hidden, MLP, heads); patch_size is the same
// key in every config.
struct TowerKeys {
  const char* layers;
  const char* hidden;
  const char* intermediate;
  const char* heads;
};

// A vision tower's sizes read from vision_config `v` (spatial_merge and param_count left to the
// caller).
VisionEncoderSpec tower_sizes(const ConfigReader& v, const TowerKeys& keys) {
  VisionEncoderSpec e;
  e.num_layers = static_cast<int>(v.positive_integer(keys.layers));
  e.hidden_size = v.positive_integer(keys.hidden);
  e.intermediate_size = v.positive_integer(keys.intermediate);
  e.num_heads = static_cast<int>(v.positive_integer(keys.heads));
  e.patch_size = v.positive_integer("patch_size");
  return e;
}

// A patch merger: a LayerNorm of `norm` (weight and bias), then the patches_per_token() x hidden
// merged features -> the same -> `out`, with biases.
int64_t merger_params(const VisionEncoderSpec& e, int64_t norm, int64_t out) {
  const int64_t merged = e.hidden_size * e.patches_per_token();
  return 2 * norm + merged * merged + merged + merged * out + out;
}

// Qwen3.5's vision tower (the Qwen3-VL vision transformer of vision_config): a Conv3d patch
// embedding (in_channels x temporal_patch_size x patch_size^2 -> hidden, with bias), learned
// position embeddings, depth blocks of two LayerNorms, qkv and proj with biases and a 2-layer
// GELU MLP with biases, and the patch merger (LayerNorm, then spatial_merge_size^2 x hidden ->
// the same -> out_hidden_size, with biases), once more per deepstack layer with its norm after the
// merge.
VisionEncoderSpec qwen_vision_encoder(const ConfigReader& v) {
  VisionEncoderSpec e = tower_sizes(v, {"depth", "hidden_size", "intermediate_size", "num_heads"});
  e.spatial_merge = v.positive_integer("spatial_merge_size");
  const int64_t h = e.hidden_size;
  const int64_t embed = v.positive_integer("in_channels") *
                            v.positive_integer("temporal_patch_size") * e.patch_size *
                            e.patch_size * h +
                        h + v.positive_integer("num_position_embeddings") * h;
  const int64_t out = v.positive_integer("out_hidden_size");
  const auto deepstack =
      static_cast<int64_t>(v.layer_list("deepstack_visual_indexes", e.num_layers).size());
  e.param_count = embed + e.num_layers * vision_block_params(e) + merger_params(e, h, out) +
                  deepstack * merger_params(e, h * e.patches_per_token(), out);
  return e;
}

// Kimi-K2.5's MoonViT (vision_config, "vt_" keys): a Conv2d patch embedding (3 x patch_size^2 ->
// hidden, with bias) and a learned init_pos_emb_height x init_pos_emb_width position grid (the
// temporal one is fixed sin-cos), vt_num_hidden_layers blocks as Qwen's, a final LayerNorm, and
// the patch merger: a LayerNorm, then merge_kernel_size^2 x hidden -> the same -> text_hidden_size,
// with biases.
VisionEncoderSpec moonvit_encoder(const ConfigReader& v) {
  VisionEncoderSpec e = tower_sizes(v, {"vt_num_hidden_layers", "vt_hidden_size",
                                        "vt_intermediate_size", "vt_num_attention_heads"});
  e.spatial_merge = v.square_kernel("merge_kernel_size");
  const int64_t h = e.hidden_size;
  const int64_t embed =
      3 * e.patch_size * e.patch_size * h + h +
      v.positive_integer("init_pos_emb_height") * v.positive_integer("init_pos_emb_width") * h;
  const int64_t final_norm = 2 * h;
  e.param_count = embed + e.num_layers * vision_block_params(e) + final_norm +
                  merger_params(e, h, v.positive_integer("text_hidden_size"));
  return e;
}

// Multimodal wrappers whose language model servesim imports from their text_config, served
// text-only unless a workload sends images, and how their vision encoder is read from
// vision_config. Kimi-K2.5: a kimi_k2 language model beside a MoonViT vision tower; Qwen3.5:
// qwen3_5 / qwen3_5_moe around a qwen3_5_text / qwen3_5_moe_text language model.
struct MultimodalWrapper {
  const char* model_type;
  VisionEncoderSpec (*vision_encoder)(const ConfigReader& vision_config);
};
constexpr std::array<MultimodalWrapper, 3> kMultimodalWrappers = {{
    {"kimi_k25", moonvit_encoder},
    {"qwen3_5", qwen_vision_encoder},
    {"qwen3_5_moe", qwen_vision_encoder},
}};

// The config's wrapper when it is one of kMultimodalWrappers, else nullptr.
const MultimodalWrapper* multimodal_wrapper(const ConfigReader& outer) {
  const std::string type = outer.optional_string("model_type", "");
  for (const MultimodalWrapper& wrapper : kMultimodalWrappers) {
    if (type == wrapper.model_type) return &wrapper;
  }
  return nullptr;
}

const ArchRules& rules_for(const ConfigReader& in) {
  const std::string model_type = in.string("model_type");
  for (const ArchRules& r : arch_rules()) {
    if (model_type == r.model_type) {
      return r;
    }
  }
  in.fail("model_type", fmt::format("\"{}\" is not supported; supported model types are: {}",
                                    model_type, fmt::join(supported_hf_model_types(), ", ")));
}

// Sliding-window attention changes both the KV a layer keeps and the attention work; servesim's
// models have neither, so any layer whose window is shorter than the context is refused.
void refuse_sliding_window(const ConfigReader& in, const ArchRules& rules, int64_t num_layers,
                           int64_t max_positions) {
  // Absent: the config class's default; null: no window.
  int64_t window = rules.default_sliding_window;
  if (in.present("sliding_window")) {
    window = in.optional_positive_integer("sliding_window", 0);
  }
  if (window <= 0 || window >= max_positions) {
    return;
  }
  if (rules.sliding_every_layer) {
    in.fail("sliding_window",
            fmt::format("every layer attends over a sliding window of {} tokens (below "
                        "max_position_embeddings {}); servesim's cost and memory models attend "
                        "over the whole context, so this model cannot be imported",
                        window, max_positions));
  }
  if (rules.qwen_sliding && in.optional_bool("use_sliding_window", false)) {
    const int64_t full_layers = in.optional_positive_integer("max_window_layers", 28);
    if (full_layers < num_layers) {
      in.fail("use_sliding_window",
              fmt::format("layers {} to {} attend over a sliding window of {} tokens "
                          "(max_window_layers {}); servesim's cost and memory models attend over "
                          "the whole context, so this model cannot be imported",
                          full_layers, num_layers - 1, window, full_layers));
    }
  }
}

// Parameter counts of one config, by the rule stated in hf_import.h.
struct Counts {
  int64_t embedding = 0;
  int64_t lm_head = 0;           // 0 when tied to the embedding
  int64_t dense_layer = 0;       // one layer with a dense MLP
  int64_t moe_layer = 0;         // one MoE layer, every expert
  int64_t moe_layer_active = 0;  // one MoE layer as one token uses it: router + top_k experts
  int64_t num_layers = 0;
  int64_t num_moe_layers = 0;
  int64_t final_norm = 0;
  // Hybrid models: the layer counts above are of full-attention layers; each of the
  // num_linear_layers linear-attention layers has linear_minus_full more parameters.
  int64_t num_linear_layers = 0;
  int64_t linear_minus_full = 0;
  // A multimodal wrapper's vision tower: loaded with the weights, run by no text token.
  int64_t vision_tower = 0;

  int64_t num_dense_layers() const { return num_layers - num_moe_layers; }
  int64_t total() const {
    return embedding + lm_head + num_dense_layers() * dense_layer + num_moe_layers * moe_layer +
           final_norm + num_linear_layers * linear_minus_full + vision_tower;
  }
  int64_t active() const {
    return embedding + lm_head + num_dense_layers() * dense_layer +
           num_moe_layers * moe_layer_active + final_norm + num_linear_layers * linear_minus_full;
  }
};

// The last part of a "org/name" id or path.
std::string last_part(const std::string& id) {
  const size_t slash = id.find_last_of('/');
  return slash == std::string::npos ? id : id.substr(slash + 1);
}

// A Hugging Face hub id: "org/name", no leading '/' or '.', no spaces.
bool looks_like_hub_id(const std::string& id) {
  return !id.empty() && std::count(id.begin(), id.end(), '/') == 1 && id.front() != '/' &&
         id.front() != '.' && id.back() != '/' && id.find(' ') == std::string::npos;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Removes the scratch folder of write_catalog_model on every path out; never throws.
class ScratchDir {
 public:
  explicit ScratchDir(fs::path path) : path_(std::move(path)) {}
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

}  // namespace

std::vector<std::string> supported_hf_model_types() {
  std::vector<std::string> types;
  for (const ArchRules& r : arch_rules()) {
    types.emplace_back(r.model_type);
  }
  for (const MultimodalWrapper& wrapper : kMultimodalWrappers) {
    types.emplace_back(wrapper.model_type);
  }
  std::sort(types.begin(), types.end());
  return types;
}

nlohmann::ordered_json read_hf_config(const std::string& path) {
  Json config = parse_json_file<Json>(path);
  if (!config.is_object()) {
    throw InputError(path, 0, "expected a JSON object at the top level (a config.json)");
  }
  return config;
}

namespace {

// The sizes every architecture has, read and cross-checked. head_dim is 0 for MLA models, whose
// head size comes from their attention keys (mla_attention).
struct Dimensions {
  int64_t hidden = 0;
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate = 0;
  int64_t vocab = 0;
  int64_t max_positions = 0;
};

Dimensions read_dimensions(const ConfigReader& in, const ArchRules& rules) {
  Dimensions d;
  d.hidden = in.positive_integer("hidden_size");
  d.layers = in.positive_integer("num_hidden_layers");
  d.heads = in.positive_integer("num_attention_heads");
  d.kv_heads = in.optional_positive_integer("num_key_value_heads", d.heads);
  if (d.heads % d.kv_heads != 0) {
    in.fail("num_key_value_heads", fmt::format("expected a divisor of num_attention_heads ({}), "
                                               "got {}",
                                               d.heads, d.kv_heads));
  }
  if (!rules.mla) {
    if (in.has("head_dim")) {
      d.head_dim = in.positive_integer("head_dim");
    } else if (d.hidden % d.heads != 0) {
      in.fail("head_dim", fmt::format("missing, and hidden_size ({}) is not a multiple of "
                                      "num_attention_heads ({}); expected a positive integer",
                                      d.hidden, d.heads));
    } else {
      d.head_dim = d.hidden / d.heads;
    }
  }
  // Qwen3.5's MoE language model has no dense layer and leaves intermediate_size out.
  d.intermediate = rules.moe && rules.linear_attention && !in.has("intermediate_size")
                       ? in.positive_integer("moe_intermediate_size")
                       : in.positive_integer("intermediate_size");
  d.vocab = in.positive_integer("vocab_size");
  d.max_positions = in.positive_integer("max_position_embeddings");
  return d;
}

// Which linear layers carry biases, and whether the LM head shares the embedding's weights.
struct Biases {
  bool tie_word_embeddings = false;
  bool attention = false;  // the config's attention_bias, where the architecture reads it
  bool mlp = false;        // the config's mlp_bias, where the architecture reads it
  bool qkv = false;        // q/k/v projections carry a bias (always, or through attention_bias)
};

Biases read_biases(const ConfigReader& in, const ArchRules& rules) {
  Biases b;
  b.tie_word_embeddings = in.optional_bool("tie_word_embeddings", false);
  b.attention = rules.attention_bias_key && in.optional_bool("attention_bias", false);
  b.mlp = rules.mlp_bias_key && in.optional_bool("mlp_bias", false);
  b.qkv = rules.qkv_bias || b.attention;
  return b;
}

// One layer's attention weights and the KV cache elements it stores per token.
struct Attention {
  int64_t params = 0;
  int64_t kv_bytes_16bit_per_layer = 0;  // per token, with a 16-bit cache
  int64_t head_dim = 0;
  Json mla = nullptr;  // the model file's "mla" object (MLA models only)
  Json dsa = nullptr;  // the model file's "dsa" object (DeepSeek Sparse Attention only)
  bool output_gate = false;  // gated attention: q_proj also yields the output gate
};

// Grouped-query attention: q/k/v/o projections, their biases, per-head q/k norms, sinks.
Attention gqa_attention(const ConfigReader& in, const ArchRules& rules, const Dimensions& d,
                        const Biases& b) {
  const int64_t q_width = d.heads * d.head_dim;
  const int64_t kv_width = d.kv_heads * d.head_dim;
  Attention a;
  a.head_dim = d.head_dim;
  a.kv_bytes_16bit_per_layer = 2 * 2 * kv_width;
  a.output_gate = rules.linear_attention && (rules.output_gate_key == nullptr ||
                                             in.optional_bool(rules.output_gate_key, true));
  const int64_t q_out = a.output_gate ? 2 * q_width : q_width;  // the gate doubles q_proj
  a.params = d.hidden * q_out + 2 * d.hidden * kv_width + q_width * d.hidden;
  if (b.qkv) {
    a.params += q_width + 2 * kv_width;
  }
  if (b.attention && !rules.attention_bias_qkv_only) {
    a.params += d.hidden;  // o_proj bias
  }
  if (rules.qk_norm) {
    a.params += 2 * d.head_dim;
  } else if (rules.qk_norm_key != nullptr && in.optional_bool(rules.qk_norm_key, false)) {
    const std::string type = in.optional_string("qk_norm_type", "per_head");
    if (type != "per_head" && type != "per_layer") {
      in.fail("qk_norm_type",
              fmt::format("expected \"per_head\" or \"per_layer\", got \"{}\"", type));
    }
    a.params += type == "per_layer" ? q_width + kv_width : 2 * d.head_dim;
  }
  if (rules.attention_sinks) {
    a.params += d.heads;
  }
  return a;
}

// Multi-head latent attention: q_a (hidden -> rq) + its RMSNorm + q_b (rq -> H*(dn+dr)), or
// q_proj without a q LoRA; kv_a (hidden -> r+dr) + its RMSNorm over r; kv_b (r -> H*(dn+dv));
// o (H*dv -> hidden). The cache holds the latent and the rope key: r + dr per token and layer.
Attention mla_attention(const ConfigReader& in, const Dimensions& d, const Biases& b) {
  const int64_t q_lora = in.mla_rank("q_lora_rank");
  const int64_t r = in.positive_integer("kv_lora_rank");
  const int64_t dn = in.positive_integer("qk_nope_head_dim");
  const int64_t dr = in.positive_integer("qk_rope_head_dim");
  const int64_t dv = in.positive_integer("v_head_dim");
  Attention a;
  a.head_dim = dn + dr;
  const int64_t q = q_lora > 0 ? d.hidden * q_lora + q_lora + q_lora * d.heads * a.head_dim
                               : d.hidden * d.heads * a.head_dim;
  a.params = q + d.hidden * (r + dr) + r + r * d.heads * (dn + dv) + d.heads * dv * d.hidden;
  if (b.attention) {
    a.params += d.hidden;
  }
  a.kv_bytes_16bit_per_layer = 2 * (r + dr);
  a.mla = Json::object();
  a.mla["q_lora_rank"] = q_lora;
  a.mla["kv_lora_rank"] = r;
  a.mla["qk_nope_head_dim"] = dn;
  a.mla["qk_rope_head_dim"] = dr;
  a.mla["v_head_dim"] = dv;
  return a;
}

// DeepSeek Sparse Attention's lightning indexer, added to an MLA layer: wq_b (q_lora_rank ->
// index_n_heads * index_head_dim, from MLA's query latent), wk (hidden -> index_head_dim) with its
// LayerNorm (weight and bias), weights_proj (hidden -> index_n_heads, the per-head gates). Its key
// cache: index_head_dim FP8 bytes plus an fp32 scale per 128 (DsaSpec in hardware.h).
void add_indexer(const ConfigReader& in, const Dimensions& d, Attention* a) {
  const int64_t q_lora = a->mla["q_lora_rank"].get<int64_t>();
  if (q_lora == 0) {
    in.fail("q_lora_rank",
            "expected a positive integer: the sparse-attention indexer reads the query latent");
  }
  // GLM-5.2's indexer_types: "shared" layers reuse another layer's selection instead of scoring
  // the keys themselves, which the cost model does not represent.
  if (const Json* types = in.find("indexer_types")) {
    const bool all_full =
        types->is_array() && std::all_of(types->begin(), types->end(), [](const Json& t) {
          return t.is_string() && t.get<std::string>() == "full";
        });
    if (!all_full) {
      in.fail("indexer_types",
              "expected every layer \"full\": layers that share another "
              "layer's top-k selection are not modelled");
    }
  }
  DsaSpec dsa;
  dsa.index_heads = in.positive_integer("index_n_heads");
  dsa.index_head_dim = in.positive_integer("index_head_dim");
  dsa.index_topk = in.positive_integer("index_topk");
  a->params += q_lora * dsa.index_heads * dsa.index_head_dim +
               d.hidden * (dsa.index_head_dim + dsa.index_heads) + 2 * dsa.index_head_dim;
  a->kv_bytes_16bit_per_layer += dsa.index_key_bytes_per_token();
  a->dsa = Json::object();
  a->dsa["index_n_heads"] = dsa.index_heads;
  a->dsa["index_head_dim"] = dsa.index_head_dim;
  a->dsa["index_topk"] = dsa.index_topk;
}

// Gated DeltaNet layers of a hybrid model: which layers (layer_types "linear_attention" /
// "full_attention", else every full_attention_interval-th layer is full attention), the sizes,
// and one layer's parameters: in_proj_qkvz (hidden -> 2 key_dim + 2 value_dim), in_proj_ba
// (hidden -> 2 value_heads), the depthwise conv1d (conv_dim x kernel, no bias), dt_bias and
// A_log (value_heads each), the gated RMSNorm (value_head_dim), out_proj (value_dim -> hidden).
struct LinearLayers {
  LinearAttentionSpec spec;
  int64_t params_per_layer = 0;
  Json doc = nullptr;  // the model file's "linear_attention" object
};

int64_t count_linear_layers(const ConfigReader& in, int64_t num_layers) {
  const int64_t linear = count_layer_types(in, num_layers, "linear_attention",
                                           "\"linear_attention\" or \"full_attention\"", "");
  if (linear >= 0) return linear;
  const int64_t interval = in.positive_integer("full_attention_interval");
  return num_layers - num_layers / interval;
}

LinearLayers linear_layers(const ConfigReader& in, const Dimensions& d) {
  LinearLayers l;
  LinearAttentionSpec& s = l.spec;
  const int64_t linear = count_linear_layers(in, d.layers);
  if (linear == 0 || linear == d.layers) {
    in.fail("layer_types", fmt::format("expected both linear_attention and full_attention layers, "
                                       "got {} linear of {}",
                                       linear, d.layers));
  }
  s.num_linear_layers = static_cast<int>(linear);
  s.key_heads = in.positive_integer("linear_num_key_heads");
  s.value_heads = in.positive_integer("linear_num_value_heads");
  s.key_head_dim = in.positive_integer("linear_key_head_dim");
  s.value_head_dim = in.positive_integer("linear_value_head_dim");
  s.conv_kernel = in.positive_integer("linear_conv_kernel_dim");
  if (s.value_heads % s.key_heads != 0) {
    in.fail("linear_num_value_heads", fmt::format("expected a multiple of linear_num_key_heads "
                                                  "({}), got {}",
                                                  s.key_heads, s.value_heads));
  }
  const std::string ssm_dtype = in.optional_string("mamba_ssm_dtype", "bfloat16");
  s.state_bytes = ssm_dtype == "float32" ? 4 : 2;
  l.params_per_layer = d.hidden * (2 * s.key_dim() + 2 * s.value_dim()) +
                       d.hidden * 2 * s.value_heads + s.conv_dim() * s.conv_kernel +
                       2 * s.value_heads + s.value_head_dim + s.value_dim() * d.hidden;
  l.doc = Json::object();
  l.doc["num_linear_layers"] = s.num_linear_layers;
  l.doc["num_key_heads"] = s.key_heads;
  l.doc["num_value_heads"] = s.value_heads;
  l.doc["key_head_dim"] = s.key_head_dim;
  l.doc["value_head_dim"] = s.value_head_dim;
  l.doc["conv_kernel"] = s.conv_kernel;
  l.doc["state_bytes"] = s.state_bytes;
  return l;
}

// The model file's "attention_window" object, or null when no layer attends over a window.
Json attention_window(const ConfigReader& in, int64_t num_layers) {
  const int64_t sliding_layers = sliding_layers_from_types(in, num_layers);
  if (sliding_layers == 0) {
    return nullptr;
  }
  Json window = Json::object();
  window["sliding_window"] = in.positive_integer("sliding_window");
  window["num_sliding_layers"] = sliding_layers;
  return window;
}

// How many layers are MoE, as the transformers decoder layers decide it: Qwen's
// decoder_sparse_step / mlp_only_layers, DeepSeek's first_k_dense_replace / moe_layer_freq.
int64_t count_moe_layers(const ConfigReader& in, const ArchRules& rules, int64_t num_layers) {
  int64_t sparse_step = 1;
  std::set<int64_t> dense_only;
  int64_t first_moe = 0;
  int64_t moe_freq = 1;
  if (rules.sparse_layers) {
    sparse_step = in.optional_positive_integer("decoder_sparse_step", 1);
    dense_only = in.layer_list("mlp_only_layers", num_layers);
  }
  if (rules.first_k_dense) {
    first_moe = in.non_negative_integer("first_k_dense_replace");
    moe_freq = in.optional_positive_integer("moe_layer_freq", 1);
  }
  int64_t moe_layers = 0;
  for (int64_t i = 0; i < num_layers; ++i) {
    if (dense_only.count(i) == 0 && (i + 1) % sparse_step == 0 && i >= first_moe &&
        i % moe_freq == 0) {
      ++moe_layers;
    }
  }
  return moe_layers;
}

// The router's weights: one row per expert, plus gpt-oss's router bias or DeepSeek-V3's / GLM's
// e_score_correction_bias.
int64_t router_params(const ConfigReader& in, const ArchRules& rules, int64_t experts,
                      int64_t hidden) {
  const bool score_bias = rules.router_score_bias == ScoreBias::kAlways ||
                          (rules.router_score_bias == ScoreBias::kUnderNoauxTc &&
                           in.optional_string("topk_method", "") == "noaux_tc");
  const bool keyed_bias =
      rules.router_bias_key != nullptr && in.optional_bool(rules.router_bias_key, false);
  return experts * hidden + (rules.router_bias || score_bias || keyed_bias ? experts : 0);
}

// Counts a MoE model's MoE layers into `counts` (a layer's attention and norms are `layer_shared`)
// and returns the model file's "moe" object, or null when no layer is MoE.
Json moe_layers(const ConfigReader& in, const ArchRules& rules, const Dimensions& d,
                int64_t layer_shared, Counts* counts) {
  const int64_t experts = in.positive_integer(rules.experts_key);
  const int64_t top_k = in.positive_integer("num_experts_per_tok");
  if (top_k > experts) {
    in.fail("num_experts_per_tok",
            fmt::format("expected at most {} ({}), got {}", rules.experts_key, experts, top_k));
  }
  const int64_t expert_size =
      rules.expert_size_key ? in.positive_integer("moe_intermediate_size") : d.intermediate;
  int64_t shared_size =
      rules.shared_expert ? in.non_negative_integer("shared_expert_intermediate_size") : 0;
  if (rules.shared_experts_count) {
    shared_size = in.non_negative_integer("n_shared_experts") * expert_size;
  }
  if (rules.plain_shared_size_key != nullptr && in.has(rules.plain_shared_size_key)) {
    shared_size = in.non_negative_integer(rules.plain_shared_size_key);
  }
  counts->num_moe_layers = count_moe_layers(in, rules, d.layers);
  const int64_t router = router_params(in, rules, experts, d.hidden);
  const int64_t expert_mlp =
      3 * d.hidden * expert_size + (rules.expert_bias ? 2 * expert_size + d.hidden : 0);
  // The shared expert: a gated MLP every token runs (Qwen2-MoE adds a sigmoid gate, hidden -> 1).
  const int64_t shared_mlp =
      shared_size > 0 ? 3 * d.hidden * shared_size + (rules.shared_expert ? d.hidden : 0) : 0;
  counts->moe_layer = layer_shared + router + experts * expert_mlp + shared_mlp;
  counts->moe_layer_active = layer_shared + router + top_k * expert_mlp + shared_mlp;
  if (counts->num_moe_layers == 0) {
    return nullptr;
  }
  Json moe = Json::object();
  moe["num_experts"] = experts;
  moe["top_k"] = top_k;
  moe["moe_every_layer"] = counts->num_dense_layers() == 0;
  moe["expert_intermediate_size"] = expert_size;
  if (rules.shared_expert || rules.shared_experts_count || rules.plain_shared_size_key != nullptr) {
    moe["shared_expert_intermediate_size"] = shared_size;
  }
  if (counts->num_dense_layers() > 0) {
    moe["num_moe_layers"] = counts->num_moe_layers;
  }
  if (const Json* coef = in.find("router_aux_loss_coef")) {
    moe["router_aux_loss_coef"] = *coef;
  }
  return moe;
}

// Where the model file says it comes from: the options where given, else from the config.
struct Provenance {
  std::string hf_id;
  std::string name;
  std::string source;
  std::string license_note;
};

Provenance read_provenance(const ConfigReader& in, const HfImportOptions& options,
                           const std::string& file) {
  Provenance p;
  p.hf_id = options.hf_id;
  if (p.hf_id.empty()) {
    const std::string name_or_path = in.optional_string("_name_or_path", "");
    if (looks_like_hub_id(name_or_path)) {
      p.hf_id = name_or_path;
    }
  }
  p.name = options.name;
  if (p.name.empty()) {
    p.name = !p.hf_id.empty() ? last_part(p.hf_id) : options.key;
  }
  if (p.name.empty()) {
    in.fail("", "no display name: give a name, an hf_id or a catalog key");
  }
  p.source = options.source;
  if (p.source.empty()) {
    p.source = p.hf_id.empty()
                   ? fmt::format("config.json imported from {}", file)
                   : fmt::format("{} config.json (https://huggingface.co/{}), imported from {}",
                                 p.hf_id, p.hf_id, file);
  }
  p.license_note = options.license_note.empty()
                       ? "not recorded at import: see the model's own license - facts only"
                       : options.license_note;
  return p;
}

// The model file's "param_count_breakdown" object.
Json param_breakdown(const Counts& counts) {
  Json breakdown = Json::object();
  breakdown["embedding"] = counts.embedding;
  breakdown["lm_head_untied"] = counts.lm_head;
  if (counts.num_moe_layers == 0) {
    breakdown["per_layer"] = counts.dense_layer;
  } else if (counts.num_dense_layers() == 0) {
    breakdown["per_layer"] = counts.moe_layer;
  } else {
    breakdown["per_moe_layer"] = counts.moe_layer;
    breakdown["num_moe_layers"] = counts.num_moe_layers;
    breakdown["per_dense_layer"] = counts.dense_layer;
    breakdown["num_dense_layers"] = counts.num_dense_layers();
  }
  breakdown["num_layers"] = counts.num_layers;
  if (counts.vision_tower > 0) breakdown["vision_tower"] = counts.vision_tower;
  if (counts.num_linear_layers > 0) {
    breakdown["num_linear_attention_layers"] = counts.num_linear_layers;
    breakdown["linear_minus_full_attention_per_layer"] = counts.linear_minus_full;
  }
  return breakdown;
}

// The checkpoint's quant_method (quantization_config), or "" for an unquantised checkpoint.
std::string checkpoint_quantization(const ConfigReader& in) {
  const Json* quant = in.find("quantization_config");
  if (quant == nullptr) {
    return "";
  }
  if (!quant->is_object()) {
    in.fail("quantization_config", "expected an object, got " + render(*quant));
  }
  const Json* method = JsonFieldReader<Json>::find_optional(*quant, "quant_method");
  if (method == nullptr || !method->is_string() || method->get<std::string>().empty()) {
    in.fail("quantization_config.quant_method",
            "expected a non-empty string (e.g. \"fp8\", \"mxfp4\")");
  }
  return method->get<std::string>();
}

constexpr const char* kDerivedFieldsNote =
    "param_count*, kv_cache_bytes_per_token_16bit and weights_bytes_16bit are computed by "
    "`servesim models import` from the config (embeddings + per-layer attention/MLP/norm "
    "weights + final norm; biases where the architecture has them; per-head q/k norms where it "
    "has them; MoE layers: router + every expert in param_count, router + top_k experts in "
    "param_count_active_per_token, shared experts in both; MLA: the q and kv LoRA projections "
    "and their norms; DSA: the indexer's projections and key norm; Gated DeltaNet layers: their "
    "projections, convolution, gates and norm); everything else is copied from the config, with "
    "the transformers defaults for keys it leaves out.";

// Everything the model file holds about the architecture itself, in the catalog's key order.
Json architecture_fields(const ConfigReader& in, const ArchRules& rules, const Dimensions& d,
                         const Biases& b, const Attention& attention) {
  Json doc = Json::object();
  doc["model_type"] = rules.model_type;
  doc["hidden_size"] = d.hidden;
  doc["num_layers"] = d.layers;
  doc["num_attention_heads"] = d.heads;
  doc["num_key_value_heads"] = d.kv_heads;
  doc["head_dim"] = attention.head_dim;
  doc["intermediate_size"] = d.intermediate;
  doc["vocab_size"] = d.vocab;
  doc["max_position_embeddings"] = d.max_positions;
  doc["activation"] = in.optional_string("hidden_act", "silu");
  doc["gated_mlp"] = true;
  doc["tie_word_embeddings"] = b.tie_word_embeddings;
  doc["norm"] = "rmsnorm";
  doc["norm_eps"] = in.optional_positive_number("rms_norm_eps", rules.default_norm_eps);
  doc["rope_theta"] = in.optional_positive_number("rope_theta", rules.default_rope_theta);
  const Json* rope_scaling = in.find("rope_scaling");
  doc["rope_scaling"] = rope_scaling ? *rope_scaling : Json(nullptr);
  doc["qkv_bias"] = b.qkv;
  // True only when every linear layer carries a bias (as for OPT); Llama's attention_bias alone
  // adds q/k/v/o biases, which qkv_bias and the counts record.
  doc["linear_bias"] = b.attention && b.mlp;
  if (rules.qwen_sliding) {
    const Json* window = in.find("sliding_window");
    doc["sliding_window"] = window ? *window : Json(nullptr);
    doc["use_sliding_window"] = in.optional_bool("use_sliding_window", false);
  }
  return doc;
}

}  // namespace

nlohmann::ordered_json import_hf_config(const nlohmann::ordered_json& config,
                                        const HfImportOptions& options) {
  const std::string file = options.config_file.empty() ? "config.json" : options.config_file;
  if (!config.is_object()) {
    throw InputError(file, 0, "expected a JSON object at the top level (a config.json)");
  }
  const ConfigReader outer(config, file);
  const MultimodalWrapper* wrapper = multimodal_wrapper(outer);
  const ConfigReader in =
      wrapper == nullptr ? outer : ConfigReader(outer.object("text_config"), file, "text_config");
  refuse_inexpressible(in);
  const ArchRules& rules = rules_for(in);
  const Dimensions d = read_dimensions(in, rules);
  refuse_sliding_window(in, rules, d.layers, d.max_positions);
  const Biases b = read_biases(in, rules);
  Attention attention = rules.mla ? mla_attention(in, d, b) : gqa_attention(in, rules, d, b);
  if (rules.dsa) add_indexer(in, d, &attention);
  const Json window = rules.linear_attention ? Json(nullptr) : attention_window(in, d.layers);
  const LinearLayers linear = rules.linear_attention ? linear_layers(in, d) : LinearLayers{};

  const int64_t layer_norms = 2 * d.hidden;  // input and post-attention RMSNorm
  // Gated MLP: gate and up (hidden -> intermediate), down (intermediate -> hidden).
  const int64_t dense_mlp =
      3 * d.hidden * d.intermediate + (b.mlp ? 2 * d.intermediate + d.hidden : 0);
  Counts counts;
  counts.embedding = d.vocab * d.hidden;
  counts.lm_head = b.tie_word_embeddings ? 0 : d.vocab * d.hidden;
  counts.num_layers = d.layers;
  counts.final_norm = d.hidden;
  counts.dense_layer = attention.params + layer_norms + dense_mlp;
  if (rules.linear_attention) {
    counts.num_linear_layers = linear.spec.num_linear_layers;
    counts.linear_minus_full = linear.params_per_layer - attention.params;
  }
  std::optional<VisionEncoderSpec> vision;
  if (wrapper != nullptr) {
    vision =
        wrapper->vision_encoder(ConfigReader(outer.object("vision_config"), file, "vision_config"));
    counts.vision_tower = vision->param_count;
  }
  const Json moe =
      rules.moe ? moe_layers(in, rules, d, attention.params + layer_norms, &counts) : Json(nullptr);
  const Provenance provenance = read_provenance(in, options, file);

  Json doc = Json::object();
  doc["name"] = provenance.name;
  doc["hf_id"] = provenance.hf_id.empty() ? Json(nullptr) : Json(provenance.hf_id);
  doc.update(architecture_fields(in, rules, d, b, attention));
  doc["moe"] = moe;
  if (rules.mla) {
    doc["mla"] = attention.mla;
  }
  if (rules.dsa) {
    doc["dsa"] = attention.dsa;
  }
  if (rules.linear_attention) {
    doc["linear_attention"] = linear.doc;
    doc["attention_output_gate"] = attention.output_gate;
  }
  if (!window.is_null()) {
    doc["attention_window"] = window;
  }
  doc["param_count"] = counts.total();
  doc["param_count_active_per_token"] = counts.active();
  doc["param_count_breakdown"] = param_breakdown(counts);
  doc["kv_cache_bytes_per_token_16bit"] =
      (d.layers - counts.num_linear_layers) * attention.kv_bytes_16bit_per_layer;
  doc["weights_bytes_16bit"] = 2 * counts.total();
  // A wrapper's quantization_config may sit beside its text_config.
  std::string quant = checkpoint_quantization(in);
  if (quant.empty() && wrapper != nullptr) quant = checkpoint_quantization(outer);
  if (!quant.empty()) doc["checkpoint_quantization"] = quant;
  if (wrapper != nullptr) {
    doc["multimodal"] = {
        {"model_type", wrapper->model_type},
        {"served",
         "the language model of text_config; a workload's images (workload.images) go through "
         "the vision encoder first"},
        {"vision_tower", fmt::format("{} parameters (vision_config) in param_count, loaded with "
                                     "the weights; not in the active count",
                                     counts.vision_tower)}};
    doc["vision_encoder"] = {{"num_layers", vision->num_layers},
                             {"hidden_size", vision->hidden_size},
                             {"intermediate_size", vision->intermediate_size},
                             {"num_heads", vision->num_heads},
                             {"patch_size", vision->patch_size},
                             {"spatial_merge_size", vision->spatial_merge},
                             {"param_count", vision->param_count}};
  }
  if (!options.expert_routing.empty()) {
    if (moe.is_null()) {
      throw std::invalid_argument(
          fmt::format("expert routing {} given for a dense model", options.expert_routing));
    }
    doc["expert_routing"] = parse_expert_routing(options.expert_routing).name();
    if (!options.expert_routing_note.empty()) {
      doc["expert_routing_note"] = options.expert_routing_note;
    }
  }
  doc["source"] = provenance.source;
  doc["license_note"] = provenance.license_note;
  doc["derived_fields_note"] = kDerivedFieldsNote;
  doc["raw_config"] = config;
  return doc;
}

std::string default_catalog_key(const std::string& config_path,
                                const nlohmann::ordered_json& config) {
  std::string stem = fs::path(config_path).filename().string();
  if (ends_with(boost::algorithm::to_lower_copy(stem), ".json")) {
    stem.resize(stem.size() - 5);
  }
  for (const char* suffix : {".config", "_config", "-config"}) {
    if (ends_with(boost::algorithm::to_lower_copy(stem), suffix)) {
      stem.resize(stem.size() - std::strlen(suffix));
      break;
    }
  }
  if (const size_t sep = stem.rfind("--"); sep != std::string::npos) {
    stem = stem.substr(sep + 2);
  }
  stem = boost::algorithm::to_lower_copy(stem);
  if (stem != "config" && valid_catalog_key(stem)) {
    return stem;
  }
  if (config.is_object()) {
    auto it = config.find("_name_or_path");
    if (it != config.end() && it->is_string()) {
      const std::string from_name =
          boost::algorithm::to_lower_copy(last_part(it->get<std::string>()));
      if (valid_catalog_key(from_name)) {
        return from_name;
      }
    }
  }
  if (stem == "config") {
    // A model's own folder ("Qwen3-32B/config.json"), or the Hugging Face cache's
    // "models--Qwen--Qwen3-32B/snapshots/<commit>/config.json".
    const fs::path dir = fs::absolute(fs::path(config_path)).lexically_normal().parent_path();
    std::string folder = dir.filename().string();
    if (dir.parent_path().filename() == "snapshots") {
      folder = dir.parent_path().parent_path().filename().string();
    }
    if (const size_t sep = folder.rfind("--"); sep != std::string::npos) {
      folder = folder.substr(sep + 2);
    }
    folder = boost::algorithm::to_lower_copy(folder);
    if (valid_catalog_key(folder) && folder.find_first_of("0123456789") != std::string::npos) {
      return folder;
    }
  }
  return "";
}

bool valid_catalog_key(const std::string& key) {
  if (key.empty() || key.size() > 100 || !std::isalnum(static_cast<unsigned char>(key[0]))) {
    return false;
  }
  return std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
  });
}

WrittenModel write_catalog_model(const nlohmann::ordered_json& doc, const std::string& key,
                                 const std::string& dir, bool force) {
  if (!valid_catalog_key(key)) {
    throw std::invalid_argument(fmt::format(
        "catalog key \"{}\": expected lower-case letters, digits, '.', '-' or '_'", key));
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw InputError(dir, 0, "not a directory (expected the model catalog folder)");
  }
  const fs::path target = fs::path(dir) / (key + ".json");
  const auto exists_error = [&] {
    return InputError(
        target.string(), 0,
        fmt::format("catalog key \"{}\" exists already; pass --force to replace it", key));
  };
  WrittenModel written;
  written.path = target.string();
  written.replaced = fs::exists(target, ec);
  if (written.replaced && !force) {
    throw exists_error();
  }

  // A hidden scratch folder beside the catalog (same file system, so the move is a rename);
  // ModelCatalog::load reads only regular *.json files of a folder, never subfolders.
  const ScratchDir scratch(fs::path(dir) / fmt::format(".import-{}-{}", key, ::getpid()));
  fs::remove_all(scratch.path(), ec);
  if (!fs::create_directory(scratch.path(), ec)) {
    throw InputError(scratch.path().string(), 0,
                     "cannot create a scratch folder in the catalog: " + ec.message());
  }
  const fs::path staged = scratch.path() / (key + ".json");
  {
    std::ofstream out(staged, std::ios::binary | std::ios::trunc);
    out << doc.dump(2) << "\n";
    out.close();
    if (!out) {
      throw InputError(staged.string(), 0, "cannot write file");
    }
  }
  try {
    ModelCatalog::load(scratch.path().string());
  } catch (const InputError& e) {
    throw InputError(target.string(), e.line(), e.message() + " (not written)");
  }

  if (force) {
    fs::rename(staged, target, ec);
    if (ec) {
      throw InputError(target.string(), 0, "cannot replace file: " + ec.message());
    }
  } else if (::link(staged.c_str(), target.c_str()) != 0) {
    if (errno == EEXIST) {
      throw exists_error();
    }
    throw InputError(target.string(), 0,
                     std::string("cannot create file: ") + std::strerror(errno));
  }

  const ModelCatalog catalog = ModelCatalog::load(dir);
  written.spec = catalog.get(key);
  written.catalog_models = catalog.all().size();
  return written;
}

}  // namespace servesim::models
