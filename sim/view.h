// Read-only views the engine hands to policies, and the decisions policies return.
//
// Contract: policies read views and return plans; they never mutate engine state, never schedule
// events and never keep pointers into a view past the call. The engine validates every plan (KV
// capacity, sequence limits, token counts) and applies it; an invalid plan is a policy bug and
// throws std::logic_error.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "core/request_spec.h"
#include "core/time.h"

namespace servesim::sim {

// What an instance does in a disaggregated deployment.
enum class InstanceRole {
  kUnified,  // prefill and decode (colocation)
  kPrefill,  // prefills only; after a request's first token its KV moves to a decode instance
  kDecode,   // receives requests with their KV after prefill and decodes them
};
const char* role_name(InstanceRole role);

// Where an instance is in its life (elastic clusters; a static cluster's instances are all
// kActive for the whole run). GPUs are held, and counted in GPU-seconds, from kStarting until
// kRetired.
enum class Lifecycle {
  kStarting,  // added, loading weights: takes no work until its start-up delay has passed
  kActive,    // takes new work
  kDraining,  // finishes what it holds, takes no new work; retired once empty
  kRetired,   // gone: its GPUs are released
};
const char* lifecycle_name(Lifecycle state);

// How KV moves from a prefill to a decode instance.
enum class KvTransferMode {
  kAfterPrefill,      // the whole KV once the prompt is done (DistServe)
  kLayerwiseOverlap,  // layer i is sent while layer i+1 computes; only what the prefill
                      // iteration could not hide is exposed, at least one layer's share (Splitwise)
  kChunked,           // each iteration's new KV is sent as soon as the iteration ends, so only
                      // what the link still has queued is exposed at the hand-off (DynaServe);
                      // for requests with a known destination (splits), else as kAfterPrefill
};

// Tokens -> KV blocks, rounding up. REQUIRES: block_size > 0, tokens >= 0.
inline int64_t blocks_for_tokens(int64_t tokens, int64_t block_size) {
  return (tokens + block_size - 1) / block_size;
}

// New KV blocks a request holding `held` blocks needs to hold `kv_tokens` tokens:
// max(0, blocks_for_tokens(kv_tokens, block_size) - held). Divides only when the tokens do not
// fit the held blocks (a decode step mostly fits). REQUIRES: block_size > 0, kv_tokens >= 0.
inline int64_t extra_blocks_for(int64_t kv_tokens, int64_t held, int64_t block_size) {
  if (kv_tokens <= held * block_size) return 0;
  const int64_t extra = blocks_for_tokens(kv_tokens, block_size) - held;
  return extra > 0 ? extra : 0;
}

// One request as an instance's batching policy sees it.
struct SeqView {
  RequestId id = 0;
  SimTime arrival{};
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;     // the request finishes after this many sampled tokens
  int64_t generated_tokens = 0;  // tokens sampled so far
  int64_t computed_tokens = 0;   // tokens whose KV is in the cache (0 after a recompute preemption)
  int64_t blocks = 0;            // KV blocks held on this instance
  int32_t preemptions = 0;
  // > 0: this instance computes the request's tokens up to here and then hands it (with its KV)
  // to another instance: a prefill instance stops at the prompt, a split micro-request at its
  // split point. 0: the request stays until it finishes.
  int64_t split_tokens = 0;
  // With split_tokens > 0: the instance that continues the request (-1: chosen at the hand-off,
  // as a prefill instance's decode router does).
  int32_t split_target = -1;

  // Speculative decoding (InstanceSetup::speculative): the drafts its next decode step verifies
  // along with the pending token, computed in the same pass. 0 without speculative decoding and
  // before the first token.
  int64_t draft_tokens = 0;

  // The engine's record of the request's decode so far (policies may read it, never change it):
  // when its last token was sampled (-1 before the first), the largest gap between two tokens, how
  // many gaps exceeded the TBT objective, and what its decode steps were charged of the prompt
  // and recomputed tokens that shared their iterations (RequestRecord::interference_ns,
  // recompute_ns). It lives here, beside the request's running state, so that a decode step
  // touches only its instance's running list.
  int64_t last_token_ns = -1;
  int64_t max_tbt_ns = 0;
  int64_t tbt_violations = 0;
  int64_t interference_ns = 0;
  int64_t recompute_ns = 0;

