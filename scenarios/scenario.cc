#include "scenarios/scenario.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "policies/builtin.h"
#include "scenarios/cost_models.h"
#include "scenarios/dllm_scenario.h"
#include "models/cost/serving_engine.h"
#include "models/cost/vision.h"
#include "scenarios/json_reader.h"
#include "core/limits.h"
#include "core/rng.h"
#include "core/units.h"
#include "traces/generators.h"
#include "traces/loaders.h"
#include "traces/transforms.h"

namespace servesim::scenarios {
namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Data root and catalogs

namespace {

// The installed data of an installed executable (<prefix>/bin/servesim reads
// <prefix>/share/servesim), or "" when the running executable has none beside it (a build tree).
std::string installed_data_root() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const fs::path root = (exe.parent_path() / SERVESIM_DATA_FROM_BINDIR).lexically_normal();
  return fs::is_regular_file(root / "models/catalog/gpus.json", ec) ? root.string() : "";
}

}  // namespace

DataRoot DataRoot::discover() {
  if (const char* env = std::getenv("SERVESIM_DATA"); env && *env) return DataRoot{env};
  if (std::string installed = installed_data_root(); !installed.empty()) return DataRoot{installed};
  return DataRoot{SERVESIM_SOURCE_DIR};
}

std::string DataRoot::gpu_catalog() const { return (fs::path(root) / "models/catalog/gpus.json").string(); }
std::string DataRoot::model_catalog_dir() const {
  return (fs::path(root) / "models/catalog/models").string();
}
std::vector<std::string> DataRoot::model_catalog_dirs() const {
  std::vector<std::string> dirs = {model_catalog_dir()};
  if (const char* env = std::getenv("SERVESIM_MODELS"); env != nullptr) {
    std::stringstream list(env);
    for (std::string dir; std::getline(list, dir, ':');) {
      if (!dir.empty()) dirs.push_back(dir);
    }
  }
  return dirs;
}
std::string DataRoot::engine_calibration() const {
  return (fs::path(root) / "models/engines/calibration.json").string();
}

const Catalogs& Catalogs::get(const DataRoot& root) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Catalogs>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = cache[root.root];
  if (!slot) {
    slot = std::make_unique<Catalogs>(
        Catalogs{models::GpuCatalog::load(root.gpu_catalog()),
                 models::ModelCatalog::load(root.model_catalog_dirs()),
                 models::EngineCalibrations::load(root.engine_calibration())});
  }
  return *slot;
}

std::string resolve_data_path(const std::string& path, const std::string& base_dir,
                              const DataRoot& root) {
  const fs::path p(path);
  // A file that exists must be a regular file (not /dev/zero, a FIFO or a directory); no
  // filesystem exception (a name too long, a permission) escapes as raw library text.
  auto usable = [&path](const fs::path& candidate) {
    std::error_code ec;
    const fs::file_status st = fs::status(candidate, ec);
    if (ec || !fs::exists(st)) {
      if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory) {
        throw InputError(path, 0, fmt::format("cannot read: {}", ec.message()));
      }
      return false;
    }
    if (!fs::is_regular_file(st)) {
      throw InputError(path, 0, "expected a regular file (not a directory, device or pipe)");
    }
    return true;
  };
  if (p.is_absolute()) {
    if (usable(p)) return p.string();
    throw InputError(path, 0, "no such file");
  }
  std::vector<fs::path> tried;
  if (!base_dir.empty()) tried.push_back(fs::path(base_dir) / p);
  tried.push_back(fs::path(root.root) / p);
  for (const auto& candidate : tried) {
    if (usable(candidate)) return candidate.lexically_normal().string();
  }
  std::string where;
  for (const auto& t : tried) where += (where.empty() ? "" : ", ") + t.lexically_normal().string();
  throw InputError(path, 0, fmt::format("no such file (looked in: {})", where));
}

// ---------------------------------------------------------------------------------------------
// Overrides

namespace {

void set_path(Json& doc, const std::string& path, const Json& value) {
  Json* node = &doc;
  size_t start = 0;
  for (;;) {
    const size_t dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (key.empty()) throw ConfigError("--set", {{path, "empty key in path"}});
    if (node->is_array()) {
      // An array element is addressed by its index: workload.parts.1.rate=2.
      size_t index = 0;
      const bool numeric = key.find_first_not_of("0123456789") == std::string::npos &&
                           key.size() < 10;
      if (numeric) index = std::stoul(key);
      if (!numeric || index >= node->size()) {
        throw ConfigError("--set", {{path, fmt::format("\"{}\" is inside an array of {} "
                                                       "elements; address an element by its "
                                                       "index, 0 to {}",
                                                       key, node->size(),
                                                       static_cast<int64_t>(node->size()) - 1)}});
      }
      if (dot == std::string::npos) {
        (*node)[index] = value;
        return;
      }
      node = &(*node)[index];
      start = dot + 1;
      continue;
    }
    if (!node->is_object()) {
      throw ConfigError("--set", {{path, fmt::format("\"{}\" is inside a value that is not an object",
                                                     key)}});
    }
    if (dot == std::string::npos) {
      (*node)[key] = value;
      return;
    }
    if (!node->contains(key)) (*node)[key] = Json::object();
    node = &(*node)[key];
    start = dot + 1;
  }
}

}  // namespace

void apply_overrides(Json& doc, const std::vector<std::string>& overrides) {
  for (const std::string& o : overrides) {
    const size_t eq = o.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw ConfigError("--set", {{o, "expected path=value, e.g. cluster.instances=4"}});
    }
    try {
      (void)Json(o).dump();  // the document must stay serialisable (error messages, run_param)
    } catch (const nlohmann::json::type_error&) {
      throw ConfigError("--set", {{Json(o).dump(-1, ' ', false, Json::error_handler_t::replace),
                                   "expected UTF-8 text"}});
    }
    const std::string path = o.substr(0, eq);
    const std::string text = o.substr(eq + 1);
    Json value = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) value = text;
    set_path(doc, path, value);
  }
}

// ---------------------------------------------------------------------------------------------
// Validation

