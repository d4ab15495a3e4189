#include "profile_writer.h"

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "profiles/profile_tables.h"

namespace servesim::profiling {
namespace {

namespace pf = servesim::profiles;

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    throw HarnessError("cannot write " + path.string());
  }
}

pf::GemmRow convert(const GemmRow& r) {
  const GemmPoint& p = r.point;
  return {p.dtype, p.m, p.n, p.k, r.latency_us};
}

pf::AttentionPrefillRow convert(const PrefillRow& r) {
  const PrefillPoint& p = r.point;
  pf::AttentionPrefillRow out;
  out.dtype = p.dtype;
  out.kv_dtype = p.dtype;
  out.batch = p.batch;
  out.q_tokens = p.q_tokens;
  out.prefix_tokens = p.prefix_tokens;
  out.num_heads = static_cast<int>(p.num_heads);
  out.num_kv_heads = static_cast<int>(p.num_kv_heads);
  out.head_dim = static_cast<int>(p.head_dim);
  out.causal = p.causal;
  out.latency_us = r.latency_us;
  return out;
}

pf::AttentionDecodeRow convert(const DecodeRow& r) {
  const DecodePoint& p = r.point;
  pf::AttentionDecodeRow out;
  out.dtype = p.dtype;
  out.kv_dtype = p.kv_dtype;
  out.batch = p.batch;
  out.context_tokens = p.context_tokens;
  out.num_heads = static_cast<int>(p.num_heads);
  out.num_kv_heads = static_cast<int>(p.num_kv_heads);
  out.head_dim = static_cast<int>(p.head_dim);
  out.latency_us = r.latency_us;
  return out;
}

pf::CollectiveRow convert(const CollectiveRow& r) {
  const CollectivePoint& p = r.point;
  pf::CollectiveRow out;
  out.op = p.op;
  out.dtype = p.dtype;
  out.num_gpus = p.num_gpus;
  out.message_bytes = p.message_bytes;
  out.latency_us = r.latency_us;
  return out;
}

pf::MemcpyRow convert(const MemcpyRow& r) { return {r.point.kind, r.point.bytes, r.latency_us}; }

pf::ForwardRow convert(const ForwardRow& r) {
  const ForwardPoint& p = r.point;
  return {p.kind, p.batch, p.q_tokens, p.context_tokens, p.graph, r.latency_us};
}

template <typename Row>
auto convert_all(const std::vector<Row>& rows) {
  std::vector<decltype(convert(rows.front()))> out;
  out.reserve(rows.size());
  for (const Row& r : rows) {
    out.push_back(convert(r));
  }
  return out;
}

// The measured results as a profile of the shared format (profiles/profile_tables.h), which owns
// the text of every file.
pf::Profile to_profile(const DeviceInfo& d, const ProfileResults& r) {
  pf::Profile p;
  pf::ProfileMeta& m = p.meta;
  m.gpu = gpu_catalog_key(d.gpu_name);
  m.gpu_name = d.gpu_name;
  m.source = "servesim-profile";
  m.model = r.model_key;
  m.tp = r.tp;
  m.l2_bytes = d.l2_bytes;
  m.date = r.date;
  m.license = "measured by the servesim project; same license as the repository";
  m.fields["compute_capability"] = d.compute_capability;
  m.fields["sm_count"] = std::to_string(d.sm_count);
  m.fields["sm_clock_mhz"] = std::to_string(d.sm_clock_mhz);
  m.fields["mem_clock_mhz"] = std::to_string(d.mem_clock_mhz);
  m.fields["memory_bytes"] = std::to_string(d.memory_bytes);
  m.fields["driver"] = d.driver;
  m.fields["cuda_runtime"] = d.cuda_runtime;
  m.fields["cublas"] = d.cublas;
  m.fields["cudnn"] = d.cudnn;
  m.fields["nccl"] = d.nccl;
  m.fields["harness_version"] = kHarnessVersion;
  m.fields["method"] = r.method;
  // Tables that time a library kernel serving engines do not run (profiles/FORMAT.md, meta.json):
  // fp8 GEMMs on operands quantized beforehand, cuDNN attention.
  m.fields["standalone_kernels"] = "quantized_gemm,attention";
  m.skipped = r.skipped;
  p.gemm = convert_all(r.gemm);
  p.attention_prefill = convert_all(r.prefill);
  p.attention_decode = convert_all(r.decode);
  p.collective = convert_all(r.collective);
  p.memcpy = convert_all(r.memcpy);
  p.forward = convert_all(r.forward);
  return p;
}

}  // namespace

std::string gpu_catalog_key(const std::string& device_name) {
  return pf::gpu_catalog_key(device_name);
}

std::string gemm_csv(const std::vector<GemmRow>& rows) { return pf::to_csv(convert_all(rows)); }

std::string prefill_csv(const std::vector<PrefillRow>& rows) {
  return pf::to_csv(convert_all(rows));
}

std::string decode_csv(const std::vector<DecodeRow>& rows) { return pf::to_csv(convert_all(rows)); }

std::string collective_csv(const std::vector<CollectiveRow>& rows) {
  return pf::to_csv(convert_all(rows));
}

std::string memcpy_csv(const std::vector<MemcpyRow>& rows) { return pf::to_csv(convert_all(rows)); }

std::string forward_csv(const std::vector<ForwardRow>& rows) {
  return pf::to_csv(convert_all(rows));
}

std::map<std::string, std::string> written_tables(const ProfileResults& r) {
  return pf::table_files(to_profile(DeviceInfo{}, r));
}

std::string meta_json(const DeviceInfo& d, const ProfileResults& r) {
  return pf::meta_json(to_profile(d, r));
}

std::string default_profile_dir(const DeviceInfo& d, const ProfileResults& r) {
  return "profiles/" + pf::profile_subdir(to_profile(d, r));
}

void write_profile_dir(const std::string& dir, const DeviceInfo& device,
                       const ProfileResults& results) {
  // Not pf::write_profile(): that one refuses rows it could not load back (a NaN latency), and
  // a measurement run must keep whatever it measured. The text is the shared writer's.
  std::filesystem::path root(dir);
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec) {
    throw HarnessError("cannot create " + dir + ": " + ec.message());
  }
  pf::Profile p = to_profile(device, results);
  std::map<std::string, std::string> tables = pf::table_files(p);
  auto emit = [&](const char* table, auto text_fn) {
    auto it = tables.find(table);
    if (it != tables.end()) {
      write_file(root / it->second, text_fn());
    }
  };
  emit("gemm", [&] { return pf::to_csv(p.gemm); });
  emit("attention_prefill", [&] { return pf::to_csv(p.attention_prefill); });
  emit("attention_decode", [&] { return pf::to_csv(p.attention_decode); });
  emit("collective", [&] { return pf::to_csv(p.collective); });
  emit("memcpy", [&] { return pf::to_csv(p.memcpy); });
  emit("forward", [&] { return pf::to_csv(p.forward); });
  write_file(root / "meta.json", pf::meta_json(p));
}

std::string utc_now_iso8601() {
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace servesim::profiling
