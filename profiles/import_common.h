// Helpers shared by the importers of third-party data sets. Internal to servesim_profiles.
//
// Contract: RowMerger keeps rows in first-seen order and merges rows with equal keys (row_key)
// into one whose latency is the median of theirs (the mean of the two middle values for an even
// count), counting how many rows were merged away.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "profiles/profile_tables.h"

namespace servesim::profiles {

// Median of `values` (REQUIRES: non-empty); the mean of the two middle values for an even count.
double median_of(std::vector<double> values);

// Upstream milliseconds to the format's microseconds.
inline double ms_to_us(double ms) { return ms * 1000.0; }

// Current UTC time as ISO-8601 with seconds and a 'Z' suffix.
std::string utc_now_iso8601();

// Sorted names of the sub-directories of `dir` (empty if `dir` is not a directory).
std::vector<std::string> subdirectories(const std::string& dir);

// Accumulates what one import dropped or merged, per table, as the profile's skipped notes.
class ImportNotes {
 public:
  void add(const std::string& table, const std::string& text) {
    std::string& note = notes_[table];
    note += (note.empty() ? "" : "; ") + text;
  }
  void merged(const std::string& table, int64_t count) {
    if (count > 0) {
      add(table, fmt::format("{} repeated measurements of an existing key merged into it "
                             "(median)",
                             count));
    }
  }
  // One "<count> rows with <what> <value> dropped<why>" per counted value.
  void counted(const std::string& table, const std::map<std::string, int64_t>& counts,
               const std::string& what, const std::string& why = "") {
    for (const auto& [value, count] : counts) {
      add(table, fmt::format("{} rows with {} {} dropped{}", count, what, value, why));
    }
  }
  const std::map<std::string, std::string>& all() const { return notes_; }

 private:
  std::map<std::string, std::string> notes_;
};

template <typename Row>
class RowMerger {
 public:
  // Adds a row; returns false when its key was seen before (the latency is merged).
  bool add(Row row) {
    std::string key = row_key(row);
    auto it = index_.find(key);
    if (it != index_.end()) {
      latencies_[it->second].push_back(row.latency_us);
      ++merged_;
      return false;
    }
    index_.emplace(std::move(key), rows_.size());
    latencies_.push_back({row.latency_us});
    rows_.push_back(std::move(row));
    return true;
  }
  bool contains(const Row& row) const { return index_.count(row_key(row)) > 0; }
  int64_t merged() const { return merged_; }
  size_t size() const { return rows_.size(); }

  // The merged rows in first-seen order.
  std::vector<Row> take() {
    for (size_t i = 0; i < rows_.size(); ++i) {
      if (latencies_[i].size() > 1) {
        rows_[i].latency_us = median_of(latencies_[i]);
      }
    }
    index_.clear();
    latencies_.clear();
    return std::move(rows_);
  }

 private:
  std::vector<Row> rows_;
  std::vector<std::vector<double>> latencies_;
  std::unordered_map<std::string, size_t> index_;
  int64_t merged_ = 0;
};

}  // namespace servesim::profiles
