// Plan files: reading, validation, expansion into configs, and the analytic bounds that prune
// them. Running and reporting are in plan_run.cc.
#include "app/plan.h"

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>

#include <fmt/format.h>

#include "app/plan_internal.h"
#include "policies/builtin.h"
#include "scenarios/cost_models.h"
#include "scenarios/dllm_scenario.h"
#include "dllm/config.h"
#include "scenarios/json_reader.h"
#include "core/error.h"
#include "sim/policy_api.h"

namespace servesim::app {
namespace fs = std::filesystem;
using scenarios::Issues;
using scenarios::ObjectReader;

const char* status_name(ConfigStatus status) {
  switch (status) {
    case ConfigStatus::kPruned:
      return "pruned";
    case ConfigStatus::kMeets:
      return "meets";
    case ConfigStatus::kFails:
      return "fails";
    case ConfigStatus::kError:
      return "error";
    case ConfigStatus::kNotRun:
      return "not run";
  }
  return "?";
}

std::atomic<bool>& plan_interrupted() {
  static std::atomic<bool> flag{false};
  return flag;
}

namespace {

extern "C" void on_sigint(int) { plan_interrupted().store(true); }

// "ttft", "2s" -> checks the duration and returns "ttft=2s".
std::optional<std::string> slo_arg(ObjectReader& r, const std::string& key) {
  if (!r.has(key)) {
    r.claim(key);
    return std::nullopt;
  }
  if (!r.duration(key, std::nullopt, false)) return std::nullopt;
  return key + "=" + r.resolved()[key].get<std::string>();
}

}  // namespace

void install_plan_interrupt_handler() { std::signal(SIGINT, on_sigint); }

namespace {

// Everything load_plan's section readers share.
struct PlanReading {
  const std::string& path;
  const std::string plan_dir;
  const scenarios::DataRoot& root;
  const scenarios::Catalogs& catalogs;
  Issues& issues;
  Json& resolved;
};

// `base`: a scenario file (relative to the plan, then the data root) or an inline scenario.
void read_base(ObjectReader& top, PlanReading& in, PlanSpec& p) {
  if (top.has("base") && p.document.at("base").is_string()) {
    const std::string b = p.document.at("base").get<std::string>();
    top.claim("base");
    try {
      p.base_source = scenarios::resolve_data_path(b, in.plan_dir, in.root);
      p.base = scenarios::read_json_file(p.base_source);
      const std::string dir = fs::path(p.base_source).parent_path().string();
      p.base_dir = dir.empty() ? "." : dir;
      if (!p.base.is_object()) {
        in.issues.add("base", "the base scenario file must hold a JSON object");
      }
    } catch (const InputError& e) {
      in.issues.add("base", e.what());
    }
  } else if (const Json* b = top.object("base", true)) {
    p.base = *b;
    p.base_source = in.path + ":base";
    p.base_dir = in.plan_dir.empty() ? "." : in.plan_dir;
  }
  p.dllm = p.base.is_object() && scenarios::is_dllm_document(p.base, in.root);
}

// `rate`: a target request rate, or "max" (left at 0).
void read_rate(ObjectReader& top, PlanReading& in, PlanSpec& p) {
  top.claim("rate");
  if (!p.document.contains("rate")) {
    in.issues.add("rate", "missing; expected a target request rate in req/s or \"max\"");
  } else if (const Json& v = p.document.at("rate");
             v.is_number() && v.get<double>() > 0 && v.get<double>() <= kMaxCapacityRate) {
    p.target_rate = v.get<double>();
  } else if (!(v.is_string() && v.get<std::string>() == "max")) {
    in.issues.add("rate", fmt::format("expected a rate in (0, {:g}] req/s or \"max\", got {}",
                                      kMaxCapacityRate, scenarios::describe_json(v)));
  }
}

// slo.percentiles: "<metric>_p<N>": duration, each checked as `--slo` would check it.
void read_slo_percentiles(ObjectReader& r, PlanReading& in, PlanSpec& p) {
  const Json* pct = r.object("percentiles", false);
  if (pct == nullptr) return;
  for (auto it = pct->begin(); it != pct->end(); ++it) {
    const std::string where = r.child_path("percentiles") + "." + it.key();
    const std::string arg = it.key() + "=" +
                            (it.value().is_string() ? it.value().get<std::string>()
                                                    : it.value().dump());
    try {
      SloCriteria::parse({arg}, std::nullopt, 0.9, in.path);
      p.slo.push_back(arg);
    } catch (const ConfigError& e) {
      in.issues.add(where, e.issues().front().message);
    }
  }
}

// Every token of a dLLM request comes at its last step: no TPOT, no token gaps to bound.
void refuse_token_gap_objectives(PlanReading& in, const PlanSpec& p) {
  for (const std::string& a : p.slo) {
    const std::string key = a.substr(0, a.find('='));
    if (key.rfind("tpot", 0) == 0 || key.rfind("tbt", 0) == 0) {
      in.issues.add(key.find('_') == std::string::npos || key == "tbt_p99"
                        ? "slo." + key
                        : "slo.percentiles." + key,
                    fmt::format("{}; bound ttft (its end-to-end latency) or e2e percentiles",
                                scenarios::kDllmHasNoTokenGaps));
    }
  }
}

// `slo`: the objectives (`--slo` arguments) and the attainment a config must reach.
void read_slo(ObjectReader& top, PlanReading& in, PlanSpec& p) {
  const Json* section = top.object("slo", true);
  if (section == nullptr) return;
  ObjectReader r(*section, "slo", in.issues, in.resolved["slo"]);
  for (const char* key : {"ttft", "tpot", "tbt_p99"}) {
    if (auto a = slo_arg(r, key)) p.slo.push_back(*a);
  }
  p.attainment = r.number("attainment", 0.9, 0.0, 1.0).value_or(0.9);
  read_slo_percentiles(r, in, p);
  r.finish();
  if (p.slo.empty()) {
    in.issues.add("slo", "give at least one objective: ttft, tpot, tbt_p99 or percentiles");
  }
  if (p.dllm) refuse_token_gap_objectives(in, p);
}

// search.gpus: catalog GPU keys.
void read_search_gpus(ObjectReader& r, PlanReading& in, PlanSpec& p) {
  const Json* gpus = r.array("gpus", false);
  if (gpus == nullptr) return;
  for (size_t i = 0; i < gpus->size(); ++i) {
    const Json& g = (*gpus)[i];
    if (!g.is_string() || in.catalogs.gpus.all().count(g.get<std::string>()) == 0) {
      in.issues.add(fmt::format("search.gpus[{}]", i),
                    scenarios::choice_error(g, in.catalogs.gpus.keys()));
    } else {
      p.gpus.push_back(g.get<std::string>());
    }
  }
}

// The GPUs a plan prices: search.gpus, else the base scenario's own GPU (cluster.gpu, or the
// top-level gpu of a dLLM scenario).
std::vector<std::string> priced_gpus(const PlanReading& in, const PlanSpec& p) {
  if (!p.gpus.empty() || !p.base.is_object()) return p.gpus;
  const Json* holder = p.dllm && p.base.contains("gpu") ? &p.base
                       : p.base.contains("cluster")     ? &p.base["cluster"]
                                                        : nullptr;
  if (holder && holder->is_object() && holder->contains("gpu") && (*holder)["gpu"].is_string() &&
      in.catalogs.gpus.all().count((*holder)["gpu"].get<std::string>()) != 0) {
    return {(*holder)["gpu"].get<std::string>()};
  }
  return {};
}

// search.prices: USD per GPU-hour over the catalog's price, for every priced GPU.
void read_search_prices(ObjectReader& r, PlanReading& in, PlanSpec& p) {
  std::map<std::string, double> given;
  if (const Json* prices = r.object("prices", false)) {
    for (auto it = prices->begin(); it != prices->end(); ++it) {
      const std::string where = "search.prices." + it.key();
      if (in.catalogs.gpus.all().count(it.key()) == 0) {
        in.issues.add(where, "unknown GPU; " + scenarios::choice_error(scenarios::Json(it.key()),
                                                                     in.catalogs.gpus.keys()));
      } else if (!it.value().is_number() || it.value().get<double>() <= 0) {
        in.issues.add(where, fmt::format("expected a positive price in USD per GPU-hour, got {}",
                                         scenarios::describe_json(it.value())));
      } else {
        given[it.key()] = it.value().get<double>();
      }
    }
  }
  for (const std::string& g : priced_gpus(in, p)) {
    const double price =
        given.contains(g) ? given[g] : in.catalogs.gpus.get(g).price_usd_per_hour;
    if (price <= 0) {
      in.issues.add("search.prices",
                    fmt::format("the GPU catalog has no price for {}; give one", g));
    }
    p.prices.emplace_back(g, price);
  }
}

// One of search.candidates: a name, fixed overrides (`set`) and grid axes.
PlanCandidate read_candidate(const Json& doc, size_t i, PlanReading& in) {
  const std::string where = fmt::format("search.candidates[{}]", i);
  Json resolved = Json::object();
  ObjectReader cr(doc, where, in.issues, resolved);
  PlanCandidate c;
  c.name = cr.string("name", fmt::format("c{}", i)).value_or("");
  if (const Json* set = cr.object("set", false)) {
    for (auto it = set->begin(); it != set->end(); ++it) c.set.emplace_back(it.key(), it.value());
  }
  if (const Json* grid = cr.object("grid", false)) {
    for (auto it = grid->begin(); it != grid->end(); ++it) {
      if (!it.value().is_array() || it.value().empty()) {
        in.issues.add(cr.child_path("grid") + "." + it.key(),
                      fmt::format("expected a non-empty array of values, got {}",
                                  scenarios::describe_json(it.value())));
        continue;
      }
      c.grid.emplace_back(it.key(), std::vector<Json>(it.value().begin(), it.value().end()));
    }
  }
  cr.finish();
  return c;
}

// Refuses a search space too large to simulate before it is expanded.
void check_search_size(PlanReading& in, const PlanSpec& p) {
  double configs = 0;
  for (const PlanCandidate& c : p.candidates) {
    double combos = 1;
    for (const auto& [key, values] : c.grid) combos *= static_cast<double>(values.size());
    configs += combos;
  }
  configs *= static_cast<double>(std::max<size_t>(1, p.gpus.size()));
  if (configs > kMaxPlanConfigs) {
    in.issues.add("search.candidates",
                  fmt::format("the search space expands to {:.0f} configs (GPUs x each "
                              "candidate's grid), more than the {} a plan may hold; narrow the "
                              "grid axes or split the plan",
                              configs, kMaxPlanConfigs));
  }
}

// `search`: the GPUs, their prices, the GPU budget and the candidates.
void read_search(ObjectReader& top, PlanReading& in, PlanSpec& p) {
  const Json* section = top.object("search", true);
  if (section == nullptr) return;
  ObjectReader r(*section, "search", in.issues, in.resolved["search"]);
  read_search_gpus(r, in, p);
  p.gpu_budget = r.integer("gpu_budget", int64_t{0}, 0).value_or(0);
  read_search_prices(r, in, p);
  if (const Json* cands = r.array("candidates", true)) {
    if (cands->empty()) in.issues.add("search.candidates", "expected at least one candidate");
    for (size_t i = 0; i < cands->size(); ++i) {
      p.candidates.push_back(read_candidate((*cands)[i], i, in));
    }
    check_search_size(in, p);
  }
  r.finish();
}

// `capacity`: whether each config's capacity is searched, and the bisection's knobs.
void read_capacity_knobs(ObjectReader& top, PlanReading& in, PlanSpec& p) {
  ObjectReader r = scenarios::section_reader(top, "capacity", in.issues, in.resolved);
  p.capacity = r.boolean("enabled", false).value_or(false);
  p.search.relative_tolerance =
      r.number("relative_tolerance", 0.05, 0.0, 1.0, true).value_or(0.05);
  p.search.max_runs = static_cast<int>(r.integer("max_runs", int64_t{12}, 1, 64).value_or(12));
  p.search.min_throughput_ratio =
      r.number("min_throughput_ratio", 0.9, 0.0, 1.0, true).value_or(0.9);
  p.search.early_stop = r.boolean("early_stop", true).value_or(true);
  p.warm_start = r.boolean("warm_start", true).value_or(true);
  if (r.has("start_rate")) {
    p.search.start_rate =
        r.number("start_rate", std::nullopt, 0.0, kMaxCapacityRate, true).value_or(0);
  }
  r.finish();
}

}  // namespace

PlanSpec load_plan(const std::string& path, const scenarios::DataRoot& root) {
  policies::register_builtin_policies();
  const scenarios::Catalogs& catalogs = scenarios::Catalogs::get(root);
  PlanSpec p;
  p.source = path;
  p.document = scenarios::read_json_file(path);
  Issues issues;
  Json resolved = Json::object();
  PlanReading in{path, fs::path(path).parent_path().string(), root, catalogs, issues, resolved};
  ObjectReader top(p.document, "", issues, resolved);
  p.name = top.string("name", fs::path(path).stem().string()).value_or("plan");
  p.description = top.string("description", std::string()).value_or("");
  read_base(top, in, p);
  read_rate(top, in, p);
  read_slo(top, in, p);
  read_search(top, in, p);
  read_capacity_knobs(top, in, p);
  {
    ObjectReader r = scenarios::section_reader(top, "report", issues, resolved);
    p.top = static_cast<int>(r.integer("top", int64_t{10}, 1, 100000).value_or(10));
    r.finish();
  }
  {
    ObjectReader r = scenarios::section_reader(top, "output", issues, resolved);
    p.store_requests = r.boolean("requests", false).value_or(false);
    r.finish();
  }
  top.finish();
  if (!issues.empty()) throw ConfigError(path, issues.list());
  return p;
}

// ---------------------------------------------------------------------------------------------
// Expansion

namespace {

std::string value_text(const Json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::string last_component(const std::string& path) {
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

// The policies an LLM configuration may name (a dLLM configuration names its policy through the
// dLLM scenario reader).
std::vector<std::string> llm_policy_names() {
  std::vector<std::string> names = sim::batching_policy_names(sim::ServedModel::kAutoregressive);
  for (const auto& [n, e] : sim::cluster_policies().entries()) names.push_back(n);
  return names;
}

bool policy_registered(const std::string& name) {
  const std::vector<std::string> names = llm_policy_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string registered_policies() {
  std::vector<std::string> names = llm_policy_names();
  std::sort(names.begin(), names.end());
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

double warm_start_rate(const PlanConfig& c, const std::map<int64_t, double>& capacities) {
  auto known = [&](int64_t index) {
    const auto it = capacities.find(index);
    return it == capacities.end() ? 0.0 : it->second;
  };
  const double last = known(c.warm_last), second = known(c.warm_second),
               corner = known(c.warm_corner);
  if (last > 0 && second > 0 && corner > 0) return second * last / corner;
  return last > 0 ? last : second;
}

std::vector<PlanConfig> expand_plan(const PlanSpec& p) {
  std::vector<PlanConfig> out;
  std::vector<std::string> gpus = p.gpus;
  const bool gpu_axis = !gpus.empty();
  if (!gpu_axis) gpus.push_back(p.prices.empty() ? "" : p.prices.front().first);
  for (const std::string& gpu : gpus) {
    for (const PlanCandidate& c : p.candidates) {
      size_t combos = 1;
      for (const auto& [key, values] : c.grid) combos *= values.size();
      for (size_t k = 0; k < combos; ++k) {
        PlanConfig cfg;
        cfg.index = static_cast<int64_t>(out.size());
        cfg.candidate = c.name;
        cfg.gpu = gpu;
        cfg.overrides.push_back(fmt::format("name={}#{}", p.name, cfg.index));
        if (gpu_axis) {
          // A dLLM scenario may name its GPU at the top level (dLLM form) or in cluster.gpu.
          const bool top_gpu = p.dllm && p.base.contains("gpu");
          cfg.overrides.push_back((top_gpu ? "gpu=" : "cluster.gpu=") + gpu);
        }
        for (const auto& [key, value] : c.set) cfg.overrides.push_back(key + "=" + value.dump());
        cfg.label = fmt::format("{} {}", gpu, c.name);
        // First axis outermost: decompose k in mixed radix, last axis fastest.
        std::vector<size_t> digit(c.grid.size());
        size_t rest = k;
        for (size_t a = c.grid.size(); a-- > 0;) {
          digit[a] = rest % c.grid[a].second.size();
          rest /= c.grid[a].second.size();
        }
        for (size_t a = 0; a < c.grid.size(); ++a) {
          const Json& v = c.grid[a].second[digit[a]];
          cfg.overrides.push_back(c.grid[a].first + "=" + v.dump());
          cfg.label += fmt::format(" {}={}", last_component(c.grid[a].first), value_text(v));
        }
        for (const auto& [g, price] : p.prices) {
          if (g == gpu) cfg.price_per_gpu_hour = price;
        }
        const size_t axes = c.grid.size();
        const int64_t last = axes >= 1 ? static_cast<int64_t>(digit[axes - 1]) : 0;
        const int64_t second = axes >= 2 ? static_cast<int64_t>(digit[axes - 2]) : 0;
        const int64_t row = axes >= 1 ? static_cast<int64_t>(c.grid[axes - 1].second.size()) : 1;
        cfg.chain = cfg.index - second * row - last;
        if (last > 0) cfg.warm_last = cfg.index - 1;
        if (second > 0) cfg.warm_second = cfg.index - row;
        if (last > 0 && second > 0) cfg.warm_corner = cfg.index - row - 1;
        out.push_back(std::move(cfg));
      }
    }
  }
  return out;
}

Json config_document(const PlanSpec& p, const PlanConfig& c, const SloCriteria& criteria,
                     std::optional<std::pair<std::string, double>> rate) {
  Json doc = p.base;
  std::vector<std::string> o = c.overrides;
  if (!p.dllm) {  // a dLLM scenario has no slo section: the planner checks its objectives
    o.insert(o.end(), criteria.scenario_overrides().begin(), criteria.scenario_overrides().end());
    o.push_back(fmt::format("slo.attainment_target={}", p.attainment));
  }
  if (rate) o.push_back(fmt::format("{}={}", rate->first, rate->second));
  scenarios::apply_overrides(doc, o);
  return doc;
}

// ---------------------------------------------------------------------------------------------
// Analytic bound

namespace {

struct BoundCache {
  std::mutex mutex;
  // workload key -> (prompt, output) per request
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> lengths;
  // deployment key -> (total prefill s, total decode s) at peak rate over the workload
  std::map<std::string, std::pair<double, double>> work;
};

BoundCache& bound_cache() {
  static BoundCache cache;
  return cache;
}

}  // namespace

double plan_bound(const scenarios::Scenario& s, const scenarios::DataRoot& root) {
  std::optional<sim::ClusterLayout> layout;
  if (s.cluster_policy) {
    layout = sim::cluster_policies().get(s.policy.type).make(s.policy.params);
    if (layout->elastic) return 0;  // instances come and go: no static bound
  }
  const bool decode_prefills = layout && layout->decode_takes_arrivals;
  BoundCache& cache = bound_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  const std::string wkey = fmt::format("{}|{}|{}", s.workload.dump(), s.seed, s.base_dir);
  auto lit = cache.lengths.find(wkey);
  if (lit == cache.lengths.end()) {
    const Workload w = scenarios::build_workload(s, root);
    std::vector<std::pair<int64_t, int64_t>> v;
    v.reserve(w.requests.size());
    for (const auto& r : w.requests) v.emplace_back(r.prompt_tokens, r.output_tokens);
    lit = cache.lengths.emplace(wkey, std::move(v)).first;
  }
  const auto& lengths = lit->second;
  const double n = static_cast<double>(lengths.size());
  const auto& catalogs = scenarios::Catalogs::get(root);

  // Per-request lower bounds (seconds) of one instance of each group, prefill and decode parts.
  double cap_prefill = 0, cap_decode = 0, min_tp = 1e300, min_td = 1e300;
  int64_t instances = 0;
  for (const scenarios::GroupPlan& g : s.groups) {
    const std::string dkey =
        fmt::format("{}|{}|{}|{}|ep{}|dp{}|pp{}|{}|{}|{}|{}|{}", wkey, s.model, s.cluster.gpu, g.tp,
                    g.ep, g.attention_dp, g.pp,
                    s.cluster.expert_routing ? s.cluster.expert_routing->name() : "",
                    models::dtype_name(s.cluster.weight_dtype), models::dtype_name(s.cluster.kv_dtype),
                    s.cost_type, s.resolved.at("cost_model").dump());
    auto wit = cache.work.find(dkey);
    if (wit == cache.work.end()) {
      const models::Deployment dep{&catalogs.models.get(s.model), &catalogs.gpus.get(s.cluster.gpu),
                                   g.tp, s.cluster.weight_dtype, s.cluster.kv_dtype, g.ep,
                                   g.attention_dp, g.pp, s.cluster.expert_routing};
      const auto cost = scenarios::make_cost_model({s.cost_type, s.cost, s.cost_custom_allreduce},
                                                   dep, root);
      // All requests in one pass: the loosest packing, so each real iteration (which costs at
      // least its own peak bound, and reads the weights at least once) adds up to no less.
      models::BatchShape prefill, decode;
      for (const auto& [pt, ot] : lengths) {
        prefill.segments.push_back({pt, pt, 1});
        if (ot > 1) decode.segments.push_back({ot - 1, pt + ot - 1, ot - 1});
      }
      const double tp = prefill.empty() ? 0 : to_seconds(cost->peak_bound_time(prefill));
      const double td = decode.empty() ? 0 : to_seconds(cost->peak_bound_time(decode));
      wit = cache.work.emplace(dkey, std::make_pair(tp, td)).first;
    }
    const double tp = wit->second.first / n, td = wit->second.second / n;
    const bool prefills = g.role != sim::InstanceRole::kDecode || decode_prefills;
    const bool decodes = g.role != sim::InstanceRole::kPrefill;
    // A pipeline's pp micro-batch slots each run a whole pass at a time.
    const auto slots = static_cast<double>(g.engine_instances());
    if (prefills) {
      cap_prefill += tp > 0 ? slots / tp : 1e300;
      min_tp = std::min(min_tp, tp);
    }
    if (decodes) {
      cap_decode += td > 0 ? slots / td : 1e300;
      min_td = std::min(min_td, td);
    }
    instances += g.engine_instances();
  }
  if (min_tp > 1e299 || min_td > 1e299) return 0;
  const double total = min_tp + min_td > 0 ? instances / (min_tp + min_td) : 1e300;
  return std::min({cap_prefill, cap_decode, total});
}

// ---------------------------------------------------------------------------------------------
// Pruning

namespace {

// Reports a malformed candidate's scenario issues once per candidate and path.
void report_candidate_issues(const PlanConfig& c, const ConfigError& e,
                             std::vector<ConfigIssue>& plan_issues,
                             std::map<std::string, bool>& reported) {
  for (const ConfigIssue& i : e.issues()) {
    const std::string key = c.candidate + "|" + i.path + "|" + i.message;
    if (reported[key]) continue;
    reported[key] = true;
    plan_issues.push_back({fmt::format("search.candidates \"{}\" (config #{} {}): scenario {}",
                                       c.candidate, c.index, c.label, i.path),
                           i.message});
  }
}

void set_cost(const PlanSpec& p, PlanConfig& c) {
  if (c.price_per_gpu_hour <= 0) {
    for (const auto& [g, price] : p.prices) {
      if (g == c.gpu) c.price_per_gpu_hour = price;
    }
  }
  c.cost_per_hour = c.num_gpus * c.price_per_gpu_hour;
}

// A dLLM config: one GPU; pruned when not even the shortest request of the workload fits.
void prune_dllm_config(const PlanSpec& p, PlanConfig& c, const Json& doc,
                       const scenarios::DataRoot& root, std::vector<ConfigIssue>& plan_issues,
                       std::map<std::string, bool>& reported) {
  scenarios::Scenario s;
  try {
    const std::string source = fmt::format("{} config #{}", p.source, c.index);
    s = scenarios::parse_scenario(doc, source, p.base_dir, root);
    if (!s.dllm) {
      throw ConfigError(source, {{"policy.type",
                                  "a configuration of a dLLM plan must stay a "
                                  "diffusion-LLM scenario"}});
    }
  } catch (const ConfigError& e) {
    report_candidate_issues(c, e, plan_issues, reported);
    c.status = ConfigStatus::kError;
    c.reason = e.what();
    return;
  }
  c.policy = s.policy.type;
  c.num_gpus = s.cluster.instances * s.cluster.tp;
  if (c.gpu.empty()) c.gpu = s.cluster.gpu;
  set_cost(p, c);
  if (p.gpu_budget > 0 && c.num_gpus > p.gpu_budget) {
    c.status = ConfigStatus::kPruned;
    c.reason = fmt::format("uses {} GPUs, over the budget of {}", c.num_gpus, p.gpu_budget);
    return;
  }
  const Workload w = scenarios::build_dllm_workload(s, root);
  int64_t shortest = std::numeric_limits<int64_t>::max();
  for (const RequestSpec& r : w.requests) shortest = std::min(shortest, r.prompt_tokens);
  if (w.requests.empty()) shortest = 1;
  const std::string shortfall =
      dllm::memory_shortfall(s.dllm->config, scenarios::dllm_deployment(s, root),
                             shortest + s.dllm->config.denoise.gen_length);
  if (!shortfall.empty()) {
    c.status = ConfigStatus::kPruned;
    c.reason = "does not fit: " + shortfall;
    return;
  }
  c.bound_rps = 0;  // no analytic rate bound for dLLM serving
  c.status = ConfigStatus::kNotRun;
}

}  // namespace

void prune_config(const PlanSpec& p, PlanConfig& c, const SloCriteria& criteria,
                  const scenarios::DataRoot& root, std::vector<ConfigIssue>& plan_issues,
                  std::map<std::string, bool>& reported) {
  const std::string source = fmt::format("{} config #{}", p.source, c.index);
  Json doc = config_document(p, c, criteria, std::nullopt);
  if (doc.contains("policy") && doc["policy"].is_object() && doc["policy"].contains("type") &&
      doc["policy"]["type"].is_string()) {
    c.policy = doc["policy"]["type"].get<std::string>();
  } else {
    c.policy = "coloc";
  }
  if (p.dllm) {
    prune_dllm_config(p, c, doc, root, plan_issues, reported);
    return;
  }
  if (!policy_registered(c.policy)) {
    c.status = ConfigStatus::kError;
    c.reason = fmt::format("policy \"{}\" is not registered in this build (registered: {})",
                           c.policy, registered_policies());
    return;
  }
  scenarios::Scenario s;
  try {
    s = scenarios::parse_scenario(doc, source, p.base_dir, root);
  } catch (const scenarios::DeploymentError& e) {
    c.status = ConfigStatus::kPruned;
    c.reason = "does not fit: " + e.issues().front().message;
    return;
  } catch (const ConfigError& e) {
    // A malformed candidate: report it once per candidate and scenario path.
    report_candidate_issues(c, e, plan_issues, reported);
    c.status = ConfigStatus::kError;
    c.reason = e.what();
    return;
  }
  c.num_gpus = 0;
  for (const auto& g : s.groups) c.num_gpus += g.count * g.gpus_per_instance();
  if (c.gpu.empty()) c.gpu = s.cluster.gpu;
  set_cost(p, c);
  if (p.gpu_budget > 0 && c.num_gpus > p.gpu_budget) {
    c.status = ConfigStatus::kPruned;
    c.reason = fmt::format("uses {} GPUs, over the budget of {}", c.num_gpus, p.gpu_budget);
    return;
  }
  if (s.workload.at("type") == "closed_loop") {
    plan_issues.push_back({"base.workload.type", "a closed-loop workload has no request rate to plan for"});
    c.status = ConfigStatus::kError;
    return;
  }
  c.bound_rps = plan_bound(s, root);
  const double ratio = p.search.min_throughput_ratio;
  if (p.target_rate && c.bound_rps > 0 && *p.target_rate * ratio > c.bound_rps) {
    c.status = ConfigStatus::kPruned;
    c.reason = fmt::format(
        "roofline bound: sustains at most {:.3f} req/s at peak FLOP/s and bandwidth; the target "
        "{:.3f} req/s needs {:.3f} (x{} sustained)",
        c.bound_rps, *p.target_rate, *p.target_rate * ratio, ratio);
    return;
  }
  c.status = ConfigStatus::kNotRun;
}

}  // namespace servesim::app
