// Format helpers shared by the loader, the writers, the importers and compare: dtype and GPU
// names, row keys, CSV text and meta.json text.
#include "profiles/profile_tables.h"

#include <boost/algorithm/string/case_conv.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

#include "profiles/profile_meta_keys.h"
#include "core/error.h"

namespace servesim::profiles {
namespace {

bool has(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

const char* bit(bool value) { return value ? "1" : "0"; }

const std::string& kv_or(const std::string& kv_dtype, const std::string& dtype) {
  return kv_dtype.empty() ? dtype : kv_dtype;
}

// Appends "<key>,<latency>\n" for every row after `header`.
template <typename Row, typename KeyFn>
std::string csv_text(const std::string& header, const std::vector<Row>& rows, KeyFn key) {
  std::string out;
  out.reserve(header.size() + 1 + rows.size() * 40);
  out += header;
  out += '\n';
  for (const Row& row : rows) {
    out += key(row);
    out += ',';
    out += format_latency_us(row.latency_us);
    out += '\n';
  }
  return out;
}

}  // namespace

const std::vector<MetaKey>& meta_keys() {
  static const std::vector<MetaKey> kKeys = {{"gpu"},
                                             {"gpu_name"},
                                             {"compute_capability", false},
                                             {"sm_count", true, true},
                                             {"sm_clock_mhz", true, true},
                                             {"mem_clock_mhz", true, true},
                                             {"l2_bytes", true, true},
                                             {"memory_bytes", true, true},
                                             {"driver"},
                                             {"cuda_runtime"},
                                             {"cublas"},
                                             {"cudnn"},
                                             {"nccl"},
                                             {"harness_version"},
                                             {"date"},
                                             {"source"},
                                             {"method"},
                                             {"model"},
                                             {"tp", true, true},
                                             {"license"}};
  return kKeys;
}

bool is_reserved_meta_key(const std::string& key) {
  if (key == "format" || key == "version" || key == "tables" || key == "skipped") {
    return true;
  }
  return std::any_of(meta_keys().begin(), meta_keys().end(),
                     [&key](const MetaKey& k) { return k.name == key; });
}

const std::vector<std::string>& table_names() {
  static const std::vector<std::string> kNames = {
      "gemm", "attention_prefill", "attention_decode", "collective",
      "moe",  "elementwise",       "memcpy",           "forward"};
  return kNames;
}

std::string canonical_dtype(const std::string& name) {
  static const std::vector<std::pair<std::string, std::string>> kAliases = {
      {"bf16", "bf16"},   {"bfloat16", "bf16"},     {"fp16", "fp16"},    {"float16", "fp16"},
      {"half", "fp16"},   {"fp8_e4m3", "fp8_e4m3"}, {"fp8", "fp8_e4m3"}, {"fp8_block", "fp8_block"},
      {"fp8_rowwise", "fp8_rowwise"},
      {"nvfp4", "nvfp4"}, {"int8", "int8"},         {"int4_wo", "int4_wo"}, {"mxfp4", "mxfp4"},
      {"w4a16_mxfp4", "mxfp4"}};
  for (const auto& [alias, canonical] : kAliases) {
    if (name == alias) {
      return canonical;
    }
  }
  return "";
}

std::string gpu_catalog_key(const std::string& device_name) {
  std::string n = boost::algorithm::to_lower_copy(device_name);
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
    if (std::isalnum(static_cast<unsigned char>(c)) != 0) {
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

std::string format_latency_us(double latency_us) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", latency_us);
  return buf;
}

std::string row_key(const GemmRow& r) { return fmt::format("{},{},{},{}", r.dtype, r.m, r.n, r.k); }

std::string row_key(const AttentionPrefillRow& r) {
  return fmt::format("{},{},{},{},{},{},{},{},{}", r.dtype, kv_or(r.kv_dtype, r.dtype), r.batch,
                     r.q_tokens, r.prefix_tokens, r.num_heads, r.num_kv_heads, r.head_dim,
                     bit(r.causal));
}

std::string row_key(const AttentionDecodeRow& r) {
  return fmt::format("{},{},{},{},{},{},{}", r.dtype, kv_or(r.kv_dtype, r.dtype), r.batch,
                     r.context_tokens, r.num_heads, r.num_kv_heads, r.head_dim);
}

std::string row_key(const CollectiveRow& r) {
  return fmt::format("{},{},{},{},{}", r.op, r.dtype, r.num_gpus, r.message_bytes, r.nodes);
}

std::string row_key(const MoeRow& r) {
  return fmt::format("{},{},{},{},{},{},{},{},{}", r.dtype, r.num_tokens, r.hidden_size,
                     r.inter_size, r.topk, r.num_experts, r.moe_tp, r.moe_ep, r.distribution);
}

std::string row_key(const ElementwiseRow& r) {
  return fmt::format("{},{},{},{}", r.model, r.op, r.num_tokens, r.tp);
}

std::string row_key(const MemcpyRow& r) { return fmt::format("{},{}", r.kind, r.bytes); }

std::string row_key(const ForwardRow& r) {
  return fmt::format("{},{},{},{},{}", r.kind, r.batch, r.q_tokens, r.context_tokens, bit(r.graph));
}

std::string to_csv(const std::vector<GemmRow>& rows) {
  return csv_text("dtype,m,n,k,latency_us", rows, [](const GemmRow& r) { return row_key(r); });
}

std::string to_csv(const std::vector<AttentionPrefillRow>& rows) {
  bool with_kv = std::any_of(rows.begin(), rows.end(), [](const AttentionPrefillRow& r) {
    return !r.kv_dtype.empty() && r.kv_dtype != r.dtype;
  });
  std::string header =
      "dtype,batch,q_tokens,prefix_tokens,num_heads,num_kv_heads,head_dim,causal,latency_us";
  std::string out = header + (with_kv ? ",kv_dtype\n" : "\n");
  for (const AttentionPrefillRow& r : rows) {
    fmt::format_to(std::back_inserter(out), "{},{},{},{},{},{},{},{},{}", r.dtype, r.batch,
                   r.q_tokens, r.prefix_tokens, r.num_heads, r.num_kv_heads, r.head_dim,
                   bit(r.causal), format_latency_us(r.latency_us));
    if (with_kv) {
      out += ',';
      out += kv_or(r.kv_dtype, r.dtype);
    }
    out += '\n';
  }
  return out;
}

std::string to_csv(const std::vector<AttentionDecodeRow>& rows) {
  return csv_text("dtype,kv_dtype,batch,context_tokens,num_heads,num_kv_heads,head_dim,latency_us",
                  rows, [](const AttentionDecodeRow& r) { return row_key(r); });
}

std::string to_csv(const std::vector<CollectiveRow>& rows) {
  bool with_nodes =
      std::any_of(rows.begin(), rows.end(), [](const CollectiveRow& r) { return r.nodes != 1; });
  std::string out =
      std::string("op,dtype,num_gpus,message_bytes,latency_us") + (with_nodes ? ",nodes\n" : "\n");
  for (const CollectiveRow& r : rows) {
    fmt::format_to(std::back_inserter(out), "{},{},{},{},{}", r.op, r.dtype, r.num_gpus,
                   r.message_bytes, format_latency_us(r.latency_us));
    if (with_nodes) {
      fmt::format_to(std::back_inserter(out), ",{}", r.nodes);
    }
    out += '\n';
  }
  return out;
}

std::string to_csv(const std::vector<MoeRow>& rows) {
  return csv_text(
      "dtype,num_tokens,hidden_size,inter_size,topk,num_experts,moe_tp,moe_ep,distribution,"
      "latency_us",
      rows, [](const MoeRow& r) { return row_key(r); });
}

std::string to_csv(const std::vector<ElementwiseRow>& rows) {
  return csv_text("model,op,num_tokens,tp,latency_us", rows,
                  [](const ElementwiseRow& r) { return row_key(r); });
}

std::string to_csv(const std::vector<MemcpyRow>& rows) {
  return csv_text("kind,bytes,latency_us", rows, [](const MemcpyRow& r) { return row_key(r); });
}

std::string to_csv(const std::vector<ForwardRow>& rows) {
  return csv_text("kind,batch,q_tokens,context_tokens,graph,latency_us", rows,
                  [](const ForwardRow& r) { return row_key(r); });
}

std::map<std::string, std::string> table_files(const Profile& p) {
  std::map<std::string, std::string> files;
  auto add = [&files](const char* name, bool any) {
    if (any) {
      files[name] = std::string(name) + ".csv";
    }
  };
  add("gemm", !p.gemm.empty());
  add("attention_prefill", !p.attention_prefill.empty());
  add("attention_decode", !p.attention_decode.empty());
  add("collective", !p.collective.empty());
  add("moe", !p.moe.empty());
  add("elementwise", !p.elementwise.empty());
  add("memcpy", !p.memcpy.empty());
  add("forward", !p.forward.empty());
  return files;
}

std::string meta_json(const Profile& profile) {
  const ProfileMeta& m = profile.meta;
  nlohmann::ordered_json j;
  j["format"] = kFormatName;
  j["version"] = kFormatVersion;
  auto field = [&m](const std::string& key) -> const std::string* {
    auto it = m.fields.find(key);
    return it == m.fields.end() ? nullptr : &it->second;
  };
  for (const MetaKey& key : meta_keys()) {
    std::string value;
    if (key.name == "gpu") {
      value = m.gpu;
    } else if (key.name == "gpu_name") {
      value = m.gpu_name;
    } else if (key.name == "source") {
      value = m.source;
    } else if (key.name == "model") {
      value = m.model;
    } else if (key.name == "tp") {
      value = std::to_string(m.tp);
    } else if (key.name == "l2_bytes") {
      value = std::to_string(m.l2_bytes);
    } else if (key.name == "date") {
      value = m.date;
    } else if (key.name == "license") {
      value = m.license;
    } else if (const std::string* text = field(key.name)) {
      value = *text;
    } else if (!key.required) {
      continue;
    } else {
      value = key.integer ? "0" : "";
    }
    int64_t number = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (key.integer && ec == std::errc() && end == value.data() + value.size()) {
      j[key.name] = number;
    } else {
      j[key.name] = value;
    }
  }
  for (const auto& [key, value] : m.fields) {
    if (!is_reserved_meta_key(key)) {
      j[key] = value;
    }
  }
  nlohmann::ordered_json tables = nlohmann::ordered_json::object();
  for (const auto& [name, file] : table_files(profile)) {
    tables[name] = file;
  }
  j["tables"] = tables;
  nlohmann::ordered_json skipped = nlohmann::ordered_json::object();
  for (const auto& [name, why] : m.skipped) {
    skipped[name] = why;
  }
  j["skipped"] = skipped;
  return j.dump(2) + "\n";
}

const std::string& kernel_engine(const ProfileMeta& meta) {
  static const std::string kNone;
  const auto it = meta.fields.find("engine");
  return it == meta.fields.end() ? kNone : it->second;
}

std::string profile_subdir(const Profile& profile) {
  const ProfileMeta& m = profile.meta;
  std::string name;
  if (m.source == "servesim-profile") {
    name = "servesim_harness";
  } else {
    for (char c : boost::algorithm::to_lower_copy(m.source)) {
      name += (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_') ? c : '_';
    }
  }
  auto variant = m.fields.find("variant");
  if (variant != m.fields.end() && !variant->second.empty()) {
    name += "_" + variant->second;
  }
  if (m.model != "generic") {
    name += "_" + m.model;
  }
  if (m.tp > 1) {
    name += "_tp" + std::to_string(m.tp);
  }
  return m.gpu + "/" + name;
}

}  // namespace servesim::profiles
