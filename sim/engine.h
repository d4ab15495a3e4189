// The simulation engine: one object per run, no global state.
//
// Contract:
// - Deterministic: the same (setup, workload, seed) gives the same event sequence, the same
//   records and the same event fingerprint, in any process, any number of times.
// - Iteration-level execution: an instance runs one batch at a time; the batch duration comes from
//   its cost model; at the end of a batch the engine advances every request in it, records each
//   sampled token's time (TBT is exact), frees the KV of finished requests and asks the instance's
//   batching policy for the next batch.
// - Mechanism lives here (KV block accounting, preemption by recompute, admission); policies only
//   choose (sim/policy_api.h). A plan that does not fit is a policy bug (std::logic_error).
// - The engine knows nothing about files: finished requests and samples go to a RecordListener.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/cost/cost_model.h"
#include "models/cost/speculative.h"
#include "core/histogram.h"
#include "core/request_spec.h"
#include "sim/frontend.h"
#include "sim/prefix_cache.h"
#include "sim/policy_api.h"
#include "sim/records.h"

namespace servesim::sim {


// A point-to-point path for KV transfers between two instances. Transfers on one link are
// serialized FIFO; the TP ranks of the sender each send their shard in parallel, which
// `bytes_per_s` already includes.
struct LinkSpec {
  double bytes_per_s = 0;
  Duration latency{};
};


// One serving instance (a TP group of GPUs running one model replica).
struct InstanceSetup {
  std::string gpu;  // catalog key, for reports
  int tp = 1;       // GPUs in the instance
  InstanceRole role = InstanceRole::kUnified;
  int64_t kv_bytes_per_token = 0;  // whole-instance KV bytes per token (for transfers)
  std::shared_ptr<const models::IterationCostModel> cost_model;
  int64_t num_blocks = 0;  // KV blocks (from the memory plan)
  // Longest prompt the instance's batching can ever schedule (0 = no limit; e.g. the token budget
  // when chunked prefill is off). Longer requests are rejected at routing, like too-long prompts
  // in a serving engine, instead of waiting forever.
  int64_t max_prompt_tokens = 0;
  int64_t block_size = 16;
  // The KV a request holds is what its batching policy reserves (ScheduledSeq::reserve_tokens),
  // not one entry per computed token: a diffusion LLM rewrites its cache in place at every
  // denoising step. Routing then rejects only prompts over max_prompt_tokens.
  bool kv_reserved_only = false;
  // Automatic prefix caching (sim/prefix_cache.h): an admitted request reuses the cached KV
  // blocks of its prompt's longest cached prefix (keys from RequestSpec::prefix_hash_ids) instead
  // of computing them; freed blocks stay cached until their memory is needed (LRU).
  bool prefix_caching = false;
  PrefixCacheKind prefix_cache_kind = PrefixCacheKind::kBlockHash;
  // Tiered KV storage under the prefix cache (used only with prefix_caching): a cached block the
  // GPU evicts moves to this instance's CPU DRAM tier, and a block DRAM drops moves to the
  // cluster's remote store (EngineConfig::remote_kv_bytes), each an LRU of whole blocks, inclusive
  // (a block loaded back keeps its lower copy). Offloads overlap compute and cost no time. An
  // admitted request whose prefix continues, past its GPU hit, in the lower tiers loads those
  // blocks when the transfer (latency + bytes / bytes_per_s per tier, the tiers one after the
  // other) is shorter than the cost model's time to prefill their tokens in an iteration of
  // their own; the iteration that admits it then lasts that much longer (a synchronous load
  // before the forward pass, as vLLM's KV connector loads LMCache hits; the whole batch waits).
  int64_t dram_kv_bytes = 0;  // 0: no DRAM tier
  LinkSpec dram_link;         // host <-> GPU (PCIe, every TP rank its shard)
  LinkSpec remote_link;       // remote store <-> GPU (RDMA NICs, every TP rank its shard)
  std::unique_ptr<BatchingPolicy> batching;
  FrontendSpec frontend;
  // Speculative decoding (docs/speculative.md): once a request has its first token, each of its
  // decode steps computes the pending token and num_speculative_tokens drafts
  // (SeqView::draft_tokens), and keeps 1 + a tokens, a = acceptance.accepted_drafts(u) for a draw
  // u fixed by (speculative_seed, request id, tokens generated so far); the rejected drafts' KV is
  // dropped. The cost model prices the drafter (models::make_speculative_cost_model). Such an
  // instance steps every iteration: no decode runs, no fast-forward. Unset: one token per step.
  std::optional<models::SpeculativeDecoding> speculative;
  uint64_t speculative_seed = 0;
};

// How requests reach the cluster, as a benchmark client drives a server (aiperf, `vllm bench
// serve`, genai-perf).
// - Open loop (clients == 0): every request arrives at its workload arrival time.
// - Closed loop (clients > 0): `clients` concurrent users; each sends its next request
//   `think_time` after its previous one finished (or was rejected). Request lengths come from the
//   workload in order; its arrival times are ignored. In each phase (below) client k (0-based)
//   sends its first request at the phase start + k x ramp_up / clients.
// - Warm-up: the first `warmup_requests` requests of the workload are sent first and are flagged
//   RequestRecord::warmup (summaries exclude them). With drain_after_warmup the measured phase
//   starts only once every warm-up request finished, as aiperf waits for its warm-up responses:
//   closed-loop clients start again together (with the ramp), and open-loop arrivals after the
//   warm-up are shifted so that the first measured request arrives at the drain (never earlier
//   than its own arrival time).
struct ClosedLoopSpec {
  int64_t clients = 0;
  Duration think_time{};
  Duration ramp_up{};
  int64_t warmup_requests = 0;
  bool drain_after_warmup = false;
  // Each closed-loop send is delayed by a further uniform [0, think_time_jitter) draw (RngStream
  // (seed, "client-jitter")): the client, HTTP and tokenizer latency that varies from request to
  // request, so that clients drift apart as real ones do. Zero: no draw.
  Duration think_time_jitter{};
  uint64_t seed = 0;
};

// KV transfer plumbing of a disaggregated cluster. `link(src, dst)` gives the path between two
// instances (indices into the engine's instance list); `num_layers` sizes layer-wise overlap.
struct TransferConfig {
  KvTransferMode mode = KvTransferMode::kAfterPrefill;
  std::function<LinkSpec(int32_t src, int32_t dst)> link;
  int num_layers = 1;
};

// An elastic cluster (sim/policy_api.h, ClusterController). `make_instance(role, index)` builds
// the instance that will sit at `index`, like the initial instances of that role (cost model,
// memory plan, batching); it may throw std::invalid_argument for a role the layout lacks.
struct ElasticConfig {
  std::shared_ptr<ClusterController> controller;  // null: a static cluster
  Duration control_interval{10'000'000'000};
  Duration startup_prefill{};
  Duration startup_decode{};
  std::function<InstanceSetup(InstanceRole role, int32_t index)> make_instance;
};

struct EngineConfig {
  SloSpec slo;
  TransferConfig transfer;  // used only when some instance has role kPrefill
  Duration sample_interval{1'000'000'000};  // time-series period; 0 disables sampling
  bool record_token_times = false;          // keep every token's time in RequestRecord
  std::optional<Duration> max_sim_time;     // stop here even if requests are unfinished
  int64_t remote_kv_bytes = 0;  // the cluster's remote KV store (InstanceSetup); 0: none
  ClosedLoopSpec closed_loop;
  // Called from the event loop about every 2^16 events with the share of requests finished.
  std::function<void(double)> progress;
  // Decode instances also take arrivals (prefilled locally, no KV transfer); the arrival router
  // sees them as accepting.
  bool arrivals_to_decode = false;
  ElasticConfig elastic;
  // The model's context: a request whose prompt + output exceeds it is rejected on arrival, as a
  // serving engine refuses it (counted in RunResult::requests_rejected_context). 0 = no limit.
  int64_t max_context_tokens = 0;
  // Exact fast-forward of steady decode: while an instance's batch is every running request's
  // decode step (nothing waits, no request finishes, KV suffices, its policy agrees through
  // BatchingPolicy::plans_steady_decode) and no other event comes before its end, the engine runs
  // the iteration itself instead of through events and the policy. Every result is the same as
  // stepping (records, statistics, cost-model lookups, and the event fingerprint and count: the
  // iterations' events are counted and hashed as if they had been queued). Also decode runs: a
  // policy that plans them (BatchingPolicy::plans_decode_runs) is shown the leading decode steps
  // of the running list as one run (InstanceView::decode_run) and may schedule them as one
  // (BatchPlan::decode_run), with the same results. false: step always, and list every request.
  bool fast_forward = true;
};


// Iterations counted by value in LogHistogram's buckets (exact below LogHistogram::kSub, within
// 0.8 % above), grown on demand: recording an iteration is one increment.
struct IterationCounts {
  void add(int64_t value) {
    const auto b = static_cast<size_t>(LogHistogram::bucket_of(value));
    if (b >= by_bucket_.size()) by_bucket_.resize(b + 1, 0);
    ++by_bucket_[b];
  }
  // The non-empty buckets in increasing order.
  std::vector<LogHistogram::Bin> bins() const {
    std::vector<LogHistogram::Bin> out;
    for (size_t b = 0; b < by_bucket_.size(); ++b) {
      if (by_bucket_[b] == 0) continue;
      const int i = static_cast<int>(b);
      out.push_back({LogHistogram::bucket_lower(i), LogHistogram::bucket_upper(i), by_bucket_[b]});
    }
    return out;
  }

