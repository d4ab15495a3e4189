// Importing a Hugging Face `config.json` into servesim's model catalog (models/catalog/models/).
//
// Contract:
// - import_hf_config is a pure function from a parsed config.json to the catalog document that
//   ModelCatalog::load (hardware.h) reads: the architecture fields copied from the config, the
//   derived counts (param_count, param_count_active_per_token, param_count_breakdown,
//   kv_cache_bytes_per_token_16bit, weights_bytes_16bit), provenance, and the config verbatim as
//   raw_config. The counts follow the rule the shipped catalog files were computed with:
//   embeddings + (untied) LM head + per layer (attention projections, their biases where the
//   architecture has them, Qwen3's per-head q/k RMSNorm weights, MLP or router + experts, two
//   RMSNorms) + the final norm. Re-importing a shipped file's raw_config reproduces its counts
//   exactly (tests/unit/models/hf_import_test.cc).
// - Supported model_type values: see supported_hf_model_types(). Dense: llama, mistral, qwen2,
//   qwen3. MoE: mixtral, qwen2_moe, qwen3_moe, gpt_oss (sliding-window layers from layer_types,
//   expert / router / attention biases and attention sinks counted), deepseek_v3 and kimi_k2
//   (MLA, routed + shared experts, first_k_dense_replace dense layers, e_score_correction_bias
//   under noaux_tc routing; DeepSeek's multi-token-prediction layers,
//   num_nextn_predict_layers, are not part of the served model and are not counted), glm4_moe
//   (GLM-4.5 / 4.6 / 4.7: DeepSeek-V3's routed + shared experts, dense first layers and
//   score-correction bias, with grouped-query attention, q/k/v biases under attention_bias and
//   per-head q/k norms under use_qk_norm; its multi-token-prediction layer not counted either),
//   minimax_m2 (MiniMax-M2 / M2.5: grouped-query attention with q/k norms over every head at once
//   under use_qk_norm and qk_norm_type per_layer, every layer MoE with experts of
//   intermediate_size, a router score-correction bias under use_routing_bias; its
//   multi-token-prediction modules not counted), deepseek_v32 and glm_moe_dsa (DeepSeek-V3.2,
//   GLM-5: DeepSeek-V3's layout with DeepSeek Sparse Attention, a lightning indexer per layer whose
//   wq_b, wk, LayerNorm and weights_proj are counted; "dsa" holds index_n_heads, index_head_dim
//   and index_topk), qwen3_next and qwen3_5_text / qwen3_5_moe_text (Qwen3-Next, Qwen3.5: Gated
//   DeltaNet linear-attention layers from layer_types or full_attention_interval, counted as
//   in_proj_qkvz, in_proj_ba, the depthwise conv1d, dt_bias, A_log, the gated norm and out_proj;
//   gated full attention whose q_proj is twice as wide; "linear_attention" holds the sizes and the
//   state's bytes per element from mamba_ssm_dtype; Qwen2-MoE's gated shared expert; the MTP
//   layers not counted). Multimodal wrappers are imported from their text_config (kimi_k25,
//   qwen3_5, qwen3_5_moe): the document is the language model's, with "multimodal" (the
//   wrapper's model_type) and the whole config as raw_config, and "vision_encoder" (num_layers,
//   hidden_size, intermediate_size, num_heads, patch_size, spatial_merge_size, param_count) read
//   from vision_config (Qwen3.5: Qwen3-VL's encoder; Kimi-K2.5: MoonViT), whose parameters are
//   in param_count, not in the active count; errors name the key inside text_config or
//   vision_config.
// - The document adds "mla" (q_lora_rank, 0 without a query LoRA, kv_lora_rank, qk_nope_head_dim,
//   qk_rope_head_dim, v_head_dim; head_dim = qk_nope + qk_rope) for MLA models, "attention_window"
//   (sliding_window, num_sliding_layers) when layer_types has sliding_attention layers, and in
//   "moe" shared_expert_intermediate_size (DeepSeek: n_shared_experts * moe_intermediate_size)
//   and num_moe_layers when some layers are dense; "checkpoint_quantization" is the config's
//   quantization_config.quant_method (e.g. "fp8", "mxfp4") when it has one.
//   kv_cache_bytes_per_token_16bit is num_layers * 2 * kv_heads * head_dim * 2, or num_layers *
//   (kv_lora_rank + qk_rope) * 2 for MLA, plus num_layers * the indexer key's bytes for DSA
//   (DsaSpec::index_key_bytes_per_token).
// - Errors throw InputError naming the config file, the config key and what was expected (a
//   missing MLA field names that key). A config whose architecture servesim's cost model cannot
//   express (MLA under another model_type, chunked or linear attention layers, Mistral / Qwen
//   sliding windows below the context) is refused, never approximated. Parts a future cost model
//   might leave out would be refused unless HfImportOptions::allow_approximate is set and listed
//   under "cost_model_approximations"; none are at present.
// - read_hf_config and write_catalog_model are the only functions here that touch the file system.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/catalog/hardware.h"

