#include "traces/generators.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"

namespace servesim::traces {
namespace {

class FixedLengths final : public LengthSource {
 public:
  explicit FixedLengths(LengthSample sample) : sample_(sample) {}
  LengthSample next(RngStream&) override { return sample_; }
  std::string describe() const override {
    return fmt::format("fixed P{}/D{}", sample_.prompt_tokens, sample_.output_tokens);
  }

 private:
  LengthSample sample_;
};

class EmpiricalLengths final : public LengthSource {
 public:
  EmpiricalLengths(std::vector<LengthSample> samples, std::string label)
      : samples_(std::move(samples)), label_(std::move(label)) {}
  LengthSample next(RngStream& rng) override {
    const int64_t last = static_cast<int64_t>(samples_.size()) - 1;
    return samples_[static_cast<size_t>(rng.uniform_int(0, last))];
  }
  std::string describe() const override { return label_; }

 private:
  std::vector<LengthSample> samples_;
  std::string label_;
};

class MixtureLengths final : public LengthSource {
 public:
  MixtureLengths(std::vector<std::unique_ptr<LengthSource>> parts, std::vector<double> weights)
      : parts_(std::move(parts)), weights_(std::move(weights)) {
    double total = 0;
    for (double weight : weights_) {
      total += weight;
      cumulative_.push_back(total);
    }
  }

  LengthSample next(RngStream& rng) override {
    const double pick = rng.uniform() * cumulative_.back();
    size_t index = 0;
    // A part with weight 0 has an empty interval and is never chosen.
    while (index + 1 < parts_.size() && !(pick < cumulative_[index])) {
      ++index;
    }
    return parts_[index]->next(rng);
  }

  std::string describe() const override {
    std::string text = "mixture(";
    for (size_t i = 0; i < parts_.size(); ++i) {
      text += fmt::format("{}{:g}*{}", i == 0 ? "" : " + ", weights_[i] / cumulative_.back(),
                          parts_[i]->describe());
    }
    return text + ")";
  }

 private:
  std::vector<std::unique_ptr<LengthSource>> parts_;
  std::vector<double> weights_;
  std::vector<double> cumulative_;
};

// aiperf's synthetic lengths: each count drawn from a normal distribution, rounded to the nearest
// token and kept >= 1; a zero standard deviation draws nothing.
class NormalLengths final : public LengthSource {
 public:
  NormalLengths(double prompt_mean, double prompt_sd, double output_mean, double output_sd)
      : prompt_mean_(prompt_mean), prompt_sd_(prompt_sd), output_mean_(output_mean),
        output_sd_(output_sd) {}
  LengthSample next(RngStream& rng) override {
    const int64_t prompt = draw(rng, prompt_mean_, prompt_sd_);
    return {prompt, draw(rng, output_mean_, output_sd_)};
  }
  std::string describe() const override {
    return fmt::format("ISL {:g}{} / OSL {:g}{}", prompt_mean_,
                       prompt_sd_ > 0 ? fmt::format(" (sd {:g})", prompt_sd_) : "", output_mean_,
                       output_sd_ > 0 ? fmt::format(" (sd {:g})", output_sd_) : "");
  }

 private:
  static int64_t draw(RngStream& rng, double mean, double sd) {
    const double v = sd > 0 ? mean + sd * rng.normal() : mean;
    return std::max<int64_t>(1, std::llround(v));
  }
  double prompt_mean_, prompt_sd_, output_mean_, output_sd_;
};

// vLLM benchmark_serving.py's random dataset (the copy InferenceMAX runs): each count drawn
// uniformly from the integers [floor(range_ratio x L), L], prompt and output independently.
class RangedLengths final : public LengthSource {
 public:
  RangedLengths(int64_t prompt, int64_t output, double range_ratio)
      : prompt_(prompt), output_(output), range_ratio_(range_ratio) {}
  LengthSample next(RngStream& rng) override {
    const int64_t prompt = draw(rng, prompt_);
    return {prompt, draw(rng, output_)};
  }
  std::string describe() const override {
    return fmt::format("ISL {} / OSL {}, each uniform from {:g} x its value", prompt_, output_,
                       range_ratio_);
  }

