// Serving-engine models: vLLM, SGLang and TensorRT-LLM, each modelled as itself. An engine model is
// a plugin (selected by the scenario's `engine: {"type": ..., "version": ...}`) that, for one
// deployment, gives
//   - its own scheduler (a sim::BatchingPolicy with the engine's batching rules),
//   - its KV-capacity rule and memory sizing (models::MemoryParams),
//   - its runtime: CUDA-graph capture sizes with batch padding, and a per-iteration CPU cost that
//     depends on the batch (models::EngineRuntime),
//   - its front end (sim::FrontendSpec),
// with the defaults the named version ships, resolved for the GPU and TP degree.
//
// Contract:
// - Versions: each entry lists the versions whose defaults it knows, oldest first. A requested
//   version resolves to the newest known version not newer than it (a ".postN" or "rcN" suffix
//   is ignored when comparing), so "0.5.6.post2" takes the defaults of "0.5.6"; a version older
//   than every known one is a ConfigError that lists them.
// - Knobs: each entry's ParamSchema uses the engine's own flag names. 0 means "the version's
//   default for this GPU" (for sizes and fractions) and -1 means "the calibrated value" (for the
//   CPU and front-end costs and the GPU time scales); EngineSetup::resolved holds every knob with
//   the value in effect, which the scenario stores with the results.
// - Calibration: the CPU and front-end costs come from the calibration of the engine on the
//   deployment's GPU class (models/calibration/engine_calibration.h), else from its Hopper
//   calibration (said in calibration_note), else zero (said too). A MoE model's expert kernels take
//   the engine's MoE kernel calibration of the GPU class and expert weight format where one exists
//   (models::MoeKernelCalibration; no borrowing across classes or formats), said in
//   calibration_note too. Knobs set explicitly override them.
// - build() is deterministic and throws ConfigError (JSON path "engine.<knob>") for a knob value
//   the engine would reject.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/calibration/engine_calibration.h"
#include "models/catalog/hardware.h"
#include "models/cost/memory_model.h"
#include "models/cost/serving_engine.h"
#include "models/cost/speculative.h"
#include "core/params.h"
#include "core/registry.h"
#include "sim/frontend.h"
#include "sim/policy_api.h"

