#include "models/catalog/hardware.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "models/catalog/json_fields.h"
#include "core/error.h"

namespace servesim::models {
namespace {

using CatalogJson = nlohmann::json;

constexpr double kBytesPerGib = 1024.0 * 1024.0 * 1024.0;
constexpr double kBytesPerMib = 1024.0 * 1024.0;
constexpr double kBytesPerGb = 1e9;
constexpr double kFlopsPerTflop = 1e12;

// The price entry preferred when a GPU lists several.
constexpr const char* kPreferredPriceKey = "runpod_on_demand_2026_03";

using FieldReader = JsonFieldReader<CatalogJson>;

// A GPU figure the catalog may leave out; absent or null reads as 0 ("unknown" / "unsupported").
double optional_figure(const FieldReader& reader, const CatalogJson& gpu, const std::string& prefix,
                       const char* key) {
  return reader.optional_positive_number(gpu, prefix, key, 0, "a positive number or null");
}

// Price rule: the RunPod on-demand snapshot when listed, else the plain-number entry whose key
// sorts first (ranges given as [low, high] arrays are skipped).
double read_price(const FieldReader& reader, const CatalogJson& gpu, const std::string& prefix) {
  const CatalogJson& prices = reader.object(gpu, prefix, "price_usd_per_gpu_hour");
  const std::string path = join_path(prefix, "price_usd_per_gpu_hour");
  std::vector<std::pair<std::string, double>> plain;
  for (auto it = prices.begin(); it != prices.end(); ++it) {
    if (it.value().is_number()) {
      plain.emplace_back(it.key(),
                         reader.positive_number_at(it.value(), join_path(path, it.key())));
    }
  }
  if (plain.empty()) {
    reader.fail(path, "expected at least one entry with a plain positive number");
  }
  for (const auto& [key, value] : plain) {
    if (key == kPreferredPriceKey) {
      return value;
    }
  }
  std::sort(plain.begin(), plain.end());
  return plain.front().second;
}

GpuSpec read_gpu(const FieldReader& reader, const std::string& key, const CatalogJson& gpu,
                 const std::string& prefix) {
  if (!gpu.is_object()) {
    reader.fail(prefix, "expected an object, got " + render(gpu));
  }
  GpuSpec spec;
  spec.key = key;
  spec.name = reader.string(gpu, prefix, "name");
  spec.arch = reader.string(gpu, prefix, "arch");
  spec.form_factor = reader.string(gpu, prefix, "form_factor");
  spec.memory_bytes =
      std::llround(reader.positive_number(gpu, prefix, "memory_capacity_gib") * kBytesPerGib);
  spec.mem_bw_bytes_per_s =
      reader.positive_number(gpu, prefix, "memory_bandwidth_gbs") * kBytesPerGb;
  spec.bf16_flops_per_s = reader.positive_number(gpu, prefix, "bf16_tflops_dense") * kFlopsPerTflop;
  spec.fp8_flops_per_s = optional_figure(reader, gpu, prefix, "fp8_tflops_dense") * kFlopsPerTflop;
  spec.fp4_flops_per_s = optional_figure(reader, gpu, prefix, "fp4_tflops_dense") * kFlopsPerTflop;
  spec.measured_matmul_bf16_flops_per_s =
      optional_figure(reader, gpu, prefix, "measured_mamf_bf16_tflops") * kFlopsPerTflop;
  spec.measured_matmul_fp8_flops_per_s =
      optional_figure(reader, gpu, prefix, "measured_mamf_fp8_tflops") * kFlopsPerTflop;
  spec.sm_count = reader.positive_int(gpu, prefix, "sm_count");
  spec.l2_bytes = std::llround(reader.positive_number(gpu, prefix, "l2_cache_mb") * kBytesPerMib);

  // NVLink: the per-direction figure when given, else half of the bidirectional per-GPU total.
  double nvlink_gbs = optional_figure(reader, gpu, prefix, "nvlink_gbs_per_direction");
  if (nvlink_gbs == 0) {
    nvlink_gbs = optional_figure(reader, gpu, prefix, "nvlink_gbs_per_gpu") / 2;
  }
  spec.nvlink_bytes_per_s_per_direction = nvlink_gbs * kBytesPerGb;
  if (nvlink_gbs > 0) {
    // PCIe cards reach NVLink through a bridge between two boards; SXM parts sit on an NVSwitch
    // baseboard of 8.
    // baseboard of 8; a rack-scale system names its domain (nvlink_domain_gpus, 72 for NVL72).
    spec.nvlink_max_tp = spec.form_factor.rfind("PCIe", 0) == 0 ? 2 : 8;
    if (gpu.contains("nvlink_domain_gpus")) {
      spec.nvlink_max_tp = reader.positive_int(gpu, prefix, "nvlink_domain_gpus");
    }
  }
  spec.pcie_bytes_per_s_per_direction =
      reader.positive_number(gpu, prefix, "pcie_gbs_per_direction") * kBytesPerGb;
  spec.scale_out_bytes_per_s_per_direction =
      optional_figure(reader, gpu, prefix, "scale_out_gbs_per_direction") * kBytesPerGb;
  spec.tdp_w = reader.positive_number(gpu, prefix, "tdp_w");
  spec.price_usd_per_hour = read_price(reader, gpu, prefix);

  if (spec.measured_matmul_bf16_flops_per_s > spec.bf16_flops_per_s) {
    reader.fail(join_path(prefix, "measured_mamf_bf16_tflops"),
                "measured matmul rate exceeds the bf16 peak (bf16_tflops_dense)");
  }
  if (spec.fp4_flops_per_s > 0 && spec.fp4_flops_per_s < spec.fp8_flops_per_s) {
    reader.fail(join_path(prefix, "fp4_tflops_dense"),
                "expected at least the fp8 peak (fp8_tflops_dense)");
  }
  if (spec.fp8_flops_per_s > 0 && spec.measured_matmul_fp8_flops_per_s > spec.fp8_flops_per_s) {
    reader.fail(join_path(prefix, "measured_mamf_fp8_tflops"),
                "measured matmul rate exceeds the fp8 peak (fp8_tflops_dense)");
  }
  return spec;
}

// The object at doc[key], or nullptr when the key is absent or null; fails on anything else.
const CatalogJson* optional_block(const FieldReader& reader, const CatalogJson& doc,
                                  const char* key) {
  auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) {
    return nullptr;
  }
  if (!it->is_object()) {
    reader.fail(key, "expected an object or null, got " + render(*it));
  }
  return &*it;
}

// The "vision_encoder" section of a multimodal model whose param_count is `model_params`.
VisionEncoderSpec read_vision_encoder(const FieldReader& reader, const CatalogJson& v,
                                      int64_t model_params) {
  const char* at = "vision_encoder";
  VisionEncoderSpec vision;
  vision.num_layers = reader.positive_int(v, at, "num_layers");
  vision.hidden_size = reader.positive_integer(v, at, "hidden_size");
  vision.intermediate_size = reader.positive_integer(v, at, "intermediate_size");
  vision.num_heads = reader.positive_int(v, at, "num_heads");
  vision.patch_size = reader.positive_integer(v, at, "patch_size");
  vision.spatial_merge = reader.positive_integer(v, at, "spatial_merge_size");
  vision.param_count = reader.positive_integer(v, at, "param_count");
  if (vision.hidden_size % vision.num_heads != 0) {
    reader.fail("vision_encoder.num_heads",
                fmt::format("expected a divisor of vision_encoder.hidden_size ({}), got {}",
                            vision.hidden_size, vision.num_heads));
  }
  if (vision.param_count >= model_params) {
    reader.fail("vision_encoder.param_count",
                fmt::format("expected less than param_count ({}), which includes it, got {}",
                            model_params, vision.param_count));
  }
  return vision;
}

ModelSpec read_model(const FieldReader& reader, const std::string& key, const CatalogJson& doc) {
  if (!doc.is_object()) {
    reader.fail("", "expected a JSON object at the top level");
  }
  const std::string root;
  ModelSpec spec;
  spec.key = key;
  spec.name = reader.string(doc, root, "name");
  if (auto it = doc.find("hf_id"); it != doc.end() && it->is_string()) {
    spec.hf_id = it->get<std::string>();
  }
  if (doc.contains("checkpoint_quantization")) {
    spec.checkpoint_quantization = reader.string(doc, root, "checkpoint_quantization");
  }
  if (doc.contains("expert_routing")) {
    try {
      spec.expert_routing =
          parse_expert_routing(reader.string(doc, root, "expert_routing"));
    } catch (const std::invalid_argument& e) {
      reader.fail("expert_routing", e.what());
    }
  }
  spec.hidden_size = reader.positive_integer(doc, root, "hidden_size");
  spec.num_layers = reader.positive_int(doc, root, "num_layers");
  spec.num_attention_heads = reader.positive_int(doc, root, "num_attention_heads");
  spec.num_kv_heads = reader.positive_int(doc, root, "num_key_value_heads");
  spec.head_dim = reader.positive_integer(doc, root, "head_dim");
  spec.intermediate_size = reader.positive_integer(doc, root, "intermediate_size");
  spec.vocab_size = reader.positive_integer(doc, root, "vocab_size");
  spec.max_position_embeddings = reader.positive_integer(doc, root, "max_position_embeddings");
  spec.gated_mlp = reader.boolean(doc, root, "gated_mlp");
  spec.tie_word_embeddings = reader.boolean(doc, root, "tie_word_embeddings");
  spec.param_count = reader.positive_integer(doc, root, "param_count");
  spec.weights_bytes_16bit = reader.positive_integer(doc, root, "weights_bytes_16bit");

  if (spec.num_attention_heads % spec.num_kv_heads != 0) {
    reader.fail("num_key_value_heads",
                fmt::format("expected a divisor of num_attention_heads ({}), got {}",
                            spec.num_attention_heads, spec.num_kv_heads));
  }
  if (spec.weights_bytes_16bit != 2 * spec.param_count) {
    reader.fail("weights_bytes_16bit", fmt::format("expected 2 * param_count = {}, got {}",
                                                   2 * spec.param_count, spec.weights_bytes_16bit));
  }
  if (const CatalogJson* it = optional_block(reader, doc, "moe")) {
    MoeSpec moe;
    moe.num_experts = reader.positive_int(*it, "moe", "num_experts");
    moe.experts_per_token = reader.positive_int(*it, "moe", "top_k");
    moe.expert_intermediate_size = reader.positive_integer(*it, "moe", "expert_intermediate_size");
    if (moe.experts_per_token > moe.num_experts) {
      reader.fail("moe.top_k", fmt::format("expected at most moe.num_experts ({}), got {}",
                                           moe.num_experts, moe.experts_per_token));
    }
    if (it->contains("shared_expert_intermediate_size")) {
      moe.shared_expert_intermediate_size =
          reader.non_negative_integer(*it, "moe", "shared_expert_intermediate_size");
    }
    moe.num_moe_layers = spec.num_layers;
    if (it->contains("num_moe_layers")) {
      moe.num_moe_layers = reader.positive_int(*it, "moe", "num_moe_layers");
      if (moe.num_moe_layers > spec.num_layers) {
        reader.fail("moe.num_moe_layers", fmt::format("expected at most num_layers ({}), got {}",
                                                      spec.num_layers, moe.num_moe_layers));
      }
    }
    spec.moe = moe;
  }
  if (const CatalogJson* it = optional_block(reader, doc, "mla")) {
    MlaSpec mla;
    mla.q_lora_rank = reader.non_negative_integer(*it, "mla", "q_lora_rank");
    mla.kv_lora_rank = reader.positive_integer(*it, "mla", "kv_lora_rank");
    mla.qk_nope_head_dim = reader.positive_integer(*it, "mla", "qk_nope_head_dim");
    mla.qk_rope_head_dim = reader.positive_integer(*it, "mla", "qk_rope_head_dim");
    mla.v_head_dim = reader.positive_integer(*it, "mla", "v_head_dim");
    if (spec.head_dim != mla.qk_head_dim()) {
      reader.fail("head_dim", fmt::format("expected mla.qk_nope_head_dim + mla.qk_rope_head_dim = "
                                          "{} for an MLA model, got {}",
                                          mla.qk_head_dim(), spec.head_dim));
    }
    spec.mla = mla;
  }
  if (const CatalogJson* it = optional_block(reader, doc, "dsa")) {
    if (!spec.mla) {
      reader.fail("dsa",
                  "DeepSeek Sparse Attention needs an \"mla\" section (it indexes MLA's latent "
                  "cache)");
    }
    DsaSpec dsa;
    dsa.index_heads = reader.positive_integer(*it, "dsa", "index_n_heads");
    dsa.index_head_dim = reader.positive_integer(*it, "dsa", "index_head_dim");
    dsa.index_topk = reader.positive_integer(*it, "dsa", "index_topk");
    spec.dsa = dsa;
  }
  if (const CatalogJson* it = optional_block(reader, doc, "linear_attention")) {
    const char* at = "linear_attention";
    LinearAttentionSpec la;
    la.num_linear_layers = reader.positive_int(*it, at, "num_linear_layers");
    la.key_heads = reader.positive_integer(*it, at, "num_key_heads");
    la.value_heads = reader.positive_integer(*it, at, "num_value_heads");
    la.key_head_dim = reader.positive_integer(*it, at, "key_head_dim");
    la.value_head_dim = reader.positive_integer(*it, at, "value_head_dim");
    la.conv_kernel = reader.positive_integer(*it, at, "conv_kernel");
    la.state_bytes = reader.positive_integer(*it, at, "state_bytes");
    if (la.num_linear_layers >= spec.num_layers) {
      reader.fail("linear_attention.num_linear_layers",
                  fmt::format("expected fewer than num_layers ({}): at least one full-attention "
                              "layer, got {}",
                              spec.num_layers, la.num_linear_layers));
    }
    if (la.value_heads % la.key_heads != 0) {
      reader.fail("linear_attention.num_value_heads",
                  fmt::format("expected a multiple of num_key_heads ({}), got {}", la.key_heads,
                              la.value_heads));
    }
    spec.linear_attention = la;
  }
  if (doc.contains("attention_output_gate")) {
    spec.attention_output_gate = reader.boolean(doc, root, "attention_output_gate");
  }
  if (const CatalogJson* it = optional_block(reader, doc, "attention_window")) {
    spec.sliding_window = reader.positive_integer(*it, "attention_window", "sliding_window");
    spec.num_sliding_layers = reader.positive_int(*it, "attention_window", "num_sliding_layers");
    if (spec.num_sliding_layers >= spec.num_layers) {
      reader.fail("attention_window.num_sliding_layers",
                  fmt::format("expected fewer than num_layers ({}): at least one full-attention "
                              "layer, got {}",
                              spec.num_layers, spec.num_sliding_layers));
    }
  }
  if (const CatalogJson* it = optional_block(reader, doc, "vision_encoder")) {
    spec.vision = read_vision_encoder(reader, *it, spec.param_count);
  }
  const int64_t kv_16bit = reader.positive_integer(doc, root, "kv_cache_bytes_per_token_16bit");
  if (kv_16bit != spec.kv_bytes_per_token(Dtype::kBf16)) {
    reader.fail(
        "kv_cache_bytes_per_token_16bit",
        fmt::format("expected {} = {}, got {}",
                    spec.dsa   ? "num_layers * ((mla.kv_lora_rank + mla.qk_rope_head_dim) "
                                 "* 2 + the indexer key's bytes)"
                    : spec.mla ? "num_layers * (mla.kv_lora_rank + mla.qk_rope_head_dim) * 2"
                    : spec.linear_attention
                        ? "2 * (num_layers - linear_attention.num_linear_layers) * "
                          "num_key_value_heads * head_dim * 2"
                        : "2 * num_layers * num_key_value_heads * head_dim * 2",
                    spec.kv_bytes_per_token(Dtype::kBf16), kv_16bit));
  }
  spec.diffusion = optional_block(reader, doc, "diffusion_llm") != nullptr;
  return spec;
}

template <typename Map>
std::vector<std::string> map_keys(const Map& map) {
  std::vector<std::string> keys;
  keys.reserve(map.size());
  for (const auto& [key, value] : map) {
    keys.push_back(key);
  }
  return keys;
}

template <typename Map>
const typename Map::mapped_type& lookup(const Map& map, const std::string& key, const char* what) {
  auto it = map.find(key);
  if (it == map.end()) {
    throw std::invalid_argument(fmt::format("unknown {} \"{}\"; valid values are: {}", what, key,
                                            fmt::join(map_keys(map), ", ")));
  }
  return it->second;
}

}  // namespace

