#include "traces/transforms.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"

namespace servesim::traces {
namespace {

bool by_arrival(const RequestSpec& a, const RequestSpec& b) { return a.arrival < b.arrival; }

void renumber(Workload& w) {
  RequestId id = 0;
  for (RequestSpec& request : w.requests) {
    request.id = id++;
  }
}

void note(Workload& w, const std::string& text) {
  w.description += w.description.empty() ? text : " " + text;
}

// Returns round(value * numerator / denominator) for non-negative operands without overflow.
// REQUIRES: value, numerator >= 0; denominator > 0; the result fits in int64.
int64_t scale_rounded(int64_t value, int64_t numerator, int64_t denominator) {
  const __int128 product = static_cast<__int128>(value) * numerator;
  return static_cast<int64_t>((2 * product + denominator) /
                              (2 * static_cast<__int128>(denominator)));
}

}  // namespace

void finalize(Workload& w) {
  if (!std::is_sorted(w.requests.begin(), w.requests.end(), by_arrival)) {
    std::stable_sort(w.requests.begin(), w.requests.end(), by_arrival);
  }
  renumber(w);
}

void window(Workload& w, Duration start, Duration length) {
  if (start < Duration::zero() || length <= Duration::zero()) {
    throw std::invalid_argument(
        fmt::format("window: expected start >= 0 and length > 0, found start {} and length {}",
                    format_duration(start), format_duration(length)));
  }
  const SimTime begin{start};
  // Compare lengths rather than form start + length, which could overflow.
  const auto outside = [&](const RequestSpec& r) {
    return r.arrival < begin || r.arrival - begin >= length;
  };
  w.requests.erase(std::remove_if(w.requests.begin(), w.requests.end(), outside), w.requests.end());
  for (RequestSpec& request : w.requests) {
    request.arrival -= start;
  }
  renumber(w);
  note(w, fmt::format("window {}+{}", format_duration(start), format_duration(length)));
}

void first_n(Workload& w, int64_t n) {
  if (n < 0) {
    throw std::invalid_argument(fmt::format("first_n: expected n >= 0, found {}", n));
  }
  if (static_cast<uint64_t>(n) < w.requests.size()) {
    w.requests.erase(w.requests.begin() + n, w.requests.end());
  }
  note(w, fmt::format("first {}", n));
}

void filter(Workload& w, const std::function<bool(const RequestSpec&)>& keep,
            std::string_view label) {
  w.requests.erase(std::remove_if(w.requests.begin(), w.requests.end(),
                                  [&](const RequestSpec& r) { return !keep(r); }),
                   w.requests.end());
  renumber(w);
  note(w, fmt::format("filter {}", label));
}

void scale_to_rate(Workload& w, double rate_per_s) {
  if (!std::isfinite(rate_per_s) || rate_per_s <= 0) {
    throw std::invalid_argument(
        fmt::format("scale_to_rate: expected a positive finite rate, found {}", rate_per_s));
  }
  if (w.requests.size() < 2) {
    throw std::invalid_argument(
        fmt::format("scale_to_rate: expected at least 2 requests to define a rate, found {}",
                    w.requests.size()));
  }
  const SimTime first = w.requests.front().arrival;
  const int64_t span_ns = (w.requests.back().arrival - first).count();
  if (span_ns <= 0) {
    throw std::invalid_argument(fmt::format(
        "scale_to_rate: expected requests spread over time, found all {} at the same instant",
        w.requests.size()));
  }
  const double gaps = static_cast<double>(w.requests.size() - 1);
  const int64_t target_span_ns = duration_from_seconds(gaps / rate_per_s).count();
  if (target_span_ns > Duration::max().count() - first.time_since_epoch().count()) {
    throw RangeError("scale_to_rate: scaled arrivals overflow the simulated time range");
  }
  for (RequestSpec& request : w.requests) {
    const int64_t offset_ns = (request.arrival - first).count();
    request.arrival = first + Duration{scale_rounded(offset_ns, target_span_ns, span_ns)};
  }
  note(w, fmt::format("rate {:g}/s", rate_per_s));
}

void time_scale(Workload& w, double factor) {
  if (!std::isfinite(factor) || factor <= 0) {
    throw std::invalid_argument(
        fmt::format("time_scale: expected a positive finite factor, found {}", factor));
  }
  const auto scaled_ns = [factor](const RequestSpec& r) {
    return static_cast<long double>(r.arrival.time_since_epoch().count()) * factor;
  };
  // Check the extreme arrivals first so an overflow leaves the workload unchanged.
  constexpr long double kLimit = 9223372036854775808.0L;  // 2^63
  if (!w.requests.empty() &&
      !(scaled_ns(w.requests.back()) < kLimit && scaled_ns(w.requests.front()) > -kLimit)) {
    throw RangeError(
        fmt::format("time_scale: arrivals scaled by {} overflow the simulated time range", factor));
  }
  for (RequestSpec& request : w.requests) {
    request.arrival = SimTime{Duration{std::llround(scaled_ns(request))}};
  }
  note(w, fmt::format("time x{:g}", factor));
}

Workload merge(Workload a, Workload b) {
  Workload out;
  out.requests.reserve(a.requests.size() + b.requests.size());
  finalize(a);
  finalize(b);
  // std::merge takes from the first range on ties, which gives a-before-b.
  std::merge(std::make_move_iterator(a.requests.begin()), std::make_move_iterator(a.requests.end()),
             std::make_move_iterator(b.requests.begin()), std::make_move_iterator(b.requests.end()),
             std::back_inserter(out.requests), by_arrival);
  renumber(out);
  out.skipped_rows = a.skipped_rows + b.skipped_rows;
  out.description = fmt::format("merge({}; {})", a.description, b.description);
  return out;
}

}  // namespace servesim::traces
