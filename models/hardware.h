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

namespace servesim::models {

// Numeric formats for weights, activations and KV cache.
enum class Dtype { kBf16, kFp8 };
int64_t dtype_bytes(Dtype d);         // 2 or 1
const char* dtype_name(Dtype d);      // "bf16" / "fp8"
Dtype parse_dtype(const std::string& name);  // throws std::invalid_argument listing valid names

struct GpuSpec {
  std::string key;   // catalog key, e.g. "h100_sxm"
  std::string name;  // marketing name, e.g. "NVIDIA H100 SXM5 80GB"
  std::string arch;  // e.g. "Hopper (GH100, sm_90)"
  std::string form_factor;  // e.g. "SXM5", "PCIe Gen5 dual-slot"
  int64_t memory_bytes = 0;
  double mem_bw_bytes_per_s = 0;     // peak DRAM bandwidth
  double bf16_flops_per_s = 0;       // dense tensor-core peak
  double fp8_flops_per_s = 0;        // 0 when unsupported
  double measured_matmul_bf16_flops_per_s = 0;  // measured max achievable matmul, 0 if unknown
  double measured_matmul_fp8_flops_per_s = 0;
  int sm_count = 0;
  int64_t l2_bytes = 0;
  double nvlink_bytes_per_s_per_direction = 0;  // 0 when the GPU has no NVLink
  // Largest TP group whose GPUs all reach each other over NVLink: 8 on SXM baseboards (NVSwitch),
  // 2 for PCIe cards with an NVLink bridge (pairs only), 0 without NVLink.
  int nvlink_max_tp = 0;
  double pcie_bytes_per_s_per_direction = 0;
  double tdp_w = 0;
  double price_usd_per_hour = 0;  // indicative on-demand price

  // Dense tensor-core peak for GEMMs whose weights are in `d`. FP8 on a GPU without FP8 tensor
  // cores (A100) runs as weight-only FP8 at the BF16 rate, so the BF16 peak is returned.
  double peak_flops_per_s(Dtype d) const;
  // Measured maximum achievable matmul rate for `d` (same fallback as peak_flops_per_s), 0 when
  // unknown.
  double measured_matmul_flops_per_s(Dtype d) const;
  // Per-direction bandwidth of the link a `tp`-GPU all-reduce runs over: NVLink when the whole
  // group is NVLink-connected (tp <= nvlink_max_tp), else PCIe.
  double tp_link_bytes_per_s(int tp) const;
};

struct MoeSpec {
  int num_experts = 0;
  int experts_per_token = 0;
  int64_t expert_intermediate_size = 0;
};

struct ModelSpec {
  std::string key;  // catalog key, e.g. "llama-3.1-8b"
  std::string name;
  std::string hf_id;  // Hugging Face id, e.g. "meta-llama/Llama-3.1-8B"; empty when unknown
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
  int64_t param_count = 0;
  int64_t weights_bytes_16bit = 0;
  bool diffusion = false;  // a diffusion LLM (LLaDA, Dream)

  // KV bytes per token for the whole model at the given KV dtype: 2 * layers * kv_heads * head_dim.
  int64_t kv_bytes_per_token(Dtype kv_dtype) const;
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
  const ModelSpec& get(const std::string& key) const;
  std::vector<std::string> keys() const;
  const std::map<std::string, ModelSpec>& all() const { return models_; }

 private:
  std::map<std::string, ModelSpec> models_;
};

}  // namespace servesim::models
