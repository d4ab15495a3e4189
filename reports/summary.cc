#include "reports/summary.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/error.h"

namespace servesim::reports {
namespace {

constexpr double kNsToS = 1e-9;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Nearest-rank quantile of sorted values for an integer percentile: the smallest value with at
// least ceil(n * percent / 100) values at or below it. Integer arithmetic keeps the rank exact.
template <typename T>
T nearest_rank(const std::vector<T>& sorted, int64_t percent) {
  return sorted[nearest_rank_index(static_cast<int64_t>(sorted.size()), percent) - 1];
}

// Percentiles of per-request values in nanoseconds, reported in seconds. Reorders `ns`.
template <typename T>
Percentiles percentiles_of(std::vector<T>& ns) {
  Percentiles p;
  if (ns.empty()) {
    return p;
  }
  long double sum = 0;
  if constexpr (std::is_integral_v<T>) {
    // Integer sums are exact in any order; each rank is selected from the values at or above the
    // previous one, without sorting them all.
    for (T v : ns) {
      sum += v;
    }
    const auto n = static_cast<int64_t>(ns.size());
    // The value of the given rank, read before the next selection reorders what follows it.
    int64_t from = 0;
    const auto select = [&](int64_t percent) {
      const int64_t at = nearest_rank_index(n, percent) - 1;
      std::nth_element(ns.begin() + from, ns.begin() + at, ns.end());
      from = at;
      return static_cast<double>(ns[static_cast<size_t>(at)]) * kNsToS;
    };
    p.p50 = select(50);
    p.p90 = select(90);
    p.p99 = select(99);
    p.max = static_cast<double>(*std::max_element(ns.begin() + from, ns.end())) * kNsToS;
  } else {
    // Summed in sorted order, as the value has always been computed.
    std::sort(ns.begin(), ns.end());
    for (T v : ns) {
      sum += v;
    }
    p.p50 = static_cast<double>(nearest_rank(ns, 50)) * kNsToS;
    p.p90 = static_cast<double>(nearest_rank(ns, 90)) * kNsToS;
    p.p99 = static_cast<double>(nearest_rank(ns, 99)) * kNsToS;
    p.max = static_cast<double>(ns.back()) * kNsToS;
  }
  p.mean = static_cast<double>(sum / static_cast<long double>(ns.size())) * kNsToS;
  return p;
}

Percentiles percentiles_of(const LogHistogram& h) {
  Percentiles p;
  if (h.count() == 0) {
    return p;
  }
  p.p50 = static_cast<double>(h.quantile(0.50)) * kNsToS;
  p.p90 = static_cast<double>(h.quantile(0.90)) * kNsToS;
  p.p99 = static_cast<double>(h.quantile(0.99)) * kNsToS;
  p.mean = h.mean() * kNsToS;
  p.max = static_cast<double>(h.max()) * kNsToS;
  return p;
}

void check_record(const sim::RequestRecord& r) {
  if (r.output_tokens < 1) {
    throw Error(fmt::format("summarize: request {} has output_tokens = {} (need >= 1)",
                            r.request_id, r.output_tokens));
  }
  if (!(r.arrival_ns <= r.first_scheduled_ns && r.first_scheduled_ns <= r.first_token_ns &&
        r.first_token_ns <= r.done_ns)) {
    throw Error(fmt::format(
        "summarize: request {} is not a finished request: need arrival_ns <= first_scheduled_ns "
        "<= first_token_ns <= done_ns, got {} / {} / {} / {}",
        r.request_id, r.arrival_ns, r.first_scheduled_ns, r.first_token_ns, r.done_ns));
  }
}

double share(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : kNaN;
}

double per_second(double amount, double seconds) { return seconds > 0 ? amount / seconds : 0.0; }

std::string format_ms(Duration d) { return fmt::format("{:g} ms", to_ms(d)); }

void add_percentiles(std::vector<std::pair<std::string, double>>& out, const std::string& metric,
                     const Percentiles& p) {
  out.emplace_back(metric + "_p50_s", p.p50);
  out.emplace_back(metric + "_p90_s", p.p90);
  out.emplace_back(metric + "_p99_s", p.p99);
  out.emplace_back(metric + "_mean_s", p.mean);
  out.emplace_back(metric + "_max_s", p.max);
}

// `tokens` as a share of the measured requests' prompt tokens (0 without any).
double share_of_prompt(const RunSummary& s, int64_t tokens) {
  return s.prompt_tokens > 0 ? static_cast<double>(tokens) / static_cast<double>(s.prompt_tokens)
                             : 0.0;
}

}  // namespace

ObjectivesMet objectives_met(const sim::RequestRecord& r, const sim::SloSpec& slo) {
  ObjectivesMet m;
  if (slo.ttft) m.ttft = r.ttft_ns() <= slo.ttft->count();
  if (slo.tpot) m.tpot = r.tpot_ns() <= static_cast<double>(slo.tpot->count());
  // At most 1 % of the request's output_tokens - 1 gaps may exceed the objective.
  if (slo.tbt_p99) m.tbt = r.tbt_slo_violations <= (r.output_tokens - 1) / 100;
  return m;
}

int64_t nearest_rank_index(int64_t n, int64_t percent) {
  return std::clamp<int64_t>((n * percent + 99) / 100, 1, std::max<int64_t>(n, 1));
}

namespace {

// The sustained completion rate and the offered rate over the later half of the arrival window
// [first_arrival, last_arrival] of the measured requests; the whole run's request rate where the
// window is empty. `count_in(lo, hi)` gives the measured requests completed and arrived in
// (lo, hi], as a pair. REQUIRES: s.requests and s.request_rate_per_s set.
template <typename CountIn>
void set_window_rates(int64_t first_arrival, int64_t last_arrival, RunSummary& s,
                      const CountIn& count_in) {
  s.sustained_rate_per_s = s.request_rate_per_s;
  s.window_offered_rate_per_s = s.request_rate_per_s;
  s.window_arrivals = s.requests;
  if (s.requests == 0 || last_arrival <= first_arrival) return;
  // Completions in the later half of the arrival window. A cluster that keeps up completes, over
  // any window, the requests that arrived one latency earlier (Little's law), so the count
  // tracks the offered rate whatever the latency; an overloaded one completes at its service
  // rate. (Requests done by the last arrival, over the whole window, would instead read a
  // slower-but-keeping-up cluster as overloaded: the requests in flight at the end are missing.)
  const int64_t half = first_arrival + (last_arrival - first_arrival) / 2;
  const auto [completed, arrived] = count_in(half, last_arrival);
  const double window_s = static_cast<double>(last_arrival - half) * kNsToS;
  s.sustained_rate_per_s = per_second(static_cast<double>(completed), window_s);
  s.window_arrivals = std::llround(arrived);
  s.window_offered_rate_per_s = per_second(static_cast<double>(arrived), window_s);
}

// set_window_rates() counting the records themselves (exact).
void set_window_rates(const std::vector<sim::RequestRecord>& requests, int64_t first_arrival,
                      int64_t last_arrival, RunSummary& s) {
  set_window_rates(first_arrival, last_arrival, s, [&](int64_t lo, int64_t hi) {
    int64_t completed = 0;
    int64_t arrived = 0;
    for (const sim::RequestRecord& r : requests) {
      completed += !r.warmup && r.done_ns > lo && r.done_ns <= hi;
      arrived += !r.warmup && r.arrival_ns > lo && r.arrival_ns <= hi;
    }
    return std::pair{completed, arrived};
  });
}

void check_context(const SummaryContext& ctx) {
  if (ctx.num_gpus < 1) {
    throw Error(fmt::format("summarize: num_gpus must be >= 1, got {}", ctx.num_gpus));
  }
  if (!(ctx.gpu_seconds >= 0) || !std::isfinite(ctx.gpu_seconds)) {
    throw Error(
        fmt::format("summarize: gpu_seconds must be finite and >= 0, got {}", ctx.gpu_seconds));
  }
}

}  // namespace

namespace detail {

bool RequestTotals::add(const sim::RequestRecord& r, const sim::SloSpec& slo) {
  check_record(r);
  if (r.warmup) {
    ++warmup_requests;
    return false;
  }
  ++requests;
  first_arrival = std::min(first_arrival, r.arrival_ns);
  last_arrival = std::max(last_arrival, r.arrival_ns);
  last_done = std::max(last_done, r.done_ns);
  prompt_tokens += r.prompt_tokens;
  output_tokens += r.output_tokens;
  preempted_requests += r.preemptions > 0;
  total_preemptions += r.preemptions;
  cached_tokens += r.cached_tokens;
  dram_tokens += r.dram_hit_tokens;
  remote_tokens += r.remote_hit_tokens;
  const ObjectivesMet met = objectives_met(r, slo);
  met_ttft += met.ttft;
  met_tpot += met.tpot;
  if (slo.tbt_p99) {
    met_tbt += met.tbt;
    tbt_gaps += r.output_tokens - 1;
    tbt_violations += r.tbt_slo_violations;
  }
  if (met.all()) {
    ++met_all;
    good_output_tokens += r.output_tokens;
  }
  return true;
}

void RequestTotals::fill(const sim::SloSpec& slo, const SummaryContext& ctx, RunSummary& s) const {
  s.num_gpus = ctx.num_gpus;
  s.gpu_seconds = ctx.gpu_seconds;
  s.requests = requests;
  s.warmup_requests = warmup_requests;
  s.preempted_requests = preempted_requests;
  s.total_preemptions = total_preemptions;
  s.cached_prompt_tokens = cached_tokens;
  s.dram_prompt_tokens = dram_tokens;
  s.remote_prompt_tokens = remote_tokens;
  s.prompt_tokens = prompt_tokens;
  if (requests > 0) s.duration_s = static_cast<double>(last_done - first_arrival) * kNsToS;
  s.request_rate_per_s = per_second(static_cast<double>(requests), s.duration_s);
  s.input_tokens_per_s = per_second(static_cast<double>(prompt_tokens), s.duration_s);
  s.output_tokens_per_s = per_second(static_cast<double>(output_tokens), s.duration_s);

  const bool any_objective = slo.ttft || slo.tpot || slo.tbt_p99;
  s.slo_attainment = any_objective ? share(met_all, requests) : 1.0;
  s.attainment_ttft = slo.ttft ? share(met_ttft, requests) : kNaN;
  s.attainment_tpot = slo.tpot ? share(met_tpot, requests) : kNaN;
  s.attainment_tbt = slo.tbt_p99 ? share(met_tbt, requests) : kNaN;
  s.tbt_token_attainment = slo.tbt_p99 ? share(tbt_gaps - tbt_violations, tbt_gaps) : kNaN;

  s.goodput_tokens_per_s = per_second(static_cast<double>(good_output_tokens), s.duration_s);
  s.goodput_requests_per_s = per_second(static_cast<double>(met_all), s.duration_s);
  // NaN attainment (no requests) compares false, giving 0.
  s.distserve_goodput_per_gpu = s.slo_attainment >= slo.attainment_target
                                    ? s.request_rate_per_s / static_cast<double>(s.num_gpus)
                                    : 0.0;
  s.tokens_per_gpu_second = per_second(static_cast<double>(output_tokens), s.gpu_seconds);
}

}  // namespace detail

RunSummary summarize(const std::vector<sim::RequestRecord>& requests, const LogHistogram& tbt_ns,
                     const sim::SloSpec& slo, const SummaryContext& ctx) {
  check_context(ctx);
  detail::RequestTotals totals;
  std::vector<int64_t> ttft, e2e, queueing;
  std::vector<double> tpot;
  ttft.reserve(requests.size());
  e2e.reserve(requests.size());
  queueing.reserve(requests.size());
  tpot.reserve(requests.size());
  for (const sim::RequestRecord& r : requests) {
    if (!totals.add(r, slo)) continue;
    ttft.push_back(r.ttft_ns());
    e2e.push_back(r.e2e_ns());
    queueing.push_back(r.queueing_ns());
    if (r.output_tokens > 1) tpot.push_back(r.tpot_ns());
  }
  RunSummary s;
  totals.fill(slo, ctx, s);
  set_window_rates(requests, totals.first_arrival, totals.last_arrival, s);
  s.ttft_s = percentiles_of(ttft);
  s.tbt_s = percentiles_of(tbt_ns);
  s.tpot_s = percentiles_of(tpot);
  s.e2e_s = percentiles_of(e2e);
  s.queueing_s = percentiles_of(queueing);
  return s;
}

SummaryAccumulator::SummaryAccumulator(sim::SloSpec slo) : slo_(std::move(slo)) {}

void SummaryAccumulator::add(const sim::RequestRecord& r) {
  if (!totals_.add(r, slo_)) return;
  ttft_.add(r.ttft_ns());
  e2e_.add(r.e2e_ns());
  queueing_.add(r.queueing_ns());
  if (r.output_tokens > 1) tpot_.add(std::llround(r.tpot_ns()));
  arrivals_.add(r.arrival_ns);
  completions_.add(r.done_ns);
}

RunSummary SummaryAccumulator::summary(const LogHistogram& tbt_ns,
                                       const SummaryContext& ctx) const {
  check_context(ctx);
  RunSummary s;
  totals_.fill(slo_, ctx, s);
  set_window_rates(totals_.first_arrival, totals_.last_arrival, s, [this](int64_t lo, int64_t hi) {
    return std::pair{completions_.count_in(lo, hi), arrivals_.count_in(lo, hi)};
  });
  s.ttft_s = percentiles_of(ttft_);
  s.tbt_s = percentiles_of(tbt_ns);
  s.tpot_s = percentiles_of(tpot_);
  s.e2e_s = percentiles_of(e2e_);
  s.queueing_s = percentiles_of(queueing_);
  return s;
}

std::string format_summary(const RunSummary& s, const sim::SloSpec& slo) {
  std::string out;
  auto line = [&out](std::string_view label, const std::string& value) {
    out += fmt::format("  {:<22}{}\n", label, value);
  };
  const double gpus = static_cast<double>(s.num_gpus);
  // A share over no requests is undefined: printed as "n/a", never as "nan %".
  auto pct = [](double share) {
    return std::isfinite(share) ? fmt::format("{:.2f} %", share * 100) : std::string("n/a");
  };

  out += "Run summary\n";
  line("requests", s.warmup_requests > 0 ? fmt::format("{} (and {} warm-up requests, excluded)",
                                                      s.requests, s.warmup_requests)
                                          : fmt::format("{}", s.requests));
  line("duration", fmt::format("{:.3f} s", s.duration_s));
  line("request rate", fmt::format("{:.3f} req/s", s.request_rate_per_s));
  line("input throughput", fmt::format("{:.1f} tok/s", s.input_tokens_per_s));
  line("output throughput", fmt::format("{:.1f} tok/s", s.output_tokens_per_s));

  out += fmt::format("\n  {:<10}{:>12}{:>12}{:>12}{:>12}{:>12}\n", "latency ms", "p50", "p90",
                     "p99", "mean", "max");
  auto row = [&out](std::string_view name, const Percentiles& p) {
    out += fmt::format("  {:<10}{:>12.3f}{:>12.3f}{:>12.3f}{:>12.3f}{:>12.3f}\n", name, p.p50 * 1e3,
                       p.p90 * 1e3, p.p99 * 1e3, p.mean * 1e3, p.max * 1e3);
  };
  row("TTFT", s.ttft_s);
  row("TBT", s.tbt_s);
  row("TPOT", s.tpot_s);
  row("E2E", s.e2e_s);
  row("queueing", s.queueing_s);
  out += "\n";

  std::vector<std::string> objectives;
  if (slo.ttft) {
    objectives.push_back("TTFT <= " + format_ms(*slo.ttft));
  }
  if (slo.tpot) {
    objectives.push_back("TPOT <= " + format_ms(*slo.tpot));
  }
  if (slo.tbt_p99) {
    objectives.push_back("TBT p99 <= " + format_ms(*slo.tbt_p99));
  }
  if (objectives.empty()) {
    line("SLO attainment", fmt::format("{}  (no objectives set)", pct(s.slo_attainment)));
  } else {
    line("SLO attainment", fmt::format("{}  ({}; target {:g} %)", pct(s.slo_attainment),
                                       fmt::join(objectives, ", "), slo.attainment_target * 100));
    if (slo.ttft) {
      line("  TTFT", pct(s.attainment_ttft));
    }
    if (slo.tpot) {
      line("  TPOT", pct(s.attainment_tpot));
    }
    if (slo.tbt_p99) {
      line("  TBT p99", fmt::format("{}  ({} of all token gaps within the objective)",
                                    pct(s.attainment_tbt), pct(s.tbt_token_attainment)));
    }
  }
  line("goodput", fmt::format("{:.1f} tok/s ({:.1f} tok/s/GPU)", s.goodput_tokens_per_s,
                              s.goodput_tokens_per_s / gpus));
  line("", fmt::format("{:.3f} req/s ({:.3f} req/s/GPU)", s.goodput_requests_per_s,
                       s.goodput_requests_per_s / gpus));
  line("DistServe goodput", fmt::format("{:.3f} req/s/GPU", s.distserve_goodput_per_gpu));
  line("GPUs", fmt::format("{}", s.num_gpus));
  line("GPU-seconds", fmt::format("{:.1f}", s.gpu_seconds));
  line("tokens per GPU-second", fmt::format("{:.1f}", s.tokens_per_gpu_second));
  line("preemptions",
       fmt::format("{} ({} requests preempted)", s.total_preemptions, s.preempted_requests));
  if (s.cached_prompt_tokens > 0) {
    line("prefix cache", fmt::format("{} prompt tokens reused ({:.1f} % of prompt tokens)",
                                     s.cached_prompt_tokens,
                                     100.0 * static_cast<double>(s.cached_prompt_tokens) /
                                         static_cast<double>(std::max<int64_t>(1, s.prompt_tokens))));
  }
  if (s.dram_prompt_tokens + s.remote_prompt_tokens > 0) {
    line("KV tiers", fmt::format("{} prompt tokens loaded from DRAM ({:.1f} %), {} from the remote "
                                 "store ({:.1f} %)",
                                 s.dram_prompt_tokens, 100.0 * share_of_prompt(s, s.dram_prompt_tokens),
                                 s.remote_prompt_tokens,
                                 100.0 * share_of_prompt(s, s.remote_prompt_tokens)));
  }
  return out;
}

std::vector<std::pair<std::string, double>> summary_scalars(const RunSummary& s) {
  std::vector<std::pair<std::string, double>> out;
  out.emplace_back("requests", static_cast<double>(s.requests));
  out.emplace_back("warmup_requests", static_cast<double>(s.warmup_requests));
  out.emplace_back("preempted_requests", static_cast<double>(s.preempted_requests));
  out.emplace_back("total_preemptions", static_cast<double>(s.total_preemptions));
  out.emplace_back("prefix_cache_hit_rate", share_of_prompt(s, s.cached_prompt_tokens));
  if (s.dram_prompt_tokens + s.remote_prompt_tokens > 0) {  // runs with KV tiers that loaded
    out.emplace_back("kv_dram_hit_rate", share_of_prompt(s, s.dram_prompt_tokens));
    out.emplace_back("kv_remote_hit_rate", share_of_prompt(s, s.remote_prompt_tokens));
  }
  out.emplace_back("duration_s", s.duration_s);
  out.emplace_back("request_rate_per_s", s.request_rate_per_s);
  out.emplace_back("sustained_rate_per_s", s.sustained_rate_per_s);
  out.emplace_back("input_tokens_per_s", s.input_tokens_per_s);
  out.emplace_back("output_tokens_per_s", s.output_tokens_per_s);
  add_percentiles(out, "ttft", s.ttft_s);
  add_percentiles(out, "tbt", s.tbt_s);
  add_percentiles(out, "tpot", s.tpot_s);
  add_percentiles(out, "e2e", s.e2e_s);
  add_percentiles(out, "queueing", s.queueing_s);
  out.emplace_back("slo_attainment", s.slo_attainment);
  out.emplace_back("attainment_ttft", s.attainment_ttft);
  out.emplace_back("attainment_tpot", s.attainment_tpot);
  out.emplace_back("attainment_tbt", s.attainment_tbt);
  out.emplace_back("tbt_token_attainment", s.tbt_token_attainment);
  out.emplace_back("goodput_tokens_per_s", s.goodput_tokens_per_s);
  out.emplace_back("goodput_requests_per_s", s.goodput_requests_per_s);
  out.emplace_back("distserve_goodput_per_gpu", s.distserve_goodput_per_gpu);
  out.emplace_back("num_gpus", static_cast<double>(s.num_gpus));
  out.emplace_back("gpu_seconds", s.gpu_seconds);
  out.emplace_back("tokens_per_gpu_second", s.tokens_per_gpu_second);
  return out;
}

}  // namespace servesim::reports
