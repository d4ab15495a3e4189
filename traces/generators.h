// Synthetic workloads: an arrival process paired with a source of request lengths.
//
// Contract: generation is deterministic given its inputs and the seed. Arrivals draw from the
// RngStream (seed, "arrivals") and lengths from (seed, "lengths"), so changing the length source
// never moves an arrival and vice versa. Inter-arrival gaps are converted to integer nanoseconds
// one by one (rounded to nearest) and summed exactly. The first request arrives at time 0, as in a
// loaded trace, and the returned Workload is finalised.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/request_spec.h"
#include "core/rng.h"
#include "core/time.h"
#include "traces/length_sample.h"

namespace servesim::traces {

// Draws (prompt, output) pairs. Implementations are immutable after construction; all randomness
// comes from the stream passed to next(), so a source can be shared across runs.
class LengthSource {
 public:
  virtual ~LengthSource() = default;
  // Returns the next sample; both counts are positive.
  virtual LengthSample next(RngStream& rng) = 0;
  // One-line description for provenance ("fixed P8192/D32").
  virtual std::string describe() const = 0;
};

// Always returns (prompt, output); draws nothing from the stream.
// Throws std::invalid_argument unless both are positive.
std::unique_ptr<LengthSource> make_fixed_lengths(int64_t prompt, int64_t output);

// aiperf's synthetic lengths: prompt and output counts each drawn from a normal distribution
// (mean, standard deviation), rounded to the nearest token and kept >= 1. A zero standard deviation
// returns the mean (rounded) without drawing. Throws std::invalid_argument for a mean below 1 or a
// negative or non-finite parameter.
std::unique_ptr<LengthSource> make_normal_lengths(double prompt_mean, double prompt_sd,
                                                  double output_mean, double output_sd);

// vLLM benchmark_serving.py's random dataset with --random-range-ratio r (the copy InferenceMAX
// runs): prompt and output counts each drawn uniformly from the integers [floor(r x L), L], kept
// >= 1. Throws std::invalid_argument for a length below 1 or r outside [0, 1].
std::unique_ptr<LengthSource> make_ranged_lengths(int64_t prompt, int64_t output,
                                                  double range_ratio);

// Uniform draw with replacement from `samples`; `name` labels it in describe().
// Throws std::invalid_argument if `samples` is empty or holds a non-positive count.
std::unique_ptr<LengthSource> make_empirical_lengths(std::vector<LengthSample> samples,
                                                     std::string name);

// Uniform draw with replacement of the (prompt, output) pairs of `w`'s requests (copied; `w` need
// not outlive the source). Throws std::invalid_argument if `w` has no request.
std::unique_ptr<LengthSource> make_lengths_from_workload(const Workload& w, std::string name);

// Picks part i with probability weights[i] / sum(weights), then draws from it.
// Throws std::invalid_argument if `parts` is empty or holds a null, if the sizes differ, or if a
// weight is negative or not finite, or all weights are 0.
std::unique_ptr<LengthSource> make_mixture_lengths(std::vector<std::unique_ptr<LengthSource>> parts,
                                                   std::vector<double> weights);

enum class ArrivalKind {
  kPoisson,  // exponential inter-arrival times with mean 1/rate (CV 1)
  kGamma,    // Gamma inter-arrival times: shape 1/cv^2, scale cv^2/rate (mean 1/rate, CV cv)
  kUniform,  // constant inter-arrival time 1/rate
};

struct ArrivalSpec {
  ArrivalKind kind = ArrivalKind::kPoisson;
  double rate_per_s = 1.0;  // mean arrival rate; > 0
  double cv = 1.0;          // coefficient of variation of inter-arrival times (kGamma only); > 0
};

// Returns the registry-style name of `kind`: "poisson", "gamma" or "uniform".
std::string_view arrival_kind_name(ArrivalKind kind);
// Returns the kind named `name`. Throws std::invalid_argument listing the valid names.
ArrivalKind parse_arrival_kind(std::string_view name);

// Returns a workload of `count` requests when count > 0, otherwise every arrival before
// `duration`; when both are positive, generation stops at whichever limit is reached first.
// Lengths come from `lengths`.
// Throws std::invalid_argument if the spec is invalid (rate or cv not positive and finite), if
// count < 0, or if neither count nor duration is positive. Throws RangeError if an arrival time
// overflows the simulated time range.
Workload generate(const ArrivalSpec& arrivals, LengthSource& lengths, int64_t count,
                  Duration duration, uint64_t seed);

// Which requests of a synthetic benchmark share prompt text (aiperf's dataset and prefix-prompt
// options), expressed as RequestSpec::prefix_hash_ids for prefix caching.
// - dataset_entries > 0: the benchmark sends prompts from a pool of that many entries, drawn
//   uniformly with replacement (seeded): a request takes its entry's prompt, whose length is the
//   entry-th generated prompt length (requests beyond the pool reuse entries), so two requests of
//   one entry have the same prompt. 0: every prompt is its own (random corpus text).
// - num_prefix_prompts > 0: each request starts with one of that many shared prefixes of
//   prefix_prompt_length tokens (uniform, seeded), added in front of its prompt.
// Hash ids are derived from (entry or request, prefix, position) so that requests share exactly
// the 512-token spans whose text is shared.
struct SharedPromptSpec {
  int64_t dataset_entries = 0;
  int64_t num_prefix_prompts = 0;
  int64_t prefix_prompt_length = 0;
  bool any() const { return dataset_entries > 0 || num_prefix_prompts > 0; }
};
// Multi-turn sessions (chat): `sessions` conversations start at the arrivals of `starts`; each
// has a number of turns drawn uniformly from [min_turns, max_turns] (RngStream (seed, "turns")).
// Turn 0's prompt and output come from `first` (its lengths stream); a later turn adds the user's
// new tokens and its output from `later` (stream (seed, "later-turns")) to the history: its prompt
// is every earlier prompt and output of the session plus its new tokens, and it is sent
// `think_time` after the previous turn finished (RequestSpec::after). A session ends before a turn
// whose prompt + output would exceed `max_context_tokens` (0: no limit; turn 0 is always kept).
// Prefix hash ids are per session and 512-token span and cover each turn's prompt and answer
// (RequestSpec::hash_ids_cover_output), so a turn shares exactly its history's spans with the
// previous turn and nothing with other sessions. Requests are listed session by
// session, in start order (every turn's `arrival` is its session's start).
struct SessionSpec {
  ArrivalSpec starts;
  int64_t sessions = 1;
  int64_t min_turns = 1, max_turns = 1;
  Duration think_time{};
  int64_t max_context_tokens = 0;
};
// Throws std::invalid_argument for sessions < 1, min_turns < 1, max_turns < min_turns, a negative
// think time or context limit, or an invalid arrival spec; RangeError as generate().
Workload generate_sessions(const SessionSpec& spec, LengthSource& first, LengthSource& later,
                           uint64_t seed);

// Applies `spec` to `w` (finalised; arrival times and output lengths unchanged). Draws from the
// RngStream (seed, "prompts"). Throws std::invalid_argument for negative counts, or prefix prompts
// without a positive length.
void share_prompts(Workload& w, const SharedPromptSpec& spec, uint64_t seed);

}  // namespace servesim::traces
