#include "app/capacity.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "app/dllm_run.h"
#include "app/run_scenario.h"
#include "scenarios/dllm_scenario.h"
#include "core/error.h"

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
    c.bounds_.push_back({key, m, q, to_seconds(limit), limit.count()});
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
  // Completions are compared with the arrivals actually offered over the same window, not with
  // the nominal rate: a small workload's realized arrivals stray from it by sampling noise alone.
  const double offered = s.window_offered_rate_per_s > 0 ? s.window_offered_rate_per_s : rate;
  const double need = min_throughput_ratio_ * offered;
  out.push_back({"sustained", s.sustained_rate_per_s, need, true, s.sustained_rate_per_s >= need, "req/s"});
  return out;
}

std::string describe_failures(const std::vector<SloCheck>& checks) {
  std::vector<std::string> parts;
  for (const SloCheck& c : checks) {
    if (c.ok) continue;
    if (c.unit == "s") {
      parts.push_back(fmt::format("{} is {:.1f} ms, above its {:.1f} ms bound", c.name,
                                  c.value * 1e3, c.limit * 1e3));
    } else if (c.name == "attainment") {
      parts.push_back(fmt::format("SLO attainment is {:.2f} %, below {:.2f} %", c.value * 100,
                                  c.limit * 100));
    } else if (c.name == "sustained") {
      parts.push_back(fmt::format("not sustained: {:.3f} req/s completed while load was offered, "
                                  "below the {:.3f} req/s needed",
                                  c.value, c.limit));
    } else {
      parts.push_back(fmt::format("{} is {:.4g}, limit {:.4g}", c.name, c.value, c.limit));
    }
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

void validate_capacity_options(const CapacityOptions& o, const std::string& source) {
  std::vector<ConfigIssue> issues;
  if (o.attainment && !(*o.attainment > 0 && *o.attainment <= 1)) {
    issues.push_back({"--attainment", fmt::format("expected a share of requests in (0, 1], e.g. "
                                                  "0.9, got {}",
                                                  *o.attainment)});
  }
  if (!(std::isfinite(o.start_rate) && o.start_rate >= 0 && o.start_rate <= kMaxCapacityRate)) {
    issues.push_back({"--start-rate", fmt::format("expected a rate in (0, {:g}] req/s, got {}",
                                                  kMaxCapacityRate, o.start_rate)});
  }
  if (o.max_runs < 1) {
    issues.push_back({"max_runs", fmt::format("expected at least 1 probe, got {}", o.max_runs)});
  }
  if (!(o.first_step > 1 && o.first_step <= 2)) {
    issues.push_back({"first_step", fmt::format("expected a factor in (1, 2], got {}", o.first_step)});
  }
  if (!(o.min_rate_fraction > 0 && o.min_rate_fraction < 1)) {
    issues.push_back({"min_rate_fraction", fmt::format("expected a number in (0, 1), got {}",
                                                       o.min_rate_fraction)});
  }
  if (!issues.empty()) throw ConfigError(source, issues);
}

void TtftDeadline::start(const RunPopulation& population) {
  if (population.arrival_ns.empty()) return;
  arrivals_ = &population.arrival_ns;
  warmup_ = population.warmup;
  passed_ = static_cast<size_t>(warmup_);
}

void TtftDeadline::first_token(RequestId id, int64_t first_token_ns) {
  if (id < warmup_) return;
  const int64_t arrival = (*arrivals_)[static_cast<size_t>(id)];
  if (first_token_ns - arrival <= limit_ns_) met_.push(arrival);
}

void TtftDeadline::rejected(RequestId id) {
  if (id >= warmup_) rejected_.push((*arrivals_)[static_cast<size_t>(id)]);
}

int64_t TtftDeadline::misses(int64_t now_ns) {
  // Arrived before `cutoff` and still without a timely first token: any first token to come is
  // at or after now, more than the limit after its arrival.
  const int64_t cutoff = now_ns - limit_ns_;
  const std::vector<int64_t>& a = *arrivals_;
  while (passed_ < a.size() && a[passed_] < cutoff) ++passed_;
  while (!met_.empty() && met_.top() < cutoff) {
    met_.pop();
    ++met_passed_;
  }
  while (!rejected_.empty() && rejected_.top() < cutoff) {
    rejected_.pop();
    ++rejected_passed_;
  }
  if (passed_ > static_cast<size_t>(warmup_)) {
    least_miss_s_ = static_cast<double>(now_ns - a[passed_ - 1]) * 1e-9;
  }
  return static_cast<int64_t>(passed_) - warmup_ - met_passed_ - rejected_passed_;
}

SloFailureWatch::SloFailureWatch(const SloCriteria& criteria)
    : c_(criteria),
      over_(criteria.bounds_.size(), 0),
      least_over_(criteria.bounds_.size(), INFINITY),
      deadline_(criteria.bounds_.size()) {}

void SloFailureWatch::start(RunPopulation population) {
  pop_ = std::move(population);
  allowed_over_.clear();
  for (const SloCriteria::Bound& bound : c_.bounds_) {
    // n - rank never shrinks as n grows: n = every measured value is safe for any final count.
    const int64_t n = bound.metric == "tpot" ? pop_.measured_multi_token : pop_.measured;
    allowed_over_.push_back(n - reports::nearest_rank_index(n, std::stoll(bound.q)));
  }
  if (c_.attainment_ && pop_.slo.ttft && !pop_.arrival_ns.empty()) {
    ttft_.emplace(pop_.slo.ttft->count());
    ttft_->start(pop_);
  }
  for (size_t b = 0; b < c_.bounds_.size(); ++b) {
    if (c_.bounds_[b].metric != "ttft" || pop_.arrival_ns.empty()) continue;
    deadline_[b].emplace(c_.bounds_[b].limit_ns);
    deadline_[b]->start(pop_);
  }
}

std::string SloFailureWatch::on_first_token(RequestId id, int64_t first_token_ns) {
  if (ttft_) ttft_->first_token(id, first_token_ns);
  for (auto& d : deadline_) {
    if (d) d->first_token(id, first_token_ns);
  }
  return verdict_at(first_token_ns);
}

void SloFailureWatch::on_rejected(const sim::RejectedRecord& r) {
  if (ttft_) ttft_->rejected(r.request_id);
  for (auto& d : deadline_) {
    if (d) d->rejected(r.request_id);
  }
}

std::string SloFailureWatch::on_request(const sim::RequestRecord& r) {
  if (r.warmup) return "";
  const reports::ObjectivesMet met = reports::objectives_met(r, pop_.slo);
  if (c_.attainment_ && !met.all()) {
    ++misses_;
    other_misses_ += met.ttft;
  }
  for (size_t b = 0; b < c_.bounds_.size(); ++b) {
    const SloCriteria::Bound& bound = c_.bounds_[b];
    double value_s = 0;
    if (bound.metric == "ttft") {
      value_s = static_cast<double>(r.ttft_ns()) * 1e-9;
    } else if (bound.metric == "e2e") {
      value_s = static_cast<double>(r.e2e_ns()) * 1e-9;
    } else if (bound.metric == "tpot" && r.output_tokens > 1) {
      value_s = r.tpot_ns() * 1e-9;
    } else {
      continue;  // tbt: a histogram over every token gap
    }
    if (value_s > bound.limit_s) {
      ++over_[b];
      least_over_[b] = std::min(least_over_[b], value_s);
    }
  }
  return verdict_at(r.done_ns);
}

std::string SloFailureWatch::verdict_at(int64_t now_ns) {
  if (c_.attainment_) {
    // Misses known by now: past their TTFT deadline, or finished missing another objective.
    const int64_t known = ttft_ ? ttft_->misses(now_ns) + other_misses_ : misses_;
    // The final attainment is met / finished <= (measured - known) / measured.
    const double best = static_cast<double>(pop_.measured - known) /
                        static_cast<double>(std::max<int64_t>(1, pop_.measured));
    if (best < *c_.attainment_) {
      verdict_ = {"attainment", best, *c_.attainment_, true, false, ""};
      return fmt::format("attainment: {} of {} measured requests missed their objectives, so it "
                         "stays below {:.2f} %",
                         known, pop_.measured, *c_.attainment_ * 100);
    }
  }
  for (size_t b = 0; b < c_.bounds_.size(); ++b) {
    const SloCriteria::Bound& bound = c_.bounds_[b];
    const int64_t n = bound.metric == "tpot" ? pop_.measured_multi_token : pop_.measured;
    int64_t over = over_[b];
    double least = least_over_[b];
    if (deadline_[b]) {
      over = deadline_[b]->misses(now_ns);
      least = std::min(least, deadline_[b]->least_miss_s());
    }
    // The percentile exceeds the bound once more values exceed it than the values above its
    // rank, and it is then one of those values.
    if (over > 0 && over > allowed_over_[b]) {
      verdict_ = {bound.name, least, bound.limit_s, false, false, "s"};
      return fmt::format("{}: {} of at most {} values exceed its {:.1f} ms bound, so it stays "
                         "above it",
                         bound.name, over, n, bound.limit_s * 1e3);
    }
  }
  return "";
}

std::unique_ptr<SloFailureWatch> SloCriteria::failure_watch() const {
  return std::make_unique<SloFailureWatch>(*this);
}
bool SloCriteria::all_ok(const std::vector<SloCheck>& checks) {
  return std::all_of(checks.begin(), checks.end(), [](const SloCheck& c) { return c.ok; });
}

std::string rate_knob(const scenarios::Scenario& s) {
  const std::string type = s.workload.at("type").get<std::string>();
  if (type == "closed_loop") {
    throw ConfigError(s.source, {{"workload.type", "a closed-loop workload has no request rate"}});
  }
  return scenarios::open_workload_rate_knob(s.workload);
}

double workload_rate(const scenarios::Scenario& s, const scenarios::DataRoot& root) {
  if (s.workload.at("type") == "generated") return s.workload.at("arrival").at("rate").get<double>();
  return scenarios::arrival_rate(scenarios::build_workload(s, root));
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
  const double ceiling = max_rate > 0 ? std::min(max_rate, kMaxCapacityRate) : kMaxCapacityRate;
  const double floor = start_rate * options.min_rate_fraction;
  double rate = std::min(start_rate, ceiling);

  // Bracket: grow until the SLO breaks (or the ceiling is reached), or shrink until it holds (or
  // the floor is reached). Every loop spends from one budget of max_runs probes.
  double lo = 0, hi = 0;
  int runs = 0;
  bool at_floor = false;
  double step = std::clamp(options.first_step, 1.0 + 1e-9, 2.0);
  auto next_step = [&] {
    const double f = step;
    step = std::min(2.0, 1.0 + 2.0 * (step - 1.0));
    return f;
  };
  if (run_at(rate)) {
    lo = rate;
    if (lo >= ceiling) return result;
    hi = std::min(rate * next_step(), ceiling);
    while (runs++ < options.max_runs && run_at(hi)) {
      lo = hi;
      if (lo >= ceiling) return result;
      hi = std::min(hi * next_step(), ceiling);
    }
  } else {
    hi = rate;
    lo = rate / next_step();
    while (true) {
      if (lo < floor) {
        at_floor = true;
        break;
      }
      if (runs++ >= options.max_runs || run_at(lo)) break;
      hi = lo;
      lo /= next_step();
    }
  }
  while (result.capacity_rps > 0 && runs++ < options.max_runs &&
         (hi - lo) / hi > options.relative_tolerance) {
    const double mid = 0.5 * (lo + hi);
    if (run_at(mid)) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  if (result.capacity_rps <= 0 && !result.probes.empty()) {
    const CapacityProbe* lowest = &result.probes.front();
    for (const CapacityProbe& p : result.probes) {
      if (p.rate < lowest->rate) lowest = &p;
    }
    std::string why = at_floor ? fmt::format("the search stops at {:.4g} req/s (1/{:g} of the "
                                             "start rate {:.4g} req/s)",
                                             floor, 1 / options.min_rate_fraction, start_rate)
                               : fmt::format("the search spent its {} probes",
                                             options.max_runs + 1);
    result.no_rate_reason = fmt::format(
        "no rate meets the SLO: at {:.4g} req/s, the lowest rate probed, {}; {}", lowest->rate,
        lowest->failed.empty() ? "the SLO is violated" : lowest->failed, why);
  }
  return result;
}

namespace {

// The verdict on probe `p` (its summary set): the checks, one printed line. Throws ConfigError
// when too few requests arrive in the later half of the window for the sustained check.
CapacityProbe judge_probe(CapacityProbe p, const SloCriteria& criteria,
                          const std::string& scenario_path, std::ostream& out) {
  const double r = p.rate;
  if (p.summary.window_arrivals < kMinSustainedSample) {
    throw ConfigError(scenario_path,
                      {{"workload", fmt::format(
                                        "too few requests for a capacity search: {} arrive in "
                                        "the later half of the arrival window, and the "
                                        "sustained-rate check needs at least {} there; raise "
                                        "workload.count (or the trace window)",
                                        p.summary.window_arrivals, kMinSustainedSample)}});
  }
  const std::vector<SloCheck> checks = criteria.check(p.summary, r);
  p.meets = SloCriteria::all_ok(checks);
  p.failed = describe_failures(checks);
  std::string detail;
  for (const SloCheck& c : checks) {
    if (c.unit == "s") detail += fmt::format("  {} {:.1f} ms", c.name, c.value * 1e3);
  }
  const double attainment = p.summary.slo_attainment;
  out << fmt::format("rate {:9.3f} req/s  sustained {:8.3f} of {:8.3f} req/s {} attainment "
                     "{}  goodput {:9.1f} tok/s  {}\n",
                     r, p.summary.sustained_rate_per_s, p.summary.window_offered_rate_per_s,
                     detail,
                     std::isfinite(attainment) ? fmt::format("{:6.2f} %", attainment * 100)
                                               : std::string("   n/a  "),
                     p.summary.goodput_tokens_per_s,
                     verdict_text(checks));
  return p;
}

// Prints which objectives decide and what the attainment column is.
void print_deciding(const SloCriteria& criteria, const CapacityOptions& options,
                    const sim::SloSpec& objectives, std::ostream& out) {
  std::vector<std::string> deciding;
  for (const SloCheck& c : criteria.check(reports::RunSummary{}, 1.0)) {
    if (c.unit == "s") deciding.push_back(fmt::format("{} <= {:.1f} ms", c.name, c.limit * 1e3));
    if (c.unit.empty()) deciding.push_back(fmt::format("attainment >= {:.1f} %", c.limit * 100));
  }
  deciding.push_back(fmt::format("sustained >= {:.0f} % of the offered rate",
                                 options.min_throughput_ratio * 100));
  out << fmt::format("deciding   {}\n", fmt::join(deciding, ", "));
  out << fmt::format("attainment share of requests meeting the per-request objectives ({}){}\n",
                     objectives_text(objectives),
                     options.attainment
                         ? ""
                         : "; shown for information, not a criterion (--attainment A "
                           "requires it)");
}

// find_capacity() of a diffusion-LLM scenario: the rate knob is scenarios::dllm_rate_knob(), a
// run's requests are summarized with TTFT = E2E (the answer comes at the last denoising pass) and a
// request the deployment can never run counts against the sustained rate.
// `s0` is the scenario loaded with `overrides`.
CapacityResult find_dllm_capacity(const scenarios::Scenario& s0, const std::string& scenario_path,
                                  const std::vector<std::string>& overrides,
                                  const CapacityOptions& options, const SloCriteria& criteria,
                                  const scenarios::DataRoot& root, std::ostream& out) {
  const std::string knob = scenarios::dllm_rate_knob(s0);
  const double rate =
      options.start_rate > 0 ? options.start_rate : scenarios::dllm_offered_rate(s0, root);
  print_deciding(criteria, options, criteria.request_objectives(), out);
  auto probe = [&](double r) {
    std::vector<std::string> o = overrides;
    o.push_back(fmt::format("{}={}", knob, r));
    const scenarios::Scenario s = scenarios::load_scenario(scenario_path, o, root);
    const DllmOutcome outcome = run_dllm(s, root, "");
    if (!outcome.oom.empty()) {
      throw ConfigError(scenario_path, {{"policy", "out of memory: " + outcome.oom}});
    }
    CapacityProbe p;
    p.rate = r;
    p.summary = summarize_dllm(s, outcome, criteria.request_objectives());
    return judge_probe(std::move(p), criteria, scenario_path, out);
  };
  return search_capacity(probe, rate, options);
}

}  // namespace

CapacityResult find_capacity(const std::string& scenario_path,
                             const std::vector<std::string>& overrides,
                             const CapacityOptions& options, const scenarios::DataRoot& root,
                             std::ostream& out) {
  validate_capacity_options(options, "capacity");
  const SloCriteria criteria = SloCriteria::parse(options.slo, options.attainment,
                                                  options.min_throughput_ratio, "capacity");
  if (const scenarios::Scenario s0 = scenarios::load_scenario(scenario_path, overrides, root);
      s0.dllm) {
    return find_dllm_capacity(s0, scenario_path, overrides, options, criteria, root, out);
  }
  std::vector<std::string> base = overrides;
  base.insert(base.end(), criteria.scenario_overrides().begin(), criteria.scenario_overrides().end());
  const scenarios::Scenario probe0 = scenarios::load_scenario(scenario_path, base, root);
  const std::string knob = rate_knob(probe0);
  const double rate = options.start_rate > 0 ? options.start_rate : workload_rate(probe0, root);
  if (!(std::isfinite(rate) && rate > 0 && rate <= kMaxCapacityRate)) {
    throw ConfigError(scenario_path, {{knob, fmt::format("capacity starts from the workload's rate "
                                                         "and needs one in (0, {:g}] req/s, got "
                                                         "{}; give --start-rate",
                                                         kMaxCapacityRate, rate)}});
  }
  print_deciding(criteria, options, probe0.slo, out);

  auto probe = [&](double r) {
    std::vector<std::string> o = base;
    o.push_back(fmt::format("{}={}", knob, r));
    const scenarios::Scenario s = scenarios::load_scenario(scenario_path, o, root);
    RunOptions ro;
    ro.keep_records = false;
    const std::unique_ptr<SloFailureWatch> watch =
        options.early_stop ? criteria.failure_watch() : nullptr;
    ro.watch = watch.get();
    CapacityProbe p;
    p.rate = r;
    const RunOutcome outcome = run_scenario(s, root, ro);
    p.summary = outcome.summary;
    if (outcome.result.requests_total > 0 &&
        outcome.result.requests_rejected == outcome.result.requests_total) {
      throw ConfigError(scenario_path,
                        {{"workload", fmt::format("every request ({}) is rejected, {} of them for "
                                                  "exceeding {}'s {}-token context (see "
                                                  "context.overflow); nothing can be measured",
                                                  outcome.result.requests_total,
                                                  outcome.result.requests_rejected_context, s.model,
                                                  s.max_context_tokens)}});
    }
    if (!outcome.stopped_early.empty()) {
      // Certain to fail; its partial figures decide nothing (and say nothing of the sample size).
      p.meets = false;
      p.stopped_early = outcome.stopped_early;
      p.failed = "stopped early: " + outcome.stopped_early;
      out << fmt::format("rate {:9.3f} req/s  fails, stopped early after {} of {} requests: {}\n",
                         r, outcome.result.requests_finished, outcome.result.requests_total,
                         outcome.stopped_early);
      return p;
    }
    return judge_probe(std::move(p), criteria, scenario_path, out);
  };
  return search_capacity(probe, rate, options);
}

namespace {

reports::CapacityProbeRecord probe_record(const CapacityProbe& p, const SloCriteria& criteria) {
  const reports::RunSummary& m = p.summary;
  reports::CapacityProbeRecord r;
  r.rate = p.rate;
  r.meets = p.meets;
  r.stopped_early = p.stopped_early;
  r.failed = p.failed;
  r.requests = m.requests;
  r.slo_attainment = m.slo_attainment;
  r.sustained_rate = m.sustained_rate_per_s;
  r.offered_rate = m.window_offered_rate_per_s;
  r.output_tokens_per_s = m.output_tokens_per_s;
  r.goodput_tokens_per_s = m.goodput_tokens_per_s;
  r.goodput_requests_per_s = m.goodput_requests_per_s;
  const std::pair<double*, const reports::Percentiles*> dists[] = {
      {r.ttft_s, &m.ttft_s}, {r.tbt_s, &m.tbt_s}, {r.tpot_s, &m.tpot_s}, {r.e2e_s, &m.e2e_s}};
  for (const auto& [to, from] : dists) {
    to[0] = from->p50;
    to[1] = from->p90;
    to[2] = from->p99;
  }
  // A probe stopped early was never judged on its (partial) figures.
  if (p.stopped_early.empty()) {
    for (const SloCheck& c : criteria.check(m, p.rate)) {
      r.checks.push_back({c.name, c.value, c.limit, c.at_least, c.ok, c.unit});
    }
  }
  return r;
}

}  // namespace

reports::CapacitySearchRecord capacity_record(
    const std::string& scenario, const std::vector<std::string>& overrides,
    const CapacityOptions& options, const SloCriteria& criteria, const CapacityResult& result,
    const std::vector<std::string>& binding, double binding_rate) {
  reports::CapacitySearchRecord s;
  s.scenario = scenario;
  s.overrides = overrides;
  s.objectives = options.slo;
  s.attainment_target =
      options.attainment ? *options.attainment : std::numeric_limits<double>::quiet_NaN();
  s.min_throughput_ratio = options.min_throughput_ratio;
  s.capacity_rps = result.capacity_rps;
  s.binding = binding;
  s.binding_rate = binding_rate;
  s.verdict = result.capacity_rps > 0
                  ? fmt::format("serving capacity {:.3f} req/s", result.capacity_rps)
                  : result.no_rate_reason;
  s.status = result.capacity_rps > 0 ? "ok" : "no_rate";
  s.code_rev = SERVESIM_VERSION;
  for (const CapacityProbe& p : result.probes) s.probes.push_back(probe_record(p, criteria));
  return s;
}

}  // namespace servesim::app
