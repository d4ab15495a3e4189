#include "profiles/import_vidur.h"

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

const char* kComputeMethod =
    "Vidur profiler (sarathi layers, dummy weights cast to fp16, one transformer layer on one GPU "
    "of the TP group): GPU kernel time per op from the PyTorch profiler, statistics over repeated "
    "runs; latency_us is Vidur's time_stats.<op>.median (ms x 1000). GEMM rows are the layer's "
    "linear layers (bias included where the model has one)";
const char* kNetworkMethod =
    "collectives timed by Vidur's profiler with the PyTorch profiler (GPU kernel time, rank 0), "
    "fp16 buffers of `size` bytes; latency_us is time_stats.<collective>.median (ms x 1000)";

const std::vector<std::string> kGemmOps = {"attn_pre_proj", "attn_post_proj", "mlp_up_proj",
                                           "mlp_down_proj"};
const std::vector<std::string> kElementwiseOps = {
    "input_layernorm", "post_attention_layernorm", "attn_rope", "mlp_act", "add", "emb"};

std::string join(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) {
    out += (out.empty() ? "" : ", ") + v;
  }
  return out;
}

bool python_bool(const CsvReader& csv, int column) {
  std::string_view v = csv.field(column);
  if (v == "True" || v == "true" || v == "1") {
    return true;
  }
  if (v == "False" || v == "false" || v == "0") {
    return false;
  }
  csv.fail(fmt::format("column {}: expected True or False, found \"{}\"",
                       csv.header()[static_cast<size_t>(column)], v));
}

// Compute tables of one GPU, accumulated over its models.
struct ComputeTables {
  RowMerger<GemmRow> gemm;
  int64_t gemm_other_model = 0;  // rows dropped: the key came from an earlier model
  int64_t gemm_repeats = 0;      // rows merged within one model
  RowMerger<ElementwiseRow> elementwise;
  std::vector<std::string> models;
};

void import_mlp(const std::string& path, const std::string& org_model, ComputeTables* out,
                ImportNotes* notes) {
  const char* expected =
      "n_head,n_kv_head,n_embd,n_expanded_embd,use_gated_mlp,num_tokens,"
      "num_tensor_parallel_workers and time_stats.<op>.median columns";
  CsvReader csv(path);
  int heads = csv.require("n_head", expected), kv_heads = csv.require("n_kv_head", expected),
      embd = csv.require("n_embd", expected), expanded = csv.require("n_expanded_embd", expected),
      gated = csv.require("use_gated_mlp", expected), tokens = csv.require("num_tokens", expected),
      tp = csv.require("num_tensor_parallel_workers", expected);
  std::map<std::string, int> gemm_cols, elementwise_cols;
  std::vector<std::string> missing;
  for (const std::string& op : kGemmOps) {
    int col = csv.find("time_stats." + op + ".median");
    if (col >= 0) {
      gemm_cols[op] = col;
    } else {
      missing.push_back(op);
    }
  }
  for (const std::string& op : kElementwiseOps) {
    int col = csv.find("time_stats." + op + ".median");
    if (col >= 0) {
      elementwise_cols[op] = col;
    } else {
      missing.push_back(op);
    }
  }
  if (!missing.empty()) {
    notes->add(
        gemm_cols.size() < kGemmOps.size() ? "gemm" : "elementwise",
        fmt::format("{} has no {} column (the model has no such op)", org_model, join(missing)));
  }
  std::string model = vidur_model_key(org_model);
  RowMerger<GemmRow> gemm;
  while (csv.next()) {
    VidurModelShape shape;
    shape.num_heads = csv.integer(heads, 1);
    shape.num_kv_heads = csv.integer(kv_heads, 1);
    shape.hidden = csv.integer(embd, 1);
    shape.intermediate = csv.integer(expanded, 1);
    shape.gated_mlp = python_bool(csv, gated);
    shape.tp = csv.integer(tp, 1);
    int64_t m = csv.integer(tokens, 1);
    for (const VidurGemmShape& s : vidur_gemm_shapes(shape, path, csv.line())) {
      auto col = gemm_cols.find(s.op);
      if (col == gemm_cols.end()) {
        continue;
      }
      GemmRow r;
      r.dtype = "fp16";
      r.m = m;
      r.n = s.n;
      r.k = s.k;
      r.latency_us = ms_to_us(csv.non_negative(col->second));
      gemm.add(std::move(r));
    }
    for (const auto& [op, col] : elementwise_cols) {
      ElementwiseRow r;
      r.model = model;
      r.op = op;
      r.num_tokens = m;
      r.tp = static_cast<int>(shape.tp);
      r.latency_us = ms_to_us(csv.non_negative(col));
      out->elementwise.add(std::move(r));
    }
  }
  out->gemm_repeats += gemm.merged();
  for (GemmRow& r : gemm.take()) {
    if (out->gemm.contains(r)) {
      ++out->gemm_other_model;  // an earlier model's row of this key stays as it is
    } else {
      out->gemm.add(std::move(r));
    }
  }
  out->models.push_back(org_model == model ? org_model : org_model + " (" + model + ")");
}

