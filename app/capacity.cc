#include "app/capacity.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "app/run_scenario.h"
#include "sim/core/error.h"

namespace servesim::app {
namespace {

const reports::Percentiles* metric(const reports::RunSummary& s, const std::string& m) {
  if (m == "ttft") return &s.ttft_s;
  if (m == "tpot") return &s.tpot_s;
  if (m == "tbt") return &s.tbt_s;
  if (m == "e2e") return &s.e2e_s;
  return nullptr;
}

// How close a check is to its limit: 1 at the limit, above 1 when it fails.
double load_of(const SloCheck& c) {
  if (c.at_least) return c.value > 0 ? c.limit / c.value : (c.limit > 0 ? INFINITY : 0);
  return c.limit > 0 ? c.value / c.limit : (c.value > 0 ? INFINITY : 0);
}

std::string check_text(const SloCheck& c) {
  if (c.unit == "s")
    return fmt::format("{} {:.1f} ms {} {:.1f} ms", c.name, c.value * 1e3, c.ok ? "<=" : ">",
                       c.limit * 1e3);
  if (c.unit.empty())
    return fmt::format("{} {:.1f} % {} {:.1f} %", c.name, c.value * 100, c.ok ? ">=" : "<",
                       c.limit * 100);
  return fmt::format("{} {:.3f} {} {} {:.3f}", c.name, c.value, c.unit, c.ok ? ">=" : "<", c.limit);
}

// What decides a probe: the failing criteria, or, when all hold, the one closest to its limit.
std::string verdict_text(const std::vector<SloCheck>& checks) {
  std::vector<std::string> failed;
  const SloCheck* tightest = nullptr;
  for (const SloCheck& c : checks) {
    if (!c.ok) failed.push_back(check_text(c));
    if (!tightest || load_of(c) > load_of(*tightest)) tightest = &c;
  }
  if (!failed.empty()) return fmt::format("fails: {}", fmt::join(failed, ", "));
  return tightest ? fmt::format("meets (binds: {} at {:.0f} % of its limit)", tightest->name,
                                load_of(*tightest) * 100)
                  : "meets";
}

std::string objectives_text(const sim::SloSpec& slo) {
  std::vector<std::string> parts;
  if (slo.ttft) parts.push_back(fmt::format("ttft <= {:.0f} ms", to_seconds(*slo.ttft) * 1e3));
  if (slo.tpot) parts.push_back(fmt::format("tpot <= {:.1f} ms", to_seconds(*slo.tpot) * 1e3));
  if (slo.tbt_p99)
    parts.push_back(fmt::format("99 % of token gaps <= {:.0f} ms", to_seconds(*slo.tbt_p99) * 1e3));
  return parts.empty() ? "none set" : fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

SloCriteria SloCriteria::parse(const std::vector<std::string>& slo, std::optional<double> attainment,
                               double min_throughput_ratio, const std::string& source,
                               const std::string& where) {
  std::vector<ConfigIssue> issues;
  SloCriteria c;
  c.attainment_ = attainment;
  c.request_objectives_.attainment_target = attainment.value_or(0.9);
  c.min_throughput_ratio_ = min_throughput_ratio;
  for (const std::string& arg : slo) {
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    Duration limit{};
    try {
      if (eq == std::string::npos) throw std::invalid_argument("expected KEY=DURATION");
      limit = parse_duration(arg.substr(eq + 1));
    } catch (const std::invalid_argument& e) {
      issues.push_back({where + " " + arg, e.what()});
      continue;
    }
    if (key == "ttft" || key == "tpot") {
      c.scenario_overrides_.push_back(fmt::format("slo.{}={}", key, arg.substr(eq + 1)));
      (key == "ttft" ? c.request_objectives_.ttft : c.request_objectives_.tpot) = limit;
      continue;
    }
    const size_t us = key.rfind("_p");
    const std::string m = us == std::string::npos ? key : key.substr(0, us);
    const std::string q = us == std::string::npos ? "" : key.substr(us + 2);
    if (metric(reports::RunSummary{}, m) == nullptr || (q != "50" && q != "90" && q != "99")) {
      issues.push_back({where + " " + arg,
                        "expected ttft, tpot, or <ttft|tpot|tbt|e2e>_p<50|90|99>, e.g. tbt_p99=100ms"});
      continue;
    }
    if (key == "tbt_p99") {
      c.scenario_overrides_.push_back(fmt::format("slo.tbt_p99={}", arg.substr(eq + 1)));
      c.request_objectives_.tbt_p99 = limit;
    }
    c.bounds_.push_back({key, m, q, to_seconds(limit)});
  }
  if (slo.empty()) issues.push_back({where, "give at least one objective, e.g. tbt_p99=100ms"});
  if (!issues.empty()) throw ConfigError(source, issues);
  return c;
}

std::vector<SloCheck> SloCriteria::check(const reports::RunSummary& s, double rate) const {
  std::vector<SloCheck> out;
  for (const Bound& b : bounds_) {
    const reports::Percentiles& p = *metric(s, b.metric);
    const double v = b.q == "50" ? p.p50 : b.q == "90" ? p.p90 : p.p99;
    out.push_back({b.name, v, b.limit_s, false, v <= b.limit_s, "s"});
  }
  if (attainment_) {
    // NaN attainment (no requests) fails.
    out.push_back({"attainment", s.slo_attainment, *attainment_, true,
                   s.slo_attainment >= *attainment_, ""});
  }
  const double need = min_throughput_ratio_ * rate;
  out.push_back({"sustained", s.sustained_rate_per_s, need, true, s.sustained_rate_per_s >= need, "req/s"});
  return out;
}

bool SloCriteria::all_ok(const std::vector<SloCheck>& checks) {
  return std::all_of(checks.begin(), checks.end(), [](const SloCheck& c) { return c.ok; });
}

std::string rate_knob(const scenarios::Scenario& s) {
  const std::string type = s.workload.at("type").get<std::string>();
  if (type == "closed_loop") {
    throw ConfigError(s.source, {{"workload.type", "a closed-loop workload has no request rate"}});
  }
  return type == "generated" ? "workload.arrival.rate" : "workload.rate";
}

double workload_rate(const scenarios::Scenario& s, const scenarios::DataRoot& root) {
  if (s.workload.at("type") == "generated") return s.workload.at("arrival").at("rate").get<double>();
  const Workload w = scenarios::build_workload(s, root);
  const double span = to_seconds(w.requests.back().arrival);
  return span > 0 ? (w.requests.size() - 1) / span : 1.0;
}

CapacityResult search_capacity(const std::function<CapacityProbe(double)>& probe,
                               double start_rate, const CapacityOptions& options, double max_rate) {
  CapacityResult result;
  auto run_at = [&](double r) {
    CapacityProbe p = probe(r);
    if (p.meets && r > result.capacity_rps) {
      result.capacity_rps = r;
      result.at_capacity = p.summary;
    }
    const bool meets = p.meets;
    result.probes.push_back(std::move(p));
    return meets;
  };
  const bool capped = max_rate > 0;
  double rate = capped ? std::min(start_rate, max_rate) : start_rate;

  // Bracket: grow until the SLO breaks (or the cap is reached), or shrink until it holds.
  double lo = 0, hi = 0;
  int runs = 0;
  if (run_at(rate)) {
    lo = rate;
    if (capped && lo >= max_rate) return result;
    hi = capped ? std::min(rate * 2, max_rate) : rate * 2;
    while (runs++ < options.max_runs && run_at(hi)) {
      lo = hi;
      if (capped && lo >= max_rate) return result;
      hi = capped ? std::min(hi * 2, max_rate) : hi * 2;
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

CapacityResult find_capacity(const std::string& scenario_path,
                             const std::vector<std::string>& overrides,
                             const CapacityOptions& options, const scenarios::DataRoot& root,
                             std::ostream& out) {
  const SloCriteria criteria = SloCriteria::parse(options.slo, options.attainment,
                                                  options.min_throughput_ratio, "capacity");
  std::vector<std::string> base = overrides;
  base.insert(base.end(), criteria.scenario_overrides().begin(), criteria.scenario_overrides().end());
  const scenarios::Scenario probe0 = scenarios::load_scenario(scenario_path, base, root);
  const std::string knob = rate_knob(probe0);
  const double rate = options.start_rate > 0 ? options.start_rate : workload_rate(probe0, root);
  {
    // Say which objectives decide and what the attainment column is.
    std::vector<std::string> deciding;
    for (const SloCheck& c : criteria.check(reports::RunSummary{}, 1.0)) {
      if (c.unit == "s") deciding.push_back(fmt::format("{} <= {:.1f} ms", c.name, c.limit * 1e3));
      if (c.unit.empty()) deciding.push_back(fmt::format("attainment >= {:.1f} %", c.limit * 100));
    }
    deciding.push_back(fmt::format("sustained >= {:.0f} % of the offered rate",
                                   options.min_throughput_ratio * 100));
    out << fmt::format("deciding   {}\n", fmt::join(deciding, ", "));
    out << fmt::format("attainment share of requests meeting the per-request objectives ({}){}\n",
                       objectives_text(probe0.slo),
                       options.attainment
                           ? ""
                           : "; shown for information, not a criterion (--attainment A "
                             "requires it)");
  }

  auto probe = [&](double r) {
    std::vector<std::string> o = base;
    o.push_back(fmt::format("{}={}", knob, r));
    const scenarios::Scenario s = scenarios::load_scenario(scenario_path, o, root);
    RunOptions ro;
    ro.keep_records = false;
    CapacityProbe p;
    p.rate = r;
    p.summary = run_scenario(s, root, ro).summary;
    const std::vector<SloCheck> checks = criteria.check(p.summary, r);
    p.meets = SloCriteria::all_ok(checks);
    std::string detail;
    for (const SloCheck& c : checks) {
      if (c.unit == "s") detail += fmt::format("  {} {:.1f} ms", c.name, c.value * 1e3);
    }
    out << fmt::format(
        "rate {:9.3f} req/s  sustained {:8.3f} req/s {} attainment {:6.2f} %  "
        "goodput {:9.1f} tok/s  {}\n",
        r, p.summary.sustained_rate_per_s, detail, p.summary.slo_attainment * 100,
        p.summary.goodput_tokens_per_s, verdict_text(checks));
    return p;
  };
  return search_capacity(probe, rate, options);
}

}  // namespace servesim::app
