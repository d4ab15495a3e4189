// Choosing and building the cost model of a deployment: measured-profile driven ("profiled",
// the default) or the plain roofline. Profiles are read once per process and GPU.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/cost/cost_model.h"
#include "profiles/profile_tables.h"
#include "scenarios/scenario.h"

namespace servesim::scenarios {

// Every profile directory of `gpu` under <root>/profiles (cached; empty when there is none).
// with_moe = false leaves the MoE tables out (a dense model's cost model never reads them);
// `engine` admits the tables of that serving engine's own kernels only (profiles::LoadOptions).
const std::vector<profiles::Profile>& gpu_profiles(
    const DataRoot& root, const std::string& gpu, bool with_moe = true,
    const std::optional<std::string>& engine = std::nullopt);

// The scenario's `cost_model` section.
struct CostModelChoice {
  std::string type = "profiled";  // "profiled" (measured tables) or "roofline"
  models::RooflineParams roofline;  // knobs shared by both (overhead, fallbacks)
  bool custom_allreduce = true;     // profiled: vLLM's custom all-reduce rows (else NCCL rows)
  // profiled: a MoE model's routed experts x this (the serving engine's MoE kernels against the
  // tables; ProfiledParams::moe_kernel_scale). Not part of the scenario's section: an engine
  // model's calibration sets it.
  double moe_kernel_scale = 1.0;
  // profiled: ProfiledParams::fused_activation_quantization, set by an engine model that compiles
  // the tables' layers (EngineSetup::compiles_table_layers).
  bool fused_activation_quantization = false;
  // profiled: ProfiledParams::engine_tables, the engine model's own kernel tables
  // (EngineSetup::kernel_tables).
  std::string engine_tables = "";
};

// Builds the cost model for a deployment. A profiled model of a GPU without tables borrows the
// efficiency curves of a measured GPU of the same architecture and says so in describe().
std::unique_ptr<models::IterationCostModel> make_cost_model(const CostModelChoice& choice,
                                                            const models::Deployment& deployment,
                                                            const DataRoot& root);

}  // namespace servesim::scenarios
