#include "policies/dllm.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "dllm/denoise.h"
#include "dllm/memory.h"
#include "dllm/scheduler.h"
#include "dllm/step_cost.h"
#include "sim/policy_api.h"
#include "core/units.h"

namespace servesim::policies {
namespace {

// What both dLLM policies share: the configuration, the request plans, the pass pricing and the
// counters.
class DllmBatchingBase : public sim::BatchingPolicy {
 public:
  DllmBatchingBase(const DllmInstanceSpec& spec, std::shared_ptr<DllmPassStats> stats)
      : c_(spec.config),
        d_(spec.deployment),
        cost_(spec.cost),
        plans_(spec.plans),
        step_cost_(*spec.cost, spec.deployment, dllm::cost_knobs(spec.config)),
        stats_(std::move(stats)) {}

  std::optional<Duration> batch_time(const sim::InstanceView&, const sim::BatchPlan&) override {
    return price_pass();
  }

 protected:
  int64_t seq_len(const sim::SeqView& s) const { return s.prompt_tokens + c_.denoise.gen_length; }
  // Time of one pass over work_, counted in the stats.
  Duration price_pass() {
    const Duration t = step_cost_.step_time(work_);
    ++stats_->forward_passes;
    stats_->batch_slots += static_cast<int64_t>(work_.size());
    stats_->max_batch = std::max<int64_t>(stats_->max_batch, static_cast<int64_t>(work_.size()));
    stats_->lm_head_chunks += step_cost_.last_chunks();
    return t;
  }
  const dllm::DllmConfig c_;
  const models::Deployment d_;
  std::shared_ptr<const models::IterationCostModel> cost_;  // kept alive for step_cost_
  std::shared_ptr<const std::vector<dllm::RequestPlan>> plans_;
  dllm::StepCost step_cost_;
  std::shared_ptr<DllmPassStats> stats_;
  std::vector<dllm::StepWork> work_;  // of the pass next_batch() planned last, in batch order
};

// Keeps its running queue itself (the engine's running list is in admission order, dLLM-Serve's
// is not): every request's next step, advanced when a pass ends. The engine finishes a request
// after its planned passes, exactly when it leaves this queue.
class DllmServeBatching final : public DllmBatchingBase {
 public:
  using DllmBatchingBase::DllmBatchingBase;

  bool next_batch(const sim::InstanceView& view, sim::BatchPlan& plan) override {
    work_.clear();
    const dllm::SchedulerKnobs knobs{c_.max_num_batched_tokens, c_.max_num_seqs, c_.phase_aware};
    // schedule_pass() takes the running requests first, whatever waits; then it admits waiting
    // ones in order while the budget left holds each whole sequence (at least gen_length + 1
    // tokens), so only that many waiting requests, plus the first misfit, can matter.
    waiting_.clear();
    const dllm::ScheduleDecision running_only =
        dllm::schedule_pass(queue_, waiting_, view.free_blocks, knobs);
    const int64_t admissible = std::min(
        c_.max_num_seqs - running_only.run_prefix,
        (c_.max_num_batched_tokens - running_only.query_tokens) / (c_.denoise.gen_length + 1) + 1);
    const size_t reachable =
        std::min(view.waiting->size(), static_cast<size_t>(std::max<int64_t>(admissible, 0)));
    for (size_t i = 0; i < reachable; ++i) {
      const sim::SeqView& s = (*view.waiting)[i];
      const int64_t len = seq_len(s);
      int32_t& pages = pages_[static_cast<size_t>(s.id)];
      if (pages == 0) pages = static_cast<int32_t>(dllm::pages_for_request(c_.denoise.retention, len));
      waiting_.push_back({len, true, c_.denoise.block, pages});
    }
    // The admission stage alone: what the running stage left of the budget and the sequences.
    dllm::ScheduleDecision dec = running_only;
    if (reachable > 0) {
      const dllm::SchedulerKnobs left{c_.max_num_batched_tokens - running_only.query_tokens,
                                      c_.max_num_seqs - running_only.run_prefix, c_.phase_aware};
      dec.admit_prefix = dllm::schedule_pass({}, waiting_, view.free_blocks, left).admit_prefix;
    }
    if (dec.run_prefix + dec.admit_prefix == 0) return false;
    // New queue order: the pass's requests in pass order (the running prefix, then the
    // admitted), then the running ones left out.
    const auto at = static_cast<std::ptrdiff_t>(dec.run_prefix);
    const auto admitted = static_cast<size_t>(dec.admit_prefix);
    order_.insert(order_.begin() + at, admitted, Live{});
    queue_.insert(queue_.begin() + at, waiting_.begin(),
                  waiting_.begin() + static_cast<std::ptrdiff_t>(admitted));
    for (size_t i = 0; i < admitted; ++i) {
      const sim::SeqView& s = (*view.waiting)[i];
      plan.admit.push_back(s.id);
      const dllm::RequestPlan& p = (*plans_)[static_cast<size_t>(s.id)];
      order_[static_cast<size_t>(at) + i] = {s.id, s.prompt_tokens, 0, 0, 0, steps_of_block(p, 0),
                                             p.steps};
    }
    passing_ = static_cast<size_t>(dec.run_prefix) + admitted;
    // Filled by index: both vectors are reused pass after pass.
    const size_t first = plan.scheduled.size();
    plan.scheduled.resize(first + passing_);
    work_.resize(passing_);
    for (size_t i = 0; i < passing_; ++i) {
      const Live& l = order_[i];
      const dllm::QueuedRequest& q = queue_[i];
      plan.scheduled[first + i] = {l.id, l.step == 0 ? l.prompt : 1, q.pages * dllm::kPageTokens};
      work_[i] = dllm::step_work_at(c_.algorithm, c_.denoise, l.prompt, q.seq_len, l.in_block,
                                    l.step);
    }
    return true;
  }

