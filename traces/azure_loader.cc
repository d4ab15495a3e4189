// Azure LLM inference traces 2023/2024 and the 2025 multimodal trace (contract in loaders.h).
#include <optional>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "traces/loaders.h"
#include "traces/timestamp.h"
#include "traces/trace_parsing.h"

namespace servesim::traces {
namespace {

constexpr std::string_view kTextHeader = "TIMESTAMP,ContextTokens,GeneratedTokens";
constexpr std::string_view kMultimodalHeader = "TIMESTAMP,NumImages,ContextTokens,GeneratedTokens";

}  // namespace

Workload load_azure(const std::string& path) {
  detail::LineReader reader(path);
  const std::string expected_header = fmt::format(
      "\"{}\" (Azure 2023/2024) or \"{}\" (Azure 2025 multimodal)", kTextHeader, kMultimodalHeader);
  std::vector<std::string_view> fields;
  const std::string_view header_line = detail::read_header(reader, expected_header, fields);
  const bool multimodal = detail::header_is(fields, kMultimodalHeader);
  if (!multimodal && !detail::header_is(fields, kTextHeader)) {
    reader.fail(fmt::format("expected header {}, found {}", expected_header,
                            detail::quote_found(header_line)));
  }
  const std::string_view header = multimodal ? kMultimodalHeader : kTextHeader;
  const size_t columns = multimodal ? 4 : 3;
  const size_t context_column = multimodal ? 2 : 1;

  detail::TimelineBuilder builder(fmt::format("azure:{}", path), "TIMESTAMP");
  std::string_view line;
  while (reader.next_non_empty(line)) {
    detail::split_csv(line, fields);
    detail::expect_columns(reader, fields, columns, header);
    const std::optional<int64_t> arrival_ns = parse_utc_timestamp_ns(fields[0]);
    if (!arrival_ns) {
      reader.fail(fmt::format(
          "TIMESTAMP: expected a UTC time \"YYYY-MM-DD HH:MM:SS[.fffffff][+HH:MM|Z]\", found {}",
          detail::quote_found(fields[0])));
    }
    if (multimodal) {
      detail::non_negative_int_field(reader, "NumImages", fields[1]);
    }
    const int64_t prompt =
        detail::non_negative_int_field(reader, "ContextTokens", fields[context_column]);
    const int64_t output =
        detail::non_negative_int_field(reader, "GeneratedTokens", fields[context_column + 1]);
    builder.add(reader, fields[0], *arrival_ns, prompt, output);
  }
  return builder.finish(reader);
}

}  // namespace servesim::traces
