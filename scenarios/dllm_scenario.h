// Diffusion-LLM scenarios: a JSON document with top-level "kind": "dllm", or without "kind" whose
// policy.type names a batching policy that serves diffusion models (`servesim list policies`) or
// whose model is a diffusion model. parse_scenario() (scenarios/scenario.h) reads such a document
// with the section readers here, in one pass (every problem reported with its JSON path), into a
// Scenario whose dllm part is set; app/dllm_run.h runs it.
//
// Schema (defaults are Table 3 of dLLM-Serve; unknown keys are errors):
//   {"kind": "dllm", "name": str, "seed": int, "model": catalog key (a diffusion model),
//    "gpu": catalog key, "cost_model": "profiled" | "roofline",
//    "policy": {"type": "dllm-serve" | "fast-dllm" | "dllm-cache" | "sparse-dllm" | "vanilla",
//               "max_num_batched_tokens", "max_num_seqs", "max_num_logits", "phase_aware",
//               "logit_budgeting", "max_batch_size", "step_overhead": "0ms"},
//    "denoise": {"gen_length", "steps", "block", "retention", "pool_kernel",
//                "cache_prompt_interval", "cache_gen_interval", "transfer_ratio"},
//    "denoise" also takes two request variations, both off when absent:
//      "eos_length": {"min", "max"} (early stop at EOS: the answer length is uniform in [min, max]
//      tokens and the request stops after the block holding it) and "tokens_per_step": {"min",
//      "max"} (Fast-dLLM confidence-threshold decoding: tokens accepted per step uniform in
//      [min, max], so a block takes a random number of steps); drawn per request from the
//      seeded stream "denoise",
//    "memory": {"gpu_memory_utilization", "runtime_overhead_gib", "logit_copies"},
//    "cluster": {"instances": 1, "tp": 1 (GPUs per instance), "router": a router name
//                ("round_robin"; a router's parameters take their defaults)},
//    "workload": {"name": str, "requests": int, "arrival": {"type": "poisson", "rate": req/s},
//                 "prompts": {"type": "trace", "format": ..., "path": ...}
//                          | {"type": "distribution", "path": ...}
//                          | {"type": "fixed", "tokens": n},
//                 "max_prompt_tokens": int (prompt lengths are clipped to it; 0 = no clip)}}
// Prompt lengths are drawn uniformly with replacement from the source (stream "lengths"); every
// request denoises gen_length tokens unless denoise.eos_length is set.
//
// The ordinary scenario form is accepted as well, so a dLLM deployment is written like any other:
//   "cluster": {"gpu", "instances", "tp"} (the GPU there instead of top-level "gpu"),
//   "router": {"type", ...its parameters} (instead of cluster.router),
//   "workload": an open-loop workload section of an LLM scenario (a "type" of trace, generated
//               or merge, with its transforms: window, first_n, time_scale, rate): its arrival
//               times and prompt lengths are used; its output lengths are not (a dLLM request
//               denoises gen_length tokens, see denoise.eos_length),
//   "slo": {"ttft", "attainment_target"} (ttft bounds a request's end-to-end latency: its
//          answer comes at its last denoising pass; tpot and tbt_p99 do not apply).
// The run goes through the core engine: `cluster.instances` dLLM instances of `cluster.tp` GPUs
// each behind the router (policies/dllm.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dllm/config.h"
#include "scenarios/cost_models.h"
#include "scenarios/json_reader.h"
#include "scenarios/scenario.h"

namespace servesim::scenarios {

// Why a dLLM objective cannot be a TPOT or a token-gap bound (the scenario's slo, a plan's slo).
inline constexpr const char* kDllmHasNoTokenGaps =
    "a dLLM request emits all its tokens at its last step, so it has no TPOT or token gaps";

// True when the document is a dLLM scenario: top-level "kind": "dllm", or no "kind" and either a
// policy.type that names a batching policy serving diffusion models or a `model` that is a
// diffusion model of root's catalog.
bool is_dllm_document(const Json& doc, const DataRoot& root);

// The dLLM part of parse_scenario(): validates `doc`, a dLLM document. Throws ConfigError listing
// every issue.
Scenario read_dllm_scenario(const Json& doc, const std::string& source, const std::string& base_dir,
                            const DataRoot& root);

// The workload: in the dLLM form `requests` Poisson arrivals with prompt lengths from the source;
// in the ordinary form the workload section's requests. Every request denoises gen_length tokens.
// Throws InputError for malformed data files, ConfigError for an empty or oversized workload.
Workload build_dllm_workload(const Scenario& s, const DataRoot& root);

// The override key that sets the scenario's request rate (capacity, plan): workload.arrival.rate
// (dLLM form and generated workloads) or workload.rate (traces, merges: scaled to that rate).
std::string dllm_rate_knob(const Scenario& s);
// The request rate the scenario offers: its arrival rate, or a trace's requests over its span.
double dllm_offered_rate(const Scenario& s, const DataRoot& root);

// The deployment of one instance (model and GPU from the catalogs, cluster.tp, bf16).
models::Deployment dllm_deployment(const Scenario& s, const DataRoot& root);
// The cost model of one instance: cost_type over dllm_deployment().
std::unique_ptr<models::IterationCostModel> make_dllm_cost_model(const Scenario& s,
                                                                 const DataRoot& root);

}  // namespace servesim::scenarios