  // The pass's requests (the queue's first passing_) move to their next step; finished ones leave.
  void on_batch_done(const sim::InstanceView&, Duration) override {
    size_t kept = 0;
    for (size_t i = 0; i < passing_; ++i) {
      Live& l = order_[i];
      if (++l.step == l.steps) continue;  // finished: the engine finishes it now too
      if (++l.in_block == l.block_steps) {
        l.in_block = 0;
        l.block_steps = steps_of_block((*plans_)[static_cast<size_t>(l.id)], ++l.block);
      }
      queue_[i].in_refresh = l.in_block <= 1;
      if (kept != i) {
        order_[kept] = l;
        queue_[kept] = queue_[i];
      }
      ++kept;
    }
    order_.erase(order_.begin() + static_cast<std::ptrdiff_t>(kept),
                 order_.begin() + static_cast<std::ptrdiff_t>(passing_));
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(kept),
                 queue_.begin() + static_cast<std::ptrdiff_t>(passing_));
    passing_ = 0;
  }

 private:
  // A running request: what schedule_pass() sees of it is in queue_ at the same index.
  struct Live {
    RequestId id = 0;
    int64_t prompt = 0;
    int64_t step = 0;         // passes run
    int64_t block = 0;        // block of the next pass
    int64_t in_block = 0;     // in-block step of the next pass
    int64_t block_steps = 0;  // steps of that block
    int64_t steps = 0;        // passes planned
  };
  int64_t steps_of_block(const dllm::RequestPlan& p, int64_t block) const {
    return p.block_steps.empty() ? c_.denoise.steps_per_block()
                                 : p.block_steps[static_cast<size_t>(block)];
  }
  // The running requests in dLLM-Serve's queue order.
  std::vector<Live> order_;
  std::vector<dllm::QueuedRequest> queue_;
  size_t passing_ = 0;  // order_[0, passing_) are in the pass under way
  std::vector<dllm::QueuedRequest> waiting_;  // the reachable head of the waiting queue
  // KV pages of each request by id (0: not computed yet; a request needs at least one).
  std::vector<int32_t> pages_ = std::vector<int32_t>(plans_->size(), 0);
};

class StaticBatching final : public DllmBatchingBase {
 public:
  using DllmBatchingBase::DllmBatchingBase;

