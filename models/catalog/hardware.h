// Hardware and model catalogs: value types loaded from JSON data files under models/catalog/.
//
// Contract: units are in the names (bytes, flops_per_s, bytes_per_s). Loading validates every
// field and throws InputError naming the file and the JSON path of the bad field.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/catalog/expert_routing.h"

namespace servesim::models {

// Numeric formats. Weights take any of them; the KV cache bf16 or fp8 (is_kv_dtype).
//   bf16       16-bit weights and math
//   fp8        FP8 E4M3 weights, one scale per tensor, FP8 tensor-core math
//   fp8_block  FP8 E4M3 weights, one fp32 scale per 128x128 block (DeepSeek-V3 / Kimi-K2
//              checkpoints): 1 + 4/16384 bytes per weight, FP8 tensor-core math
//   nvfp4      FP4 E2M1 weights, one FP8 scale per 16 weights: 4.5 bits per weight, FP4
//              tensor-core math (Blackwell); a GPU without FP4 tensor cores is refused
//   int4_wo    weight-only INT4, one 16-bit scale per 128 weights: 4.125 bits per weight streamed
//              from memory, dequantised to 16-bit math at the BF16 rate
//   mxfp4      OCP MX FP4 checkpoints (gpt-oss): FP4 E2M1 weights, one E8M0 scale per 32
//              weights (4.25 bits), run weight-only with 16-bit activations (the engines' W4A16
//              MXFP4 MoE kernels) at the BF16 rate on every GPU
enum class Dtype { kBf16, kFp8, kFp8Block, kNvfp4, kInt4Wo, kMxfp4 };
// Bytes of one element of a KV cache or 16-bit tensor: 2 for bf16, 1 for fp8 and fp8_block.
// REQUIRES: is_kv_dtype(d) or d == kFp8Block.
int64_t dtype_bytes(Dtype d);
bool is_kv_dtype(Dtype d);            // bf16 or fp8
const char* dtype_name(Dtype d);      // "bf16", "fp8", "fp8_block", "nvfp4", "int4_wo", "mxfp4"
Dtype parse_dtype(const std::string& name);  // throws std::invalid_argument listing valid names
std::vector<std::string> weight_dtype_names();  // every dtype, in enum order
std::vector<std::string> kv_dtype_names();      // "bf16", "fp8"

// Bytes one weight takes in `d`, block scales included, as the exact fraction num / den.
struct WeightBytes {
  int64_t num = 2;
  int64_t den = 1;
  double value() const { return static_cast<double>(num) / static_cast<double>(den); }
};
WeightBytes weight_bytes_per_element(Dtype d);
// ceil(params * weight_bytes_per_element(d) / shards): the bytes of `params` weights split evenly
// over `shards` GPUs. REQUIRES: params >= 0, shards >= 1.
int64_t weight_bytes(int64_t params, Dtype d, int64_t shards);

struct GpuSpec {
  std::string key;   // catalog key, e.g. "h100_sxm"
  std::string name;  // marketing name, e.g. "NVIDIA H100 SXM5 80GB"
  std::string arch;  // e.g. "Hopper (GH100, sm_90)"
  std::string form_factor;  // e.g. "SXM5", "PCIe Gen5 dual-slot"
  int64_t memory_bytes = 0;
  double mem_bw_bytes_per_s = 0;     // peak DRAM bandwidth
  double bf16_flops_per_s = 0;       // dense tensor-core peak
  double fp8_flops_per_s = 0;        // 0 when unsupported
  double fp4_flops_per_s = 0;        // dense FP4 (NVFP4) tensor-core peak; 0 when unsupported
  double measured_matmul_bf16_flops_per_s = 0;  // measured max achievable matmul, 0 if unknown
  double measured_matmul_fp8_flops_per_s = 0;
  int sm_count = 0;
  int64_t l2_bytes = 0;
  double nvlink_bytes_per_s_per_direction = 0;  // 0 when the GPU has no NVLink
  // The NVLink domain: the largest group of GPUs that all reach each other over NVLink. 8 on HGX /
  // SXM baseboards (NVSwitch), 72 in a GB200 / GB300 NVL72 rack (catalog field
  // nvlink_domain_gpus), 2 for PCIe cards with an NVLink bridge (pairs only), 0 without NVLink.
  int nvlink_max_tp = 0;
  double pcie_bytes_per_s_per_direction = 0;
  // Per-GPU scale-out network bandwidth (the NIC a group larger than the NVLink domain crosses);
  // 0 when the catalog does not give one (such a group then falls back to PCIe).
  double scale_out_bytes_per_s_per_direction = 0;
  double tdp_w = 0;
  double price_usd_per_hour = 0;  // indicative on-demand price

