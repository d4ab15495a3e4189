// Policy `dynaserve`: micro-request splitting with two-level scheduling (policies.md §3, seed 001).
//
// - Instances are unified and grouped in pairs (α-instance, β-instance); arrivals go to pairs
//   round-robin. Each request of P prompt tokens and predicted output D̂ (true length plus
//   Gaussian error, plus a margin) is split at token s of N = P + D̂: the α-instance computes
//   tokens 1..s, streams their KV chunk by chunk, and the β-instance continues from s+1. s = P is
//   classic disaggregation, s < P offloads part of the prefill, s > P merges early decode into
//   the prefill instance, s = 0 or N keeps the whole request on one instance.
// - Global scheduler: a bounded binary search over the split ratio that balances the two
//   instances' predicted drain times; each prediction replays the instance's queue as virtual
//   batches (ExecutionPredictor) with the instance's latency table. A searched split at the
//   prompt's end (s = P) moves to P - 1, so the first token comes from the β-instance and the
//   hand-off gap is part of TTFT rather than of a TBT gap (`handoff_in_prefill`).
// - Local scheduler: SLO-aware batch composition (every decode, then the prefill tokens the latency
//   table allows within the TBT target), the table refined from every measured iteration.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "policies/latency_table.h"
#include "sim/policy_api.h"

namespace servesim::policies {

// Predicted output length of a request: max(1, round(D + sigma * z)) + margin, z ~ N(0, 1) drawn
// from a stream keyed by (seed, request id), so a request's prediction does not depend on the
// order requests are asked about.
class OutputLengthPredictor {
 public:
  OutputLengthPredictor(double sigma, int64_t margin, uint64_t seed);
  int64_t predict(const RequestSpec& request) const;

 private:
  double sigma_;
  int64_t margin_;
  uint64_t seed_;
};

// One unit of work in an instance's virtual queue. Token accounting follows the engine: a prefill
// pass that completes the prompt samples a token; every later token costs one decode pass.
struct VirtualWork {
  int64_t prefill_tokens = 0;  // prompt tokens still to compute here
  int64_t decode_passes = 0;   // decode iterations still to run here after the prefill
  int64_t context = 0;         // tokens already in KV (decode context grows from here)
  SimTime available{};         // when the work can start (its KV has arrived)
};

struct PredictorLimits {
  int64_t max_num_batched_tokens = 8192;
  int64_t max_num_seqs = 256;
  int64_t kv_capacity_tokens = 0;  // 0 = unlimited
  Duration iteration_target{};     // the local scheduler's latency target
  // Batch tokens (prefill + decodes) from which a pass counts fully toward the instance's load;
  // a smaller pass counts in proportion (a lone decode mostly waits on weight reads, and
  // later arrivals ride along for free). 0: every pass counts fully (load = busy time).
  int64_t fill_tokens = 0;
};

// Replays a queue of VirtualWork as the local scheduler would batch it: per pass, every admitted
// decode advances one token and prefill chunks fill the budget the latency table allows, FCFS;
// runs of identical passes are advanced together (one table lookup per run).
class ExecutionPredictor {
 public:
  ExecutionPredictor(LatencyTable* table, PredictorLimits limits);

  // Simulates `work` (admitted FCFS in the given order) from `start`. Returns the time the last
  // item finishes (`start` when empty); `finish`, when non-null, receives each item's finish time.
  SimTime drain(const std::vector<VirtualWork>& work, SimTime start,
                std::vector<SimTime>* finish = nullptr);

  // The same replay for `base` followed by one more item, for several candidate items against one
  // base (the split search): set_base() replays `base` up to the first pass whose composition a
  // last item could change (the first with prefill budget left over, or no prefill at all) and
  // keeps that state; drain_with() goes on from there with `tail` appended (none when null; a
  // tail with no prefill joins every pass at once, so it is replayed with the base from start).
  // drain_with(&tail) returns exactly what drain(base + [tail], start) returns, and sets
  // last_load() the same way. REQUIRES (drain_with): set_base() was called since the last
  // drain(); tail->available <= the base's start.
  void set_base(const std::vector<VirtualWork>& base, SimTime start);
  SimTime drain_with(const VirtualWork* tail);

