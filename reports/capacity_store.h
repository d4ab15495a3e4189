// Capacity-search tables beside the run tables of a results database (written by
// `servesim capacity`, drawn by `servesim report --capacity`):
//   capacity(capacity_id PK, scenario, overrides, objectives, attainment_target,
//            min_throughput_ratio, capacity_rps, binding, binding_rate, verdict, started_at,
//            code_rev, wall_s, status)
//   capacity_probe(capacity_id, probe_index, rate, meets, stopped_early, failed, requests,
//                  slo_attainment, sustained_rate, offered_rate, output_tokens_per_s,
//                  goodput_tokens_per_s, goodput_requests_per_s, ttft_p50_s .. ttft_p99_s,
//                  tbt_p50_s .. tbt_p99_s, tpot_p50_s .. tpot_p99_s, e2e_p50_s .. e2e_p99_s,
//                  PK(capacity_id, probe_index))
//   capacity_check(capacity_id, probe_index, name, value, limit_value, at_least, ok, unit,
//                  PK(capacity_id, probe_index, name)): every criterion judged on a probe
// `objectives` is the JSON array of the --slo arguments, `overrides` the JSON array of --set
// arguments; rates are req/s, latencies seconds; probes are numbered 0.. in the order run. A NaN
// value (attainment with no requests, an unset target) is stored as NULL.
//
// Contract: write_capacity() checks or creates the run schema (as SqliteSink does: a database of
// another schema version, or not a servesim one, is refused with servesim::Error and left
// untouched), creates these tables IF NOT EXISTS and writes one search in one transaction: all of
// its rows or none. read_capacity() opens the database read-only. Errors throw servesim::Error
// naming the file. Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace servesim::reports {

struct CapacityCheckRecord {
  std::string name;  // "tbt_p99", "attainment", "sustained"
  double value = 0;
  double limit = 0;
  bool at_least = false;
  bool ok = false;
  std::string unit;  // "s", "" (a share), "req/s"
};

struct CapacityProbeRecord {
  double rate = 0;  // offered, req/s
  bool meets = false;
  std::string stopped_early;  // why the probe was ended early; empty for a full run
  std::string failed;         // what failed, in words; empty when it meets
  int64_t requests = 0;
  double slo_attainment = 0;  // NaN: objectives set but no request measured
  double sustained_rate = 0,
         offered_rate = 0;  // completions / arrivals in the later half, req/s
  double output_tokens_per_s = 0, goodput_tokens_per_s = 0, goodput_requests_per_s = 0;
  // Percentiles in seconds, [0] p50, [1] p90, [2] p99.
  double ttft_s[3] = {0, 0, 0}, tbt_s[3] = {0, 0, 0}, tpot_s[3] = {0, 0, 0}, e2e_s[3] = {0, 0, 0};
  std::vector<CapacityCheckRecord> checks;  // empty for a probe stopped early
};

struct CapacitySearchRecord {
  int64_t capacity_id = 0;  // set by read_capacity()
  std::string scenario;
  std::vector<std::string> overrides;   // --set arguments
  std::vector<std::string> objectives;  // --slo arguments
  double attainment_target = 0;         // NaN: not a criterion
  double min_throughput_ratio = 0;
  double capacity_rps = 0;           // 0: no rate met the SLO
  std::vector<std::string> binding;  // criteria failing at binding_rate
  double binding_rate = 0;           // the lowest failing rate above capacity; 0: none
  std::string verdict;               // one line: the capacity, or why no rate met the SLO
  std::string started_at, code_rev, status;
  double wall_s = 0;
  std::vector<CapacityProbeRecord> probes;  // in the order run
};

// Writes `search` (its capacity_id ignored) into `db_path` (created when missing) and returns its
// capacity_id.
int64_t write_capacity(const std::string &db_path, const CapacitySearchRecord &search);

// The capacity searches `db_path` holds, ascending (empty when it has no capacity table).
std::vector<int64_t> capacity_ids(const std::string &db_path);

// Reads search `capacity_id` back. Throws InputError naming the ids the database holds when it has
// no such search.
CapacitySearchRecord read_capacity(const std::string &db_path, int64_t capacity_id);

}  // namespace servesim::reports
