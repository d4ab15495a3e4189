// Internal to the planner (app/plan*.cc): expansion, pruning and the rank transport.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/plan.h"

namespace servesim::app {

// Every config of the plan in expansion order (GPU, candidate, grid; first axis outermost).
std::vector<PlanConfig> expand_plan(const PlanSpec& plan);

// The scenario document of config `c`: base + overrides + SLO settings (+ the rate knob).
Json config_document(const PlanSpec& plan, const PlanConfig& c, const SloCriteria& criteria,
                     std::optional<std::pair<std::string, double>> rate);

// Sets c.status (kPruned with a reason, kError, or kNotRun = to simulate), policy, num_gpus,
// cost and bound. Malformed scenario documents add to `plan_issues` (once per candidate and
// issue, tracked in `reported`).
void prune_config(const PlanSpec& plan, PlanConfig& c, const SloCriteria& criteria,
                  const scenarios::DataRoot& root, std::vector<ConfigIssue>& plan_issues,
                  std::map<std::string, bool>& reported);

// Moves results between MPI ranks (a single-process build has one rank).
class RankTransport {
 public:
  virtual ~RankTransport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Rank 0 receives every rank's payload in rank order (its own first); other ranks get {}.
  virtual std::vector<std::string> gather(const std::string& payload) = 0;
};

// The MPI transport when built with MPI and started under mpirun with more than one rank; the
// single-process one otherwise.
std::unique_ptr<RankTransport> make_rank_transport();

}  // namespace servesim::app
