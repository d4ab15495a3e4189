// A RecordListener that keeps every record in memory, in arrival order.
//
// Contract: for tests and in-process summaries of small runs; memory grows with the run (a
// record's token_times_ns is copied too). Not thread-safe, like every listener.
#pragma once

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

}  // namespace servesim::reports
