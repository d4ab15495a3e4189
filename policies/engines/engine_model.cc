#include "policies/engines/engine_model.h"

#include <cctype>
#include <cmath>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.h"

namespace servesim::policies {
namespace {

// The numeric components of a dotted version, up to the first part that is not a number
// ("0.5.6.post2" -> {0, 5, 6}, "1.0.0rc3" -> {1, 0, 0}); empty when it starts with none.
std::vector<int64_t> version_numbers(const std::string& v) {
  std::vector<int64_t> out;
  size_t i = 0;
  while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) {
    int64_t n = 0;
    while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) {
      n = n * 10 + (v[i] - '0');
      ++i;
    }
    out.push_back(n);
    if (i < v.size() && v[i] == '.') {
      ++i;
    } else {
      break;
    }
  }
  return out;
}

double knob(const ParamValues& knobs, const char* name) { return knobs.get_double(name); }

}  // namespace

Registry<EngineModelEntry>& engine_models() {
  static Registry<EngineModelEntry> registry("engine");
  return registry;
}

void register_engine_models() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_vllm_engine();
    register_sglang_engine();
    register_trtllm_engine();
  });
}

ParamSchema engine_schema(const EngineModelEntry& entry, const std::string& version) {
  ParamSchema schema = entry.schema;
  if (entry.version_defaults && !version.empty()) entry.version_defaults(version, schema);
  return schema;
}

bool version_at_least(const std::string& version, const std::string& minimum) {
  return version_numbers(version) >= version_numbers(minimum);
}

std::string resolve_engine_version(const std::vector<std::string>& known,
                                   const std::string& requested, const std::string& path) {
  if (known.empty()) throw std::logic_error("an engine model must know at least one version");
  if (requested.empty()) return known.back();
  const std::vector<int64_t> want = version_numbers(requested);
  if (want.empty()) {
    throw ConfigError("", {{path, fmt::format("expected a dotted version such as \"{}\", got \"{}\"",
                                              known.back(), requested)}});
  }
  std::string best;
  for (const std::string& k : known) {
    if (version_numbers(k) <= want) best = k;
  }
  if (best.empty()) {
    throw ConfigError("", {{path, fmt::format("version {} is older than every version whose "
                                              "defaults servesim knows ({})",
                                              requested, fmt::join(known, ", "))}});
  }
  return best;
}

StandInVersion stand_in_engine_version(const std::vector<std::string>& known,
                                       const std::string& requested) {
  try {
    return {resolve_engine_version(known, requested, "engine.version"), ""};
  } catch (const ConfigError&) {
  }
  if (version_numbers(requested).empty()) {
    return {known.back(), fmt::format("engine version \"{}\" is not a dotted release: the defaults "
                                      "of {}, the newest servesim knows, stand in",
                                      requested, known.back())};
  }
  return {known.front(),
          fmt::format("engine version {} is older than every release servesim knows: "
                      "the defaults of {}, the oldest, stand in",
                      requested, known.front())};
}

std::string speculative_launch_flags(const std::string& engine,
                                     const models::SpeculativeDecoding& spec) {
  const bool mtp = spec.method == models::SpeculativeMethod::kMtp;
  const int k = spec.num_speculative_tokens;
  if (engine == "vllm") {
    // vllm/config/speculative.py: "mtp" for every model's MTP layers; EAGLE-3 names its head.
    return mtp ? fmt::format(
                     R"(--speculative-config '{{"method": "mtp", "num_speculative_tokens": {}}}')",
                     k)
               : fmt::format(
                     R"(--speculative-config '{{"method": "eagle3", "model": "<EAGLE-3 head>", )"
                     R"("num_speculative_tokens": {}}}')",
                     k);
  }
  if (engine == "sglang") {
    // A chain of k drafts: top-k 1, k steps, k + 1 tokens verified (the pending one included).
    return fmt::format(
        "--speculative-algorithm {}{} --speculative-num-steps {} --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens {}",
        mtp ? "NEXTN" : "EAGLE3", mtp ? "" : " --speculative-draft-model-path <EAGLE-3 head>", k,
        k + 1);
  }
  if (engine == "trtllm") {
    return mtp ? fmt::format(
                     "speculative_config: {{decoding_type: MTP, num_nextn_predict_layers: {}}}", k)
               : fmt::format(
                     "speculative_config: {{decoding_type: Eagle3, max_draft_len: {}, "
                     "speculative_model_dir: <EAGLE-3 head>}}",
                     k);
  }
  throw std::invalid_argument("no speculative decoding flags known for engine " + engine);
}