  // A whole static batch is one engine iteration: its requests are admitted together, run every
  // pass of the batch and finish together.
  bool next_batch(const sim::InstanceView& view, sim::BatchPlan& plan) override {
    if (!view.running->empty()) {
      throw std::logic_error("static batching: a batch is still running at its own end");
    }
    if (view.waiting->empty()) return false;
    const size_t b = fit_batch(*view.waiting);
    block_steps_.clear();
    for (size_t i = 0; i < b; ++i) {
      const sim::SeqView& s = (*view.waiting)[i];
      plan.admit.push_back(s.id);
      plan.scheduled.push_back({s.id, s.remaining_tokens(), 0});
      // The batch moves block by block in lock step: a block takes as many steps as its slowest
      // request needs, and the batch runs as many blocks as its longest request.
      const dllm::RequestPlan& p = (*plans_)[static_cast<size_t>(s.id)];
      const auto blocks = static_cast<size_t>(p.tokens / c_.denoise.block);
      if (block_steps_.size() < blocks) block_steps_.resize(blocks, 0);
      for (size_t j = 0; j < blocks; ++j) {
        const int64_t n = p.block_steps.empty() ? c_.denoise.steps_per_block() : p.block_steps[j];
        block_steps_[j] = std::max(block_steps_[j], n);
      }
    }
    batch_size_ = b;
    return true;
  }

  std::optional<Duration> batch_time(const sim::InstanceView&, const sim::BatchPlan&) override {
    Duration t{0};
    int64_t step = 0;
    for (const int64_t n : block_steps_) {
      for (int64_t k = 0; k < n; ++k, ++step) {
        work_.assign(batch_size_, dllm::step_work_at(c_.algorithm, c_.denoise,
                                                     padded_ - c_.denoise.gen_length, padded_, k,
                                                     step));
        t += price_pass();
      }
    }
    return t;
  }

 private:
  // Largest FCFS prefix of `queue` (at most max_batch_size when set) that fits padded; sets
  // padded_ to its longest sequence. Throws OutOfMemoryError when not even one request fits.
  size_t fit_batch(const std::deque<sim::SeqView>& queue) {
    const int64_t usable = dllm::usable_bytes(d_, c_.memory);
    size_t b = 0;
    int64_t lmax = 0;
    while (b < queue.size() && (c_.max_batch_size <= 0 || static_cast<int64_t>(b) < c_.max_batch_size)) {
      const int64_t l = std::max(lmax, seq_len(queue[b]));
      const auto need = dllm::static_batch_memory(c_.algorithm, d_, c_.memory, c_.denoise,
                                                  static_cast<int64_t>(b) + 1, l);
      if (need.total() > usable) {
        if (b == 0) {
          throw dllm::OutOfMemoryError(fmt::format(
              "{} on {} with {} cannot hold one request of {} tokens: weights "
              "{:.2f} + runtime {:.2f} + KV {:.2f} + activations {:.2f} + logits {:.2f} GiB > "
              "{:.2f} GiB usable",
              dllm::algorithm_name(c_.algorithm), d_.gpu->key, d_.model->key, l,
              need.weight_bytes / kBytesPerGiB, need.runtime_overhead_bytes / kBytesPerGiB,
              need.kv_bytes / kBytesPerGiB, need.activation_bytes / kBytesPerGiB,
              need.logits_bytes / kBytesPerGiB, usable / kBytesPerGiB));
        }
        break;
      }
      lmax = l;
      ++b;
    }
    padded_ = lmax;
    return b;
  }

  int64_t padded_ = 0;  // sequence length the running batch is padded to
  size_t batch_size_ = 0;
  std::vector<int64_t> block_steps_;  // steps of each block of the running batch
};

// Longest sequence (prompt + generation) dllm-serve can ever run with `pool`: within the token
// budget and its page reservation within the pool.
int64_t longest_dllm_serve_sequence(const dllm::DllmConfig& c, const dllm::PagePoolPlan& pool) {
  int64_t len = std::min<int64_t>(
      c.max_num_batched_tokens,
      static_cast<int64_t>(std::floor(static_cast<double>(pool.num_pages * dllm::kPageTokens) /
                                      c.denoise.retention)));
  while (len > 0 && dllm::pages_for_request(c.denoise.retention, len) > pool.num_pages) --len;
  while (len < c.max_num_batched_tokens &&
         dllm::pages_for_request(c.denoise.retention, len + 1) <= pool.num_pages) {
    ++len;
  }
  return len;
}

dllm::PagePoolPlan page_pool(const DllmInstanceSpec& spec) {
  const dllm::DllmConfig& c = spec.config;
  return dllm::plan_page_pool(spec.deployment, c.memory, c.max_num_batched_tokens,
                              c.max_num_logits, c.logit_budgeting);
}

// The engine's records of a dLLM run in dLLM terms (policies/dllm.h): in workload order, the
// answer at the last pass, output = tokens denoised.
class DllmRecords : public sim::RecordListener {
 public:
  DllmRecords(const Workload& w, const std::vector<dllm::RequestPlan>& plans,
              dllm::DllmRunResult& out)
      : out_(out) {
    out_.requests.resize(w.requests.size());
    for (size_t i = 0; i < w.requests.size(); ++i) {
      dllm::DllmRequestResult& q = out_.requests[i];
      q.id = w.requests[i].id;
      q.arrival_ns = to_ns(w.requests[i].arrival);
      q.prompt_tokens = w.requests[i].prompt_tokens;
      q.output_tokens = plans[i].tokens;
    }
  }
  void on_request(const sim::RequestRecord& r) override {
    dllm::DllmRequestResult& q = out_.requests[static_cast<size_t>(r.request_id)];
    q.first_scheduled_ns = r.first_scheduled_ns;
    q.done_ns = r.done_ns;
    q.instance = r.instance_id;
    out_.end_ns = std::max(out_.end_ns, r.done_ns);
  }
  void on_sample(const sim::SampleRecord&) override {}
  void on_rejected(const sim::RejectedRecord& r) override {
    out_.requests[static_cast<size_t>(r.request_id)].rejected = true;
    ++out_.rejected;
  }

