// dLLM instances on the core engine: dLLM-Serve's phase-multiplexed scheduler and the baselines'
// static request-level batching as sim::BatchingPolicy, every denoising forward pass priced by
// dllm::StepCost.
//
// Design. The engine owns arrivals, routing to instances, the event loop, KV accounting and the
// records; a dLLM instance is an ordinary engine instance whose batching policy plans denoising
// passes and prices them (BatchingPolicy::batch_time). dllm/ keeps the dLLM cost and memory model
// and the denoising semantics. The mapping onto the engine's request model:
// - dllm-serve: an engine iteration is one denoising pass. A request is a RequestSpec whose
//   output_tokens is the number of passes it runs (its dllm::RequestPlan's steps); every pass
//   schedules remaining_tokens() -- the prompt at the first pass, 1 after -- so the engine
//   "samples" one token per pass and finishes the request after its last pass, and the policy
//   reads the request's step index from SeqView::generated_tokens.
// - Baselines: an engine iteration is a whole static batch (output_tokens 1): its requests are
//   admitted together, priced pass by pass and finish together, as a released generate() returns
//   its batch.
// - run_dllm_cluster() turns the engine's records back into dLLM terms (the answer comes at the
//   last pass; output = tokens denoised).
// - KV is reserved, never grown (InstanceSetup::kv_reserved_only): dllm-serve reserves its
//   sparse-cache pages at admission (engine blocks of dllm::kPageTokens, the instance's page pool);
//   a baseline's memory is checked per static batch by the policy and reserves none of its
//   instance's nominal one-block pool.
// - A dllm-serve request that can never run (sequence over the token budget, or more pages than
//   the pool) is rejected at routing through InstanceSetup::max_prompt_tokens.
// Scheduling rules, per instance (deterministic):
// - dllm-serve: every pass is dllm::schedule_pass() over its running queue (in dLLM-Serve's order:
//   the last pass's requests first, in pass order, then the rest) and its FCFS waiting queue.
// - baselines: when idle, the largest FCFS prefix of the waiting queue whose padded batch fits in
//   memory (at most max_batch_size when set) is admitted and runs, padded to its longest
//   sequence, block by block in lock step (a block takes the steps its slowest request needs; the
//   batch runs the blocks of its longest request); only then is the next batch formed.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "dllm/config.h"
#include "models/cost/cost_model.h"
#include "core/params.h"
#include "sim/engine.h"

namespace servesim::policies {

// Adds every dLLM policy, one per dllm::Algorithm, to sim::batching_policies() as an entry that
// serves sim::ServedModel::kDiffusion: the knobs of a scenario's `policy` section as its
// ParamSchema, validated by the scenario parser and listed by `servesim list policies` as every
// other policy's (register_builtin_policies() calls it, once). An instance is built from the
// typed dllm::DllmConfig (make_dllm_instance) that apply_dllm_policy_params() fills.
void register_dllm_policies();
// Writes the validated knobs `v` of policy `config.algorithm` (its entry's schema) into `config`.
void apply_dllm_policy_params(const ParamValues& v, dllm::DllmConfig& config);

// What every dLLM instance of a run is built from.
struct DllmInstanceSpec {
  dllm::DllmConfig config;
  models::Deployment deployment;  // tp = the instance's GPUs
  std::shared_ptr<const models::IterationCostModel> cost;  // prices passes of `deployment`
  // Each request's denoising plan, by request id (ids index the workload).
  std::shared_ptr<const std::vector<dllm::RequestPlan>> plans;
};

// Counters of one instance's passes, kept by its policy.
struct DllmPassStats {
  int64_t forward_passes = 0;
  int64_t lm_head_chunks = 0;
  int64_t batch_slots = 0;  // sum over passes of requests in the pass
  int64_t max_batch = 0;    // largest pass (requests)
};

// One engine instance running `spec.config.algorithm`; `stats` (not null) is updated by its policy.
// Throws dllm::OutOfMemoryError when dllm-serve's page pool holds no page or no request (a
// baseline that cannot hold one request throws it from the run, when its first batch is formed),
// std::invalid_argument for inconsistent knobs.
sim::InstanceSetup make_dllm_instance(const DllmInstanceSpec& spec,
                                      std::shared_ptr<DllmPassStats> stats);

// The dllm::memory plan line of an instance of `spec` (the page pool, or the static-batch rule).
std::string describe_dllm_memory(const DllmInstanceSpec& spec);

// Runs `workload` (its prompt lengths; each request's passes and tokens come from spec.plans,
// one per request) on `instances` identical instances of `spec` behind `router`, on the core
// engine. The result lists the requests in workload order, in dLLM terms (done at the last pass,
// output = tokens denoised). Throws dllm::OutOfMemoryError (see make_dllm_instance),
// std::invalid_argument.
dllm::DllmRunResult run_dllm_cluster(const DllmInstanceSpec& spec, int64_t instances,
                                     std::unique_ptr<sim::RoutingPolicy> router,
                                     Workload workload);

}  // namespace servesim::policies
