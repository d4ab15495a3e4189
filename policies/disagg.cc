#include "policies/disagg.h"

#include <algorithm>

#include "policies/coloc.h"
#include "core/limits.h"

namespace servesim::policies {
namespace {

class PrefillOnlyBatcher : public sim::BatchingPolicy {
 public:
  explicit PrefillOnlyBatcher(const PrefillOnlyParams& p) : p_(p) {}

  bool next_batch(const sim::InstanceView& view, sim::BatchPlan& plan) override {
    int64_t used = 0;
    int64_t free = view.free_blocks;
    int64_t count = 0;
    // Partially prefilled prompts (chunked) continue first; their whole prompt is reserved.
    for (const sim::SeqView& r : *view.running) {
      if (count >= p_.max_batch_size || used >= p_.max_tokens) break;
      const int64_t c = std::min(r.remaining_tokens(), p_.max_tokens - used);
      plan.scheduled.push_back({r.id, c, r.target_tokens()});
      used += c;
      count++;
    }
    for (const sim::SeqView& r : *view.waiting) {
      if (count >= p_.max_batch_size) break;
      int64_t n = r.remaining_tokens();
      if (used + n > p_.max_tokens) {
        if (used > 0) break;  // only a batch's first prompt may exceed the token cap
        if (p_.enable_chunked_prefill) n = p_.max_tokens;
      }
      const int64_t need = sim::blocks_for_tokens(r.target_tokens(), view.block_size);
      if (need > free) break;
      free -= need;
      plan.admit.push_back(r.id);
      plan.scheduled.push_back({r.id, n, r.target_tokens()});
      used += n;
      count++;
    }
    return !plan.empty();
  }