namespace {

struct DtypeInfo {
  Dtype dtype;
  const char* name;
  WeightBytes weight_bytes;
};

// Block scales: fp8_block one fp32 (4 B) per 128 x 128 weights; nvfp4 one FP8 (1 B) per 16
// weights; int4_wo one 16-bit scale per 128 weights; mxfp4 one E8M0 (1 B) per 32 weights.
constexpr DtypeInfo kDtypes[] = {
    {Dtype::kBf16, "bf16", {2, 1}},
    {Dtype::kFp8, "fp8", {1, 1}},
    {Dtype::kFp8Block, "fp8_block", {128 * 128 + 4, 128 * 128}},
    {Dtype::kNvfp4, "nvfp4", {16 / 2 + 1, 16}},
    {Dtype::kInt4Wo, "int4_wo", {128 / 2 + 2, 128}},
    {Dtype::kMxfp4, "mxfp4", {32 / 2 + 1, 32}},
};

const DtypeInfo& info(Dtype d) {
  for (const DtypeInfo& i : kDtypes) {
    if (i.dtype == d) {
      return i;
    }
  }
  throw std::logic_error("unknown Dtype value");
}

}  // namespace

int64_t dtype_bytes(Dtype d) { return d == Dtype::kBf16 ? 2 : 1; }

