#include "dllm/simulator.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <stdexcept>

#include <fmt/format.h>

#include "dllm/scheduler.h"

namespace servesim::dllm {
namespace {

constexpr double kGib = 1024.0 * 1024.0 * 1024.0;

// FNV-1a style mix of one event into the fingerprint.
void mix(uint64_t& h, int64_t t, int64_t id, int64_t kind) {
  for (const int64_t v : {t, id, kind}) {
    h ^= static_cast<uint64_t>(v);
    h *= 0x100000001b3ULL;
  }
}

struct Live {
  size_t index = 0;  // into result.requests
  int64_t prompt = 0;
  int64_t seq_len = 0;
  int64_t step = 0;
  int64_t pages = 0;
};

StepCostKnobs cost_knobs(const DllmConfig& c) {
  StepCostKnobs k;
  const bool chunked = c.algorithm == Algorithm::kDllmServe && c.logit_budgeting;
  k.max_num_logits = chunked ? c.max_num_logits : 0;
  k.softmax_bytes = sampler_footprint(c.algorithm).softmax_bytes;
  k.step_overhead = c.step_overhead;
  k.request_overhead = c.request_overhead;
  return k;
}

class Runner {
 public:
  Runner(const DllmConfig& c, const models::Deployment& d, const models::IterationCostModel& cost,
         const Workload& w)
      : c_(c), d_(d), step_cost_(cost, d, cost_knobs(c)) {
    result_.requests.reserve(w.requests.size());
    for (const RequestSpec& r : w.requests) {
      DllmRequestResult out;
      out.id = r.id;
      out.arrival_ns = to_ns(r.arrival);
      out.prompt_tokens = r.prompt_tokens;
      out.output_tokens = c.denoise.gen_length;
      result_.requests.push_back(out);
    }
  }

  DllmRunResult run() {
    if (c_.algorithm == Algorithm::kDllmServe) {
      run_serve();
    } else {
      run_static();
    }
    for (const auto& r : result_.requests) result_.end_ns = std::max(result_.end_ns, r.done_ns);
    return std::move(result_);
  }

 private:
  int64_t seq_len(size_t i) const {
    return result_.requests[i].prompt_tokens + c_.denoise.gen_length;
  }
  void reject(size_t i) {
    result_.requests[i].rejected = true;
    ++result_.rejected;
    mix(result_.fingerprint, result_.requests[i].arrival_ns, static_cast<int64_t>(i), 3);
  }
  void finish(size_t i, int64_t t) {
    result_.requests[i].done_ns = t;
    mix(result_.fingerprint, t, static_cast<int64_t>(i), 2);
  }
  void count_pass(int64_t t, size_t batch) {
    ++result_.forward_passes;
    result_.batch_slots += static_cast<int64_t>(batch);
    result_.max_batch = std::max<int64_t>(result_.max_batch, static_cast<int64_t>(batch));
    result_.lm_head_chunks += step_cost_.last_chunks();
    mix(result_.fingerprint, t, static_cast<int64_t>(batch), 1);
  }

