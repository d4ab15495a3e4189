#include "core/rng.h"

#include <cassert>
#include <cmath>

namespace servesim {

uint64_t derive_stream_seed(uint64_t seed, std::string_view name) {
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  uint64_t z = seed ^ (h + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

uint64_t mix64(uint64_t a, uint64_t b) {
  return splitmix64(splitmix64(a) ^ (b * 0xd1b54a32d192ed03ULL));
}

RngStream::RngStream(uint64_t seed, std::string_view name)
    : engine_(derive_stream_seed(seed, name)) {}

double RngStream::uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

int64_t RngStream::uniform_int(int64_t lo, int64_t hi) {
  assert(lo <= hi);
  // Unsigned arithmetic: hi - lo overflows int64 when the range is wider than INT64_MAX.
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;
  if (span == 0) return static_cast<int64_t>(engine_());  // the full int64 range
  // Rejection sampling for an unbiased result.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % span;
  uint64_t x;
  do {
    x = engine_();
  } while (x >= limit);
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + x % span);
}

double RngStream::exponential(double rate) {
  assert(rate > 0);
  return -std::log1p(-uniform()) / rate;
}

double RngStream::normal() {
  // Marsaglia polar method; one value per call (the spare is dropped to keep the stream simple).
  double u, v, s;
  do {
    u = 2.0 * uniform() - 1.0;
    v = 2.0 * uniform() - 1.0;
    s = u * u + v * v;
  } while (s >= 1.0 || s == 0.0);
  return u * std::sqrt(-2.0 * std::log(s) / s);
}

double RngStream::gamma(double shape, double scale) {
  assert(shape > 0 && scale > 0);
  if (shape < 1.0) {
    // Boost: Gamma(k) = Gamma(k + 1) * U^(1/k).
    const double u = uniform();
    return gamma(shape + 1.0, scale) * std::pow(u, 1.0 / shape);
  }
  // Marsaglia and Tsang (2000).
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = normal();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = uniform();
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v * scale;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v * scale;
  }
}

}  // namespace servesim
