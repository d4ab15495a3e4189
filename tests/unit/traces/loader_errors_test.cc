// Error goldens: each malformed input must fail with the exact "FILE:LINE: MESSAGE" text.
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "traces/loaders.h"
#include "trace_test_util.h"

namespace servesim::traces {
namespace {

using testing::TempFiles;

constexpr const char* kAzureHeader = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
constexpr const char* kBurst6Header =
    "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n";
constexpr const char* kBurst8Header =
    "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,"
    "Log Type\n";
constexpr const char* kGenericHeader = "arrival_s,prompt_tokens,output_tokens\n";
constexpr const char* kLengthHeader =
    "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n";

// Returns what() of the InputError that `load` throws, or a note that it threw nothing.
template <typename Result>
std::string error_of(const std::function<Result()>& load) {
  try {
    load();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError thrown)";
}

std::string azure_error(const std::string& path) {
  return error_of<Workload>([&] { return load_azure(path); });
}
std::string burstgpt_error(const std::string& path) {
  return error_of<Workload>([&] { return load_burstgpt(path); });
}
std::string mooncake_error(const std::string& path) {
  return error_of<Workload>([&] { return load_mooncake(path); });
}
std::string generic_error(const std::string& path) {
  return error_of<Workload>([&] { return load_generic_csv(path); });
}
std::string length_error(const std::string& path) {
  return error_of<std::vector<LengthSample>>([&] { return load_length_distribution(path); });
}

TEST(AzureErrors, NonNumericTokenCountOnLine3) {
  TempFiles files;
  const std::string path = files.write("bad.csv", std::string(kAzureHeader) +
                                                      "2023-11-16 18:15:46.6805900,374,44\n"
                                                      "2023-11-16 18:15:50.9951690,abc,109\n");
  EXPECT_EQ(azure_error(path),
            path + ":3: ContextTokens: expected a non-negative integer, found \"abc\"");
}

TEST(AzureErrors, NegativeAndFractionalTokenCounts) {
  TempFiles files;
  const std::string negative = files.write(
      "negative.csv", std::string(kAzureHeader) + "2023-11-16 18:15:46.6805900,374,-4\n");
  EXPECT_EQ(azure_error(negative),
            negative + ":2: GeneratedTokens: expected a non-negative integer, found \"-4\"");
  const std::string fractional = files.write(
      "fractional.csv", std::string(kAzureHeader) + "2023-11-16 18:15:46.6805900,37.5,4\n");
  EXPECT_EQ(azure_error(fractional),
            fractional + ":2: ContextTokens: expected a non-negative integer, found \"37.5\"");
}

TEST(AzureErrors, WrongColumnCount) {
  TempFiles files;
  const std::string path =
      files.write("bad.csv", std::string(kAzureHeader) + "2023-11-16 18:15:46.6805900,374\n");
  EXPECT_EQ(azure_error(path),
            path +
                ":2: expected 3 comma-separated columns (TIMESTAMP,ContextTokens,GeneratedTokens), "
                "found 2");
  const std::string multimodal = files.write("mm.csv",
                                             "TIMESTAMP,NumImages,ContextTokens,GeneratedTokens\n"
                                             "2024-10-15T12:00:00.269Z,0,770,491\n"
                                             "2024-10-15T12:00:05.819Z,1,949\n");
  EXPECT_EQ(azure_error(multimodal),
            multimodal +
                ":3: expected 4 comma-separated columns "
                "(TIMESTAMP,NumImages,ContextTokens,GeneratedTokens), found 3");
}

TEST(AzureErrors, TimestampGoingBackwards) {
  TempFiles files;
  const std::string path = files.write("bad.csv", std::string(kAzureHeader) +
                                                      "2023-11-16 18:15:46.6805900,374,44\n"
                                                      "2023-11-16 18:15:50.9951690,396,109\n"
                                                      "2023-11-16 18:15:50.9951689,396,109\n");
  EXPECT_EQ(azure_error(path),
            path +
                ":4: TIMESTAMP: expected a time at or after the previous row's \"2023-11-16 "
                "18:15:50.9951690\" (rows must be sorted by arrival; ties are allowed), found "
                "\"2023-11-16 18:15:50.9951689\"");
}

TEST(AzureErrors, BadTimestamp) {
  TempFiles files;
  const std::string path =
      files.write("bad.csv", std::string(kAzureHeader) + "2023-11-31 18:15:46.6805900,374,44\n");
  EXPECT_EQ(azure_error(path),
            path +
                ":2: TIMESTAMP: expected a UTC time \"YYYY-MM-DD HH:MM:SS[.fffffff][+HH:MM|Z]\", "
                "found \"2023-11-31 18:15:46.6805900\"");
}

TEST(AzureErrors, UnknownHeader) {
  TempFiles files;
  const std::string path = files.write("bad.csv", "time,in,out\n2023-11-16 18:15:46,1,1\n");
  EXPECT_EQ(azure_error(path),
            path +
                ":1: expected header \"TIMESTAMP,ContextTokens,GeneratedTokens\" (Azure 2023/2024) "
                "or \"TIMESTAMP,NumImages,ContextTokens,GeneratedTokens\" (Azure 2025 "
                "multimodal), found \"time,in,out\"");
}

TEST(AzureErrors, NegativeNumImages) {
  TempFiles files;
  const std::string path = files.write("bad.csv",
                                       "TIMESTAMP,NumImages,ContextTokens,GeneratedTokens\n"
                                       "2024-10-15T12:00:00.269Z,x,770,491\n");
  EXPECT_EQ(azure_error(path),
            path + ":2: NumImages: expected a non-negative integer, found \"x\"");
}

TEST(AzureErrors, EmptyFileHeaderOnlyAndMissingFile) {
  TempFiles files;
  const std::string empty = files.write("empty.csv", "");
  EXPECT_EQ(azure_error(empty),
            empty +
                ": expected a header line \"TIMESTAMP,ContextTokens,GeneratedTokens\" (Azure "
                "2023/2024) or \"TIMESTAMP,NumImages,ContextTokens,GeneratedTokens\" (Azure 2025 "
                "multimodal), found an empty file");
  const std::string header_only = files.write("header.csv", kAzureHeader);
  EXPECT_EQ(azure_error(header_only), header_only + ": expected at least one data row, found none");
  const std::string missing = files.write("x.csv", "") + ".missing";
  EXPECT_EQ(azure_error(missing), missing + ": cannot open file: No such file or directory");
}

TEST(BurstGptErrors, UnknownHeaderListsBothVariants) {
  TempFiles files;
  const std::string path = files.write("bad.csv", "Timestamp,Model,Request tokens\n5,ChatGPT,4\n");
  EXPECT_EQ(burstgpt_error(path),
            path +
                ":1: expected header \"Timestamp,Model,Request tokens,Response tokens,Total "
                "tokens,Log Type\" (BurstGPT 1-2) or \"Timestamp,Session ID,Elapsed "
                "time,Model,Request tokens,Response tokens,Total tokens,Log Type\" (BurstGPT 3), "
                "found \"Timestamp,Model,Request tokens\"");
}

TEST(BurstGptErrors, BadTimestampAndColumnCount) {
  TempFiles files;
  const std::string timestamp =
      files.write("ts.csv", std::string(kBurst6Header) +
                                "5,ChatGPT,472,18,490,Conversation log\n"
                                "4x5,ChatGPT,472,18,490,Conversation log\n");
  EXPECT_EQ(burstgpt_error(timestamp),
            timestamp +
                ":3: Timestamp: expected non-negative seconds (integer or decimal), found \"4x5\"");
  const std::string columns = files.write(
      "cols.csv", std::string(kBurst8Header) +
                      "19440110.0,1722ac82,43,GPT-4,906,446,1352,Conversation log,extra\n");
  EXPECT_EQ(burstgpt_error(columns),
            columns +
                ":2: expected 8 comma-separated columns (Timestamp,Session ID,Elapsed "
                "time,Model,Request tokens,Response tokens,Total tokens,Log Type), found 9");
}

TEST(BurstGptErrors, BadElapsedTimeAndTotal) {
  TempFiles files;
  const std::string elapsed = files.write(
      "elapsed.csv", std::string(kBurst8Header) + "19440110.0,s,-1,GPT-4,906,446,1352,API log\n");
  EXPECT_EQ(burstgpt_error(elapsed),
            elapsed + ":2: Elapsed time: expected non-negative seconds, found \"-1\"");
  const std::string total =
      files.write("total.csv", std::string(kBurst6Header) + "5,ChatGPT,472,18,,Conversation log\n");
  EXPECT_EQ(burstgpt_error(total),
            total + ":2: Total tokens: expected a non-negative integer, found \"\"");
}

TEST(BurstGptErrors, OnlyFailedRows) {
  TempFiles files;
  const std::string path = files.write("failed.csv", std::string(kBurst6Header) +
                                                         "5,ChatGPT,0,0,0,Conversation log\n"
                                                         "6,GPT-4,0,0,0,Conversation log\n");
  EXPECT_EQ(burstgpt_error(path),
            path +
                ": expected at least one row with positive prompt and output token counts, found "
                "none (2 rows skipped)");
}

TEST(MooncakeErrors, InvalidJsonOnLine2) {
  TempFiles files;
  const std::string path = files.write(
      "bad.jsonl",
      "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [0]}\n"
      "{\"timestamp\": 3, \"input_length\": 10,\n");
  EXPECT_EQ(mooncake_error(path),
            path +
                ":2: expected a JSON object, found invalid JSON (error at byte 37): "
                "\"{\"timestamp\": 3, \"input_length\": 10,\"");
}

TEST(MooncakeErrors, LeadingZeroIsNotJson) {
  TempFiles files;
  const std::string path =
      files.write("bad.jsonl", "{\"timestamp\": 0, \"input_length\": 010, \"output_length\": 5}\n");
  EXPECT_EQ(mooncake_error(path),
            path +
                ":1: expected a JSON object, found invalid JSON (error at byte 36): "
                "\"{\"timestamp\": 0, \"input_length\": 010, \"output_length\": 5}\"");
}

TEST(MooncakeErrors, NumberBeyondADoubleIsABadInputError) {
  TempFiles files;
  const std::string path = files.write(
      "bad.jsonl", "{\"timestamp\": 1e999, \"input_length\": 1, \"output_length\": 1}\n");
  EXPECT_EQ(mooncake_error(path),
            path +
                ":1: expected a JSON object, found a number out of range (a JSON number must fit "
                "a double, up to about 1.8e308): "
                "\"{\"timestamp\": 1e999, \"input_length\": 1, \"output_length\": 1}\"");
}

TEST(MooncakeErrors, NotAnObject) {
  TempFiles files;
  const std::string path = files.write("bad.jsonl", "[1, 2, 3]\n");
  EXPECT_EQ(mooncake_error(path), path + ":1: expected a JSON object, found \"[1,2,3]\"");
}

TEST(MooncakeErrors, MissingAndMistypedFields) {
  TempFiles files;
  const std::string missing =
      files.write("missing.jsonl", "{\"timestamp\": 0, \"output_length\": 5}\n");
  EXPECT_EQ(mooncake_error(missing),
            missing + ":1: expected field \"input_length\" (a non-negative integer), found none");
  const std::string negative = files.write(
      "negative.jsonl", "{\"timestamp\": 0, \"input_length\": -3, \"output_length\": 5}\n");
  EXPECT_EQ(mooncake_error(negative),
            negative + ":1: input_length: expected a non-negative integer, found \"-3\"");
  const std::string text = files.write(
      "text.jsonl", "{\"timestamp\": 0, \"input_length\": 3, \"output_length\": \"5\"}\n");
  EXPECT_EQ(mooncake_error(text),
            text + ":1: output_length: expected a non-negative integer, found \"\"5\"\"");
  const std::string hashes =
      files.write("hashes.jsonl",
                  "{\"timestamp\": 0, \"input_length\": 3, \"output_length\": 5, \"hash_ids\": "
                  "[1, -2]}\n");
  EXPECT_EQ(mooncake_error(hashes),
            hashes +
                ":1: hash_ids: expected a list of non-negative integers, found element "
                "\"-2\"");
  const std::string timestamp =
      files.write("ts.jsonl", "{\"timestamp\": -1, \"input_length\": 3, \"output_length\": 5}\n");
  EXPECT_EQ(mooncake_error(timestamp),
            timestamp + ":1: timestamp: expected non-negative milliseconds, found \"-1\"");
}

TEST(MooncakeErrors, TimestampGoingBackwards) {
  TempFiles files;
  const std::string path =
      files.write("bad.jsonl",
                  "{\"timestamp\": 3000, \"input_length\": 3, \"output_length\": 5}\n"
                  "{\"timestamp\": 3000, \"input_length\": 3, \"output_length\": 5}\n"
                  "{\"timestamp\": 2999, \"input_length\": 3, \"output_length\": 5}\n");
  EXPECT_EQ(mooncake_error(path),
            path +
                ":3: timestamp: expected a time at or after the previous row's \"3000\" (rows "
                "must be sorted by arrival; ties are allowed), found \"2999\"");
}

TEST(GenericCsvErrors, ZeroTokensAndBadArrival) {
  TempFiles files;
  const std::string zero = files.write("zero.csv", std::string(kGenericHeader) + "0.5,0,10\n");
  EXPECT_EQ(generic_error(zero),
            zero + ":2: prompt_tokens: expected a positive integer, found \"0\"");
  const std::string arrival =
      files.write("arrival.csv", std::string(kGenericHeader) + "0.5,1,10\n-1,1,10\n");
  EXPECT_EQ(generic_error(arrival),
            arrival + ":3: arrival_s: expected non-negative seconds, found \"-1\"");
  const std::string nan = files.write("nan.csv", std::string(kGenericHeader) + "nan,1,10\n");
  EXPECT_EQ(generic_error(nan),
            nan + ":2: arrival_s: expected non-negative seconds, found \"nan\"");
  const std::string huge = files.write("huge.csv", std::string(kGenericHeader) + "1e300,1,10\n");
  EXPECT_EQ(generic_error(huge),
            huge + ":2: arrival_s: too large: at most 9.2e+09 seconds (about 292 years) fit the "
                   "simulated clock, found \"1e300\"");
}

TEST(GenericCsvErrors, HeaderMustMatchExactly) {
  TempFiles files;
  const std::string path =
      files.write("bad.csv", "arrival,prompt_tokens,output_tokens\n0.5,1,10\n");
  EXPECT_EQ(generic_error(path),
            path +
                ":1: expected header \"arrival_s,prompt_tokens,output_tokens\", found "
                "\"arrival,prompt_tokens,output_tokens\"");
}

TEST(LengthDistributionErrors, TotalMustBeTheSum) {
  TempFiles files;
  const std::string path =
      files.write("bad.csv", std::string(kLengthHeader) + "10,5,15,2.0\n10,5,16,2.0\n");
  EXPECT_EQ(length_error(path),
            path +
                ":3: num_total_tokens: expected num_prefill_tokens + num_decode_tokens = 15, "
                "found 16");
}

TEST(LengthDistributionErrors, BadRatioAndZeroDecode) {
  TempFiles files;
  const std::string ratio = files.write("ratio.csv", std::string(kLengthHeader) + "10,5,15,two\n");
  EXPECT_EQ(length_error(ratio), ratio + ":2: pd_ratio: expected a number, found \"two\"");
  const std::string zero = files.write("zero.csv", std::string(kLengthHeader) + "10,0,10,inf\n");
  EXPECT_EQ(length_error(zero),
            zero + ":2: num_decode_tokens: expected a positive integer, found \"0\"");
}

}  // namespace
}  // namespace servesim::traces
