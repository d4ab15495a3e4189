#include "reports/memory_sink.h"

namespace servesim::reports {

void MemorySink::on_request(const sim::RequestRecord& record) { requests.push_back(record); }

void MemorySink::on_sample(const sim::SampleRecord& sample) { samples.push_back(sample); }

void MemorySink::on_rejected(const sim::RejectedRecord& record) { rejected.push_back(record); }

void MemorySink::clear() {
  requests.clear();
  samples.clear();
  rejected.clear();
}

}  // namespace servesim::reports