bool is_kv_dtype(Dtype d) { return d == Dtype::kBf16 || d == Dtype::kFp8; }

const char* dtype_name(Dtype d) { return info(d).name; }

std::vector<std::string> weight_dtype_names() {
  std::vector<std::string> names;
  for (const DtypeInfo& i : kDtypes) {
    names.emplace_back(i.name);
  }
  return names;
}

std::vector<std::string> kv_dtype_names() { return {"bf16", "fp8"}; }

Dtype parse_dtype(const std::string& name) {
  for (const DtypeInfo& i : kDtypes) {
    if (name == i.name) {
      return i.dtype;
    }
  }
  throw std::invalid_argument(fmt::format("unknown dtype \"{}\"; valid values are: {}", name,
                                          fmt::join(weight_dtype_names(), ", ")));
}

WeightBytes weight_bytes_per_element(Dtype d) { return info(d).weight_bytes; }

int64_t weight_bytes(int64_t params, Dtype d, int64_t shards) {
  const WeightBytes w = weight_bytes_per_element(d);
  const int64_t divisor = w.den * shards;
  return (params * w.num + divisor - 1) / divisor;
}

double GpuSpec::peak_flops_per_s(Dtype d) const {
  switch (d) {
    case Dtype::kFp8:
    case Dtype::kFp8Block:
      return fp8_flops_per_s > 0 ? fp8_flops_per_s : bf16_flops_per_s;
    case Dtype::kNvfp4:
      return fp4_flops_per_s;
    case Dtype::kBf16:
    case Dtype::kInt4Wo:
    case Dtype::kMxfp4:
      break;
  }
  return bf16_flops_per_s;
}

