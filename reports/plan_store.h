// Capacity-plan tables beside the run tables of a results database (schema v1 is unchanged; these
// tables are added when a plan writes its results):
//   plan(plan_id PK, name, source, mode, target_rate, started_at, status, document)
//   plan_config(plan_id, config_index, label, candidate, gpu, policy, num_gpus,
//               price_per_gpu_hour, cost_per_hour, status, reason, bound_rps, capacity_rps,
//               meets_target, overrides, PK(plan_id, config_index))
//   plan_run(plan_id, config_index, run_id, rate, meets): every simulation of a config, joined
//               to run(run_id).
//
// Contract: the database must already hold the run schema (open a SqliteSink on it first).
// Every write commits on its own (the run tables are written by SqliteSink, run by run).
// Errors throw servesim::Error naming the file. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace servesim::reports {

struct PlanRow {
  std::string name, source, mode, started_at, document;
  double target_rate = 0;  // 0 in max-rate mode
};

struct PlanConfigRow {
  int64_t config_index = 0;
  std::string label, candidate, gpu, policy, status, reason, overrides;
  int64_t num_gpus = 0;
  double price_per_gpu_hour = 0, cost_per_hour = 0, bound_rps = 0, capacity_rps = 0;
  int meets_target = -1;  // -1: not simulated at the target (stored as NULL)
};

class PlanStore {
 public:
  explicit PlanStore(const std::string& path);
  ~PlanStore();
  PlanStore(const PlanStore&) = delete;
  PlanStore& operator=(const PlanStore&) = delete;

  // Inserts the plan row (status 'running') and returns its plan_id.
  int64_t begin_plan(const PlanRow& plan);
  void add_run(int64_t plan_id, int64_t config_index, int64_t run_id, double rate, bool meets);
  void add_config(int64_t plan_id, const PlanConfigRow& row);
  // Sets the plan's status ("ok", "interrupted").
  void finish_plan(int64_t plan_id, const std::string& status);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace servesim::reports