  // Dense tensor-core peak for GEMMs whose weights are in `d`: bf16, int4_wo and mxfp4 at the BF16 rate,
  // fp8 and fp8_block at the FP8 rate, nvfp4 at the FP4 rate. FP8 on a GPU without FP8 tensor
  // cores (A100) runs as weight-only FP8 at the BF16 rate, so the BF16 peak is returned; nvfp4 on
  // a GPU without FP4 returns 0 (validate_deployment refuses it).
  double peak_flops_per_s(Dtype d) const;
  // Measured maximum achievable matmul rate for `d` (same fallback as peak_flops_per_s), 0 when
  // unknown (always for nvfp4).
  double measured_matmul_flops_per_s(Dtype d) const;
  // Per-direction bandwidth of the link a `tp`-GPU all-reduce runs over: NVLink when the whole
  // group is inside one NVLink domain (tp <= nvlink_max_tp), else the scale-out NIC when the
  // catalog gives one, else PCIe.
  double tp_link_bytes_per_s(int tp) const;
};

// Mixture-of-experts MLP. Every token runs the router, its experts_per_token routed experts
// (gated MLPs of expert_intermediate_size) and, when shared_expert_intermediate_size > 0, a shared
// gated MLP of that width (DeepSeek: n_shared_experts * moe_intermediate_size; Qwen2-MoE:
// shared_expert_intermediate_size). Only num_moe_layers layers are MoE; the other layers
// (DeepSeek's first_k_dense_replace, Qwen's mlp_only_layers) run a dense gated MLP of the model's
// intermediate_size.
struct MoeSpec {
  int num_experts = 0;
  int experts_per_token = 0;
  int64_t expert_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0;
  int num_moe_layers = 0;
};

// Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2). Per layer and token the KV cache keeps
// one latent of kv_lora_rank plus one shared rotary key of qk_rope_head_dim; queries come from a
// low-rank projection when q_lora_rank > 0. Query/key heads are qk_nope + qk_rope wide, value
// heads v_head_dim. The cost formulas are in models/cost/roofline_terms.h.
struct MlaSpec {
  int64_t q_lora_rank = 0;  // 0: a plain q projection (hidden -> heads * qk_head_dim)
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;

  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  int64_t kv_elements_per_token() const { return kv_lora_rank + qk_rope_head_dim; }
};

// Bytes of `elements` FP8 values with one fp32 scale per 128 of them (the engines' FP8 caches of
// DeepSeek Sparse Attention: the indexer's keys, the sparse kernels' latent).
inline int64_t fp8_with_block_scales_bytes(int64_t elements) {
  return elements + 4 * ((elements + 127) / 128);
}

// DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5), on top of MLA. Per layer a lightning indexer
// scores every cached key for each query: index_heads heads of index_head_dim, FP8 in the engines,
// weighted by a per-head gate and summed after a ReLU; the query then attends (MLA in its absorbed,
// multi-query form) to the index_topk best-scoring keys only, so at most index_topk key positions
// per query. The indexer keeps its own key per token and layer: index_head_dim FP8 bytes plus one
// fp32 scale per 128 of them (132 bytes for index_head_dim 128), whatever the KV dtype.
struct DsaSpec {
  int64_t index_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;

