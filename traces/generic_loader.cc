// servesim's generic CSV, length distributions and the format dispatcher (contract in loaders.h).
#include <optional>
#include <stdexcept>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "traces/loaders.h"
#include "traces/trace_parsing.h"

namespace servesim::traces {
namespace {

constexpr std::string_view kGenericHeader = "arrival_s,prompt_tokens,output_tokens";
constexpr std::string_view kLengthHeader =
    "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio";

struct FormatEntry {
  const char* name;
  Workload (*load)(const std::string& path);
};

// The order here is the order trace_formats() reports.
constexpr FormatEntry kFormats[] = {
    {"azure", &load_azure},
    {"burstgpt", &load_burstgpt},
    {"mooncake", &load_mooncake},
    {"generic_csv", &load_generic_csv},
};

void require_header(detail::LineReader& reader, std::string_view header,
                    std::vector<std::string_view>& fields) {
  const std::string expected = fmt::format("\"{}\"", header);
  const std::string_view line = detail::read_header(reader, expected, fields);
  if (!detail::header_is(fields, header)) {
    reader.fail(fmt::format("expected header {}, found {}", expected, detail::quote_found(line)));
  }
}

}  // namespace

Workload load_generic_csv(const std::string& path) {
  detail::LineReader reader(path);
  std::vector<std::string_view> fields;
  require_header(reader, kGenericHeader, fields);
  detail::TimelineBuilder builder(fmt::format("generic_csv:{}", path), "arrival_s");
  std::string_view line;
  while (reader.next_non_empty(line)) {
    detail::split_csv(line, fields);
    detail::expect_columns(reader, fields, 3, kGenericHeader);
    const std::optional<int64_t> arrival_ns = detail::parse_time_ns(fields[0], 0);
    if (!arrival_ns) {
      reader.fail(fmt::format("arrival_s: {}, found {}",
                              detail::time_field_problem(fields[0], 0, "seconds",
                                                         "expected non-negative seconds"),
                              detail::quote_found(fields[0])));
    }
    const int64_t prompt = detail::positive_int_field(reader, "prompt_tokens", fields[1]);
    const int64_t output = detail::positive_int_field(reader, "output_tokens", fields[2]);
    builder.add(reader, fields[0], *arrival_ns, prompt, output);
  }
  return builder.finish(reader);
}

std::vector<LengthSample> load_length_distribution(const std::string& path) {
  detail::LineReader reader(path);
  std::vector<std::string_view> fields;
  require_header(reader, kLengthHeader, fields);
  std::vector<LengthSample> samples;
  std::string_view line;
  while (reader.next_non_empty(line)) {
    detail::split_csv(line, fields);
    detail::expect_columns(reader, fields, 4, kLengthHeader);
    LengthSample& sample = samples.emplace_back();
    sample.prompt_tokens = detail::positive_int_field(reader, "num_prefill_tokens", fields[0]);
    sample.output_tokens = detail::positive_int_field(reader, "num_decode_tokens", fields[1]);
    const int64_t total = detail::non_negative_int_field(reader, "num_total_tokens", fields[2]);
    if (total != sample.prompt_tokens + sample.output_tokens) {
      reader.fail(fmt::format(
          "num_total_tokens: expected num_prefill_tokens + num_decode_tokens = {}, found {}",
          sample.prompt_tokens + sample.output_tokens, total));
    }
    if (!detail::parse_finite_double(fields[3])) {
      reader.fail(
          fmt::format("pd_ratio: expected a number, found {}", detail::quote_found(fields[3])));
    }
  }
  if (samples.empty()) {
    throw InputError(path, 0, "expected at least one data row, found none");
  }
  return samples;
}

std::vector<std::string> trace_formats() {
  std::vector<std::string> names;
  for (const FormatEntry& entry : kFormats) {
    names.emplace_back(entry.name);
  }
  return names;
}

Workload load_trace(const std::string& format, const std::string& path) {
  for (const FormatEntry& entry : kFormats) {
    if (format == entry.name) {
      return entry.load(path);
    }
  }
  throw std::invalid_argument(fmt::format("unknown trace format \"{}\"; valid values are: {}",
                                          format, fmt::join(trace_formats(), ", ")));
}

}  // namespace servesim::traces
