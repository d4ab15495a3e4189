// Per-request state of the engine, indexed by RequestId, in memory that follows the requests in
// flight rather than the whole run: a ring of slots over the ids from the oldest request not yet
// retired to the newest admitted.
//
// Contract: ids enter with admit() in any order (every id below the newest admitted then has a
// slot, value-initialised) and leave with retire(); a retired id's slot is reused once every
// older id has been retired too. operator[] of an id outside [base(), end()) is undefined. The
// ring doubles when an admitted id would not fit, so its size is the largest span of ids in flight
// at once (rounded up to a power of two), never the run's request count.
#pragma once

#include <cassert>
#include <cstdint>
#include <vector>

#include "core/request_spec.h"

namespace servesim::sim::detail {

template <typename T>
class RequestRing {
 public:
  T& operator[](RequestId id) {
    assert(contains(id));
    return slots_[slot(id)];
  }
  const T& operator[](RequestId id) const {
    assert(contains(id));
    return slots_[slot(id)];
  }
  bool contains(RequestId id) const { return id >= base_ && id < end_; }
  RequestId base() const { return base_; }
  RequestId end() const { return end_; }
  size_t capacity() const { return slots_.size(); }

  // Gives `id` (and every id between end() and it) a fresh slot; nothing for an id already held.
  // REQUIRES: id >= base().
  void admit(RequestId id) {
    assert(id >= base_);
    if (id < end_) return;
    if (static_cast<size_t>(id - base_) >= slots_.size()) grow(static_cast<size_t>(id - base_) + 1);
    for (; end_ <= id; ++end_) {
      slots_[slot(end_)] = T{};
      retired_[slot(end_)] = 0;
    }
  }

  // `id` is done with; its slot (and those of the retired ids after it) become free once every
  // older id is retired. REQUIRES: contains(id).
  void retire(RequestId id) {
    assert(contains(id));
    retired_[slot(id)] = 1;
    while (base_ < end_ && retired_[slot(base_)]) ++base_;
  }

 private:
  size_t slot(RequestId id) const { return static_cast<size_t>(id) & mask_; }

  // Re-places the held ids in a ring of at least `needed` slots.
  void grow(size_t needed) {
    size_t capacity = slots_.empty() ? 1024 : slots_.size();
    while (capacity < needed) capacity *= 2;
    std::vector<T> slots(capacity);
    std::vector<uint8_t> retired(capacity, 0);
    const size_t mask = capacity - 1;
    for (RequestId id = base_; id < end_; ++id) {
      slots[static_cast<size_t>(id) & mask] = std::move(slots_[slot(id)]);
      retired[static_cast<size_t>(id) & mask] = retired_[slot(id)];
    }
    slots_ = std::move(slots);
    retired_ = std::move(retired);
    mask_ = mask;
  }

  std::vector<T> slots_;
  std::vector<uint8_t> retired_;
  size_t mask_ = 0;
  RequestId base_ = 0;
  RequestId end_ = 0;
};

}  // namespace servesim::sim::detail
