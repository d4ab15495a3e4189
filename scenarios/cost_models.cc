#include "scenarios/cost_models.h"

#include <filesystem>
#include <map>
#include <mutex>

#include "models/cost/profiled_cost_model.h"

namespace servesim::scenarios {
namespace fs = std::filesystem;

const std::vector<profiles::Profile>& gpu_profiles(const DataRoot& root, const std::string& gpu,
                                                   bool with_moe,
                                                   const std::optional<std::string>& engine) {
  static std::mutex mutex;
  static std::map<std::tuple<std::string, std::string, bool, std::optional<std::string>>,
                  std::vector<profiles::Profile>>
      cache;
  std::lock_guard<std::mutex> lock(mutex);
  // Tables loaded with the MoE rows serve a dense model as well: never load the GPU's twice.
  if (auto full = cache.find(std::make_tuple(root.root, gpu, true, engine)); full != cache.end()) {
    return full->second;
  }
  auto key = std::make_tuple(root.root, gpu, with_moe, engine);
  auto it = cache.find(key);
  if (it == cache.end()) {
    profiles::LoadOptions options;
    options.moe = with_moe;
    options.engine = engine;
    it = cache.emplace(key, profiles::load_gpu_profiles((fs::path(root.root) / "profiles").string(),
                                                        gpu, options))
             .first;
  }
  return it->second;
}

std::unique_ptr<models::IterationCostModel> make_cost_model(const CostModelChoice& choice,
                                                            const models::Deployment& deployment,
                                                            const DataRoot& root) {
  if (choice.type == "roofline") return models::make_roofline_cost_model(deployment, choice.roofline);
  models::ProfiledParams p;
  p.roofline = choice.roofline;
  p.custom_allreduce = choice.custom_allreduce;
  p.moe_kernel_scale = choice.moe_kernel_scale;
  p.fused_activation_quantization = choice.fused_activation_quantization;
  p.engine_tables = choice.engine_tables;
  const bool moe = deployment.model->moe.has_value();
  const std::vector<profiles::Profile>* tables =
      &gpu_profiles(root, deployment.gpu->key, moe, choice.engine_tables);
  if (tables->empty()) {
    const Catalogs& cat = Catalogs::get(root);
    const auto donor = models::pick_donor_gpu(
        *deployment.gpu, cat.gpus, profiles::profiled_gpus((fs::path(root.root) / "profiles").string()));
    if (donor) {
      tables = &gpu_profiles(root, *donor, moe, choice.engine_tables);
      p.tables_gpu = &cat.gpus.get(*donor);
    }
  }
  return models::make_profiled_cost_model(deployment, *tables, p);
}

}  // namespace servesim::scenarios