 private:
  std::vector<int64_t> by_bucket_;  // index LogHistogram::bucket_of(value)
};

struct InstanceStats {
  int64_t iterations = 0;
  int64_t kv_transfers_out = 0;     // requests handed to a decode instance
  int64_t kv_bytes_out = 0;
  int64_t transfer_wait_ns = 0;     // prefilled requests waiting for room on a decode instance
  int64_t busy_ns = 0;
  int64_t prefill_tokens = 0;  // tokens computed in segments with more than one query token
  int64_t decode_tokens = 0;
  int64_t preemptions = 0;
  int64_t peak_used_blocks = 0;
  int64_t prefix_hit_tokens = 0;  // prompt tokens taken from the prefix cache, not computed
  // Prompt tokens loaded from the lower KV tiers instead of computed (InstanceSetup::dram, the
  // remote store), and the time their loads added to iterations.
  int64_t dram_hit_tokens = 0;
  int64_t remote_hit_tokens = 0;
  int64_t kv_load_ns = 0;
  int64_t offloaded_blocks = 0;  // cached blocks evicted from the GPU into a lower tier
  // Per iteration: the requests in its batch and the tokens it computed (prompt and decode).
  IterationCounts batch_requests;
  IterationCounts batch_tokens;
  InstanceRole role = InstanceRole::kUnified;
  int tp = 1;
  int64_t started_ns = 0;   // GPUs held from here (0 for the initial instances)
  int64_t active_ns = 0;    // takes work from here (started_ns + its start-up time)
  int64_t draining_ns = -1; // takes no new work from here; -1 when never drained
  int64_t retired_ns = -1;  // GPUs released here; -1 while alive at the end of the run
};

struct RunResult {
  uint64_t event_fingerprint = 0;  // hash over (time, phase, kind, target) of every event
  int64_t events = 0;
  // Iterations the engine planned itself in steady decode (EngineConfig::fast_forward), of all the
  // instances' InstanceStats::iterations.
  int64_t fast_forwarded_iterations = 0;
  // Iterations whose plan scheduled a decode run (EngineConfig::fast_forward), fast-forwarded
  // ones included.
  int64_t decode_run_iterations = 0;
  int64_t requests_total = 0;
  int64_t requests_finished = 0;
  int64_t requests_rejected = 0;    // could never run: KV pool too small or prompt too long
  int64_t requests_rejected_context = 0;  // of those, beyond EngineConfig::max_context_tokens
  int64_t requests_unfinished = 0;  // still in flight when max_sim_time stopped the run
  SimTime end_time{};               // last completion (or the stop time)
  int num_gpus = 0;                 // most GPUs held at once (a static cluster: all of them)
  double gpu_seconds = 0;           // sum over instances of tp x time alive (start .. retirement
                                    // or end_time)
  double mean_in_system = 0;        // time-average of requests arrived and not finished
  LogHistogram tbt_ns;              // every gap between consecutive tokens of a request
  std::vector<InstanceStats> instances;
};

class Engine {
 public:
  // REQUIRES: at least one instance; every instance has a cost model and a batching policy.
  // `decode_router` picks the decode instance of each KV hand-off (its view's `accepting` flags
  // mark the decode instances); required when some instance has role kPrefill, else unused.
  Engine(EngineConfig config, std::vector<InstanceSetup> instances,
         std::unique_ptr<RoutingPolicy> router, Workload workload, RecordListener* listener,
         std::unique_ptr<RoutingPolicy> decode_router = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Runs to completion (or max_sim_time). Call once.
  RunResult run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace servesim::sim