 private:
  dllm::DllmRunResult& out_;
};

}  // namespace

std::string describe_dllm_memory(const DllmInstanceSpec& spec) {
  if (spec.config.algorithm == dllm::Algorithm::kDllmServe) return page_pool(spec).describe();
  return fmt::format(
      "static batches: largest FCFS prefix with weights + KV + activations + "
      "logits <= {:.2f} GiB usable",
      dllm::usable_bytes(spec.deployment, spec.config.memory) / kBytesPerGiB);
}

sim::InstanceSetup make_dllm_instance(const DllmInstanceSpec& spec,
                                      std::shared_ptr<DllmPassStats> stats) {
  const dllm::DllmConfig& c = spec.config;
  dllm::check_config(c);
  if (!spec.cost || !spec.plans || !stats) {
    throw std::invalid_argument("make_dllm_instance: cost model, plans and stats are required");
  }
  sim::InstanceSetup setup;
  setup.gpu = spec.deployment.gpu->key;
  setup.tp = spec.deployment.tp;
  setup.kv_bytes_per_token = spec.deployment.model->kv_bytes_per_token(spec.deployment.kv_dtype);
  setup.cost_model = spec.cost;
  setup.kv_reserved_only = true;
  setup.block_size = dllm::kPageTokens;
  if (c.algorithm == dllm::Algorithm::kDllmServe) {
    const dllm::PagePoolPlan pool = page_pool(spec);
    if (pool.num_pages < 1) {
      throw dllm::OutOfMemoryError(fmt::format(
          "dllm-serve on {} with {}: {} leaves no KV page ({:.2f} GiB short of one page)",
          spec.deployment.gpu->key, spec.deployment.model->key, pool.describe(),
          (pool.weight_bytes + pool.runtime_overhead_bytes + pool.activation_bytes +
           pool.logit_reserve_bytes + pool.page_bytes - pool.usable_bytes) /
              kBytesPerGiB));
    }
    const int64_t longest_prompt = longest_dllm_serve_sequence(c, pool) - c.denoise.gen_length;
    if (longest_prompt < 1) {
      throw dllm::OutOfMemoryError(fmt::format(
          "dllm-serve on {} with {}: no request with a prompt fits beside gen_length {} (token "
          "budget {}, {})",
          spec.deployment.gpu->key, spec.deployment.model->key, c.denoise.gen_length,
          c.max_num_batched_tokens, pool.describe()));
    }
    setup.num_blocks = pool.num_pages;
    setup.max_prompt_tokens = longest_prompt;
    setup.batching = std::make_unique<DllmServeBatching>(spec, std::move(stats));
  } else {
    setup.num_blocks = 1;  // nominal: the engine wants a pool; a static batch reserves none of it
    setup.batching = std::make_unique<StaticBatching>(spec, std::move(stats));
  }
  return setup;
}


