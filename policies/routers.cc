#include "policies/routers.h"

#include <limits>
#include <utility>
#include <stdexcept>

namespace servesim::policies {
namespace {

class RoundRobin : public sim::RoutingPolicy {
 public:
  int32_t route(const sim::ClusterView& view, const RequestSpec&) override {
    const auto& inst = *view.instances;
    for (size_t tries = 0; tries < inst.size(); ++tries) {
      const size_t i = next_++ % inst.size();
      if (inst[i].accepting) return static_cast<int32_t>(i);
    }
    throw std::logic_error("round_robin: no accepting instance");
  }

 private:
  size_t next_ = 0;
};

// Picks the accepting instance with the smallest key; ties go to the lowest index.
template <typename Key>
int32_t argmin_accepting(const sim::ClusterView& view, Key key, const char* name) {
  int32_t best = -1;
  double best_key = std::numeric_limits<double>::infinity();
  const auto& inst = *view.instances;
  for (size_t i = 0; i < inst.size(); ++i) {
    if (!inst[i].accepting) continue;
    const double k = key(inst[i]);
    if (best < 0 || k < best_key) {
      best = static_cast<int32_t>(i);
      best_key = k;
    }
  }
  if (best < 0) throw std::logic_error(std::string(name) + ": no accepting instance");
  return best;
}

// The accepting instance with the fewest outstanding requests, ties to the lowest index: the same
// choice as argmin_accepting, kept in a tournament tree over the instances so that a route costs
// the instances that changed since the previous one (ClusterView::changed), O(log n) each,
// instead of a scan of the fleet.
class LeastOutstanding : public sim::RoutingPolicy {
 public:
  int32_t route(const sim::ClusterView& view, const RequestSpec&) override {
    const auto& inst = *view.instances;
    if (view.changed == nullptr || inst.size() != leaves_ ||
        view.changed->size() * kRebuildShare > inst.size()) {
      rebuild(inst);
    } else {
      for (int32_t i : *view.changed) update(inst, static_cast<size_t>(i));
    }
    const int32_t best = tree_[1];
    if (best < 0) throw std::logic_error("least_outstanding: no accepting instance");
    return best;
  }

 private:
  // Rebuilding (O(n)) beats that many O(log n) updates.
  static constexpr size_t kRebuildShare = 8;

  // The better of two accepting instances (-1: none): fewer outstanding, then the lower index.
  int32_t better(int32_t a, int32_t b) const {
    if (a < 0) return b;
    if (b < 0) return a;
    return std::make_pair(keys_[static_cast<size_t>(b)], b) <
                   std::make_pair(keys_[static_cast<size_t>(a)], a)
               ? b
               : a;
  }
  void rebuild(const std::vector<sim::InstanceLoad>& inst) {
    leaves_ = inst.size();
    width_ = 1;
    while (width_ < leaves_) width_ *= 2;
    keys_.assign(leaves_, 0);
    tree_.assign(2 * width_, -1);
    for (size_t i = 0; i < leaves_; ++i) {
      keys_[i] = inst[i].outstanding;
      if (inst[i].accepting) tree_[width_ + i] = static_cast<int32_t>(i);
    }
    for (size_t n = width_ - 1; n >= 1; --n) tree_[n] = better(tree_[2 * n], tree_[2 * n + 1]);
  }
  void update(const std::vector<sim::InstanceLoad>& inst, size_t i) {
    keys_[i] = inst[i].outstanding;
    size_t n = width_ + i;
    tree_[n] = inst[i].accepting ? static_cast<int32_t>(i) : -1;
    for (n /= 2; n >= 1; n /= 2) tree_[n] = better(tree_[2 * n], tree_[2 * n + 1]);
  }

  size_t leaves_ = 0;          // instances the tree was built over
  size_t width_ = 1;           // leaves of the tree: a power of two >= leaves_
  std::vector<int64_t> keys_;  // per instance: its outstanding requests
  std::vector<int32_t> tree_;  // node n: the best accepting instance under it, -1 for none; root 1
};

class LeastKvLoad : public sim::RoutingPolicy {
 public:
  int32_t route(const sim::ClusterView& view, const RequestSpec&) override {
    return argmin_accepting(
        view,
        [](const sim::InstanceLoad& l) {
          return static_cast<double>(l.used_blocks + l.queued_prompt_blocks) /
                 static_cast<double>(l.total_blocks);
        },
        "least_kv_load");
  }
};

// Dynamo's KV-aware router cost, in KV blocks: overlap_weight x the prefill the instance would do
// (the request's uncached prompt blocks plus the prompts already queued there) + the KV it holds.
class KvAware : public sim::RoutingPolicy {
 public:
  explicit KvAware(double overlap_weight) : weight_(overlap_weight) {}
  int32_t route(const sim::ClusterView& view, const RequestSpec& spec) override {
    return argmin_accepting(
        view,
        [&](const sim::InstanceLoad& l) {
          const double prefill =
              static_cast<double>(uncached_prompt_blocks(view, l, spec) + l.queued_prompt_blocks);
          return weight_ * prefill + static_cast<double>(l.used_blocks);
        },
        "kv_aware");
  }

 private:
  double weight_;
};

}  // namespace

int64_t uncached_prompt_blocks(const sim::ClusterView& view, const sim::InstanceLoad& instance,
                               const RequestSpec& request) {
  const int64_t bs = view.block_size;
  const int64_t cached =
      view.prefixes != nullptr ? view.prefixes->cached_tokens(instance.instance_id, request) / bs : 0;
  return (request.prompt_tokens + bs - 1) / bs - cached;
}

std::unique_ptr<sim::RoutingPolicy> make_kv_aware(double overlap_weight) {
  return std::make_unique<KvAware>(overlap_weight);
}

std::unique_ptr<sim::RoutingPolicy> make_round_robin() { return std::make_unique<RoundRobin>(); }
std::unique_ptr<sim::RoutingPolicy> make_least_outstanding() {
  return std::make_unique<LeastOutstanding>();
}
std::unique_ptr<sim::RoutingPolicy> make_least_kv_load() { return std::make_unique<LeastKvLoad>(); }

void register_routers() {
  auto& reg = sim::routing_policies();
  reg.add("round_robin", {"cycle over the instances in index order", {},
                          [](const ParamValues&) { return make_round_robin(); }});
  reg.add("least_outstanding",
          {"the instance with the fewest routed, unfinished requests", {},
           [](const ParamValues&) { return make_least_outstanding(); }});
  reg.add("least_kv_load",
          {"the instance with the lowest share of KV blocks used or claimed by queued prompts", {},
           [](const ParamValues&) { return make_least_kv_load(); }});
  reg.add("kv_aware",
          {"cache-aware: the lowest overlap_weight x (uncached prompt + queued prompt blocks) + "
           "used KV blocks (Dynamo's KV router cost)",
           {{"overlap_weight", ParamType::kDouble, 1.0, "",
             "weight of the prefill to do against the KV already held", {}, 0.0, 1000.0}},
           [](const ParamValues& v) { return make_kv_aware(v.get_double("overlap_weight")); }});
}

}  // namespace servesim::policies
