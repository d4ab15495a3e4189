// Running a plan: pruning, the worker pool over configs, MPI sharding, the results database and
// the report (cheapest config, top-N table, Pareto frontier), plus --explain and --emit-scenario.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "app/plan.h"
#include "app/dllm_run.h"
#include "app/parallel.h"
#include "app/plan_internal.h"
#include "app/run_scenario.h"
#include "reports/plan_store.h"
#include "reports/sqlite_sink.h"
#include "scenarios/dllm_scenario.h"
#include "core/error.h"

namespace servesim::app {
namespace {

struct Interrupted {};

// ---------------------------------------------------------------------------------------------
// Serialization between ranks (JSON; doubles round-trip exactly, NaN travels as null).

Json num(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }
double num_of(const Json& j) {
  return j.is_null() ? std::numeric_limits<double>::quiet_NaN() : j.get<double>();
}

Json to_json(const StoredRun& r) {
  Json j;
  j["info"] = {r.info.scenario, r.info.policy, r.info.router, r.info.workload, r.info.code_rev,
               r.info.started_at, r.info.seed};
  j["params"] = Json::array();
  for (const auto& [k, v] : r.params) j["params"].push_back({k, v});
  j["scalars"] = Json::array();
  for (const auto& [e, n, v] : r.scalars) j["scalars"].push_back({e, n, num(v)});
  j["tbt"] = Json::array();
  for (const auto& b : r.tbt_bins) j["tbt"].push_back({b.lower, b.upper, b.count});
  j["iterations"] = Json::array();
  for (const auto& [instance, metric, bins] : r.iteration_bins) {
    Json jb = Json::array();
    for (const auto& b : bins) jb.push_back({b.lower, b.upper, b.count});
    j["iterations"].push_back({instance, metric, jb});
  }
  j["requests"] = Json::array();
  for (const auto& q : r.requests) {
    j["requests"].push_back({q.request_id, q.instance_id, q.arrival_ns, q.first_scheduled_ns,
                             q.first_token_ns, q.done_ns, q.prompt_tokens, q.output_tokens,
                             q.preemptions, q.max_tbt_ns, q.tbt_slo_violations, q.token_times_ns});
  }
  j["samples"] = Json::array();
  for (const auto& s : r.samples) j["samples"].push_back({s.t_ns, s.entity, s.metric, num(s.value)});
  j["status"] = r.status;
  j["wall_s"] = r.wall_s;
  j["fingerprint"] = r.fingerprint;
  return j;
}

StoredRun stored_run_of(const Json& j) {
  StoredRun r;
  const Json& i = j.at("info");
  r.info = {i[0], i[1], i[2], i[3], i[4], i[5], i[6].get<uint64_t>()};
  for (const auto& p : j.at("params")) r.params.emplace_back(p[0], p[1]);
  for (const auto& s : j.at("scalars")) r.scalars.emplace_back(s[0], s[1], num_of(s[2]));
  for (const auto& b : j.at("tbt")) r.tbt_bins.push_back({b[0], b[1], b[2]});
  for (const auto& it : j.at("iterations")) {
    std::vector<LogHistogram::Bin> bins;
    for (const auto& b : it[2]) bins.push_back({b[0], b[1], b[2]});
    r.iteration_bins.emplace_back(it[0].get<int32_t>(), it[1].get<std::string>(), std::move(bins));
  }
  for (const auto& q : j.at("requests")) {
    sim::RequestRecord x;
    x.request_id = q[0];
    x.instance_id = q[1];
    x.arrival_ns = q[2];
    x.first_scheduled_ns = q[3];
    x.first_token_ns = q[4];
    x.done_ns = q[5];
    x.prompt_tokens = q[6];
    x.output_tokens = q[7];
    x.preemptions = q[8];
    x.max_tbt_ns = q[9];
    x.tbt_slo_violations = q[10];
    x.token_times_ns = q[11].get<std::vector<int64_t>>();
    r.requests.push_back(std::move(x));
  }
  for (const auto& s : j.at("samples")) r.samples.push_back({s[0], s[1], s[2], num_of(s[3])});
  r.status = j.at("status");
  r.wall_s = j.at("wall_s");
  r.fingerprint = j.at("fingerprint");
  return r;
}

Json to_json(const PlanConfigResult& r) {
  Json j;
  j["index"] = r.index;
  j["finished"] = r.finished;
  j["error"] = r.error;
  j["at_target"] = r.at_target ? Json(*r.at_target) : Json(nullptr);
  j["capacity"] = r.capacity_rps;
  j["probes"] = Json::array();
  for (const PlanProbe& p : r.probes) {
    Json pj;
    pj["rate"] = p.rate;
    pj["meets"] = p.meets;
    pj["checks"] = Json::array();
    for (const SloCheck& c : p.checks) {
      pj["checks"].push_back({c.name, num(c.value), num(c.limit), c.at_least, c.ok, c.unit});
    }
    pj["m"] = {num(p.output_tokens_per_s), num(p.tokens_per_s_per_gpu), num(p.tokens_per_s_per_user),
               num(p.goodput_tokens_per_s), num(p.slo_attainment), num(p.ttft_p99_s),
               num(p.tpot_p50_s), num(p.tbt_p99_s), num(p.gpu_seconds)};
    pj["fingerprint"] = p.fingerprint;
    pj["run"] = to_json(p.run);
    j["probes"].push_back(std::move(pj));
  }
  return j;
}

PlanConfigResult config_result_of(const Json& j) {
  PlanConfigResult r;
  r.index = j.at("index");
  r.finished = j.at("finished");
  r.error = j.at("error");
  if (!j.at("at_target").is_null()) r.at_target = j.at("at_target").get<size_t>();
  r.capacity_rps = j.at("capacity");
  for (const auto& pj : j.at("probes")) {
    PlanProbe p;
    p.rate = pj.at("rate");
    p.meets = pj.at("meets");
    for (const auto& c : pj.at("checks")) {
      p.checks.push_back({c[0], num_of(c[1]), num_of(c[2]), c[3], c[4], c[5]});
    }
    const Json& m = pj.at("m");
    p.output_tokens_per_s = num_of(m[0]);
    p.tokens_per_s_per_gpu = num_of(m[1]);
    p.tokens_per_s_per_user = num_of(m[2]);
    p.goodput_tokens_per_s = num_of(m[3]);
    p.slo_attainment = num_of(m[4]);
    p.ttft_p99_s = num_of(m[5]);
    p.tpot_p50_s = num_of(m[6]);
    p.tbt_p99_s = num_of(m[7]);
    p.gpu_seconds = num_of(m[8]);
    p.fingerprint = pj.at("fingerprint");
    p.run = stored_run_of(pj.at("run"));
    r.probes.push_back(std::move(p));
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// Simulating one config

struct PlanContext {
  const PlanSpec& spec;
  const SloCriteria& criteria;
  const scenarios::DataRoot& root;
};

std::string config_source(const PlanSpec& spec, const PlanConfig& c) {
  return fmt::format("{} config #{}", spec.source, c.index);
}

// Fills the figures of a probe from its run summary.
void fill_probe(PlanProbe& p, const reports::RunSummary& m) {
  p.output_tokens_per_s = m.output_tokens_per_s;
  p.tokens_per_s_per_gpu = m.num_gpus > 0 ? m.output_tokens_per_s / m.num_gpus : 0;
  p.tokens_per_s_per_user = m.tpot_s.mean > 0 ? 1.0 / m.tpot_s.mean : 0;
  p.goodput_tokens_per_s = m.goodput_tokens_per_s;
  p.slo_attainment = m.slo_attainment;
  p.ttft_p99_s = m.ttft_s.p99;
  p.tpot_p50_s = m.tpot_s.p50;
  p.tbt_p99_s = m.tbt_s.p99;
  p.gpu_seconds = m.gpu_seconds;
}

// The override key that sets a config's request rate.
std::string config_rate_knob(const PlanSpec& spec, const PlanConfig& c, const SloCriteria& criteria,
                             const scenarios::DataRoot& root) {
  const scenarios::Scenario s =
      scenarios::parse_scenario(config_document(spec, c, criteria, std::nullopt),
                                config_source(spec, c), spec.base_dir, root);
  return s.dllm ? scenarios::dllm_rate_knob(s) : rate_knob(s);
}

// `warm_rate` > 0: where its chain's capacities put c's (warm_start_rate(), PlanSpec::warm_start).
PlanConfigResult simulate_config(const PlanContext& ctx, const PlanConfig& c, double warm_rate = 0) {
  const PlanSpec& spec = ctx.spec;
  PlanConfigResult result;
  result.index = c.index;
  const std::string source = config_source(spec, c);
  const std::string knob = config_rate_knob(spec, c, ctx.criteria, ctx.root);
  std::vector<reports::RunSummary> summaries;
  const auto extra_params = [&](double rate) -> std::vector<std::pair<std::string, std::string>> {
    return {{"plan.name", spec.name},
            {"plan.config", std::to_string(c.index)},
            {"plan.label", c.label},
            {"plan.rate", fmt::format("{}", rate)}};
  };
  // One dLLM simulation: its requests summarized like an LLM run's (TTFT = E2E), on one GPU.
  auto dllm_probe = [&](double rate, PlanProbe& p) -> reports::RunSummary {
    const scenarios::Scenario s = scenarios::parse_scenario(
        config_document(spec, c, ctx.criteria, std::make_pair(knob, rate)), source, spec.base_dir,
        ctx.root);
    const DllmOutcome o = run_dllm(s, ctx.root, "");
    if (!o.oom.empty()) throw Error("out of memory: " + o.oom);
    p.run = make_stored_dllm_run(s, o, extra_params(rate));
    const reports::RunSummary m = summarize_dllm(s, o, ctx.criteria.request_objectives());
    p.checks = ctx.criteria.check(m, rate);
    // A request the deployment can never run (rejected) is a request not served.
    const double total = static_cast<double>(o.result.requests.size());
    const double served = total - static_cast<double>(o.result.rejected);
    p.checks.push_back({"served", total > 0 ? served / total : 1.0, 1.0, true,
                        o.result.rejected == 0, ""});
    p.fingerprint = p.run.fingerprint;
    if (!spec.store_requests) p.run.requests.clear();
    return m;
  };
  // A capacity probe may stop once it cannot meet the SLO (spec.search.early_stop); the run at
  // the target rate is the config's answer and always runs to the end.
  auto probe = [&](double rate, bool may_stop) -> size_t {
    for (size_t i = 0; i < result.probes.size(); ++i) {
      if (result.probes[i].rate == rate) return i;
    }
    if (plan_interrupted().load()) throw Interrupted{};
    PlanProbe p;
    p.rate = rate;
    reports::RunSummary m;
    if (spec.dllm) {
      m = dllm_probe(rate, p);
    } else {
      const scenarios::Scenario s = scenarios::parse_scenario(
          config_document(spec, c, ctx.criteria, std::make_pair(knob, rate)), source,
          spec.base_dir, ctx.root);
      RunOptions ro;
      ro.keep_records = spec.store_requests;
      const std::unique_ptr<SloFailureWatch> watch =
          may_stop && spec.search.early_stop ? ctx.criteria.failure_watch() : nullptr;
      ro.watch = watch.get();
      const RunOutcome o = run_scenario(s, ctx.root, ro);
      m = o.summary;
      // A probe stopped early fails on the criterion that stopped it; its other figures cover
      // only the requests finished by then.
      p.checks = o.stopped_early.empty() ? ctx.criteria.check(m, rate)
                                         : std::vector<SloCheck>{watch->verdict()};
      p.fingerprint = format_fingerprint(o.result.event_fingerprint);
      p.run = make_stored_run(s, o, spec.store_requests, extra_params(rate));
    }
    p.meets = SloCriteria::all_ok(p.checks);
    fill_probe(p, m);
    result.probes.push_back(std::move(p));
    summaries.push_back(m);
    return result.probes.size() - 1;
  };
  auto capacity_probe = [&](double rate) {
    const size_t i = probe(rate, /*may_stop=*/true);
    return CapacityProbe{rate, result.probes[i].meets, summaries[i], {}, {}};
  };
  const double cap = c.bound_rps > 0 ? c.bound_rps / spec.search.min_throughput_ratio : 0;
  try {
    if (spec.target_rate) {
      result.at_target = probe(*spec.target_rate, /*may_stop=*/false);
      if (spec.capacity) {
        result.capacity_rps =
            search_capacity(capacity_probe, *spec.target_rate, spec.search, cap).capacity_rps;
      }
    } else {
      double start = spec.search.start_rate;
      CapacityOptions search = spec.search;
      if (start <= 0 && spec.warm_start && warm_rate > 0) {
        start = cap > 0 ? std::min(warm_rate, cap) : warm_rate;
        search.first_step = std::min(2.0, 1.0 + 2.0 * spec.search.relative_tolerance);
      }
      if (start <= 0) {
        const scenarios::Scenario s = scenarios::parse_scenario(
            config_document(spec, c, ctx.criteria, std::nullopt), source, spec.base_dir, ctx.root);
        start = cap > 0  ? cap / 2
                : s.dllm ? scenarios::dllm_offered_rate(s, ctx.root)
                         : workload_rate(s, ctx.root);
      }
      result.capacity_rps = search_capacity(capacity_probe, start, search, cap).capacity_rps;
    }
    result.finished = true;
  } catch (const Interrupted&) {
    result.finished = false;
  } catch (const std::exception& e) {
    result.finished = true;
    result.error = e.what();
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// Worker pool with a progress bar

// The survivors (configs to simulate) in chains: each chain's configs in index order, a chain
// per config without warm starts; chains in order of their first config.
std::vector<std::vector<size_t>> chains_of(const PlanSpec& spec, const std::vector<PlanConfig>& configs,
                                           const std::vector<size_t>& survivors) {
  std::vector<std::vector<size_t>> chains;
  std::map<int64_t, size_t> by_chain;
  for (const size_t i : survivors) {
    const int64_t key = spec.warm_start ? configs[i].chain : configs[i].index;
    const auto [it, added] = by_chain.emplace(key, chains.size());
    if (added) chains.emplace_back();
    chains[it->second].push_back(i);
  }
  return chains;
}

// Simulates one chain's configs (indices into `configs`, in index order) one after another, each
// warm-started from the capacities found before it in the chain (warm_start_rate()); once the plan
// is interrupted no further config starts. `done` is called after each config.
std::vector<PlanConfigResult> simulate_chain(const PlanContext& ctx,
                                             const std::vector<PlanConfig>& configs,
                                             const std::vector<size_t>& chain,
                                             const std::function<void()>& done = {}) {
  std::vector<PlanConfigResult> results;
  std::map<int64_t, double> capacity;  // of the chain's configs simulated so far
  for (const size_t i : chain) {
    if (plan_interrupted().load()) break;
    results.push_back(simulate_config(ctx, configs[i], warm_start_rate(configs[i], capacity)));
    capacity[configs[i].index] = results.back().capacity_rps;
    if (done) done();
  }
  return results;
}

// Simulates the configs of `chains` (indices into `configs`), a chain at a time on each of up to
// `jobs` threads, each config warm-started from the previous one's capacity. Results in chain
// order, each chain's in index order.
std::vector<PlanConfigResult> run_pool(const PlanContext& ctx, const std::vector<PlanConfig>& configs,
                                       const std::vector<std::vector<size_t>>& chains, int jobs,
                                       bool progress) {
  std::vector<std::vector<PlanConfigResult>> results(chains.size());
  size_t total = 0;
  for (const auto& chain : chains) total += chain.size();
  std::atomic<size_t> configs_done{0};
  const bool bar = progress && isatty(STDERR_FILENO) != 0;
  const auto t0 = std::chrono::steady_clock::now();
  auto draw = [&](size_t) {
    const size_t d = configs_done.load();
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double eta = d > 0 ? el / d * (total - d) : 0;
    const int filled = total == 0 ? 30 : static_cast<int>(30.0 * d / total);
    fmt::print(stderr, "\r[{:<30}] {}/{} configs  {:.0f} s elapsed  ETA {}", std::string(filled, '#'),
               d, total, el, d > 0 ? fmt::format("{:.0f} s", eta) : std::string("?"));
    std::fflush(stderr);
  };
  parallel_for(
      chains.size(), jobs,
      [&](size_t k) { results[k] = simulate_chain(ctx, configs, chains[k], [&] { ++configs_done; }); },
      [] { return plan_interrupted().load(); }, bar ? std::function<void(size_t)>(draw) : nullptr);
  if (bar) fmt::print(stderr, "\r{:<80}\r", "");
  std::vector<PlanConfigResult> flat;
  for (auto& chain : results) {
    for (PlanConfigResult& r : chain) flat.push_back(std::move(r));
  }
  if (plan_interrupted().load()) {
    fmt::print(stderr, "servesim plan: interrupted; keeping the {} finished config(s)\n",
               configs_done.load());
  }
  return flat;
}

// ---------------------------------------------------------------------------------------------
// Report

const PlanConfig* find_config(const std::vector<PlanConfig>& configs, const std::string& key) {
  for (const PlanConfig& c : configs) {
    if (std::to_string(c.index) == key || c.label == key) return &c;
  }
  return nullptr;
}

std::string format_check(const SloCheck& c) {
  auto fmt_v = [&](double v) {
    return c.unit == "s" ? fmt::format("{:.1f} ms", v * 1e3)
           : c.unit.empty() ? fmt::format("{:.2f} %", v * 100)
                            : fmt::format("{:.3f} {}", v, c.unit);
  };
  const double margin = c.limit != 0 ? (c.value - c.limit) / c.limit * 100 : 0;
  return fmt::format("{:<11} {:>14} {} {:>14}  {}", c.name, fmt_v(c.value), c.at_least ? ">=" : "<=",
                     fmt_v(c.limit),
                     c.ok ? "ok"
                          : fmt::format("FAILS by {:.1f} %", c.at_least ? -margin : margin));
}

uint64_t fnv(uint64_t h, const std::string& s) {
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

// The config --explain or --emit-scenario names, or nullptr when neither is given.
const PlanConfig* selected_config(const std::vector<PlanConfig>& configs,
                                  const PlanRunOptions& options, const std::string& plan_path) {
  const std::string wanted = !options.explain.empty() ? options.explain : options.emit;
  if (wanted.empty()) return nullptr;
  const PlanConfig* only = find_config(configs, wanted);
  if (!only) {
    throw ConfigError(plan_path, {{"--explain/--emit-scenario " + wanted,
                                   fmt::format("no such config; give an index 0..{} or a label "
                                               "as printed by servesim plan",
                                               configs.size() - 1)}});
  }
  return only;
}

// The probes of an explained config's simulation, each with its SLO checks, and its status.
void print_explained_result(const PlanSpec& spec, const PlanConfigResult& r, std::ostream& out) {
  if (!r.error.empty()) {
    out << fmt::format("status    error: {}\n", r.error);
    return;
  }
  for (const PlanProbe& p : r.probes) {
    out << fmt::format("\nrate {:.3f} req/s: {}  (fingerprint {})\n", p.rate,
                       p.meets ? "meets the SLO" : "fails the SLO", p.fingerprint);
    for (const SloCheck& ck : p.checks) out << "  " << format_check(ck) << "\n";
  }
  if (spec.target_rate) {
    const bool meets = r.at_target && r.probes[*r.at_target].meets;
    out << fmt::format("\nstatus    {} at the target {:.3f} req/s", meets ? "meets" : "fails",
                       *spec.target_rate);
    if (spec.capacity) out << fmt::format("; serving capacity {:.3f} req/s", r.capacity_rps);
    out << "\n";
  } else {
    out << fmt::format("\nstatus    serving capacity {:.3f} req/s\n", r.capacity_rps);
  }
}

// --explain: the config's overrides, GPUs and bound, then its chain simulated as in the whole
// plan (warm-started from the earlier configs of its chain) with every probe's SLO checks.
void explain_config(const PlanContext& ctx, const std::vector<PlanConfig>& configs,
                    const PlanConfig& c, std::ostream& out) {
  const PlanSpec& spec = ctx.spec;
  out << fmt::format("config #{}  {}\n", c.index, c.label);
  out << fmt::format("base      {}\n", spec.base_source);
  for (const std::string& o : c.overrides) out << fmt::format("  --set '{}'\n", o);
  if (!spec.dllm) {
    for (const std::string& o : ctx.criteria.scenario_overrides()) {
      out << fmt::format("  --set '{}'\n", o);
    }
    out << fmt::format("  --set 'slo.attainment_target={}'\n", spec.attainment);
  }
  out << "  (plus the rate knob per run; --emit-scenario prints the whole document)\n";
  out << fmt::format("GPUs      {} x {} at ${:.2f}/GPU-hour = ${:.2f}/hour\n", c.num_gpus, c.gpu,
                     c.price_per_gpu_hour, c.cost_per_hour);
  if (c.bound_rps > 0) {
    out << fmt::format("bound     sustains at most {:.3f} req/s (roofline at peak, by role)\n",
                       c.bound_rps);
  }
  if (c.status == ConfigStatus::kPruned || c.status == ConfigStatus::kError) {
    out << fmt::format("status    {}: {}\n", status_name(c.status), c.reason);
    return;
  }
  std::vector<size_t> chain;
  if (spec.warm_start && !spec.target_rate) {
    for (const PlanConfig& before : configs) {
      if (before.chain == c.chain && before.index < c.index &&
          before.status == ConfigStatus::kNotRun) {
        chain.push_back(static_cast<size_t>(before.index));
      }
    }
  }
  chain.push_back(static_cast<size_t>(c.index));
  const std::vector<PlanConfigResult> chain_results = simulate_chain(ctx, configs, chain);
  if (chain_results.size() < chain.size()) {
    out << "status    interrupted\n";
    return;
  }
  print_explained_result(spec, chain_results.back(), out);
}

// The outcome of every simulated config, by config index.
using PlanResults = std::map<int64_t, PlanConfigResult>;

// Simulates the survivors, sharded over ranks (whole chains per rank: a config's result depends
// on its chain's earlier ones only), in parallel within a rank. Returns the results on rank 0,
// nothing on the other ranks.
std::optional<PlanResults> simulate_survivors(const PlanContext& ctx,
                                              const std::vector<PlanConfig>& configs,
                                              const PlanRunOptions& options) {
  std::unique_ptr<RankTransport> transport = make_rank_transport();
  std::vector<size_t> survivors;
  for (const PlanConfig& c : configs) {
    if (c.status == ConfigStatus::kNotRun) survivors.push_back(static_cast<size_t>(c.index));
  }
  const std::vector<std::vector<size_t>> chains = chains_of(ctx.spec, configs, survivors);
  std::vector<std::vector<size_t>> mine;
  for (size_t k = 0; k < chains.size(); ++k) {
    if (static_cast<int>(k % static_cast<size_t>(transport->size())) == transport->rank()) {
      mine.push_back(chains[k]);
    }
  }
  std::vector<PlanConfigResult> local = run_pool(ctx, configs, mine, options.jobs,
                                                 options.progress && transport->rank() == 0);
  PlanResults results;
  if (transport->size() == 1) {
    // One process: no serialised copy of every result (to_json round-trips them exactly).
    for (PlanConfigResult& r : local) {
      if (r.finished) results[r.index] = std::move(r);
    }
    return results;
  }
  Json payload = Json::array();
  for (const PlanConfigResult& r : local) {
    if (r.finished) payload.push_back(to_json(r));
  }
  local.clear();
  const std::vector<std::string> gathered = transport->gather(payload.dump());
  if (transport->rank() != 0) return std::nullopt;
  for (const std::string& g : gathered) {
    for (const Json& j : Json::parse(g)) {
      PlanConfigResult r = config_result_of(j);
      results[r.index] = std::move(r);
    }
  }
  return results;
}

// Sets each simulated config's status and reason from its result; returns the simulations run.
size_t apply_verdicts(const PlanSpec& spec, const PlanResults& results,
                      std::vector<PlanConfig>& configs) {
  size_t simulations = 0;
  for (PlanConfig& c : configs) {
    auto it = results.find(c.index);
    if (c.status != ConfigStatus::kNotRun || it == results.end()) continue;
    const PlanConfigResult& r = it->second;
    simulations += r.probes.size();
    if (!r.error.empty()) {
      c.status = ConfigStatus::kError;
      c.reason = r.error;
    } else if (spec.target_rate) {
      const PlanProbe& p = r.probes[*r.at_target];
      c.status = p.meets ? ConfigStatus::kMeets : ConfigStatus::kFails;
      if (!p.meets) {
        for (const SloCheck& ck : p.checks) {
          if (!ck.ok) c.reason += (c.reason.empty() ? "" : "; ") + format_check(ck);
        }
      }
    } else {
      c.status = r.capacity_rps > 0 ? ConfigStatus::kMeets : ConfigStatus::kFails;
      if (r.capacity_rps <= 0) c.reason = "no probed rate met the SLO";
    }
  }
  return simulations;
}

reports::PlanConfigRow config_row(const PlanConfig& c) {
  reports::PlanConfigRow cr;
  cr.config_index = c.index;
  cr.label = c.label;
  cr.candidate = c.candidate;
  cr.gpu = c.gpu;
  cr.policy = c.policy;
  cr.status = status_name(c.status);
  cr.reason = c.reason;
  cr.num_gpus = c.num_gpus;
  cr.price_per_gpu_hour = c.price_per_gpu_hour;
  cr.cost_per_hour = c.cost_per_hour;
  cr.bound_rps = c.bound_rps;
  cr.overrides = Json(c.overrides).dump();
  return cr;
}

// Writes every simulation, then the config table, in config order; returns the plan_id.
int64_t store_plan(const std::string& db_path, const PlanSpec& spec,
                   const std::vector<PlanConfig>& configs, const PlanResults& results,
                   bool interrupted) {
  reports::SqliteSink sink(db_path);
  reports::PlanStore store(db_path);
  reports::PlanRow row{spec.name, spec.source, spec.target_rate ? "target" : "max", "",
                       spec.document.dump(), spec.target_rate.value_or(0)};
  row.started_at = utc_now_iso();
  const int64_t plan_id = store.begin_plan(row);
  for (const PlanConfig& c : configs) {
    reports::PlanConfigRow cr = config_row(c);
    if (auto it = results.find(c.index); it != results.end()) {
      cr.capacity_rps = it->second.capacity_rps;
      if (it->second.at_target) cr.meets_target = it->second.probes[*it->second.at_target].meets;
      for (const PlanProbe& p : it->second.probes) {
        store.add_run(plan_id, c.index, write_run(sink, p.run), p.rate, p.meets);
      }
    }
    store.add_config(plan_id, cr);
  }
  store.finish_plan(plan_id, interrupted ? "interrupted" : "ok");
  return plan_id;
}

// The simulated plan as the report reads it: each config's probe at the target and capacity.
struct PlanOutcome {
  const PlanSpec& spec;
  const std::vector<PlanConfig>& configs;
  const PlanResults& results;
  bool have_capacity() const { return !spec.target_rate || spec.capacity; }
  const PlanProbe* probe_at_target(const PlanConfig& c) const {
    auto it = results.find(c.index);
    if (it == results.end() || !it->second.at_target) return nullptr;
    return &it->second.probes[*it->second.at_target];
  }
  double capacity_of(const PlanConfig& c) const {
    auto it = results.find(c.index);
    return it == results.end() ? 0.0 : it->second.capacity_rps;
  }
  // The probe the top table shows: at the target, else the one at the config's capacity.
  const PlanProbe* shown_probe(const PlanConfig& c) const {
    const PlanProbe* p = probe_at_target(c);
    if (p) return p;
    for (const PlanProbe& q : results.at(c.index).probes) {
      if (q.meets && q.rate == capacity_of(c)) p = &q;
    }
    return p;
  }
};

// The configs meeting the SLO, best first: by cost (ties: more tokens/s per GPU) at a target
// rate, else by capacity per dollar.
std::vector<const PlanConfig*> rank_configs(const PlanOutcome& o) {
  std::vector<const PlanConfig*> ranked;
  for (const PlanConfig& c : o.configs) {
    if (c.status == ConfigStatus::kMeets) ranked.push_back(&c);
  }
  if (o.spec.target_rate) {
    std::stable_sort(ranked.begin(), ranked.end(), [&](const PlanConfig* a, const PlanConfig* b) {
      if (a->cost_per_hour != b->cost_per_hour) return a->cost_per_hour < b->cost_per_hour;
      return o.probe_at_target(*a)->tokens_per_s_per_gpu >
             o.probe_at_target(*b)->tokens_per_s_per_gpu;
    });
  } else {
    std::stable_sort(ranked.begin(), ranked.end(), [&](const PlanConfig* a, const PlanConfig* b) {
      return o.capacity_of(*a) / a->cost_per_hour > o.capacity_of(*b) / b->cost_per_hour;
    });
  }
  return ranked;
}

// A config on the Pareto frontier: x and y are both to maximise.
struct FrontPoint {
  const PlanConfig* c;
  double x, y;
};

// The frontier of the ranked configs: cost against capacity when capacities were searched
// (cost ascending), else tokens/s per user against tokens/s per GPU (tokens/s/user ascending).
std::vector<FrontPoint> pareto_front(const PlanOutcome& o,
                                     const std::vector<const PlanConfig*>& ranked) {
  std::vector<FrontPoint> pts;
  for (const PlanConfig* c : ranked) {
    if (o.have_capacity()) {
      pts.push_back({c, -c->cost_per_hour, o.capacity_of(*c)});
    } else {
      const PlanProbe* p = o.probe_at_target(*c);
      pts.push_back({c, p->tokens_per_s_per_user, p->tokens_per_s_per_gpu});
    }
  }
  std::vector<FrontPoint> front;
  for (const FrontPoint& a : pts) {
    bool dominated = false;
    for (const FrontPoint& b : pts) {
      if (b.x >= a.x && b.y >= a.y && (b.x > a.x || b.y > a.y)) dominated = true;
    }
    if (!dominated) front.push_back(a);
  }
  std::stable_sort(front.begin(), front.end(), [&](const FrontPoint& a, const FrontPoint& b) {
    return o.have_capacity() ? a.x > b.x : a.x < b.x;
  });
  return front;
}

// Configs per status, every status named (0 where none has it).
std::map<std::string, size_t> status_counts(const std::vector<PlanConfig>& configs) {
  std::map<std::string, size_t> counts;
  for (const ConfigStatus s : {ConfigStatus::kPruned, ConfigStatus::kMeets, ConfigStatus::kFails,
                               ConfigStatus::kError, ConfigStatus::kNotRun}) {
    counts[status_name(s)] = 0;
  }
  for (const PlanConfig& c : configs) ++counts[status_name(c.status)];
  return counts;
}

// The plan, the question, the SLO and what became of the configs.
void print_plan_header(const PlanSpec& spec, const std::vector<PlanConfig>& configs,
                       size_t simulations, double wall_s, std::ostream& out) {
  std::map<std::string, size_t> counts = status_counts(configs);
  out << fmt::format("plan       {} ({})\n", spec.name, spec.source);
  out << fmt::format("question   {}\n",
                     spec.target_rate
                         ? fmt::format("cheapest config meeting the SLO at {:.3f} req/s",
                                       *spec.target_rate)
                         : std::string("serving capacity (max req/s under the SLO) of every "
                                       "config"));
  out << fmt::format("slo        {}, attainment >= {:.0f} %, sustained >= {:.0f} % of offered\n",
                     fmt::join(spec.slo, ", "), spec.attainment * 100,
                     spec.search.min_throughput_ratio * 100);
  out << fmt::format("configs    {} expanded: {} pruned, {} simulated ({} meet, {} fail), {} "
                     "error, {} not run; {} simulations in {:.1f} s\n",
                     configs.size(), counts["pruned"], counts["meets"] + counts["fails"],
                     counts["meets"], counts["fails"], counts["error"], counts["not run"],
                     simulations, wall_s);
  for (const PlanConfig& c : configs) {
    if (c.status == ConfigStatus::kError) {
      out << fmt::format("error      #{} {}: {}\n", c.index, c.label, c.reason);
    }
  }
}

// The chosen config and the top table.
void print_ranking(const PlanOutcome& o, const std::vector<const PlanConfig*>& ranked,
                   std::ostream& out) {
  const PlanSpec& spec = o.spec;
  if (ranked.empty()) {
    out << "\nno config meets the SLO" << (spec.target_rate ? " at the target rate" : "")
        << "; see servesim plan --explain CONFIG\n";
  } else {
    const PlanConfig& best = *ranked.front();
    out << fmt::format("\n{} #{} {}: {} GPUs, ${:.2f}/hour",
                       spec.target_rate ? "cheapest" : "best req/s per $", best.index, best.label,
                       best.num_gpus, best.cost_per_hour);
    if (o.have_capacity()) {
      out << fmt::format(", serving capacity {:.3f} req/s", o.capacity_of(best));
    }
    out << "\n";
  }
  out << fmt::format("\ntop {} ({}):\n", std::min<size_t>(spec.top, ranked.size()),
                     spec.target_rate ? "meeting the SLO, by cost" : "by capacity per dollar");
  out << fmt::format("{:>5}  {:<64} {:>4} {:>8} {:>9} {:>9} {:>9} {:>7} {:>9} {:>9}\n", "#",
                     "config", "GPUs", "$/hour", "TTFT p99", "TPOT p50", "TBT p99", "attain",
                     "tok/s/GPU", o.have_capacity() ? "cap req/s" : "");
  for (size_t k = 0; k < ranked.size() && k < static_cast<size_t>(spec.top); ++k) {
    const PlanConfig& c = *ranked[k];
    const PlanProbe* p = o.shown_probe(c);
    out << fmt::format(
        "{:>5}  {:<64} {:>4} {:>8.2f} {:>7.0f}ms {:>7.1f}ms {:>7.1f}ms {:>6.1f}% {:>9.1f} {:>9}\n",
        c.index, c.label.substr(0, 64), c.num_gpus, c.cost_per_hour,
        p ? p->ttft_p99_s * 1e3 : 0.0, p ? p->tpot_p50_s * 1e3 : 0.0,
        p ? p->tbt_p99_s * 1e3 : 0.0, p ? p->slo_attainment * 100 : 0.0,
        p ? p->tokens_per_s_per_gpu : 0.0,
        o.have_capacity() ? fmt::format("{:.3f}", o.capacity_of(c)) : std::string());
  }
}

void print_frontier(const PlanOutcome& o, const std::vector<FrontPoint>& front,
                    std::ostream& out) {
  if (o.have_capacity()) {
    out << "\nPareto frontier (cost vs serving capacity):\n";
    for (const FrontPoint& p : front) {
      out << fmt::format("  ${:>8.2f}/hour  {:>9.3f} req/s  #{} {}\n", -p.x, p.y, p.c->index,
                         p.c->label);
    }
  } else {
    out << "\nPareto frontier (tokens/s/user vs tokens/s/GPU at the target rate):\n";
    for (const FrontPoint& p : front) {
      out << fmt::format("  {:>8.1f} tok/s/user  {:>9.1f} tok/s/GPU  ${:.2f}/hour  #{} {}\n", p.x,
                         p.y, p.c->cost_per_hour, p.c->index, p.c->label);
    }
  }
}

// A digest of every verdict and simulation (fingerprints), independent of --jobs and ranks.
uint64_t plan_digest(const std::vector<PlanConfig>& configs, const PlanResults& results) {
  uint64_t h = 1469598103934665603ull;
  for (const PlanConfig& c : configs) {
    h = fnv(h, fmt::format("{}|{}|{}|", c.index, status_name(c.status), c.reason));
    auto it = results.find(c.index);
    if (it == results.end()) continue;
    h = fnv(h, fmt::format("{}|", it->second.capacity_rps));
    for (const PlanProbe& p : it->second.probes) {
      h = fnv(h, fmt::format("{}|{}|{}|", p.rate, p.meets, p.fingerprint));
    }
  }
  return h;
}

// One config in the `plan --json` document.
Json config_json(const PlanOutcome& o, const PlanConfig& c) {
  Json j = {{"index", c.index},
            {"label", c.label},
            {"gpu", c.gpu},
            {"policy", c.policy},
            {"num_gpus", c.num_gpus},
            {"cost_per_hour", c.cost_per_hour},
            {"status", status_name(c.status)},
            {"reason", c.reason}};
  j["capacity_rps"] = o.have_capacity() ? Json(o.capacity_of(c)) : Json(nullptr);
  if (const PlanProbe* p = o.probe_at_target(c)) {
    j["at_target"] = {{"slo_attainment", p->slo_attainment},
                      {"goodput_tokens_per_s", p->goodput_tokens_per_s},
                      {"ttft_p99_s", p->ttft_p99_s},
                      {"tpot_p50_s", p->tpot_p50_s},
                      {"tbt_p99_s", p->tbt_p99_s},
                      {"tokens_per_s_per_gpu", p->tokens_per_s_per_gpu}};
  }
  return j;
}

// How many configs were pruned for each reason (the text before its first ':').
Json pruned_by_reason(const std::vector<PlanConfig>& configs) {
  std::map<std::string, int> pruned;
  for (const PlanConfig& c : configs) {
    if (c.status != ConfigStatus::kPruned) continue;
    ++pruned[c.reason.find("over the budget") != std::string::npos
                 ? std::string("over the GPU budget")
                 : c.reason.substr(0, c.reason.find(':'))];
  }
  Json pruned_json = Json::object();
  for (const auto& [reason, n] : pruned) pruned_json[reason] = n;
  return pruned_json;
}

// What the report printed, as a document (the `plan --json` schema in docs/results.md).
struct PlanReport {
  std::vector<const PlanConfig*> ranked;
  std::vector<FrontPoint> front;
  size_t simulations = 0;
  double wall_s = 0;
  uint64_t digest = 0;
  int64_t plan_id = -1;
};

Json plan_json(const PlanOutcome& o, const PlanReport& r, const PlanRunOptions& options) {
  const PlanSpec& spec = o.spec;
  Json doc = Json::object();
  doc["command"] = "plan";
  doc["plan"] = spec.name;
  doc["source"] = spec.source;
  doc["mode"] = spec.target_rate ? "target" : "max";
  doc["target_rate_per_s"] = spec.target_rate ? Json(*spec.target_rate) : Json(nullptr);
  doc["objectives"] = spec.slo;
  doc["attainment"] = spec.attainment;
  doc["min_throughput_ratio"] = spec.search.min_throughput_ratio;
  Json counts = Json::object();
  for (const auto& [name, n] : status_counts(o.configs)) counts[name] = n;
  doc["configs"] = o.configs.size();
  doc["status_counts"] = counts;
  doc["simulations"] = r.simulations;
  doc["wall_s"] = r.wall_s;
  doc["chosen"] = r.ranked.empty() ? Json(nullptr) : config_json(o, *r.ranked.front());
  Json top = Json::array();
  for (size_t k = 0; k < r.ranked.size() && k < static_cast<size_t>(spec.top); ++k) {
    top.push_back(config_json(o, *r.ranked[k]));
  }
  doc["top"] = top;
  Json frontier = Json::array();
  for (const FrontPoint& p : r.front) frontier.push_back(config_json(o, *p.c));
  doc["frontier"] = frontier;
  doc["pruned_by_reason"] = pruned_by_reason(o.configs);
  doc["digest"] = fmt::format("{:016x}", r.digest);
  doc["db"] = options.db_path.empty() ? Json(nullptr) : Json(options.db_path);
  doc["plan_id"] = r.plan_id >= 0 ? Json(r.plan_id) : Json(nullptr);
  return doc;
}

}  // namespace

int run_plan(const std::string& plan_path, const PlanRunOptions& options,
             const scenarios::DataRoot& root, std::ostream& out) {
  const PlanSpec spec = load_plan(plan_path, root);
  const SloCriteria criteria = SloCriteria::parse(spec.slo, spec.attainment,
                                                  spec.search.min_throughput_ratio, plan_path,
                                                  "slo");
  std::vector<PlanConfig> configs = expand_plan(spec);
  const PlanConfig* only = selected_config(configs, options, plan_path);
  std::vector<ConfigIssue> issues;
  std::map<std::string, bool> reported;
  for (PlanConfig& c : configs) {
    // --explain also needs the earlier configs of its chain (warm starts).
    if (only && (c.chain != only->chain || c.index > only->index)) continue;
    prune_config(spec, c, criteria, root, issues, reported);
  }
  if (!issues.empty()) throw ConfigError(plan_path, issues);
  const PlanContext ctx{spec, criteria, root};
  if (only && !options.emit.empty()) {
    const PlanConfig& c = configs[static_cast<size_t>(only->index)];
    std::optional<std::pair<std::string, double>> rate;
    if (spec.target_rate && c.status != ConfigStatus::kError) {
      rate = std::make_pair(config_rate_knob(spec, c, criteria, root), *spec.target_rate);
    }
    out << config_document(spec, c, criteria, rate).dump(2) << "\n";
    return 0;
  }
  if (only) {
    explain_config(ctx, configs, configs[static_cast<size_t>(only->index)], out);
    return 0;
  }

  const auto wall0 = std::chrono::steady_clock::now();
  const std::optional<PlanResults> results = simulate_survivors(ctx, configs, options);
  if (!results) return 0;  // a rank other than 0: rank 0 reports
  PlanReport report;
  report.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  report.simulations = apply_verdicts(spec, *results, configs);
  const bool interrupted = plan_interrupted().load();
  if (!options.db_path.empty()) {
    report.plan_id = store_plan(options.db_path, spec, configs, *results, interrupted);
  }
  const PlanOutcome outcome{spec, configs, *results};
  report.ranked = rank_configs(outcome);
  report.front = pareto_front(outcome, report.ranked);
  report.digest = plan_digest(configs, *results);
  print_plan_header(spec, configs, report.simulations, report.wall_s, out);
  print_ranking(outcome, report.ranked, out);
  print_frontier(outcome, report.front, out);
  out << fmt::format("\nplan digest {:016x}\n", report.digest);
  if (!options.db_path.empty()) {
    out << fmt::format("results    {} (plan_id {}; tables plan, plan_config, plan_run, run, ...)\n",
                       options.db_path, report.plan_id);
  }
  if (options.json) std::cout << plan_json(outcome, report, options).dump(2) << "\n";
  if (interrupted) return 130;
  return report.ranked.empty() ? 1 : 0;
}

}  // namespace servesim::app