  int64_t virtual_passes() const { return passes_; }  // virtual runs simulated so far
  // Load of the last drain(): the sum of its passes' times, each weighted by how full it is
  // (PredictorLimits::fill_tokens).
  Duration last_load() const { return Duration{static_cast<int64_t>(state_.load_ns)}; }

 private:
  // An admitted item still prefilling, in admission order.
  struct Prefilling {
    int64_t index, prefill, decode, context, footprint;
  };
  // An admitted item decoding. Every pass advances every decode by the same count, so a decode is
  // kept relative to the decode clock (passes run so far): it ends when the clock reaches
  // `end_clock`, and its context is `context_base` + clock.
  struct Decoding {
    int64_t end_clock, index, context_base, footprint;
    bool operator>(const Decoding& o) const { return end_clock > o.end_clock; }
  };
  struct State {
    SimTime t{};
    size_t next = 0;               // first item of the work not admitted yet
    int64_t kv_used = 0;           // footprints of the admitted items
    int64_t clock = 0;             // decode passes run so far
    int64_t context_base_sum = 0;  // over decoding; their context sum is this + size * clock
    double load_ns = 0;
    std::deque<Prefilling> prefilling;
    std::vector<Decoding> decoding;  // a min-heap on end_clock
    int64_t active() const { return static_cast<int64_t>(prefilling.size() + decoding.size()); }
  };
  // The next pass's composition.
  struct Pass {
    int64_t dnum, mean_ctx, min_decode, prefix, budget, plen;
  };
  enum class Until { kDrained, kTailCouldJoin };

  void reset(SimTime start);
  // Replays state_ over `work` until it is drained or, with kTailCouldJoin, until a pass a last
  // item could change is next (returning false then).
  bool replay(const std::vector<VirtualWork>& work, Until until, std::vector<SimTime>* finish);
  void admit(const std::vector<VirtualWork>& work);
  void start_decode(int64_t index, int64_t decode, int64_t context, int64_t footprint);
  Pass compose();  // fills chunk_
  void run_pass(const std::vector<VirtualWork>& work, const Pass& pass,
                std::vector<SimTime>* finish);

  LatencyTable* table_;
  PredictorLimits limits_;
  State state_;
  State base_state_;                // set_base(): the state a tail item resumes from
  SimTime base_start_{};            // set_base(): the base's start
  std::vector<VirtualWork> work_;   // set_base(): the base (drain_with appends the tail)
  std::vector<int64_t> chunk_;      // this pass's chunk of each prefilling item, from the front
  int64_t passes_ = 0;
};

struct DynaServeParams {
  int64_t num_pairs = 1;
  int tp = 1;
  int64_t max_num_batched_tokens = 8192;
  int64_t max_num_seqs = 256;
  int64_t k_max = 6;                    // binary-search iterations
  double balance_tolerance = 0.2;       // stop when |T_A - T_B| <= this share of the horizon
  int64_t length_margin = 20;           // tokens added to the predicted output
  double length_sigma = 0;              // std-dev of the output-length prediction error, tokens
  double split_ratio = -1;              // >= 0: fixed ratio s = round(ratio * N), no search
  bool balance_drain = false;           // balance drain times instead of fill-weighted loads
  bool handoff_in_prefill = true;       // a searched split at s = P moves to P - 1 (see route())
  int64_t fill_tokens = 4096;           // PredictorLimits::fill_tokens of the load balance
  Duration tbt_slo{100'000'000};        // used when the scenario sets no tbt_p99
  double slo_headroom = 0.9;            // iteration target = headroom * TBT SLO
  LatencyTableParams table;
  int64_t block_size = 16;
  double gpu_memory_utilization = 0.9;

  static DynaServeParams from(const ParamValues& values);
};

const ParamSchema& dynaserve_schema();
sim::ClusterLayout make_dynaserve_layout(const DynaServeParams& params);

// The global scheduler on its own (for tests and benchmarks): routes arrivals to pairs of
// `contexts` (instance 2k is pair k's α-instance, 2k+1 its β-instance) with `tables[i]` as
// instance i's latency table.
std::unique_ptr<sim::RoutingPolicy> make_dynaserve_router(
    const DynaServeParams& params, const std::vector<sim::InstanceContext>& contexts,
    std::vector<std::shared_ptr<LatencyTable>> tables);

void register_dynaserve();

}  // namespace servesim::policies
