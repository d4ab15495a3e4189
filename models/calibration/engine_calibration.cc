#include "models/calibration/engine_calibration.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace servesim::models {
namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kFormat = "servesim-engine-calibration";

double rounded(double v) { return std::round(v * 1e4) / 1e4; }

// Reads fields of one JSON object, naming the file and path of the first bad one.
class Fields {
 public:
  Fields(const std::string& file, const Json& obj, std::string path)
      : file_(file), obj_(obj), path_(std::move(path)) {
    if (!obj_.is_object()) fail(path_, "expected an object");
  }

  double number(const char* key, bool required = true, double fallback = 0) const {
    auto it = obj_.find(key);
    if (it == obj_.end()) {
      if (required) fail(at(key), "missing");
      return fallback;
    }
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0) {
      fail(at(key), fmt::format("expected a number >= 0, got {}", it->dump()));
    }
    return it->get<double>();
  }

  std::string text(const char* key) const {
    auto it = obj_.find(key);
    if (it == obj_.end()) return "";
    if (!it->is_string()) fail(at(key), fmt::format("expected a string, got {}", it->dump()));
    return it->get<std::string>();
  }

  const Json* object(const char* key) const {
    auto it = obj_.find(key);
    return it == obj_.end() ? nullptr : &*it;
  }

  std::string at(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw InputError(file_, 0, fmt::format("{}: {}", path, what));
  }

 private:
  const std::string& file_;
  const Json& obj_;
  std::string path_;
};

HeldOutError read_held_out(const Fields& hf) {
  HeldOutError e;
  e.rows = std::llround(hf.number("rows"));
  e.models = std::llround(hf.number("models"));
  e.ttft_mdape = hf.number("ttft_mdape");
  e.ttft_p90_ape = hf.number("ttft_p90_ape");
  e.tpot_mdape = hf.number("tpot_mdape");
  e.tpot_p90_ape = hf.number("tpot_p90_ape");
  e.within_25_both = hf.number("within_25_both");
  return e;
}

Json held_out_json(const HeldOutError& e) {
  return {{"rows", e.rows},
          {"models", e.models},
          {"ttft_mdape", rounded(e.ttft_mdape)},
          {"ttft_p90_ape", rounded(e.ttft_p90_ape)},
          {"tpot_mdape", rounded(e.tpot_mdape)},
          {"tpot_p90_ape", rounded(e.tpot_p90_ape)},
          {"within_25_both", rounded(e.within_25_both)}};
}

// The provenance fields of a written entry: what it was fitted on, and its held-out error.
void add_provenance(Json& j, const std::string& fitted_on, const std::optional<HeldOutError>& h) {
  j["fitted_on"] = fitted_on;
  if (h) j["held_out"] = held_out_json(*h);
}

// A scale field, checked against [0.05, 20]; absent: 1 unless required.
double read_scale(const Fields& f, const char* key, bool required = false) {
  const double v = f.number(key, required, 1);
  if (v < 0.05 || v > 20) f.fail(f.at(key), fmt::format("expected a scale in [0.05, 20], got {}", v));
  return v;
}

MoeKernelCalibration read_moe_entry(const std::string& file, const Json& j,
                                    const std::string& path) {
  const Fields f(file, j, path);
  MoeKernelCalibration c;
  c.scale = read_scale(f, "scale", /*required=*/true);
  c.fitted_on = f.text("fitted_on");
  if (const Json* h = f.object("held_out")) c.held_out = read_held_out(Fields(file, *h, f.at("held_out")));
  return c;
}

EngineCalibration read_entry(const std::string& file, const Json& j, const std::string& path) {
  const Fields f(file, j, path);
  EngineCalibration c;
  c.cpu.per_iteration = Duration{std::llround(f.number("cpu_iteration_us") * 1e3)};
  c.cpu.per_request_ns = f.number("cpu_request_us") * 1e3;
  c.cpu.per_token_ns = f.number("cpu_token_us") * 1e3;
  c.cpu.launch_per_layer_ns = f.number("cpu_launch_layer_us", /*required=*/false) * 1e3;
  c.frontend_request_us = f.number("frontend_request_us");
  c.frontend_token_us = f.number("frontend_token_us");
  c.gpu_scale.prefill = read_scale(f, "gpu_prefill_scale");
  c.gpu_scale.decode = read_scale(f, "gpu_decode_scale");
  c.fitted_on = f.text("fitted_on");
  if (const Json* h = f.object("held_out")) c.held_out = read_held_out(Fields(file, *h, f.at("held_out")));
  return c;
}

}  // namespace

