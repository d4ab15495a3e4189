// Engine tests: analytic checks (unloaded latency equals the cost model, Little's law, the
// roofline bound), determinism, KV mechanics (preemption, rejection), closed loop, stop time,
// and plan validation.
#include "sim/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "models/cost/memory_model.h"
#include "policies/builtin.h"
#include "policies/coloc.h"
#include "policies/routers.h"
#include "core/rng.h"

namespace servesim::sim {
namespace {

struct Catalogs {
  models::GpuCatalog gpus = models::GpuCatalog::load("models/catalog/gpus.json");
  models::ModelCatalog models = models::ModelCatalog::load("models/catalog/models");
};

const Catalogs& catalogs() {
  static const Catalogs c;
  return c;
}

models::Deployment llama8b_h100() {
  return {&catalogs().models.get("llama-3.1-8b"), &catalogs().gpus.get("h100_sxm"), 1,
          models::Dtype::kBf16, models::Dtype::kBf16};
}

// Wraps a cost model and checks every shape it is asked about against the roofline bound.
class CheckedCostModel : public models::IterationCostModel {
 public:
  explicit CheckedCostModel(std::unique_ptr<models::IterationCostModel> inner)
      : inner_(std::move(inner)) {}
  Duration iteration_time(const models::BatchShape& s) const override {
    const Duration t = inner_->iteration_time(s);
    const Duration bound = inner_->peak_bound_time(s);
    EXPECT_GE(t.count(), bound.count());
    total_bound_ns_ += bound.count();
    calls_++;
    return t;
  }
  models::OperatorTimes breakdown(const models::BatchShape& s) const override {
    return inner_->breakdown(s);
  }
  Duration peak_bound_time(const models::BatchShape& s) const override {
    return inner_->peak_bound_time(s);
  }
  std::string describe() const override { return inner_->describe(); }

  mutable int64_t total_bound_ns_ = 0;
  mutable int64_t calls_ = 0;