dllm::DllmRunResult run_dllm_cluster(const DllmInstanceSpec& spec, int64_t instances,
                                     std::unique_ptr<sim::RoutingPolicy> router,
                                     Workload workload) {
  if (spec.plans->size() != workload.requests.size()) {
    throw std::invalid_argument("run_dllm_cluster: one plan per request is required");
  }
  dllm::DllmRunResult result;
  result.memory = describe_dllm_memory(spec);
  std::vector<sim::InstanceSetup> setups;
  std::vector<std::shared_ptr<DllmPassStats>> stats;
  for (int64_t i = 0; i < instances; ++i) {
    stats.push_back(std::make_shared<DllmPassStats>());
    setups.push_back(make_dllm_instance(spec, stats.back()));
  }
  const bool per_pass = spec.config.algorithm == dllm::Algorithm::kDllmServe;
  for (size_t i = 0; i < workload.requests.size(); ++i) {
    // One engine token per pass (dllm-serve) or per static batch (baselines).
    workload.requests[i].output_tokens = per_pass ? (*spec.plans)[i].steps : 1;
  }
  DllmRecords records(workload, *spec.plans, result);
  sim::EngineConfig config;
  config.sample_interval = Duration{0};
  sim::Engine engine(std::move(config), std::move(setups), std::move(router), std::move(workload),
                     &records);
  result.fingerprint = engine.run().event_fingerprint;
  for (const auto& st : stats) {
    result.forward_passes += st->forward_passes;
    result.lm_head_chunks += st->lm_head_chunks;
    result.batch_slots += st->batch_slots;
    result.max_batch = std::max(result.max_batch, st->max_batch);
  }
  return result;
}

void register_dllm_policies() {
  // Knobs every dLLM policy takes: the framework's host time on top of the cost model's.
  const auto overheads = [](Duration request_overhead) {
    return ParamSchema{
        {"step_overhead", ParamType::kDuration, Duration{0}, "",
         "CPU time added to every denoising step", {}, {}, {}},
        {"request_overhead", ParamType::kDuration, request_overhead, "",
         "host time per request of every denoising step", {}, {}, {}},
    };
  };
  for (const std::string& name : dllm::algorithm_names()) {
    const dllm::Algorithm a = dllm::parse_algorithm(name);
    ParamSchema schema;
    if (a == dllm::Algorithm::kDllmServe) {
      schema = {
          {"max_num_batched_tokens", ParamType::kInt, int64_t{16384}, "tokens",
           "query tokens per forward pass", {}, 1.0, {}},
          {"max_num_seqs", ParamType::kInt, int64_t{512}, "requests", "requests per forward pass",
           {}, 1.0, {}},
          {"max_num_logits", ParamType::kInt, int64_t{2048}, "rows",
           "logit rows per LM-head chunk (the logit budget)", {}, 1.0, {}},
          {"phase_aware", ParamType::kBool, true, "",
           "multiplex FULL / REUSE phases in one pass", {}, {}, {}},
          {"logit_budgeting", ParamType::kBool, true, "",
           "cap logit rows per pass at max_num_logits", {}, {}, {}},
      };
    } else {
      schema = {{"max_batch_size", ParamType::kInt, int64_t{0}, "requests",
                 "static batch size; 0 = the largest that fits", {}, 0.0, {}}};
    }
    const ParamSchema shared = overheads(
        a == dllm::Algorithm::kDllmServe ? dllm::kDllmServeRequestOverhead : Duration{0});
    schema.insert(schema.end(), shared.begin(), shared.end());
    sim::BatchingPolicyEntry entry;
    entry.description = dllm::algorithm_description(a);
    entry.schema = std::move(schema);
    entry.serves = sim::ServedModel::kDiffusion;
    sim::batching_policies().add(name, std::move(entry));
  }
}

void apply_dllm_policy_params(const ParamValues& v, dllm::DllmConfig& c) {
  if (c.algorithm == dllm::Algorithm::kDllmServe) {
    c.max_num_batched_tokens = v.get_int("max_num_batched_tokens");
    c.max_num_seqs = v.get_int("max_num_seqs");
    c.max_num_logits = v.get_int("max_num_logits");
    c.phase_aware = v.get_bool("phase_aware");
    c.logit_budgeting = v.get_bool("logit_budgeting");
  } else {
    c.max_batch_size = v.get_int("max_batch_size");
  }
  c.step_overhead = v.get_duration("step_overhead");
  c.request_overhead = v.get_duration("request_overhead");
}

}  // namespace servesim::policies
