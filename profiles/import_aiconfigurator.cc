#include "profiles/import_aiconfigurator.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <set>

#include "profiles/import_common.h"
#include "profiles/profile_csv.h"
#include "core/error.h"

namespace servesim::profiles {
namespace fs = std::filesystem;
namespace {

// {} is the serving engine whose operators the tables timed.
const char* kMethod =
    "aiconfigurator collector: each {} operator run with synthetic weights on one GPU "
    "(collectives "
    "on 2, 4 or 8 GPUs of one node), 3 warm-ups, then timed with CUDA events, normally replaying a "
    "captured CUDA graph (eager when capture fails); latency_us is upstream's average time of one "
    "operator call (ms x 1000), not a median; repeated measurements of one key are merged by their "
    "median. attention_prefill rows include the KV-cache write and have no cached prefix; "
    "attention_decode rows reuse the same KV blocks every iteration, so points whose KV cache fits "
    "in L2 are cache-hot (optimistic). collective: nccl-tests out-of-place time for all_reduce, "
    "all_gather, reduce_scatter, alltoall; custom_all_reduce is vLLM's custom all-reduce replayed "
    "in a CUDA graph";

// A serving engine whose operator tables the data set holds, as its sub-directory
// <prefix><version>/ names it.
struct Framework {
  const char* prefix;        // "vllm_"
  const char* variant;       // meta "variant": profile_subdir() is "<gpu>/aiconfigurator_<variant>"
  const char* name;          // meta "framework"
  // meta "engine" (ProfiledParams::engine_tables): "" for vLLM, whose tables price every
  // deployment; an engine's own name where its tables serve only that engine's deployments.
  const char* engine;
  // MoE rows of several kernel sources for one dtype: the engine's default backend, kept alone
  // for that dtype (the others are opt-in backends); "" keeps every source.
  const char* default_moe_kernel;
};
constexpr Framework kFrameworks[] = {
    {"vllm_", "vllm", "vLLM", "", ""},
    {"trtllm_", "trtllm", "TensorRT-LLM", "trtllm", "moe_torch_flow_cutlass"},
    {"sglang_", "sglang", "SGLang", "sglang", ""},
};

// Bytes of a collective of `message_size` elements of `element_bytes` each (the row's
// message_size column). Throws InputError at the row for a message over 1 TiB, far above any
// measured collective, so that the product cannot overflow.
int64_t message_bytes(const CsvReader& csv, int message_size, int64_t element_bytes) {
  constexpr int64_t kMaxMessageBytes = int64_t{1} << 40;
  const int64_t elements = csv.integer(message_size, 1);
  if (elements > kMaxMessageBytes / element_bytes) {
    csv.fail(fmt::format("column message_size: expected at most {} elements of {} bytes (1 TiB), "
                         "found {}",
                         kMaxMessageBytes / element_bytes, element_bytes, elements));
  }
  return elements * element_bytes;
}

// Facts gathered across the tables of one system.
struct SystemFacts {
  std::set<std::string> devices;
  std::set<std::string> versions;  // framework version column of the vllm tables
  std::set<std::string> kernels;   // kernel_source column of the vllm tables
};

void note_columns(const CsvReader& csv, SystemFacts* facts, bool vllm_table) {
  int device = csv.find("device");
  if (device >= 0) {
    facts->devices.insert(csv.text(device));
  }
  if (!vllm_table) {
    return;
  }
  int version = csv.find("version");
  if (version >= 0) {
    facts->versions.insert(csv.text(version));
  }
  int kernel = csv.find("kernel_source");
  if (kernel >= 0) {
    facts->kernels.insert(csv.text(kernel));
  }
}

int64_t element_bytes(const std::string& dtype) {
  if (dtype == "bf16" || dtype == "fp16") {
    return 2;
  }
  if (dtype == "int8" || dtype == "fp8_e4m3") {
    return 1;
  }
  return 0;
}

void import_gemm(const std::string& path, Profile* p, ImportNotes* notes, SystemFacts* facts) {
  const char* expected = "device,gemm_dtype,m,n,k,latency";
  CsvReader csv(path);
  csv.require("device", expected);  // the GPU the table was measured on
  int dtype = csv.require("gemm_dtype", expected), m = csv.require("m", expected),
      n = csv.require("n", expected), k = csv.require("k", expected),
      lat = csv.require("latency", expected);
  RowMerger<GemmRow> rows;
  std::map<std::string, int64_t> unknown, no_rows;
  while (csv.next()) {
    note_columns(csv, facts, true);
    GemmRow r;
    r.dtype = canonical_dtype(csv.text(dtype));
    if (r.dtype.empty()) {
      ++unknown[csv.text(dtype)];
      continue;
    }
    if (csv.text(m) == "0") {  // TensorRT-LLM's tables time an empty GEMM too
      ++no_rows[csv.text(m)];
      continue;
    }
    r.m = csv.integer(m, 1);
    r.n = csv.integer(n, 1);
    r.k = csv.integer(k, 1);
    r.latency_us = ms_to_us(csv.non_negative(lat));
    rows.add(std::move(r));
  }
  notes->counted("gemm", unknown, "gemm_dtype");
  notes->counted("gemm", no_rows, "m", " (no rows to multiply)");
  notes->merged("gemm", rows.merged());
  p->gemm = rows.take();
}

// Context (prefill) or generation (decode) attention; both files have the same columns.
void import_attention(const std::string& path, bool context, Profile* p, ImportNotes* notes,
                      SystemFacts* facts) {
  const char* expected =
      "device,batch_size,isl,num_heads,num_key_value_heads,head_dim,beam_width,attn_dtype,"
      "kv_cache_dtype,step,latency (optional window_size)";
  const std::string table = context ? "attention_prefill" : "attention_decode";
  CsvReader csv(path);
  csv.require("device", expected);  // the GPU the table was measured on
  int batch = csv.require("batch_size", expected), isl = csv.require("isl", expected),
      heads = csv.require("num_heads", expected),
      kv_heads = csv.require("num_key_value_heads", expected),
      head_dim = csv.require("head_dim", expected), beam = csv.require("beam_width", expected),
      dtype = csv.require("attn_dtype", expected), kv = csv.require("kv_cache_dtype", expected),
      step = csv.require("step", expected), lat = csv.require("latency", expected),
      window = csv.find("window_size");
  RowMerger<AttentionPrefillRow> prefill;
  RowMerger<AttentionDecodeRow> decode;
  std::map<std::string, int64_t> unknown, windowed, beams, steps;
  while (csv.next()) {
    note_columns(csv, facts, true);
    std::string q_type = canonical_dtype(csv.text(dtype));
    std::string kv_type = canonical_dtype(csv.text(kv));
    if (q_type.empty() || kv_type.empty()) {
      ++unknown[csv.text(dtype) + "/" + csv.text(kv)];
      continue;
    }
    if (window >= 0 && csv.integer(window, 0) != 0) {
      ++windowed[csv.text(window)];
      continue;
    }
    if (csv.integer(beam, 1) != 1) {
      ++beams[csv.text(beam)];
      continue;
    }
    int64_t isl_tokens = csv.integer(isl, 1);
    int64_t step_tokens = csv.integer(step, 0);
    if (context) {
      if (step_tokens != 0) {
        ++steps[csv.text(step)];
        continue;
      }
      AttentionPrefillRow r;
      r.dtype = q_type;
      r.kv_dtype = kv_type;
      r.batch = csv.integer(batch, 1);
      r.q_tokens = isl_tokens;
      r.prefix_tokens = 0;
      r.num_heads = csv.small_integer(heads, 1);
      r.num_kv_heads = csv.small_integer(kv_heads, 1);
      r.head_dim = csv.small_integer(head_dim, 1);
      r.causal = true;
      r.latency_us = ms_to_us(csv.non_negative(lat));
      prefill.add(std::move(r));
    } else {
      AttentionDecodeRow r;
      r.dtype = q_type;
      r.kv_dtype = kv_type;
      r.batch = csv.integer(batch, 1);
      r.context_tokens = isl_tokens + step_tokens;
      r.num_heads = csv.small_integer(heads, 1);
      r.num_kv_heads = csv.small_integer(kv_heads, 1);
      r.head_dim = csv.small_integer(head_dim, 1);
      r.latency_us = ms_to_us(csv.non_negative(lat));
      decode.add(std::move(r));
    }
  }
  notes->counted(table, unknown, "attn_dtype/kv_cache_dtype");
  notes->counted(table, windowed, "window_size", " (sliding-window attention)");
  notes->counted(table, beams, "beam_width");
  notes->counted(table, steps, "step");
  if (context) {
    notes->merged(table, prefill.merged());
    p->attention_prefill = prefill.take();
  } else {
    notes->merged(table, decode.merged());
    p->attention_decode = decode.take();
  }
}

// Which MoE rows of several kernel sources an import keeps: never a non-gated kernel
// ("..._nongated": an activation without a gate, where servesim's MoE models are gated), and for
// a dtype that the framework's default backend timed, only that backend's rows.
class MoeKernelFilter {
 public:
  MoeKernelFilter(const std::string& path, const Framework& framework)
      : default_kernel_(framework.default_moe_kernel) {
    if (default_kernel_.empty()) return;
    CsvReader scan(path);
    const int kernel = scan.find("kernel_source"), dtype = scan.find("moe_dtype");
    if (kernel < 0 || dtype < 0) return;
    while (scan.next()) {
      if (scan.field(kernel) == default_kernel_) default_dtypes_.insert(scan.text(dtype));
    }
  }
  // The row's kernel source when the import leaves the row out, else "".
  std::string dropped(const CsvReader& csv, int kernel, int dtype) const {
    if (kernel < 0) return "";
    const std::string source = csv.text(kernel);
    if (source.find("nongated") != std::string::npos) return source;
    if (default_dtypes_.count(csv.text(dtype)) && source != default_kernel_) return source;
    return "";
  }
  void note(ImportNotes* notes, const std::map<std::string, int64_t>& dropped) const {
    notes->counted("moe", dropped, "kernel_source",
                   default_kernel_.empty()
                       ? " (non-gated activation)"
                       : " (non-gated activation, or a backend other than the default " +
                             default_kernel_ + " where it timed the dtype)");
  }

