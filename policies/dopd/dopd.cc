#include "policies/dopd/dopd.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "policies/coloc.h"
#include "policies/disagg.h"
#include "policies/latency_table.h"
#include "policies/routers.h"
#include "policies/dopd/arima_forecaster.h"
#include "policies/dopd/length_aware_batcher.h"
#include "policies/dopd/pd_ratio.h"
#include "core/limits.h"

namespace servesim::policies::dopd {
namespace {

constexpr Duration kSecond{1'000'000'000};

// ---- routing ----

class DopdRouter : public sim::RoutingPolicy {
 public:
  DopdRouter(int64_t max_local, int64_t max_queue) : max_local_(max_local), max_queue_(max_queue) {}

  int32_t route(const sim::ClusterView& view, const RequestSpec& request) override {
    int64_t queue = 0;
    for (const sim::InstanceLoad& l : *view.instances) {
      if (l.accepting && l.role == sim::InstanceRole::kPrefill) queue += l.waiting;
    }
    if (request.prompt_tokens > max_local_ && queue < max_queue_) {
      // The prefill instance with the least prefill work ahead once this prompt is queued: the
      // prompts queued there plus this one's blocks its prefix cache does not hold.
      const int32_t p = argmin(view, sim::InstanceRole::kPrefill, [&](const sim::InstanceLoad& l) {
        return static_cast<double>(l.queued_prompt_blocks + uncached_prompt_blocks(view, l, request)) +
               1e-6 * static_cast<double>(l.outstanding);
      });
      if (p >= 0) return p;
    }
    const int32_t d = argmin(view, sim::InstanceRole::kDecode, [](const sim::InstanceLoad& l) {
      return static_cast<double>(l.used_blocks + l.queued_prompt_blocks) / static_cast<double>(l.total_blocks);
    });
    if (d < 0) throw std::logic_error("dopd router: no accepting instance");
    return d;
  }

 private:
  template <typename Key>
  static int32_t argmin(const sim::ClusterView& view, sim::InstanceRole role, Key key) {
    int32_t best = -1;
    double best_key = std::numeric_limits<double>::infinity();
    for (const sim::InstanceLoad& l : *view.instances) {
      if (!l.accepting || l.role != role) continue;
      const double k = key(l);
      if (best < 0 || k < best_key) {
        best = l.instance_id;
        best_key = k;
      }
    }
    return best;
  }

  int64_t max_local_, max_queue_;
};

// ---- the DOPD controller ----

struct DopdParams {
  int64_t adjust_every = 2;
  Duration interval{20 * kSecond};  // adjust_every control ticks
  ScalingLimits limits;
  double initial_isl = 1000, initial_osl = 200;
  ForecastSource forecast = ForecastSource::kArima;
  double eta = 0.85;
  double prefill_utilization = 0.6;
  double theta_q = 5, theta_u = 0.9;
  Duration idle_after{50 * kSecond};
  size_t arima_window = 50;
  bool decode_correction = true;
  bool released_counts = false;
  int64_t scale_down_patience = 3;
  int64_t max_local_prefill_length = 0;  // the router's: shorter prompts skip the prefill pool
  double burst_drain_s = 30;  // burst bypass: drain the prefill queue within this (startup_prefill)
  bool credit_local_prefill = false;  // size the prefill pool net of decode-side local prefill
  int64_t decode_token_budget = 8192;  // a decode instance's max_num_batched_tokens
};

class DopdController : public sim::ClusterController {
 public:
  DopdController(const DopdParams& p, const sim::InstanceContext& prefill,
                 const sim::InstanceContext& decode, std::shared_ptr<LengthForecast> forecast)
      : p_(p),
        prefill_(prefill),
        decode_(decode),
        forecast_(std::move(forecast)),
        monitor_(p.max_local_prefill_length),
        forecaster_(p.arima_window, p.initial_isl, p.initial_osl, p.forecast),
        t_p_s_(prefill_time_s(*prefill.cost_model, std::llround(p.initial_isl))) {}

  void control(const sim::ControlView& view, sim::ScalingDecision& decision) override {
    monitor_.observe(view);
    const PoolState pool = pool_state(view);
    int64_t prefill = pool.prefill(), decode = pool.decode();
    bool act = false;
    if (++ticks_ % p_.adjust_every == 0) act = adjust(view, pool, prefill, decode);
    // Burst bypass: act at once on a long prefill queue or a full decode KV pool.
    const double q = static_cast<double>(pool.prefill_queue);
    if (q > p_.theta_q * static_cast<double>(pool.prefill()) ||
        pool.decode_kv_utilization > p_.theta_u) {
      prefill = std::max(prefill, burst_prefill_target(view, q));
      decode = std::max(decode, static_cast<int64_t>(std::ceil(
                                    static_cast<double>(pool.decode()) * pool.decode_kv_utilization / p_.theta_u)));
      act = true;
    }
    if (!act) return;
    clamp_targets(pool, p_.limits, prefill, decode);
    move_to_targets(view, pool, prefill, decode, decision);
  }

  void preview(const Workload* open_loop) override { forecaster_.preview(open_loop); }

 private:
  // One adjustment interval: forecast, size the pools. Returns whether to act on the targets.
  bool adjust(const sim::ControlView& view, const PoolState& pool, int64_t& prefill, int64_t& decode) {
    const WindowStats w = monitor_.take(view.now);
    const LoadForecast f = forecaster_.next(w, view.now, p_.interval);
    const double n_hat = f.requests, isl_hat = f.isl, osl_hat = f.osl;
    double c_d = 1.0;
    if (p_.decode_correction && w.finished > 0 && w.mean_itl_s > 0) {
      const double conc =
          std::max(1.0, static_cast<double>(w.arrivals) /
                            static_cast<double>(std::max<int64_t>(1, pool.active_decode)) *
                            w.mean_e2e_s / to_seconds(p_.interval));
      const int64_t ctx = std::llround(std::max(1.0, w.mean_isl) + w.mean_osl / 2);
      c_d = std::clamp(w.mean_itl_s / decode_step_s(*decode_.cost_model, std::llround(conc), ctx), 0.5, 2.0);
    }
    RatioInputs in;
    in.prefill_cost = prefill_.cost_model.get();
    in.decode_cost = decode_.cost_model.get();
    in.decode_num_blocks = decode_.num_blocks;
    in.block_size = decode_.block_size;
    in.l_in = isl_hat;
    in.l_out = osl_hat;
    in.tpot_slo = decode_.slo.tpot;
    in.eta = p_.eta;
    in.decode_correction = c_d;
    // Idle windows repeat the last inputs: the ratio's bisection over the cost model is redone
    // only when they change.
    if (!last_ratio_ || !(last_ratio_->first == in)) last_ratio_.emplace(in, compute_pd_ratio(in));
    const RatioResult r = last_ratio_->second;
    const double lambda = n_hat / to_seconds(p_.interval);
    t_p_s_ = r.t_p_s;
    forecast_->mean_isl = isl_hat;
    forecast_->arrival_rate_per_instance = lambda / static_cast<double>(std::max<int64_t>(1, pool.prefill()));
    InstanceCounts c = p_.released_counts
                           ? released_instance_counts(r, n_hat)
                           : instance_counts(r, lambda, osl_hat, p_.prefill_utilization);
    if (!p_.released_counts && (local_prefill_share(w) || p_.credit_local_prefill)) {
      c.prefill = prefill_pool_target(w, r, lambda, isl_hat, osl_hat, c.decode);
    }
    // A previous scale-up still starting: the observed window does not reflect it yet.
    if (pool.scaling_in_flight()) return false;
    const bool idle = !monitor_.any_arrival() || view.now - monitor_.last_arrival() > p_.idle_after;
    prefill = idle ? p_.limits.min_prefill : c.prefill;
    decode = idle ? p_.limits.min_decode : c.decode;
    // Shrink a pool only after its target stayed below its size for `scale_down_patience`
    // adjustments in a row (a one-interval dip in the forecast must not drain what a burst needs).
    hold(prefill, pool.prefill(), below_prefill_);
    hold(decode, pool.decode(), below_decode_);
    return true;
  }

  // Whether the window says which share of its arrivals the prefill pool serves (local prefill on
  // and at least one arrival).
  bool local_prefill_share(const WindowStats& w) const {
    return p_.max_local_prefill_length > 0 && w.arrivals > 0;
  }

  // Prefill instances for the prompts the prefill pool serves: with local prefill on, the last
  // window's share of arrivals longer than the threshold, at their mean length; with
  // credit_local_prefill, less the prompts the `decode` decode instances can prefill within
  // their token budget and the TPOT SLO at the forecast decode concurrency (the router spills
  // prompts to them once the prefill queue is long).
  int64_t prefill_pool_target(const WindowStats& w, const RatioResult& r, double lambda,
                              double isl_hat, double osl_hat, int64_t decode) const {
    double pool_lambda = lambda, pool_isl = isl_hat;
    if (local_prefill_share(w)) {
      pool_lambda *= static_cast<double>(w.prefill_pool_arrivals) / static_cast<double>(w.arrivals);
      pool_isl = w.prefill_pool_arrivals > 0 ? isl_hat * w.prefill_pool_mean_isl / w.mean_isl : 1;
    }
    const int64_t isl = std::max<int64_t>(1, std::llround(pool_isl));
    if (p_.credit_local_prefill) {
      const double per_decode = lambda * osl_hat * r.t_d_s / static_cast<double>(decode);
      const double tokens_per_s = local_prefill_tokens_per_s(
          *decode_.cost_model, p_.decode_token_budget, std::llround(per_decode), r.ctx_tokens, isl,
          decode_.slo.tpot);
      pool_lambda = std::max(0.0, pool_lambda - static_cast<double>(decode) * tokens_per_s /
                                                    static_cast<double>(isl));
    }
    const double t_p = prefill_time_s(*prefill_.cost_model, isl);
    return std::max<int64_t>(1, prefill_instances(pool_lambda, t_p, p_.prefill_utilization));
  }

  int64_t burst_prefill_target(const sim::ControlView& view, double q) const {
    return burst_prefill_instances(monitor_.arrival_rate(view.now), t_p_s_, q, p_.burst_drain_s,
                                   p_.prefill_utilization);
  }

  void hold(int64_t& target, int64_t current, int64_t& below) const {
    below = target < current ? below + 1 : 0;
    if (below > 0 && below < p_.scale_down_patience) target = current;
  }

  DopdParams p_;
  sim::InstanceContext prefill_, decode_;
  std::shared_ptr<LengthForecast> forecast_;
  ResourceMonitor monitor_;
  LoadForecaster forecaster_;
  int64_t ticks_ = 0;
  int64_t below_prefill_ = 0, below_decode_ = 0;
  // Prefill time of the forecast mean prompt (of the initial ISL until the first adjustment).
  double t_p_s_;
  std::optional<std::pair<RatioInputs, RatioResult>> last_ratio_;  // the last ratio computed
};

// ---- layouts and registration ----

const sim::InstanceContext& first_of(const std::vector<sim::InstanceContext>& contexts,
                                     sim::InstanceRole role) {
  for (const auto& c : contexts) {
    if (c.role == role) return c;
  }
  throw std::invalid_argument(std::string("elastic layout has no ") + sim::role_name(role) + " instance");
}

ParamSchema elastic_schema(Duration adjustment_default) {
  ParamSchema s = disagg_schema();
  s.push_back({"control_interval", ParamType::kDuration, Duration{10 * kSecond}, "",
               "metric-pull period: the controller's tick on the simulated clock", {}, {}, {}});
  s.push_back({"adjustment_interval", ParamType::kDuration, adjustment_default, "",
               "how often the pools are resized (rounded to whole control ticks)", {}, {}, {}});
  s.push_back({"startup_prefill", ParamType::kDuration, Duration{30 * kSecond}, "",
               "from adding a prefill instance until it takes work", {}, {}, {}});
  s.push_back({"startup_decode", ParamType::kDuration, Duration{60 * kSecond}, "",
               "from adding a decode instance until it takes work", {}, {}, {}});
  s.push_back({"gpu_budget", ParamType::kInt, int64_t{8}, "GPUs",
               "most GPUs held at once (draining instances included)", {}, 2.0,
               static_cast<double>(kMaxInstances) * 64});
  return s;
}

int64_t ticks_per_adjustment(const ParamValues& v) {
  const double ratio = to_seconds(v.get_duration("adjustment_interval")) /
                       std::max(1e-9, to_seconds(v.get_duration("control_interval")));
  return std::max<int64_t>(1, std::llround(ratio));
}

sim::ElasticSpec elastic_spec(const ParamValues& v) {
  sim::ElasticSpec e;
  e.control_interval = v.get_duration("control_interval");
  e.startup_prefill = v.get_duration("startup_prefill");
  e.startup_decode = v.get_duration("startup_decode");
  return e;
}

ScalingLimits limits_of(const ParamValues& v) {
  ScalingLimits l;
  l.gpu_budget = v.get_int("gpu_budget");
  if (v.contains("max_change")) l.max_change = v.get_int("max_change");
  return l;
}

// The adjustment cadence, scaling limits and load-forecast knobs every forecasting planner (DOPD,
// Dynamo's SLA planner) reads the same way.
template <typename Params>
void read_forecasting_params(const ParamValues& v, Params& p) {
  p.adjust_every = ticks_per_adjustment(v);
  p.interval = v.get_duration("control_interval") * p.adjust_every;
  p.limits = limits_of(v);
  p.initial_isl = v.get_double("initial_isl");
  p.initial_osl = v.get_double("initial_osl");
  p.arima_window = static_cast<size_t>(v.get_int("arima_window"));
  p.forecast =
      v.get_string("forecast") == "oracle" ? ForecastSource::kOracle : ForecastSource::kArima;
}

// The forecast-source knob of every forecasting planner.
ParamSpec forecast_param() {
  return {"forecast",
          ParamType::kString,
          std::string("arima"),
          "",
          "where the next window's load comes from: arima (forecast from the observed windows) or "
          "oracle (the true arrivals of an open-loop workload, known before the run: a what-if "
          "bound on what a perfect forecaster buys, not a deployable planner)",
          {"arima", "oracle"},
          {},
          {}};
}

const ParamSchema& dopd_schema() {
  static const ParamSchema schema = [] {
    ParamSchema s = elastic_schema(Duration{20 * kSecond});
    // A decode instance prefills the prompts the router spills to it in chunks of at most 512
    // tokens (with disagg's default, a whole spilled prompt would share one decode iteration):
    // the best of 256..8192 on the bursty replay (`servesim run --explain-misses` there: larger
    // chunks turn into prefill-interference and KV-pressure TPOT misses).
    for (ParamSpec& spec : s) {
      if (spec.name == "decode_max_num_batched_tokens") {
        spec.default_value = int64_t{512};
        spec.help = "a decode instance's token budget per iteration: its decodes plus chunks of "
                    "the prompts it prefills locally (0: the larger of prefill_max_tokens and "
                    "decode_max_num_seqs)";
      }
    }
    s.push_back({"elastic", ParamType::kBool, true, "",
                 "resize the pools (false: static DOPD, the initial pools throughout)", {}, {}, {}});
    s.push_back({"max_change", ParamType::kInt, int64_t{2}, "instances",
                 "most instances added or removed per role per decision", {}, 1.0, {}});
    s.push_back({"initial_isl", ParamType::kDouble, 1000.0, "tokens",
                 "mean input length assumed before any is observed", {}, 1.0, {}});
    s.push_back({"initial_osl", ParamType::kDouble, 200.0, "tokens",
                 "mean output length assumed before any is observed", {}, 1.0, {}});
    s.push_back({"eta", ParamType::kDouble, 0.85, "", "decode concurrency derating C_use = eta C_max",
                 {}, 0.05, 1.0});
    // 0.6: on the bursty replay (time scale 0.4) the highest SLO attainment whose GPU-seconds stay
    // below the cheapest static layout that meets the SLO (docs/elastic-pd.md).
    s.push_back({"prefill_utilization", ParamType::kDouble, 0.6, "",
                 "target prefill-pool utilisation rho_P (eq. 16)", {}, 0.05, 1.0});
    s.push_back({"theta_q", ParamType::kDouble, 5.0, "requests",
                 "burst bypass: queued prefills per prefill instance", {}, 0.1, {}});
    s.push_back({"theta_u", ParamType::kDouble, 0.9, "", "burst bypass: decode KV utilisation", {},
                 0.05, 1.0});
    s.push_back({"idle_after", ParamType::kDuration, Duration{50 * kSecond}, "",
                 "no arrivals for this long: shrink both pools to one instance", {}, {}, {}});
    s.push_back({"arima_window", ParamType::kInt, int64_t{50}, "points",
                 "ARIMA sliding window", {}, 5.0, {}});
    s.push_back(forecast_param());
    s.push_back({"decode_correction", ParamType::kBool, true, "",
                 "scale T_d by the observed / profiled ITL factor c_d", {}, {}, {}});
    s.push_back({"released_counts", ParamType::kBool, false, "",
                 "the released planner's counts: N_P = ceil(R*), N_D = ceil(n / C_max)", {}, {}, {}});
    s.push_back({"scale_down_patience", ParamType::kInt, int64_t{3}, "adjustments",
                 "shrink a pool only after its target stayed lower this many adjustments", {}, 1.0,
                 {}});
    s.push_back({"length_aware", ParamType::kBool, true, "",
                 "length-aware prefill batching (false: FCFS as disagg)", {}, {}, {}});
    s.push_back({"accumulate_tokens", ParamType::kInt, int64_t{0}, "tokens",
                 "short-prompt batch budget L_acc (0: the forecast mean ISL)", {}, 0.0, {}});
    s.push_back({"short_timeout", ParamType::kDuration, Duration{0}, "",
                 "longest a short prompt waits to be batched (0: eq. 17)", {}, {}, {}});
    s.push_back({"beta", ParamType::kDouble, 0.5, "", "eq. 17 safety factor", {}, 0.0, 1.0});
    // The released configurations prefill prompts up to 511 tokens on decode instances; on the
    // bursty replay that puts 39 % of the requests on them and most TPOT misses become prefill
    // interference (docs/elastic-pd.md), so by default only the queue spill below does.
    s.push_back({"max_local_prefill_length", ParamType::kInt, int64_t{0}, "tokens",
                 "prompts up to this length are prefilled on a decode instance (0: none; the "
                 "released configurations use 511)", {}, 0.0, {}});
    s.push_back({"max_prefill_queue_size", ParamType::kInt, int64_t{16}, "requests",
                 "with this many prefills queued, longer prompts are prefilled locally too", {}, 1.0, {}});
    s.push_back({"decode_slo_aware", ParamType::kBool, true, "",
                 "decode instances cap each iteration's locally prefilled tokens so that it is "
                 "predicted within decode_iteration_target beside its decodes (false: vLLM's "
                 "chunked prefill within decode_max_num_batched_tokens)", {}, {}, {}});
    s.push_back({"decode_iteration_target", ParamType::kDuration, Duration{0}, "",
                 "iteration-time target of SLO-aware decode instances (0: the TPOT SLO)", {}, {},
                 {}});
    s.push_back({"credit_local_prefill", ParamType::kBool, false, "",
                 "size the prefill pool net of the prompts decode instances prefill locally "
                 "within decode_max_num_batched_tokens and the TPOT SLO", {}, {}, {}});
    return s;
  }();
  return schema;
}

sim::ClusterLayout make_dopd_layout(const ParamValues& v) {
  sim::ClusterLayout layout = make_disagg_layout(v);
  layout.decode_router = "least_kv_load";
  layout.decode_takes_arrivals = true;
  auto forecast = std::make_shared<LengthForecast>();
  forecast->mean_isl = v.get_double("initial_isl");
  if (v.get_bool("length_aware")) {
    LengthAwareParams lp;
    lp.max_batch_size = v.get_int("prefill_max_batch_size");
    lp.accumulate_tokens = v.get_int("accumulate_tokens");
    if (v.get_duration("short_timeout").count() > 0) lp.timeout = v.get_duration("short_timeout");
    lp.beta = v.get_double("beta");
    sim::InstanceGroup& prefill = layout.groups.front();
    prefill.make_batching = [lp, forecast](const sim::InstanceContext& ctx) {
      return make_length_aware_batcher(lp, ctx, forecast);
    };
  }
  if (v.get_bool("decode_slo_aware")) {
    // SLO-aware decode instances: the prompt tokens of each iteration are capped so that the
    // instance's latency table predicts it within the target beside its decodes (DynaServe's
    // local scheduler, policies.md §3.5); without a target (no TPOT SLO) as disagg's.
    const Duration target = v.get_duration("decode_iteration_target");
    for (sim::InstanceGroup& g : layout.groups) {
      if (g.role != sim::InstanceRole::kDecode) continue;
      ColocParams cp;
      cp.mode = ColocParams::Mode::kStallFree;
      cp.max_num_batched_tokens = g.max_num_batched_tokens;
      cp.max_num_seqs = g.max_num_seqs;
      g.make_batching = [cp, target, plain = std::move(g.make_batching)](
                            const sim::InstanceContext& ctx) {
        const std::optional<Duration> t = target.count() > 0 ? std::optional(target) : ctx.slo.tpot;
        if (!t) return plain(ctx);
        ColocParams p = cp;
        p.iteration_target = *t;
        p.latency_table = std::make_shared<LatencyTable>(ctx.cost_model);
        return make_coloc(p);
      };
    }
  }
  const int64_t max_local = v.get_int("max_local_prefill_length");
  const int64_t max_queue = v.get_int("max_prefill_queue_size");
  layout.make_router = [max_local, max_queue](const std::vector<sim::InstanceContext>&) {
    return make_dopd_router(max_local, max_queue);
  };
  if (v.get_bool("elastic")) {
    DopdParams p;
    read_forecasting_params(v, p);
    p.eta = v.get_double("eta");
    p.prefill_utilization = v.get_double("prefill_utilization");
    p.theta_q = v.get_double("theta_q");
    p.theta_u = v.get_double("theta_u");
    p.idle_after = v.get_duration("idle_after");
    p.decode_correction = v.get_bool("decode_correction");
    p.released_counts = v.get_bool("released_counts");
    p.scale_down_patience = v.get_int("scale_down_patience");
    p.max_local_prefill_length = v.get_int("max_local_prefill_length");
    p.burst_drain_s = std::max(1.0, to_seconds(v.get_duration("startup_prefill")));
    p.credit_local_prefill = v.get_bool("credit_local_prefill");
    for (const sim::InstanceGroup& g : layout.groups) {
      if (g.role == sim::InstanceRole::kDecode) p.decode_token_budget = g.max_num_batched_tokens;
    }
    sim::ElasticSpec e = elastic_spec(v);
    e.make_controller = [p, forecast](const std::vector<sim::InstanceContext>& contexts) {
      return std::make_unique<DopdController>(p, first_of(contexts, sim::InstanceRole::kPrefill),
                                              first_of(contexts, sim::InstanceRole::kDecode), forecast);
    };
    layout.elastic = std::move(e);
  }
  return layout;
}

const ParamSchema& dyn_load_schema() {
  static const ParamSchema schema = elastic_schema(Duration{180 * kSecond});
  return schema;
}

sim::ClusterLayout make_dyn_load_layout(const ParamValues& v) {
  sim::ClusterLayout layout = make_disagg_layout(v);
  DynLoadParams p;
  p.adjust_every = ticks_per_adjustment(v);
  p.limits = limits_of(v);
  sim::ElasticSpec e = elastic_spec(v);
  e.make_controller = [p](const std::vector<sim::InstanceContext>&) { return make_dyn_load_controller(p); };
  layout.elastic = std::move(e);
  return layout;
}

const ParamSchema& dyn_sla_schema() {
  static const ParamSchema schema = [] {
    ParamSchema s = elastic_schema(Duration{180 * kSecond});
    s.push_back({"initial_isl", ParamType::kDouble, 3000.0, "tokens",
                 "mean input length assumed before any is observed", {}, 1.0, {}});
    s.push_back({"initial_osl", ParamType::kDouble, 150.0, "tokens",
                 "mean output length assumed before any is observed", {}, 1.0, {}});
    s.push_back({"itl_target", ParamType::kDuration, Duration{0}, "",
                 "decode ITL target (0: the scenario's TPOT SLO, else 50 ms)", {}, {}, {}});
    s.push_back({"arima_window", ParamType::kInt, int64_t{50}, "points", "ARIMA sliding window",
                 {}, 5.0, {}});
    s.push_back(forecast_param());
    return s;
  }();
  return schema;
}

sim::ClusterLayout make_dyn_sla_layout(const ParamValues& v) {
  sim::ClusterLayout layout = make_disagg_layout(v);
  DynSlaParams p;
  read_forecasting_params(v, p);
  if (v.get_duration("itl_target").count() > 0) p.itl_target = v.get_duration("itl_target");
  sim::ElasticSpec e = elastic_spec(v);
  e.make_controller = [p](const std::vector<sim::InstanceContext>& contexts) {
    return make_dyn_sla_controller(p, first_of(contexts, sim::InstanceRole::kPrefill),
                                   first_of(contexts, sim::InstanceRole::kDecode));
  };
  layout.elastic = std::move(e);
  return layout;
}

}  // namespace

std::unique_ptr<sim::RoutingPolicy> make_dopd_router(int64_t max_local_prefill_length,
                                                     int64_t max_prefill_queue_size) {
  return std::make_unique<DopdRouter>(max_local_prefill_length, max_prefill_queue_size);
}

namespace {

// The checks of an elastic pool policy named `policy` beyond its schema: its starting layout fits
// its GPU budget, and a clairvoyant forecast (forecast=oracle) has arrivals to read before the
// run.
std::vector<ConfigIssue> check_elastic_pools(const std::string& policy, const ParamValues& v,
                                             const sim::ClusterPolicyFacts& facts) {
  std::vector<ConfigIssue> issues;
  if (v.contains("gpu_budget") && facts.starting_gpus > v.get_int("gpu_budget")) {
    issues.push_back({"policy.gpu_budget",
                      fmt::format("the starting layout of policy {} needs {} GPUs, more than its "
                                  "GPU budget of {}",
                                  policy, facts.starting_gpus, v.get_int("gpu_budget"))});
  }
  // The clairvoyant forecast reads arrival times before the run; those of a closed loop, of
  // sessions and of a benchmark's measured phase after its warm-up depend on it (the engine
  // refuses them too).
  if (v.contains("forecast") && v.get_string("forecast") == "oracle" &&
      !facts.run_dependent_arrivals.empty()) {
    issues.push_back(
        {"policy.forecast", fmt::format("oracle needs an open-loop workload (a trace or generated "
                                        "arrivals): the send times of a {} depend on the run",
                                        facts.run_dependent_arrivals)});
  }
  return issues;
}

// Registers the elastic pool policy `name`: its check names it in its messages.
void add_elastic_pool(const std::string& name, std::string description, ParamSchema schema,
                      sim::ClusterLayout (*make)(const ParamValues&)) {
  sim::cluster_policies().add(name,
                              {std::move(description), std::move(schema), make,
                               [name](const ParamValues& v, const sim::ClusterPolicyFacts& facts) {
                                 return check_elastic_pools(name, v, facts);
                               }});
}

}  // namespace

void register_dopd() {
  add_elastic_pool("dopd",
                   "DOPD: forecast-driven optimal P/D ratio, elastic pools with burst bypass, "
                   "length-aware prefill batching, short prompts prefilled on decode instances",
                   dopd_schema(), make_dopd_layout);
  add_elastic_pool("dyn-load",
                   "Dynamo's load-based planner: elastic P/D pools on queue and KV thresholds",
                   dyn_load_schema(), make_dyn_load_layout);
  add_elastic_pool("dyn-sla",
                   "Dynamo's SLA-based planner: elastic P/D pools sized from forecasts and "
                   "profiled throughput within the latency targets",
                   dyn_sla_schema(), make_dyn_sla_layout);
}

}  // namespace servesim::policies::dopd