 private:
  int64_t draw(RngStream& rng, int64_t most) const {
    const auto least = static_cast<int64_t>(std::floor(range_ratio_ * static_cast<double>(most)));
    return std::max<int64_t>(1, rng.uniform_int(least, most));
  }
  int64_t prompt_, output_;
  double range_ratio_;
};

void check_samples(const std::vector<LengthSample>& samples, const std::string& name) {
  if (samples.empty()) {
    throw std::invalid_argument(fmt::format("length source \"{}\" has no samples", name));
  }
  for (const LengthSample& sample : samples) {
    if (sample.prompt_tokens <= 0 || sample.output_tokens <= 0) {
      throw std::invalid_argument(
          fmt::format("length source \"{}\": expected positive token counts, found P{}/D{}", name,
                      sample.prompt_tokens, sample.output_tokens));
    }
  }
}

bool positive_finite(double value) { return std::isfinite(value) && value > 0; }

// Returns the next inter-arrival gap in seconds.
double next_gap_s(const ArrivalSpec& spec, RngStream& rng) {
  switch (spec.kind) {
    case ArrivalKind::kPoisson:
      return rng.exponential(spec.rate_per_s);
    case ArrivalKind::kGamma: {
      const double shape = 1.0 / (spec.cv * spec.cv);
      return rng.gamma(shape, 1.0 / (spec.rate_per_s * shape));
    }
    case ArrivalKind::kUniform:
      return 1.0 / spec.rate_per_s;
  }
  throw std::invalid_argument("unknown ArrivalKind");
}

}  // namespace

std::unique_ptr<LengthSource> make_fixed_lengths(int64_t prompt, int64_t output) {
  if (prompt <= 0 || output <= 0) {
    throw std::invalid_argument(
        fmt::format("fixed lengths: expected positive prompt and output tokens, found P{}/D{}",
                    prompt, output));
  }
  return std::make_unique<FixedLengths>(LengthSample{prompt, output});
}

std::unique_ptr<LengthSource> make_normal_lengths(double prompt_mean, double prompt_sd,
                                                  double output_mean, double output_sd) {
  if (!(prompt_mean >= 1) || !(output_mean >= 1) || !(prompt_sd >= 0) || !(output_sd >= 0) ||
      !std::isfinite(prompt_mean + prompt_sd + output_mean + output_sd)) {
    throw std::invalid_argument(fmt::format(
        "normal lengths: expected means >= 1 and standard deviations >= 0, found ISL {} (sd {}) / "
        "OSL {} (sd {})",
        prompt_mean, prompt_sd, output_mean, output_sd));
  }
  return std::make_unique<NormalLengths>(prompt_mean, prompt_sd, output_mean, output_sd);
}

std::unique_ptr<LengthSource> make_ranged_lengths(int64_t prompt, int64_t output,
                                                  double range_ratio) {
  if (prompt < 1 || output < 1 || !(range_ratio >= 0 && range_ratio <= 1)) {
    throw std::invalid_argument(
        fmt::format("ranged lengths: expected ISL and OSL >= 1 and a range ratio in [0, 1], found "
                    "ISL {} / OSL {}, ratio {}",
                    prompt, output, range_ratio));
  }
  return std::make_unique<RangedLengths>(prompt, output, range_ratio);
}

std::unique_ptr<LengthSource> make_empirical_lengths(std::vector<LengthSample> samples,
                                                     std::string name) {
  check_samples(samples, name);
  std::string label = fmt::format("empirical:{} ({} samples)", name, samples.size());
  return std::make_unique<EmpiricalLengths>(std::move(samples), std::move(label));
}

std::unique_ptr<LengthSource> make_lengths_from_workload(const Workload& w, std::string name) {
  std::vector<LengthSample> samples;
  samples.reserve(w.requests.size());
  for (const RequestSpec& request : w.requests) {
    samples.push_back({request.prompt_tokens, request.output_tokens});
  }
  check_samples(samples, name);
  std::string label = fmt::format("trace:{} ({} requests)", name, samples.size());
  return std::make_unique<EmpiricalLengths>(std::move(samples), std::move(label));
}

std::unique_ptr<LengthSource> make_mixture_lengths(std::vector<std::unique_ptr<LengthSource>> parts,
                                                   std::vector<double> weights) {
  if (parts.empty()) {
    throw std::invalid_argument("length mixture: expected at least one part, found none");
  }
  if (parts.size() != weights.size()) {
    throw std::invalid_argument(
        fmt::format("length mixture: expected one weight per part ({}), found {}", parts.size(),
                    weights.size()));
  }
  double total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!parts[i]) {
      throw std::invalid_argument(fmt::format("length mixture: part {} is null", i));
    }
    if (!std::isfinite(weights[i]) || weights[i] < 0) {
      throw std::invalid_argument(
          fmt::format("length mixture: expected a finite non-negative weight, found {} for part {}",
                      weights[i], i));
    }
    total += weights[i];
  }
  if (!(total > 0)) {
    throw std::invalid_argument("length mixture: expected a positive total weight, found 0");
  }
  return std::make_unique<MixtureLengths>(std::move(parts), std::move(weights));
}

