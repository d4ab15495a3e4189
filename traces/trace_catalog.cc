#include "traces/trace_catalog.h"

#include <stdexcept>

#include <fmt/format.h>

namespace servesim::traces {

const std::vector<TraceInfo>& shipped_traces() {
  static const std::vector<TraceInfo> kTraces = {
      {"azure_code_2023", "azure", "traces/data/azure_llm_2023/AzureLLMInferenceTrace_code.csv",
       "Azure coding assistant, 1 h on 2023-11-16, very bursty (inter-arrival CV 13)", "CC-BY-4.0",
       8819},
      {"azure_conv_2023", "azure", "traces/data/azure_llm_2023/AzureLLMInferenceTrace_conv.csv",
       "Azure chat service, 1 h on 2023-11-16, steady near-Poisson 5.5 req/s", "CC-BY-4.0", 19366},
      {"azure_code_2024_excerpt", "azure",
       "traces/data/azure_excerpts/AzureLLMInferenceTrace_code_1week.excerpt.csv",
       "Azure 2024 code week, first 5 + last 5 rows: format sample, not a workload", "CC-BY-4.0",
       10},
      {"azure_conv_2024_excerpt", "azure",
       "traces/data/azure_excerpts/AzureLLMInferenceTrace_conv_1week.excerpt.csv",
       "Azure 2024 conv week, first 5 + last 5 rows: format sample, not a workload", "CC-BY-4.0",
       10},
      {"azure_multimodal_2025_excerpt", "azure",
       "traces/data/azure_excerpts/AzureLMMInferenceTrace_multimodal.excerpt.csv",
       "Azure 2025 multimodal, first 5 + last 5 rows: format sample, not a workload", "CC-BY-4.0",
       10},
      {"mooncake_conversation", "mooncake", "traces/data/mooncake_fast25/conversation_trace.jsonl",
       "Mooncake (Kimi) chat, 59 min, long contexts, 512-token prefix hash ids", "Apache-2.0",
       12031},
      {"mooncake_synthetic", "mooncake", "traces/data/mooncake_fast25/synthetic_trace.jsonl",
       "Mooncake synthetic multi-turn, 17 min Poisson arrivals, heavy prefix sharing", "Apache-2.0",
       3993},
      {"burstgpt_1_head", "burstgpt", "traces/data/burstgpt/BurstGPT_1_head.csv",
       "BurstGPT release 1, first 400 rows over 10.4 h (17 failed rows skipped)", "CC-BY-4.0", 400},
      {"burstgpt_3_head", "burstgpt", "traces/data/burstgpt/BurstGPT_3_head.csv",
       "BurstGPT release 3, first 400 rows over 11.5 h (1 failed row skipped)", "CC-BY-4.0", 400},
      {"sharegpt_8k", "length_distribution",
       "traces/data/length_distributions/sharegpt_8k_filtered_stats_llama2_tokenizer.csv",
       "ShareGPT lengths (Llama-2 tokenizer, total <= 8K); ShareGPT terms apply to the source",
       "Apache-2.0", 30731},
      {"arxiv_summarization", "length_distribution",
       "traces/data/length_distributions/"
       "arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv",
       "arXiv summarization lengths (Llama-2 tokenizer, total <= 4K)", "MIT", 28257},
      {"bwb", "length_distribution",
       "traces/data/length_distributions/bwb_stats_llama2_tokenizer_filtered_v2.csv",
       "BWB document translation lengths (Llama-2 tokenizer, total <= 4K), decode-heavy",
       "Apache-2.0", 33768},
  };
  return kTraces;
}

const TraceInfo& find_shipped_trace(std::string_view name) {
  for (const TraceInfo& info : shipped_traces()) {
    if (info.name == name) {
      return info;
    }
  }
  std::string names;
  for (const TraceInfo& info : shipped_traces()) {
    names += names.empty() ? info.name : ", " + info.name;
  }
  throw std::invalid_argument(
      fmt::format("unknown trace \"{}\"; valid values are: {}", name, names));
}

}  // namespace servesim::traces
