// Writer of servesim profile format v1 (profiles/FORMAT.md): one CSV per table plus meta.json.
// Plain C++ so that the exact text is golden-tested without a GPU.
//
// Contract:
//  - CSV text: one header line, one line per row in the order given, '\n' line ends, no blank
//    lines, latencies in microseconds with 3 decimals, booleans as 0/1.
//  - meta.json keys appear in the order FORMAT.md lists them; text ends with '\n'.
//  - write_profile_dir() creates the directory and overwrites files of the same name.
//  - The text of every file comes from the format library (profiles/profile_tables.h: to_csv,
//    meta_json), which the importers use too; this writer only maps the harness's rows onto it.
#ifndef SERVESIM_PROFILES_HARNESS_PROFILE_WRITER_H_
#define SERVESIM_PROFILES_HARNESS_PROFILE_WRITER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "plan.h"

namespace servesim::profiling {

inline constexpr int kFormatVersion = 1;
inline constexpr const char* kHarnessVersion = "1.0.0";

struct GemmRow {
  GemmPoint point;
  double latency_us = 0;
};
struct PrefillRow {
  PrefillPoint point;
  double latency_us = 0;
};
struct DecodeRow {
  DecodePoint point;
  double latency_us = 0;
};
struct CollectiveRow {
  CollectivePoint point;
  double latency_us = 0;
};
struct MemcpyRow {
  MemcpyPoint point;
  double latency_us = 0;
};
struct ForwardRow {
  ForwardPoint point;
  double latency_us = 0;
};

// What the GPU and its libraries report; filled by the CUDA side, or by hand in tests.
struct DeviceInfo {
  std::string gpu_name;
  int sm_count = 0;
  int sm_clock_mhz = 0;   // peak SM clock
  int mem_clock_mhz = 0;  // peak memory clock
  int64_t l2_bytes = 0;
  int64_t memory_bytes = 0;
  std::string compute_capability;  // "9.0"
  std::string driver;              // NVML driver version, or the CUDA driver API version
  std::string cuda_runtime;
  std::string cublas;
  std::string cudnn;  // "" when built without cuDNN
  std::string nccl;   // "" when built without NCCL
};

// Everything measured in one run, plus what was not.
struct ProfileResults {
  std::string model_key;
  int tp = 1;
  std::string date;    // UTC ISO-8601, e.g. "2025-01-31T12:00:00Z"
  std::string method;  // how latencies were taken (see kMethodText in FORMAT.md)
  std::vector<GemmRow> gemm;
  std::vector<PrefillRow> prefill;
  std::vector<DecodeRow> decode;
  std::vector<CollectiveRow> collective;
  std::vector<MemcpyRow> memcpy;
  std::vector<ForwardRow> forward;
  std::map<std::string, std::string> skipped;  // table -> reason (plan skips and run failures)
};

// Maps a CUDA device name to servesim's GPU catalog key (models/catalog/gpus.json), e.g.
// "NVIDIA H100 80GB HBM3" -> "h100_sxm". Unknown names map to the lowercase name with every run of
// characters outside [a-z0-9] replaced by '_' and a leading "nvidia_" removed.
std::string gpu_catalog_key(const std::string& device_name);

std::string gemm_csv(const std::vector<GemmRow>& rows);
std::string prefill_csv(const std::vector<PrefillRow>& rows);
std::string decode_csv(const std::vector<DecodeRow>& rows);
std::string collective_csv(const std::vector<CollectiveRow>& rows);
std::string memcpy_csv(const std::vector<MemcpyRow>& rows);
std::string forward_csv(const std::vector<ForwardRow>& rows);

// Table name -> file name for every table that has at least one row.
std::map<std::string, std::string> written_tables(const ProfileResults& results);

std::string meta_json(const DeviceInfo& device, const ProfileResults& results);

// Where the profile belongs under the repository root: "profiles/" + profiles::profile_subdir()
// (e.g. "profiles/h100_sxm/servesim_harness_qwen3-32b_tp4").
std::string default_profile_dir(const DeviceInfo& device, const ProfileResults& results);

// Writes meta.json and the non-empty tables into `dir`. Throws HarnessError on I/O failure.
void write_profile_dir(const std::string& dir, const DeviceInfo& device,
                       const ProfileResults& results);

// Current UTC time as ISO-8601 with seconds and a 'Z' suffix.
std::string utc_now_iso8601();

}  // namespace servesim::profiling

#endif  // SERVESIM_PROFILES_HARNESS_PROFILE_WRITER_H_