  int64_t index_key_bytes_per_token() const { return fp8_with_block_scales_bytes(index_head_dim); }
};

// Gated DeltaNet linear attention (Qwen3-Next, Qwen3.5): num_linear_layers of the layers replace
// softmax attention with a gated delta-rule recurrence over key_heads x key_head_dim keys and
// value_heads x value_head_dim values, after a causal depthwise convolution of conv_kernel taps.
// Such a layer keeps no per-token KV: each sequence carries a fixed-size state instead, per layer
// value_heads x key_head_dim x value_head_dim elements of state_bytes (the config's
// mamba_ssm_dtype: 4 for float32, else 2) plus the convolution's last conv_kernel - 1 inputs of
// conv_dim() channels in 16 bits. Its projections: in (hidden -> 2 key_dim + 2 value_dim + 2
// value_heads: q, k, v, the output gate z, and the per-head beta and decay), out (value_dim ->
// hidden).
struct LinearAttentionSpec {
  int num_linear_layers = 0;
  int64_t key_heads = 0;
  int64_t value_heads = 0;
  int64_t key_head_dim = 0;
  int64_t value_head_dim = 0;
  int64_t conv_kernel = 0;
  int64_t state_bytes = 2;

  int64_t key_dim() const { return key_heads * key_head_dim; }
  int64_t value_dim() const { return value_heads * value_head_dim; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
  // One sequence's state in one linear-attention layer, in bytes.
  int64_t state_bytes_per_layer() const {
    return value_heads * key_head_dim * value_head_dim * state_bytes +
           conv_dim() * (conv_kernel - 1) * 2;
  }
};

// A multimodal model's vision encoder: a ViT beside the language model (Qwen3-VL's in Qwen3.5,
// MoonViT in Kimi-K2.5). An image is cut into patch_size x patch_size pixel patches; each of the
// num_layers blocks is a LayerNorm, qkv, attention of every patch of the image over every other
// (bidirectional), the output projection, a LayerNorm and a two-layer GELU MLP (not gated); a
// merger then folds spatial_merge x spatial_merge neighbouring patches into one token of the
// language model's prompt. param_count: the whole tower with its merger.
struct VisionEncoderSpec {
  int num_layers = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int num_heads = 0;
  int64_t patch_size = 0;
  int64_t spatial_merge = 0;
  int64_t param_count = 0;

  // Patches of one language-model token.
  int64_t patches_per_token() const { return spatial_merge * spatial_merge; }
  // Patches of a width x height image (pixels, each >= 1) as the models' image processors resize
  // it: each side rounded to the nearest multiple of patch_size x spatial_merge (at least one),
  // as Qwen-VL's smart_resize does, without its pixel limits.
  int64_t image_patches(int64_t width, int64_t height) const;
  // Language-model tokens of such an image: image_patches / patches_per_token().
  int64_t image_tokens(int64_t width, int64_t height) const {
    return image_patches(width, height) / patches_per_token();
  }
};

struct ModelSpec {
  std::string key;  // catalog key, e.g. "llama-3.1-8b"
  std::string name;
  std::string hf_id;  // Hugging Face id, e.g. "meta-llama/Llama-3.1-8B"; empty when unknown
  // How the published checkpoint is quantized (its config's quantization_config.quant_method,
  // e.g. "fp8" for DeepSeek-V3, "mxfp4" for gpt-oss); empty for a 16-bit checkpoint.
  std::string checkpoint_quantization;
  // How its tokens spread over the experts by default (MoE models; expert_routing.h): a
  // published estimate where the catalog file gives one ("expert_routing"), else random.
  ExpertRouting expert_routing;
  int64_t hidden_size = 0;
  int num_layers = 0;
  int num_attention_heads = 0;
  int num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  bool gated_mlp = true;
  bool tie_word_embeddings = false;
  std::optional<MoeSpec> moe;
  std::optional<MlaSpec> mla;
  std::optional<DsaSpec> dsa;  // only with mla
  std::optional<LinearAttentionSpec> linear_attention;  // hybrid models; the rest is full attention
  // Gated attention (Qwen3-Next, Qwen3.5): the q projection also yields a sigmoid gate per query
  // element that scales the attention output, doubling its width.
  bool attention_output_gate = false;
  // Sliding-window attention (gpt-oss): num_sliding_layers layers attend only to the last
  // sliding_window keys (the query included) and keep only those keys' KV; the other layers attend
  // over the whole context. 0 / 0 when every layer is full attention.
  int64_t sliding_window = 0;
  int num_sliding_layers = 0;
  int64_t param_count = 0;
  int64_t weights_bytes_16bit = 0;
  bool diffusion = false;  // a diffusion LLM (LLaDA, Dream)
  // A multimodal model's vision encoder (its weights are in param_count); unset for text models.
  std::optional<VisionEncoderSpec> vision;