  void run_serve() {
    const PagePoolPlan pool = plan_page_pool(d_, c_.memory, c_.max_num_batched_tokens,
                                             c_.max_num_logits, c_.logit_budgeting);
    result_.memory = pool.describe();
    if (pool.num_pages < 1) {
      throw OutOfMemoryError(fmt::format(
          "dllm-serve on {} with {}: {} leaves no KV page ({:.2f} GiB short of one "
          "page)",
          d_.gpu->key, d_.model->key, pool.describe(),
          (pool.weight_bytes + pool.runtime_overhead_bytes + pool.activation_bytes +
           pool.logit_reserve_bytes + pool.page_bytes - pool.usable_bytes) /
              kGib));
    }
    SchedulerKnobs knobs{c_.max_num_batched_tokens, c_.max_num_seqs, c_.phase_aware};
    int64_t free_pages = pool.num_pages;
    const int64_t spb = c_.denoise.steps_per_block();
    std::deque<Live> running, waiting;
    std::vector<QueuedRequest> qr, qw;
    std::vector<StepWork> work;
    std::vector<Live> batch;
    size_t next = 0;
    int64_t t = 0;
    const size_t n = result_.requests.size();
    size_t done = 0;
    while (done < n) {
      while (next < n && result_.requests[next].arrival_ns <= t) {
        Live l{next, result_.requests[next].prompt_tokens, seq_len(next), 0,
               pages_for_request(c_.denoise.retention, seq_len(next))};
        if (l.seq_len > c_.max_num_batched_tokens || l.pages > pool.num_pages) {
          reject(next);
          ++done;
        } else {
          waiting.push_back(l);
        }
        ++next;
      }
      qr.clear();
      qw.clear();
      for (const Live& l : running) {
        const int64_t k = l.step % spb;
        qr.push_back({l.seq_len, k <= 1, c_.denoise.block, l.pages});
      }
      for (const Live& l : waiting) qw.push_back({l.seq_len, true, c_.denoise.block, l.pages});
      const ScheduleDecision dec = schedule_pass(qr, qw, free_pages, knobs);
      if (dec.run_prefix + dec.admit_prefix == 0) {
        if (next >= n) {
          if (done < n) {
            throw std::logic_error("dllm-serve: nothing schedulable and no arrival left");
          }
          break;
        }
        t = std::max(t, result_.requests[next].arrival_ns);
        continue;
      }
      batch.clear();
      for (int64_t i = 0; i < dec.run_prefix; ++i) {
        batch.push_back(running.front());
        running.pop_front();
      }
      for (int64_t i = 0; i < dec.admit_prefix; ++i) {
        Live l = waiting.front();
        waiting.pop_front();
        free_pages -= l.pages;
        result_.requests[l.index].first_scheduled_ns = t;
        batch.push_back(l);
      }
      work.clear();
      for (const Live& l : batch) {
        work.push_back(step_work(c_.algorithm, c_.denoise, l.prompt, l.seq_len, l.step));
      }
      t += step_cost_.step_time(work).count();
      count_pass(t, batch.size());
      // Back at the front of running, in batch order; finished ones leave.
      for (auto it = batch.rbegin(); it != batch.rend(); ++it) {
        Live l = *it;
        if (++l.step == c_.denoise.steps) {
          free_pages += l.pages;
          finish(l.index, t);
          ++done;
        } else {
          running.push_front(l);
        }
      }
    }
  }

  // Largest FCFS prefix of `queue` (at most the configured cap) that fits padded.
  size_t fit_batch(const std::deque<size_t>& queue, int64_t* padded) const {
    const int64_t usable = usable_bytes(d_, c_.memory);
    size_t b = 0;
    int64_t lmax = 0;
    while (b < queue.size() &&
           (c_.max_batch_size <= 0 || static_cast<int64_t>(b) < c_.max_batch_size)) {
      const int64_t l = std::max(lmax, seq_len(queue[b]));
      const auto need =
          static_batch_memory(c_.algorithm, d_, c_.memory, c_.denoise,
                              static_cast<int64_t>(b) + 1, l);
      if (need.total() > usable) {
        if (b == 0) {
          throw OutOfMemoryError(fmt::format(
              "{} on {} with {} cannot hold one request of {} tokens: weights "
              "{:.2f} + runtime {:.2f} + KV {:.2f} + activations {:.2f} + logits {:.2f} GiB > "
              "{:.2f} GiB usable",
              algorithm_name(c_.algorithm), d_.gpu->key, d_.model->key, l,
              need.weight_bytes / kGib, need.runtime_overhead_bytes / kGib, need.kv_bytes / kGib,
              need.activation_bytes / kGib, need.logits_bytes / kGib, usable / kGib));
        }
        break;
      }
      lmax = l;
      ++b;
    }
    *padded = lmax;
    return b;
  }