double GpuSpec::measured_matmul_flops_per_s(Dtype d) const {
  switch (d) {
    case Dtype::kFp8:
    case Dtype::kFp8Block:
      return fp8_flops_per_s > 0 ? measured_matmul_fp8_flops_per_s
                                 : measured_matmul_bf16_flops_per_s;
    case Dtype::kNvfp4:
      return 0;
    case Dtype::kBf16:
    case Dtype::kInt4Wo:
    case Dtype::kMxfp4:
      break;
  }
  return measured_matmul_bf16_flops_per_s;
}

double GpuSpec::tp_link_bytes_per_s(int tp) const {
  if (nvlink_bytes_per_s_per_direction > 0 && tp <= nvlink_max_tp) {
    return nvlink_bytes_per_s_per_direction;
  }
  return scale_out_bytes_per_s_per_direction > 0 ? scale_out_bytes_per_s_per_direction
                                                 : pcie_bytes_per_s_per_direction;
}

int64_t ModelSpec::kv_bytes_per_token_per_layer(Dtype kv_dtype) const {
  if (dsa) {
    const int64_t cache =
        kv_dtype == Dtype::kBf16
            ? 2 * mla->kv_elements_per_token()
            : fp8_with_block_scales_bytes(mla->kv_lora_rank) + 2 * mla->qk_rope_head_dim;
    return cache + dsa->index_key_bytes_per_token();
  }
  const int64_t elements = mla ? mla->kv_elements_per_token() : 2 * num_kv_heads * head_dim;
  return elements * dtype_bytes(kv_dtype);
}

