#include "core/time.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.h"

namespace servesim {
namespace {

// `product` as the double it was rounded to: the empty asm statements hide it from a compiler
// that would fuse its multiplication with a later addition (fused multiply-add, -ffp-contract).
inline double rounded_product(double product) {
#if defined(__x86_64__) || defined(__i386__)
  asm("" : "+x"(product));
#elif defined(__aarch64__)
  asm("" : "+w"(product));
#else
  volatile double stored = product;
  product = stored;
#endif
  return product;
}

}  // namespace

Duration duration_from_seconds(double seconds) {
  double ns = rounded_product(seconds * 1e9);
  // Below 2^51 in magnitude, adding and subtracting 1.5 x 2^52 rounds to the nearest integer,
  // ties to even, exactly as std::nearbyint() does in the default rounding mode, without its
  // library call (nine per priced iteration).
  constexpr double kTwoPow51 = 2251799813685248.0;
  constexpr double kRoundingShift = 6755399441055744.0;  // 1.5 x 2^52
  if (std::fabs(ns) < kTwoPow51) {
    return Duration{static_cast<int64_t>((ns + kRoundingShift) - kRoundingShift)};
  }
  ns = std::nearbyint(ns);
  // 2^63 is exactly representable; anything >= it does not fit.
  constexpr double kLimit = 9223372036854775808.0;
  if (!std::isfinite(ns) || ns >= kLimit || ns < -kLimit) {
    throw RangeError(fmt::format("time value {} s is outside the simulated time range", seconds));
  }
  return Duration{static_cast<int64_t>(ns)};
}

Duration parse_duration(std::string_view text) {
  const std::string s(text);
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(s, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos == 0) {
    throw std::invalid_argument(
        fmt::format("expected a duration such as \"250us\", \"1.5ms\" or \"2s\", got \"{}\"", s));
  }
  std::string unit = s.substr(pos);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  double scale = 0;
  if (unit == "ns") {
    scale = 1e-9;
  } else if (unit == "us") {
    scale = 1e-6;
  } else if (unit == "ms") {
    scale = 1e-3;
  } else if (unit == "s") {
    scale = 1.0;
  } else if (unit == "min") {
    scale = 60.0;
  } else if (unit == "h") {
    scale = 3600.0;
  } else {
    throw std::invalid_argument(fmt::format(
        "expected a duration unit ns, us, ms, s, min or h after the number, got \"{}\"", s));
  }
  if (!std::isfinite(value)) {
    throw std::invalid_argument(fmt::format("duration \"{}\" is not finite", s));
  }
  try {
    return duration_from_seconds(value * scale);
  } catch (const RangeError& e) {
    throw std::invalid_argument(e.what());
  }
}

std::string format_duration(Duration d) {
  const double ns = static_cast<double>(d.count());
  const double a = std::fabs(ns);
  if (a < 1e3) return fmt::format("{} ns", d.count());
  if (a < 1e6) return fmt::format("{:.2f} us", ns / 1e3);
  if (a < 1e9) return fmt::format("{:.2f} ms", ns / 1e6);
  return fmt::format("{:.3f} s", ns / 1e9);
}

}  // namespace servesim
