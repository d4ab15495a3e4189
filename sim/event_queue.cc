#include "sim/event_queue.h"

#include <algorithm>
#include <cassert>

namespace servesim::sim {

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::kComplete:
      return "complete";
    case Phase::kTransferDone:
      return "transfer_done";
    case Phase::kArrive:
      return "arrive";
    case Phase::kRoute:
      return "route";
    case Phase::kSchedule:
      return "schedule";
    case Phase::kSample:
      return "sample";
    case Phase::kStop:
      return "stop";
    case Phase::kControl:
      return "control";
  }
  return "?";
}

bool fires_before(const Event& a, const Event& b) {
  if (a.time != b.time) return a.time < b.time;
  if (a.phase != b.phase) return a.phase < b.phase;
  return a.seq < b.seq;
}

namespace {
// std heap functions build a max-heap; invert the order so the first event is on top.
struct FiresAfter {
  bool operator()(const Event& a, const Event& b) const { return fires_before(b, a); }
};
}  // namespace

uint64_t EventQueue::push(Event event) {
  event.seq = next_seq_++;
  const bool first = has_first_ ? fires_before(event, first_)
                                : heap_.empty() || fires_before(event, heap_.front());
  if (first) {
    if (has_first_) {
      heap_.push_back(first_);
      std::push_heap(heap_.begin(), heap_.end(), FiresAfter{});
    }
    first_ = event;
    has_first_ = true;
  } else {
    heap_.push_back(event);
    std::push_heap(heap_.begin(), heap_.end(), FiresAfter{});
  }
  return event.seq;
}

Event EventQueue::pop() {
  if (has_first_) {
    has_first_ = false;
    return first_;
  }
  assert(!heap_.empty());
  std::pop_heap(heap_.begin(), heap_.end(), FiresAfter{});
  Event e = heap_.back();
  heap_.pop_back();
  return e;
}

}  // namespace servesim::sim