std::string_view arrival_kind_name(ArrivalKind kind) {
  switch (kind) {
    case ArrivalKind::kPoisson:
      return "poisson";
    case ArrivalKind::kGamma:
      return "gamma";
    case ArrivalKind::kUniform:
      return "uniform";
  }
  return "unknown";
}

ArrivalKind parse_arrival_kind(std::string_view name) {
  for (ArrivalKind kind : {ArrivalKind::kPoisson, ArrivalKind::kGamma, ArrivalKind::kUniform}) {
    if (name == arrival_kind_name(kind)) {
      return kind;
    }
  }
  throw std::invalid_argument(fmt::format(
      "unknown arrival process \"{}\"; valid values are: poisson, gamma, uniform", name));
}

Workload generate(const ArrivalSpec& arrivals, LengthSource& lengths, int64_t count,
                  Duration duration, uint64_t seed) {
  if (!positive_finite(arrivals.rate_per_s)) {
    throw std::invalid_argument(fmt::format(
        "arrival rate_per_s: expected a positive finite rate, found {}", arrivals.rate_per_s));
  }
  if (arrivals.kind == ArrivalKind::kGamma && !positive_finite(arrivals.cv)) {
    throw std::invalid_argument(
        fmt::format("arrival cv: expected a positive finite value, found {}", arrivals.cv));
  }
  if (count < 0) {
    throw std::invalid_argument(fmt::format("request count: expected >= 0, found {}", count));
  }
  if (count == 0 && duration <= Duration::zero()) {
    throw std::invalid_argument(
        "generate: expected a positive request count or a positive duration, found neither");
  }

  RngStream arrival_rng(seed, "arrivals");
  RngStream length_rng(seed, "lengths");
  Workload workload;
  if (count > 0) {
    workload.requests.reserve(static_cast<size_t>(count));
  }
  const bool bounded_by_time = duration > Duration::zero();
  Duration now = Duration::zero();
  for (int64_t i = 0; count == 0 || i < count; ++i) {
    if (i > 0) {
      const Duration gap = duration_from_seconds(next_gap_s(arrivals, arrival_rng));
      if (gap > Duration::max() - now) {
        throw RangeError("generate: arrival time overflows the simulated time range");
      }
      now += gap;
    }
    if (bounded_by_time && now >= duration) {
      break;
    }
    const LengthSample sample = lengths.next(length_rng);
    RequestSpec& request = workload.requests.emplace_back();
    request.id = i;
    request.arrival = SimTime{now};
    request.prompt_tokens = sample.prompt_tokens;
    request.output_tokens = sample.output_tokens;
  }

  std::string process =
      fmt::format("{} {:g}/s", arrival_kind_name(arrivals.kind), arrivals.rate_per_s);
  if (arrivals.kind == ArrivalKind::kGamma) {
    process += fmt::format(" cv {:g}", arrivals.cv);
  }
  workload.description = fmt::format("{}, {}, {} requests, seed {}", process, lengths.describe(),
                                     workload.requests.size(), seed);
  return workload;
}

