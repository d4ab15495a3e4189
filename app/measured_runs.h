// Measured end-to-end benchmark runs of real serving engines (the CSV format of aiconfigurator's
// silicon samples, copied under profiles/measured_runs/) and their mapping to servesim
// scenarios: each row becomes a scenario with the engine model of its backend and version, its
// model, GPU, TP degree and weight precision, and the benchmark client that measured it.
//
// Contract:
// - read_measured_runs() validates every row and throws InputError naming the file, the line and
//   the column of the first bad field (missing columns are named with the expected header).
// - map_measured_run() is a pure function of the row and the catalogs. A row servesim cannot
//   express (a GPU or model outside the catalog, weights of a format the GPU cannot run, an
//   expert or attention-DP layout that does not cover the row's GPUs, a disaggregated row
//   without worker counts) is returned with `skip_reason` set, never dropped silently. An engine
//   release servesim does not know runs with the defaults of the nearest one it knows, and a MoE
//   row whose experts span more GPUs than its TP runs data-parallel attention over them; both
//   are said in `assumption`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "scenarios/scenario.h"

namespace servesim::app {

// One pool of a disaggregated row (the CSV's prefill_* / decode_* columns).
struct PoolLayout {
  int64_t workers = 0;  // instances; 0: not given
  int64_t batch = 0;    // batch limit per attention-DP rank; 0: not given
  int64_t tp = 1, pp = 1, attention_dp = 1, moe_tp = 1, moe_ep = 1;
};

struct MeasuredRun {
  long line = 0;     // 1-based line in the CSV
  std::string id;    // the row's `id`
  std::string backend, backend_version, model_path, system, precision, gemm_quant_mode, mode;
  std::string moe_quant_mode;  // the experts' weights (optional column; "" when absent)
  std::string source;          // silicon_data_source (optional column; "" when absent)
  // concurrency: the benchmark's closed-loop clients. Upstream's batch_size is that count, except
  // with attention data parallelism, where it is per rank (its silicon_concurrency is batch_size
  // x attention_dp_size): read_measured_runs() multiplies it out. With disaggregation (mode
  // "disagg") the clients are silicon_concurrency in silicon_data_source, or else the decode
  // pool's batch x workers x attention_dp.
  int64_t isl = 0, osl = 0, concurrency = 0;
  int64_t tp = 1, pp = 1, attention_dp = 1, moe_tp = 1, moe_ep = 1;
  PoolLayout prefill, decode;  // disaggregated rows (optional columns)
  double ttft_ms = 0, tpot_ms = 0;  // measured means
};

// Throws InputError (see the contract).
std::vector<MeasuredRun> read_measured_runs(const std::string& path);

// The benchmark client a measured campaign ran, told by the row's silicon_data_source:
// - kAiperf: aiconfigurator's own campaigns (a source under its aic-auto-gap-analysis data) and
//   any other source: its generator's bench_run.sh, aiperf with fixed ISL / OSL, 20 x c requests
//   after 2 x c warm-ups.
// - kBenchServing: InferenceMAX's results, a source that is a database dump ("db-dump/...") or a
//   dated export ("source_file=2026-04-06.csv; ..."), the ISL / OSL 1k/1k, 1k/8k, 8k/1k sweeps
//   at 4-64 clients and more: InferenceMAX's harness, vLLM's benchmark_serving.py on its
//   random dataset with --random-range-ratio 0.8 (each ISL and OSL uniform in [0.8 L, L]),
//   10 x c prompts at --max-concurrency c after 2 x c warm-ups, with the engines launched by its
//   recipes (BenchmarkTemplate::Deployment).
enum class BenchmarkClient { kAiperf, kBenchServing };
BenchmarkClient benchmark_client_of(const MeasuredRun& run);
const char* benchmark_client_name(BenchmarkClient client);

// How a measured row's benchmark is replayed: its client (BenchmarkClient) with `concurrency`
// closed-loop clients; for aiperf requests_per_client x concurrency measured requests after
// warmup_per_client x concurrency warm-up requests, fixed ISL / OSL (ignore-EOS); for
// benchmark_serving.py 10 x c after 2 x c, lengths drawn in [0.8 L, L]. Warm-up responses are
// waited for, and each send is delayed by a seeded uniform [0, client_jitter) draw (the
// benchmark workload's think_time_jitter): real clients drift apart, so requests reach the
// engine at random points of its iterations instead of in the lock step a jitter-free replay of
// fixed lengths keeps.
//
// And how the engine was deployed:
// - kCampaign (the default): as the row's campaign deployed it.
//   - aiperf rows, as aiconfigurator's config generator deploys an aggregated worker for a
//     benchmark (its rule files, read, not copied): a batch limit mbs = max(128, concurrency)
//     (its default of 128, or the concurrency it estimated for the deployment when that is
//     larger), a token budget of mbs + ISL + 1500 tokens per iteration (vLLM
//     max_num_batched_tokens, TensorRT-LLM max_num_tokens), CUDA graphs up to mbs (padded), and
//     for SGLang max_prefill_tokens = ISL + 1500 with the release's own prefill chunk (the
//     generator never sets --chunked-prefill-size), mixing decodes into it from 0.5.6 on (the
//     first release whose generator template passes --enable-mixed-chunk).
//   - benchmark_serving.py rows, as InferenceMAX's launch recipes (read, not copied): vLLM with
//     max-num-seqs c and max-num-batched-tokens 8192; SGLang with 32,768-token prefill chunks
//     and prefill batches, no mixed chunks, max-running-requests 512 at ISL / OSL 1k/1k and 256
//     otherwise; TensorRT-LLM as aiconfigurator's rule above (its DeepSeek recipe's
//     max_num_tokens, c + ISL + 64, has the same form).
// - kEngineDefaults: every knob at the engine version's shipped default.
struct BenchmarkTemplate {
  enum class Deployment { kCampaign, kEngineDefaults };
  // aiperf's (aiconfigurator's bench_run.sh) requests per client, measured and warm-up.
  int64_t requests_per_client = 20;
  int64_t warmup_per_client = 2;
  // benchmark_serving.py's as InferenceMAX runs it: --num-prompts 10 x c, --num-warmups 2 x c,
  // --random-range-ratio 0.8.
  static constexpr int64_t kBenchServingPromptsPerClient = 10;
  static constexpr int64_t kBenchServingWarmupsPerClient = 2;
  static constexpr double kBenchServingRangeRatio = 0.8;
  // The client every row is replayed with; unset: each row's own (benchmark_client_of).
  std::optional<BenchmarkClient> client;
  // At most this many measured requests per row, in whole rounds of the clients, and never fewer
  // than kMinMeasuredRounds rounds (0: no cap): the rows of thousands of clients would otherwise
  // replay 20 x c = 160,000 requests where the means have long settled. Rows of up to
  // max_measured_requests / requests_per_client clients (1,000 by default) are unaffected.
  int64_t max_measured_requests = 20'000;
  static constexpr int64_t kMinMeasuredRounds = 4;

