#include "scenarios/dllm_scenario.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "traces/generators.h"
#include "traces/loaders.h"
#include "core/limits.h"
#include "core/units.h"
#include "policies/builtin.h"
#include "policies/dllm.h"
#include "sim/policy_api.h"

namespace servesim::scenarios {

// Longest dLLM generation (gen_length) and the bound of every denoising knob: a block or step
// count beyond the tokens generated is meaningless.
inline constexpr int64_t kMaxDllmGenLength = 65'536;
// Most instances and GPUs per instance a dLLM cluster may have.
inline constexpr int64_t kMaxDllmInstances = 4096;
inline constexpr int64_t kMaxDllmTp = 64;
namespace fs = std::filesystem;

bool is_dllm_document(const Json& doc, const DataRoot& root) {
  if (!doc.is_object()) return false;
  const auto kind = doc.find("kind");
  if (kind != doc.end()) return kind->is_string() && kind->get<std::string>() == "dllm";
  const auto policy = doc.find("policy");
  if (policy != doc.end() && policy->is_object()) {
    const auto type = policy->find("type");
    policies::register_builtin_policies();
    const std::vector<std::string> names = sim::batching_policy_names(sim::ServedModel::kDiffusion);
    if (type != policy->end() && type->is_string() &&
        std::find(names.begin(), names.end(), type->get<std::string>()) != names.end()) {
      return true;
    }
  }
  const auto model = doc.find("model");
  if (model == doc.end() || !model->is_string()) return false;
  const auto& models = Catalogs::get(root).models;
  const std::string key = model->get<std::string>();
  return models.all().count(key) != 0 && models.get(key).diffusion;
}

namespace {

// What read_dllm_scenario's section readers share.
struct DllmReading {
  const Catalogs& cat;
  const std::string& base_dir;
  const DataRoot& root;
  Issues& issues;
  Json& resolved;
};

// `policy`: a batching policy serving diffusion models and the knobs of its registry entry (a
// knob of another policy is unknown here).
void read_dllm_policy(ObjectReader& top, DllmReading& in, Scenario& s) {
  const Json* section = top.object("policy", true);
  const Json empty = Json::object();
  ObjectReader r(section ? *section : empty, "policy", in.issues, in.resolved["policy"]);
  const auto type =
      r.string("type", std::nullopt, sim::batching_policy_names(sim::ServedModel::kDiffusion));
  if (type) {
    dllm::DllmConfig& c = s.dllm->config;
    s.policy.type = *type;
    s.policy.params = r.params(sim::batching_policies().get(*type).schema);
    c.algorithm = dllm::parse_algorithm(*type);
    policies::apply_dllm_policy_params(s.policy.params, c);
  }
  r.finish();
}

// denoise.eos_length / denoise.tokens_per_step: optional request variations; absent (the
// default) keeps every request at gen_length tokens in `steps` passes.
void read_decode_variation(ObjectReader& r, DllmReading& in, dllm::DecodeVariation& v) {
  Json& out = in.resolved["denoise"];
  for (const auto& [key, lo, hi] : {std::tuple{"eos_length", &v.eos_min, &v.eos_max},
                                    std::tuple{"tokens_per_step", &v.accept_min, &v.accept_max}}) {
    const Json* vin = r.object(key, false);
    if (!vin) continue;
    ObjectReader vr(*vin, join_path("denoise", key), in.issues, out[key]);
    *lo = vr.integer("min", std::nullopt, 1, kMaxDllmGenLength).value_or(1);
    *hi = vr.integer("max", std::nullopt, 1, kMaxDllmGenLength).value_or(1);
    vr.finish();
  }
}

// `denoise`: generation length, steps, blocks, the caches' knobs and the request variations.
void read_denoise(ObjectReader& top, DllmReading& in, dllm::DllmConfig& c) {
  ObjectReader r = section_reader(top, "denoise", in.issues, in.resolved);
  dllm::DenoiseParams& p = c.denoise;
  p.gen_length = r.integer("gen_length", 256, 1, kMaxDllmGenLength).value_or(256);
  p.steps = r.integer("steps", 256, 1, kMaxDllmGenLength).value_or(256);
  p.block = r.integer("block", 32, 1, kMaxDllmGenLength).value_or(32);
  p.retention = r.number("retention", 0.5, 0.0, 1.0, true).value_or(0.5);
  p.pool_kernel = r.integer("pool_kernel", 3, 1, kMaxDllmGenLength).value_or(3);
  p.cache_prompt_interval =
      r.integer("cache_prompt_interval", 100, 1, kMaxDllmGenLength).value_or(100);
  p.cache_gen_interval = r.integer("cache_gen_interval", 7, 1, kMaxDllmGenLength).value_or(7);
  p.transfer_ratio = r.number("transfer_ratio", 0.25, 0.0, 1.0, true).value_or(0.25);
  read_decode_variation(r, in, c.variation);
  r.finish();
  if (const std::string e = dllm::check_denoise_params(p); !e.empty() && in.issues.empty()) {
    in.issues.add("denoise", e);
  }
  if (const std::string e = dllm::check_decode_variation(c.variation, p);
      !e.empty() && in.issues.empty()) {
    in.issues.add("denoise", e);
  }
}

// `cluster`: the GPU (here or top-level `top_gpu`, once), instances, tensor parallelism and an
// optional router type.
void read_dllm_cluster(ObjectReader& top, DllmReading& in,
                       const std::optional<std::string>& top_gpu, Scenario& s) {
  ObjectReader r = section_reader(top, "cluster", in.issues, in.resolved);
  std::optional<std::string> cluster_gpu;
  if (r.has("gpu")) cluster_gpu = r.string("gpu", std::nullopt, in.cat.gpus.keys());
  if (top_gpu && cluster_gpu) {
    in.issues.add("cluster.gpu", "give the GPU once: cluster.gpu or the top-level gpu, not both");
  } else if (!top.has("gpu") && !r.has("gpu")) {
    in.issues.add("cluster.gpu", fmt::format("is required: the GPU of every instance, one of {}",
                                             fmt::join(in.cat.gpus.keys(), ", ")));
  }
  s.cluster.gpu = top_gpu.value_or(cluster_gpu.value_or(""));
  s.cluster.instances = r.integer("instances", 1, 1, kMaxDllmInstances).value_or(1);
  s.cluster.tp = static_cast<int>(r.integer("tp", 1, 1, kMaxDllmTp).value_or(1));
  if (r.has("router")) {
    if (top.has("router")) {
      in.issues.add("cluster.router", "give the router once: the router section or "
                                      "cluster.router, not both");
    }
    s.router.type =
        r.string("router", "round_robin", sim::routing_policies().names()).value_or("");
    if (sim::routing_policies().contains(s.router.type)) {
      s.router.params = ParamValues::defaults(sim::routing_policies().get(s.router.type).schema);
    }
  }
  r.finish();
  if (in.cat.models.all().count(s.model) && in.cat.models.get(s.model).diffusion &&
      !models::is_valid_tp(in.cat.models.get(s.model), s.cluster.tp)) {
    in.issues.add("cluster.tp", fmt::format("{} cannot be sharded over {} GPUs (its attention "
                                            "heads and KV heads must divide among them)",
                                            s.model, s.cluster.tp));
  }
}

// `memory`: how much of the GPU the dLLM runtime may take and what it keeps beside the weights.
void read_dllm_memory(ObjectReader& top, DllmReading& in, dllm::DllmConfig& c) {
  ObjectReader r = section_reader(top, "memory", in.issues, in.resolved);
  c.memory.gpu_memory_utilization =
      r.number("gpu_memory_utilization", 0.9, 0.0, 1.0, true).value_or(0.9);
  c.memory.runtime_overhead_bytes =
      std::llround(r.number("runtime_overhead_gib", 1.0, 0.0).value_or(1.0) * kBytesPerGiB);
  c.memory.logit_copies = r.number("logit_copies", 3.0, 1.0).value_or(3.0);
  r.finish();
}

// `slo`: as an LLM scenario's, without token-gap objectives (every token of a dLLM request comes
// at its last step).
void read_dllm_slo(ObjectReader& top, DllmReading& in, Scenario& s) {
  s.slo = read_slo(top);
  for (const auto& [key, set] : {std::pair{"tpot", s.slo.tpot.has_value()},
                                 std::pair{"tbt_p99", s.slo.tbt_p99.has_value()}}) {
    if (set) {
      in.issues.add(join_path("slo", key),
                    fmt::format("{}; bound ttft (its end-to-end latency)", kDllmHasNoTokenGaps));
    }
  }
}

// workload.prompts of the dLLM form: a trace, a length distribution or a fixed length.
void read_dllm_prompts(ObjectReader& r, DllmReading& in, DllmOwnWorkload& s) {
  static const Json kEmpty = Json::object();
  const Json* pin = r.object("prompts", true);
  ObjectReader p(pin ? *pin : kEmpty, "workload.prompts", in.issues,
                 in.resolved["workload"]["prompts"]);
  s.prompt_type = p.string("type", std::nullopt, {"trace", "distribution", "fixed"}).value_or("");
  if (s.prompt_type == "fixed") {
    s.fixed_prompt = p.integer("tokens", std::nullopt, 1, kMaxRequestTokens).value_or(1);
  } else if (!s.prompt_type.empty()) {
    if (s.prompt_type == "trace") {
      s.prompt_format = p.string("format", std::nullopt, traces::trace_formats()).value_or("");
    }
    if (const auto path = p.string("path", std::nullopt)) {
      try {
        s.prompt_path = resolve_data_path(*path, in.base_dir, in.root);
      } catch (const InputError& e) {
        in.issues.add("workload.prompts.path", e.message());
      }
    }
  }
  p.finish();
}

// The dLLM form of `workload`: a request count, Poisson arrivals and prompts.
void read_dllm_own_workload(const Json* workload_in, DllmReading& in, DllmOwnWorkload& s) {
  static const Json kEmpty = Json::object();
  Json& out = in.resolved["workload"];
  ObjectReader r(workload_in ? *workload_in : kEmpty, "workload", in.issues, out);
  s.name = r.string("name", "workload").value_or("");
  s.requests = r.integer("requests", std::nullopt, 1, kMaxRequests).value_or(1);
  s.max_prompt_tokens = r.integer("max_prompt_tokens", 0, 0, kMaxRequestTokens).value_or(0);
  {
    const Json* ain = r.object("arrival", true);
    ObjectReader a(ain ? *ain : kEmpty, "workload.arrival", in.issues, out["arrival"]);
    a.string("type", "poisson", {"poisson"});
    s.rate_per_s = a.number("rate", std::nullopt, kMinRatePerS, kMaxRatePerS).value_or(1.0);
    a.finish();
  }
  read_dllm_prompts(r, in, s);
  r.finish();
}

// `workload`: an LLM scenario's open-loop workload section (the ordinary form, with a type), or
// the dLLM form.
void read_dllm_workload(ObjectReader& top, DllmReading& in, Scenario& s) {
  const Json* workload_in = top.object("workload", true);
  if (!workload_in || !workload_in->contains("type")) {
    read_dllm_own_workload(workload_in, in, s.dllm->own_workload.emplace());
    return;
  }
  const Json& type = workload_in->at("type");
  if (type.is_string() && is_top_level_only_workload(type.get<std::string>())) {
    in.issues.add("workload.type",
                  fmt::format("a dLLM deployment takes an open-loop workload (trace, generated or "
                              "merge), not \"{}\": closed-loop clients are not modelled for dLLM "
                              "policies",
                              type.get<std::string>()));
  } else {
    validate_workload(*workload_in, "workload", in.issues, in.resolved["workload"], in.base_dir,
                      in.root, false);
    s.workload = in.resolved["workload"];
  }
}

}  // namespace

Scenario read_dllm_scenario(const Json& doc, const std::string& source, const std::string& base_dir,
                            const DataRoot& root) {
  policies::register_builtin_policies();
  Issues issues;
  Json resolved = Json::object();
  Scenario s;
  s.source = source;
  s.router = {"round_robin", {}};  // cluster.router or a router section may name another
  s.dllm.emplace();
  const Catalogs& cat = Catalogs::get(root);
  DllmReading in{cat, base_dir, root, issues, resolved};
  ObjectReader top(doc, "", issues, resolved);
  top.string("kind", "dllm", {"dllm"});
  s.name = top.string("name", fs::path(source).stem().string()).value_or("");
  s.description = top.string("description", std::string()).value_or("");
  s.seed = static_cast<uint64_t>(top.integer("seed", 0, 0).value_or(0));
  s.model = top.string("model", "llada-8b-instruct", cat.models.keys()).value_or("");
  if (cat.models.all().count(s.model) && !cat.models.get(s.model).diffusion) {
    issues.add("model", fmt::format("expected a diffusion LLM, got \"{}\" (an autoregressive "
                                    "model); diffusion models in the catalog: llada-8b-instruct, "
                                    "dream-v0-instruct-7b",
                                    s.model));
  }
  // The GPU: top-level "gpu" (dLLM form) or cluster.gpu (ordinary form), read with the cluster.
  std::optional<std::string> top_gpu;
  if (top.has("gpu")) top_gpu = top.string("gpu", std::nullopt, cat.gpus.keys());
  s.cost_type = top.string("cost_model", "profiled", {"profiled", "roofline"}).value_or("");
  read_dllm_policy(top, in, s);
  read_denoise(top, in, s.dllm->config);
  read_dllm_cluster(top, in, top_gpu, s);
  read_dllm_memory(top, in, s.dllm->config);
  if (top.has("router")) read_router(top, s.router);
  if (top.has("slo")) read_dllm_slo(top, in, s);
  read_dllm_workload(top, in, s);
  top.finish();
  if (!issues.empty()) throw ConfigError(source, issues.list());
  s.base_dir = base_dir;
  s.resolved = std::move(resolved);
  return s;
}

namespace {

// The dLLM form's workload: `s.requests` Poisson arrivals, seeded by `seed`, with prompt lengths
// drawn from s's source; every request denoises `g` tokens.
Workload build_own_workload(const DllmOwnWorkload& s, int64_t g, uint64_t seed) {
  std::unique_ptr<traces::LengthSource> lengths;
  std::string what;
  std::vector<traces::LengthSample> samples;
  if (s.prompt_type == "fixed") {
    samples.push_back({s.fixed_prompt, g});
    what = fmt::format("fixed prompt {}", s.fixed_prompt);
  } else {
    if (s.prompt_type == "trace") {
      const Workload w = traces::load_trace(s.prompt_format, s.prompt_path);
      for (const RequestSpec& r : w.requests) samples.push_back({r.prompt_tokens, g});
      what = fmt::format("prompt lengths of {} trace {}", s.prompt_format,
                         fs::path(s.prompt_path).filename().string());
    } else {
      for (const auto& l : traces::load_length_distribution(s.prompt_path)) {
        samples.push_back({l.prompt_tokens, g});
      }
      what = fmt::format("prompt lengths of distribution {}",
                         fs::path(s.prompt_path).filename().string());
    }
    if (samples.empty()) throw InputError(s.prompt_path, 0, "no request with a prompt length");
  }
  if (s.max_prompt_tokens > 0) {
    for (auto& x : samples) x.prompt_tokens = std::min(x.prompt_tokens, s.max_prompt_tokens);
    what += fmt::format(" clipped to {}", s.max_prompt_tokens);
  }
  lengths = traces::make_empirical_lengths(std::move(samples), what);
  traces::ArrivalSpec arrivals;
  arrivals.rate_per_s = s.rate_per_s;
  Workload w = traces::generate(arrivals, *lengths, s.requests, Duration{0}, seed);
  w.description = fmt::format("{}: {} requests, Poisson {} req/s, {}, gen {}", s.name, s.requests,
                              s.rate_per_s, what, g);
  return w;
}

}  // namespace

Workload build_dllm_workload(const Scenario& s, const DataRoot& root) {
  const int64_t g = s.dllm->config.denoise.gen_length;
  if (s.dllm->own_workload) return build_own_workload(*s.dllm->own_workload, g, s.seed);
  Workload w = build_workload(s.workload, s.source, s.base_dir, root, s.seed);
  for (RequestSpec& r : w.requests) r.output_tokens = g;
  w.description += fmt::format(", gen {}", g);
  return w;
}

std::string dllm_rate_knob(const Scenario& s) {
  return s.dllm->own_workload ? "workload.arrival.rate" : open_workload_rate_knob(s.workload);
}

double dllm_offered_rate(const Scenario& s, const DataRoot& root) {
  if (s.dllm->own_workload) return s.dllm->own_workload->rate_per_s;
  if (s.workload.at("type") == "generated") return s.workload.at("arrival").at("rate").get<double>();
  return arrival_rate(build_dllm_workload(s, root));
}

models::Deployment dllm_deployment(const Scenario& s, const DataRoot& root) {
  const Catalogs& cat = Catalogs::get(root);
  models::Deployment d;
  d.model = &cat.models.get(s.model);
  d.gpu = &cat.gpus.get(s.cluster.gpu);
  d.tp = s.cluster.tp;
  return d;
}

std::unique_ptr<models::IterationCostModel> make_dllm_cost_model(const Scenario& s,
                                                                 const DataRoot& root) {
  CostModelChoice choice;
  choice.type = s.cost_type;
  return make_cost_model(choice, dllm_deployment(s, root), root);
}

}  // namespace servesim::scenarios