 private:
  std::unique_ptr<models::IterationCostModel> inner_;
};

class CollectingListener : public RecordListener {
 public:
  void on_request(const RequestRecord& r) override { requests.push_back(r); }
  void on_sample(const SampleRecord& s) override { samples.push_back(s); }
  std::vector<RequestRecord> requests;
  std::vector<SampleRecord> samples;
};

struct RunSetup {
  int instances = 1;
  int64_t num_blocks = 0;  // 0 = from the memory plan
  policies::ColocParams coloc;
  EngineConfig config;
  std::string router = "round_robin";
  FrontendSpec frontend;
};

std::shared_ptr<CheckedCostModel> make_cost() {
  return std::make_shared<CheckedCostModel>(
      models::make_roofline_cost_model(llama8b_h100(), models::RooflineParams{}));
}

RunResult run_engine(const RunSetup& setup, Workload w, RecordListener* listener,
                     std::shared_ptr<CheckedCostModel> cost = nullptr) {
  if (!cost) cost = make_cost();
  const models::MemoryPlan plan = models::plan_memory(llama8b_h100(), models::MemoryParams{});
  std::vector<InstanceSetup> inst;
  for (int i = 0; i < setup.instances; ++i) {
    InstanceSetup s;
    s.gpu = "h100_sxm";
    s.cost_model = cost;
    s.num_blocks = setup.num_blocks > 0 ? setup.num_blocks : plan.num_blocks;
    s.block_size = 16;
    s.batching = policies::make_coloc(setup.coloc);
    s.frontend = setup.frontend;
    inst.push_back(std::move(s));
  }
  policies::register_builtin_policies();
  auto router = routing_policies().get(setup.router).make({});
  Engine engine(setup.config, std::move(inst), std::move(router), std::move(w), listener);
  return engine.run();
}

Workload fixed_workload(int n, double rate_per_s, int64_t prompt, int64_t output, uint64_t seed) {
  Workload w;
  RngStream rng(seed, "test-arrivals");
  double t = 0;
  for (int i = 0; i < n; ++i) {
    RequestSpec r;
    r.id = i;
    r.arrival = kTimeZero + duration_from_seconds(t);
    r.prompt_tokens = prompt;
    r.output_tokens = output;
    w.requests.push_back(r);
    t += rate_per_s > 0 ? rng.exponential(rate_per_s) : 0;
  }
  return w;
}

TEST(EngineAnalytic, UnloadedRequestTtftEqualsPrefillIterationAndTbtEqualsDecodeIterations) {
  const int64_t prompt = 1000, output = 20;
  CollectingListener rec;
  RunSetup setup;
  setup.config.record_token_times = true;
  auto cost = make_cost();
  run_engine(setup, fixed_workload(1, 0, prompt, output, 1), &rec, cost);
  ASSERT_EQ(rec.requests.size(), 1u);
  const RequestRecord& r = rec.requests[0];

  models::BatchShape shape;
  shape.segments = {{prompt, prompt, 1}};
  const int64_t prefill_ns = cost->iteration_time(shape).count();
  EXPECT_EQ(r.ttft_ns(), prefill_ns);
  EXPECT_EQ(r.queueing_ns(), 0);
  ASSERT_EQ(r.token_times_ns.size(), static_cast<size_t>(output));
  int64_t expected_total = prefill_ns;
  for (int64_t k = 1; k < output; ++k) {
    shape.segments = {{1, prompt + k, 1}};
    const int64_t decode_ns = cost->iteration_time(shape).count();
    EXPECT_EQ(r.token_times_ns[k] - r.token_times_ns[k - 1], decode_ns) << "token " << k;
    expected_total += decode_ns;
  }
  EXPECT_EQ(r.e2e_ns(), expected_total);
  // TPOT is the mean decode iteration time.
  EXPECT_NEAR(r.tpot_ns(), static_cast<double>(expected_total - prefill_ns) / (output - 1), 1.0);
}

TEST(EngineAnalytic, LongPromptIsChunkedByTheTokenBudget) {
  CollectingListener rec;
  RunSetup setup;
  setup.coloc.max_num_batched_tokens = 512;
  auto cost = make_cost();
  run_engine(setup, fixed_workload(1, 0, 1300, 2, 1), &rec, cost);
  ASSERT_EQ(rec.requests.size(), 1u);
  models::BatchShape a, b, c;
  a.segments = {{512, 512, 0}};
  b.segments = {{512, 1024, 0}};
  c.segments = {{276, 1300, 1}};
  EXPECT_EQ(rec.requests[0].ttft_ns(),
            (cost->iteration_time(a) + cost->iteration_time(b) + cost->iteration_time(c)).count());
}

// A request decoding while another's prompt is computed in the same iterations is charged the
// prompt tokens' share of those iterations; one alone is charged nothing and never moves.
TEST(EngineAnalytic, PromptTokensInADecodeIterationAreChargedToItsDecodesByTokenShare) {
  CollectingListener rec;
  RunSetup setup;
  setup.config.record_token_times = true;
  auto cost = make_cost();
  Workload w = fixed_workload(2, 0, 100, 5, 1);
  w.requests[1].arrival = kTimeZero + Duration{1};  // just after the first: prefilled next
  w.requests[1].prompt_tokens = 300;
  w.requests[1].output_tokens = 1;
  run_engine(setup, std::move(w), &rec, cost);
  ASSERT_EQ(rec.requests.size(), 2u);
  const RequestRecord& first = rec.requests[0].request_id == 0 ? rec.requests[0] : rec.requests[1];
  const RequestRecord& second = rec.requests[0].request_id == 0 ? rec.requests[1] : rec.requests[0];
  // Iteration 1: the first prompt alone. Iteration 2: the first request's decode step (context
  // 101) with the whole second prompt: 300 of 301 tokens are prompt tokens.
  models::BatchShape mixed;
  mixed.segments = {{1, 101, 1}, {300, 300, 1}};
  const int64_t mixed_ns = cost->iteration_time(mixed).count();
  EXPECT_EQ(second.first_token_ns, first.token_times_ns[1]);
  EXPECT_EQ(first.interference_ns, static_cast<int64_t>(static_cast<double>(mixed_ns) * 300 / 301));
  EXPECT_EQ(second.interference_ns, 0);  // its only iteration computed its own prompt
  for (const RequestRecord* r : {&first, &second}) {
    EXPECT_EQ(r->prefill_instance_id, 0);
    EXPECT_EQ(r->kv_arrived_ns, -1);
  }
}

TEST(EngineAnalytic, LittlesLawHoldsOnTheRequestTable) {
  CollectingListener rec;
  RunSetup setup;
  setup.instances = 2;
  setup.router = "least_outstanding";
  Workload w = fixed_workload(3000, 20.0, 800, 150, 7);
  const RunResult res = run_engine(setup, std::move(w), &rec);
  ASSERT_EQ(rec.requests.size(), 3000u);
  // L (time-average in system, integrated by the engine) = lambda * W (from the records).
  double sum_e2e_s = 0;
  for (const auto& r : rec.requests) sum_e2e_s += r.e2e_ns() * 1e-9;
  const double span_s = to_seconds(res.end_time);
  const double lambda = 3000 / span_s;
  const double w_mean = sum_e2e_s / 3000;
  EXPECT_NEAR(res.mean_in_system, lambda * w_mean, 0.02 * lambda * w_mean);
  // And the sampled in-system series agrees on average (coarser, sampled every second).
  double sampled = 0;
  int n = 0;
  for (const auto& s : rec.samples) {
    if (s.entity == "cluster" && s.metric == "in_system") {
      sampled += s.value;
      n++;
    }
  }
  ASSERT_GT(n, 50);
  EXPECT_NEAR(sampled / n, res.mean_in_system, 0.1 * res.mean_in_system);
}

TEST(EngineAnalytic, ThroughputNeverExceedsTheRooflineBound) {
  RunSetup setup;
  setup.coloc.max_num_seqs = 512;
  auto cost = make_cost();
  // Saturating load: everything arrives at once.
  const RunResult res = run_engine(setup, fixed_workload(2000, 0, 512, 128, 3), nullptr, cost);
  EXPECT_EQ(res.requests_finished, 2000);
  EXPECT_GT(cost->calls_, 100);
  // The instance was busy at least as long as the same batches take at peak FLOP/s and bandwidth.
  EXPECT_GE(res.instances[0].busy_ns, cost->total_bound_ns_);
  const double tokens = static_cast<double>(res.instances[0].prefill_tokens + res.instances[0].decode_tokens);
  EXPECT_EQ(tokens, 2000.0 * 512 + 2000.0 * 127);
  EXPECT_LE(tokens / (res.instances[0].busy_ns * 1e-9), tokens / (cost->total_bound_ns_ * 1e-9));
}

// Every iteration is in its instance's batch-size counts, also across the engine's flushes of its
// iteration log (more iterations than one log holds), and the counted token bins bound the tokens
// the instance computed.
TEST(EngineAnalytic, IterationCountsHoldEveryIterationAndBoundTheTokens) {
  RunSetup setup;
  setup.instances = 4;
  const RunResult res = run_engine(setup, fixed_workload(4000, 40, 256, 200, 5), nullptr);
  EXPECT_EQ(res.requests_finished, 4000);
  int64_t iterations = 0;
  for (const InstanceStats& st : res.instances) {
    int64_t requests_counted = 0, tokens_counted = 0, tokens_low = 0, tokens_high = 0;
    for (const LogHistogram::Bin& b : st.batch_requests.bins()) requests_counted += b.count;
    for (const LogHistogram::Bin& b : st.batch_tokens.bins()) {
      tokens_counted += b.count;
      tokens_low += b.count * b.lower;
      tokens_high += b.count * (b.upper - 1);
    }
    EXPECT_EQ(requests_counted, st.iterations);
    EXPECT_EQ(tokens_counted, st.iterations);
    EXPECT_LE(tokens_low, st.prefill_tokens + st.decode_tokens);
    EXPECT_GE(tokens_high, st.prefill_tokens + st.decode_tokens);
    iterations += st.iterations;
  }
  EXPECT_GT(iterations, 16384);  // Engine::Impl::kIterationLogSize: the log was flushed when full
}

TEST(EngineDeterminism, SameInputsGiveIdenticalFingerprintAndRecords) {
  auto once = [] {
    CollectingListener rec;
    RunSetup setup;
    setup.instances = 3;
    setup.router = "least_kv_load";
    const RunResult r = run_engine(setup, fixed_workload(500, 30.0, 700, 90, 11), &rec);
    return std::make_pair(r, rec.requests);
  };
  const auto [a, ra] = once();
  const auto [b, rb] = once();
  EXPECT_EQ(a.event_fingerprint, b.event_fingerprint);
  EXPECT_EQ(a.events, b.events);
  ASSERT_EQ(ra.size(), rb.size());
  for (size_t i = 0; i < ra.size(); ++i) {
    EXPECT_EQ(ra[i].request_id, rb[i].request_id);
    EXPECT_EQ(ra[i].done_ns, rb[i].done_ns);
    EXPECT_EQ(ra[i].first_token_ns, rb[i].first_token_ns);
  }
  // A different workload seed changes the fingerprint.
  RunSetup setup;
  setup.instances = 3;
  const RunResult c = run_engine(setup, fixed_workload(500, 30.0, 700, 90, 12), nullptr);
  EXPECT_NE(a.event_fingerprint, c.event_fingerprint);
}

TEST(EngineKv, PreemptionByRecomputeLetsEveryRequestFinish) {
  for (auto mode : {policies::ColocParams::Mode::kUnifiedV1, policies::ColocParams::Mode::kStallFree,
                    policies::ColocParams::Mode::kPrefillPriority}) {
    CollectingListener rec;
    RunSetup setup;
    setup.coloc.mode = mode;
    setup.coloc.kv_allocation = mode == policies::ColocParams::Mode::kStallFree
                                    ? policies::ColocParams::KvAllocation::kWholePrompt
                                    : policies::ColocParams::KvAllocation::kPerChunk;
    setup.num_blocks = 200;  // 3200 tokens of KV: room for ~5 of these requests at full length
    const RunResult res = run_engine(setup, fixed_workload(40, 0, 300, 300, 5), &rec);
    EXPECT_EQ(res.requests_finished, 40);
    EXPECT_EQ(res.requests_rejected, 0);
    int64_t preemptions = 0, recompute_ns = 0;
    for (const auto& r : rec.requests) {
      preemptions += r.preemptions;
      recompute_ns += r.recompute_ns;
      EXPECT_EQ(r.output_tokens, 300);
    }
    EXPECT_GT(preemptions, 0) << "mode " << static_cast<int>(mode);
    // Chunked modes recompute the preempted requests beside other requests' decode steps;
    // prefill-priority runs prompt work in iterations of its own.
    if (mode == policies::ColocParams::Mode::kPrefillPriority) {
      EXPECT_EQ(recompute_ns, 0);
    } else {
      EXPECT_GT(recompute_ns, 0) << "mode " << static_cast<int>(mode);
    }
    EXPECT_EQ(res.instances[0].preemptions, preemptions);
    EXPECT_LE(res.instances[0].peak_used_blocks, 200);
  }
}

// A preempted request goes back to the waiting queue with its record of sampled tokens: its first
// token stays the first, and its largest gap is the largest between its tokens' times, the wait
// for its recompute included.
TEST(EngineKv, APreemptedRequestKeepsItsTokenRecord) {
  CollectingListener rec;
  RunSetup setup;
  setup.config.record_token_times = true;
  setup.num_blocks = 200;
  run_engine(setup, fixed_workload(40, 0, 300, 300, 5), &rec);
  int64_t preempted = 0;
  for (const RequestRecord& r : rec.requests) {
    ASSERT_EQ(r.token_times_ns.size(), 300u);
    EXPECT_EQ(r.first_token_ns, r.token_times_ns.front());
    EXPECT_EQ(r.done_ns, r.token_times_ns.back());
    int64_t largest_gap = 0;
    for (size_t k = 1; k < r.token_times_ns.size(); ++k) {
      largest_gap = std::max(largest_gap, r.token_times_ns[k] - r.token_times_ns[k - 1]);
    }
    EXPECT_EQ(r.max_tbt_ns, largest_gap) << "request " << r.request_id;
    if (r.preemptions > 0 && r.first_token_ns < r.done_ns) preempted++;
  }
  EXPECT_GT(preempted, 0);
}

TEST(EngineKv, RequestLargerThanTheKvPoolIsRejected) {
  RunSetup setup;
  setup.num_blocks = 10;  // 160 tokens
  Workload w = fixed_workload(3, 1.0, 100, 20, 1);
  w.requests[1].prompt_tokens = 150;  // 170 tokens with its output
  const RunResult res = run_engine(setup, std::move(w), nullptr);
  EXPECT_EQ(res.requests_rejected, 1);
  EXPECT_EQ(res.requests_finished, 2);
}

TEST(EngineClosedLoop, NeverMoreThanClientsInFlight) {
  CollectingListener rec;
  RunSetup setup;
  setup.config.closed_loop.clients = 4;
  setup.config.closed_loop.think_time = std::chrono::milliseconds(50);
  setup.config.sample_interval = std::chrono::milliseconds(10);
  const RunResult res = run_engine(setup, fixed_workload(40, 1.0, 200, 30, 1), &rec);
  EXPECT_EQ(res.requests_finished, 40);
  for (const auto& s : rec.samples) {
    if (s.metric == "in_system") {
      EXPECT_LE(s.value, 4.0);
    }
  }
  // Each request after the first four arrives exactly think_time after one finished.
  std::vector<int64_t> done;
  for (const auto& r : rec.requests) done.push_back(r.done_ns);
  std::sort(done.begin(), done.end());
  for (const auto& r : rec.requests) {
    if (r.request_id < 4) {
      EXPECT_EQ(r.arrival_ns, 0);
    } else {
      EXPECT_TRUE(std::binary_search(done.begin(), done.end(), r.arrival_ns - 50'000'000))
          << "request " << r.request_id;
    }
  }
}

// ---- exact fast-forward of steady decode (EngineConfig::fast_forward) ----

TEST(EngineFastForward, AnUnloadedRequestsDecodeStepsAreAllFastForwardedWithTheSameEvents) {
  const int64_t output = 50;
  auto run = [&](bool fast_forward) {
    CollectingListener rec;
    RunSetup setup;
    setup.config.fast_forward = fast_forward;
    setup.config.record_token_times = true;
    auto cost = make_cost();
    const RunResult r = run_engine(setup, fixed_workload(1, 0, 700, output, 1), &rec, cost);
    return std::make_tuple(r, rec.requests.at(0), cost->calls_);
  };
  const auto [on, on_record, on_calls] = run(true);
  const auto [off, off_record, off_calls] = run(false);
  // The prefill is planned by the policy; the output - 1 decode steps by the engine, the last of
  // them (it finishes the request) as an ordinary batch with its completion event.
  EXPECT_EQ(on.instances[0].iterations, output);
  EXPECT_EQ(on.fast_forwarded_iterations, output - 1);
  EXPECT_EQ(off.fast_forwarded_iterations, 0);
  EXPECT_EQ(on.events, off.events);
  EXPECT_EQ(on.event_fingerprint, off.event_fingerprint);
  EXPECT_EQ(on_calls, off_calls);  // one cost-model call per iteration either way
  EXPECT_EQ(on_record.token_times_ns, off_record.token_times_ns);
  EXPECT_EQ(on_record.max_tbt_ns, off_record.max_tbt_ns);
  EXPECT_EQ(on.tbt_ns.count(), output - 1);
  EXPECT_EQ(on.tbt_ns.mean(), off.tbt_ns.mean());
}

// Several instances, arrivals during decode, KV pressure that preempts (in each coloc mode), a
// TBT objective, warm-up requests and closed-loop clients with jitter: fast-forward changes no
// record, no statistic and no event.
TEST(EngineFastForward, SameRecordsStatisticsAndEventsAsSteppingEveryIteration) {
  using Mode = policies::ColocParams::Mode;
  struct Variant {
    Mode mode;
    int64_t num_blocks;  // 0: from the memory plan; 60 (960 tokens): preemptions
    bool closed_loop;
    int instances;  // with 2, each one's iterations stop at the other's events
  };
  for (const Variant v : {Variant{Mode::kUnifiedV1, 0, false, 1}, Variant{Mode::kUnifiedV1, 0, false, 2},
                          Variant{Mode::kUnifiedV1, 60, false, 1},
                          Variant{Mode::kStallFree, 60, false, 1},
                          Variant{Mode::kPrefillPriority, 60, false, 1},
                          Variant{Mode::kUnifiedV1, 0, true, 2}}) {
    SCOPED_TRACE(::testing::Message() << "mode " << static_cast<int>(v.mode) << " blocks "
                                      << v.num_blocks << " closed loop " << v.closed_loop
                                      << " instances " << v.instances);
    auto run = [&](bool fast_forward, Duration tbt_objective) {
      CollectingListener rec;
      RunSetup setup;
      setup.instances = v.instances;
      setup.router = "least_outstanding";
      setup.num_blocks = v.num_blocks;
      setup.coloc.mode = v.mode;
      setup.coloc.kv_allocation = v.mode == Mode::kStallFree
                                      ? policies::ColocParams::KvAllocation::kWholePrompt
                                      : policies::ColocParams::KvAllocation::kPerChunk;
      setup.config.fast_forward = fast_forward;
      setup.config.slo.tbt_p99 = tbt_objective;
      setup.config.sample_interval = std::chrono::milliseconds(250);
      if (v.closed_loop) {
        setup.config.closed_loop.clients = 6;
        setup.config.closed_loop.warmup_requests = 6;
        setup.config.closed_loop.drain_after_warmup = true;
        setup.config.closed_loop.think_time_jitter = std::chrono::milliseconds(20);
        setup.config.closed_loop.seed = 3;
      }
      auto cost = make_cost();
      const RunResult r = run_engine(setup, fixed_workload(60, 10.0, 300, 120, 7), &rec, cost);
      return std::make_tuple(r, rec, cost->calls_);
    };
    // A TBT objective at the median gap: some gaps of fast-forwarded iterations violate it.
    const Duration median_gap(std::get<0>(run(false, std::chrono::hours(1))).tbt_ns.quantile(0.5));
    const auto [on, on_rec, on_calls] = run(true, median_gap);
    const auto [off, off_rec, off_calls] = run(false, median_gap);
    EXPECT_GT(on.fast_forwarded_iterations, 0);
    EXPECT_EQ(on.event_fingerprint, off.event_fingerprint);
    EXPECT_EQ(on.events, off.events);
    EXPECT_EQ(on_calls, off_calls);
    EXPECT_EQ(on.end_time, off.end_time);
    EXPECT_EQ(on.mean_in_system, off.mean_in_system);
    EXPECT_EQ(on.tbt_ns.count(), off.tbt_ns.count());
    EXPECT_EQ(on.tbt_ns.mean(), off.tbt_ns.mean());
    EXPECT_EQ(on.tbt_ns.quantile(0.99), off.tbt_ns.quantile(0.99));
    auto stats_fields = [](const InstanceStats& x) {
      return std::make_tuple(x.iterations, x.busy_ns, x.decode_tokens, x.prefill_tokens,
                             x.preemptions, x.peak_used_blocks);
    };
    for (size_t i = 0; i < on.instances.size(); ++i) {
      EXPECT_EQ(stats_fields(on.instances[i]), stats_fields(off.instances[i])) << "instance " << i;
    }
    if (v.num_blocks > 0) {
      EXPECT_GT(on.instances[0].preemptions, 0);
    }
    ASSERT_EQ(on_rec.requests.size(), off_rec.requests.size());
    int64_t violations = 0;
    for (const RequestRecord& r : on_rec.requests) violations += r.tbt_slo_violations;
    EXPECT_GT(violations, 0);
    auto record_fields = [](const RequestRecord& r) {
      return std::make_tuple(r.request_id, r.arrival_ns, r.first_scheduled_ns, r.first_token_ns,
                             r.done_ns, r.max_tbt_ns, r.tbt_slo_violations, r.preemptions,
                             r.interference_ns, r.recompute_ns);
    };
    for (size_t k = 0; k < on_rec.requests.size(); ++k) {
      EXPECT_EQ(record_fields(on_rec.requests[k]), record_fields(off_rec.requests[k]));
    }
    ASSERT_EQ(on_rec.samples.size(), off_rec.samples.size());
    for (size_t k = 0; k < on_rec.samples.size(); ++k) {
      EXPECT_EQ(on_rec.samples[k].value, off_rec.samples[k].value) << on_rec.samples[k].metric;
    }
  }
}

// ---- benchmark client: warm-up, drain, ramp-up, lock step; front end ----

const RequestRecord& by_id(const std::vector<RequestRecord>& records, RequestId id) {
  return *std::find_if(records.begin(), records.end(),
                       [id](const RequestRecord& r) { return r.request_id == id; });
}

int64_t last_warmup_done(const std::vector<RequestRecord>& records) {
  int64_t t = 0;
  for (const auto& r : records) {
    if (r.warmup) t = std::max(t, r.done_ns);
  }
  return t;
}

TEST(EngineBenchmark, WarmupRequestsAreFlaggedAndTheMeasuredPhaseStartsWhenTheyDrain) {
  CollectingListener rec;
  RunSetup setup;
  setup.config.closed_loop.clients = 4;
  setup.config.closed_loop.warmup_requests = 6;
  setup.config.closed_loop.drain_after_warmup = true;
  const RunResult res = run_engine(setup, fixed_workload(20, 0, 300, 40, 1), &rec);
  EXPECT_EQ(res.requests_finished, 20);
  for (const auto& r : rec.requests) EXPECT_EQ(r.warmup, r.request_id < 6) << r.request_id;
  // Warm-up: 4 clients, then 2 more requests as the first two finish; nothing else until the six
  // are done. Then the 4 clients start together.
  const int64_t drained = last_warmup_done(rec.requests);
  for (RequestId id = 6; id < 10; ++id) EXPECT_EQ(by_id(rec.requests, id).arrival_ns, drained);
  for (RequestId id = 10; id < 20; ++id) EXPECT_GT(by_id(rec.requests, id).arrival_ns, drained);
}

TEST(EngineBenchmark, WithoutDrainTheClientsGoOnIntoTheMeasuredRequests) {
  CollectingListener rec;
  RunSetup setup;
  setup.config.closed_loop.clients = 4;
  setup.config.closed_loop.warmup_requests = 4;
  setup.config.closed_loop.drain_after_warmup = false;
  run_engine(setup, fixed_workload(12, 0, 300, 40, 1), &rec);
  // Lock step: the 4 warm-up requests finish together and the clients send 4..7 at once.
  const int64_t drained = last_warmup_done(rec.requests);
  for (RequestId id = 4; id < 8; ++id) EXPECT_EQ(by_id(rec.requests, id).arrival_ns, drained);
  EXPECT_EQ(std::count_if(rec.requests.begin(), rec.requests.end(),
                          [](const RequestRecord& r) { return r.warmup; }),
            4);
}

TEST(EngineBenchmark, RampUpStartsClientKAtKTimesRampOverClients) {
  CollectingListener rec;
  RunSetup setup;
  setup.config.closed_loop.clients = 4;
  setup.config.closed_loop.ramp_up = std::chrono::milliseconds(400);
  run_engine(setup, fixed_workload(8, 0, 300, 40, 1), &rec);
  for (RequestId id = 0; id < 4; ++id) {
    EXPECT_EQ(by_id(rec.requests, id).arrival_ns, id * 100'000'000) << id;
  }
}

TEST(EngineBenchmark, ClientsStartedTogetherStayInLockStepAndRampedOnesDoNot) {
  // Fixed lengths and a budget that holds every prompt at once: clients that start together
  // share every prefill pass forever, so each round's TTFT is the whole round's prefill.
  auto mean_ttft_ms = [](const std::vector<RequestRecord>& records) {
    double sum = 0;
    int n = 0;
    for (const auto& r : records) {
      if (r.warmup) continue;
      sum += r.ttft_ns() * 1e-6;
      ++n;
    }
    return sum / n;
  };
  auto run = [&](Duration ramp) {
    CollectingListener rec;
    RunSetup setup;
    setup.coloc.max_num_batched_tokens = 8192;
    setup.config.closed_loop.clients = 8;
    setup.config.closed_loop.ramp_up = ramp;
    setup.config.closed_loop.warmup_requests = 8;
    run_engine(setup, fixed_workload(80, 0, 1000, 100, 1), &rec);
    return rec.requests;
  };
  const auto lock_step = run(Duration{0});
  const auto staggered = run(std::chrono::seconds(2));
  // In lock step every measured request waits for the 8 000-token pass; staggered ones mostly
  // prefill alone.
  std::set<int64_t> lock_step_ttfts;
  for (const auto& r : lock_step) {
    if (!r.warmup) lock_step_ttfts.insert(r.ttft_ns());
  }
  EXPECT_EQ(lock_step_ttfts.size(), 1u);
  EXPECT_GT(mean_ttft_ms(lock_step), 3 * mean_ttft_ms(staggered));
}

TEST(EngineBenchmark, ThinkTimeJitterDelaysEachSendWithinItsBoundAndIsSeeded) {
  auto run = [](uint64_t seed) {
    CollectingListener rec;
    RunSetup setup;
    setup.config.closed_loop.clients = 4;
    setup.config.closed_loop.think_time = std::chrono::milliseconds(5);
    setup.config.closed_loop.think_time_jitter = std::chrono::milliseconds(20);
    setup.config.closed_loop.seed = seed;
    run_engine(setup, fixed_workload(40, 0, 200, 30, 1), &rec);
    return rec.requests;
  };
  const auto a = run(7);
  std::vector<int64_t> done;
  for (const auto& r : a) done.push_back(r.done_ns);
  std::sort(done.begin(), done.end());
  int delayed = 0;
  for (const auto& r : a) {
    if (r.request_id < 4) {
      // The first sends are jittered too: clients started together do not arrive together.
      EXPECT_LT(r.arrival_ns, 20'000'000);
      continue;
    }
    // Sent 5 ms + [0, 20 ms) after some request finished.
    const auto after = std::upper_bound(done.begin(), done.end(), r.arrival_ns - 5'000'000);
    ASSERT_NE(after, done.begin()) << r.request_id;
    const int64_t gap = r.arrival_ns - *std::prev(after);
    EXPECT_GE(gap, 5'000'000) << r.request_id;
    EXPECT_LT(gap, 25'000'000) << r.request_id;
    if (gap > 5'000'000) ++delayed;
  }
  EXPECT_GT(delayed, 30);
  // Seeded: the same seed gives the same arrivals, another seed others.
  const auto b = run(7);
  const auto c = run(8);
  int same = 0, differ = 0;
  for (const auto& r : a) {
    same += by_id(b, r.request_id).arrival_ns == r.arrival_ns;
    differ += by_id(c, r.request_id).arrival_ns != r.arrival_ns;
  }
  EXPECT_EQ(same, 40);
  EXPECT_GT(differ, 30);
}

TEST(EngineBenchmark, ThinkTimeJitterBreaksTheLockStepOfClientsStartedTogether) {
  // The setting of ClientsStartedTogetherStayInLockStepAndRampedOnesDoNot: without jitter every
  // measured request waits for the round's 8 000-token pass; clients whose sends drift apart by
  // more than a pass mostly prefill alone, and their TTFTs differ from request to request.
  struct Result {
    double mean_ms = 0;
    size_t distinct = 0;
  };
  auto run = [&](Duration jitter) {
    CollectingListener rec;
    RunSetup setup;
    setup.coloc.max_num_batched_tokens = 8192;
    setup.config.closed_loop.clients = 8;
    setup.config.closed_loop.warmup_requests = 8;
    setup.config.closed_loop.drain_after_warmup = true;
    setup.config.closed_loop.think_time_jitter = jitter;
    setup.config.closed_loop.seed = 3;
    run_engine(setup, fixed_workload(160, 0, 1000, 100, 1), &rec);
    Result out;
    std::set<int64_t> ttfts;
    int n = 0;
    for (const auto& r : rec.requests) {
      if (r.warmup) continue;
      out.mean_ms += r.ttft_ns() * 1e-6;
      ttfts.insert(r.ttft_ns());
      ++n;
    }
    out.mean_ms /= n;
    out.distinct = ttfts.size();
    return out;
  };
  const Result lock_step = run(Duration{0});
  const Result drifting = run(std::chrono::milliseconds(200));
  EXPECT_EQ(lock_step.distinct, 1u);
  EXPECT_GT(drifting.distinct, 50u);
  EXPECT_LT(drifting.mean_ms, 0.5 * lock_step.mean_ms);
}

TEST(EngineBenchmark, OpenLoopArrivalsAfterTheWarmupWaitForItsDrain) {
  CollectingListener rec;
  RunSetup setup;
  setup.config.closed_loop.warmup_requests = 5;
  setup.config.closed_loop.drain_after_warmup = true;
  Workload w = fixed_workload(15, 0, 300, 40, 1);
  for (size_t i = 0; i < w.requests.size(); ++i) {
    w.requests[i].arrival = kTimeZero + std::chrono::milliseconds(10 * static_cast<int64_t>(i));
  }
  run_engine(setup, std::move(w), &rec);
  const int64_t drained = last_warmup_done(rec.requests);
  EXPECT_EQ(by_id(rec.requests, 5).arrival_ns, drained);
  // The measured arrivals keep their spacing.
  for (RequestId id = 6; id < 15; ++id) {
    EXPECT_EQ(by_id(rec.requests, id).arrival_ns - by_id(rec.requests, id - 1).arrival_ns,
              10'000'000);
  }
}

TEST(EngineFrontend, SimultaneousArrivalsReachTheSchedulerOneServiceTimeApart) {
  CollectingListener rec;
  RunSetup setup;
  setup.coloc.max_num_batched_tokens = 256;  // one prompt per iteration
  setup.frontend.per_request = std::chrono::milliseconds(2);
  setup.frontend.per_prompt_token_ns = 10'000;  // 10 us per token: 1 ms for 100 tokens
  run_engine(setup, fixed_workload(3, 0, 100, 5, 1), &rec);
  // Each request is visible 3 ms after the previous one: the first at 3 ms, scheduled at once.
  EXPECT_EQ(by_id(rec.requests, 0).first_scheduled_ns, 3'000'000);
  EXPECT_GE(by_id(rec.requests, 1).first_scheduled_ns, 6'000'000);
  EXPECT_GE(by_id(rec.requests, 2).first_scheduled_ns, 9'000'000);
  // TTFT counts the front end.
  EXPECT_GT(by_id(rec.requests, 0).ttft_ns(), 3'000'000);
}

TEST(EngineStop, MaxSimTimeStopsWithUnfinishedRequests) {
  RunSetup setup;
  setup.config.max_sim_time = std::chrono::seconds(2);
  const RunResult res = run_engine(setup, fixed_workload(100, 10.0, 500, 500, 1), nullptr);
  EXPECT_EQ(to_ns(res.end_time), 2'000'000'000);
  EXPECT_GT(res.requests_unfinished, 0);
  EXPECT_EQ(res.requests_finished + res.requests_unfinished + res.requests_rejected, 100);
  EXPECT_DOUBLE_EQ(res.gpu_seconds, 2.0);
}

// A policy that schedules a request that is not running.
class BrokenPolicy : public BatchingPolicy {
 public:
  bool next_batch(const InstanceView&, BatchPlan& plan) override {
    plan.scheduled.push_back({12345, 1, 0});
    return true;
  }
};

TEST(EngineValidation, InvalidPlanIsReportedAsAPolicyBug) {
  std::vector<InstanceSetup> inst(1);
  inst[0].cost_model = make_cost();
  inst[0].num_blocks = 100;
  inst[0].batching = std::make_unique<BrokenPolicy>();
  Engine engine(EngineConfig{}, std::move(inst), policies::make_round_robin(),
                fixed_workload(1, 0, 10, 2, 1), nullptr);
  try {
    engine.run();
    FAIL() << "expected std::logic_error";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("schedules request 12345 that is not running"),
              std::string::npos)
        << e.what();
  }
}

// A policy that prefills every prompt in one step and then, once the engine offers a decode run,
// breaks the decode-run contract (BatchPlan::decode_run) as `how` says.
class BrokenDecodeRunPolicy : public BatchingPolicy {
 public:
  enum class How { kUnoffered, kPreemptsTheRun, kListsTheRunAgain };
  explicit BrokenDecodeRunPolicy(How how) : how_(how) {}
  bool plans_decode_runs() const override { return how_ != How::kUnoffered; }
  bool next_batch(const InstanceView& view, BatchPlan& plan) override {
    for (const SeqView& w : *view.waiting) {
      plan.admit.push_back(w.id);
      plan.scheduled.push_back({w.id, w.remaining_tokens(), 0});
    }
    const bool decoding = !view.running->empty() && (*view.running)[0].is_decode();
    if (!decoding) return !plan.empty();
    const RequestId first = (*view.running)[0].id;
    switch (how_) {
      case How::kUnoffered:
        plan.decode_run = true;
        break;
      case How::kPreemptsTheRun:
        plan.decode_run = true;
        plan.preempt.push_back(first);
        break;
      case How::kListsTheRunAgain:
        plan.decode_run = true;
        plan.scheduled.push_back({first, 1, 0});
        break;
    }
    return true;
  }