namespace servesim::policies {

// The deployment an engine model is resolved for.
struct EngineTarget {
  const models::GpuSpec* gpu = nullptr;
  const models::ModelSpec* model = nullptr;
  int tp = 1;
  int attention_dp = 1;  // attention data-parallel ranks of tp GPUs (models::Deployment)
  models::Dtype weight_dtype = models::Dtype::kBf16;  // a MoE model's expert weight format
  const models::EngineCalibrations* calibrations = nullptr;  // may be null: uncalibrated
};

// An engine model resolved for one deployment.
struct EngineSetup {
  std::string version;            // the known version whose defaults apply
  ParamValues resolved;           // every knob with its value in effect
  models::MemoryParams memory;    // KV-capacity rule and sizing
  models::EngineRuntime runtime;  // CUDA graphs and per-iteration CPU cost
  // A MoE model's routed experts x this (ProfiledParams::moe_kernel_scale): the engine's MoE
  // kernels against the kernel tables, from its MoE kernel calibration (1: none in effect).
  double moe_kernel_scale = 1.0;
  // The engine runs the kernel tables' own layers compiled (vLLM: torch.compile, unless
  // enforce_eager), so a GEMM table that timed their FP8 activation quantization as eager PyTorch
  // is priced with one fused pass instead (ProfiledParams::fused_activation_quantization).
  bool compiles_table_layers = false;
  // The name profiles of this engine's own kernels carry in their meta "engine" field
  // (ProfiledParams::engine_tables): where the deployment's GPU has them, they price its layers
  // ahead of the generic (vLLM) tables. Empty: the generic tables only (kernel_tables_knob()).
  std::string kernel_tables;
  sim::FrontendSpec frontend;
  // A fresh instance of the engine's own scheduler.
  std::function<std::unique_ptr<sim::BatchingPolicy>()> make_scheduler;
  int64_t max_prompt_tokens = 0;  // longest prompt its scheduler can run; 0 = no limit
  bool prefix_caching = false;    // automatic prefix caching (sim::InstanceSetup)
  std::string summary;            // one line: engine, version, scheduler and its budgets
  std::string calibration_note;   // where the CPU and front-end costs come from
};

// The limits a benchmark deployment gives one engine instance (aiconfigurator's generator or
// InferenceMAX's launch recipes, which deployed the measured runs: docs/fidelity.md), which each
// engine spells with its own knobs (EngineModelEntry::benchmark_knobs). With attention data
// parallelism they cover every rank: the one scheduler servesim runs for the instance holds
// every rank's share.
struct BenchmarkLimits {
  int64_t max_batch = 0;       // requests running at once (also the CUDA-graph batch size)
  int64_t token_budget = 0;    // tokens one iteration may take
  int64_t prefill_tokens = 0;  // the prompt plus the generator's headroom, over every rank
  // SGLang only: its chunked_prefill_size (0: the release's default; -1: prompts are never
  // chunked) and whether decodes join a prefill batch (enable_mixed_chunk).
  int64_t prefill_chunk = 0;
  bool mixed_chunks = true;
  // SGLang only: its scheduler_recv_interval (new requests taken in every this many decode
  // batches; 1: at every batch).
  int64_t recv_interval = 1;
  // TensorRT-LLM only: attention_dp_config's balancing of new contexts over the attention-DP
  // ranks (enable_balance, timeout_iters, batching_wait_iters).
  bool adp_balance = false;
  int64_t adp_timeout_iters = 50;
  int64_t adp_batching_wait_iters = 10;
};

// A knob value as an engine spells it.
using EngineKnob = std::pair<std::string, ParamValue>;

struct EngineModelEntry {
  std::string description;
  std::vector<std::string> versions;  // known versions, oldest first; the last is the default
  ParamSchema schema;                 // the knobs besides "type" and "version"
  std::function<EngineSetup(const std::string& version, const ParamValues& knobs,
                            const EngineTarget& target)>
      build;
  // Knob defaults that change between the known versions (vLLM's async scheduling, on from
  // 0.14): rewrites `schema`'s defaults for `version`. Empty: every version has the schema's.
  std::function<void(const std::string& version, ParamSchema& schema)> version_defaults;
  // The knobs aiconfigurator's generator sets for `limits`, in the order it writes them (fidelity
  // maps measured runs with them). Unset: the generator knows no such engine.
  std::function<std::vector<EngineKnob>(const BenchmarkLimits& limits)> benchmark_knobs;
};

// The knobs of `entry` with the defaults of `version` (a known version; empty: the schema's).
ParamSchema engine_schema(const EngineModelEntry& entry, const std::string& version);

// Whether dotted version `version` is `minimum` or newer (suffixes ignored, as when resolving).
bool version_at_least(const std::string& version, const std::string& minimum);

Registry<EngineModelEntry>& engine_models();

// Registers vllm, sglang and trtllm (idempotent; register_builtin_policies() calls it).
void register_engine_models();
void register_vllm_engine();
void register_sglang_engine();
void register_trtllm_engine();

// The known version whose defaults apply to `requested` (see the contract). Throws ConfigError
// naming `path` when `requested` is older than every known version or not a dotted version.
std::string resolve_engine_version(const std::vector<std::string>& known,
                                   const std::string& requested, const std::string& path);

// The known version whose defaults stand in for a measured run's release, which servesim may not
// know: resolve_engine_version()'s answer where it has one (`note` empty); else the newest known
// version for a name that is not a dotted version (a development build such as "gpt-oss-dev") and
// the oldest for a version older than every known one, with `note` saying which stood in.
struct StandInVersion {
  std::string version;
  std::string note;
};
StandInVersion stand_in_engine_version(const std::vector<std::string>& known,
                                       const std::string& requested);

// How `engine` ("vllm", "sglang", "trtllm") is told to run `spec`, in its own spelling: vLLM's
// --speculative-config, SGLang's --speculative-* flags, TensorRT-LLM's speculative_config (LLM API
// YAML). Throws std::invalid_argument for another engine.
std::string speculative_launch_flags(const std::string& engine,
                                     const models::SpeculativeDecoding& spec);

// -1 in a CPU or front-end knob: take the calibration. Shared by every engine model.
ParamSchema calibration_knobs();

// The knob "kernel_tables" of an engine that has operator tables of its own (TensorRT-LLM,
// SGLang): "generic" (default) prices its layers from the generic tables, vLLM's, which its
// calibration was fitted with; "engine" from the engine's own tables where the deployment's GPU
// has them (EngineSetup::kernel_tables; experts priced from the engine's own MoE rows take no
// MoE kernel scale, which stands for its kernels against the generic tables).
ParamSpec kernel_tables_knob();
// EngineSetup::kernel_tables of `engine` under `knobs`: `engine` where its "kernel_tables" knob
// is "engine", else "".
std::string kernel_tables_of(const std::string& engine, const ParamValues& knobs);

// The CPU cost and front end of `engine` on `target` from its calibration and knobs (see the
// contract); `overlapped` is the engine's fact. Sets setup.runtime.cpu, setup.frontend,
// setup.calibration_note and the knobs' resolved values.
void apply_calibration(const std::string& engine, const ParamValues& knobs,
                       const EngineTarget& target, bool overlapped, EngineSetup& setup);

}  // namespace servesim::policies
