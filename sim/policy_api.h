// Interfaces of the two policy tiers the engine drives, and their registries.
//
// Contract: a policy is a decision function over a const view (sim/view.h). It is deterministic
// given (view, its own state); it may keep state updated through the on_* hooks; it proposes and
// the engine validates and applies. Each family has a registry of named factories with a typed
// parameter schema (core/params.h); names are unique (duplicates are fatal at registration)
// and an unknown name lists the valid ones.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/cost/cost_model.h"
#include "models/cost/memory_model.h"
#include "core/error.h"
#include "core/params.h"
#include "core/registry.h"
#include "core/request_spec.h"
#include "sim/records.h"
#include "sim/view.h"

namespace servesim::sim {

class BatchingPolicy {
 public:
  virtual ~BatchingPolicy() = default;
  // Fills `plan` (cleared by the caller) with the next batch. Returns false when there is nothing
  // to run now (the instance goes idle until the next arrival or completion).
  virtual bool next_batch(const InstanceView& view, BatchPlan& plan) = 0;
  // Called when the batch of the last next_batch() finished, with its measured duration (the
  // instance's real iteration time; a policy that keeps a latency table refines it here).
  virtual void on_batch_done(const InstanceView& view, Duration measured) {}
  // Called when next_batch() returned false while requests are waiting (a policy holding work
  // back on purpose, e.g. to accumulate short prompts): the time at which it wants to be asked
  // again even if nothing arrives or completes. Returns a time > view.now, or nullopt (the
  // default) for none -- then an empty instance with waiting requests is a stall (logic_error).
  virtual std::optional<SimTime> wake_at(const InstanceView& view) { return std::nullopt; }
  // The duration of the batch next_batch() just planned, for a policy whose iterations the
  // instance's cost model cannot price from token counts (a diffusion LLM's denoising pass,
  // policies/dllm.h). Called once per batch, before the engine validates the plan; `view` shows
  // the plan's preemptions and admissions applied. nullopt (the default): the instance's cost
  // model prices the batch's shape.
  virtual std::optional<Duration> batch_time(const InstanceView& view, const BatchPlan& plan) {
    return std::nullopt;
  }
  // Steady decode, for the engine's exact fast-forward (sim/engine.h, EngineConfig::fast_forward).
  // Asked with a view whose waiting queue is empty and whose running requests are all one-token
  // decode steps. Return true only if, for such a view and every later one that differs only in
  // the requests' context lengths and blocks, with free KV blocks for every step: next_batch()
  // schedules exactly every running request for one token (no preemption, no admission),
  // batch_time() returns nullopt, and on_batch_done() changes nothing the policy decides by. The
  // engine then runs those iterations without asking (same results), calling
  // on_steady_decode_step() where it would have called next_batch(). Default false: the engine
  // asks at every iteration.
  virtual bool plans_steady_decode(const InstanceView& view) const { return false; }
  // True: the engine fills InstanceView::decode_run for next_batch(), and the policy may schedule
  // those requests with BatchPlan::decode_run instead of listing them. Default false.
  virtual bool plans_decode_runs() const { return false; }
  // Called for each batch the engine plans itself in steady decode (above), with the view
  // next_batch() would have had: a policy whose state next_batch() would have moved (SGLang's
  // decaying new-token ratio) moves it here, exactly as next_batch() would for that batch.
  virtual void on_steady_decode_step(const InstanceView& view) {}
};

// What a cluster policy's factories know about the instance (or cluster) they build for: the
// offline-profiled cost model stands for the profiling a serving system runs before it starts.
struct InstanceContext {
  int32_t index = 0;  // into the engine's instance list
  InstanceRole role = InstanceRole::kUnified;
  int tp = 1;
  int64_t num_blocks = 0;
  int64_t block_size = 16;
  int64_t kv_bytes_per_token = 0;
  std::shared_ptr<const models::IterationCostModel> cost_model;
  SloSpec slo;  // the scenario's objectives
  uint64_t seed = 0;  // the scenario's seed, for the policy's own RngStreams
};

// Where a routed request is split (micro-requests): the first instance computes tokens
// 1..split_tokens, then the request continues on `target` with its KV. split_tokens == 0: no split.
struct SplitDecision {
  int64_t split_tokens = 0;
  int32_t target = -1;
};

class RoutingPolicy {
 public:
  virtual ~RoutingPolicy() = default;
  // Returns the index into view.instances of the instance that takes `request`. Only instances
  // with accepting == true may be chosen. REQUIRES: at least one accepting instance.
  virtual int32_t route(const ClusterView& view, const RequestSpec& request) = 0;
  // Called right after route() chose `instance`: whether to split the request across two
  // instances. REQUIRES of a split: 0 < split_tokens < prompt + output tokens, and `target` an
  // instance other than `instance`. Default: no split.
  virtual SplitDecision split(const ClusterView& view, const RequestSpec& request,
                              int32_t instance) {
    return {};
  }
};

// The kind of model a batching policy serves.
enum class ServedModel {
  kAutoregressive,  // token by token: prefill, then one decode step per output token
  kDiffusion,       // diffusion LLMs: denoising passes over masked tokens (policies/dllm.h)
};

struct BatchingPolicyEntry {
  std::string description;
  ParamSchema schema;
  // Builds the policy of one instance from its knobs. Unset for a diffusion policy: its
  // instances need each request's denoising plan besides the knobs, and policies/dllm.h builds
  // them (make_dllm_instance) from the scenario's dLLM part.
  std::function<std::unique_ptr<BatchingPolicy>(const ParamValues&)> make;
  // Sizes an instance's memory plan from the policy's own knobs (KV block size, memory fraction,
  // token budget, sequence limit), over the plan's defaults in `memory`. Unset: the policy has
  // no memory knobs and the defaults stand.
  std::function<void(const ParamValues&, models::MemoryParams& memory)> size_memory;
  // The longest prompt the policy's knobs let an instance take (a prompt that must fit in one
  // iteration's token budget without chunked prefill); 0 or unset: no limit of the policy's.
  std::function<int64_t(const ParamValues&)> max_prompt_tokens;
  ServedModel serves = ServedModel::kAutoregressive;
};

struct RoutingPolicyEntry {
  std::string description;
  ParamSchema schema;
  std::function<std::unique_ptr<RoutingPolicy>(const ParamValues&)> make;
};

// ---- Elastic clusters -------------------------------------------------------------------------
//
// A ClusterController resizes the cluster on the simulated clock. The engine calls control() every
// ElasticSpec::control_interval with a read-only view; the controller returns scaling actions and
// the engine validates and applies them:
// - added instances are built like the layout's first group of that role, hold their GPUs at once
//   (GPU-seconds count from the add) and take work only after the role's start-up delay;
// - a drained instance takes no new work, finishes what it holds (including KV hand-offs it sent
//   or receives) and is retired when empty, releasing its GPUs;
// - an action that names an instance that is not active, or drains the last active instance of a
//   role, is a controller bug (std::logic_error).
// Determinism: control ticks are ordinary events (phase kControl), so a run stays reproducible.

// One arrival since the previous tick.
struct ObservedArrival {
  SimTime time{};
  int64_t prompt_tokens = 0;
};

// One request finished since the previous tick.
struct ObservedFinish {
  SimTime arrival{};
  Duration ttft{};
  Duration e2e{};
  double tpot_ns = 0;  // (E2E - TTFT) / (output - 1); 0 for one-token requests
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
};

struct ControlView {
  SimTime now{};
  // Every instance ever created, by index (retired ones included, with state kRetired).
  const std::vector<InstanceLoad>* instances = nullptr;
  const std::vector<ObservedArrival>* arrivals = nullptr;  // since the previous tick, in order
  const std::vector<ObservedFinish>* finished = nullptr;   // since the previous tick, in order
  int64_t handoffs_waiting = 0;  // prefilled requests waiting for room on a decode instance
};

struct ScalingDecision {
  int64_t add_prefill = 0;  // new prefill instances
  int64_t add_decode = 0;   // new decode instances
  std::vector<int32_t> drain;  // active instances to drain, by index
  bool empty() const { return add_prefill == 0 && add_decode == 0 && drain.empty(); }
};

class ClusterController {
 public:
  virtual ~ClusterController() = default;
  // Fills `decision` (cleared by the caller). Must not keep pointers into `view`.
  virtual void control(const ControlView& view, ScalingDecision& decision) = 0;
  // Called once before the run: `open_loop` is the workload when every request arrives at its
  // workload time (no closed-loop clients, warm-up phase or session turns), nullptr when send
  // times depend on the run. Only a clairvoyant controller reads it (DOPD's `forecast=oracle`, a
  // what-if bound on what a perfect forecaster buys); one that models a deployed planner must
  // ignore it. Must not keep the pointer. May throw std::invalid_argument.
  virtual void preview(const Workload* open_loop) { (void)open_loop; }
};

// What a cluster policy asks of the engine to run elastically.
struct ElasticSpec {
  Duration control_interval{10'000'000'000};
  Duration startup_prefill{};  // from the add until a new prefill instance takes work
  Duration startup_decode{};
  // Called once with the initial instances' contexts, in instance order.
  std::function<std::unique_ptr<ClusterController>(const std::vector<InstanceContext>&)>
      make_controller;
};

// One group of identical instances in a cluster policy's layout.
struct InstanceGroup {
  InstanceRole role = InstanceRole::kUnified;
  int64_t count = 1;
  int tp = 1;
  int ep = 0;  // expert-parallel degree of a MoE model inside each instance (0: cluster.ep)
  // Attention data-parallel ranks of tp GPUs in each instance (models::Deployment::attention_dp):
  // an instance is tp x attention_dp GPUs.
  int attention_dp = 1;
  // Sizes the group's memory plan (activation reserve and KV blocks).
  int64_t block_size = 16;
  double gpu_memory_utilization = 0.9;
  int64_t max_num_batched_tokens = 2048;
  int64_t max_num_seqs = 256;
  // One per instance, called with that instance's context.
  std::function<std::unique_ptr<BatchingPolicy>(const InstanceContext&)> make_batching;
};

// A cluster-level policy decides the instance layout (roles, counts, TP degrees, batching per
// role) and how prefilled requests reach decode instances.
struct ClusterLayout {
  std::vector<InstanceGroup> groups;  // instances are numbered group by group, in this order
  KvTransferMode transfer = KvTransferMode::kAfterPrefill;
  std::string decode_router = "least_outstanding";  // a routing_policies() name
  // When set, the cluster policy routes arrivals itself (the scenario's router is ignored);
  // called once with every instance's context, in instance order.
  std::function<std::unique_ptr<RoutingPolicy>(const std::vector<InstanceContext>&)> make_router;
  // When true, decode instances also take arrivals (they prefill locally, without a KV transfer);
  // the arrival router sees them as accepting and must pick by InstanceLoad::role.
  bool decode_takes_arrivals = false;
  // When set, the cluster is elastic (see ClusterController).
  std::optional<ElasticSpec> elastic;
};

// What a cluster policy's own check (ClusterPolicyEntry::check) sees of the scenario besides its
// knobs.
struct ClusterPolicyFacts {
  int64_t starting_gpus = 0;  // the GPUs of the layout make() starts with
  // Empty when every request arrives at its workload time (a trace or generated arrivals); else
  // the workload whose send times depend on the run, as a message names it ("closed_loop
  // workload", "benchmark workload with warm-up requests").
  std::string run_dependent_arrivals;
};

struct ClusterPolicyEntry {
  std::string description;
  ParamSchema schema;
  std::function<ClusterLayout(const ParamValues&)> make;
  // Checks the knobs against the layout and workload beyond the schema's per-knob bounds; each
  // issue's path is "policy.<knob>". Unset: the schema's checks alone.
  std::function<std::vector<ConfigIssue>(const ParamValues&, const ClusterPolicyFacts&)> check;
};

// Function-local static registries (no static-initialisation-order dependence).
Registry<BatchingPolicyEntry>& batching_policies();
// The names of the batching policies that serve `kind` of model, sorted.
std::vector<std::string> batching_policy_names(ServedModel kind);
Registry<RoutingPolicyEntry>& routing_policies();
Registry<ClusterPolicyEntry>& cluster_policies();

}  // namespace servesim::sim