 private:
  How how_;
};

TEST(EngineValidation, DecodeRunsBreakingTheirContractAreReportedAsPolicyBugs) {
  using How = BrokenDecodeRunPolicy::How;
  for (const auto& [how, message] : std::vector<std::pair<How, std::string>>{
           {How::kUnoffered, "schedules a decode run the view did not offer"},
           {How::kPreemptsTheRun, "preempts request 0 of the decode run it schedules"},
           {How::kListsTheRunAgain, "schedules request 0 of its decode run again"}}) {
    std::vector<InstanceSetup> inst(1);
    inst[0].cost_model = make_cost();
    inst[0].num_blocks = 100;
    inst[0].batching = std::make_unique<BrokenDecodeRunPolicy>(how);
    Engine engine(EngineConfig{}, std::move(inst), policies::make_round_robin(),
                  fixed_workload(1, 0, 10, 4, 1), nullptr);
    try {
      engine.run();
      ADD_FAILURE() << "expected std::logic_error: " << message;
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace servesim::sim

namespace servesim::sim {
namespace {

// A 1 prefill + 1 decode deployment of Llama-3.1-8B on H100s joined by a 100 GB/s link.
RunResult run_disaggregated(Workload w, RecordListener* listener, KvTransferMode mode,
                            std::shared_ptr<CheckedCostModel> cost, int64_t decode_blocks = 0) {
  const models::MemoryPlan plan = models::plan_memory(llama8b_h100(), models::MemoryParams{});
  std::vector<InstanceSetup> inst;
  for (InstanceRole role : {InstanceRole::kPrefill, InstanceRole::kDecode}) {
    InstanceSetup s;
    s.gpu = "h100_sxm";
    s.role = role;
    s.cost_model = cost;
    s.num_blocks = role == InstanceRole::kDecode && decode_blocks > 0 ? decode_blocks : plan.num_blocks;
    s.block_size = 16;
    s.kv_bytes_per_token = llama8b_h100().model->kv_bytes_per_token(models::Dtype::kBf16);
    policies::ColocParams p;
    p.mode = policies::ColocParams::Mode::kPrefillPriority;
    s.batching = policies::make_coloc(p);
    inst.push_back(std::move(s));
  }
  EngineConfig config;
  config.record_token_times = true;
  config.transfer.mode = mode;
  config.transfer.num_layers = 32;
  config.transfer.link = [](int32_t, int32_t) { return LinkSpec{100e9, std::chrono::microseconds(10)}; };
  Engine engine(config, std::move(inst), policies::make_round_robin(), std::move(w), listener,
                policies::make_least_outstanding());
  return engine.run();
}

TEST(EngineDisaggregation, TransferGapAppearsBetweenFirstAndSecondToken) {
  const int64_t prompt = 2000, output = 4;
  CollectingListener rec;
  auto cost = make_cost();
  const RunResult res = run_disaggregated(fixed_workload(1, 0, prompt, output, 1), &rec,
                                          KvTransferMode::kAfterPrefill, cost);
  ASSERT_EQ(rec.requests.size(), 1u);
  const RequestRecord& r = rec.requests[0];
  models::BatchShape shape;
  shape.segments = {{prompt, prompt, 1}};
  EXPECT_EQ(r.ttft_ns(), cost->iteration_time(shape).count());
  // KV of 2000 tokens x 128 KiB over 100 GB/s plus 10 us, then one decode iteration on D.
  const int64_t wire_ns = 10'000 + duration_from_seconds(2000.0 * 131072 / 100e9).count();
  shape.segments = {{1, prompt + 1, 1}};
  EXPECT_EQ(r.token_times_ns[1] - r.token_times_ns[0], wire_ns + cost->iteration_time(shape).count());
  EXPECT_EQ(r.instance_id, 1);
  EXPECT_EQ(r.prefill_instance_id, 0);
  EXPECT_EQ(r.kv_arrived_ns, r.token_times_ns[0] + wire_ns);  // KV lands on D after the wire
  EXPECT_EQ(r.interference_ns, 0);
  EXPECT_EQ(res.instances[0].kv_transfers_out, 1);
  EXPECT_EQ(res.instances[0].kv_bytes_out, 2000 * 131072);
  EXPECT_EQ(res.instances[0].decode_tokens, 0);  // the prefill instance never decodes
}

TEST(EngineDisaggregation, LayerwiseOverlapHidesMostOfTheTransfer) {
  CollectingListener a, b;
  run_disaggregated(fixed_workload(1, 0, 2000, 3, 1), &a, KvTransferMode::kAfterPrefill, make_cost());
  run_disaggregated(fixed_workload(1, 0, 2000, 3, 1), &b, KvTransferMode::kLayerwiseOverlap,
                    make_cost());
  const int64_t gap_after = a.requests[0].token_times_ns[1] - a.requests[0].token_times_ns[0];
  const int64_t gap_overlap = b.requests[0].token_times_ns[1] - b.requests[0].token_times_ns[0];
  EXPECT_LT(gap_overlap, gap_after);
  EXPECT_EQ(a.requests[0].ttft_ns(), b.requests[0].ttft_ns());
}

TEST(EngineDisaggregation, BackPressureHoldsKvOnThePrefillSideUntilTheDecodeSideHasRoom) {
  // The decode pool holds ~2 of these requests at a time; all 20 still finish, in order.
  CollectingListener rec;
  const RunResult res = run_disaggregated(fixed_workload(20, 0, 900, 100, 1), &rec,
                                          KvTransferMode::kAfterPrefill, make_cost(),
                                          /*decode_blocks=*/130);
  EXPECT_EQ(res.requests_finished, 20);
  EXPECT_GT(res.instances[0].transfer_wait_ns, 0);
  EXPECT_LE(res.instances[1].peak_used_blocks, 130);
  for (const auto& r : rec.requests) EXPECT_EQ(r.instance_id, 1);
}

}  // namespace
}  // namespace servesim::sim

#include "models/cost/profiled_cost_model.h"
#include "profiles/profile_tables.h"

namespace servesim::sim {
namespace {

// Records every batch the engine prices and what it was charged.
class RecordingCostModel : public models::IterationCostModel {
 public:
  explicit RecordingCostModel(std::unique_ptr<models::IterationCostModel> inner)
      : inner_(std::move(inner)) {}
  Duration iteration_time(const models::BatchShape& s) const override {
    const Duration t = inner_->iteration_time(s);
    seen.emplace_back(s, t);
    return t;
  }
  models::OperatorTimes breakdown(const models::BatchShape& s) const override {
    return inner_->breakdown(s);
  }
  Duration peak_bound_time(const models::BatchShape& s) const override {
    return inner_->peak_bound_time(s);
  }
  std::string describe() const override { return inner_->describe(); }
  mutable std::vector<std::pair<models::BatchShape, Duration>> seen;

 private:
  std::unique_ptr<models::IterationCostModel> inner_;
};

TEST(EngineCostModel, SameBatchCostsTheSameThroughTheEngineAndCalledDirectly) {
  const auto tables = profiles::load_gpu_profiles("profiles", "h100_sxm");
  ASSERT_FALSE(tables.empty());
  auto recording = std::make_shared<RecordingCostModel>(
      models::make_profiled_cost_model(llama8b_h100(), tables, {}));
  std::vector<InstanceSetup> inst(1);
  inst[0].cost_model = recording;
  inst[0].num_blocks = 20000;
  inst[0].batching = policies::make_coloc({});
  CollectingListener rec;
  Engine engine(EngineConfig{}, std::move(inst), policies::make_round_robin(),
                fixed_workload(200, 40.0, 700, 60, 9), &rec);
  const RunResult res = engine.run();
  ASSERT_EQ(res.requests_finished, 200);
  ASSERT_EQ(static_cast<int64_t>(recording->seen.size()), res.instances[0].iterations);
  // A fresh model, called directly with the recorded shapes, charges exactly the same.
  const auto direct = models::make_profiled_cost_model(llama8b_h100(), tables, {});
  int64_t busy = 0;
  for (const auto& [shape, charged] : recording->seen) {
    EXPECT_EQ(direct->iteration_time(shape).count(), charged.count());
    busy += charged.count();
  }
  EXPECT_EQ(busy, res.instances[0].busy_ns);
}

}  // namespace
}  // namespace servesim::sim

namespace servesim::sim {
namespace {

TEST(EngineKv, PromptLongerThanWhatTheBatchingCanScheduleIsRejected) {
  std::vector<InstanceSetup> inst(1);
  inst[0].cost_model = make_cost();
  inst[0].num_blocks = 10000;
  inst[0].max_prompt_tokens = 1024;
  policies::ColocParams p;
  p.max_num_batched_tokens = 1024;
  p.enable_chunked_prefill = false;
  inst[0].batching = policies::make_coloc(p);
  Workload w = fixed_workload(3, 1.0, 1000, 10, 1);
  w.requests[1].prompt_tokens = 3000;
  Engine engine(EngineConfig{}, std::move(inst), policies::make_round_robin(), std::move(w), nullptr);
  const RunResult res = engine.run();
  EXPECT_EQ(res.requests_rejected, 1);
  EXPECT_EQ(res.requests_finished, 2);
}

}  // namespace
}  // namespace servesim::sim

namespace servesim::sim {
namespace {

// Sends every request to instance 0 and splits it at a fixed token onto instance 1.
class FixedSplitRouter : public RoutingPolicy {
 public:
  explicit FixedSplitRouter(int64_t split) : split_(split) {}
  int32_t route(const ClusterView&, const RequestSpec&) override { return 0; }
  SplitDecision split(const ClusterView&, const RequestSpec&, int32_t) override {
    return {split_, 1};
  }

 private:
  int64_t split_;
};

RunResult run_split(int64_t split, KvTransferMode mode, Workload w, RecordListener* listener,
                    int64_t budget = 4096) {
  std::vector<InstanceSetup> inst(2);
  for (auto& s : inst) {
    s.cost_model = make_cost();
    s.num_blocks = 20000;
    s.kv_bytes_per_token = 131072;
    policies::ColocParams p;
    p.max_num_batched_tokens = budget;
    s.batching = policies::make_coloc(p);
  }
  EngineConfig config;
  config.record_token_times = true;
  config.transfer.mode = mode;
  config.transfer.link = [](int32_t, int32_t) { return LinkSpec{50e9, std::chrono::microseconds(5)}; };
  Engine engine(config, std::move(inst), std::make_unique<FixedSplitRouter>(split), std::move(w),
                listener);
  return engine.run();
}

TEST(EngineSplit, SplitInsideThePromptOffloadsPartOfThePrefill) {
  CollectingListener rec;
  const RunResult res = run_split(600, KvTransferMode::kAfterPrefill,
                                  fixed_workload(1, 0, 1000, 5, 1), &rec);
  ASSERT_EQ(res.requests_finished, 1);
  EXPECT_EQ(res.instances[0].prefill_tokens, 600);  // alpha: the first 600 prompt tokens
  EXPECT_EQ(res.instances[1].prefill_tokens, 400);  // beta: the rest, over alpha's KV
  EXPECT_EQ(res.instances[0].decode_tokens, 0);
  EXPECT_EQ(res.instances[1].decode_tokens, 4);
  EXPECT_EQ(rec.requests[0].instance_id, 1);
  EXPECT_EQ(res.instances[0].kv_bytes_out, 600 * 131072);
}

TEST(EngineSplit, SplitAfterThePromptMergesEarlyDecodeWithPrefill) {
  CollectingListener rec;
  const RunResult res = run_split(1003, KvTransferMode::kAfterPrefill,
                                  fixed_workload(1, 0, 1000, 10, 1), &rec);
  ASSERT_EQ(res.requests_finished, 1);
  // Alpha computes tokens 1..1003: the prompt (sampling token 1) and 3 decodes (tokens 2-4).
  EXPECT_EQ(res.instances[0].prefill_tokens, 1000);
  EXPECT_EQ(res.instances[0].decode_tokens, 3);
  EXPECT_EQ(res.instances[1].decode_tokens, 6);  // tokens 5-10
  // The hand-off gap (transfer of 1003 tokens of KV) is one TBT sample between tokens 4 and 5.
  const auto& t = rec.requests[0].token_times_ns;
  ASSERT_EQ(t.size(), 10u);
  const int64_t wire = 5'000 + duration_from_seconds(1003.0 * 131072 / 50e9).count();
  EXPECT_GT(t[4] - t[3], wire);
}

TEST(EngineSplit, SplitAtThePromptIsClassicDisaggregation) {
  CollectingListener rec;
  const RunResult res = run_split(1000, KvTransferMode::kAfterPrefill,
                                  fixed_workload(1, 0, 1000, 5, 1), &rec);
  EXPECT_EQ(res.instances[0].prefill_tokens, 1000);
  EXPECT_EQ(res.instances[0].decode_tokens, 0);
  EXPECT_EQ(res.instances[1].decode_tokens, 4);
  // The first token comes from alpha's prefill; the second waits for the whole prompt's KV.
  models::BatchShape shape;
  shape.segments = {{1000, 1000, 1}};
  EXPECT_EQ(rec.requests[0].ttft_ns(), make_cost()->iteration_time(shape).count());
  const auto& t = rec.requests[0].token_times_ns;
  const int64_t wire = 5'000 + duration_from_seconds(1000.0 * 131072 / 50e9).count();
  shape.segments = {{1, 1001, 1}};
  EXPECT_EQ(t[1] - t[0], wire + make_cost()->iteration_time(shape).count());
}

TEST(EngineSplit, ChunkedTransferExposesLessThanTransferAfterThePrefill) {
  // A 6000-token prompt prefilled in 1024-token chunks on alpha, then decoded on beta.
  CollectingListener after, chunked;
  run_split(6000, KvTransferMode::kAfterPrefill, fixed_workload(1, 0, 6000, 3, 1), &after, 1024);
  run_split(6000, KvTransferMode::kChunked, fixed_workload(1, 0, 6000, 3, 1), &chunked, 1024);
  const auto gap = [](const CollectingListener& l) {
    return l.requests[0].token_times_ns[1] - l.requests[0].token_times_ns[0];
  };
  EXPECT_EQ(after.requests[0].ttft_ns(), chunked.requests[0].ttft_ns());
  // After the prefill the whole 6000-token KV crosses the link; chunked, only the last chunk.
  const int64_t whole = duration_from_seconds(6000.0 * 131072 / 50e9).count();
  const int64_t last_chunk = duration_from_seconds((6000.0 - 5 * 1024) * 131072 / 50e9).count();
  EXPECT_LT(gap(chunked), gap(after));
  EXPECT_GE(gap(after) - gap(chunked), whole - last_chunk - 1000);
}

}  // namespace
}  // namespace servesim::sim
