// A RecordListener that keeps every record in memory, in arrival order; and RecordSample, a
// uniform sample of request records in bounded memory.
//
// Contract: for tests and in-process summaries of small runs; memory grows with the run (a
// record's token_times_ns is copied too). Not thread-safe, like every listener.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/records.h"

namespace servesim::reports {

class MemorySink : public sim::RecordListener {
 public:
  void on_request(const sim::RequestRecord& record) override;
  void on_sample(const sim::SampleRecord& sample) override;
  void on_rejected(const sim::RejectedRecord& record) override;

  // Drops everything received so far.
  void clear();

  std::vector<sim::RequestRecord> requests;
  std::vector<sim::SampleRecord> samples;
  std::vector<sim::RejectedRecord> rejected;
};

// A uniform sample of at most `size` request records, in memory bounded by `size` whatever the
// number offered: the records whose mix64(seed, request id) are smallest (bottom-k sampling), so
// the same run with the same seed keeps the same requests, and a larger size keeps a superset.
class RecordSample {
 public:
  // REQUIRES: size >= 1.
  RecordSample(int64_t size, uint64_t seed);
  void offer(const sim::RequestRecord& record);
  // The kept records in the order they were offered; the sample is empty afterwards.
  std::vector<sim::RequestRecord> take();

 private:
  struct Kept {
    uint64_t key;
    int64_t order;
    sim::RequestRecord record;
  };
  size_t size_;
  uint64_t seed_;
  int64_t offered_ = 0;
  std::vector<Kept> heap_;  // a max-heap on key: its front is the first to make room
};

}  // namespace servesim::reports