  void run_static() {
    result_.memory = fmt::format("static batches: largest FCFS prefix with weights + KV + "
                                 "activations + logits <= {:.2f} GiB usable",
                                 usable_bytes(d_, c_.memory) / kGib);
    std::deque<size_t> queue;
    std::vector<StepWork> work;
    size_t next = 0;
    int64_t t = 0;
    const size_t n = result_.requests.size();
    while (next < n || !queue.empty()) {
      while (next < n && result_.requests[next].arrival_ns <= t) queue.push_back(next++);
      if (queue.empty()) {
        t = std::max(t, result_.requests[next].arrival_ns);
        continue;
      }
      int64_t lmax = 0;
      const size_t b = fit_batch(queue, &lmax);
      const int64_t prompt = lmax - c_.denoise.gen_length;
      for (size_t i = 0; i < b; ++i) result_.requests[queue[i]].first_scheduled_ns = t;
      for (int64_t s = 0; s < c_.denoise.steps; ++s) {
        const StepWork w = step_work(c_.algorithm, c_.denoise, prompt, lmax, s);
        work.assign(b, w);
        t += step_cost_.step_time(work).count();
        count_pass(t, b);
      }
      for (size_t i = 0; i < b; ++i) {
        finish(queue.front(), t);
        queue.pop_front();
      }
    }
  }

  const DllmConfig& c_;
  const models::Deployment& d_;
  StepCost step_cost_;
  DllmRunResult result_;
};

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

DllmRunResult simulate(const DllmConfig& config, const models::Deployment& deployment,
                       const models::IterationCostModel& cost, const Workload& workload) {
  if (const std::string e = check_denoise_params(config.denoise); !e.empty()) {
    throw std::invalid_argument("dllm: " + e);
  }
  if (config.max_num_batched_tokens < 1 || config.max_num_seqs < 1 || config.max_num_logits < 1) {
    throw std::invalid_argument(
        "dllm: max_num_batched_tokens, max_num_seqs and max_num_logits must be positive");
  }
  return Runner(config, deployment, cost, workload).run();
}

DllmMetrics compute_metrics(const DllmRunResult& r) {
  DllmMetrics m;
  std::vector<double> lat;
  int64_t first_arrival = -1;
  for (const auto& q : r.requests) {
    if (first_arrival < 0 || q.arrival_ns < first_arrival) first_arrival = q.arrival_ns;
    if (q.done_ns < 0) continue;
    lat.push_back(static_cast<double>(q.done_ns - q.arrival_ns) * 1e-9);
    m.generated_tokens += q.output_tokens;
  }
  m.finished = static_cast<int64_t>(lat.size());
  if (lat.empty()) return m;
  m.duration_s = static_cast<double>(r.end_ns - first_arrival) * 1e-9;
  m.throughput_tok_s = m.duration_s > 0 ? static_cast<double>(m.generated_tokens) / m.duration_s : 0;
  double sum = 0;
  for (double x : lat) sum += x;
  m.mean_latency_s = sum / static_cast<double>(lat.size());
  double var = 0;
  for (double x : lat) var += (x - m.mean_latency_s) * (x - m.mean_latency_s);
  m.std_latency_s = std::sqrt(var / static_cast<double>(lat.size()));
  m.p50_latency_s = percentile(lat, 0.5);
  m.p90_latency_s = percentile(lat, 0.9);
  m.p99_latency_s = percentile(lat, 0.99);
  m.min_latency_s = *std::min_element(lat.begin(), lat.end());
  m.max_latency_s = *std::max_element(lat.begin(), lat.end());
  m.mean_batch = r.forward_passes > 0 ? static_cast<double>(r.batch_slots) /
                                            static_cast<double>(r.forward_passes)
                                      : 0;
  return m;
}

std::string memory_shortfall(const DllmConfig& config, const models::Deployment& d,
                             int64_t seq_len) {
  if (config.algorithm == Algorithm::kDllmServe) {
    const PagePoolPlan pool = plan_page_pool(d, config.memory, config.max_num_batched_tokens,
                                             config.max_num_logits, config.logit_budgeting);
    if (pool.num_pages >= pages_for_request(config.denoise.retention, seq_len)) return "";
    return fmt::format("dllm-serve on {} with {}: {} holds no request of {} tokens", d.gpu->key,
                       d.model->key, pool.describe(), seq_len);
  }
  const auto need =
      static_batch_memory(config.algorithm, d, config.memory, config.denoise, 1, seq_len);
  const int64_t usable = usable_bytes(d, config.memory);
  if (need.total() <= usable) return "";
  return fmt::format("{} on {} with {} cannot hold one request of {} tokens: {:.2f} GiB > {:.2f} "
                     "GiB usable",
                     algorithm_name(config.algorithm), d.gpu->key, d.model->key, seq_len,
                     need.total() / kGib, usable / kGib);
}

}  // namespace servesim::dllm