// Collectives of one topology directory.
std::vector<CollectiveRow> import_network(const std::string& dir, ImportNotes* notes,
                                          std::set<int64_t>* node_gpus) {
  RowMerger<CollectiveRow> rows;
  int64_t other_ranks = 0;
  for (const char* stem : {"all_reduce", "send_recv"}) {
    fs::path path = fs::path(dir) / (std::string(stem) + ".csv");
    if (!fs::is_regular_file(path)) {
      notes->add("collective", fmt::format("no {}.csv for this topology", stem));
      continue;
    }
    std::string median = fmt::format("time_stats.{}.median", stem);
    std::string expected =
        median + ",rank,num_workers,size,collective,devices_per_node,max_devices_per_node";
    CsvReader csv(path.string());
    int lat = csv.require(median, expected), rank = csv.require("rank", expected),
        workers = csv.require("num_workers", expected), size = csv.require("size", expected),
        collective = csv.require("collective", expected),
        per_node = csv.require("devices_per_node", expected),
        max_per_node = csv.require("max_devices_per_node", expected);
    while (csv.next()) {
      if (csv.integer(rank, 0) != 0) {
        ++other_ranks;
        continue;
      }
      CollectiveRow r;
      r.op = csv.non_empty(collective);
      r.dtype = "fp16";
      r.num_gpus = csv.small_integer(workers, 1);
      int devices = csv.small_integer(per_node, 1);
      if (r.num_gpus % devices != 0) {
        csv.fail(fmt::format("expected devices_per_node to divide num_workers ({}), found {}",
                             r.num_gpus, devices));
      }
      r.nodes = r.num_gpus / devices;
      r.message_bytes = csv.integer(size, 1);
      r.latency_us = ms_to_us(csv.non_negative(lat));
      node_gpus->insert(csv.integer(max_per_node, 1));
      rows.add(std::move(r));
    }
  }
  if (other_ranks > 0) {
    notes->add("collective", fmt::format("{} rows of ranks other than 0 dropped", other_ranks));
  }
  if (rows.merged() > 0) {
    notes->add("collective", fmt::format("{} repeated measurements of an existing key merged "
                                         "into it (median)",
                                         rows.merged()));
  }
  return rows.take();
}

std::string vidur_gpu_name(const std::string& g) {
  if (g == "a100") {
    return "A100 80GB (Vidur device a100)";
  }
  if (g == "h100") {
    return "H100 80GB (Vidur device h100)";
  }
  if (g == "a40") {
    return "A40 48GB (Vidur device a40)";
  }
  return g + " (Vidur device " + g + ")";
}

Profile base_profile(const std::string& g) {
  Profile p;
  ProfileMeta& m = p.meta;
  m.gpu = vidur_gpu_key(g);
  m.gpu_name = vidur_gpu_name(g);
  m.source = "vidur";
  m.model = "generic";
  m.tp = 1;
  m.date = utc_now_iso8601();
  m.license = "MIT (microsoft/vidur)";
  m.fields["harness_version"] = std::string("servesim ") + SERVESIM_VERSION + " import_vidur";
  m.fields["upstream"] =
      std::string("github.com/microsoft/vidur @ ") + kVidurCommit + ", data/profiling/";
  m.fields["vidur_device"] = g;
  return p;
}

std::string join_ints(const std::set<int64_t>& values) {
  std::string out;
  for (int64_t v : values) {
    out += (out.empty() ? "" : ", ") + std::to_string(v);
  }
  return out;
}

}  // namespace

