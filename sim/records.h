// Record types the simulator emits, and the listener interface that receives them.
//
// Contract: records are plain values; the simulator knows nothing about files or SQLite.
// reports/ implements RecordListener (SQLite, in-memory) and computes summaries from records.
// All times are integer nanoseconds since the start of the run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/histogram.h"
#include "core/request_spec.h"
#include "core/time.h"

namespace servesim::sim {

// Latency objectives a run is judged against. An unset objective is not checked.
struct SloSpec {
  std::optional<Duration> ttft;      // time to first token
  std::optional<Duration> tpot;      // mean time per output token after the first
  std::optional<Duration> tbt_p99;   // per request: at most 1 % of its token gaps may exceed it
  double attainment_target = 0.9;    // share of requests that must meet all set objectives
};

// One finished request.
struct RequestRecord {
  RequestId request_id = 0;
  int32_t instance_id = -1;        // instance that produced its last token
  int64_t arrival_ns = 0;
  int64_t first_scheduled_ns = -1;  // first time any of its tokens was in a batch
  int64_t first_token_ns = -1;
  int64_t done_ns = -1;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  int32_t preemptions = 0;
  int64_t max_tbt_ns = 0;            // largest gap between consecutive output tokens
  int64_t tbt_slo_violations = 0;    // gaps above SloSpec::tbt_p99 (0 when unset)
  std::vector<int64_t> token_times_ns;  // every token's time; filled only when asked for
  bool warmup = false;  // a benchmark warm-up request (ClosedLoopSpec): excluded from summaries
  // Prompt tokens its first admission loaded from CPU DRAM (InstanceSetup::dram_kv_bytes) after
  // its cached_tokens, instead of computing them (32 bits, as remote_hit_tokens: they sit in
  // padding and leave the record's size unchanged).
  int32_t dram_hit_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens reused from its instance's prefix cache
  // A request split across two instances (DynaServe): the tokens (prompt + output positions) its
  // first instance computed before the hand-off; 0 when it was not split.
  int64_t split_tokens = 0;
  // Instance that computed its first token (its prefill); differs from instance_id when its KV
  // moved (disaggregation, split requests). Prefilled on a decode instance: that instance.
  int32_t prefill_instance_id = -1;
  int32_t remote_hit_tokens = 0;  // as dram_hit_tokens, from the remote KV store
  // When its KV reached the instance that continued it (a disaggregated hand-off or a split
  // request's second part); -1 when its KV never moved.
  int64_t kv_arrived_ns = -1;
  // Of the iterations in which it decoded one token, the time the prompt tokens computed in the
  // same iterations took, apportioned by tokens (iteration time x prompt tokens / all tokens):
  // chunked or local prefill slowing its decode. Tokens recomputed after a preemption count in
  // recompute_ns instead.
  int64_t interference_ns = 0;
  int64_t recompute_ns = 0;

  int64_t ttft_ns() const { return first_token_ns - arrival_ns; }
  int64_t e2e_ns() const { return done_ns - arrival_ns; }
  int64_t queueing_ns() const { return first_scheduled_ns - arrival_ns; }
  // (E2E - TTFT) / (output - 1); 0 for single-token requests.
  double tpot_ns() const {
    return output_tokens > 1 ? static_cast<double>(done_ns - first_token_ns) / (output_tokens - 1)
                             : 0.0;
  }
};

// One point of a time series (queue depth, KV utilisation, busy fraction...).
struct SampleRecord {
  int64_t t_ns = 0;
  std::string entity;  // "instance/0", "cluster"
  std::string metric;  // "kv_utilization", "waiting", "running", "busy_fraction"
  double value = 0;
};

// A request refused on arrival: it can never run, so it has no RequestRecord.
struct RejectedRecord {
  RequestId request_id = 0;
  int64_t arrival_ns = 0;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  // "context": prompt + output exceed the model's context (EngineConfig::max_context_tokens);
  // "capacity": beyond an instance's KV pool, or a prompt over the token budget without chunking.
  std::string reason;
};

// Receives records as the simulation produces them.
class RecordListener {
 public:
  virtual ~RecordListener() = default;
  virtual void on_request(const RequestRecord& record) = 0;
  virtual void on_sample(const SampleRecord& sample) = 0;
  virtual void on_rejected(const RejectedRecord& /*record*/) {}
  // A request's first output token, at `first_token_ns` (calls come in simulated-time order with
  // every other call).
  virtual void on_first_token(RequestId /*id*/, int64_t /*first_token_ns*/) {}
  // Asked after every on_request() and on_first_token(): true ends the run there, as EngineConfig::max_sim_time does
  // (the requests still in flight count as unfinished). For a run whose verdict is already
  // certain, e.g. a capacity probe that can no longer meet its SLO.
  virtual bool stop_requested() const { return false; }
};

}  // namespace servesim::sim
