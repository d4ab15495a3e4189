// Each loader on each shipped file, checked against figures computed independently from the files
// (row counts, spans and token totals; see traces/data/README.md).
#include <cmath>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/time.h"
#include "traces/loaders.h"
#include "trace_test_util.h"

namespace servesim::traces {
namespace {

using testing::is_finalised;
using testing::TempFiles;
using testing::totals;

constexpr int64_t kNs = 1'000'000'000;

int64_t last_arrival_ns(const Workload& w) { return to_ns(w.requests.back().arrival); }

TEST(LoadAzure, Conv2023) {
  const Workload w = load_azure("traces/data/azure_llm_2023/AzureLLMInferenceTrace_conv.csv");
  ASSERT_EQ(w.requests.size(), 19366u);
  EXPECT_EQ(w.skipped_rows, 0);
  EXPECT_TRUE(is_finalised(w));
  EXPECT_EQ(to_ns(w.requests.front().arrival), 0);
  // 18:15:46.6805900 to 19:14:08.4025270: 58.4 min.
  EXPECT_EQ(last_arrival_ns(w), 3501 * kNs + 721937000);
  // 18:15:50.9951690 - 18:15:46.6805900.
  EXPECT_EQ(to_ns(w.requests[1].arrival), 4 * kNs + 314579000);
  EXPECT_EQ(w.requests[0].prompt_tokens, 374);
  EXPECT_EQ(w.requests[0].output_tokens, 44);
  EXPECT_EQ(w.requests.back().prompt_tokens, 197);
  EXPECT_EQ(w.requests.back().output_tokens, 183);
  EXPECT_EQ(totals(w).prompt_tokens, 22361870);
  EXPECT_EQ(totals(w).output_tokens, 4088665);
  EXPECT_EQ(totals(w).hash_ids, 0);
  // README: 5.53 req/s on average.
  EXPECT_NEAR(19365 / to_seconds(w.requests.back().arrival), 5.53, 0.01);
  EXPECT_EQ(w.description, "azure:traces/data/azure_llm_2023/AzureLLMInferenceTrace_conv.csv");
}

TEST(LoadAzure, Code2023) {
  const Workload w = load_azure("traces/data/azure_llm_2023/AzureLLMInferenceTrace_code.csv");
  ASSERT_EQ(w.requests.size(), 8819u);
  EXPECT_EQ(w.skipped_rows, 0);
  EXPECT_TRUE(is_finalised(w));
  // 18:17:03.9799600 to 19:14:19.9280160: 57.3 min.
  EXPECT_EQ(last_arrival_ns(w), 3435 * kNs + 948056000);
  EXPECT_EQ(totals(w).prompt_tokens, 18059974);
  EXPECT_EQ(totals(w).output_tokens, 245896);
  EXPECT_NEAR(static_cast<double>(totals(w).prompt_tokens) / 8819, 2048, 0.5);
}

TEST(LoadAzure, Code2024Excerpt) {
  const Workload w =
      load_azure("traces/data/azure_excerpts/AzureLLMInferenceTrace_code_1week.excerpt.csv");
  ASSERT_EQ(w.requests.size(), 10u);
  EXPECT_TRUE(is_finalised(w));
  // 2024-05-10 00:00:00.017335 - 00:00:00.009930.
  EXPECT_EQ(to_ns(w.requests[1].arrival), 7405000);
  // 2024-05-10 00:00:00.009930 to 2024-05-16 23:59:59.929501.
  EXPECT_EQ(last_arrival_ns(w), 604799 * kNs + 919571000);
  EXPECT_EQ(w.requests[0].prompt_tokens, 2162);
  EXPECT_EQ(w.requests[0].output_tokens, 5);
  EXPECT_EQ(totals(w).prompt_tokens, 24016);
  EXPECT_EQ(totals(w).output_tokens, 180);
}

TEST(LoadAzure, Conv2024Excerpt) {
  const Workload w =
      load_azure("traces/data/azure_excerpts/AzureLLMInferenceTrace_conv_1week.excerpt.csv");
  ASSERT_EQ(w.requests.size(), 10u);
  EXPECT_EQ(last_arrival_ns(w), 604799 * kNs + 994297000);
  EXPECT_EQ(totals(w).prompt_tokens, 12767);
  EXPECT_EQ(totals(w).output_tokens, 856);
}

TEST(LoadAzure, Multimodal2025Excerpt) {
  const Workload w =
      load_azure("traces/data/azure_excerpts/AzureLMMInferenceTrace_multimodal.excerpt.csv");
  ASSERT_EQ(w.requests.size(), 10u);
  EXPECT_TRUE(is_finalised(w));
  // 2024-10-15T12:00:05.819Z - 2024-10-15T12:00:00.269Z.
  EXPECT_EQ(to_ns(w.requests[1].arrival), 5 * kNs + 550000000);
  // Seven days less 0.305 s.
  EXPECT_EQ(last_arrival_ns(w), 604799 * kNs + 695000000);
  // ContextTokens and GeneratedTokens, not NumImages.
  EXPECT_EQ(w.requests[0].prompt_tokens, 770);
  EXPECT_EQ(w.requests[0].output_tokens, 491);
  EXPECT_EQ(w.requests[5].prompt_tokens, 4564);
  EXPECT_EQ(totals(w).prompt_tokens, 12859);
  EXPECT_EQ(totals(w).output_tokens, 1395);
}

TEST(LoadAzure, Timestamps2024WithoutFractionMixWithFractional) {
  TempFiles files;
  const std::string path = files.write("mixed.csv",
                                       "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                       "2024-05-12 00:00:00+00:00,10,1\n"
                                       "2024-05-12 00:00:00.500000+00:00,20,2\n"
                                       "2024-05-12 00:00:01+00:00,30,3\n");
  const Workload w = load_azure(path);
  ASSERT_EQ(w.requests.size(), 3u);
  EXPECT_EQ(to_ns(w.requests[1].arrival), kNs / 2);
  EXPECT_EQ(to_ns(w.requests[2].arrival), kNs);
}

TEST(LoadAzure, TiesKeepFileOrderAndCrlfBomAndBlankLinesAreAccepted) {
  TempFiles files;
  const std::string path = files.write("ties.csv",
                                       "\xEF\xBB\xBFTIMESTAMP,ContextTokens,GeneratedTokens\r\n"
                                       "2023-11-16 18:00:00.0000000,1,1\r\n"
                                       "2023-11-16 18:00:00.0000000,2,2\r\n"
                                       "\r\n"
                                       "2023-11-16 18:00:00.0000000,3,3\r\n"
                                       "2023-11-16 18:00:00.2500000,4,4");
  const Workload w = load_azure(path);
  ASSERT_EQ(w.requests.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(w.requests[i].id, i);
    EXPECT_EQ(w.requests[i].prompt_tokens, i + 1);
  }
  EXPECT_EQ(to_ns(w.requests[2].arrival), 0);
  EXPECT_EQ(to_ns(w.requests[3].arrival), kNs / 4);
}

TEST(LoadAzure, ZeroTokenRowsAreSkippedAndCounted) {
  TempFiles files;
  const std::string path = files.write("zero.csv",
                                       "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                       "2024-05-12 00:00:00+00:00,10,0\n"
                                       "2024-05-12 00:00:02+00:00,20,2\n"
                                       "2024-05-12 00:00:03+00:00,0,3\n"
                                       "2024-05-12 00:00:04+00:00,40,4\n");
  const Workload w = load_azure(path);
  ASSERT_EQ(w.requests.size(), 2u);
  EXPECT_EQ(w.skipped_rows, 2);
  // Normalised to the first kept request, not the first row.
  EXPECT_EQ(to_ns(w.requests[0].arrival), 0);
  EXPECT_EQ(to_ns(w.requests[1].arrival), 2 * kNs);
}

TEST(LoadBurstGpt, Release1SixColumnsSkipsFailedRows) {
  const Workload w = load_burstgpt("traces/data/burstgpt/BurstGPT_1_head.csv");
  EXPECT_EQ(w.requests.size(), 383u);
  EXPECT_EQ(w.skipped_rows, 17);
  EXPECT_TRUE(is_finalised(w));
  EXPECT_EQ(to_ns(w.requests.front().arrival), 0);
  // Timestamps 5 s to 37274 s.
  EXPECT_EQ(last_arrival_ns(w), 37269 * kNs);
  EXPECT_EQ(to_ns(w.requests[1].arrival), 40 * kNs);
  EXPECT_EQ(w.requests[0].prompt_tokens, 472);
  EXPECT_EQ(w.requests[0].output_tokens, 18);
  EXPECT_EQ(totals(w).prompt_tokens, 208189);
  EXPECT_EQ(totals(w).output_tokens, 110612);
  for (const RequestSpec& r : w.requests) {
    ASSERT_GT(r.prompt_tokens, 0);
    ASSERT_GT(r.output_tokens, 0);
  }
}

TEST(LoadBurstGpt, Release3EightColumnsFloatTimestamps) {
  const Workload w = load_burstgpt("traces/data/burstgpt/BurstGPT_3_head.csv");
  EXPECT_EQ(w.requests.size(), 399u);
  EXPECT_EQ(w.skipped_rows, 1);
  EXPECT_TRUE(is_finalised(w));
  // 19440110.0 s to 19481563.0 s.
  EXPECT_EQ(last_arrival_ns(w), 41453 * kNs);
  EXPECT_EQ(to_ns(w.requests[1].arrival), 51 * kNs);
  EXPECT_EQ(w.requests[0].prompt_tokens, 906);
  EXPECT_EQ(w.requests[0].output_tokens, 446);
  EXPECT_EQ(totals(w).prompt_tokens, 246941);
  EXPECT_EQ(totals(w).output_tokens, 68350);
}

TEST(LoadBurstGpt, FractionalSecondsAreExact) {
  TempFiles files;
  const std::string path = files.write(
      "frac.csv",
      "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,"
      "Log Type\n"
      "100.25,abc,3,ChatGPT,10,5,15,Conversation log\n"
      "100.300000001,,2.5,GPT-4,11,6,17,API log\n");
  const Workload w = load_burstgpt(path);
  ASSERT_EQ(w.requests.size(), 2u);
  EXPECT_EQ(to_ns(w.requests[1].arrival), 50000001);
}

TEST(LoadMooncake, Conversation) {
  const Workload w = load_mooncake("traces/data/mooncake_fast25/conversation_trace.jsonl");
  ASSERT_EQ(w.requests.size(), 12031u);
  EXPECT_EQ(w.skipped_rows, 0);
  EXPECT_TRUE(is_finalised(w));
  EXPECT_EQ(last_arrival_ns(w), 3536999 * int64_t{1'000'000});
  const testing::Totals t = totals(w);
  EXPECT_EQ(t.prompt_tokens, 144793823);
  EXPECT_EQ(t.output_tokens, 4122048);
  EXPECT_EQ(t.hash_ids, 288500);
  std::set<int64_t> distinct_arrivals;
  for (const RequestSpec& r : w.requests) {
    ASSERT_EQ(static_cast<int64_t>(r.prefix_hash_ids.size()), (r.prompt_tokens + 511) / 512)
        << "request " << r.id;
    // Every request starts with the shared system-prompt block.
    ASSERT_EQ(r.prefix_hash_ids.front(), 0u) << "request " << r.id;
    distinct_arrivals.insert(to_ns(r.arrival));
  }
  // Quantised timestamps: groups of requests share an arrival instant.
  EXPECT_EQ(distinct_arrivals.size(), 1180u);
  EXPECT_EQ(w.requests[0].prompt_tokens, 6758);
  EXPECT_EQ(w.requests[0].output_tokens, 500);
  EXPECT_EQ(w.requests[1].prefix_hash_ids,
            (std::vector<uint64_t>{0, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27}));
}

TEST(LoadMooncake, Synthetic) {
  const Workload w = load_mooncake("traces/data/mooncake_fast25/synthetic_trace.jsonl");
  ASSERT_EQ(w.requests.size(), 3993u);
  EXPECT_TRUE(is_finalised(w));
  EXPECT_EQ(last_arrival_ns(w), 1022025 * int64_t{1'000'000});
  const testing::Totals t = totals(w);
  EXPECT_EQ(t.prompt_tokens, 61194628);
  EXPECT_EQ(t.output_tokens, 595432);
  EXPECT_EQ(t.hash_ids, 121877);
  EXPECT_EQ(w.requests[1].prompt_tokens, 36640);
  EXPECT_EQ(w.requests[1].prefix_hash_ids.front(), 79u);
}

TEST(LoadMooncake, HashIdsOptionalZeroRowsSkippedExtraKeysIgnored) {
  TempFiles files;
  const std::string path =
      files.write("small.jsonl",
                  "{\"timestamp\": 1000, \"input_length\": 600, \"output_length\": 5, "
                  "\"hash_ids\": [7, 8]}\n"
                  "{\"timestamp\": 1500.5, \"input_length\": 10, \"output_length\": 2, "
                  "\"session\": \"x\"}\n"
                  "{\"timestamp\": 2000, \"input_length\": 10, \"output_length\": 0}\n");
  const Workload w = load_mooncake(path);
  ASSERT_EQ(w.requests.size(), 2u);
  EXPECT_EQ(w.skipped_rows, 1);
  EXPECT_EQ(w.requests[0].prefix_hash_ids, (std::vector<uint64_t>{7, 8}));
  EXPECT_TRUE(w.requests[1].prefix_hash_ids.empty());
  EXPECT_EQ(to_ns(w.requests[1].arrival), 500500000);
}

TEST(LoadMooncake, EveryRowShapeGivesTheSameValues) {
  // The first 500 rows as shipped, and the same rows re-spelt: keys reordered, extra whitespace,
  // and an unknown key (which the loader ignores), so both ways of reading a row are exercised.
  std::ifstream in("traces/data/mooncake_fast25/conversation_trace.jsonl");
  std::string shipped;
  std::string respelt;
  std::string line;
  for (int i = 0; i < 500 && std::getline(in, line); ++i) {
    shipped += line + "\n";
    const size_t hash_ids = line.find("\"hash_ids\"");
    ASSERT_NE(hash_ids, std::string::npos);
    respelt += "  { " + line.substr(hash_ids, line.size() - 1 - hash_ids) +
               " , \"note\": {\"a\": 1}, " + line.substr(1, hash_ids - 3) + "}\t\n";
  }
  TempFiles files;
  const Workload a = load_mooncake(files.write("shipped.jsonl", shipped));
  const Workload b = load_mooncake(files.write("respelt.jsonl", respelt));
  ASSERT_EQ(a.requests.size(), 500u);
  ASSERT_EQ(b.requests.size(), 500u);
  for (size_t i = 0; i < a.requests.size(); ++i) {
    ASSERT_EQ(a.requests[i].arrival, b.requests[i].arrival) << i;
    ASSERT_EQ(a.requests[i].prompt_tokens, b.requests[i].prompt_tokens) << i;
    ASSERT_EQ(a.requests[i].output_tokens, b.requests[i].output_tokens) << i;
    ASSERT_EQ(a.requests[i].prefix_hash_ids, b.requests[i].prefix_hash_ids) << i;
  }
  EXPECT_EQ(a.requests[499].prefix_hash_ids.size(), (a.requests[499].prompt_tokens + 511) / 512);
}

TEST(LoadGenericCsv, ExactDecimalSecondsAndNormalisation) {
  TempFiles files;
  const std::string path = files.write("generic.csv",
                                       "arrival_s,prompt_tokens,output_tokens\n"
                                       "10,100,10\n"
                                       "10.1,200,20\n"
                                       "10.30000000000000004,300,30\n"
                                       "10.0000000015,400,40\n"
                                       "1.2e1,500,50\n");
  // Not sorted: 10.0000000015 < 10.3. Drop that row and check the rest.
  const std::string sorted = files.write("sorted.csv",
                                         "arrival_s,prompt_tokens,output_tokens\n"
                                         "10,100,10\n"
                                         "10.0000000015,150,15\n"
                                         "10.1,200,20\n"
                                         "10.30000000000000004,300,30\n"
                                         "1.2e1,500,50\n");
  EXPECT_THROW(load_generic_csv(path), InputError);
  const Workload w = load_generic_csv(sorted);
  ASSERT_EQ(w.requests.size(), 5u);
  EXPECT_EQ(to_ns(w.requests[0].arrival), 0);
  EXPECT_EQ(to_ns(w.requests[1].arrival), 2);  // 1.5 ns rounds half up
  EXPECT_EQ(to_ns(w.requests[2].arrival), 100000000);
  EXPECT_EQ(to_ns(w.requests[3].arrival), 300000000);
  EXPECT_EQ(to_ns(w.requests[4].arrival), 2 * kNs);
  EXPECT_EQ(w.requests[4].prompt_tokens, 500);
  EXPECT_EQ(w.requests[4].output_tokens, 50);
}

struct LengthFile {
  const char* path;
  size_t rows;
  int64_t prompt_total;
  int64_t output_total;
  LengthSample first;
};

TEST(LoadLengthDistribution, ShippedFiles) {
  const LengthFile files[] = {
      {"traces/data/length_distributions/sharegpt_8k_filtered_stats_llama2_tokenizer.csv",
       30731,
       71911571,
       13481988,
       {74, 918}},
      {"traces/data/length_distributions/"
       "arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv",
       28257,
       73131321,
       8234948,
       {3772, 54}},
      {"traces/data/length_distributions/bwb_stats_llama2_tokenizer_filtered_v2.csv",
       33768,
       36036681,
       54461924,
       {1047, 1368}},
  };
  for (const LengthFile& file : files) {
    SCOPED_TRACE(file.path);
    const std::vector<LengthSample> samples = load_length_distribution(file.path);
    ASSERT_EQ(samples.size(), file.rows);
    int64_t prompt = 0;
    int64_t output = 0;
    for (const LengthSample& s : samples) {
      prompt += s.prompt_tokens;
      output += s.output_tokens;
    }
    EXPECT_EQ(prompt, file.prompt_total);
    EXPECT_EQ(output, file.output_total);
    EXPECT_EQ(samples.front().prompt_tokens, file.first.prompt_tokens);
    EXPECT_EQ(samples.front().output_tokens, file.first.output_tokens);
  }
}

TEST(LoadTrace, DispatchesByFormatName) {
  EXPECT_EQ(trace_formats(),
            (std::vector<std::string>{"azure", "burstgpt", "mooncake", "generic_csv"}));
  EXPECT_EQ(load_trace("burstgpt", "traces/data/burstgpt/BurstGPT_1_head.csv").requests.size(),
            383u);
  EXPECT_EQ(load_trace("azure",
                       "traces/data/azure_excerpts/"
                       "AzureLMMInferenceTrace_multimodal.excerpt.csv")
                .requests.size(),
            10u);
}

TEST(LoadTrace, UnknownFormatListsValidOnes) {
  try {
    load_trace("csv", "whatever.csv");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "unknown trace format \"csv\"; valid values are: azure, burstgpt, mooncake, "
                 "generic_csv");
  }
}

}  // namespace
}  // namespace servesim::traces
