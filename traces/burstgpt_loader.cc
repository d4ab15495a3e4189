// BurstGPT traces, 6-column (releases 1-2) and 8-column (release 3) variants (contract in
// loaders.h).
#include <optional>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "traces/loaders.h"
#include "traces/trace_parsing.h"

namespace servesim::traces {
namespace {

constexpr std::string_view kSixColumnHeader =
    "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type";
constexpr std::string_view kEightColumnHeader =
    "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type";

// Column positions of one variant.
struct Layout {
  std::string_view header;
  size_t columns;
  size_t request_tokens;
  size_t response_tokens;
  size_t total_tokens;
  std::optional<size_t> elapsed_time;
};

constexpr Layout kSixColumns{kSixColumnHeader, 6, 2, 3, 4, std::nullopt};
constexpr Layout kEightColumns{kEightColumnHeader, 8, 4, 5, 6, 2};

}  // namespace

Workload load_burstgpt(const std::string& path) {
  detail::LineReader reader(path);
  const std::string expected_header = fmt::format("\"{}\" (BurstGPT 1-2) or \"{}\" (BurstGPT 3)",
                                                  kSixColumnHeader, kEightColumnHeader);
  std::vector<std::string_view> fields;
  const std::string_view header_line = detail::read_header(reader, expected_header, fields);
  const Layout* layout = nullptr;
  if (detail::header_is(fields, kSixColumnHeader)) {
    layout = &kSixColumns;
  } else if (detail::header_is(fields, kEightColumnHeader)) {
    layout = &kEightColumns;
  } else {
    reader.fail(fmt::format("expected header {}, found {}", expected_header,
                            detail::quote_found(header_line)));
  }

  detail::TimelineBuilder builder(fmt::format("burstgpt:{}", path), "Timestamp");
  std::string_view line;
  while (reader.next_non_empty(line)) {
    detail::split_csv(line, fields);
    detail::expect_columns(reader, fields, layout->columns, layout->header);
    const std::optional<int64_t> arrival_ns = detail::parse_time_ns(fields[0], 0);
    if (!arrival_ns) {
      reader.fail(fmt::format("Timestamp: {}, found {}",
                              detail::time_field_problem(fields[0], 0, "seconds",
                                                         "expected non-negative seconds (integer "
                                                         "or decimal)"),
                              detail::quote_found(fields[0])));
    }
    if (layout->elapsed_time) {
      const std::string_view elapsed = fields[*layout->elapsed_time];
      const std::optional<double> seconds = detail::parse_finite_double(elapsed);
      if (!seconds || *seconds < 0) {
        reader.fail(fmt::format("Elapsed time: expected non-negative seconds, found {}",
                                detail::quote_found(elapsed)));
      }
    }
    const int64_t prompt =
        detail::non_negative_int_field(reader, "Request tokens", fields[layout->request_tokens]);
    const int64_t output =
        detail::non_negative_int_field(reader, "Response tokens", fields[layout->response_tokens]);
    detail::non_negative_int_field(reader, "Total tokens", fields[layout->total_tokens]);
    builder.add(reader, fields[0], *arrival_ns, prompt, output);
  }
  return builder.finish(reader);
}

}  // namespace servesim::traces
