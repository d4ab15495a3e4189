#include "app/measured_runs.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <regex>

#include <boost/algorithm/string/case_conv.hpp>
#include <boost/algorithm/string/predicate.hpp>
#include <fmt/format.h>

#include "models/cost/serving_engine.h"
#include "profiles/profile_csv.h"
#include "core/error.h"
#include "policies/engines/engine_model.h"
#include "scenarios/json_reader.h"

namespace servesim::app {
namespace {

constexpr const char* kExpectedColumns =
    "id, backend, backend_version, model_path, system, precision, mode, isl, osl, "
    "gemm_quant_mode, batch_size, tp_size, pp_size, attention_dp_size, moe_tp_size, moe_ep_size, "
    "silicon_ttft_ms, silicon_tpot_ms";

// "meta-llama/Llama-3.1-8B-Instruct-FP8" -> "llama-3.1-8b".
std::string model_stem(const std::string& id) {
  std::string s = boost::algorithm::to_lower_copy(id);
  if (const size_t slash = s.rfind('/'); slash != std::string::npos) s = s.substr(slash + 1);
  for (bool changed = true; changed;) {
    changed = false;
    for (const char* suffix : {"-instruct", "-fp8", "-nvfp4", "-fp4", "-hf"}) {
      const std::string x = suffix;
      if (s.size() > x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0) {
        s.resize(s.size() - x.size());
        changed = true;
      }
    }
  }
  return s;
}

// The benchmark that measured `r` (with `client`), as a scenario's workload section.
scenarios::Json benchmark_workload(const MeasuredRun& r, BenchmarkClient client,
                                   const BenchmarkTemplate& bench) {
  scenarios::Json w = {{"type", "benchmark"},
                       {"concurrency", r.concurrency},
                       {"num_requests", bench.rounds_for(r.concurrency, client) * r.concurrency},
                       {"warmup_requests", bench.warmups_for(client) * r.concurrency},
                       {"drain_after_warmup", true},
                       {"think_time_jitter", bench.client_jitter},
                       {"isl", r.isl},
                       {"osl", r.osl}};
  if (client == BenchmarkClient::kBenchServing) {
    w["range_ratio"] = BenchmarkTemplate::kBenchServingRangeRatio;
  }
  if (bench.dataset_entries > 0) w["dataset_entries"] = bench.dataset_entries;
  return w;
}

// Why a disaggregated row's pools cannot be laid out ("" when they can).
std::string disaggregated_layout_error(const MeasuredRun& r) {
  for (const auto& [name, pool] : {std::pair<const char*, const PoolLayout&>{"prefill", r.prefill},
                                   std::pair<const char*, const PoolLayout&>{"decode", r.decode}}) {
    if (pool.workers < 1) return fmt::format("disaggregated row without {}_num_workers", name);
    if (pool.pp > 1) return fmt::format("pipeline parallelism ({} pool) is not modelled", name);
    if (pool.moe_ep > 1 && pool.moe_tp * pool.moe_ep != pool.tp * pool.attention_dp) {
      return fmt::format("{} pool: expert parallelism moe_tp {} x moe_ep {} is not its tp {} x "
                         "attention_dp {}",
                         name, pool.moe_tp, pool.moe_ep, pool.tp, pool.attention_dp);
    }
  }
  if (r.concurrency < 1) return "no concurrency (silicon_concurrency or decode batch) given";
  return "";
}

// A disaggregated row's scenario: servesim's disagg policy with the row's pools. Batch limits
// are per attention-DP rank in the CSV and per instance in servesim; a prefill instance takes
// batch x (ISL + 1500) tokens per pass, as the aggregated mapping's budget.
scenarios::Json disaggregated_scenario(const MeasuredRun& r, const MappedRun& m,
                                       const std::string& kv_dtype, const BenchmarkTemplate& bench) {
  const PoolLayout& p = r.prefill;
  const PoolLayout& d = r.decode;
  const int64_t prefill_batch = std::max<int64_t>(1, p.batch) * p.attention_dp;
  return {
      {"name", r.id},
      {"description",
       fmt::format("measured run {} (line {}): {} disaggregated on {}: {} prefill x {} GPUs, {} "
                   "decode x {} GPUs, ISL {} / OSL {}, concurrency {}; measured TTFT {:.1f} ms, "
                   "TPOT {:.2f} ms",
                   r.id, r.line, r.backend, r.system, p.workers, p.tp * p.attention_dp, d.workers,
                   d.tp * d.attention_dp, r.isl, r.osl, r.concurrency, r.ttft_ms, r.tpot_ms)},
      {"seed", bench.seed},
      {"model", m.model},
      {"cluster", {{"gpu", m.gpu}, {"weight_dtype", m.weight_dtype}, {"kv_dtype", kv_dtype}}},
      {"policy",
       {{"type", "disagg"},
        {"num_prefill", p.workers},
        {"tp_prefill", p.tp},
        {"attention_dp_prefill", p.attention_dp},
        {"ep_prefill", p.moe_ep},
        {"num_decode", d.workers},
        {"tp_decode", d.tp},
        {"attention_dp_decode", d.attention_dp},
        {"ep_decode", d.moe_ep},
        {"prefill_max_batch_size", prefill_batch},
        {"prefill_max_tokens", prefill_batch * (r.isl + 1500)},
        {"decode_max_num_seqs", std::max<int64_t>(1, d.batch) * d.attention_dp}}},
      {"workload", benchmark_workload(r, m.client, bench)},
      {"output", {{"sample_interval", "0s"}}},
  };
}

}  // namespace

// Upper bounds far above any real deployment that keep every product the mapping forms
// (clients x rounds, batch x ranks x tokens) far from int64 overflow.
constexpr int64_t kMaxDegree = 4096;  // GPUs, ranks or workers of one kind
constexpr int64_t kMaxBatch = 1'000'000;
constexpr int64_t kMaxTokens = int64_t{1} << 24;
constexpr int64_t kMaxClients = 10'000'000;

std::vector<MeasuredRun> read_measured_runs(const std::string& path) {
  profiles::CsvReader csv(path);
  const int id = csv.require("id", kExpectedColumns);
  const int backend = csv.require("backend", kExpectedColumns);
  const int version = csv.require("backend_version", kExpectedColumns);
  const int model = csv.require("model_path", kExpectedColumns);
  const int system = csv.require("system", kExpectedColumns);
  const int precision = csv.require("precision", kExpectedColumns);
  const int mode = csv.require("mode", kExpectedColumns);
  const int isl = csv.require("isl", kExpectedColumns);
  const int osl = csv.require("osl", kExpectedColumns);
  const int quant = csv.require("gemm_quant_mode", kExpectedColumns);
  const int moe_quant = csv.find("moe_quant_mode");  // optional
  const int batch = csv.require("batch_size", kExpectedColumns);
  const int tp = csv.require("tp_size", kExpectedColumns);
  const int pp = csv.require("pp_size", kExpectedColumns);
  const int adp = csv.require("attention_dp_size", kExpectedColumns);
  const int moe_tp = csv.require("moe_tp_size", kExpectedColumns);
  const int moe_ep = csv.require("moe_ep_size", kExpectedColumns);
  const int source = csv.find("silicon_data_source");  // optional
  // Disaggregated pools (optional columns, in this order per pool).
  static constexpr const char* kPoolFields[] = {"num_workers", "batch_size", "tp_size", "pp_size",
                                                "attention_dp_size", "moe_tp_size", "moe_ep_size"};
  std::array<std::array<int, 7>, 2> pool_columns{};
  for (size_t p = 0; p < 2; ++p) {
    for (size_t f = 0; f < 7; ++f) {
      pool_columns[p][f] = csv.find(fmt::format("{}_{}", p == 0 ? "prefill" : "decode", kPoolFields[f]));
    }
  }
  const int ttft = csv.require("silicon_ttft_ms", kExpectedColumns);
  const int tpot = csv.require("silicon_tpot_ms", kExpectedColumns);
  auto bounded = [&csv](int column, int64_t min, int64_t max) {
    const int64_t value = csv.integer(column, min);
    if (value > max) {
      csv.fail(fmt::format("column {}: expected an integer <= {}, found {}",
                           csv.header()[static_cast<size_t>(column)], max, value));
    }
    return value;
  };
  // Parallelism columns are empty in disaggregated rows (their prefill_/decode_ columns hold
  // them) and where upstream left the default of 1.
  auto optional_count = [&csv, &bounded](int column, int64_t max = kMaxDegree) -> int64_t {
    return csv.field(column).empty() ? 1 : std::max<int64_t>(1, bounded(column, 0, max));
  };
  std::vector<MeasuredRun> out;
  while (csv.next()) {
    MeasuredRun r;
    r.line = csv.line();
    r.id = csv.non_empty(id);
    r.backend = csv.non_empty(backend);
    r.backend_version = csv.text(version);
    r.model_path = csv.non_empty(model);
    r.system = csv.non_empty(system);
    r.precision = csv.text(precision);
    r.gemm_quant_mode = csv.text(quant);
    if (moe_quant >= 0) r.moe_quant_mode = csv.text(moe_quant);
    if (source >= 0) r.source = csv.text(source);
    r.mode = csv.non_empty(mode);
    r.isl = bounded(isl, 1, kMaxTokens);
    r.osl = bounded(osl, 1, kMaxTokens);
    r.concurrency = csv.field(batch).empty() ? 0 : bounded(batch, 1, kMaxBatch);
    r.tp = optional_count(tp);
    r.pp = optional_count(pp);
    r.attention_dp = optional_count(adp);
    r.concurrency *= r.attention_dp;  // batch_size is per attention-DP rank
    for (size_t p = 0; p < 2; ++p) {
      PoolLayout& pool = p == 0 ? r.prefill : r.decode;
      const auto& cols = pool_columns[p];
      auto count_or = [&](int column, int64_t absent, int64_t max = kMaxDegree) {
        return column < 0 || csv.field(column).empty() ? absent : optional_count(column, max);
      };
      pool.workers = count_or(cols[0], 0);
      pool.batch = count_or(cols[1], 0, kMaxBatch);
      pool.tp = count_or(cols[2], 1);
      pool.pp = count_or(cols[3], 1);
      pool.attention_dp = count_or(cols[4], 1);
      pool.moe_tp = count_or(cols[5], 1);
      pool.moe_ep = count_or(cols[6], 1);
    }
    if (r.mode == "disagg") {
      r.concurrency = r.decode.batch * r.decode.workers * r.decode.attention_dp;
      if (source >= 0) {
        const std::string& text = r.source;
        const std::string key = "silicon_concurrency=";
        if (const size_t at = text.find(key); at != std::string::npos) {
          const size_t from = at + key.size();
          size_t to = from;
          while (to < text.size() && std::isdigit(static_cast<unsigned char>(text[to]))) ++to;
          if (to > from && to - from <= 9) r.concurrency = std::stoll(text.substr(from, to - from));
        }
      }
    }
    if (r.concurrency > kMaxClients) {
      csv.fail(fmt::format("{} benchmark clients (batch size x ranks x workers, or "
                           "silicon_concurrency); at most {}",
                           r.concurrency, kMaxClients));
    }
    r.moe_tp = optional_count(moe_tp);
    r.moe_ep = optional_count(moe_ep);
    r.ttft_ms = csv.non_negative(ttft);
    r.tpot_ms = csv.non_negative(tpot);
    if (r.ttft_ms <= 0 || r.tpot_ms <= 0) {
      csv.fail("silicon_ttft_ms and silicon_tpot_ms must be positive");
    }
    out.push_back(std::move(r));
  }
  return out;
}

int64_t BenchmarkTemplate::rounds_for(int64_t concurrency, BenchmarkClient client) const {
  const int64_t rounds = client == BenchmarkClient::kBenchServing ? kBenchServingPromptsPerClient
                                                                  : requests_per_client;
  if (max_measured_requests <= 0 || concurrency < 1) return rounds;
  const int64_t capped = std::max(kMinMeasuredRounds, max_measured_requests / concurrency);
  return std::min(rounds, capped);
}

BenchmarkClient benchmark_client_of(const MeasuredRun& run) {
  // InferenceMAX's results: a database dump ("db-dump/2026-04-27; ...") or a dated export
  // ("source_file=2026-04-06.csv; ..."); aiconfigurator's own name a path under its data.
  static const std::regex kInferenceMax(R"(^(db-dump/|source_file=\d{4}-\d{2}-\d{2}\.csv;))");
  return std::regex_search(run.source, kInferenceMax) ? BenchmarkClient::kBenchServing
                                                      : BenchmarkClient::kAiperf;
}

const char* benchmark_client_name(BenchmarkClient client) {
  return client == BenchmarkClient::kAiperf ? "aiperf" : "bench_serving";
}

std::string MappedRun::group() const {
  return fmt::format("{} / {} / {}{}", engine.empty() ? run.backend : engine,
                     gpu.empty() ? run.system : gpu, model.empty() ? run.model_path : model,
                     disaggregated() ? " disagg" : "");
}

std::string catalog_model_for(const std::string& hf_id, const models::ModelCatalog& catalog) {
  const std::string want = model_stem(hf_id);
  for (const auto& [key, spec] : catalog.all()) {
    if (!spec.hf_id.empty() && boost::algorithm::iequals(spec.hf_id, hf_id)) return key;
  }
  for (const auto& [key, spec] : catalog.all()) {
    if ((!spec.hf_id.empty() && model_stem(spec.hf_id) == want) || model_stem(key) == want) {
      return key;
    }
  }
  return "";
}

namespace {

// Whether engine model `engine` has a knob `name`.
bool has_knob(const std::string& engine, const std::string& name) {
  for (const ParamSpec& k : policies::engine_models().get(engine).schema) {
    if (k.name == name) return true;
  }
  return false;
}

// A MoE row whose experts span more GPUs than its tensor parallelism (moe_tp x moe_ep a multiple
// of tp, no attention_dp given) ran its attention data-parallel over them: vLLM's
// --data-parallel-size, whose MoE layers are sharded over every DP x TP rank. Its clients stay
// the row's (batch_size is silicon_concurrency there, not a per-rank count).
void infer_attention_data_parallelism(MappedRun& m) {
  const MeasuredRun& row = m.run;
  const int64_t moe_gpus = row.moe_tp * row.moe_ep;
  if (m.moe && row.attention_dp == 1 && row.pp == 1 && moe_gpus > row.tp &&
      moe_gpus % row.tp == 0) {
    m.run.attention_dp = moe_gpus / row.tp;
    m.assumption = fmt::format(
        "experts over moe_tp {} x moe_ep {} GPUs at tp {}: attention data-parallel over {} ranks",
        row.moe_tp, row.moe_ep, row.tp, m.run.attention_dp);
  }
}

// The row's quant mode, lower-cased: the experts' for a MoE model (the bulk of its weights), else
// the GEMMs', else the row's precision.
std::string row_quant_mode(const MappedRun& m) {
  const MeasuredRun& r = m.run;
  return boost::algorithm::to_lower_copy(m.moe && !r.moe_quant_mode.empty() ? r.moe_quant_mode
                                         : r.gemm_quant_mode.empty()        ? r.precision
                                                                            : r.gemm_quant_mode);
}

// The weight dtype a row ran (or "" when servesim has none for its quant mode): nvfp4 on FP4
// tensor cores where the GPU has them, elsewhere as the engines' weight-only kernels (4-bit
// weights, 16-bit math): a checkpoint published in MXFP4 (gpt-oss; the CSV calls its 4-bit
// experts nvfp4) as mxfp4, others as int4_wo. (On Blackwell the engines run gpt-oss on the FP4
// tensor cores: its measured TPOT is a third of what the W4A16 MXFP4 MoE table of the B200 gives
// for the MoE layers alone, so that kernel is not the one the engines ran.) One exception keeps
// the mapping the shipped engine calibration was fitted on: a dense model's block-scaled FP8
// (SGLang's Llama-3.1-8B rows) runs as per-tensor fp8; MoE experts keep fp8_block.
std::string row_weight_dtype(const MappedRun& m, const std::string& quant,
                             const scenarios::Catalogs& catalogs) {
  const bool fp4_cores =
      !m.gpu.empty() && catalogs.gpus.get(m.gpu).peak_flops_per_s(models::Dtype::kNvfp4) > 0;
  const bool mxfp4_checkpoint =
      !m.model.empty() && catalogs.models.get(m.model).checkpoint_quantization == "mxfp4";
  // aiconfigurator's quant mode names (float16, fp8, fp8_block, fp8_ootb, nvfp4, w4a16_mxfp4,
  // int4_wo, ...) and the usual spellings of the same formats; 8-bit integer and mixed
  // int4-weight / fp8-activation modes have no servesim dtype and are skipped.
  const bool sixteen_bit = quant.empty() || quant == "bf16" || quant == "bfloat16" ||
                           quant == "float16" || quant == "fp16" || quant == "half";
  const bool fp4 = quant == "nvfp4" || quant == "mxfp4";
  return sixteen_bit                                           ? "bf16"
         : m.moe && quant == "fp8_block"                       ? "fp8_block"
         : quant.rfind("fp8", 0) == 0                          ? "fp8"
         : fp4 && fp4_cores                                    ? "nvfp4"
         : (fp4 && mxfp4_checkpoint) || quant == "w4a16_mxfp4" ? "mxfp4"
         : fp4 || quant == "int4_wo" || quant == "w4a16"       ? "int4_wo"
                                                               : "";
}

// Why a row cannot be simulated, or "" when it can.
std::string skip_reason_of(const MappedRun& m, const std::string& quant) {
  const MeasuredRun& r = m.run;
  const bool disagg = r.mode == "disagg";
  if (!disagg && r.mode != "agg") {
    return fmt::format("deployment mode \"{}\" (agg or disagg)", r.mode);
  } else if (m.engine.empty()) {
    return fmt::format("no engine model \"{}\" (known: {})", r.backend,
                       policies::engine_models().valid_names());
  } else if (m.gpu.empty()) {
    return fmt::format("GPU {} is not in the catalog", r.system);
  } else if (m.model.empty()) {
    return fmt::format("model {} is not in the catalog (add it with servesim models import)",
                       r.model_path);
  } else if (m.weight_dtype.empty()) {
    return fmt::format("{} weights are not modelled", quant);
  } else if (disagg) {
    return disaggregated_layout_error(r);
  } else if (r.pp > 1 && r.attention_dp > 1) {
    return "pipeline parallelism with attention data parallelism is not modelled";
  } else if (r.attention_dp > 1 && r.moe_tp * r.moe_ep != r.tp * r.attention_dp) {
    return fmt::format("expert parallelism moe_tp {} x moe_ep {} is not the row's tp {} x "
                       "attention_dp {}",
                       r.moe_tp, r.moe_ep, r.tp, r.attention_dp);
  } else if (r.attention_dp == 1 && r.moe_ep > 1 && r.moe_tp * r.moe_ep != r.tp) {
    return fmt::format("expert parallelism moe_tp {} x moe_ep {} is not the row's tp {}",
                       r.moe_tp, r.moe_ep, r.tp);
  } else if (r.concurrency < 1) {
    return "no concurrency (batch_size) given";
  }
  return "";
}

// The first SGLang release whose aiconfigurator generator template passes --enable-mixed-chunk.
// The generator's rule asks for mixed chunks since 2026-01-19 (misspelt as --enable-mix-chunk
// for the first hours); the template of 0.5.6.post2 was written after that, those of 0.5.1.post1
// to 0.5.4.post3 before, so the campaigns of those releases ran without mixing.
constexpr const char* kSglangGeneratorMixesFrom = "0.5.6";

// The limits the row's campaign deployed its engine with (BenchmarkTemplate::Deployment): with
// attention DP they are per rank, and the one scheduler servesim runs for the instance holds
// every rank's share. `gpu_class` is the row's GPU family (models::gpu_class).
policies::BenchmarkLimits campaign_limits(const std::string& engine_name, const MeasuredRun& r,
                                          BenchmarkClient client, const std::string& gpu_class) {
  const int64_t ranks = r.attention_dp;
  policies::BenchmarkLimits limits;  // aiconfigurator's generator
  limits.max_batch = std::max<int64_t>(128, r.concurrency / ranks) * ranks;
  limits.prefill_tokens = (r.isl + 1500) * ranks;
  limits.token_budget = limits.max_batch + limits.prefill_tokens;
  if (client != BenchmarkClient::kBenchServing) {
    // SGLang keeps its release's prefill chunk (the generator never sets one) and mixes decodes
    // into it where the generator asked for that (kSglangGeneratorMixesFrom).
    limits.mixed_chunks = policies::version_at_least(r.backend_version, kSglangGeneratorMixesFrom);
    return limits;
  }
  if (engine_name == "vllm") {  // InferenceMAX's recipes, per engine core (data-parallel rank)
    limits.max_batch = r.concurrency * ranks;
    limits.token_budget = 8192 * ranks;
  } else if (engine_name == "sglang") {
    limits.max_batch = (r.isl == 1024 && r.osl == 1024 ? 512 : 256) * ranks;
    limits.prefill_tokens = 32768;
    limits.prefill_chunk = 32768;
    limits.mixed_chunks = false;
    // The Blackwell recipes take in new requests every 10 decode batches, every 30 from 16
    // clients on ("recv every ~10 requests"); the Hopper recipe leaves SGLang's default (1).
    if (gpu_class == "blackwell") limits.recv_interval = r.concurrency >= 16 ? 30 : 10;
  } else if (engine_name == "trtllm" && ranks > 1) {
    // With attention DP the recipes balance new contexts over the ranks (attention_dp_config):
    // DeepSeek's with timeout_iters 60 and batching_wait_iters 0, gpt-oss's with the engine's
    // defaults.
    limits.adp_balance = true;
    if (boost::algorithm::icontains(r.model_path, "deepseek")) {
      limits.adp_timeout_iters = 60;
      limits.adp_batching_wait_iters = 0;
    }
  }
  return limits;
}

// The campaign's limits for the row's engine, as the engine spells them
// (EngineModelEntry::benchmark_knobs).
void set_campaign_limits(const MappedRun& m, scenarios::Json& engine) {
  const auto& knobs_of = policies::engine_models().get(m.engine).benchmark_knobs;
  if (!knobs_of) return;
  for (const auto& [name, value] :
       knobs_of(campaign_limits(m.engine, m.run, m.client, m.gpu_class))) {
    engine[name] = scenarios::param_json(value);
  }
}

// The scenario of an aggregated row: one instance of the row's engine, release and layout.
scenarios::Json aggregated_scenario(MappedRun& m, const std::string& kv_dtype,
                                    const BenchmarkTemplate& bench) {
  const MeasuredRun& r = m.run;
  scenarios::Json engine = {{"type", m.engine}};
  const policies::StandInVersion release = policies::stand_in_engine_version(
      policies::engine_models().get(m.engine).versions, r.backend_version);
  if (!release.note.empty()) {
    m.assumption +=
        fmt::format("{}{} {}", m.assumption.empty() ? "" : "; ", m.engine, release.note);
  }
  if (!r.backend_version.empty()) {
    engine["version"] = release.note.empty() ? r.backend_version : release.version;
  }
  if (bench.deployment == BenchmarkTemplate::Deployment::kCampaign) {
    set_campaign_limits(m, engine);
  }
  if (bench.kernel_tables != "generic" && has_knob(m.engine, "kernel_tables")) {
    engine["kernel_tables"] = bench.kernel_tables;
  }
  scenarios::Json scenario = {
      {"name", r.id},
      {"description",
       fmt::format("measured run {} (line {}): {} {} on {} x {}, ISL {} / OSL {}, "
                   "concurrency {}; measured TTFT {:.1f} ms, TPOT {:.2f} ms",
                   r.id, r.line, r.backend, r.backend_version, r.tp * r.attention_dp * r.pp,
                   r.system, r.isl, r.osl, r.concurrency, r.ttft_ms, r.tpot_ms) +
           (m.assumption.empty() ? "" : "; " + m.assumption)},
      {"seed", bench.seed},
      {"model", m.model},
      {"engine", engine},
      {"cluster",
       {{"gpu", m.gpu},
        {"instances", 1},
        {"tp", r.tp},
        {"ep", r.moe_ep},
        {"attention_dp", r.attention_dp},
        {"weight_dtype", m.weight_dtype},
        {"kv_dtype", kv_dtype}}},
      {"workload", benchmark_workload(r, m.client, bench)},
      {"output", {{"sample_interval", "0s"}}},
  };
  if (r.pp > 1) scenario["cluster"]["pp"] = r.pp;  // each stage tp GPUs (pipeline.h)
  return scenario;
}

}  // namespace

MappedRun map_measured_run(const MeasuredRun& row, const scenarios::Catalogs& catalogs,
                           const BenchmarkTemplate& bench) {
  MappedRun m;
  m.run = row;
  m.client = bench.client_for(row);
  m.model = catalog_model_for(row.model_path, catalogs.models);
  if (!m.model.empty()) m.moe = catalogs.models.get(m.model).moe.has_value();
  infer_attention_data_parallelism(m);
  const MeasuredRun& r = m.run;
  // Rows are mapped as they ran: "gb200" / "gb300" as one GPU of the NVL72 rack (the CSV names
  // GPUs as aiconfigurator's system files do: "a100_sxm" is its 80 GiB part).
  const std::string system = r.system == "a100_sxm" ? "a100_80gb_sxm" : r.system;
  for (const std::string& key : {system, system + "_nvl72"}) {
    if (m.gpu.empty() && catalogs.gpus.all().count(key)) m.gpu = key;
  }
  if (!m.gpu.empty()) m.gpu_class = models::gpu_class(catalogs.gpus.get(m.gpu));
  if (policies::engine_models().contains(r.backend)) m.engine = r.backend;
  const std::string quant = row_quant_mode(m);
  m.weight_dtype = row_weight_dtype(m, quant, catalogs);
  // KV: FP8 beside FP8 and FP4 weights, 16-bit beside 16-bit math.
  const std::string kv_dtype = m.weight_dtype == "bf16" || m.weight_dtype == "int4_wo" ||
                                       m.weight_dtype == "mxfp4"
                                   ? "bf16"
                                   : "fp8";
  m.skip_reason = skip_reason_of(m, quant);
  if (!m.skip_reason.empty()) return m;
  if (r.mode == "disagg") {
    // Disaggregated rows name the serving runtime's release (Dynamo's), not the engine's: the
    // newest engine defaults servesim knows apply.
    m.scenario = disaggregated_scenario(r, m, kv_dtype, bench);
    m.scenario["engine"] = {{"type", m.engine}};
    return m;
  }
  m.scenario = aggregated_scenario(m, kv_dtype, bench);
  return m;
}

}  // namespace servesim::app
