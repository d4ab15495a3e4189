// Simulated time: signed 64-bit integer nanoseconds.
//
// Contract: every timestamp and duration inside the simulator is an integer count of nanoseconds.
// `double` seconds appear only at the model boundary (cost models, trace files) and are converted
// with duration_from_seconds(), which rounds to nearest and throws RangeError when the value is
// not finite or does not fit in int64 nanoseconds (about +-292 years).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace servesim {

struct SimClock {
  using rep = int64_t;
  using period = std::nano;
  using duration = std::chrono::duration<int64_t, std::nano>;
  using time_point = std::chrono::time_point<SimClock, duration>;
  static constexpr bool is_steady = true;
};

using Duration = SimClock::duration;
using SimTime = SimClock::time_point;

inline constexpr SimTime kTimeZero{};

// Returns `seconds` as a Duration, rounded to the nearest nanosecond.
// Throws RangeError if `seconds` is NaN, infinite or out of the int64 nanosecond range.
Duration duration_from_seconds(double seconds);
inline Duration duration_from_ms(double ms) { return duration_from_seconds(ms * 1e-3); }

inline double to_seconds(Duration d) { return static_cast<double>(d.count()) * 1e-9; }
inline double to_ms(Duration d) { return static_cast<double>(d.count()) * 1e-6; }
inline double to_seconds(SimTime t) { return to_seconds(t.time_since_epoch()); }
inline int64_t to_ns(SimTime t) { return t.time_since_epoch().count(); }
inline SimTime time_from_ns(int64_t ns) { return SimTime{Duration{ns}}; }

// Parses a duration with a unit: "250us", "2s", "1.5ms", "100ns", "3min", "1h".
// Throws std::invalid_argument with a message naming the expected form.
Duration parse_duration(std::string_view text);

// Human-readable form with an appropriate unit ("1.25 ms", "3.000 s").
std::string format_duration(Duration d);

}  // namespace servesim