std::vector<VidurGemmShape> vidur_gemm_shapes(const VidurModelShape& s, const std::string& file,
                                              long line) {
  auto need = [&](bool ok, const std::string& what) {
    if (!ok) {
      throw InputError(
          file, line,
          fmt::format("expected {}, found heads {}, kv heads {}, hidden {}, "
                      "intermediate {}, tp {}",
                      what, s.num_heads, s.num_kv_heads, s.hidden, s.intermediate, s.tp));
    }
  };
  need(s.num_heads > 0 && s.num_kv_heads > 0 && s.hidden > 0 && s.intermediate > 0 && s.tp > 0,
       "positive dimensions");
  // Far above any model's, and low enough that the GEMM sizes below cannot overflow.
  constexpr int64_t kMaxDimension = int64_t{1} << 24;
  need(s.num_heads <= kMaxDimension && s.num_kv_heads <= kMaxDimension &&
           s.hidden <= kMaxDimension && s.intermediate <= kMaxDimension && s.tp <= kMaxDimension,
       fmt::format("dimensions of at most {}", kMaxDimension));
  need(s.hidden % s.num_heads == 0, "hidden divisible by the heads (integer head_dim)");
  need(s.num_heads % s.tp == 0 && s.num_kv_heads % s.tp == 0, "tp dividing the query and KV heads");
  need(s.intermediate % s.tp == 0, "tp dividing the intermediate size");
  int64_t hd = s.hidden / s.num_heads;
  return {
      {"attn_pre_proj", (s.num_heads + 2 * s.num_kv_heads) * hd / s.tp, s.hidden},
      {"attn_post_proj", s.hidden, s.num_heads * hd / s.tp},
      {"mlp_up_proj", (s.gated_mlp ? 2 : 1) * s.intermediate / s.tp, s.hidden},
      {"mlp_down_proj", s.hidden, s.intermediate / s.tp},
  };
}

std::string vidur_model_key(const std::string& org_model) {
  static const std::map<std::string, std::string> kKeys = {
      {"meta-llama/Llama-2-7b-hf", "llama-2-7b"},
      {"meta-llama/Llama-2-70b-hf", "llama-2-70b"},
      {"meta-llama/Meta-Llama-3-8B", "llama-3-8b"}};
  auto it = kKeys.find(org_model);
  return it == kKeys.end() ? org_model : it->second;
}

std::string vidur_gpu_key(const std::string& vidur_gpu) {
  if (vidur_gpu == "a100") {
    return "a100_80gb_sxm";
  }
  if (vidur_gpu == "h100") {
    return "h100_sxm";
  }
  return vidur_gpu;
}

namespace {

// The GEMM and elementwise tables of one GPU's compute/<gpu>/<org>/<model>/mlp.csv files into
// `main`, with what was merged or dropped in `notes`; returns the <org>/<model> names read.
std::vector<std::string> import_compute(const fs::path& gpu_dir, const std::string& g,
                                        Profile& main, ImportNotes& notes) {
  ComputeTables tables;
  for (const std::string& org : subdirectories(gpu_dir.string())) {
    for (const std::string& model : subdirectories((gpu_dir / org).string())) {
      fs::path mlp = gpu_dir / org / model / "mlp.csv";
      if (fs::is_regular_file(mlp)) {
        import_mlp(mlp.string(), org + "/" + model, &tables, &notes);
      }
    }
  }
  if (tables.gemm_repeats > 0) {
    notes.add("gemm", fmt::format("{} repeated rows of one model (same shape) merged (median)",
                                  tables.gemm_repeats));
  }
  if (tables.gemm_other_model > 0) {
    notes.add("gemm", fmt::format("{} rows whose (m, n, k) an earlier model in sorted "
                                  "<org>/<model> order already had dropped (that model's row "
                                  "kept)",
                                  tables.gemm_other_model));
  }
  if (tables.elementwise.merged() > 0) {
    notes.add("elementwise",
              fmt::format("{} repeated rows merged (median)", tables.elementwise.merged()));
  }
  main.gemm = tables.gemm.take();
  main.elementwise = tables.elementwise.take();
  if (main.gemm.empty()) {
    notes.add("gemm", "no compute/" + g + " data in the Vidur data set");
  }
  return tables.models;
}

}  // namespace

