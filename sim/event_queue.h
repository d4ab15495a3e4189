// The event queue: a binary heap of small value events keyed (time, phase, sequence).
//
// Ordering contract (one unit test per rule in tests/unit/sim/event_queue_test.cc):
//   1. earlier time first;
//   2. at equal time, lower Phase first: completions free KV and emit tokens before arrivals are
//      routed, and batching (kSchedule) sees every completion and arrival of that instant;
//   3. at equal (time, phase), insertion order (a per-queue sequence counter; never a global one).
// Cancellation is lazy: an event carries its target's generation at push time; the engine drops
// events whose generation is stale when they are popped.
#pragma once

#include <cstdint>
#include <vector>

#include "core/time.h"

namespace servesim::sim {

enum class Phase : uint8_t {
  kComplete = 0,      // a batch finished: advance requests, emit tokens, free KV
  kTransferDone = 1,  // a KV transfer finished
  kArrive = 2,        // a request arrives at the cluster
  kRoute = 3,         // the router places arrived requests
  kSchedule = 4,      // an idle instance asks its batching policy for the next batch
  kSample = 5,        // time-series sampling
  kStop = 6,          // end of the run
  // Appended after kStop so that the numbering, and so every static run's fingerprint, stays as
  // it was: at a tie a cluster controller's tick sees the sampled state of that instant.
  kControl = 7,       // an elastic cluster's controller tick
};
const char* phase_name(Phase phase);

enum class EventKind : uint8_t {
  kBatchDone,
  kTransferDone,
  kArrival,
  kRoute,
  kSchedule,
  kSample,
  kStop,
  kControl,        // elastic clusters: the controller's periodic tick
  kInstanceReady,  // an added instance finished starting up (phase kComplete)
  kWake,           // a batching policy's wake_at() time (phase kSchedule)
  kFrontendDone,   // a request passed its instance's front end (phase kArrive)
};

struct Event {
  SimTime time{};
  Phase phase = Phase::kStop;
  EventKind kind = EventKind::kStop;
  int32_t target = -1;       // instance index, or -1 for cluster-level events
  uint64_t seq = 0;          // assigned by the queue
  uint64_t generation = 0;   // for lazy cancellation; meaning is up to the target
  int64_t request = -1;      // the request an event is about (KV transfers), else -1
};

// True when `a` must be processed before `b`.
bool fires_before(const Event& a, const Event& b);

class EventQueue {
 public:
  // Assigns the sequence number and inserts. Returns the assigned sequence number.
  uint64_t push(Event event);
  // REQUIRES: !empty(). Removes and returns the first event in the order above.
  Event pop();
  const Event& top() const { return has_first_ ? first_ : heap_.front(); }
  bool empty() const { return !has_first_ && heap_.empty(); }
  size_t size() const { return heap_.size() + (has_first_ ? 1 : 0); }

 private:
  // An event that fired before everything queued when it was pushed waits here, outside the heap,
  // until it is popped or an earlier one is pushed: the next step of a busy instance (its batch
  // end, its next schedule) mostly never enters the heap. Invariant: first_ fires before every
  // event of heap_.
  Event first_{};
  bool has_first_ = false;
  std::vector<Event> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace servesim::sim
