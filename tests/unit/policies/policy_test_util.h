// Hand-built instance views for batching-policy tests, and a checker that applies a plan the way
// the engine does (preempt, admit, run) to confirm it is valid.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "sim/view.h"

namespace servesim::policies::testing {

// A running request in its decode phase: prompt and all but the newest sampled token computed.
inline sim::SeqView decode_seq(RequestId id, int64_t prompt, int64_t generated, int64_t blocks) {
  sim::SeqView s;
  s.id = id;
  s.prompt_tokens = prompt;
  s.output_tokens = generated + 100;
  s.generated_tokens = generated;
  s.computed_tokens = prompt + generated - 1;
  s.blocks = blocks;
  return s;
}

// A running request part way through its prompt.
inline sim::SeqView partial_seq(RequestId id, int64_t prompt, int64_t computed, int64_t blocks) {
  sim::SeqView s;
  s.id = id;
  s.prompt_tokens = prompt;
  s.output_tokens = 50;
  s.computed_tokens = computed;
  s.blocks = blocks;
  return s;
}

// A waiting request that has not started (or was preempted after `generated` tokens).
inline sim::SeqView waiting_seq(RequestId id, int64_t prompt, int64_t generated = 0) {
  sim::SeqView s;
  s.id = id;
  s.prompt_tokens = prompt;
  s.output_tokens = generated + 50;
  s.generated_tokens = generated;
  s.preemptions = generated > 0 ? 1 : 0;
  return s;
}

struct Instance {
  std::vector<sim::SeqView> running;
  std::deque<sim::SeqView> waiting;
  int64_t block_size = 16;
  int64_t total_blocks = 1000;
  int64_t free_blocks = 1000;

  sim::InstanceView view() const {
    return {time_from_ns(1'000'000), 0, block_size, total_blocks, free_blocks, &running, &waiting};
  }
};

using Sched = std::tuple<RequestId, int64_t, int64_t>;  // id, tokens, reserve_tokens

inline std::vector<Sched> scheduled(const sim::BatchPlan& plan) {
  std::vector<Sched> out;
  for (const auto& s : plan.scheduled) out.emplace_back(s.id, s.tokens, s.reserve_tokens);
  return out;
}

// Applies `plan` to a copy of `inst` with the engine's rules. Returns an empty string if the plan
// is valid, else what is wrong. `free_after` receives the free blocks after the step.
inline std::string check_plan(const Instance& inst, const sim::BatchPlan& plan,
                              int64_t* free_after = nullptr) {
  std::vector<sim::SeqView> running = inst.running;
  std::deque<sim::SeqView> waiting = inst.waiting;
  int64_t free = inst.free_blocks;
  for (RequestId id : plan.preempt) {
    auto it = std::find_if(running.begin(), running.end(), [&](auto& s) { return s.id == id; });
    if (it == running.end()) return "preempts " + std::to_string(id) + " which is not running";
    free += it->blocks;
    sim::SeqView v = *it;
    v.blocks = 0;
    v.computed_tokens = 0;
    waiting.push_front(v);
    running.erase(it);
  }
  for (RequestId id : plan.admit) {
    auto it = std::find_if(waiting.begin(), waiting.end(), [&](auto& s) { return s.id == id; });
    if (it == waiting.end()) return "admits " + std::to_string(id) + " which is not waiting";
    running.push_back(*it);
    waiting.erase(it);
  }
  int64_t new_blocks = 0;
  for (const auto& s : plan.scheduled) {
    auto it = std::find_if(running.begin(), running.end(), [&](auto& r) { return r.id == s.id; });
    if (it == running.end()) return "schedules " + std::to_string(s.id) + " which is not running";
    if (s.tokens < 1 || s.tokens > it->remaining_tokens()) {
      return "schedules " + std::to_string(s.tokens) + " tokens of " + std::to_string(s.id);
    }
    const int64_t need = sim::blocks_for_tokens(
        std::max(it->computed_tokens + s.tokens, s.reserve_tokens), inst.block_size);
    if (need > it->blocks) {
      new_blocks += need - it->blocks;
      it->blocks = need;
    }
  }
  if (new_blocks > free) {
    return "needs " + std::to_string(new_blocks) + " blocks, " + std::to_string(free) + " free";
  }
  if (free_after != nullptr) *free_after = free - new_blocks;
  return "";
}

}  // namespace servesim::policies::testing
