#include "app/models_cmd.h"

#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "models/catalog/hardware.h"
#include "models/catalog/hf_import.h"
#include "core/error.h"

namespace servesim::app {
namespace {

namespace fs = std::filesystem;

// Memory of the GPU the usage hint sizes tensor parallelism for (H100 / A100 80 GB class), and the
// share of it the 16-bit weights may take so that a KV cache still fits beside them.
constexpr double kHintGpuBytes = 80.0 * (1ull << 30);
constexpr double kHintWeightShare = 0.7;

// `p` relative to the working directory when it lies below it, else as given.
std::string display_path(const std::string& p) {
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  if (ec) {
    return p;
  }
  const fs::path rel = fs::absolute(p, ec).lexically_normal().lexically_proximate(cwd);
  if (ec || rel.empty() || *rel.begin() == "..") {
    return p;
  }
  return rel.string();
}

// The smallest power-of-two TP degree (up to 8) that divides the attention heads and leaves the
// 16-bit weights at most kHintWeightShare of an 80 GB GPU per rank; 0 when none does.
int suggested_tp(const models::ModelSpec& m) {
  for (int tp = 1; tp <= 8; tp *= 2) {
    if (m.num_attention_heads % tp == 0 &&
        static_cast<double>(m.weights_bytes_16bit) / tp <= kHintWeightShare * kHintGpuBytes) {
      return tp;
    }
  }
  return 0;
}

std::string moe_summary(const models::ModelSpec& m, const nlohmann::ordered_json& doc) {
  if (!m.moe) {
    return "none (dense)";
  }
  const auto& moe = doc.at("moe");
  std::string text = fmt::format("{} experts, top-{}, expert MLP {}", m.moe->num_experts,
                                 m.moe->experts_per_token, m.moe->expert_intermediate_size);
  if (moe.value("shared_expert_intermediate_size", int64_t{0}) > 0) {
    text += fmt::format(", shared expert MLP {}",
                        moe.at("shared_expert_intermediate_size").get<int64_t>());
  }
  if (moe.value("moe_every_layer", true)) {
    text += ", every layer";
  } else {
    text += fmt::format(", {} of {} layers", moe.at("num_moe_layers").get<int64_t>(), m.num_layers);
  }
  text += fmt::format(", {} routing by default", m.expert_routing.name());
  return text;
}

}  // namespace

int run_models_import(const std::string& config_path, const ModelsImportOptions& options,
                      const scenarios::DataRoot& root, std::ostream& out) {
  const nlohmann::ordered_json config = models::read_hf_config(config_path);

  std::string key = options.key;
  if (key.empty()) {
    key = models::default_catalog_key(config_path, config);
    if (key.empty()) {
      throw InputError(config_path, 0,
                       "cannot derive a catalog key from the file name or _name_or_path; pass "
                       "--key KEY");
    }
  } else if (!models::valid_catalog_key(key)) {
    throw InputError(config_path, 0,
                     fmt::format("--key \"{}\": expected lower-case letters, digits, '.', '-' or "
                                 "'_', starting with a letter or digit",
                                 key));
  }

  models::HfImportOptions import_options;
  import_options.config_file = config_path;
  import_options.key = key;
  import_options.name = options.name;
  import_options.hf_id = options.hf_id;
  import_options.source = options.source;
  import_options.license_note = options.license;
  import_options.allow_approximate = options.allow_approximate;
  import_options.expert_routing = options.expert_routing;
  import_options.expert_routing_note = options.expert_routing_note;
  nlohmann::ordered_json doc;
  try {
    doc = models::import_hf_config(config, import_options);
  } catch (const std::invalid_argument& e) {
    throw InputError(config_path, 0, fmt::format("--expert-routing: {}", e.what()));
  }

  const std::string dir = options.out_dir.empty() ? root.model_catalog_dir() : options.out_dir;
  if (!options.out_dir.empty()) {
    // A folder of the user's own: made if missing, and no key of the shipped catalog, which
    // SERVESIM_MODELS loads beside it.
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw InputError(dir, 0, fmt::format("cannot create the folder: {}", ec.message()));
    if (models::ModelCatalog::load(root.model_catalog_dir()).all().count(key) != 0) {
      throw InputError(config_path, 0,
                       fmt::format("catalog key \"{}\" is a model of the shipped catalog; pass "
                                   "another --key",
                                   key));
    }
  }
  const models::WrittenModel written = models::write_catalog_model(doc, key, dir, options.force);
  const models::ModelSpec& m = written.spec;

  const int64_t active = doc.at("param_count_active_per_token").get<int64_t>();
  const int64_t kv_bytes = m.kv_bytes_per_token(models::Dtype::kBf16);
  out << fmt::format("{} {}: {}{} ({})\n", written.replaced ? "replaced" : "added", key, m.name,
                     m.hf_id.empty() ? "" : fmt::format(", {}", m.hf_id),
                     doc.at("model_type").get<std::string>());
  out << fmt::format("  file          {}\n", display_path(written.path));
  out << fmt::format(
      "  shape         {} layers, hidden {}, {} heads / {} KV heads x {}, MLP {}, "
      "vocab {}, {} positions\n",
      m.num_layers, m.hidden_size, m.num_attention_heads, m.num_kv_heads, m.head_dim,
      m.intermediate_size, m.vocab_size, m.max_position_embeddings);
  out << fmt::format("  params        {:.2f} B ({}), 16-bit weights {:.2f} GB\n",
                     m.param_count / 1e9, m.param_count, m.weights_bytes_16bit / 1e9);
  out << fmt::format("  active        {:.2f} B per token ({})\n", active / 1e9, active);
  out << fmt::format("  KV cache      {:.1f} KiB per token at 16 bit ({} bytes)\n",
                     kv_bytes / 1024.0, kv_bytes);
  if (m.mla) {
    out << fmt::format(
        "  attention     MLA: KV latent {} + rotary key {} per layer, query LoRA {}, head dims "
        "{} (q/k) / {} (v)\n",
        m.mla->kv_lora_rank, m.mla->qk_rope_head_dim, m.mla->q_lora_rank, m.mla->qk_head_dim(),
        m.mla->v_head_dim);
  }
  if (m.dsa) {
    out << fmt::format(
        "  attention     DeepSeek Sparse Attention: an indexer of {} heads x {} scores every "
        "cached key, attention over the top {}; indexer key {} bytes per token and layer\n",
        m.dsa->index_heads, m.dsa->index_head_dim, m.dsa->index_topk,
        m.dsa->index_key_bytes_per_token());
  }
  if (const auto& la = m.linear_attention) {
    out << fmt::format(
        "  attention     {} of {} layers Gated DeltaNet ({} key / {} value heads of {} / {}): "
        "{:.1f} MiB of recurrent state per sequence{}\n",
        la->num_linear_layers, m.num_layers, la->key_heads, la->value_heads, la->key_head_dim,
        la->value_head_dim, m.recurrent_state_bytes() / (1024.0 * 1024.0),
        m.attention_output_gate ? "; gated full attention" : "");
  }
  if (m.num_sliding_layers > 0) {
    out << fmt::format("  attention     {} of {} layers attend over a sliding window of {} tokens\n",
                       m.num_sliding_layers, m.num_layers, m.sliding_window);
  }
  if (const auto& v = m.vision) {
    out << fmt::format(
        "  vision        {} layers of {}, {} heads, {}-pixel patches merged {} x {} per token: "
        "{:.2f} B parameters (workload.images)\n",
        v->num_layers, v->hidden_size, v->num_heads, v->patch_size, v->spatial_merge,
        v->spatial_merge, static_cast<double>(v->param_count) / 1e9);
  }
  out << fmt::format("  MoE           {}\n", moe_summary(m, doc));
  out << fmt::format("  catalog       {} {} from {}\n", written.catalog_models,
                     written.catalog_models == 1 ? "model loads" : "models load",
                     display_path(dir));
  if (auto it = doc.find("cost_model_approximations"); it != doc.end()) {
    for (const auto& note : *it) {
      out << fmt::format("warning: approximate: {}\n", note.get<std::string>());
    }
  }
  // Outside the data root, the catalog folder is found through SERVESIM_MODELS.
  const std::string env =
      options.out_dir.empty()
          ? ""
          : fmt::format("SERVESIM_MODELS={} ", std::filesystem::absolute(dir).lexically_normal().string());
  out << fmt::format("use it: \"model\": \"{}\" in a scenario", key);
  if (!env.empty()) out << fmt::format(" with {}in the environment", env);
  if (const int tp = suggested_tp(m); tp > 0) {
    out << fmt::format(", e.g. {}servesim check --set model={}{}\n", env, key,
                       tp > 1 ? fmt::format(" --set cluster.tp={}", tp) : "");
  } else {
    out << fmt::format(
        " (its 16-bit weights, {:.0f} GB, need more than 8 GPUs of 80 GB or fp8 "
        "weights)\n",
        m.weights_bytes_16bit / 1e9);
  }
  return 0;
}

}  // namespace servesim::app