EngineCalibrations EngineCalibrations::load(const std::string& path) {
  EngineCalibrations out;
  std::ifstream in(path);
  if (!in) return out;
  std::stringstream buffer;
  buffer << in.rdbuf();
  const Json doc = Json::parse(buffer.str(), nullptr, /*allow_exceptions=*/false,
                               /*ignore_comments=*/true);
  if (doc.is_discarded()) throw InputError(path, 0, "not valid JSON");
  const Fields top(path, doc, "");
  if (top.text("format") != kFormat) {
    top.fail("format", fmt::format("expected \"{}\"", kFormat));
  }
  const Json* engines = top.object("engines");
  if (!engines || !engines->is_object()) top.fail("engines", "expected an object");
  for (auto e = engines->begin(); e != engines->end(); ++e) {
    if (!e->is_object()) top.fail("engines." + e.key(), "expected an object of GPU classes");
    for (auto g = e->begin(); g != e->end(); ++g) {
      out.entries_[{e.key(), g.key()}] =
          read_entry(path, *g, fmt::format("engines.{}.{}", e.key(), g.key()));
    }
  }
  // "moe_kernels": {engine: {GPU class: {weight format: {...}}}}
  if (const Json* moe = top.object("moe_kernels")) {
    const std::string at = "moe_kernels";
    if (!moe->is_object()) top.fail(at, "expected an object of engines");
    for (auto e = moe->begin(); e != moe->end(); ++e) {
      if (!e->is_object()) top.fail(at + "." + e.key(), "expected an object of GPU classes");
      for (auto g = e->begin(); g != e->end(); ++g) {
        const std::string gpath = fmt::format("{}.{}.{}", at, e.key(), g.key());
        if (!g->is_object()) top.fail(gpath, "expected an object of weight formats");
        for (auto w = g->begin(); w != g->end(); ++w) {
          out.moe_[{e.key(), g.key(), w.key()}] =
              read_moe_entry(path, *w, fmt::format("{}.{}", gpath, w.key()));
        }
      }
    }
  }
  return out;
}

void EngineCalibrations::write(const std::string& path) const {
  Json doc = Json::object();
  doc["format"] = kFormat;
  doc["note"] =
      "Per engine and GPU class: per-iteration CPU cost (cpu_iteration_us + cpu_request_us x "
      "requests + cpu_token_us x tokens), the host time to launch one layer of a pass outside a "
      "CUDA graph (cpu_launch_layer_us), front end (frontend_request_us + frontend_token_us "
      "x prompt tokens) and GPU time scales of decode and prefill passes against the kernel tables "
      "(gpu_decode_scale, gpu_prefill_scale), fitted by `servesim fidelity --fit` on measured "
      "end-to-end runs; "
      "held_out is the leave-one-model-out error of the same fit.";
  Json engines = Json::object();
  for (const auto& [key, c] : entries_) {
    Json j = Json::object();
    j["cpu_iteration_us"] = rounded(static_cast<double>(c.cpu.per_iteration.count()) / 1e3);
    j["cpu_request_us"] = rounded(c.cpu.per_request_ns / 1e3);
    j["cpu_token_us"] = rounded(c.cpu.per_token_ns / 1e3);
    j["cpu_launch_layer_us"] = rounded(c.cpu.launch_per_layer_ns / 1e3);
    j["frontend_request_us"] = rounded(c.frontend_request_us);
    j["frontend_token_us"] = rounded(c.frontend_token_us);
    j["gpu_prefill_scale"] = rounded(c.gpu_scale.prefill);
    j["gpu_decode_scale"] = rounded(c.gpu_scale.decode);
    add_provenance(j, c.fitted_on, c.held_out);
    engines[key.first][key.second] = j;
  }
  doc["engines"] = engines;
  if (!moe_.empty()) {
    doc["moe_kernels_note"] =
        "Per engine, GPU class and expert weight format: the routed experts' time x scale, the "
        "engine's MoE kernels against the measured MoE tables, fitted by `servesim fidelity --fit` "
        "on the measured MoE rows where they hold two models or more; held_out is its "
        "leave-one-model-out error.";
    Json moe = Json::object();
    for (const auto& [key, c] : moe_) {
      Json j = Json::object();
      j["scale"] = rounded(c.scale);
      add_provenance(j, c.fitted_on, c.held_out);
      moe[std::get<0>(key)][std::get<1>(key)][std::get<2>(key)] = j;
    }
    doc["moe_kernels"] = moe;
  }
  std::ofstream out(path);
  out << doc.dump(2) << "\n";
  if (!out) throw Error(fmt::format("{}: cannot write the engine calibration", path));
}

const EngineCalibration* EngineCalibrations::find(const std::string& engine,
                                                  const std::string& gpu_class) const {
  auto it = entries_.find({engine, gpu_class});
  return it == entries_.end() ? nullptr : &it->second;
}

void EngineCalibrations::set(const std::string& engine, const std::string& gpu_class,
                             EngineCalibration c) {
  entries_[{engine, gpu_class}] = std::move(c);
}

const MoeKernelCalibration* EngineCalibrations::find_moe(const std::string& engine,
                                                         const std::string& gpu_class,
                                                         const std::string& weight_format) const {
  auto it = moe_.find({engine, gpu_class, weight_format});
  return it == moe_.end() ? nullptr : &it->second;
}

void EngineCalibrations::set_moe(const std::string& engine, const std::string& gpu_class,
                                 const std::string& weight_format, MoeKernelCalibration c) {
  moe_[{engine, gpu_class, weight_format}] = std::move(c);
}

}  // namespace servesim::models
