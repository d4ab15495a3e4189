#include "app/capacity.h"

#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "app/run_scenario.h"
#include "sim/core/error.h"

namespace servesim::app {
namespace {

// One percentile bound: metric percentile <= limit.
struct Bound {
  std::string name;  // as given, e.g. "tbt_p99"
  std::function<double(const reports::RunSummary&)> value_s;
  double limit_s = 0;
};

const reports::Percentiles* metric(const reports::RunSummary& s, const std::string& m) {
  if (m == "ttft") return &s.ttft_s;
  if (m == "tpot") return &s.tpot_s;
  if (m == "tbt") return &s.tbt_s;
  if (m == "e2e") return &s.e2e_s;
  return nullptr;
}

}  // namespace

CapacityResult find_capacity(const std::string& scenario_path,
                             const std::vector<std::string>& overrides,
                             const CapacityOptions& options, const scenarios::DataRoot& root,
                             std::ostream& out) {
  std::vector<ConfigIssue> issues;
  std::vector<Bound> bounds;
  std::vector<std::string> slo_overrides;
  for (const std::string& arg : options.slo) {
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    Duration limit{};
    try {
      if (eq == std::string::npos) throw std::invalid_argument("expected KEY=DURATION");
      limit = parse_duration(arg.substr(eq + 1));
    } catch (const std::invalid_argument& e) {
      issues.push_back({"--slo " + arg, e.what()});
      continue;
    }
    if (key == "ttft" || key == "tpot") {
      slo_overrides.push_back(fmt::format("slo.{}={}", key, arg.substr(eq + 1)));
      continue;
    }
    const size_t us = key.rfind("_p");
    const std::string m = us == std::string::npos ? key : key.substr(0, us);
    const std::string q = us == std::string::npos ? "" : key.substr(us + 2);
    if (metric(reports::RunSummary{}, m) == nullptr || (q != "50" && q != "90" && q != "99")) {
      issues.push_back({"--slo " + arg,
                        "expected ttft, tpot, or <ttft|tpot|tbt|e2e>_p<50|90|99>, e.g. tbt_p99=100ms"});
      continue;
    }
    if (key == "tbt_p99") slo_overrides.push_back(fmt::format("slo.tbt_p99={}", arg.substr(eq + 1)));
    bounds.push_back({key,
                      [m, q](const reports::RunSummary& s) {
                        const reports::Percentiles& p = *metric(s, m);
                        return q == "50" ? p.p50 : q == "90" ? p.p90 : p.p99;
                      },
                      to_seconds(limit)});
  }
  if (options.slo.empty()) issues.push_back({"--slo", "give at least one objective, e.g. --slo tbt_p99=100ms"});
  if (!issues.empty()) throw ConfigError("capacity", issues);

  std::vector<std::string> base = overrides;
  base.insert(base.end(), slo_overrides.begin(), slo_overrides.end());
  const scenarios::Scenario probe0 = scenarios::load_scenario(scenario_path, base, root);
  const std::string type = probe0.workload.at("type").get<std::string>();
  if (type == "closed_loop") {
    throw ConfigError(scenario_path, {{"workload.type", "a closed-loop workload has no request rate"}});
  }
  const std::string knob = type == "generated" ? "workload.arrival.rate" : "workload.rate";
  double rate = options.start_rate;
  if (rate <= 0) {
    if (type == "generated") {
      rate = probe0.workload.at("arrival").at("rate").get<double>();
    } else {
      const Workload w = scenarios::build_workload(probe0, root);
      const double span = to_seconds(w.requests.back().arrival);
      rate = span > 0 ? (w.requests.size() - 1) / span : 1.0;
    }
  }

  CapacityResult result;
  auto run_at = [&](double r) {
    std::vector<std::string> o = base;
    o.push_back(fmt::format("{}={}", knob, r));
    const scenarios::Scenario s = scenarios::load_scenario(scenario_path, o, root);
    RunOptions ro;
    ro.keep_records = false;
    CapacityProbe p;
    p.rate = r;
    p.summary = run_scenario(s, root, ro).summary;
    p.meets = true;
    std::string detail;
    for (const Bound& b : bounds) {
      const double v = b.value_s(p.summary);
      p.meets &= v <= b.limit_s;
      detail += fmt::format("  {} {:.1f} ms", b.name, v * 1e3);
    }
    if (options.attainment) p.meets &= p.summary.slo_attainment >= *options.attainment;
    const bool sustained = p.summary.request_rate_per_s >= options.min_throughput_ratio * r;
    p.meets &= sustained;
    out << fmt::format("rate {:9.3f} req/s  achieved {:8.3f} req/s {} attainment {:6.2f} %  "
                       "goodput {:9.1f} tok/s  {}\n",
                       r, p.summary.request_rate_per_s, detail, p.summary.slo_attainment * 100,
                       p.summary.goodput_tokens_per_s,
                       p.meets ? "meets" : sustained ? "violates" : "not sustained");
    result.probes.push_back(p);
    if (p.meets && r > result.capacity_rps) {
      result.capacity_rps = r;
      result.at_capacity = p.summary;
    }
    return p.meets;
  };

  // Bracket: grow until the SLO breaks, or shrink until it holds.
  double lo = 0, hi = 0;
  int runs = 0;
  if (run_at(rate)) {
    lo = rate;
    hi = rate * 2;
    while (runs++ < options.max_runs && run_at(hi)) {
      lo = hi;
      hi *= 2;
    }
  } else {
    hi = rate;
    lo = rate / 2;
    while (runs++ < options.max_runs && !run_at(lo)) {
      hi = lo;
      lo /= 2;
      if (lo < 1e-6) return result;
    }
  }
  while (runs++ < options.max_runs && (hi - lo) / hi > options.relative_tolerance) {
    const double mid = 0.5 * (lo + hi);
    if (run_at(mid)) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return result;
}

}  // namespace servesim::app
