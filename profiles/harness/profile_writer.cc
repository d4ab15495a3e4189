#include "profile_writer.h"

#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

namespace servesim::profiling {
namespace {

std::string fmt_us(double us) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", us);
  return buf;
}

template <typename Row, typename Fn>
std::string csv(const char* header, const std::vector<Row>& rows, Fn&& line) {
  std::string out = std::string(header) + "\n";
  for (const Row& r : rows) {
    out += line(r.point) + "," + fmt_us(r.latency_us) + "\n";
  }
  return out;
}

std::string s(int64_t v) { return std::to_string(v); }

std::string lower(std::string text) {
  for (char& c : text) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return text;
}

bool has(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    throw HarnessError("cannot write " + path.string());
  }
}

}  // namespace

std::string gpu_catalog_key(const std::string& device_name) {
  std::string n = lower(device_name);
  // Order matters: "H100 PCIe" before the generic H100, "80GB" A100 before the 40 GB one.
  if (has(n, "h200")) {
    return "h200_sxm";
  }
  if (has(n, "h100") && has(n, "pcie")) {
    return "h100_pcie";
  }
  if (has(n, "h100") && (has(n, "hbm3") || has(n, "sxm"))) {
    return "h100_sxm";
  }
  if (has(n, "a100") && has(n, "80gb")) {
    return "a100_80gb_sxm";
  }
  if (has(n, "a100") && has(n, "40gb") && !has(n, "pcie")) {
    return "a100_40gb_sxm";
  }
  if (has(n, "l40s")) {
    return "l40s";
  }
  if (has(n, "rtx 4090")) {
    return "rtx4090";
  }
  if (has(n, "b200")) {
    return "b200_sxm";
  }
  std::string key;
  for (char c : n) {
    bool keep = std::isalnum(static_cast<unsigned char>(c)) != 0;
    if (keep) {
      key += c;
    } else if (!key.empty() && key.back() != '_') {
      key += '_';
    }
  }
  while (!key.empty() && key.back() == '_') {
    key.pop_back();
  }
  const std::string prefix = "nvidia_";
  if (key.rfind(prefix, 0) == 0) {
    key = key.substr(prefix.size());
  }
  return key.empty() ? "unknown_gpu" : key;
}

std::string gemm_csv(const std::vector<GemmRow>& rows) {
  return csv("dtype,m,n,k,latency_us", rows, [](const GemmPoint& p) {
    return p.dtype + "," + s(p.m) + "," + s(p.n) + "," + s(p.k);
  });
}

std::string prefill_csv(const std::vector<PrefillRow>& rows) {
  return csv("dtype,batch,q_tokens,prefix_tokens,num_heads,num_kv_heads,head_dim,causal,latency_us",
             rows, [](const PrefillPoint& p) {
               return p.dtype + "," + s(p.batch) + "," + s(p.q_tokens) + "," + s(p.prefix_tokens) +
                      "," + s(p.num_heads) + "," + s(p.num_kv_heads) + "," + s(p.head_dim) + "," +
                      (p.causal ? "1" : "0");
             });
}

std::string decode_csv(const std::vector<DecodeRow>& rows) {
  return csv("dtype,kv_dtype,batch,context_tokens,num_heads,num_kv_heads,head_dim,latency_us", rows,
             [](const DecodePoint& p) {
               return p.dtype + "," + p.kv_dtype + "," + s(p.batch) + "," + s(p.context_tokens) +
                      "," + s(p.num_heads) + "," + s(p.num_kv_heads) + "," + s(p.head_dim);
             });
}

std::string collective_csv(const std::vector<CollectiveRow>& rows) {
  return csv("op,dtype,num_gpus,message_bytes,latency_us", rows, [](const CollectivePoint& p) {
    return p.op + "," + p.dtype + "," + std::to_string(p.num_gpus) + "," + s(p.message_bytes);
  });
}

