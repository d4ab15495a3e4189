// Engine::Impl, KV transfers of disaggregated serving: prefilled requests handed to a decode
// instance, their KV on the wire, and the links' occupancy.
#include "sim/engine_impl.h"

namespace servesim::sim {

void Engine::Impl::stream_chunk(size_t src, int32_t dst, int64_t tokens) {
  const LinkSpec link = config.transfer.link(static_cast<int32_t>(src), dst);
  SimTime& free_at = link_free_at[{static_cast<int32_t>(src), dst}];
  const int64_t bytes = tokens * instances[src].setup.kv_bytes_per_token;
  free_at = std::max(free_at, now) + duration_from_seconds(static_cast<double>(bytes) / link.bytes_per_s);
  instances[src].stats.kv_bytes_out += bytes;
}

void Engine::Impl::start_transfers() {
  while (!handoffs.empty()) {
    Handoff& h = handoffs.front();
    for (size_t j = 0; j < instances.size(); ++j) {
      refresh_load(j);
      decode_loads[j] = loads[j];
      decode_loads[j].accepting = instances[j].setup.role == InstanceRole::kDecode &&
                                  instances[j].state == Lifecycle::kActive;
    }
    ClusterView view{now, &decode_loads, instances.front().setup.block_size};
    const RequestSpec& spec = workload.requests[static_cast<size_t>(h.seq.id)];
    const int32_t split_target = requests[h.seq.id].split_target;
    const int32_t d = split_target >= 0 ? split_target : decode_router->route(view, spec);
    if (split_target < 0 && (d < 0 || static_cast<size_t>(d) >= instances.size() ||
                             instances[static_cast<size_t>(d)].setup.role != InstanceRole::kDecode)) {
      throw std::logic_error(fmt::format("decode router returned instance {}, not a decode instance", d));
    }
    InstanceState& dst = instances[static_cast<size_t>(d)];
    const int64_t need = blocks_for_tokens(h.seq.computed_tokens, dst.setup.block_size);
    if (need > dst.free_blocks) return;  // wait for room on the decode side
    kv.take_blocks(dst, need);
    dst.outstanding++;
    stale_loads.add(static_cast<size_t>(d));
    stale_loads.add(static_cast<size_t>(h.source));
    h.reserved_blocks = need;
    InstanceState& src = instances[static_cast<size_t>(h.source)];
    const LinkSpec link = config.transfer.link(h.source, d);
    const int64_t bytes = h.seq.computed_tokens * src.setup.kv_bytes_per_token;
    const Duration wire = link.latency + duration_from_seconds(static_cast<double>(bytes) /
                                                               link.bytes_per_s);
    SimTime& free_at = link_free_at[{h.source, d}];
    SimTime end;
    const bool streamed = config.transfer.mode == KvTransferMode::kChunked && split_target >= 0;
    if (streamed) {
      // Every chunk is already on the wire (stream_chunk); the last one lands after the link
      // drains, plus the link latency.
      end = std::max(free_at, now) + link.latency;
    } else if (config.transfer.mode == KvTransferMode::kLayerwiseOverlap) {
      // Layers were sent as they completed during the prefill iteration.
      const SimTime start = std::max(free_at, h.prefill_start);
      end = std::max(start + wire, now + wire / std::max(1, config.transfer.num_layers));
    } else {
      end = std::max(now, free_at) + wire;
    }
    if (!streamed) {
      free_at = end;
      src.stats.kv_bytes_out += bytes;
    }
    src.stats.kv_transfers_out++;
    src.stats.transfer_wait_ns += (now - h.ready).count();
    Event e{end, Phase::kTransferDone, EventKind::kTransferDone, d, 0, 0};
    e.request = h.seq.id;
    queue.push(e);
    in_transit.emplace(h.seq.id, h);
    handoffs.pop_front();
  }
}

void Engine::Impl::on_transfer_done(size_t d, RequestId id) {
  auto it = in_transit.find(id);
  if (it == in_transit.end()) throw std::logic_error("transfer of an unknown request finished");
  Handoff h = it->second;
  in_transit.erase(it);
  InstanceState& src = instances[static_cast<size_t>(h.source)];
  kv.release_blocks(src, h.seq.blocks, id);
  src.outstanding--;
  stale_loads.add(static_cast<size_t>(h.source));
  InstanceState& dst = instances[d];
  SeqView seq = h.seq;
  seq.blocks = h.reserved_blocks;
  seq.split_tokens = 0;  // the rest of the request runs here
  seq.split_target = -1;
  RequestState& rs = requests[id];
  rs.instance = static_cast<int32_t>(d);
  if (int64_t& arrived = rs.kv_arrived_ns; arrived < 0) {
    arrived = now.time_since_epoch().count();
  }
  rs.running_pos = static_cast<int32_t>(dst.running.size());
  dst.running.push_back(seq);
  dst.run_ready = false;
  request_schedule(d);
  request_schedule(static_cast<size_t>(h.source));
  maybe_retire(static_cast<size_t>(h.source));
  start_transfers();
}

}  // namespace servesim::sim