  // KV bytes one layer keeps per token at the given KV dtype: 2 * kv_heads * head_dim, or for MLA
  // kv_lora_rank + qk_rope_head_dim (one latent shared by K and V and by every head). DSA adds the
  // indexer's key (DsaSpec::index_key_bytes_per_token), and its FP8 cache is the layout of the
  // engines' sparse MLA kernels (FlashMLA's, in vLLM and SGLang): the latent in FP8, one fp32
  // scale per 128 of it, the rotary key in 16 bits (656 bytes for DeepSeek-V3.2).
  int64_t kv_bytes_per_token_per_layer(Dtype kv_dtype) const;
  // KV bytes per token for the whole model, every softmax-attention layer (sliding-window layers
  // included, as for a context within the window; linear-attention layers keep none):
  // (num_layers - num_linear_layers()) * kv_bytes_per_token_per_layer.
  int64_t kv_bytes_per_token(Dtype kv_dtype) const;
  // KV bytes of the model for one sequence of `tokens` tokens: full-attention layers keep every
  // token, sliding-window layers at most sliding_window tokens.
  int64_t kv_bytes_for_context(int64_t tokens, Dtype kv_dtype) const;
  int num_linear_layers() const {
    return linear_attention ? linear_attention->num_linear_layers : 0;
  }
  int num_full_attention_layers() const {
    return num_layers - num_sliding_layers - num_linear_layers();
  }
  // A sequence's fixed-size recurrent state over every linear-attention layer (0 without any).
  int64_t recurrent_state_bytes() const {
    return linear_attention ? num_linear_layers() * linear_attention->state_bytes_per_layer() : 0;
  }
  int num_moe_layers() const { return moe ? moe->num_moe_layers : 0; }
};

// Where the catalogs live relative to the repository root (tests and the CLI run from there).
inline constexpr const char* kDefaultGpuCatalogPath = "models/catalog/gpus.json";
inline constexpr const char* kDefaultModelCatalogDir = "models/catalog/models";

class GpuCatalog {
 public:
  // Loads gpus.json. Throws InputError on malformed data.
  static GpuCatalog load(const std::string& path);
  // Throws std::invalid_argument listing valid keys.
  const GpuSpec& get(const std::string& key) const;
  std::vector<std::string> keys() const;
  const std::map<std::string, GpuSpec>& all() const { return gpus_; }

 private:
  std::map<std::string, GpuSpec> gpus_;
};

class ModelCatalog {
 public:
  // Loads every *.json in `dir`, keyed by file stem. Throws InputError on malformed data.
  static ModelCatalog load(const std::string& dir);
  // Loads each folder in turn (the shipped catalog, then a user's own folders). A key in two
  // folders is an InputError naming both files.
  static ModelCatalog load(const std::vector<std::string>& dirs);
  const ModelSpec& get(const std::string& key) const;
  std::vector<std::string> keys() const;
  const std::map<std::string, ModelSpec>& all() const { return models_; }

 private:
  std::map<std::string, ModelSpec> models_;
  std::map<std::string, std::string> files_;  // key -> the file it came from
};

}  // namespace servesim::models
