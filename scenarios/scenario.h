// Scenarios: the JSON description of one simulation run, validated into typed structs in one
// up-front pass, and wired into an engine.
//
// Contract:
// - parse_scenario() reports every problem at once as a ConfigError whose issues name the JSON
//   path and the expected form; unknown keys are errors. Cross-field checks (the model fits the
//   GPU at this TP degree, the trace file exists) are made here, never later as asserts.
// - The resolved document (every default filled in) is kept in Scenario::resolved and stored with
//   the results (run_param), so a run can be reproduced from its database row.
// - Relative file paths are looked up beside the scenario file first, then under the data root
//   (the repository: $SERVESIM_DATA, else the source tree servesim was built from).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/cost/cost_model.h"
#include "models/cost/speculative.h"
#include "models/calibration/engine_calibration.h"
#include "models/catalog/hardware.h"
#include "models/cost/memory_model.h"
#include "scenarios/json_reader.h"
#include "core/error.h"
#include "core/params.h"
#include "core/request_spec.h"
#include "dllm/config.h"
#include "sim/engine.h"
#include "sim/records.h"
#include "policies/engines/engine_model.h"

namespace servesim::scenarios {

using Json = nlohmann::ordered_json;

// Where catalogs and relative data paths are found.
struct DataRoot {
  std::string root;  // repository root holding models/catalog, traces/data, scenarios
  // $SERVESIM_DATA; else the installed data of an installed servesim (<prefix>/share/servesim
  // beside <prefix>/bin); else the source directory servesim was built from.
  static DataRoot discover();
  std::string gpu_catalog() const;
  std::string model_catalog_dir() const;
  // model_catalog_dir(), then the folders of the environment's SERVESIM_MODELS (':'-separated):
  // models of a user's own, e.g. written by `servesim models import --out DIR`.
  std::vector<std::string> model_catalog_dirs() const;
  std::string engine_calibration() const;  // models/engines/calibration.json
};

// Loaded once per process and shared by every scenario.
struct Catalogs {
  models::GpuCatalog gpus;
  models::ModelCatalog models;
  models::EngineCalibrations engine_calibrations;
  static const Catalogs& get(const DataRoot& root);
};

struct ClusterSpec {
  std::string gpu;
  int64_t instances = 1;
  int tp = 1;
  // Expert-parallel degree of a MoE model's experts inside every instance's TP GPUs
  // (models::Deployment::ep); must divide each group's tp and the model's routed experts.
  int ep = 1;
  // Attention data-parallel ranks of a MoE model in every instance (models::Deployment::
  // attention_dp): an instance is tp x attention_dp GPUs, ep then divides that product. Not with
  // a cluster policy's layouts (disaggregation) yet.
  int attention_dp = 1;
  // Pipeline stages of every instance (models::Deployment::pp): an instance is tp x pp GPUs and
  // runs as pp engine instances, its micro-batch slots (models/cost/pipeline.h). Not with a cluster
  // policy's layouts, nor with attention_dp.
  int pp = 1;
  // How a MoE model's tokens spread over its experts (models/catalog/expert_routing.h); unset: the
  // model's catalog default (resolved shows the routing in effect).
  std::optional<models::ExpertRouting> expert_routing;
  models::Dtype weight_dtype = models::Dtype::kBf16;
  models::Dtype kv_dtype = models::Dtype::kBf16;
  // Automatic prefix caching on every instance (sim::InstanceSetup::prefix_caching); an engine
  // model's own knob (vLLM enable_prefix_caching, SGLang disable_radix_cache, TensorRT-LLM
  // enable_block_reuse) decides instead when the scenario names an engine.
  bool prefix_caching = false;
  // The cache's structure: "block_hash" (vLLM) or "radix" (SGLang), for every instance that
  // caches, engine models included (sim::PrefixCacheKind).
  sim::PrefixCacheKind prefix_cache_kind = sim::PrefixCacheKind::kBlockHash;
  // Tiered KV storage (sim::InstanceSetup::dram_kv_bytes): CPU DRAM per instance, and one remote
  // store for the cluster, in GiB (2^30 bytes); 0 = no such tier. DRAM moves KV over the GPU's
  // PCIe, the remote store over the network's RDMA NICs (NetworkSpec).
  double kv_dram_gib = 0;
  double kv_remote_gib = 0;
};

struct PluginSpec {
  std::string type;
  ParamValues params;
};

// Where instances sit and how KV moves between them. Instances take GPUs in order, tp each,
// filling nodes of `gpus_per_node`; a transfer between two instances uses NVLink (or PCIe when the
// GPU has none) inside a node and the RDMA NICs between nodes, each TP rank sending its shard in
// parallel.
struct NetworkSpec {
  int gpus_per_node = 8;
  double inter_node_gbps_per_gpu = 200;  // RDMA NIC bandwidth per GPU, Gbit/s
  Duration inter_node_latency{10'000};
  Duration intra_node_latency{5'000};
};

// One group of identical instances after validation (a unified policy has one group).
struct GroupPlan {
  sim::InstanceRole role = sim::InstanceRole::kUnified;
  int64_t count = 1;
  int tp = 1;
  int ep = 1;                 // expert-parallel degree inside each instance
  bool ep_from_policy = false;  // set by the cluster policy's own knob, not cluster.ep
  int attention_dp = 1;       // attention data-parallel ranks of tp GPUs in each instance
  int pp = 1;                 // pipeline stages of tp GPUs in each instance

  int gpus_per_instance() const { return tp * attention_dp * pp; }
  // An instance runs as pp engine instances (micro-batch slots), each charged this many GPUs.
  int gpus_per_slot() const { return tp * attention_dp; }
  int64_t engine_instances() const { return count * pp; }
  models::MemoryParams memory_params;  // what sizes the group's memory plan
  models::MemoryPlan memory;
};

// The scenario's `engine` section: a serving-engine model (policies/engines/engine_model.h).
struct EngineChoice {
  std::string type;               // an engine_models() name
  std::string requested_version;  // as written ("" = the newest known)
  std::string version;            // the known version whose defaults apply
  ParamValues knobs;              // validated against the engine's schema
  bool schedules = true;          // no `policy` section: the engine's own scheduler runs
};

// Which per-request records a run keeps (output.requests). kAll: every one, and the summary's
// percentiles are exact. kNone / kSample: none, or a uniform sample of OutputSpec::request_sample
// of them; the summary then comes from histograms (reports::SummaryAccumulator, within 0.8 %) and
// the run's memory no longer grows with its records. What reads per-request records (the database's
// requests table, the miss breakdown, the report's per-request charts) sees only those kept.
enum class RequestsOutput { kAll, kNone, kSample };

struct OutputSpec {
  RequestsOutput requests = RequestsOutput::kAll;
  int64_t request_sample = 10'000;  // records kept with kSample
  Duration sample_interval{1'000'000'000};
  bool record_token_times = false;
  bool fast_forward = true;  // sim::EngineConfig::fast_forward (same results either way)
};

// The dLLM form's own workload section: `requests` Poisson arrivals at `rate_per_s`, prompt
// lengths drawn from a trace, a length distribution or a fixed length (scenarios/dllm_scenario.h).
struct DllmOwnWorkload {
  std::string name;
  int64_t requests = 0;
  double rate_per_s = 1.0;
  std::string prompt_type;  // trace | distribution | fixed
  std::string prompt_format;
  std::string prompt_path;  // resolved
  int64_t fixed_prompt = 0;
  int64_t max_prompt_tokens = 0;  // prompt lengths are clipped to it; 0 = no clip
};

// What a scenario whose policy serves diffusion LLMs (sim::ServedModel::kDiffusion) holds besides
// the fields every scenario has; scenarios/dllm_scenario.h reads and uses it.
struct DllmPart {
  dllm::DllmConfig config;  // the policy's knobs and the denoise and memory sections
  // The dLLM form's workload; unset in the ordinary form, whose section is Scenario::workload.
  std::optional<DllmOwnWorkload> own_workload;
};

// A multimodal workload's images, resolved against the model's vision encoder: every request sends
// per_request images of width x height pixels, each patches_per_image patches for the encoder and
// tokens_per_image tokens at the head of the prompt (VisionEncoderSpec::image_patches).
struct ImageInputs {
  int32_t per_request = 0;
  int64_t width = 0;
  int64_t height = 0;
  int32_t patches_per_image = 0;
  int64_t tokens_per_image = 0;
};

struct Scenario {
  std::string name;
  std::string description;
  std::string source;     // file path, or "<embedded quickstart>"
  std::string base_dir;   // directory used to resolve relative paths first
  uint64_t seed = 0;
  std::string model;
  ClusterSpec cluster;
  PluginSpec router;
  PluginSpec policy;
  std::optional<EngineChoice> engine;  // absent: no engine model (constant iteration overhead)
  // The `speculative` section (models/cost/speculative.h, docs/speculative.md): a drafter's
  // method, num_speculative_tokens and per-position acceptance. Absent (or method "none"): no
  // speculative decoding.
  std::optional<models::SpeculativeDecoding> speculative;
  // workload.images (docs/multimodal.md): each request sends images ahead of its prompt, through
  // the model's vision encoder. Unset: text only.
  std::optional<ImageInputs> images;
  std::string cost_type = "profiled";  // "profiled" (measured tables) or "roofline"
  bool cost_custom_allreduce = true;   // profiled: vLLM custom all-reduce (else NCCL)
  models::RooflineParams cost;
  bool cluster_policy = false;     // policy.type names a cluster policy (instance layout)
  std::vector<GroupPlan> groups;   // instance groups, computed during validation
  NetworkSpec network;
  Json workload;                   // validated workload section (resolved)
  sim::SloSpec slo;
  OutputSpec output;
  std::optional<Duration> max_time;
  // context.max_tokens (default: the model's max_position_embeddings; 0 = no limit) and
  // context.overflow: "reject" (a longer request is refused on arrival, as engines do) or
  // "truncate" (its prompt keeps its last max_tokens - min(output, max_tokens / 2) tokens and
  // its output stops at the context's end).
  int64_t max_context_tokens = 0;
  bool truncate_context = false;
  // Set when the policy serves diffusion LLMs: then model, cluster.gpu / instances / tp, router,
  // policy, cost_type, slo and workload (null in the dLLM form) are the dLLM deployment's, and the
  // fields above that only autoregressive serving has (groups, engine, network, output, context)
  // keep their defaults; app/dllm_run.h runs it.
  std::optional<DllmPart> dllm;
  Json resolved;                   // the whole resolved document
};

// The document is valid but describes a deployment that cannot run: a group's model does not fit
// its GPU at its TP degree, or the TP degree cannot shard the model. A ConfigError (bad input)
// whose issues carry the CapacityError messages, so callers can tell "cannot fit" from "malformed".
class DeploymentError : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

// Applies `path=value` overrides to a document: the value is parsed as JSON when it is valid
// JSON (numbers, true/false, objects, quoted strings) and taken as a plain string otherwise.
// Missing intermediate objects are created. Throws ConfigError for a malformed override.
void apply_overrides(Json& doc, const std::vector<std::string>& overrides);

// Validates `doc` (see the contract above). `source` names the document in messages. A
// diffusion-LLM document (is_dllm_document, scenarios/dllm_scenario.h) is read by the dLLM section
// readers into a Scenario with its dllm part set.
Scenario parse_scenario(const Json& doc, const std::string& source, const std::string& base_dir,
                        const DataRoot& root);

// Reads, overrides and validates a scenario file. Throws InputError for unreadable or
// syntactically invalid JSON (with line and column), ConfigError for invalid content.
Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides,
                       const DataRoot& root);

// The built-in quickstart scenario (scenarios/quickstart.json compiled into the binary).
const std::string& embedded_quickstart_json();
Scenario load_embedded_quickstart(const std::vector<std::string>& overrides, const DataRoot& root);

// The engine of `s` resolved for instances of `attention_dp` ranks of `tp` GPUs.
// REQUIRES: s.engine.
policies::EngineSetup resolve_engine(const Scenario& s, int tp, int attention_dp,
                                     const DataRoot& root);

// Resolves a data path per the contract above. Throws InputError naming every place tried.
std::string resolve_data_path(const std::string& path, const std::string& base_dir,
                              const DataRoot& root);

// Shortens every request of `w` longer than `max_tokens` (prompt + output) as context.overflow
// "truncate" says (Scenario::truncate_context). No-op for max_tokens <= 0.
void truncate_to_context(Workload& w, int64_t max_tokens);
// Requests of `w` whose prompt + output exceed `max_tokens` (0 for max_tokens <= 0).
int64_t count_beyond_context(const Workload& w, int64_t max_tokens);
// Builds the workload of a scenario (loads traces, generates arrivals, applies transforms).
// Throws InputError for malformed trace files.
Workload build_workload(const Scenario& scenario, const DataRoot& root);
// The same for a validated workload section (validate_workload()) of the document `source`, its
// relative paths resolved from `base_dir`, seeded by `seed`; sessions end at
// `max_context_tokens` (0: none). Throws InputError for malformed trace files, ConfigError for a
// workload beyond the limits or without requests.
Workload build_workload(const Json& workload, const std::string& source,
                        const std::string& base_dir, const DataRoot& root, uint64_t seed,
                        int64_t max_context_tokens = 0);

// A workload's offered rate: requests after the first over the last arrival time (1 req/s when
// every request arrives at once). REQUIRES: w has requests.
double arrival_rate(const Workload& w);

// Section readers shared by the scenario kinds (LLM and dLLM documents take the same sections).
// Each reports its problems into `issues` (ObjectReader) and writes the resolved section.
//
// A workload section at `path`: open-loop kinds (trace, generated, merge), and with
// `top_level` the closed-loop kinds too (closed_loop, benchmark, sessions).
void validate_workload(const Json& in, const std::string& path, Issues& issues, Json& out,
                       const std::string& base_dir, const DataRoot& root, bool top_level);
// Workload kinds only a scenario's whole workload may be, taking no transforms: their arrivals
// follow clients, session turns or the benchmark's own generator (closed_loop, benchmark,
// sessions). The others (trace, generated, merge) are open-loop sections.
bool is_top_level_only_workload(const std::string& type);
// The override key that sets an open-loop workload section's request rate: workload.arrival.rate
// for a generated workload, workload.rate (the rate transform) otherwise.
std::string open_workload_rate_knob(const Json& workload);
// `top`'s "router" section: {"type": a routing policy (default round_robin), its parameters}.
void read_router(ObjectReader& top, PluginSpec& out);
// `top`'s "slo" section (optional): ttft, tpot, tbt_p99 bounds and attainment_target.
sim::SloSpec read_slo(ObjectReader& top);

// Everything an Engine needs, built from a validated scenario.
struct EngineInputs {
  sim::EngineConfig config;
  std::vector<sim::InstanceSetup> instances;
  std::unique_ptr<sim::RoutingPolicy> router;
  std::unique_ptr<sim::RoutingPolicy> decode_router;  // disaggregated layouts only
  Workload workload;
  std::shared_ptr<const models::IterationCostModel> cost_model;       // of the first group
  std::vector<std::shared_ptr<const models::IterationCostModel>> cost_models;  // one per TP degree
};
EngineInputs build_engine_inputs(const Scenario& scenario, const DataRoot& root);

// "key=value" pairs of the resolved document, keys as dotted JSON paths ("cluster.tp").
std::vector<std::pair<std::string, std::string>> flatten(const Json& doc);

}  // namespace servesim::scenarios
