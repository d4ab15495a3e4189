// End-to-end fidelity tables beside the run tables of a results database (written by
// `servesim fidelity`):
//   fidelity(fidelity_id PK, csv, started_at, code_rev, mode, calibration, status)
//   fidelity_row(fidelity_id, row_index, line, csv_id, engine, engine_version, gpu, model, moe,
//                tp, isl, osl, concurrency, status, skip_reason, measured_ttft_ms,
//                measured_tpot_ms, predicted_ttft_ms, predicted_tpot_ms, ttft_error,
//                tpot_error, prediction, extrapolated_share, scenario,
//                PK(fidelity_id, row_index, prediction))
// `prediction` says which calibration produced the row: "calibrated" (the calibration file in
// effect), "held_out" (fitted without the row's model) or "in_sample" (fitted on every model).
// Errors are signed fractions: (predicted - measured) / measured.
//
// Contract: one write_fidelity() call is one transaction (all rows or none); errors throw
// servesim::Error naming the file. Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace servesim::reports {

struct FidelityHeader {
  std::string csv, started_at, code_rev, mode, calibration, status;
};

struct FidelityRowRecord {
  int64_t row_index = 0;
  int64_t line = 0;
  std::string csv_id, engine, engine_version, gpu, model;
  bool moe = false;
  int64_t tp = 0, isl = 0, osl = 0, concurrency = 0;
  std::string status;  // "ok", "skipped", "failed"
  std::string skip_reason;
  double measured_ttft_ms = 0, measured_tpot_ms = 0;
  double predicted_ttft_ms = 0, predicted_tpot_ms = 0;  // 0 when not predicted
  double ttft_error = 0, tpot_error = 0;
  std::string prediction;
  double extrapolated_share = 0;
  std::string scenario;  // the scenario document (JSON)
};

// Writes one fidelity study into `db_path` (created when missing) and returns its fidelity_id.
int64_t write_fidelity(const std::string& db_path, const FidelityHeader& header,
                       const std::vector<FidelityRowRecord>& rows);

}  // namespace servesim::reports
