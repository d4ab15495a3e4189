#include "reports/memory_sink.h"

#include <algorithm>

#include "core/rng.h"

namespace servesim::reports {

void MemorySink::on_request(const sim::RequestRecord& record) { requests.push_back(record); }

void MemorySink::on_sample(const sim::SampleRecord& sample) { samples.push_back(sample); }

void MemorySink::on_rejected(const sim::RejectedRecord& record) { rejected.push_back(record); }

void MemorySink::clear() {
  requests.clear();
  samples.clear();
  rejected.clear();
}

RecordSample::RecordSample(int64_t size, uint64_t seed)
    : size_(static_cast<size_t>(size)), seed_(seed) {}

void RecordSample::offer(const sim::RequestRecord& record) {
  const uint64_t key = mix64(seed_, static_cast<uint64_t>(record.request_id));
  const int64_t order = offered_++;
  const auto by_key = [](const Kept& a, const Kept& b) { return a.key < b.key; };
  if (heap_.size() == size_) {
    if (key >= heap_.front().key) return;
    std::pop_heap(heap_.begin(), heap_.end(), by_key);
    heap_.back() = {key, order, record};
  } else {
    heap_.push_back({key, order, record});
  }
  std::push_heap(heap_.begin(), heap_.end(), by_key);
}

std::vector<sim::RequestRecord> RecordSample::take() {
  std::sort(heap_.begin(), heap_.end(),
            [](const Kept& a, const Kept& b) { return a.order < b.order; });
  std::vector<sim::RequestRecord> out;
  out.reserve(heap_.size());
  for (Kept& k : heap_) out.push_back(std::move(k.record));
  heap_.clear();
  return out;
}

}  // namespace servesim::reports