int64_t ModelSpec::kv_bytes_per_token(Dtype kv_dtype) const {
  return static_cast<int64_t>(num_layers - num_linear_layers()) *
         kv_bytes_per_token_per_layer(kv_dtype);
}

int64_t VisionEncoderSpec::image_patches(int64_t width, int64_t height) const {
  const int64_t unit = patch_size * spatial_merge;  // pixels of one token's side
  const auto units = [unit](int64_t pixels) {
    return std::max<int64_t>(1, (pixels + unit / 2) / unit);
  };
  return units(width) * units(height) * patches_per_token();
}

int64_t ModelSpec::kv_bytes_for_context(int64_t tokens, Dtype kv_dtype) const {
  // Linear-attention layers keep a fixed state, not KV (recurrent_state_bytes()).
  const int64_t windowed = sliding_window > 0 ? std::min(tokens, sliding_window) : tokens;
  return kv_bytes_per_token_per_layer(kv_dtype) *
         (num_full_attention_layers() * tokens + num_sliding_layers * windowed);
}

GpuCatalog GpuCatalog::load(const std::string& path) {
  const FieldReader reader(path);
  const CatalogJson doc = parse_json_file<CatalogJson>(path);
  if (!doc.is_object()) {
    reader.fail("", "expected a JSON object at the top level");
  }
  const CatalogJson& gpus = reader.object(doc, "", "gpus");
  GpuCatalog catalog;
  for (auto it = gpus.begin(); it != gpus.end(); ++it) {
    const std::string prefix = join_path("gpus", it.key());
    catalog.gpus_.emplace(it.key(), read_gpu(reader, it.key(), it.value(), prefix));
  }
  if (catalog.gpus_.empty()) {
    reader.fail("gpus", "expected at least one GPU");
  }
  return catalog;
}