std::string memcpy_csv(const std::vector<MemcpyRow>& rows) {
  return csv("kind,bytes,latency_us", rows,
             [](const MemcpyPoint& p) { return p.kind + "," + s(p.bytes); });
}

std::string forward_csv(const std::vector<ForwardRow>& rows) {
  return csv("kind,batch,q_tokens,context_tokens,graph,latency_us", rows,
             [](const ForwardPoint& p) {
               return p.kind + "," + s(p.batch) + "," + s(p.q_tokens) + "," + s(p.context_tokens) +
                      "," + (p.graph ? "1" : "0");
             });
}

std::map<std::string, std::string> written_tables(const ProfileResults& r) {
  std::map<std::string, std::string> t;
  auto add = [&t](const std::string& name, bool any) {
    if (any) {
      t[name] = name + ".csv";
    }
  };
  add("gemm", !r.gemm.empty());
  add("attention_prefill", !r.prefill.empty());
  add("attention_decode", !r.decode.empty());
  add("collective", !r.collective.empty());
  add("memcpy", !r.memcpy.empty());
  add("forward", !r.forward.empty());
  return t;
}

std::string meta_json(const DeviceInfo& d, const ProfileResults& r) {
  nlohmann::ordered_json j;
  j["format"] = "servesim-profile";
  j["version"] = kFormatVersion;
  j["gpu"] = gpu_catalog_key(d.gpu_name);
  j["gpu_name"] = d.gpu_name;
  j["compute_capability"] = d.compute_capability;
  j["sm_count"] = d.sm_count;
  j["sm_clock_mhz"] = d.sm_clock_mhz;
  j["mem_clock_mhz"] = d.mem_clock_mhz;
  j["l2_bytes"] = d.l2_bytes;
  j["memory_bytes"] = d.memory_bytes;
  j["driver"] = d.driver;
  j["cuda_runtime"] = d.cuda_runtime;
  j["cublas"] = d.cublas;
  j["cudnn"] = d.cudnn;
  j["nccl"] = d.nccl;
  j["harness_version"] = kHarnessVersion;
  j["date"] = r.date;
  j["source"] = "servesim-profile";
  j["method"] = r.method;
  j["model"] = r.model_key;
  j["tp"] = r.tp;
  j["license"] = "measured by the servesim project; same license as the repository";
  nlohmann::ordered_json tables = nlohmann::ordered_json::object();
  for (const auto& [name, file] : written_tables(r)) {
    tables[name] = file;
  }
  j["tables"] = tables;
  nlohmann::ordered_json skipped = nlohmann::ordered_json::object();
  for (const auto& [name, why] : r.skipped) {
    skipped[name] = why;
  }
  j["skipped"] = skipped;
  return j.dump(2) + "\n";
}

void write_profile_dir(const std::string& dir, const DeviceInfo& device,
                       const ProfileResults& results) {
  std::filesystem::path root(dir);
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec) {
    throw HarnessError("cannot create " + dir + ": " + ec.message());
  }
  std::map<std::string, std::string> tables = written_tables(results);
  std::vector<std::pair<std::string, std::string>> files;
  if (tables.count("gemm")) {
    files.emplace_back("gemm.csv", gemm_csv(results.gemm));
  }
  if (tables.count("attention_prefill")) {
    files.emplace_back("attention_prefill.csv", prefill_csv(results.prefill));
  }
  if (tables.count("attention_decode")) {
    files.emplace_back("attention_decode.csv", decode_csv(results.decode));
  }
  if (tables.count("collective")) {
    files.emplace_back("collective.csv", collective_csv(results.collective));
  }
  if (tables.count("memcpy")) {
    files.emplace_back("memcpy.csv", memcpy_csv(results.memcpy));
  }
  if (tables.count("forward")) {
    files.emplace_back("forward.csv", forward_csv(results.forward));
  }
  for (const auto& [name, text] : files) {
    write_file(root / name, text);
  }
  write_file(root / "meta.json", meta_json(device, results));
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