 private:
  PrefillOnlyParams p_;
};

}  // namespace

std::unique_ptr<sim::BatchingPolicy> make_prefill_only_batcher(const PrefillOnlyParams& params) {
  return std::make_unique<PrefillOnlyBatcher>(params);
}

const ParamSchema& disagg_schema() {
  static const ParamSchema schema = {
      {"num_prefill", ParamType::kInt, int64_t{1}, "instances", "prefill instances", {}, 1.0,
       static_cast<double>(kMaxInstances)},
      {"num_decode", ParamType::kInt, int64_t{1}, "instances", "decode instances", {}, 1.0,
       static_cast<double>(kMaxInstances)},
      {"tp_prefill", ParamType::kInt, int64_t{1}, "GPUs", "TP degree of a prefill instance", {},
       1.0, 64.0},
      {"tp_decode", ParamType::kInt, int64_t{1}, "GPUs", "TP degree of a decode instance", {},
       1.0, 64.0},
      {"ep_prefill", ParamType::kInt, int64_t{0}, "GPUs",
       "expert-parallel degree of a MoE model inside a prefill instance (0: cluster.ep)", {}, 0.0,
       256.0},
      {"ep_decode", ParamType::kInt, int64_t{0}, "GPUs",
       "expert-parallel degree of a MoE model inside a decode instance (0: cluster.ep)", {}, 0.0,
       256.0},
      {"attention_dp_prefill", ParamType::kInt, int64_t{1}, "ranks",
       "attention data-parallel ranks of tp_prefill GPUs in a prefill instance (MoE models)", {},
       1.0, 256.0},
      {"attention_dp_decode", ParamType::kInt, int64_t{1}, "ranks",
       "attention data-parallel ranks of tp_decode GPUs in a decode instance (MoE models)", {},
       1.0, 256.0},
      {"prefill_max_tokens", ParamType::kInt, int64_t{8192}, "tokens",
       "prompt tokens per prefill batch (DistServe's L_m)", {}, 1.0, {}},
      {"prefill_max_batch_size", ParamType::kInt, int64_t{64}, "requests",
       "prompts per prefill batch", {}, 1.0, {}},
      {"enable_chunked_prefill", ParamType::kBool, false, "",
       "chunk a prompt longer than prefill_max_tokens instead of running it whole", {}, {}, {}},
      {"decode_max_num_seqs", ParamType::kInt, int64_t{256}, "requests",
       "most requests decoding on a decode instance at once", {}, 1.0, {}},
      {"decode_max_num_batched_tokens", ParamType::kInt, int64_t{0}, "tokens",
       "token budget of a decode instance's iteration, prompt chunks prefilled there included "
       "(0: the larger of prefill_max_tokens and decode_max_num_seqs)", {}, 0.0, {}},
      {"transfer", ParamType::kString, std::string("after_prefill"), "",
       "KV transfer: after_prefill (whole KV, DistServe) or layerwise_overlap (Splitwise)",
       {"after_prefill", "layerwise_overlap"}, {}, {}},
      {"decode_router", ParamType::kString, std::string("least_outstanding"), "",
       "how a prefilled request picks its decode instance",
       {"least_outstanding", "least_kv_load", "round_robin"}, {}, {}},
      {"block_size", ParamType::kInt, int64_t{16}, "tokens", "tokens per paged KV block", {}, 1.0,
       static_cast<double>(kMaxBlockSize)},
      {"gpu_memory_utilization", ParamType::kDouble, 0.9, "",
       "share of GPU memory the engine may use (weights + activations + KV)", {}, 0.05, 1.0},
  };
  return schema;
}

sim::ClusterLayout make_disagg_layout(const ParamValues& v) {
  sim::ClusterLayout layout;
  layout.transfer = v.get_string("transfer") == "layerwise_overlap"
                        ? sim::KvTransferMode::kLayerwiseOverlap
                        : sim::KvTransferMode::kAfterPrefill;
  layout.decode_router = v.get_string("decode_router");

  PrefillOnlyParams pp;
  pp.max_tokens = v.get_int("prefill_max_tokens");
  pp.max_batch_size = v.get_int("prefill_max_batch_size");
  pp.enable_chunked_prefill = v.get_bool("enable_chunked_prefill");
  sim::InstanceGroup prefill;
  prefill.role = sim::InstanceRole::kPrefill;
  prefill.count = v.get_int("num_prefill");
  prefill.tp = static_cast<int>(v.get_int("tp_prefill"));
  prefill.ep = static_cast<int>(v.get_int("ep_prefill"));
  prefill.attention_dp = static_cast<int>(v.get_int("attention_dp_prefill"));
  prefill.max_num_batched_tokens = pp.max_tokens;
  prefill.max_num_seqs = pp.max_batch_size;
  prefill.make_batching = [pp](const sim::InstanceContext&) { return make_prefill_only_batcher(pp); };

  ColocParams dp;
  dp.mode = ColocParams::Mode::kUnifiedV1;
  dp.max_num_seqs = v.get_int("decode_max_num_seqs");
  dp.max_num_batched_tokens = v.get_int("decode_max_num_batched_tokens");
  if (dp.max_num_batched_tokens == 0) {
    dp.max_num_batched_tokens = std::max<int64_t>(pp.max_tokens, dp.max_num_seqs);
  }
  sim::InstanceGroup decode;
  decode.role = sim::InstanceRole::kDecode;
  decode.count = v.get_int("num_decode");
  decode.tp = static_cast<int>(v.get_int("tp_decode"));
  decode.ep = static_cast<int>(v.get_int("ep_decode"));
  decode.attention_dp = static_cast<int>(v.get_int("attention_dp_decode"));
  decode.max_num_batched_tokens = dp.max_num_batched_tokens;
  decode.max_num_seqs = dp.max_num_seqs;
  decode.make_batching = [dp](const sim::InstanceContext&) { return make_coloc(dp); };

  for (sim::InstanceGroup* g : {&prefill, &decode}) {
    g->block_size = v.get_int("block_size");
    g->gpu_memory_utilization = v.get_double("gpu_memory_utilization");
  }
  layout.groups.push_back(std::move(prefill));
  layout.groups.push_back(std::move(decode));
  return layout;
}

void register_disagg() {
  sim::cluster_policies().add(
      "disagg", {"static prefill/decode disaggregation with KV transfer (DistServe, Splitwise)",
                 disagg_schema(), make_disagg_layout, /*check=*/{}});  // the schema's checks alone
}

}  // namespace servesim::policies