ParamSchema calibration_knobs() {
  auto knob_spec = [](const char* name, const char* unit, const char* help) {
    return ParamSpec{name, ParamType::kDouble, -1.0, unit, help, {}, -1.0, {}};
  };
  return {
      knob_spec("cpu_iteration_us", "us",
                "CPU time of every iteration (scheduling, input preparation, sampling); "
                "-1 = calibrated"),
      knob_spec("cpu_request_us", "us", "CPU time per request in the batch; -1 = calibrated"),
      knob_spec("cpu_token_us", "us", "CPU time per token in the batch; -1 = calibrated"),
      knob_spec("cpu_launch_layer_us", "us",
                "host time to launch one layer's kernels of a pass outside a CUDA graph (a "
                "prefill, a mixed batch), alongside its GPU work; -1 = calibrated"),
      knob_spec("frontend_request_us", "us",
                "front end (HTTP, tokenizer, hand-off) per request; -1 = calibrated"),
      knob_spec("frontend_token_us", "us", "front end per prompt token; -1 = calibrated"),
      knob_spec("gpu_prefill_scale", "",
                "GPU time of prefill passes against the kernel tables (0.05..20); -1 = calibrated"),
      knob_spec("gpu_decode_scale", "",
                "GPU time of decode passes against the kernel tables (0.05..20); -1 = calibrated"),
      knob_spec("moe_kernel_scale", "",
                "a MoE model's routed experts: the engine's MoE kernels against the kernel tables "
                "(0.05..20); -1 = calibrated (1 where no MoE kernel calibration exists)"),
  };
}

ParamSpec kernel_tables_knob() {
  return ParamSpec{"kernel_tables",
                   ParamType::kString,
                   std::string("generic"),
                   "",
                   "operator tables that price the layers: generic (vLLM's, which the engine "
                   "calibration was fitted with) or engine (this engine's own, where the GPU has "
                   "them; profiles/README.md)",
                   {"generic", "engine"},
                   {},
                   {}};
}

std::string kernel_tables_of(const std::string& engine, const ParamValues& knobs) {
  return knobs.contains("kernel_tables") && knobs.get_string("kernel_tables") == "engine" ? engine
                                                                                          : "";
}

namespace {

// The MoE kernel calibration in effect for `target`: its model is MoE and the engine has one for
// the GPU class and expert weight format. Null otherwise.
const models::MoeKernelCalibration* moe_kernel_calibration(const std::string& engine,
                                                           const std::string& cls,
                                                           const EngineTarget& target) {
  if (!target.calibrations || !target.model || !target.model->moe) return nullptr;
  return target.calibrations->find_moe(engine, cls, models::dtype_name(target.weight_dtype));
}

std::string moe_kernel_note(const std::string& engine, const std::string& cls,
                            const EngineTarget& target, const models::MoeKernelCalibration& moe) {
  std::string out = fmt::format(
      "MoE kernels x{:.3g} of the tables ({} on {} GPUs, {} experts; fitted on {})", moe.scale,
      engine, cls, models::dtype_name(target.weight_dtype), moe.fitted_on);
  if (moe.held_out) {
    out += fmt::format(", held out: TTFT MdAPE {:.1f} %, TPOT MdAPE {:.1f} %",
                       moe.held_out->ttft_mdape * 100, moe.held_out->tpot_mdape * 100);
  }
  return out;
}

}  // namespace

