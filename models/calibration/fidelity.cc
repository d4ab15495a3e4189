#include "models/calibration/fidelity.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include "models/cost/profile_interpolation.h"

namespace servesim::models {
namespace {

double ape_pct(double predicted, double measured) {
  return std::abs(predicted - measured) / measured * 100;
}

// Scores every point of a table through `predict_without` / `measured`, leaving out points for
// which `exclude(p)` holds.
template <typename Table, typename Exclude>
FidelityCell score(const Table& table, Exclude exclude) {
  std::vector<double> errors;
  std::vector<bool> extrapolated;
  size_t excluded = 0;
  for (size_t p = 0; p < table.points(); ++p) {
    if (exclude(p)) {
      ++excluded;
      continue;
    }
    const interp::Lookup l = table.predict_without(p);
    errors.push_back(ape_pct(l.seconds, table.measured(p)));
    extrapolated.push_back(l.extrapolated);
  }
  FidelityCell c = summarize_errors(errors, extrapolated);
  c.excluded = excluded;
  return c;
}

template <typename Table>
FidelityCell score(const Table& table) {
  return score(table, [](size_t) { return false; });
}

}  // namespace

FidelityCell summarize_errors(const std::vector<double>& ape_pct,
                              const std::vector<bool>& extrapolated) {
  FidelityCell c;
  c.points = ape_pct.size();
  if (ape_pct.empty()) {
    return c;
  }
  std::vector<double> sorted = ape_pct;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double e : sorted) {
    sum += e;
  }
  c.mape_pct = sum / static_cast<double>(sorted.size());
  // Nearest-rank 90th percentile.
  const size_t rank = static_cast<size_t>(std::ceil(0.9 * static_cast<double>(sorted.size()))) - 1;
  c.p90_ape_pct = sorted[std::min(rank, sorted.size() - 1)];
  c.max_ape_pct = sorted.back();
  const auto extrapolated_points = std::count(extrapolated.begin(), extrapolated.end(), true);
  c.extrapolated_share =
      static_cast<double>(extrapolated_points) / static_cast<double>(ape_pct.size());
  return c;
}

std::vector<FidelityCell> leave_one_out(const profiles::Profile& p, const LooOptions& options) {
  std::vector<FidelityCell> out;
  const auto add = [&](FidelityCell c, const char* op, std::string variant) {
    c.gpu = p.meta.gpu;
    c.source = p.meta.source;
    c.op = op;
    c.variant = std::move(variant);
    out.push_back(std::move(c));
  };

  const int64_t l2 = options.l2_bytes > 0 ? options.l2_bytes : p.meta.l2_bytes;
  std::map<std::string, std::vector<profiles::GemmRow>> gemm;
  for (const profiles::GemmRow& r : p.gemm) {
    gemm[r.dtype].push_back(r);
  }
  for (const auto& [dtype, rows] : gemm) {
    const interp::GemmTable table(rows, interp::table_dtype_bytes(dtype), l2);
    FidelityCell c = score(table);
    c.excluded = table.slower_than_larger_m();
    add(std::move(c), "gemm", dtype);
  }

  std::map<std::tuple<std::string, std::string, bool>, std::vector<profiles::AttentionPrefillRow>>
      prefill;
  for (const profiles::AttentionPrefillRow& r : p.attention_prefill) {
    prefill[{r.dtype, r.kv_dtype.empty() ? r.dtype : r.kv_dtype, r.causal}].push_back(r);
  }
  for (const auto& [key, rows] : prefill) {
    const auto& [dtype, kv_dtype, causal] = key;
    const interp::PrefillTable table(rows, causal);
    add(score(table), "attention_prefill",
        "q " + dtype + " kv " + kv_dtype + (causal ? "" : " bidirectional"));
  }

  std::map<std::pair<std::string, std::string>, std::vector<profiles::AttentionDecodeRow>> decode;
  for (const profiles::AttentionDecodeRow& r : p.attention_decode) {
    decode[{r.dtype, r.kv_dtype.empty() ? r.dtype : r.kv_dtype}].push_back(r);
  }
  for (const auto& [key, rows] : decode) {
    const interp::DecodeTable table(rows, l2, options.peak_bandwidth);
    add(score(table, [&](size_t i) { return table.cache_hot(i); }), "attention_decode",
        "q " + key.first + " kv " + key.second);
  }

  std::map<std::pair<std::string, std::string>, std::vector<interp::CurveTable::Row>> collective;
  for (const profiles::CollectiveRow& r : p.collective) {
    collective[{r.op, r.dtype}].push_back(
        {interp::collective_key(r.op, r.dtype, r.num_gpus, r.nodes),
         static_cast<double>(r.message_bytes), r.latency_us * 1e-6});
  }
  for (const auto& [key, rows] : collective) {
    add(score(interp::CurveTable(rows)), "collective", key.first + " " + key.second);
  }

  std::map<std::string, std::vector<interp::CurveTable::Row>> moe;
  for (const profiles::MoeRow& r : p.moe) {
    moe[r.dtype].push_back(
        {interp::moe_key(r), static_cast<double>(r.num_tokens), r.latency_us * 1e-6});
  }
  for (const auto& [dtype, rows] : moe) {
    add(score(interp::CurveTable(rows)), "moe", dtype);
  }

  std::map<std::string, std::vector<interp::CurveTable::Row>> elementwise;
  for (const profiles::ElementwiseRow& r : p.elementwise) {
    elementwise[r.op].push_back({interp::elementwise_key(r.model, r.op, r.tp),
                                 static_cast<double>(r.num_tokens), r.latency_us * 1e-6});
  }
  for (const auto& [op, rows] : elementwise) {
    add(score(interp::CurveTable(rows)), "elementwise", op);
  }
  return out;
}

BatchShape forward_shape(const profiles::ForwardRow& row) {
  BatchShape shape;
  const bool decode = row.kind == "decode";
  for (int64_t i = 0; i < row.batch; ++i) {
    if (decode) {
      shape.segments.push_back({1, row.context_tokens, 1});
    } else {
      shape.segments.push_back({row.q_tokens, row.context_tokens, 1});
    }
  }
  return shape;
}

std::vector<ForwardCheckRow> forward_check(const std::vector<profiles::ForwardRow>& rows,
                                           const IterationCostModel& model,
                                           const IterationCostModel* reference) {
  std::vector<ForwardCheckRow> out;
  for (const profiles::ForwardRow& r : rows) {
    ForwardCheckRow c;
    c.row = r;
    c.measured_s = r.latency_us * 1e-6;
    const BatchShape shape = forward_shape(r);
    c.predicted_s = to_seconds(model.iteration_time(shape));
    c.error_pct = (c.predicted_s - c.measured_s) / c.measured_s * 100;
    if (reference != nullptr) {
      c.reference_s = to_seconds(reference->iteration_time(shape));
      c.reference_error_pct = (c.reference_s - c.measured_s) / c.measured_s * 100;
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace servesim::models
