// Deterministic random-number streams.
//
// Contract: a stream is identified by (scenario seed, stream name). Two streams with the same pair
// produce identical sequences on every platform and in every process; streams with different
// names are independent, so adding a new consumer of randomness never perturbs existing ones.
// Engines and generators own their streams; there is no global generator.
#pragma once

#include <cstdint>
#include <string_view>

#include <boost/random/mersenne_twister.hpp>

namespace servesim {

class RngStream {
 public:
  RngStream(uint64_t seed, std::string_view name);

  // Uniform in [0, 1), 53 random bits.
  double uniform();
  // Uniform integer in [lo, hi] (inclusive). REQUIRES: lo <= hi.
  int64_t uniform_int(int64_t lo, int64_t hi);
  // Exponential with the given rate (events per unit). REQUIRES: rate > 0.
  double exponential(double rate);
  // Gamma with shape k and scale theta (mean k*theta). REQUIRES: k > 0, theta > 0.
  double gamma(double shape, double scale);
  // Standard normal.
  double normal();

  uint64_t next_u64() { return engine_(); }

 private:
  boost::random::mt19937_64 engine_;
};

// 64-bit mix of a seed and a name (FNV-1a over the name, then splitmix64 finalisation).
uint64_t derive_stream_seed(uint64_t seed, std::string_view name);

// A 64-bit hash of the pair (a, b), well mixed in every bit (splitmix64 of each): for identities
// built from smaller ones (prefix-cache block keys, shared-prompt hash ids).
uint64_t mix64(uint64_t a, uint64_t b);

}  // namespace servesim