void apply_calibration(const std::string& engine, const ParamValues& knobs,
                       const EngineTarget& target, bool overlapped, EngineSetup& setup) {
  const std::string cls = target.gpu ? models::gpu_class(*target.gpu) : "other";
  const models::EngineCalibration* cal = nullptr;
  std::string note;
  if (target.calibrations) {
    cal = target.calibrations->find(engine, cls);
    if (cal) {
      note = fmt::format("CPU and front-end costs calibrated on {} GPUs ({})", cls, cal->fitted_on);
    } else if ((cal = target.calibrations->find(engine, "hopper"))) {
      note = fmt::format("CPU and front-end costs calibrated on hopper GPUs, borrowed for {} ({})",
                         cls, cal->fitted_on);
    }
  }
  if (!cal) {
    note = fmt::format(
        "no calibration of {} found: CPU and front-end costs are 0, GPU time as the kernel tables "
        "give it",
        engine);
  }

  auto pick = [&](const char* name, double calibrated) {
    const double v = knob(knobs, name);
    const double chosen = v >= 0 ? v : (cal ? calibrated : 0.0);
    setup.resolved.set(name, chosen);
    return chosen;
  };
  models::CpuCostSpec cpu;
  cpu.per_iteration = Duration{std::llround(
      pick("cpu_iteration_us", cal ? static_cast<double>(cal->cpu.per_iteration.count()) / 1e3 : 0) *
      1e3)};
  cpu.per_request_ns = pick("cpu_request_us", cal ? cal->cpu.per_request_ns / 1e3 : 0) * 1e3;
  cpu.per_token_ns = pick("cpu_token_us", cal ? cal->cpu.per_token_ns / 1e3 : 0) * 1e3;
  cpu.launch_per_layer_ns =
      pick("cpu_launch_layer_us", cal ? cal->cpu.launch_per_layer_ns / 1e3 : 0) * 1e3;
  cpu.overlapped = overlapped;
  setup.runtime.cpu = cpu;
  setup.frontend.per_request = Duration{
      std::llround(pick("frontend_request_us", cal ? cal->frontend_request_us : 0) * 1e3)};
  setup.frontend.per_prompt_token_ns =
      pick("frontend_token_us", cal ? cal->frontend_token_us : 0) * 1e3;
  // `calibrated`: the value in effect unless the knob is set (1 where no calibration gives one).
  auto pick_scale = [&](const char* name, double calibrated) {
    const double v = knob(knobs, name);
    if (v >= 0 && !(v >= 0.05 && v <= 20)) {
      throw ConfigError("", {{fmt::format("engine.{}", name),
                              fmt::format("expected -1 (calibrated) or a scale in [0.05, 20], "
                                          "got {}", v)}});
    }
    const double chosen = v >= 0 ? v : calibrated;
    setup.resolved.set(name, chosen);
    return chosen;
  };
  setup.runtime.gpu_scale.prefill =
      pick_scale("gpu_prefill_scale", cal ? cal->gpu_scale.prefill : 1.0);
  setup.runtime.gpu_scale.decode = pick_scale("gpu_decode_scale", cal ? cal->gpu_scale.decode : 1.0);
  const models::MoeKernelCalibration* moe = moe_kernel_calibration(engine, cls, target);
  setup.moe_kernel_scale = pick_scale("moe_kernel_scale", moe ? moe->scale : 1.0);
  if (knob(knobs, "moe_kernel_scale") >= 0) {
    note += fmt::format("; MoE kernels x{:.3g} of the tables, set explicitly", setup.moe_kernel_scale);
  } else if (moe) {
    note += "; " + moe_kernel_note(engine, cls, target, *moe);
  }
  bool explicit_any = false;
  for (const ParamSpec& k : calibration_knobs()) explicit_any |= knob(knobs, k.name.c_str()) >= 0;
  setup.calibration_note = explicit_any ? note + "; some set explicitly" : note;
}

}  // namespace servesim::policies