const GpuSpec& GpuCatalog::get(const std::string& key) const { return lookup(gpus_, key, "GPU"); }

std::vector<std::string> GpuCatalog::keys() const { return map_keys(gpus_); }

ModelCatalog ModelCatalog::load(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw InputError(dir, 0, "not a directory (expected a folder of model *.json files)");
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".json") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    throw InputError(dir, 0, "no model *.json files found");
  }
  ModelCatalog catalog;
  for (const auto& file : files) {
    const FieldReader reader(file.string());
    const std::string key = file.stem().string();
    catalog.models_.emplace(key,
                            read_model(reader, key, parse_json_file<CatalogJson>(file.string())));
    catalog.files_.emplace(key, file.string());
  }
  return catalog;
}

ModelCatalog ModelCatalog::load(const std::vector<std::string>& dirs) {
  ModelCatalog catalog;
  for (const std::string& dir : dirs) {
    ModelCatalog one = load(dir);
    for (auto& [key, spec] : one.models_) {
      if (const auto it = catalog.files_.find(key); it != catalog.files_.end()) {
        throw InputError(one.files_.at(key), 0,
                         fmt::format("model \"{}\" is defined in {} too", key, it->second));
      }
      catalog.files_.emplace(key, one.files_.at(key));
      catalog.models_.emplace(key, std::move(spec));
    }
  }
  return catalog;
}

const ModelSpec& ModelCatalog::get(const std::string& key) const {
  return lookup(models_, key, "model");
}

std::vector<std::string> ModelCatalog::keys() const { return map_keys(models_); }

}  // namespace servesim::models