Workload generate_sessions(const SessionSpec& spec, LengthSource& first, LengthSource& later,
                           uint64_t seed) {
  if (spec.sessions < 1 || spec.min_turns < 1 || spec.max_turns < spec.min_turns ||
      spec.think_time.count() < 0 || spec.max_context_tokens < 0) {
    throw std::invalid_argument(fmt::format(
        "sessions: expected sessions >= 1, 1 <= min_turns <= max_turns, think time and context "
        "limit >= 0; found {} sessions, turns {}..{}",
        spec.sessions, spec.min_turns, spec.max_turns));
  }
  // Session starts and first turns: a generated workload of `sessions` requests.
  const Workload starts = generate(spec.starts, first, spec.sessions, Duration{0}, seed);
  RngStream turn_rng(seed, "turns");
  RngStream later_rng(seed, "later-turns");
  constexpr int64_t kSpan = 512;  // tokens per hash id (sim::kPrefixHashBlockTokens)
  const uint64_t salt = mix64(seed, 4);
  Workload w;
  int64_t turns_total = 0;
  for (const RequestSpec& start : starts.requests) {
    const uint64_t session = mix64(salt, static_cast<uint64_t>(start.id));
    const int64_t turns = turn_rng.uniform_int(spec.min_turns, spec.max_turns);
    int64_t history = 0;  // prompt and output tokens of the session's earlier turns
    for (int64_t k = 0; k < turns; ++k) {
      const LengthSample s = k == 0 ? LengthSample{start.prompt_tokens, start.output_tokens}
                                    : later.next(later_rng);
      const int64_t prompt = history + s.prompt_tokens;
      if (k > 0 && spec.max_context_tokens > 0 &&
          prompt + s.output_tokens > spec.max_context_tokens) {
        break;
      }
      RequestSpec& r = w.requests.emplace_back();
      r.id = static_cast<RequestId>(w.requests.size() - 1);
      r.arrival = start.arrival;
      r.prompt_tokens = prompt;
      r.output_tokens = s.output_tokens;
      if (k > 0) {
        r.after = r.id - 1;
        r.think_time = spec.think_time;
      }
      // The spans of the prompt and of the answer the next turn resends.
      const int64_t spans = (prompt + s.output_tokens + kSpan - 1) / kSpan;
      r.prefix_hash_ids.resize(static_cast<size_t>(spans));
      r.hash_ids_cover_output = true;
      for (int64_t i = 0; i < spans; ++i) {
        r.prefix_hash_ids[static_cast<size_t>(i)] = mix64(session, static_cast<uint64_t>(i));
      }
      history = prompt + s.output_tokens;
      ++turns_total;
    }
  }
  w.description = fmt::format(
      "{} sessions ({}), {}..{} turns ({} requests), think time {}, first turn {}, later turns {}",
      spec.sessions, starts.description.substr(0, starts.description.find(',')), spec.min_turns,
      spec.max_turns, turns_total, format_duration(spec.think_time), first.describe(),
      later.describe());
  return w;
}

void share_prompts(Workload& w, const SharedPromptSpec& spec, uint64_t seed) {
  if (spec.dataset_entries < 0 || spec.num_prefix_prompts < 0 ||
      (spec.num_prefix_prompts > 0 && spec.prefix_prompt_length < 1)) {
    throw std::invalid_argument("share_prompts: counts must be >= 0 and a prefix prompt >= 1 token");
  }
  if (!spec.any()) return;
  RngStream rng(seed, "prompts");
  constexpr int64_t kSpan = 512;  // tokens per hash id (sim::kPrefixHashBlockTokens)
  // Distinct namespaces for entry text, per-request text and prefix text.
  const uint64_t entry_salt = mix64(seed, 1), own_salt = mix64(seed, 2),
                 prefix_salt = mix64(seed, 3);
  std::vector<int64_t> entry_prompt;
  if (spec.dataset_entries > 0) {
    const size_t n = std::min<size_t>(static_cast<size_t>(spec.dataset_entries), w.requests.size());
    for (size_t e = 0; e < n; ++e) entry_prompt.push_back(w.requests[e].prompt_tokens);
  }
  for (RequestSpec& r : w.requests) {
    uint64_t body = mix64(own_salt, static_cast<uint64_t>(r.id));
    if (spec.dataset_entries > 0) {
      const int64_t e = rng.uniform_int(0, spec.dataset_entries - 1);
      body = mix64(entry_salt, static_cast<uint64_t>(e));
      r.prompt_tokens = entry_prompt[static_cast<size_t>(e) % entry_prompt.size()];
    }
    int64_t prefix_len = 0;
    uint64_t prefix = 0;
    if (spec.num_prefix_prompts > 0) {
      prefix = mix64(prefix_salt,
                       static_cast<uint64_t>(rng.uniform_int(0, spec.num_prefix_prompts - 1)));
      prefix_len = spec.prefix_prompt_length;
      r.prompt_tokens += prefix_len;
    }
    const int64_t spans = (r.prompt_tokens + kSpan - 1) / kSpan;
    r.prefix_hash_ids.assign(static_cast<size_t>(spans), 0);
    // A span's id identifies all text up to its end: chained over the spans.
    uint64_t chain = 0;
    for (int64_t s = 0; s < spans; ++s) {
      const bool in_prefix = (s + 1) * kSpan <= prefix_len;
      chain = mix64(chain, in_prefix ? prefix : mix64(body, static_cast<uint64_t>(prefix)));
      r.prefix_hash_ids[static_cast<size_t>(s)] = mix64(chain, static_cast<uint64_t>(s));
    }
  }
}

}  // namespace servesim::traces