namespace {


void check_file(ObjectReader& r, const std::string& key, const std::optional<std::string>& path,
                const std::string& base_dir, const DataRoot& root) {
  if (!path) return;
  try {
    resolve_data_path(*path, base_dir, root);
  } catch (const InputError& e) {
    r.issues().add(r.child_path(key), e.message());
  }
}

void validate_lengths(const Json& in, const std::string& path, Issues& issues, Json& out,
                      const std::string& base_dir, const DataRoot& root) {
  ObjectReader r(in, path, issues, out);
  const auto type = r.string("type", std::nullopt, {"fixed", "distribution", "trace", "mix"});
  if (type == "fixed") {
    r.integer("prompt", std::nullopt, 1, kMaxRequestTokens);
    r.integer("output", std::nullopt, 1, kMaxRequestTokens);
  } else if (type == "distribution") {
    check_file(r, "path", r.string("path", std::nullopt), base_dir, root);
  } else if (type == "trace") {
    r.string("format", std::nullopt, traces::trace_formats());
    check_file(r, "path", r.string("path", std::nullopt), base_dir, root);
  } else if (type == "mix") {
    const Json* parts = r.array("parts", true);
    const Json* weights = r.array("weights", false);
    if (parts) {
      if (parts->empty()) issues.add(r.child_path("parts"), "expected at least one part");
      out["parts"] = Json::array();
      for (size_t i = 0; i < parts->size(); ++i) {
        Json part_out = Json::object();
        validate_lengths((*parts)[i], fmt::format("{}[{}]", r.child_path("parts"), i), issues,
                         part_out, base_dir, root);
        out["parts"].push_back(part_out);
      }
    }
    if (weights) {
      out["weights"] = *weights;
      if (parts && weights->size() != parts->size()) {
        issues.add(r.child_path("weights"),
                   fmt::format("expected {} weights (one per part), got {}", parts->size(),
                               weights->size()));
      }
      for (size_t i = 0; i < weights->size(); ++i) {
        if (!(*weights)[i].is_number() || (*weights)[i].get<double>() <= 0) {
          issues.add(fmt::format("{}[{}]", r.child_path("weights"), i),
                     fmt::format("expected a positive number, got {}", describe_json((*weights)[i])));
        }
      }
    }
  }
  r.finish();
}

// A benchmark client (aiperf, `vllm bench serve`): `concurrency` closed-loop clients or a request
// `rate`, num_requests measured after warmup_requests, ISL/OSL with standard deviations (or any
// `lengths` source), ramp-up and think time.
void validate_benchmark(ObjectReader& r, const std::string& base_dir, const DataRoot& root) {
  const bool closed = r.has("concurrency");
  const bool open = r.has("rate");
  if (closed == open) {
    r.issues().add(r.path(), "a benchmark workload needs exactly one of \"concurrency\" "
                             "(closed-loop clients) and \"rate\" (requests per second)");
  }
  if (closed) r.integer("concurrency", std::nullopt, 1, kMaxClients);
  if (open) {
    r.number("rate", std::nullopt, kMinRatePerS, kMaxRatePerS);
    r.string("arrival", std::string("poisson"), {"poisson", "constant", "gamma"});
    r.number("cv", 1.0, 0.0, {}, /*min_exclusive=*/true);
  }
  r.integer("num_requests", std::nullopt, 1, kMaxRequests);
  r.integer("warmup_requests", int64_t{0}, 0, kMaxRequests);
  r.boolean("drain_after_warmup", true);
  r.duration("ramp_up", Duration{0});
  r.duration("think_time", Duration{0});
  r.duration("think_time_jitter", Duration{0});
  // Shared prompt text (traces::SharedPromptSpec): aiperf's --num-dataset-entries and
  // --num-prefix-prompts / --prefix-prompt-length.
  if (r.has("dataset_entries")) r.integer("dataset_entries", std::nullopt, 1, 100'000'000);
  if (r.has("num_prefix_prompts") || r.has("prefix_prompt_length")) {
    if (!r.has("num_prefix_prompts") || !r.has("prefix_prompt_length")) {
      r.issues().add(r.path(), "give both \"num_prefix_prompts\" and \"prefix_prompt_length\"");
    }
    r.integer("num_prefix_prompts", std::nullopt, 1, 1'000'000);
    r.integer("prefix_prompt_length", std::nullopt, 1, 10'000'000);
  }
  if (const Json* l = r.object("lengths", false)) {
    if (r.has("isl") || r.has("osl")) {
      r.issues().add(r.child_path("lengths"), "give either \"lengths\" or \"isl\"/\"osl\", not both");
    }
    Json& lout = r.resolved()["lengths"];
    validate_lengths(*l, r.child_path("lengths"), r.issues(), lout, base_dir, root);
  } else {
    r.integer("isl", std::nullopt, 1, kMaxRequestTokens);
    r.number("isl_stddev", 0.0, 0.0);
    r.integer("osl", std::nullopt, 1, kMaxRequestTokens);
    r.number("osl_stddev", 0.0, 0.0);
    if (r.has("range_ratio")) {
      r.number("range_ratio", std::nullopt, 0.0, 1.0);
      if (r.has("isl_stddev") || r.has("osl_stddev")) {
        r.issues().add(r.child_path("range_ratio"),
                       "give either \"range_ratio\" or \"isl_stddev\"/\"osl_stddev\", not both");
      }
    }
  }
}

// Most prompt tokens a sessions workload may generate (their prefix hash ids take 8 bytes per
// 512 tokens: about 160 MB at the limit).
constexpr double kMaxSessionPromptTokens = 1e10;

// Multi-turn chat sessions (traces::generate_sessions): `sessions` conversations starting at
// `rate` per second, min_turns..max_turns turns each, the first turn isl/osl, later turns
// turn_isl new tokens and osl, think_time between a turn's answer and the next turn.
void validate_sessions(ObjectReader& r) {
  r.integer("sessions", std::nullopt, 1, kMaxRequests);
  r.number("rate", std::nullopt, kMinRatePerS, kMaxRatePerS);
  r.string("arrival", std::string("poisson"), {"poisson", "constant", "gamma"});
  r.number("cv", 1.0, 0.0, {}, /*min_exclusive=*/true);
  const auto min_turns = r.integer("min_turns", int64_t{1}, 1, 10'000);
  const auto max_turns = r.integer("max_turns", std::nullopt, 1, 10'000);
  if (min_turns && max_turns && *max_turns < *min_turns) {
    r.issues().add(r.child_path("max_turns"),
                   fmt::format("expected at least min_turns ({}), got {}", *min_turns, *max_turns));
  }
  const auto sessions = r.has("sessions") ? r.resolved().value("sessions", int64_t{0}) : 0;
  if (max_turns && sessions * *max_turns > kMaxRequests) {
    r.issues().add(r.path(), fmt::format("{} sessions of up to {} turns make more than the {} "
                                         "requests a workload may hold",
                                         sessions, *max_turns, kMaxRequests));
  }
  r.duration("think_time", Duration{0});
  const auto isl = r.integer("isl", std::nullopt, 1, kMaxRequestTokens);
  r.number("isl_stddev", 0.0, 0.0);
  const auto turn_isl = r.integer("turn_isl", std::nullopt, 1, kMaxRequestTokens);
  r.number("turn_isl_stddev", 0.0, 0.0);
  const auto osl = r.integer("osl", std::nullopt, 1, kMaxRequestTokens);
  r.number("osl_stddev", 0.0, 0.0);
  // Every turn resends the history: the prompt tokens (and prefix hash ids) grow with the square
  // of the turns. At the means, each prompt capped at the request limit:
  if (max_turns && isl && turn_isl && osl && sessions > 0) {
    double tokens = 0;
    for (int64_t k = 0; k < *max_turns && tokens < 1e18; ++k) {
      tokens += std::min<double>(static_cast<double>(kMaxRequestTokens),
                                 static_cast<double>(*isl) +
                                     static_cast<double>(k) * static_cast<double>(*turn_isl + *osl));
    }
    tokens *= static_cast<double>(sessions);
    if (tokens > kMaxSessionPromptTokens) {
      r.issues().add(r.path(), fmt::format("{} sessions of up to {} turns resend about {:.3g} "
                                           "prompt tokens, more than the {:.0e} a sessions "
                                           "workload may generate; fewer sessions or turns",
                                           sessions, *max_turns, tokens,
                                           kMaxSessionPromptTokens));
    }
  }
}

// workload.images: each request sends per_request images of width x height pixels.
void validate_images(ObjectReader& r) {
  const Json* in = r.object("images", false);
  if (in == nullptr) return;
  ObjectReader ir(*in, r.child_path("images"), r.issues(), r.resolved()["images"]);
  ir.integer("per_request", int64_t{1}, 1, kMaxImagesPerRequest);
  ir.integer("width", std::nullopt, 1, kMaxImageSidePixels);
  ir.integer("height", std::nullopt, 1, kMaxImageSidePixels);
  ir.finish();
}

void validate_transforms(ObjectReader& r) {
  if (const Json* w = r.object("window", false)) {
    Json& out = r.resolved()["window"];
    ObjectReader wr(*w, r.child_path("window"), r.issues(), out);
    wr.duration("start", Duration{0});
    wr.duration("duration", std::nullopt, /*allow_zero=*/false);
    wr.finish();
  }
  if (r.has("first_n")) r.integer("first_n", std::nullopt, 1, kMaxRequests);
  if (r.has("time_scale")) r.number("time_scale", std::nullopt, 1e-6, 1e6);
  if (r.has("rate")) r.number("rate", std::nullopt, kMinRatePerS, kMaxRatePerS);
}

}  // namespace

bool is_top_level_only_workload(const std::string& type) {
  return type == "closed_loop" || type == "benchmark" || type == "sessions";
}

std::string open_workload_rate_knob(const Json& workload) {
  return workload.at("type") == "generated" ? "workload.arrival.rate" : "workload.rate";
}

void validate_workload(const Json& in, const std::string& path, Issues& issues, Json& out,
                       const std::string& base_dir, const DataRoot& root, bool top_level) {
  ObjectReader r(in, path, issues, out);
  std::vector<std::string> types = {"trace", "generated", "merge"};
  if (top_level) {
    for (const char* t : {"closed_loop", "benchmark", "sessions"}) types.push_back(t);
  }
  const auto type = r.string("type", std::nullopt, types);
  if (type == "trace") {
    r.string("format", std::nullopt, traces::trace_formats());
    check_file(r, "path", r.string("path", std::nullopt), base_dir, root);
  } else if (type == "generated") {
    std::optional<double> rate;
    if (const Json* a = r.object("arrival", true)) {
      Json& aout = out["arrival"];
      ObjectReader ar(*a, r.child_path("arrival"), issues, aout);
      const auto process = ar.string("process", std::string("poisson"), {"poisson", "gamma", "uniform"});
      rate = ar.number("rate", std::nullopt, kMinRatePerS, kMaxRatePerS);
      ar.number("cv", 1.0, 0.0, {}, true);
      ar.finish();
    }
    const auto count = r.integer("count", int64_t{0}, 0, kMaxRequests);
    const auto dur = r.duration("duration", Duration{0});
    if (count && dur && *count == 0 && dur->count() == 0) {
      issues.add(path, "a generated workload needs \"count\" (requests) or \"duration\"");
    }
    if (count && dur && rate && *count == 0 && *rate * to_seconds(*dur) > kMaxRequests) {
      issues.add(r.child_path("duration"),
                 fmt::format("{:g} req/s for {} makes about {:.3g} requests, more than the {} a "
                             "workload may hold; shorten it or give a count",
                             *rate, format_param_value(*dur), *rate * to_seconds(*dur),
                             kMaxRequests));
    }
    if (const Json* l = r.object("lengths", true)) {
      Json& lout = out["lengths"];
      validate_lengths(*l, r.child_path("lengths"), issues, lout, base_dir, root);
    }
  } else if (type == "closed_loop") {
    r.integer("clients", std::nullopt, 1, kMaxClients);
    r.duration("think_time", Duration{0});
    r.integer("count", std::nullopt, 1, kMaxRequests);
    if (const Json* l = r.object("lengths", true)) {
      Json& lout = out["lengths"];
      validate_lengths(*l, r.child_path("lengths"), issues, lout, base_dir, root);
    }
  } else if (type == "benchmark") {
    validate_benchmark(r, base_dir, root);
  } else if (type == "sessions") {
    validate_sessions(r);
  } else if (type == "merge") {
    if (const Json* parts = r.array("parts", true)) {
      if (parts->size() < 2) issues.add(r.child_path("parts"), "expected at least two workloads");
      out["parts"] = Json::array();
      for (size_t i = 0; i < parts->size(); ++i) {
        Json part_out = Json::object();
        validate_workload((*parts)[i], fmt::format("{}[{}]", r.child_path("parts"), i), issues,
                          part_out, base_dir, root, false);
        out["parts"].push_back(part_out);
      }
    }
  }
  if (type && !is_top_level_only_workload(*type)) {
    validate_transforms(r);
  }
  if (top_level) validate_images(r);
  r.finish();
}

namespace {

// Reads a plugin section {"type": NAME, ...params of NAME's schema} from `top[key]`, NAME being
// one of `entries` (name -> schema).
void read_plugin(ObjectReader& top, const std::string& key, const std::string& default_type,
                 const std::map<std::string, const ParamSchema*>& entries, PluginSpec& out) {
  Json& rout = top.resolved()[key];
  const Json empty = Json::object();
  const Json* in = top.object(key, false);
  ObjectReader r(in ? *in : empty, top.child_path(key), top.issues(), rout);
  std::vector<std::string> names;
  for (const auto& [name, schema] : entries) names.push_back(name);
  const auto type = r.string("type", default_type, names);
  if (type) {
    out.type = *type;
    out.params = r.params(*entries.at(*type));
  }
  r.finish();
}

template <typename Registry>
void add_schemas(const Registry& registry, std::map<std::string, const ParamSchema*>& out) {
  for (const auto& [name, entry] : registry.entries()) out[name] = &entry.schema;
}

}  // namespace

void read_router(ObjectReader& top, PluginSpec& out) {
  std::map<std::string, const ParamSchema*> routers;
  add_schemas(sim::routing_policies(), routers);
  read_plugin(top, "router", "round_robin", routers, out);
}

sim::SloSpec read_slo(ObjectReader& top) {
  sim::SloSpec slo;
  const Json empty = Json::object();
  const Json* in = top.object("slo", false);
  ObjectReader r(in ? *in : empty, "slo", top.issues(), top.resolved()["slo"]);
  if (r.has("ttft")) slo.ttft = r.duration("ttft", std::nullopt, false);
  if (r.has("tpot")) slo.tpot = r.duration("tpot", std::nullopt, false);
  if (r.has("tbt_p99")) slo.tbt_p99 = r.duration("tbt_p99", std::nullopt, false);
  slo.attainment_target = r.number("attainment_target", 0.9, 0.0, 1.0).value_or(0.9);
  r.claim("ttft");
  r.claim("tpot");
  r.claim("tbt_p99");
  r.finish();
  return slo;
}

namespace {

// The `cluster` section. Returns whether it sets the instance layout (instances or tp).
bool read_cluster(ObjectReader& top, const Catalogs& catalogs, Issues& issues, Json& resolved,
                  Scenario& s) {
  bool sets_layout = false;
  const Json* in = top.object("cluster", true);
  Json& out = resolved["cluster"];
  const Json empty = Json::object();
  ObjectReader r(in ? *in : empty, "cluster", issues, out);
  if (in) {
    sets_layout = in->contains("instances") || in->contains("tp");
    if (auto g = r.string("gpu", std::nullopt, catalogs.gpus.keys())) s.cluster.gpu = *g;
    s.cluster.instances = r.integer("instances", int64_t{1}, 1, kMaxInstances).value_or(1);
    s.cluster.tp = static_cast<int>(r.integer("tp", int64_t{1}, 1, 64).value_or(1));
    s.cluster.ep = static_cast<int>(r.integer("ep", int64_t{1}, 1, 256).value_or(1));
    s.cluster.attention_dp =
        static_cast<int>(r.integer("attention_dp", int64_t{1}, 1, 256).value_or(1));
    s.cluster.pp = static_cast<int>(r.integer("pp", int64_t{1}, 1, 64).value_or(1));
    // "" (absent): the model's catalog default, resolved below.
    if (const std::string routing = r.string("expert_routing", std::string()).value_or("");
        !routing.empty()) {
      try {
        s.cluster.expert_routing = models::parse_expert_routing(routing);
      } catch (const std::invalid_argument& e) {
        issues.add("cluster.expert_routing", e.what());
      }
    }
    s.cluster.weight_dtype =
        models::parse_dtype(r.string("weight_dtype", std::string("bf16"), models::weight_dtype_names()).value_or("bf16"));
    s.cluster.kv_dtype =
        models::parse_dtype(r.string("kv_dtype", std::string("bf16"), models::kv_dtype_names()).value_or("bf16"));
    s.cluster.prefix_caching = r.boolean("prefix_caching", false).value_or(false);
    s.cluster.prefix_cache_kind =
        r.string("prefix_cache_kind", std::string("block_hash"), {"block_hash", "radix"})
                .value_or("block_hash") == "radix"
            ? sim::PrefixCacheKind::kRadix
            : sim::PrefixCacheKind::kBlockHash;
    // Bounded so that the capacity in bytes fits an int64 (1 PiB per instance, 64 PiB shared).
    s.cluster.kv_dram_gib = r.number("kv_dram_gib", 0.0, 0.0, 1024.0 * 1024).value_or(0);
    s.cluster.kv_remote_gib = r.number("kv_remote_gib", 0.0, 0.0, 64.0 * 1024 * 1024).value_or(0);
    r.finish();
  }
  return sets_layout;
}

// The `engine` section: the engine model, its version and knobs.
void read_engine(ObjectReader& top, Issues& issues, Json& resolved, Scenario& s) {
  if (const Json* in = top.object("engine", false)) {
    Json& out = resolved["engine"];
    ObjectReader r(*in, "engine", issues, out);
    const auto type = r.string("type", std::nullopt, policies::engine_models().names());
    const auto version = r.string("version", std::string());
    if (type) {
      const policies::EngineModelEntry& entry = policies::engine_models().get(*type);
      EngineChoice e;
      e.type = *type;
      e.requested_version = version.value_or("");
      try {
        e.version = policies::resolve_engine_version(entry.versions, e.requested_version,
                                                     "engine.version");
      } catch (const ConfigError& err) {
        for (const ConfigIssue& i : err.issues()) issues.add(i.path, i.message);
      }
      e.knobs = r.params(policies::engine_schema(entry, e.version));
      e.schedules = !top.has("policy");
      s.engine = std::move(e);
    }
    r.finish();
  }
}

// Per-position acceptance of the `speculative` section: its `acceptance` array, else the published
// figures of `method` (models::default_acceptance()). Empty, with an issue added, when neither is
// usable.
std::vector<double> read_acceptance(ObjectReader& r, models::SpeculativeMethod method, int k) {
  std::vector<double> values;
  if (const Json* a = r.array("acceptance", false)) {
    for (size_t i = 0; i < a->size(); ++i) {
      if (!(*a)[i].is_number()) {
        r.issues().add(fmt::format("{}[{}]", r.child_path("acceptance"), i),
                       fmt::format("expected a number in [0, 1], got {}", describe_json((*a)[i])));
        return {};
      }
      values.push_back((*a)[i].get<double>());
    }
    return values;
  }
  try {
    values = models::default_acceptance(method, k);
    r.resolved()["acceptance"] = values;
  } catch (const std::invalid_argument& e) {
    r.issues().add(r.child_path("num_speculative_tokens"), e.what());
  }
  return values;
}

// The validated workload.images, resolved against the model's vision encoder.
void read_images(const Json& workload, const Catalogs& catalogs, Issues& issues, Scenario& s) {
  const auto it = workload.find("images");
  if (it == workload.end() || s.model.empty()) return;
  ImageInputs images;
  images.per_request = static_cast<int32_t>(it->value("per_request", int64_t{0}));
  images.width = it->value("width", int64_t{0});
  images.height = it->value("height", int64_t{0});
  if (images.per_request < 1 || images.width < 1 || images.height < 1) return;  // reported
  const models::ModelSpec& model = catalogs.models.get(s.model);
  if (!model.vision) {
    std::vector<std::string> multimodal;
    for (const std::string& key : catalogs.models.keys()) {
      if (catalogs.models.get(key).vision) multimodal.push_back(key);
    }
    issues.add("workload.images",
               fmt::format("{} has no vision encoder: it serves text only (models with one: {})",
                           s.model, fmt::join(multimodal, ", ")));
    return;
  }
  const models::VisionEncoderSpec& v = *model.vision;
  images.patches_per_image = static_cast<int32_t>(v.image_patches(images.width, images.height));
  images.tokens_per_image = v.image_tokens(images.width, images.height);
  s.images = images;
}

// The `speculative` section: the drafter, the drafts per decode step (0: off) and their acceptance
// per position.
void read_speculative(ObjectReader& top, Issues& issues, Json& resolved, Scenario& s) {
  if (!top.has("speculative")) return;
  ObjectReader r = section_reader(top, "speculative", issues, resolved);
  const auto method = r.string("method", std::nullopt, {"mtp", "eagle3"});
  const int k = static_cast<int>(
      r.integer("num_speculative_tokens", int64_t{1}, 0, kMaxSpeculativeTokens).value_or(0));
  if (!method || k == 0) {
    if (r.has("acceptance")) read_acceptance(r, models::SpeculativeMethod::kMtp, k);  // its values
    r.finish();
    return;
  }
  models::SpeculativeDecoding spec;
  spec.method =
      *method == "mtp" ? models::SpeculativeMethod::kMtp : models::SpeculativeMethod::kEagle3;
  spec.num_speculative_tokens = k;
  spec.acceptance = read_acceptance(r, spec.method, k);
  r.finish();
  if (spec.acceptance.empty()) return;
  if (const std::string why = models::speculative_error(spec); !why.empty()) {
    issues.add("speculative.acceptance", why);
    return;
  }
  s.speculative = std::move(spec);
}

// The `router` and `policy` sections (an engine without a policy runs its own scheduler).
void read_policies(ObjectReader& top, Scenario& s) {
  // The diffusion policies' scenarios are read by read_dllm_scenario (scenarios/dllm_scenario.h).
  std::map<std::string, const ParamSchema*> policies;
  for (const std::string& name : sim::batching_policy_names(sim::ServedModel::kAutoregressive)) {
    policies[name] = &sim::batching_policies().get(name).schema;
  }
  add_schemas(sim::cluster_policies(), policies);
  read_router(top, s.router);
  if (s.engine && s.engine->schedules) {
    s.policy.type = s.engine->type;  // the engine's own scheduler
  } else {
    read_plugin(top, "policy", "coloc", policies, s.policy);
  }
  s.cluster_policy = sim::cluster_policies().contains(s.policy.type);
}

// The `network` section.
void read_network(ObjectReader& top, Issues& issues, Json& resolved, Scenario& s) {
  ObjectReader r = section_reader(top, "network", issues, resolved);
  const NetworkSpec d;
  s.network.gpus_per_node =
      static_cast<int>(r.integer("gpus_per_node", int64_t{d.gpus_per_node}, 1, 1024).value_or(8));
  s.network.inter_node_gbps_per_gpu =
      r.number("inter_node_gbps_per_gpu", d.inter_node_gbps_per_gpu, 0.0, {}, true)
          .value_or(d.inter_node_gbps_per_gpu);
  s.network.inter_node_latency =
      r.duration("inter_node_latency", d.inter_node_latency).value_or(d.inter_node_latency);
  s.network.intra_node_latency =
      r.duration("intra_node_latency", d.intra_node_latency).value_or(d.intra_node_latency);
  r.finish();
}

// The `cost_model` section (an engine replaces its iteration overhead).
void read_cost_model(ObjectReader& top, Issues& issues, Json& resolved, Scenario& s) {
  ObjectReader r = section_reader(top, "cost_model", issues, resolved);
  const models::RooflineParams d;
  s.cost_type = r.string("type", std::string("profiled"), {"profiled", "roofline"}).value_or("profiled");
  s.cost_custom_allreduce =
      r.string("allreduce", std::string("custom"), {"custom", "nccl"}).value_or("custom") == "custom";
  s.cost.compute_efficiency = r.number("compute_efficiency", d.compute_efficiency, 0.0, 1.0).value_or(0);
  s.cost.memory_efficiency =
      r.number("memory_efficiency", d.memory_efficiency, 0.0, 1.0, true).value_or(d.memory_efficiency);
  s.cost.link_efficiency =
      r.number("link_efficiency", d.link_efficiency, 0.0, 1.0, true).value_or(d.link_efficiency);
  s.cost.kernel_launch = r.duration("kernel_launch", d.kernel_launch).value_or(d.kernel_launch);
  s.cost.allreduce_latency =
      r.duration("allreduce_latency", d.allreduce_latency).value_or(d.allreduce_latency);
  if (s.engine && r.has("iteration_overhead")) {
    issues.add(r.child_path("iteration_overhead"),
               "an engine model replaces the constant iteration overhead with its own CPU cost "
               "(engine.cpu_iteration_us, cpu_request_us, cpu_token_us); remove one of the two");
  }
  s.cost.iteration_overhead =
      r.duration("iteration_overhead", d.iteration_overhead).value_or(d.iteration_overhead);
  if (s.engine) {
    s.cost.iteration_overhead = Duration{0};
    resolved["cost_model"]["iteration_overhead"] = "0ns";
  }
  r.finish();
}

// The `output` section.
void read_output(ObjectReader& top, Issues& issues, Json& resolved, Scenario& s) {
  ObjectReader r = section_reader(top, "output", issues, resolved);
  s.output.sample_interval =
      r.duration("sample_interval", s.output.sample_interval).value_or(s.output.sample_interval);
  if (s.output.sample_interval.count() != 0 && s.output.sample_interval < kMinSampleInterval) {
    issues.add("output.sample_interval",
               fmt::format("expected 0s (no time series) or at least {}, got {}",
                           format_param_value(kMinSampleInterval),
                           format_param_value(s.output.sample_interval)));
  }
  s.output.record_token_times = r.boolean("record_token_times", false).value_or(false);
  const std::string requests =
      r.string("requests", std::string("all"), {"all", "none", "sample"}).value_or("all");
  s.output.requests = requests == "none"     ? RequestsOutput::kNone
                      : requests == "sample" ? RequestsOutput::kSample
                                             : RequestsOutput::kAll;
  s.output.request_sample = r.integer("request_sample", s.output.request_sample, 1, kMaxRequests)
                                .value_or(s.output.request_sample);
  if (s.output.requests != RequestsOutput::kSample && r.has("request_sample")) {
    issues.add("output.request_sample", "only with \"requests\": \"sample\"");
  }
  s.output.fast_forward = r.boolean("fast_forward", true).value_or(true);
  r.finish();
}

// The `stop` section.
void read_stop(ObjectReader& top, Issues& issues, Json& resolved, Scenario& s) {
  ObjectReader r = section_reader(top, "stop", issues, resolved);
  if (r.has("max_time")) s.max_time = r.duration("max_time", std::nullopt, false);
  r.claim("max_time");
  r.finish();
}

// The `context` section: the model's position limit and what happens to longer requests.
void read_context(ObjectReader& top, const Catalogs& catalogs, Issues& issues, Json& resolved,
                  Scenario& s) {
  ObjectReader r = section_reader(top, "context", issues, resolved);
  const int64_t model_limit =
      s.model.empty() ? 0 : catalogs.models.get(s.model).max_position_embeddings;
  s.max_context_tokens =
      r.integer("max_tokens", model_limit, 0, kMaxRequestTokens).value_or(model_limit);
  s.truncate_context =
      r.string("overflow", std::string("reject"), {"reject", "truncate"}).value_or("reject") ==
      "truncate";
  r.finish();
}

// Empty when the resolved workload's requests arrive at their workload times; else the
// workload whose send times depend on the run (closed loops, sessions, a benchmark's clients or
// its measured phase after a warm-up), as ClusterPolicyFacts::run_dependent_arrivals names it.
std::string run_dependent_arrivals(const Json& resolved) {
  const auto it = resolved.find("workload");
  if (it == resolved.end() || !it->is_object()) return "";
  const Json& w = *it;
  const std::string type = w.value("type", std::string());
  const bool warmup = type == "benchmark" && w.value("warmup_requests", int64_t{0}) > 0;
  if (warmup) return "benchmark workload with warm-up requests";
  if (type == "closed_loop" || type == "sessions" ||
      (type == "benchmark" && w.contains("concurrency"))) {
    return type + " workload";
  }
  return "";
}

// The instance groups a cluster policy lays out, checked against the cluster section (which may
// not set the layout) and the policy's own limits.
void plan_policy_groups(Scenario& s, bool cluster_sets_layout, Issues& issues, Json& resolved) {
  if (cluster_sets_layout) {
    issues.add("cluster", fmt::format("instances and tp are set by policy {}'s own parameters; "
                                      "remove cluster.instances and cluster.tp",
                                      s.policy.type));
  }
  if (s.cluster.attention_dp > 1) {
    issues.add("cluster.attention_dp",
               fmt::format("policy {} lays out its own instance groups: set attention data "
                           "parallelism with its knobs (disagg: attention_dp_prefill, "
                           "attention_dp_decode), or leave cluster.attention_dp at 1",
                           s.policy.type));
  }
  if (s.cluster.pp > 1) {
    issues.add("cluster.pp", fmt::format("policy {} lays out its own instance groups, which "
                                         "have no pipeline stages; leave cluster.pp at 1",
                                         s.policy.type));
  }
  const sim::ClusterLayout layout = sim::cluster_policies().get(s.policy.type).make(s.policy.params);
  int64_t total = 0;
  for (const auto& g : layout.groups) {
    GroupPlan plan;
    plan.role = g.role;
    plan.count = g.count;
    plan.tp = g.tp;
    plan.ep = g.ep > 0 ? g.ep : s.cluster.ep;
    plan.ep_from_policy = g.ep > 0;
    plan.attention_dp = g.attention_dp;
    plan.memory_params.block_size = g.block_size;
    plan.memory_params.gpu_memory_utilization = g.gpu_memory_utilization;
    plan.memory_params.max_num_batched_tokens = g.max_num_batched_tokens;
    plan.memory_params.max_num_seqs = g.max_num_seqs;
    s.groups.push_back(plan);
    total += g.count;
  }
  int64_t gpus = 0;
  for (const auto& g : layout.groups) gpus += g.count * g.tp * g.attention_dp;
  if (total > kMaxInstances) {
    issues.add("policy", fmt::format("policy {} lays out {} instances, more than the {} a "
                                     "cluster may hold",
                                     s.policy.type, total, kMaxInstances));
  }
  const auto& check = sim::cluster_policies().get(s.policy.type).check;
  if (check) {
    const sim::ClusterPolicyFacts facts{.starting_gpus = gpus,
                                        .run_dependent_arrivals = run_dependent_arrivals(resolved)};
    for (const ConfigIssue& issue : check(s.policy.params, facts)) {
      issues.add(issue.path, issue.message);
    }
  }
  s.cluster.instances = total;
  s.cluster.tp = layout.groups.front().tp;
  resolved["cluster"]["instances"] = total;
  resolved["cluster"]["tp"] = s.cluster.tp;
}

// The one unified group of a scenario without a cluster policy, its memory sized by the batching
// policy's knobs or the engine's own rule.
void plan_unified_group(Scenario& s, Issues& issues, Json& resolved, const DataRoot& root) {
  GroupPlan plan;
  plan.count = s.cluster.instances;
  plan.tp = s.cluster.tp;
  plan.ep = s.cluster.ep;
  plan.attention_dp = s.cluster.attention_dp;
  plan.pp = s.cluster.pp;
  if (plan.engine_instances() > kMaxInstances) {
    issues.add("cluster.pp",
               fmt::format("{} instances of {} pipeline stages run as {} engine instances, more "
                           "than the {} a cluster may hold",
                           plan.count, plan.pp, plan.engine_instances(), kMaxInstances));
  }
  models::MemoryParams& m = plan.memory_params;
  // The batching policy sizes the plan with its own memory knobs (BatchingPolicyEntry::
  // size_memory); one without them keeps the defaults.
  const auto& batching = sim::batching_policies();
  if (batching.contains(s.policy.type) && batching.get(s.policy.type).size_memory) {
    batching.get(s.policy.type).size_memory(s.policy.params, m);
  }
  if (s.engine) {
    // The engine sizes memory as it does itself; the resolved document shows its knobs.
    const policies::EngineSetup setup =
        resolve_engine(s, s.cluster.tp, s.cluster.attention_dp, root);
    m = setup.memory;
    Json& out = resolved["engine"];
    if (s.engine->requested_version.empty()) out["version"] = setup.version;
    for (const auto& [name, value] : setup.resolved.all()) out[name] = param_json(value);
  }
  s.groups.push_back(plan);
}

// Cross-field checks: every group's deployment must be valid and fit in memory (issues found
// here are deployment errors).
void check_deployments(Scenario& s, const Catalogs& catalogs, Issues& issues, Json& resolved) {
  const auto& model_spec = catalogs.models.get(s.model);
  const auto& gpu_spec = catalogs.gpus.get(s.cluster.gpu);
  if (model_spec.moe) {
    resolved["cluster"]["expert_routing"] =
        s.cluster.expert_routing.value_or(model_spec.expert_routing).name();
  } else if (s.cluster.expert_routing) {
    issues.add("cluster.expert_routing",
               fmt::format("{} is a dense model: it has no experts to route to", s.model));
  } else {
    resolved["cluster"].erase("expert_routing");
  }
  for (GroupPlan& g : s.groups) {
    const models::Deployment dep{&model_spec, &gpu_spec, g.tp, s.cluster.weight_dtype,
                                 s.cluster.kv_dtype, g.ep, g.attention_dp, g.pp,
                                 s.cluster.expert_routing};
    if (s.speculative) {
      if (g.attention_dp > 1 || g.pp > 1) {
        issues.add("speculative",
                   "speculative decoding is modelled on tensor-parallel instances "
                   "only, not with attention data parallelism or pipeline stages");
        continue;
      }
      g.memory_params.drafter = std::make_shared<const models::ModelSpec>(
          models::draft_model(model_spec, s.speculative->method));
    }
    if (const std::string e = models::pipeline_parallel_error(model_spec, g.pp, g.attention_dp);
        !e.empty()) {
      issues.add("cluster.pp", e);
      continue;
    }
    if (const std::string e = models::expert_parallel_error(model_spec, g.tp, 1, g.attention_dp);
        !e.empty()) {
      issues.add(s.cluster_policy ? fmt::format("policy.attention_dp_{}", sim::role_name(g.role))
                                  : std::string("cluster.attention_dp"),
                 e);
      continue;
    }
    if (const std::string e =
            models::expert_parallel_error(model_spec, g.tp, g.ep, g.attention_dp);
        !e.empty()) {
      // A disaggregated layout's own knob (ep_prefill / ep_decode), else cluster.ep.
      issues.add(g.ep_from_policy ? fmt::format("policy.ep_{}", sim::role_name(g.role))
                                  : std::string("cluster.ep"),
                 e);
      continue;
    }
    try {
      models::make_roofline_cost_model(dep, s.cost);
      g.memory = models::plan_memory(dep, g.memory_params);
      if (g.memory.num_blocks < g.pp) {
        issues.add("cluster.pp", fmt::format("{} KV blocks cannot be shared by {} micro-batch "
                                             "slots; use fewer pipeline stages",
                                             g.memory.num_blocks, g.pp));
      }
    } catch (const CapacityError& e) {
      issues.add(s.cluster_policy ? "policy" : "cluster", e.what());
    }
  }
}

}  // namespace

Scenario parse_scenario(const Json& doc, const std::string& source, const std::string& base_dir,
                        const DataRoot& root) {
  policies::register_builtin_policies();
  if (is_dllm_document(doc, root)) return read_dllm_scenario(doc, source, base_dir, root);
  const Catalogs& catalogs = Catalogs::get(root);
  Issues issues;
  Scenario s;
  s.source = source;
  s.base_dir = base_dir;
  Json resolved = Json::object();
  ObjectReader top(doc, "", issues, resolved);

  s.name = top.string("name", fs::path(source).stem().string()).value_or("");
  s.description = top.string("description", std::string()).value_or("");
  s.seed = static_cast<uint64_t>(top.integer("seed", int64_t{0}, 0).value_or(0));
  const auto model = top.string("model", std::nullopt, catalogs.models.keys());
  if (model) s.model = *model;
  const bool cluster_sets_layout = read_cluster(top, catalogs, issues, resolved, s);
  read_engine(top, issues, resolved, s);
  read_policies(top, s);
  read_network(top, issues, resolved, s);
  read_cost_model(top, issues, resolved, s);
  read_speculative(top, issues, resolved, s);
  if (const Json* w = top.object("workload", true)) {
    validate_workload(*w, "workload", issues, resolved["workload"], base_dir, root, true);
    read_images(resolved["workload"], catalogs, issues, s);
  }
  s.slo = read_slo(top);
  read_output(top, issues, resolved, s);
  read_context(top, catalogs, issues, resolved, s);
  read_stop(top, issues, resolved, s);
  top.finish();

  // Instance groups: a cluster policy lays them out; otherwise one unified group.
  if (issues.empty() && s.cluster_policy) {
    plan_policy_groups(s, cluster_sets_layout, issues, resolved);
  } else if (issues.empty()) {
    plan_unified_group(s, issues, resolved, root);
  }
  if (issues.empty()) {
    check_deployments(s, catalogs, issues, resolved);
    if (!issues.empty()) throw DeploymentError(source, issues.list());
  }
  if (!issues.empty()) throw ConfigError(source, issues.list());
  s.workload = resolved["workload"];
  s.resolved = std::move(resolved);
  return s;
}

policies::EngineSetup resolve_engine(const Scenario& s, int tp, int attention_dp,
                                     const DataRoot& root) {
  const Catalogs& catalogs = Catalogs::get(root);
  policies::EngineTarget target;
  target.gpu = &catalogs.gpus.get(s.cluster.gpu);
  target.model = &catalogs.models.get(s.model);
  target.tp = tp;
  target.attention_dp = attention_dp;
  target.weight_dtype = s.cluster.weight_dtype;
  target.calibrations = &catalogs.engine_calibrations;
  const EngineChoice& e = s.engine.value();
  return policies::engine_models().get(e.type).build(e.version, e.knobs, target);
}

Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides,
                       const DataRoot& root) {
  Json doc = read_json_file(path, "scenario file");
  apply_overrides(doc, overrides);
  const std::string base = fs::path(path).parent_path().string();
  return parse_scenario(doc, path, base.empty() ? "." : base, root);
}

Scenario load_embedded_quickstart(const std::vector<std::string>& overrides, const DataRoot& root) {
  Json doc = Json::parse(embedded_quickstart_json(), nullptr, true, true);
  apply_overrides(doc, overrides);
  return parse_scenario(doc, "<embedded scenarios/quickstart.json>", "", root);
}

// ---------------------------------------------------------------------------------------------
// Wiring

namespace {

std::unique_ptr<traces::LengthSource> build_lengths(const Json& spec, const std::string& base_dir,
                                                    const DataRoot& root) {
  const std::string type = spec.at("type").get<std::string>();
  if (type == "fixed") {
    return traces::make_fixed_lengths(spec.at("prompt").get<int64_t>(), spec.at("output").get<int64_t>());
  }
  if (type == "distribution") {
    const std::string path = resolve_data_path(spec.at("path").get<std::string>(), base_dir, root);
    return traces::make_empirical_lengths(traces::load_length_distribution(path),
                                          spec.at("path").get<std::string>());
  }
  if (type == "trace") {
    const std::string path = resolve_data_path(spec.at("path").get<std::string>(), base_dir, root);
    return traces::make_lengths_from_workload(
        traces::load_trace(spec.at("format").get<std::string>(), path),
        spec.at("path").get<std::string>());
  }
  // mix
  std::vector<std::unique_ptr<traces::LengthSource>> parts;
  std::vector<double> weights;
  for (const auto& p : spec.at("parts")) parts.push_back(build_lengths(p, base_dir, root));
  if (spec.contains("weights")) {
    for (const auto& w : spec.at("weights")) weights.push_back(w.get<double>());
  } else {
    weights.assign(parts.size(), 1.0);
  }
  return traces::make_mixture_lengths(std::move(parts), std::move(weights));
}

// An arrival process as a validated workload names it: the generators' names, and a benchmark's
// "constant" for evenly spaced arrivals (vLLM's and aiperf's word for uniform).
traces::ArrivalSpec arrival_spec(const std::string& process, double rate_per_s, double cv) {
  const traces::ArrivalKind kind =
      process == "constant" ? traces::ArrivalKind::kUniform : traces::parse_arrival_kind(process);
  return {kind, rate_per_s, cv};
}

// `max_context_tokens`: the model's context, where sessions end (0: none).
Workload build_open_workload(const Json& spec, const std::string& base_dir, const DataRoot& root,
                             uint64_t seed, const std::string& stream,
                             int64_t max_context_tokens = 0) {
  const std::string type = spec.at("type").get<std::string>();
  Workload w;
  if (type == "trace") {
    const std::string path = resolve_data_path(spec.at("path").get<std::string>(), base_dir, root);
    w = traces::load_trace(spec.at("format").get<std::string>(), path);
  } else if (type == "benchmark") {
    traces::ArrivalSpec arrivals{traces::ArrivalKind::kUniform, 1.0, 1.0};
    if (spec.contains("rate")) {
      arrivals = arrival_spec(spec.at("arrival").get<std::string>(), spec.at("rate").get<double>(),
                              spec.at("cv").get<double>());
    }
    std::unique_ptr<traces::LengthSource> lengths =
        spec.contains("lengths") ? build_lengths(spec.at("lengths"), base_dir, root)
        : spec.contains("range_ratio")
            ? traces::make_ranged_lengths(spec.at("isl").get<int64_t>(),
                                          spec.at("osl").get<int64_t>(),
                                          spec.at("range_ratio").get<double>())
            : traces::make_normal_lengths(
                  spec.at("isl").get<double>(), spec.at("isl_stddev").get<double>(),
                  spec.at("osl").get<double>(), spec.at("osl_stddev").get<double>());
    const int64_t count =
        spec.at("num_requests").get<int64_t>() + spec.at("warmup_requests").get<int64_t>();
    w = traces::generate(arrivals, *lengths, count, Duration{0}, derive_stream_seed(seed, stream));
    w.description = lengths->describe();
    traces::SharedPromptSpec shared;
    if (spec.contains("dataset_entries")) {
      shared.dataset_entries = spec.at("dataset_entries").get<int64_t>();
      w.description += fmt::format(", prompts from {} dataset entries", shared.dataset_entries);
    }
    if (spec.contains("num_prefix_prompts") && spec.contains("prefix_prompt_length")) {
      shared.num_prefix_prompts = spec.at("num_prefix_prompts").get<int64_t>();
      shared.prefix_prompt_length = spec.at("prefix_prompt_length").get<int64_t>();
      w.description += fmt::format(", {} shared {}-token prefixes", shared.num_prefix_prompts,
                                   shared.prefix_prompt_length);
    }
    traces::share_prompts(w, shared, derive_stream_seed(seed, stream));
  } else if (type == "sessions") {
    traces::SessionSpec s;
    s.starts = arrival_spec(spec.at("arrival").get<std::string>(), spec.at("rate").get<double>(),
                            spec.at("cv").get<double>());
    s.sessions = spec.at("sessions").get<int64_t>();
    s.min_turns = spec.at("min_turns").get<int64_t>();
    s.max_turns = spec.at("max_turns").get<int64_t>();
    s.think_time = parse_duration(spec.at("think_time").get<std::string>());
    // No session outgrows the model's context, nor the request limit without one.
    s.max_context_tokens = max_context_tokens > 0 ? max_context_tokens : kMaxRequestTokens;
    const auto first = traces::make_normal_lengths(
        spec.at("isl").get<double>(), spec.at("isl_stddev").get<double>(),
        spec.at("osl").get<double>(), spec.at("osl_stddev").get<double>());
    const auto later = traces::make_normal_lengths(
        spec.at("turn_isl").get<double>(), spec.at("turn_isl_stddev").get<double>(),
        spec.at("osl").get<double>(), spec.at("osl_stddev").get<double>());
    w = traces::generate_sessions(s, *first, *later, derive_stream_seed(seed, stream));
    return w;  // no transforms: the session's turns follow each other's completions
  } else if (type == "generated" || type == "closed_loop") {
    traces::ArrivalSpec arrivals{traces::ArrivalKind::kUniform, 1.0, 1.0};
    int64_t count = spec.at("count").get<int64_t>();
    Duration duration{0};
    if (type == "generated") {
      const Json& a = spec.at("arrival");
      arrivals = arrival_spec(a.at("process").get<std::string>(), a.at("rate").get<double>(),
                              a.at("cv").get<double>());
      duration = parse_duration(spec.at("duration").get<std::string>());
    }
    auto lengths = build_lengths(spec.at("lengths"), base_dir, root);
    w = traces::generate(arrivals, *lengths, count, duration, derive_stream_seed(seed, stream));
  } else {  // merge
    const Json& parts = spec.at("parts");
    w = build_open_workload(parts[0], base_dir, root, seed, stream + ".0");
    for (size_t i = 1; i < parts.size(); ++i) {
      w = traces::merge(std::move(w), build_open_workload(parts[i], base_dir, root, seed,
                                                          fmt::format("{}.{}", stream, i)));
    }
  }
  // A benchmark's `rate` is its generator's, not the rate transform (it takes no transforms).
  if (type == "benchmark") return w;
  if (spec.contains("window")) {
    const Json& win = spec.at("window");
    traces::window(w, parse_duration(win.at("start").get<std::string>()),
                   parse_duration(win.at("duration").get<std::string>()));
  }
  if (spec.contains("first_n")) traces::first_n(w, spec.at("first_n").get<int64_t>());
  if (spec.contains("time_scale")) traces::time_scale(w, spec.at("time_scale").get<double>());
  if (spec.contains("rate")) traces::scale_to_rate(w, spec.at("rate").get<double>());
  return w;
}

}  // namespace

double arrival_rate(const Workload& w) {
  const double span = to_seconds(w.requests.back().arrival);
  return span > 0 ? static_cast<double>(w.requests.size() - 1) / span : 1.0;
}

// Every request of `w` sends `images` ahead of its prompt: their tokens join the prompt.
void add_images(const ImageInputs& images, const std::string& source, Workload& w) {
  const int64_t image_tokens = images.per_request * images.tokens_per_image;
  for (RequestSpec& r : w.requests) {
    r.images = images.per_request;
    r.patches_per_image = images.patches_per_image;
    r.prompt_tokens += image_tokens;
    if (r.prompt_tokens > kMaxRequestTokens) {
      throw ConfigError(source,
                        {{"workload.images",
                          fmt::format("request {} has {} prompt tokens with its {} image "
                                      "tokens; a request may have at most {}",
                                      r.id, r.prompt_tokens, image_tokens, kMaxRequestTokens)}});
    }
  }
  w.description +=
      fmt::format(", {} image(s) of {}x{} per request ({} tokens each)", images.per_request,
                  images.width, images.height, images.tokens_per_image);
}

void truncate_to_context(Workload& w, int64_t max_tokens) {
  if (max_tokens <= 0) return;
  for (RequestSpec& r : w.requests) {
    if (r.prompt_tokens + r.output_tokens <= max_tokens) continue;
    r.prompt_tokens = std::max<int64_t>(
        1, std::min(r.prompt_tokens, max_tokens - std::min(r.output_tokens, max_tokens / 2)));
    r.output_tokens = std::max<int64_t>(1, std::min(r.output_tokens, max_tokens - r.prompt_tokens));
  }
}

int64_t count_beyond_context(const Workload& w, int64_t max_tokens) {
  if (max_tokens <= 0) return 0;
  return std::count_if(w.requests.begin(), w.requests.end(), [max_tokens](const RequestSpec& r) {
    return r.prompt_tokens + r.output_tokens > max_tokens;
  });
}

Workload build_workload(const Scenario& scenario, const DataRoot& root) {
  Workload w = build_workload(scenario.workload, scenario.source, scenario.base_dir, root,
                              scenario.seed, scenario.max_context_tokens);
  if (scenario.images) add_images(*scenario.images, scenario.source, w);
  return w;
}

Workload build_workload(const Json& workload, const std::string& source,
                        const std::string& base_dir, const DataRoot& root, uint64_t seed,
                        int64_t max_context_tokens) {
  Workload w;
  try {
    w = build_open_workload(workload, base_dir, root, seed, "workload", max_context_tokens);
  } catch (const RangeError& e) {
    // Arrival times past the simulated clock's range (a rate or time scale stretching the trace).
    throw ConfigError(source, {{"workload", e.what()}});
  }
  for (const RequestSpec& r : w.requests) {
    if (r.prompt_tokens > kMaxRequestTokens || r.output_tokens > kMaxRequestTokens) {
      throw ConfigError(source,
                        {{"workload", fmt::format("request {} has {} prompt and {} output tokens; "
                                                  "a request may have at most {} of each",
                                                  r.id, r.prompt_tokens, r.output_tokens,
                                                  kMaxRequestTokens)}});
    }
  }
  if (static_cast<int64_t>(w.requests.size()) > kMaxRequests) {
    throw ConfigError(source,
                      {{"workload", fmt::format("{} requests, more than the {} a workload may "
                                                "hold; use window or first_n",
                                                w.requests.size(), kMaxRequests)}});
  }
  if (workload.at("type") == "benchmark") {
    const Json& b = workload;
    const int64_t warmup = b.at("warmup_requests").get<int64_t>();
    const std::string load =
        b.contains("concurrency")
            ? fmt::format("concurrency {}", b.at("concurrency").get<int64_t>())
            : fmt::format("{} arrivals at {:g} req/s", b.at("arrival").get<std::string>(),
                          b.at("rate").get<double>());
    w.description = fmt::format("benchmark: {}, {} requests + {} warm-up{}, {}", load,
                                b.at("num_requests").get<int64_t>(), warmup,
                                warmup > 0 && b.at("drain_after_warmup").get<bool>()
                                    ? " (drained)"
                                    : "",
                                w.description);
  }
  if (workload.at("type") == "closed_loop") {
    // Arrival times come from the clients, not from the generator.
    w.description = fmt::format("closed loop: {} clients, think time {}, {} requests with lengths {}",
                                workload.at("clients").get<int64_t>(),
                                workload.at("think_time").get<std::string>(),
                                w.requests.size(), workload.at("lengths").dump());
  }
  if (w.requests.empty()) {
    throw ConfigError(source, {{"workload", "the workload has no requests (check the "
                                                      "window, first_n and count settings)"}});
  }
  return w;
}

namespace {

// How the benchmark client of a `benchmark` workload drives the engine.
sim::ClosedLoopSpec benchmark_client(const Json& b) {
  sim::ClosedLoopSpec c;
  c.clients = b.contains("concurrency") ? b.at("concurrency").get<int64_t>() : 0;
  c.think_time = parse_duration(b.at("think_time").get<std::string>());
  c.ramp_up = parse_duration(b.at("ramp_up").get<std::string>());
  c.warmup_requests = b.at("warmup_requests").get<int64_t>();
  c.drain_after_warmup = b.at("drain_after_warmup").get<bool>();
  c.think_time_jitter = parse_duration(b.at("think_time_jitter").get<std::string>());
  return c;
}

// Bandwidth and latency of the KV path between two instances placed by `first_gpu`.
sim::LinkSpec link_between(const NetworkSpec& net, const models::GpuSpec& gpu, int64_t src_gpu,
                           int src_tp, int64_t dst_gpu, int dst_tp) {
  const int ranks = std::min(src_tp, dst_tp);
  const bool same_node = src_gpu / net.gpus_per_node == dst_gpu / net.gpus_per_node;
  if (same_node) {
    const double per_gpu = gpu.nvlink_bytes_per_s_per_direction > 0
                               ? gpu.nvlink_bytes_per_s_per_direction
                               : gpu.pcie_bytes_per_s_per_direction;
    return {per_gpu * ranks, net.intra_node_latency};
  }
  return {net.inter_node_gbps_per_gpu * 1e9 / 8 * ranks, net.inter_node_latency};
}

// One cost model per (tp, ep, attention_dp, pp) layout of the groups.
using CostModelsByLayout =
    std::map<std::tuple<int, int, int, int>, std::shared_ptr<const models::IterationCostModel>>;

// Where each instance's GPUs sit (the first GPU index and the TP degree), in instance order;
// shared with the KV-link function so that instances added by an elastic cluster are placed too.
struct Placement {
  std::vector<int64_t> first_gpu;
  std::vector<int> tps;
  int64_t next_gpu = 0;
  void add(int tp) {
    first_gpu.push_back(next_gpu);
    tps.push_back(tp);
    next_gpu += tp;
  }
};

// An instance of group `g` (its batching is left to the caller).

sim::InstanceSetup base_setup(const Scenario& s, const models::ModelSpec& model,
                              const models::GpuSpec& gpu, const GroupPlan& g,
                              std::shared_ptr<const models::IterationCostModel> cost) {
  sim::InstanceSetup setup;
  setup.gpu = s.cluster.gpu;
  setup.tp = g.gpus_per_slot();
  setup.role = g.role;
  setup.kv_bytes_per_token = model.kv_bytes_per_token(s.cluster.kv_dtype);
  setup.cost_model = std::move(cost);
  setup.num_blocks = g.memory.num_blocks / g.pp;  // a pipeline's slots share its KV
  setup.block_size = g.memory.block_size;
  setup.prefix_cache_kind = s.cluster.prefix_cache_kind;
  setup.dram_kv_bytes = static_cast<int64_t>(s.cluster.kv_dram_gib * kBytesPerGiB);
  setup.dram_link = {gpu.pcie_bytes_per_s_per_direction * g.gpus_per_slot(),
                     s.network.intra_node_latency};
  setup.remote_link = {s.network.inter_node_gbps_per_gpu * 1e9 / 8 * g.gpus_per_slot(),
                       s.network.inter_node_latency};
  setup.speculative = s.speculative;
  setup.speculative_seed = derive_stream_seed(s.seed, "speculative-acceptance");
  return setup;
}

// `target`, the plain cost model of `dep`, with the drafter of `spec` priced on the same GPUs
// (models::make_speculative_cost_model()): the drafter's passes run inside the target's step, so
// its own model has no per-iteration overhead.
std::shared_ptr<const models::IterationCostModel> with_drafter(
    const models::SpeculativeDecoding& spec, CostModelChoice choice, const models::Deployment& dep,
    const DataRoot& root, std::shared_ptr<const models::IterationCostModel> target) {
  auto drafter =
      std::make_shared<const models::ModelSpec>(models::draft_model(*dep.model, spec.method));
  models::Deployment d = dep;
  d.model = drafter.get();
  if (!drafter->moe) d.ep = 1;
  choice.roofline.iteration_overhead = Duration{0};
  std::shared_ptr<const models::IterationCostModel> draft = make_cost_model(choice, d, root);
  return models::make_speculative_cost_model(std::move(target), std::move(draft),
                                             std::move(drafter), spec);
}

// `target`, the cost model of the instances of `dep`, with the model's vision encoder priced on
// the same GPUs (models::make_vision_cost_model()): in BF16, as the checkpoints keep their vision
// towers, and without a per-iteration overhead of its own, as it runs inside the target's step.
std::shared_ptr<const models::IterationCostModel> with_vision_encoder(
    CostModelChoice choice, const models::Deployment& dep, const DataRoot& root,
    std::shared_ptr<const models::IterationCostModel> target) {
  auto encoder =
      std::make_shared<const models::ModelSpec>(models::vision_encoder_model(*dep.model));
  const models::Deployment d{encoder.get(), dep.gpu, models::vision_encoder_tp(*dep.model, dep.tp),
                             models::Dtype::kBf16, models::Dtype::kBf16};
  choice.roofline.iteration_overhead = Duration{0};
  std::shared_ptr<const models::IterationCostModel> encoder_cost = make_cost_model(choice, d, root);
  return models::make_vision_cost_model(std::move(target), std::move(encoder_cost),
                                        std::move(encoder));
}

// What a cluster policy's factories know about the instance `setup` at `index`.
sim::InstanceContext context_for(const Scenario& s, const sim::InstanceSetup& setup, int32_t index) {
  sim::InstanceContext ctx;
  ctx.index = index;
  ctx.role = setup.role;
  ctx.tp = setup.tp;
  ctx.num_blocks = setup.num_blocks;
  ctx.block_size = setup.block_size;
  ctx.kv_bytes_per_token = setup.kv_bytes_per_token;
  ctx.cost_model = setup.cost_model;
  ctx.slo = s.slo;
  ctx.seed = s.seed;
  return ctx;
}

}  // namespace

// Elastic clusters: instances the controller adds are built like the first group of their role,
// on the cost models of the initial groups.
void wire_elastic(const Scenario& s, const models::ModelSpec& model, const models::GpuSpec& gpu,
                  const sim::ClusterLayout& layout, const CostModelsByLayout& cost_by_tp,
                  const std::shared_ptr<Placement>& placement,
                  const std::vector<sim::InstanceContext>& contexts, sim::ElasticConfig& elastic) {
  const auto shared_layout = std::make_shared<const sim::ClusterLayout>(layout);
  elastic.make_instance = [s, &model, &gpu, shared_layout, cost_by_tp, placement](
                              sim::InstanceRole role, int32_t index) {
    for (size_t gi = 0; gi < s.groups.size(); ++gi) {
      const GroupPlan& g = s.groups[gi];
      if (g.role != role) continue;
      sim::InstanceSetup setup =
          base_setup(s, model, gpu, g, cost_by_tp.at({g.tp, g.ep, g.attention_dp, g.pp}));
      setup.batching = shared_layout->groups[gi].make_batching(context_for(s, setup, index));
      placement->add(g.gpus_per_slot());
      return setup;
    }
    throw std::invalid_argument(
        fmt::format("policy {} has no {} instances to add", s.policy.type, sim::role_name(role)));
  };
  elastic.controller = layout.elastic->make_controller(contexts);
  elastic.control_interval = layout.elastic->control_interval;
  elastic.startup_prefill = layout.elastic->startup_prefill;
  elastic.startup_decode = layout.elastic->startup_decode;
}

// The workload and the engine's run settings: context limit, objectives, outputs, time limit,
// remote KV tier and the clients of a closed-loop or benchmark workload.
void set_run_config(const Scenario& s, const DataRoot& root, EngineInputs& in) {
  in.workload = build_workload(s, root);
  in.config.max_context_tokens = s.max_context_tokens;
  if (s.truncate_context) truncate_to_context(in.workload, s.max_context_tokens);
  in.config.slo = s.slo;
  in.config.sample_interval = s.output.sample_interval;
  in.config.record_token_times = s.output.record_token_times;
  in.config.fast_forward = s.output.fast_forward;
  in.config.max_sim_time = s.max_time;
  in.config.remote_kv_bytes = static_cast<int64_t>(s.cluster.kv_remote_gib * kBytesPerGiB);
  if (s.workload.at("type") == "closed_loop") {
    in.config.closed_loop.clients = s.workload.at("clients").get<int64_t>();
    in.config.closed_loop.think_time =
        parse_duration(s.workload.at("think_time").get<std::string>());
  } else if (s.workload.at("type") == "benchmark") {
    in.config.closed_loop = benchmark_client(s.workload);
  }
  in.config.closed_loop.seed = s.seed;
}

EngineInputs build_engine_inputs(const Scenario& s, const DataRoot& root) {
  const Catalogs& catalogs = Catalogs::get(root);
  EngineInputs in;
  const models::ModelSpec& model = catalogs.models.get(s.model);
  const models::GpuSpec& gpu = catalogs.gpus.get(s.cluster.gpu);
  std::optional<sim::ClusterLayout> layout;
  if (s.cluster_policy) layout = sim::cluster_policies().get(s.policy.type).make(s.policy.params);
  const bool engine_schedules = s.engine && s.engine->schedules;
  const auto* policy_entry = s.cluster_policy || engine_schedules
                                 ? nullptr
                                 : &sim::batching_policies().get(s.policy.type);

  CostModelsByLayout cost_by_tp;
  // With an engine model, by (tp, attention_dp).
  std::map<std::pair<int, int>, policies::EngineSetup> engine_by_layout;
  auto placement = std::make_shared<Placement>();
  std::vector<sim::InstanceContext> contexts;  // cluster policies only
  for (size_t gi = 0; gi < s.groups.size(); ++gi) {
    const GroupPlan& g = s.groups[gi];
    auto& cost = cost_by_tp[{g.tp, g.ep, g.attention_dp, g.pp}];
    if (!cost) {
      const models::Deployment dep{&model, &gpu, g.tp, s.cluster.weight_dtype, s.cluster.kv_dtype,
                                   g.ep, g.attention_dp, g.pp, s.cluster.expert_routing};
      CostModelChoice choice{s.cost_type, s.cost, s.cost_custom_allreduce};
      const policies::EngineSetup* e =
          s.engine ? &engine_by_layout
                          .try_emplace({g.tp, g.attention_dp},
                                       resolve_engine(s, g.tp, g.attention_dp, root))
                          .first->second
                   : nullptr;
      if (e) {
        choice.moe_kernel_scale = e->moe_kernel_scale;
        choice.fused_activation_quantization = e->compiles_table_layers;
        choice.engine_tables = e->kernel_tables;
      }
      cost = make_cost_model(choice, dep, root);
      if (s.speculative) cost = with_drafter(*s.speculative, choice, dep, root, std::move(cost));
      if (e) {
        models::EngineRuntime runtime = e->runtime;
        runtime.scheduler_ranks = g.attention_dp;
        runtime.layers = (model.num_layers + g.pp - 1) / g.pp;
        cost = models::make_engine_cost_model(cost, std::move(runtime));
      }
      if (s.images) cost = with_vision_encoder(choice, dep, root, std::move(cost));
      in.cost_models.push_back(cost);
    }
    if (!in.cost_model) in.cost_model = cost;
    const policies::EngineSetup* engine =
        s.engine ? &engine_by_layout.at({g.tp, g.attention_dp}) : nullptr;
    for (int64_t i = 0; i < g.engine_instances(); ++i) {
      sim::InstanceSetup setup = base_setup(s, model, gpu, g, cost);
      setup.prefix_caching = engine ? engine->prefix_caching : s.cluster.prefix_caching;
      if (engine) setup.frontend = engine->frontend;
      if (layout) {
        sim::InstanceContext ctx = context_for(s, setup, static_cast<int32_t>(in.instances.size()));
        setup.batching = layout->groups[gi].make_batching(ctx);
        contexts.push_back(std::move(ctx));
      } else if (engine && s.engine->schedules) {
        setup.batching = engine->make_scheduler();
        setup.max_prompt_tokens = engine->max_prompt_tokens;
      } else {
        setup.batching = policy_entry->make(s.policy.params);
        if (policy_entry->max_prompt_tokens) {
          setup.max_prompt_tokens = policy_entry->max_prompt_tokens(s.policy.params);
        }
      }
      in.instances.push_back(std::move(setup));
      placement->add(g.gpus_per_slot());
    }
  }
  if (layout && layout->make_router) {
    in.router = layout->make_router(contexts);
  } else {
    in.router = sim::routing_policies().get(s.router.type).make(s.router.params);
  }
  if (layout) {
    in.decode_router = sim::routing_policies().get(layout->decode_router).make({});
    in.config.transfer.mode = layout->transfer;
    in.config.transfer.num_layers = model.num_layers;
    const NetworkSpec net = s.network;
    in.config.transfer.link = [net, gpu, placement](int32_t a, int32_t b) {
      const Placement& p = *placement;
      return link_between(net, gpu, p.first_gpu[static_cast<size_t>(a)], p.tps[static_cast<size_t>(a)],
                          p.first_gpu[static_cast<size_t>(b)], p.tps[static_cast<size_t>(b)]);
    };
    in.config.arrivals_to_decode = layout->decode_takes_arrivals;
  }
  if (layout && layout->elastic) {
    wire_elastic(s, model, gpu, *layout, cost_by_tp, placement, contexts, in.config.elastic);
  }
  set_run_config(s, root, in);
  return in;
}

std::vector<std::pair<std::string, std::string>> flatten(const Json& doc) {
  std::vector<std::pair<std::string, std::string>> out;
  struct Walker {
    std::vector<std::pair<std::string, std::string>>& out;
    void walk(const Json& v, const std::string& path) {
      if (v.is_object() && !v.empty()) {
        for (auto it = v.begin(); it != v.end(); ++it) walk(it.value(), join_path(path, it.key()));
      } else if (v.is_array() && !v.empty()) {
        for (size_t i = 0; i < v.size(); ++i) walk(v[i], fmt::format("{}[{}]", path, i));
      } else if (v.is_string()) {
        out.emplace_back(path, v.get<std::string>());
      } else {
        out.emplace_back(path, v.dump());
      }
    }
  };
  Walker{out}.walk(doc, "");
  return out;
}

}  // namespace servesim::scenarios