  // Tokens that must be in KV before the next token can be sampled: the prompt plus every sampled
  // token (the newest sampled token is fed back in the next step), plus the drafts to verify.
  int64_t num_tokens() const { return prompt_tokens + generated_tokens + draft_tokens; }
  // Tokens this instance computes before the next sample or hand-off.
  int64_t target_tokens() const {
    return split_tokens > 0 && split_tokens < num_tokens() ? split_tokens : num_tokens();
  }
  // Tokens still to compute here before the next sample (decode_step_tokens() for a decode step)
  // or hand-off.
  int64_t remaining_tokens() const { return target_tokens() - computed_tokens; }
  // Tokens one decode step computes: the pending token and its drafts.
  int64_t decode_step_tokens() const { return 1 + draft_tokens; }
  // A decode step: the prompt (and any recompute) is done and one token (with its drafts) is
  // pending.
  bool is_decode() const {
    return generated_tokens > 0 && remaining_tokens() == decode_step_tokens();
  }
};

// The running requests at the head of an instance's running list that are each a one-token
// decode step of a request that stays (SeqView::is_decode() with split_tokens == 0): what a policy
// that schedules them all, in order, needs to know of them (BatchPlan::decode_run).
struct DecodeRun {
  int64_t count = 0;        // running[0, count) are such steps; running[count] is not
  int64_t new_blocks = 0;   // KV blocks they need, together, to take their step
  int64_t context_sum = 0;  // sum of their contexts after the step (computed_tokens + 1)
};

// An instance's state as its batching policy sees it.
struct InstanceView {
  SimTime now{};
  int32_t instance_id = 0;
  int64_t block_size = 16;
  int64_t total_blocks = 0;
  int64_t free_blocks = 0;
  const std::vector<SeqView>* running = nullptr;  // admission order
  const std::deque<SeqView>* waiting = nullptr;   // FCFS; preempted requests re-enter at the head
  // Set only for a policy that asks for it (BatchingPolicy::plans_decode_runs()); null otherwise.
  const DecodeRun* decode_run = nullptr;
};

// One request's work in the next batch.
struct ScheduledSeq {
  RequestId id = 0;
  int64_t tokens = 0;  // tokens computed this step, 1 <= tokens <= remaining_tokens()
  // KV tokens the request must hold after this step; 0 means computed + tokens. A policy that
  // reserves the whole prompt at admission (Sarathi) sets it to the prompt length.
  int64_t reserve_tokens = 0;
};

// The next batch of an instance, applied by the engine in this order: preempt, admit, run.
struct BatchPlan {
  // Running requests to preempt by recompute (their KV is freed; each is put at the head of the
  // waiting queue in this order, so the last one listed ends up first).
  std::vector<RequestId> preempt;
  // Waiting requests to move to the running list, in order (appended to running).
  std::vector<RequestId> admit;
  // Work of this step; every id must be running after admission. May be empty only when the plan
  // only preempts.
  std::vector<ScheduledSeq> scheduled;
  // True: every request of the view's decode_run (which must be set and non-empty) also takes its
  // one-token step, first, exactly as if each were listed at the front of `scheduled` in running
  // order; none of them may be preempted, and `scheduled` must not list them. Saves listing (and
  // the engine re-checking) the bulk of a batch one request at a time.
  bool decode_run = false;

  void clear() {
    preempt.clear();
    admit.clear();
    scheduled.clear();
    decode_run = false;
  }
  bool empty() const {
    return preempt.empty() && admit.empty() && scheduled.empty() && !decode_run;
  }
};

// An instance's load as the cluster router sees it.
struct InstanceLoad {
  int32_t instance_id = 0;
  int64_t waiting = 0;      // requests queued, not yet admitted
  int64_t running = 0;      // requests admitted
  int64_t outstanding = 0;  // routed here and not finished
  int64_t total_blocks = 0;
  int64_t used_blocks = 0;
  int64_t queued_prompt_blocks = 0;  // KV blocks the waiting requests' prompts will need
  bool accepting = true;             // false while starting up or draining
  InstanceRole role = InstanceRole::kUnified;
  Lifecycle state = Lifecycle::kActive;
  int tp = 1;                        // GPUs of the instance
};

// An instance's queues as a cluster router sees them (for routers that predict each instance's
// future, e.g. DynaServe's execution predictor). Valid only during the call.
struct InstanceQueues {
  const std::vector<SeqView>* running = nullptr;
  const std::deque<SeqView>* waiting = nullptr;
  SimTime busy_until{};  // end of the batch in progress (<= now when idle)
};

// How much of a request's prompt each instance holds in its prefix cache (cache-aware routing).
class PrefixLookup {
 public:
  virtual ~PrefixLookup() = default;
  // Leading prompt tokens of `spec` cached on `instance` (whole blocks; 0 when the instance has
  // no prefix caching or the request no prefix hash ids). Does not touch the cache's LRU order.
  virtual int64_t cached_tokens(int32_t instance, const RequestSpec& spec) const = 0;
};

struct ClusterView {
  SimTime now{};
  const std::vector<InstanceLoad>* instances = nullptr;
  int64_t block_size = 16;
  // Same order as `instances`; set for arrival routing, null for hand-off routing.
  const std::vector<InstanceQueues>* queues = nullptr;
  // Set for arrival routing.
  const PrefixLookup* prefixes = nullptr;
  // Set for arrival routing: the indices of the entries of `instances` rewritten since the
  // previous route() call on this router (each at most once; the list may name an entry whose
  // values did not change). A router may keep an ordering of the instances from call to call and
  // update just these; when `instances` changed size every entry is new. Null (hand-off routing):
  // any entry may have changed.
  const std::vector<int32_t>* changed = nullptr;
};

}  // namespace servesim::sim