  // Measured requests of each of `concurrency` clients of `client` under the cap.
  int64_t rounds_for(int64_t concurrency, BenchmarkClient client = BenchmarkClient::kAiperf) const;
  // Warm-up requests of each client of `client`.
  int64_t warmups_for(BenchmarkClient client) const {
    return client == BenchmarkClient::kBenchServing ? kBenchServingWarmupsPerClient
                                                    : warmup_per_client;
  }
  // The client `run` is replayed with.
  BenchmarkClient client_for(const MeasuredRun& run) const {
    return client ? *client : benchmark_client_of(run);
  }
  // aiperf's --num-dataset-entries: prompts drawn from this many entries (repeats hit the engines'
  // prefix caches); 0 = every prompt unique.
  int64_t dataset_entries = 0;
  // A duration as scenarios write it ("50ms"); "0s": clients send the instant a response ends.
  std::string client_jitter = "50ms";
  uint64_t seed = 1;
  Deployment deployment = Deployment::kCampaign;
  // engine.kernel_tables of every row whose engine model has the knob ("generic" or "engine").
  std::string kernel_tables = "generic";
};

struct MappedRun {
  MeasuredRun run;
  std::string model;        // catalog key
  std::string gpu;          // catalog key
  std::string gpu_class;    // its family (models::gpu_class): "hopper", "blackwell", ...
  std::string engine;       // engine model name
  std::string weight_dtype;
  bool moe = false;
  BenchmarkClient client = BenchmarkClient::kAiperf;  // the client the row is replayed with
  std::string skip_reason;  // empty: `scenario` is set
  // Non-empty: what the mapping assumed where the row says too little (another release's engine
  // defaults standing in for one servesim does not know; data-parallel attention inferred from
  // experts spread over more GPUs than the row's TP).
  std::string assumption;
  scenarios::Json scenario;

  bool mapped() const { return skip_reason.empty(); }
  bool disaggregated() const { return run.mode == "disagg"; }
  // A row the engine calibration is fitted on (and whose held-out error the targets name): a
  // dense model served aggregated, in an engine x GPU class whose rows hold at least two models
  // (fidelity --fit predicts the others like MoE rows). MoE and disaggregated rows are only ever
  // predicted.
  bool calibrates() const { return !moe && !disaggregated(); }
  // "vllm / h100_sxm / qwen3-32b"
  std::string group() const;
};

// The catalog key of a Hugging Face id ("meta-llama/Llama-3.1-8B-Instruct" and
// "nvidia/Llama-3.1-8B-Instruct-FP8" -> "llama-3.1-8b"), matched on the catalog's hf_id or key
// with the organisation and the -Instruct / -FP8 / -FP4 suffixes left out; "" when none matches.
std::string catalog_model_for(const std::string& hf_id, const models::ModelCatalog& catalog);

MappedRun map_measured_run(const MeasuredRun& run, const scenarios::Catalogs& catalogs,
                           const BenchmarkTemplate& bench);

}  // namespace servesim::app