 private:
  std::string default_kernel_;
  std::set<std::string> default_dtypes_;
};

void import_moe(const std::string& path, const AiconfiguratorImportOptions& options,
                const Framework& framework, Profile* p, ImportNotes* notes, SystemFacts* facts) {
  const char* expected =
      "device,moe_dtype,num_tokens,hidden_size,inter_size,topk,num_experts,moe_tp_size,moe_ep_size,"
      "distribution,latency";
  std::string keep;  // distribution kept; "" = all
  if (!options.all_moe_distributions) {
    CsvReader scan(path);
    int dist = scan.require("distribution", expected);
    keep = "power_law_1.01";
    while (scan.next()) {
      if (scan.field(dist) == "balanced") {
        keep = "balanced";
        break;
      }
    }
  }
  CsvReader csv(path);
  csv.require("device", expected);  // the GPU the table was measured on
  int dtype = csv.require("moe_dtype", expected), tokens = csv.require("num_tokens", expected),
      hidden = csv.require("hidden_size", expected), inter = csv.require("inter_size", expected),
      topk = csv.require("topk", expected), experts = csv.require("num_experts", expected),
      moe_tp = csv.require("moe_tp_size", expected), moe_ep = csv.require("moe_ep_size", expected),
      dist = csv.require("distribution", expected), lat = csv.require("latency", expected),
      kernel = csv.find("kernel_source");
  const MoeKernelFilter kernels(path, framework);
  RowMerger<MoeRow> rows;
  std::map<std::string, int64_t> unknown, other_distribution, other_kernel;
  while (csv.next()) {
    note_columns(csv, facts, true);
    if (std::string source = kernels.dropped(csv, kernel, dtype); !source.empty()) {
      ++other_kernel[source];
      continue;
    }
    MoeRow r;
    r.dtype = canonical_dtype(csv.text(dtype));
    if (r.dtype.empty()) {
      ++unknown[csv.text(dtype)];
      continue;
    }
    r.distribution = csv.non_empty(dist);
    if (!keep.empty() && r.distribution != keep) {
      ++other_distribution[r.distribution];
      continue;
    }
    r.num_tokens = csv.integer(tokens, 1);
    r.hidden_size = csv.integer(hidden, 1);
    r.inter_size = csv.integer(inter, 1);
    r.topk = csv.small_integer(topk, 1);
    r.num_experts = csv.small_integer(experts, 1);
    r.moe_tp = csv.small_integer(moe_tp, 1);
    r.moe_ep = csv.small_integer(moe_ep, 1);
    r.latency_us = ms_to_us(csv.non_negative(lat));
    rows.add(std::move(r));
  }
  notes->counted("moe", unknown, "moe_dtype",
                 " (no servesim dtype for it)");
  kernels.note(notes, other_kernel);
  if (!keep.empty()) {
    notes->add("moe", fmt::format("only routing distribution {} kept (to keep the repository "
                                  "small; the data set also has the others)",
                                  keep));
    notes->counted("moe", other_distribution, "distribution");
  }
  notes->merged("moe", rows.merged());
  p->moe = rows.take();
}

void import_nccl(const std::string& path, RowMerger<CollectiveRow>* rows, ImportNotes* notes,
                 SystemFacts* facts) {
  const char* expected = "device,op_name,nccl_dtype,num_gpus,message_size,latency";
  CsvReader csv(path);
  csv.require("device", expected);  // the GPU the table was measured on
  int op = csv.require("op_name", expected), dtype = csv.require("nccl_dtype", expected),
      gpus = csv.require("num_gpus", expected), size = csv.require("message_size", expected),
      lat = csv.require("latency", expected);
  std::map<std::string, int64_t> unknown;
  while (csv.next()) {
    note_columns(csv, facts, false);
    CollectiveRow r;
    r.dtype = canonical_dtype(csv.text(dtype));
    int64_t bytes = element_bytes(r.dtype);
    if (bytes == 0) {
      ++unknown[csv.text(dtype)];
      continue;
    }
    r.op = csv.non_empty(op);
    r.num_gpus = csv.small_integer(gpus, 1);
    r.message_bytes = message_bytes(csv, size, bytes);
    r.latency_us = ms_to_us(csv.non_negative(lat));
    rows->add(std::move(r));
  }
  notes->counted("collective", unknown, "nccl_dtype");
}

void import_custom_allreduce(const std::string& path, RowMerger<CollectiveRow>* rows,
                             ImportNotes* notes, SystemFacts* facts) {
  const char* expected = "device,allreduce_dtype,num_gpus,message_size,latency,backend";
  CsvReader csv(path);
  csv.require("device", expected);  // the GPU the table was measured on
  int dtype = csv.require("allreduce_dtype", expected), gpus = csv.require("num_gpus", expected),
      size = csv.require("message_size", expected), lat = csv.require("latency", expected),
      backend = csv.require("backend", expected);
  std::map<std::string, int64_t> unknown, other_backend;
  while (csv.next()) {
    note_columns(csv, facts, true);
    if (csv.field(backend) != "vllm_graph") {
      ++other_backend[csv.text(backend)];
      continue;
    }
    CollectiveRow r;
    r.op = "custom_all_reduce";
    r.dtype = canonical_dtype(csv.text(dtype));
    int64_t bytes = element_bytes(r.dtype);
    if (bytes == 0) {
      ++unknown[csv.text(dtype)];
      continue;
    }
    r.num_gpus = csv.small_integer(gpus, 1);
    r.message_bytes = message_bytes(csv, size, bytes);
    r.latency_us = ms_to_us(csv.non_negative(lat));
    rows->add(std::move(r));
  }
  notes->counted("collective", other_backend, "custom all-reduce backend",
                 " (eager launch; serving replays the CUDA graph variant)");
  notes->counted("collective", unknown, "allreduce_dtype");
}

std::string join(const std::set<std::string>& values) {
  std::string out;
  for (const std::string& v : values) {
    out += (out.empty() ? "" : ", ") + v;
  }
  return out;
}

// The single sub-directory of `dir` whose name starts with `prefix`, "" if none.
std::string one_subdir(const std::string& dir, const std::string& prefix, bool required) {
  std::vector<std::string> found;
  for (const std::string& name : subdirectories(dir)) {
    if (name.rfind(prefix, 0) == 0) {
      found.push_back(name);
    }
  }
  if (found.size() > 1 || (required && found.empty())) {
    throw InputError(dir, 0,
                     fmt::format("expected {} {}<version> sub-directory, found {}",
                                 required ? "one" : "at most one", prefix, found.size()));
  }
  return found.empty() ? "" : found.front();
}

// The system directory's one framework sub-directory (<prefix><version>/) and its framework.
// Throws InputError for none or several.
std::pair<const Framework*, std::string> framework_subdir(const std::string& dir) {
  std::vector<std::pair<const Framework*, std::string>> found;
  for (const Framework& f : kFrameworks) {
    std::string sub = one_subdir(dir, f.prefix, false);
    if (!sub.empty()) found.emplace_back(&f, sub);
  }
  if (found.size() != 1) {
    throw InputError(dir, 0,
                     fmt::format("expected one vllm_<version>/, trtllm_<version>/ or "
                                 "sglang_<version>/ sub-directory, found {}",
                                 found.size()));
  }
  return found.front();
}

// Reads the system's tables into `p`: the framework directory's GEMM, attention, MoE and
// custom all-reduce tables and the NCCL directory's collectives (`nccl`: its name, "" if none).
// What a table lacks or drops goes into `notes`; the devices, versions and kernels the rows name
// into `facts`.
void import_tables(const fs::path& root, const Framework& framework,
                   const std::string& engine_subdir, const std::string& nccl,
                   const AiconfiguratorImportOptions& options, Profile* p, ImportNotes* notes,
                   SystemFacts* facts) {
  const fs::path tables_dir = root / engine_subdir;
  // The table's file in the framework directory, or "" (noted) when the data set lacks it.
  auto table = [&](const std::string& name, const std::string& file) -> std::string {
    if (fs::is_regular_file(tables_dir / file)) return (tables_dir / file).string();
    notes->add(name, file + " is not in the data set");
    return "";
  };
  if (const std::string f = table("gemm", "gemm_perf.csv"); !f.empty()) {
    import_gemm(f, p, notes, facts);
  }
  if (const std::string f = table("attention_prefill", "context_attention_perf.csv"); !f.empty()) {
    import_attention(f, true, p, notes, facts);
  }
  if (const std::string f = table("attention_decode", "generation_attention_perf.csv");
      !f.empty()) {
    import_attention(f, false, p, notes, facts);
  }
  if (const std::string f = table("moe", "moe_perf.csv"); !f.empty()) {
    import_moe(f, options, framework, p, notes, facts);
  }
  RowMerger<CollectiveRow> collective;
  if (!nccl.empty() && fs::is_regular_file(root / nccl / "nccl_perf.csv")) {
    import_nccl((root / nccl / "nccl_perf.csv").string(), &collective, notes, facts);
  } else {
    notes->add("collective", "no nccl_<version>/nccl_perf.csv in the data set");
  }
  if (const std::string f = table("collective", "custom_allreduce_perf.csv"); !f.empty()) {
    import_custom_allreduce(f, &collective, notes, facts);
  }
  notes->merged("collective", collective.merged());
  p->collective = collective.take();
  notes->add("memcpy", "not in the aiconfigurator data set");
  notes->add("forward", "not in the aiconfigurator data set");
  notes->add("elementwise", "not in the aiconfigurator data set");
}

// The imported profile's metadata: its GPU (the one device the rows name; InputError otherwise),
// source, license, what was skipped and where the tables came from.
void describe_profile(const std::string& dir, const std::string& system,
                      const Framework& framework, const std::string& engine_subdir,
                      const std::string& nccl, const ImportNotes& notes, const SystemFacts& facts,
                      ProfileMeta* m) {
  if (facts.devices.empty()) {
    throw InputError(dir, 0,
                     "no measurements: the tables have headers but no data rows (each row names "
                     "its GPU in the device column)");
  }
  if (facts.devices.size() != 1) {
    throw InputError(dir, 0,
                     fmt::format("expected one device name in the CSVs' device column, found {} "
                                 "({})",
                                 facts.devices.size(), join(facts.devices)));
  }
  m->gpu_name = *facts.devices.begin();
  m->gpu = gpu_catalog_key(m->gpu_name);
  m->source = "aiconfigurator";
  m->model = "generic";
  m->tp = 1;
  m->l2_bytes = 0;
  m->date = utc_now_iso8601();
  m->license = "Apache-2.0 (ai-dynamo/aiconfigurator)";
  m->skipped = notes.all();
  m->fields["nccl"] = nccl.empty() ? "" : nccl.substr(std::string("nccl_").size());
  m->fields["harness_version"] =
      std::string("servesim ") + SERVESIM_VERSION + " import_aiconfigurator";
  m->fields["method"] = fmt::format(fmt::runtime(kMethod), framework.name);
  m->fields["variant"] = framework.variant;
  m->fields["framework"] = framework.name;
  if (*framework.engine) m->fields["engine"] = framework.engine;
  m->fields["framework_version"] = join(facts.versions);
  m->fields["kernels"] = join(facts.kernels);
  m->fields["upstream"] = std::string("github.com/ai-dynamo/aiconfigurator @ ") +
                          kAiconfiguratorCommit +
                          ", aic-core/src/aiconfigurator_core/systems/data/" + system +
                          fmt::format("/ (Parquet; legacy {} collector)", framework.name);
  m->fields["upstream_system"] = system;
  // vLLM's tables are the copy in shared/data; the others come as the upstream Parquet files
  // written out as CSV (profiles/README.md).
  m->fields["converted_from"] = (*framework.engine ? "aiconfigurator Parquet tables as CSV, "
                                                   : "shared/data/profiles/aiconfigurator/") +
                                system + "/" + engine_subdir + (nccl.empty() ? "" : ", " + nccl);
}

Profile import_system(const std::string& dir, const AiconfiguratorImportOptions& options) {
  const fs::path root(dir);
  std::string system = root.filename().string();
  if (system.empty()) {
    system = root.parent_path().filename().string();
  }
  const auto [framework, engine_subdir] = framework_subdir(dir);
  const std::string nccl = one_subdir(dir, "nccl_", false);
  Profile p;
  ImportNotes notes;
  SystemFacts facts;
  import_tables(root, *framework, engine_subdir, nccl, options, &p, &notes, &facts);
  describe_profile(dir, system, *framework, engine_subdir, nccl, notes, facts, &p.meta);
  p.dir = profile_subdir(p);
  return p;
}

bool is_system_dir(const std::string& dir) {
  for (const std::string& name : subdirectories(dir)) {
    for (const Framework& f : kFrameworks) {
      if (name.rfind(f.prefix, 0) == 0) return true;
    }
  }
  return false;
}

}  // namespace

std::vector<Profile> import_aiconfigurator(const std::string& system_dir) {
  return import_aiconfigurator(system_dir, AiconfiguratorImportOptions{});
}

std::vector<Profile> import_aiconfigurator(const std::string& system_dir,
                                           const AiconfiguratorImportOptions& options) {
  if (is_system_dir(system_dir)) {
    return {import_system(system_dir, options)};
  }
  std::vector<Profile> profiles;
  for (const std::string& name : subdirectories(system_dir)) {
    std::string sub = (fs::path(system_dir) / name).string();
    if (is_system_dir(sub)) {
      profiles.push_back(import_system(sub, options));
    }
  }
  if (profiles.empty()) {
    throw InputError(system_dir, 0,
                     "expected an aiconfigurator system directory (with a vllm_<version>/, "
                     "trtllm_<version>/ or sglang_<version>/ "
                     "sub-directory) or a directory of them, found neither");
  }
  return profiles;
}

}  // namespace servesim::profiles