std::vector<Profile> import_vidur(const std::string& vidur_root) {
  fs::path root(vidur_root);
  fs::path compute_root = root / "compute";
  fs::path network_root = root / "network";
  if (!fs::is_directory(compute_root) && !fs::is_directory(network_root)) {
    throw InputError(vidur_root, 0,
                     "expected a Vidur profiling directory with compute/ and network/, found "
                     "neither");
  }
  std::set<std::string> gpus;
  for (const std::string& g : subdirectories(compute_root.string())) {
    gpus.insert(g);
  }
  std::map<std::string, std::vector<std::string>> topologies;  // gpu -> topology dirs
  for (const std::string& t : subdirectories(network_root.string())) {
    std::string g = t.substr(0, t.find('_'));
    gpus.insert(g);
    topologies[g].push_back(t);
  }

  std::vector<Profile> profiles;
  for (const std::string& g : gpus) {
    Profile main = base_profile(g);
    ImportNotes notes;
    const std::vector<std::string> models = import_compute(compute_root / g, g, main, notes);
    notes.add("attention_prefill",
              "Vidur's attention.csv files (Git LFS) are not in the data set; use the "
              "aiconfigurator tables");
    notes.add("attention_decode",
              "Vidur's attention.csv files (Git LFS) are not in the data set; use the "
              "aiconfigurator tables");
    notes.add("moe", "not in the Vidur data set");
    notes.add("memcpy", "not in the Vidur data set");
    notes.add("forward", "not in the Vidur data set; CPU overheads (legacy_2024-05) not imported");

    // Collectives: the main topology goes into `main`, the others into their own profiles.
    std::vector<std::string> tops = topologies[g];
    std::string main_topology;
    if (std::find(tops.begin(), tops.end(), g + "_dgx") != tops.end()) {
      main_topology = g + "_dgx";
    } else if (tops.size() == 1) {
      main_topology = tops.front();
    }
    std::vector<Profile> variants;
    for (const std::string& t : tops) {
      std::set<int64_t> node_gpus;
      if (t == main_topology) {
        main.collective = import_network((network_root / t).string(), &notes, &node_gpus);
        main.meta.fields["topology"] = t;
        main.meta.fields["node_gpus"] = join_ints(node_gpus);
        continue;
      }
      Profile v = base_profile(g);
      ImportNotes v_notes;
      v.collective = import_network((network_root / t).string(), &v_notes, &node_gpus);
      v.meta.fields["topology"] = t;
      v.meta.fields["node_gpus"] = join_ints(node_gpus);
      v.meta.fields["variant"] = t.substr(g.size() + 1);
      v.meta.fields["method"] = kNetworkMethod;
      v.meta.fields["converted_from"] = "shared/data/profiles/vidur/network/" + t;
      for (const char* table : {"gemm", "attention_prefill", "attention_decode", "moe",
                                "elementwise", "memcpy", "forward"}) {
        v_notes.add(table, "this profile holds only the collectives of topology " + t +
                               "; the compute tables are in the GPU's vidur profile");
      }
      v.meta.skipped = v_notes.all();
      variants.push_back(std::move(v));
    }
    if (main_topology.empty()) {
      notes.add("collective", tops.empty() ? "no network data for this GPU in the Vidur data set"
                                           : "no <gpu>_dgx topology; see the topology variants");
    }
    main.meta.fields["method"] = std::string(kComputeMethod) + "; " + kNetworkMethod;
    main.meta.fields["models"] = join(models);
    main.meta.fields["converted_from"] =
        "shared/data/profiles/vidur/compute/" + g +
        (main_topology.empty() ? "" : ", shared/data/profiles/vidur/network/" + main_topology);
    main.meta.skipped = notes.all();
    profiles.push_back(std::move(main));
    std::sort(variants.begin(), variants.end(), [](const Profile& a, const Profile& b) {
      return a.meta.fields.at("variant") < b.meta.fields.at("variant");
    });
    for (Profile& v : variants) {
      profiles.push_back(std::move(v));
    }
  }
  std::stable_sort(profiles.begin(), profiles.end(),
                   [](const Profile& a, const Profile& b) { return a.meta.gpu < b.meta.gpu; });
  for (Profile& p : profiles) {
    p.dir = profile_subdir(p);
  }
  return profiles;
}

}  // namespace servesim::profiles