namespace servesim::models {

struct HfImportOptions {
  std::string config_file;   // where the config came from; named in errors and the default source
  std::string key;           // catalog key (the file stem); the display name's last fallback
  std::string name;          // display name; empty: the last part of hf_id, else the key
  std::string hf_id;         // e.g. "Qwen/Qwen3-32B"; empty: _name_or_path when it is "org/name"
  std::string source;        // provenance; empty: "<hf_id> config.json, imported from <file>"
  std::string license_note;  // empty: a note to check the model's own license
  bool allow_approximate = false;  // import parts the cost model approximates (see above)
  // A MoE model's default expert routing (expert_routing.h), e.g. "power_law_1.2", with where the
  // estimate comes from; written as "expert_routing" / "expert_routing_note" when set. Throws
  // std::invalid_argument for a dense model or a name parse_expert_routing() does not accept.
  std::string expert_routing;
  std::string expert_routing_note;
};

// The model_type values import_hf_config accepts, sorted.
std::vector<std::string> supported_hf_model_types();

// Reads and parses a config.json, keeping its key order. Throws InputError (with the line of a
// syntax error) when the file cannot be read or is not a JSON object.
nlohmann::ordered_json read_hf_config(const std::string& path);

// The catalog document for `config` (a nlohmann::json converts implicitly; its keys are then
// sorted, as Hugging Face writes them anyway). Throws InputError as described above.
nlohmann::ordered_json import_hf_config(const nlohmann::ordered_json& config,
                                        const HfImportOptions& options);

// The catalog key a config file suggests: its file name without ".json" and a "config" suffix
// ("Qwen--Qwen3-32B.config.json", "Qwen--Qwen3-32B_config.json"), after the last "--" (the
// org--name convention), lower-cased: "qwen3-32b". A bare "config.json" falls back to the last
// part of `_name_or_path`, then to the name of its folder when that names a model (holds a digit):
// "Qwen3-32B/config.json", or the Hugging Face cache's
// "models--Qwen--Qwen3-32B/snapshots/<commit>/config.json". Returns "" when none gives a key.
std::string default_catalog_key(const std::string& config_path,
                                const nlohmann::ordered_json& config);

// True for a usable catalog key: lower-case letters, digits, '.', '-' and '_', starting with a
// letter or digit.
bool valid_catalog_key(const std::string& key);

struct WrittenModel {
  std::string path;           // the file written, <dir>/<key>.json
  bool replaced = false;      // an existing file of that key was overwritten (force)
  ModelSpec spec;             // the model as ModelCatalog::load reads it back
  size_t catalog_models = 0;  // models in `dir` after the write, all loaded
};

// Writes `doc` as <dir>/<key>.json: first alone into a scratch folder inside `dir` and loaded
// through ModelCatalog::load, then moved into place atomically (rename; without `force`, a hard
// link that fails when the file exists, so a concurrent writer is not clobbered), then the whole
// of `dir` is loaded again. REQUIRES: valid_catalog_key(key).
// Throws InputError naming <dir>/<key>.json when it exists and `force` is false (the file is left
// untouched), and whatever ModelCatalog::load throws when the document or the folder does not load.
WrittenModel write_catalog_model(const nlohmann::ordered_json& doc, const std::string& key,
                                 const std::string& dir, bool force);

}  // namespace servesim::models
