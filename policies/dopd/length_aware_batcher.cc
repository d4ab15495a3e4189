#include "policies/dopd/length_aware_batcher.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "policies/dopd/pd_ratio.h"

namespace servesim::policies::dopd {

double length_aware_timeout_s(double beta, double ttft_slo_s, double lambda_per_s, double es_s,
                              double ca2, double cs2) {
  const double rho = std::min(0.95, std::max(0.0, lambda_per_s * es_s));
  const double wq = rho / (1.0 - rho) * (ca2 + cs2) / 2.0 * es_s;
  return std::max(0.0, beta * ttft_slo_s - wq - es_s);
}

namespace {

class LengthAwareBatcher : public sim::BatchingPolicy {
 public:
  LengthAwareBatcher(const LengthAwareParams& p, const sim::InstanceContext& ctx,
                     std::shared_ptr<const LengthForecast> f)
      : p_(p), ctx_(ctx), forecast_(std::move(f)) {}

  bool next_batch(const sim::InstanceView& view, sim::BatchPlan& plan) override {
    free_ = view.free_blocks;
    wake_.reset();
    // Anything already admitted (only after a recompute) finishes first, FCFS.
    for (const sim::SeqView& r : *view.running) {
      plan.scheduled.push_back({r.id, r.remaining_tokens(), r.target_tokens()});
    }
    if (!plan.scheduled.empty()) return true;
    const double threshold = std::max(1.0, forecast_->mean_isl);
    const int64_t budget = p_.accumulate_tokens > 0
                               ? p_.accumulate_tokens
                               : static_cast<int64_t>(std::ceil(threshold));
    const Duration timeout = timeout_for(threshold);
    const sim::SeqView* first_long = nullptr;
    std::vector<const sim::SeqView*> shorts;
    int64_t short_tokens = 0;
    for (const sim::SeqView& r : *view.waiting) {
      if (static_cast<double>(r.prompt_tokens) >= threshold) {
        if (!first_long) first_long = &r;
      } else {
        shorts.push_back(&r);
        short_tokens += r.remaining_tokens();
      }
    }
    const bool timed_out = !shorts.empty() && view.now - shorts.front()->arrival >= timeout;
    if (!shorts.empty() && (short_tokens >= budget || timed_out)) {
      choose_shorts(view, shorts, budget, timeout, plan);
      return !plan.empty();  // empty: no KV room until a hand-off frees some
    }
    if (first_long) {
      admit(view, *first_long, plan);
      return !plan.empty();
    }
    wake_ = shorts.empty() ? std::nullopt : std::optional<SimTime>(shorts.front()->arrival + timeout);
    return false;
  }

  std::optional<SimTime> wake_at(const sim::InstanceView& view) override {
    if (wake_ && *wake_ > view.now) return wake_;
    return std::nullopt;
  }

 private:
  Duration timeout_for(double threshold) const {
    if (p_.timeout) return *p_.timeout;
    if (!ctx_.slo.ttft) return p_.default_timeout;
    const double es = prefill_time_s(*ctx_.cost_model, static_cast<int64_t>(std::ceil(threshold)));
    return duration_from_seconds(length_aware_timeout_s(p_.beta, to_seconds(*ctx_.slo.ttft),
                                                        forecast_->arrival_rate_per_instance, es,
                                                        p_.ca2, p_.cs2));
  }

  // Admits `r` if its prompt's KV fits; returns whether it did.
  bool admit(const sim::InstanceView& view, const sim::SeqView& r, sim::BatchPlan& plan) {
    const int64_t need = sim::blocks_for_tokens(r.target_tokens(), view.block_size);
    if (need > free_) return false;
    free_ -= need;
    plan.admit.push_back(r.id);
    plan.scheduled.push_back({r.id, r.remaining_tokens(), r.target_tokens()});
    return true;
  }

  bool admit(const sim::InstanceView& view, const sim::SeqView& r, sim::BatchPlan& plan,
             int64_t& used, int64_t budget, bool first) {
    if (static_cast<int64_t>(plan.admit.size()) >= p_.max_batch_size) return false;
    if (!first && used + r.remaining_tokens() > budget) return false;
    if (!admit(view, r, plan)) return false;
    used += r.remaining_tokens();
    return true;
  }

  void choose_shorts(const sim::InstanceView& view, const std::vector<const sim::SeqView*>& shorts,
                     int64_t budget, Duration timeout, sim::BatchPlan& plan) {
    int64_t used = 0;
    std::vector<const sim::SeqView*> rest;
    for (const sim::SeqView* r : shorts) {
      if (view.now - r->arrival >= timeout) {
        admit(view, *r, plan, used, budget, plan.admit.empty());
      } else {
        rest.push_back(r);
      }
    }
    // Benefit 1 per request: best benefit per token = shortest first; FCFS among equals.
    std::stable_sort(rest.begin(), rest.end(), [](const sim::SeqView* a, const sim::SeqView* b) {
      return a->remaining_tokens() < b->remaining_tokens();
    });
    for (const sim::SeqView* r : rest) admit(view, *r, plan, used, budget, plan.admit.empty());
  }

  LengthAwareParams p_;
  sim::InstanceContext ctx_;
  std::shared_ptr<const LengthForecast> forecast_;
  std::optional<SimTime> wake_;
  int64_t free_ = 0;  // KV blocks still free while the current plan is built
};

}  // namespace

std::unique_ptr<sim::BatchingPolicy> make_length_aware_batcher(
    const LengthAwareParams& params, const sim::InstanceContext& context,
    std::shared_ptr<const LengthForecast> forecast) {
  return std::make_unique<LengthAwareBatcher>(params, context, std::move(forecast));
}

}  // namespace servesim::policies::dopd
