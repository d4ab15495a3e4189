// Loaders for the public request traces servesim replays (formats in traces/data/README.md).
//
// Contract, common to every loader:
//   * The file is read one line at a time; only the returned Workload grows with the file.
//   * Every row is validated. A malformed row throws InputError(path, line, message), where
//     `line` is 1-based and `message` says which column, what was expected and what was found:
//     "trace.csv:3: ContextTokens: expected a non-negative integer, found \"abc\"".
//     A file that cannot be opened, or that yields no request, throws InputError(path, 0, ...).
//   * The header line is required and selects the variant of a format; an unknown header throws.
//   * Rows must be sorted by arrival. Equal timestamps are allowed (and kept in file order); a
//     timestamp earlier than the previous row's throws.
//   * Rows whose prompt or output token count is 0 (failed requests) are not replayed: they are
//     counted in Workload::skipped_rows.
//   * Arrival times are converted to integer nanoseconds exactly and shifted so the first kept
//     request arrives at time 0. The Workload is finalised: sorted, ids 0..N-1.
//   * Empty lines are ignored; "\r\n" line endings are accepted.
#pragma once

#include <string>
#include <vector>

#include "core/request_spec.h"
#include "traces/length_sample.h"

namespace servesim::traces {

// Azure LLM inference traces, selected by header:
//   "TIMESTAMP,ContextTokens,GeneratedTokens": 2023 ("2023-11-16 18:15:46.6805900") and 2024
//       ("2024-05-10 00:00:00.009930+00:00", "2024-05-12 00:00:00+00:00");
//   "TIMESTAMP,NumImages,ContextTokens,GeneratedTokens": 2025 multimodal
//       ("2024-10-15T12:00:00.269Z"); NumImages is validated, then dropped.
// Timestamps are absolute UTC (see parse_utc_timestamp_ns).
Workload load_azure(const std::string& path);

// BurstGPT, selected by header:
//   releases 1-2: "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type";
//   release 3: "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,
//       Total tokens,Log Type" (one line).
// Timestamp is in seconds, integer or decimal. Failed requests (Request or Response tokens 0) are
// skipped and counted.
Workload load_burstgpt(const std::string& path);

// Mooncake JSON Lines: one object per line with "timestamp" (milliseconds), "input_length",
// "output_length" and optionally "hash_ids" (one non-negative integer per 512-token prompt block,
// kept as RequestSpec::prefix_hash_ids). Other keys are ignored. Requests sharing a quantised
// timestamp all arrive at that instant (they are not spread over the quantisation step).
Workload load_mooncake(const std::string& path);

// servesim's own CSV: header exactly "arrival_s,prompt_tokens,output_tokens"; arrival in seconds
// (decimal or exponent form, converted exactly for decimals), token counts positive integers.
// Unlike the public traces, a zero token count here is an error, not a skipped row.
Workload load_generic_csv(const std::string& path);

// Length-only distribution, header
// "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio". Prefill and decode must be
// positive integers, num_total_tokens must equal their sum, pd_ratio must be a number (it is not
// used). Returns the (prefill, decode) pairs in file order.
std::vector<LengthSample> load_length_distribution(const std::string& path);

// Returns the formats load_trace() accepts: "azure", "burstgpt", "mooncake", "generic_csv".
std::vector<std::string> trace_formats();

// Dispatches to the loader for `format`.
// Throws std::invalid_argument naming the valid formats if `format` is unknown.
Workload load_trace(const std::string& format, const std::string& path);

}  // namespace servesim::traces
