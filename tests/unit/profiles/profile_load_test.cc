// Loader and writer of profile directories: the committed profiles, round trips and error goldens.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "profiles/profile_tables.h"
#include "core/error.h"
#include "tests/unit/profiles/profile_test_util.h"

namespace servesim::profiles {
namespace {

namespace fs = std::filesystem;
using testing::read_text;
using testing::sample_profile;
using testing::TempDir;

struct Committed {
  std::string dir;  // relative to the repository root
  std::string source;
  size_t gemm, prefill, decode, collective, moe, elementwise, memcpy, forward;
};

// Every profile directory under profiles/ with its row counts (profiles/README.md).
const std::vector<Committed>& committed() {
  static const std::vector<Committed> kDirs = {
      {"profiles/a100_80gb_sxm/aiconfigurator_vllm", "aiconfigurator", 9240, 5049, 5431, 573, 6360,
       0, 0, 0},
      {"profiles/a100_80gb_sxm/vidur", "vidur", 26346, 0, 0, 8937, 0, 54023, 0, 0},
      {"profiles/a100_80gb_sxm/vidur_pairwise_nvlink", "vidur", 0, 0, 0, 6480, 0, 0, 0, 0},
      {"profiles/a40/vidur", "vidur", 17871, 0, 0, 1986, 0, 32375, 0, 0},
      {"profiles/b200_sxm/aiconfigurator_vllm", "aiconfigurator", 114566, 20184, 16908, 573, 53036,
       0, 0, 0},
      {"profiles/h100_sxm/aiconfigurator_trtllm", "aiconfigurator", 101010, 31112, 22044, 0, 72081,
       0, 0, 0},
      {"profiles/h100_sxm/aiconfigurator_vllm", "aiconfigurator", 26040, 10098, 10870, 573, 34099,
       0, 0, 0},
      {"profiles/h100_sxm/servesim_harness_gpt-oss-120b", "servesim-profile", 0, 114, 107, 0, 0, 0,
       0, 0},
      {"profiles/h100_sxm/servesim_harness_gpt-oss-120b_tp2", "servesim-profile", 0, 114, 109, 0, 0,
       0, 0, 0},
      {"profiles/h100_sxm/servesim_harness_gpt-oss-120b_tp4", "servesim-profile", 0, 113, 110, 0, 0,
       0, 0, 0},
      {"profiles/h100_sxm/servesim_harness_gpt-oss-120b_tp8", "servesim-profile", 0, 114, 110, 0, 0,
       0, 0, 0},
      {"profiles/h100_sxm/servesim_harness_llada-8b-instruct", "servesim-profile", 150, 114, 95, 0,
       0, 0, 30, 0},
      {"profiles/h100_sxm/servesim_harness_llama-3.1-70b", "servesim-profile", 290, 0, 0, 0, 0, 0,
       0, 0},
      {"profiles/h100_sxm/servesim_harness_llama-3.1-70b_tp4", "servesim-profile", 290, 0, 0, 0, 0,
       0, 0, 0},
      {"profiles/h100_sxm/servesim_harness_llama-3.1-8b", "servesim-profile", 150, 114, 104, 0, 0,
       0, 30, 37},
      {"profiles/h100_sxm/servesim_harness_llama-3.1-8b_tp2", "servesim-profile", 150, 114, 107, 0,
       0, 0, 0, 0},
      {"profiles/h100_sxm/servesim_harness_llama-3.1-8b_tp4", "servesim-profile", 150, 114, 109, 0,
       0, 0, 0, 0},
      {"profiles/h100_sxm/servesim_harness_llama-3.1-8b_tp8", "servesim-profile", 150, 0, 110, 0, 0,
       0, 0, 0},
      {"profiles/h100_sxm/servesim_harness_qwen2.5-14b-instruct", "servesim-profile", 150, 114, 104,
       0, 0, 0, 30, 0},
      {"profiles/h100_sxm/servesim_harness_qwen3-32b", "servesim-profile", 150, 114, 104, 0, 0, 0,
       30, 23},
      {"profiles/h100_sxm/servesim_harness_qwen3-32b_tp2", "servesim-profile", 150, 114, 107, 0, 0,
       0, 0, 0},
      {"profiles/h100_sxm/servesim_harness_qwen3-32b_tp4", "servesim-profile", 150, 114, 109, 0, 0,
       0, 0, 0},
      {"profiles/h100_sxm/servesim_harness_qwen3-32b_tp8", "servesim-profile", 150, 114, 110, 0, 0,
       0, 0, 0},
      {"profiles/h100_sxm/vidur", "vidur", 17871, 0, 0, 4965, 0, 32375, 0, 0},
      {"profiles/h100_sxm/vidur_pairwise_nvlink", "vidur", 0, 0, 0, 3972, 0, 0, 0, 0},
      {"profiles/h200_sxm/aiconfigurator_trtllm", "aiconfigurator", 35280, 31115, 22044, 0, 63630,
       0, 0, 0},
      {"profiles/h200_sxm/aiconfigurator_vllm", "aiconfigurator", 101010, 10098, 10870, 573, 34094,
       0, 0, 0},
      {"profiles/h200_sxm/servesim_harness_gpt-oss-120b", "servesim-profile", 0, 114, 109, 0, 0, 0,
       0, 0},
      {"profiles/h200_sxm/servesim_harness_gpt-oss-120b_tp2", "servesim-profile", 0, 114, 110, 0, 0,
       0, 0, 0},
      {"profiles/h200_sxm/servesim_harness_gpt-oss-120b_tp4", "servesim-profile", 0, 114, 110, 0, 0,
       0, 0, 0},
      {"profiles/h200_sxm/servesim_harness_gpt-oss-120b_tp8", "servesim-profile", 0, 114, 110, 0, 0,
       0, 0, 0},
      {"profiles/h200_sxm/servesim_harness_llama-3.1-8b", "servesim-profile", 150, 114, 107, 0, 0,
       0, 30, 41},
      {"profiles/h200_sxm/servesim_harness_llama-3.1-8b_tp2", "servesim-profile", 150, 114, 109, 0,
       0, 0, 0, 0},
      {"profiles/h200_sxm/servesim_harness_llama-3.1-8b_tp4", "servesim-profile", 150, 114, 110, 0,
       0, 0, 0, 0},
      {"profiles/h200_sxm/servesim_harness_llama-3.1-8b_tp8", "servesim-profile", 150, 0, 110, 0, 0,
       0, 0, 0},
      {"profiles/h200_sxm/servesim_harness_qwen3-32b", "servesim-profile", 150, 114, 107, 0, 0, 0,
       30, 37},
      {"profiles/l40s/aiconfigurator_vllm", "aiconfigurator", 18480, 10098, 10867, 573, 12718, 0, 0,
       0},
  };
  return kDirs;
}

TEST(CommittedProfiles, EveryDirectoryLoadsWithItsRowCounts) {
  for (const Committed& c : committed()) {
    SCOPED_TRACE(c.dir);
    Profile p = load_profile(c.dir);
    EXPECT_EQ(p.meta.source, c.source);
    EXPECT_EQ(p.gemm.size(), c.gemm);
    EXPECT_EQ(p.attention_prefill.size(), c.prefill);
    EXPECT_EQ(p.attention_decode.size(), c.decode);
    EXPECT_EQ(p.collective.size(), c.collective);
    EXPECT_EQ(p.moe.size(), c.moe);
    EXPECT_EQ(p.elementwise.size(), c.elementwise);
    EXPECT_EQ(p.memcpy.size(), c.memcpy);
    EXPECT_EQ(p.forward.size(), c.forward);
    EXPECT_TRUE(p.unknown_dtype_rows.empty());
    // The directory follows the naming convention of its meta.json.
    EXPECT_EQ("profiles/" + profile_subdir(p), c.dir);
  }
}

TEST(CommittedProfiles, ListIsComplete) {
  std::vector<std::string> found;
  for (const std::string& gpu : profiled_gpus("profiles")) {
    for (const Profile& p : load_gpu_profiles("profiles", gpu)) {
      found.push_back(fs::path(p.dir).lexically_normal().string());
    }
  }
  std::vector<std::string> expected;
  for (const Committed& c : committed()) {
    expected.push_back(c.dir);
  }
  EXPECT_EQ(found, expected);
  EXPECT_EQ(profiled_gpus("profiles"), (std::vector<std::string>{"a100_80gb_sxm", "a40", "b200_sxm",
                                                                 "h100_sxm", "h200_sxm", "l40s"}));
}

// The repository is shipped to GPU machines: the profile data must stay small (TensorRT-LLM's own
// tables, 15 MB, took it from 28 MB to 42 MB).
TEST(CommittedProfiles, DataStaysUnderFortyFiveMegabytes) {
  uintmax_t bytes = 0;
  for (const Committed& c : committed()) {
    for (const auto& entry : fs::directory_iterator(c.dir)) {
      bytes += entry.file_size();
    }
  }
  EXPECT_LE(bytes, uintmax_t{45'000'000});
}

// Loading and writing back a committed profile reproduces its files byte for byte: every producer
// (harness, importers) writes through the same text functions.
TEST(CommittedProfiles, WriteAfterLoadIsByteIdentical) {
  TempDir tmp;
  for (const Committed& c : committed()) {
    SCOPED_TRACE(c.dir);
    Profile p = load_profile(c.dir);
    std::string out = tmp.path(fs::path(c.dir).filename().string());
    write_profile(p, out);
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(c.dir)) {
      names.push_back(entry.path().filename().string());
    }
    for (const std::string& name : names) {
      EXPECT_EQ(read_text(out + "/" + name), read_text(c.dir + "/" + name)) << name;
    }
    size_t written = 0;
    for ([[maybe_unused]] const auto& entry : fs::directory_iterator(out)) {
      ++written;
    }
    EXPECT_EQ(written, names.size());
  }
}

TEST(RoundTrip, WriteThenLoadGivesTheSameProfile) {
  TempDir tmp;
  Profile in = sample_profile();
  write_profile(in, tmp.path("p"));
  Profile out = load_profile(tmp.path("p"));
  EXPECT_EQ(out.dir, tmp.path("p"));
  EXPECT_EQ(to_csv(out.gemm), to_csv(in.gemm));
  EXPECT_EQ(to_csv(out.attention_prefill), to_csv(in.attention_prefill));
  EXPECT_EQ(to_csv(out.attention_decode), to_csv(in.attention_decode));
  EXPECT_EQ(to_csv(out.collective), to_csv(in.collective));
  EXPECT_EQ(to_csv(out.moe), to_csv(in.moe));
  EXPECT_EQ(to_csv(out.elementwise), to_csv(in.elementwise));
  EXPECT_EQ(to_csv(out.memcpy), to_csv(in.memcpy));
  EXPECT_EQ(to_csv(out.forward), to_csv(in.forward));
  ASSERT_EQ(out.attention_prefill.size(), 1u);
  EXPECT_EQ(out.attention_prefill[0].kv_dtype, "fp8_e4m3");
  EXPECT_FALSE(out.attention_prefill[0].causal);
  ASSERT_EQ(out.collective.size(), 1u);
  EXPECT_EQ(out.collective[0].nodes, 2);
  EXPECT_DOUBLE_EQ(out.gemm[0].latency_us, 12.346);
  EXPECT_EQ(out.meta.gpu, in.meta.gpu);
  EXPECT_EQ(out.meta.gpu_name, in.meta.gpu_name);
  EXPECT_EQ(out.meta.source, in.meta.source);
  EXPECT_EQ(out.meta.model, in.meta.model);
  EXPECT_EQ(out.meta.tp, 2);
  EXPECT_EQ(out.meta.l2_bytes, 52428800);
  EXPECT_EQ(out.meta.date, in.meta.date);
  EXPECT_EQ(out.meta.license, in.meta.license);
  EXPECT_EQ(out.meta.skipped, in.meta.skipped);
  EXPECT_EQ(out.meta.fields.at("method"), "median of 20");
  EXPECT_EQ(out.meta.fields.at("sm_count"), "132");
  EXPECT_EQ(out.meta.fields.at("upstream"), "none");
  EXPECT_EQ(out.meta.fields.at("version"), "1");
  // Writing the loaded profile again changes nothing.
  write_profile(out, tmp.path("q"));
  for (const char* f :
       {"meta.json", "gemm.csv", "attention_prefill.csv", "attention_decode.csv", "collective.csv",
        "moe.csv", "elementwise.csv", "memcpy.csv", "forward.csv"}) {
    EXPECT_EQ(read_text(tmp.path("q/") + f), read_text(tmp.path("p/") + f)) << f;
  }
}

TEST(RoundTrip, EmptyTablesHaveNoFileAndStaleFilesAreRemoved) {
  TempDir tmp;
  Profile p = sample_profile();
  write_profile(p, tmp.path("p"));
  EXPECT_TRUE(fs::exists(tmp.path("p/moe.csv")));
  p.moe.clear();
  write_profile(p, tmp.path("p"));
  EXPECT_FALSE(fs::exists(tmp.path("p/moe.csv")));
  Profile back = load_profile(tmp.path("p"));
  EXPECT_TRUE(back.moe.empty());
  EXPECT_EQ(back.gemm.size(), 2u);
}

TEST(WriteProfile, RejectsRowsThatWouldNotLoadBack) {
  TempDir tmp;
  Profile dup = sample_profile();
  dup.gemm.push_back(dup.gemm.front());
  EXPECT_THROW(write_profile(dup, tmp.path("a")), Error);
  Profile nan = sample_profile();
  nan.memcpy[0].latency_us = std::nan("");
  EXPECT_THROW(write_profile(nan, tmp.path("b")), Error);
  Profile dtype = sample_profile();
  dtype.gemm[0].dtype = "bfloat16";
  EXPECT_THROW(write_profile(dtype, tmp.path("c")), Error);
}

// A profile directory with sample_profile()'s meta.json and one gemm.csv of the given text.
std::string gemm_profile(const TempDir& tmp, const std::string& gemm_text) {
  Profile p;
  p.meta = sample_profile().meta;
  p.gemm = {{"bf16", 1, 2, 3, 4.0}};
  write_profile(p, tmp.path("p"));
  tmp.write("p/gemm.csv", gemm_text);
  return tmp.path("p");
}

// Runs load_profile(dir) and returns the InputError it throws.
InputError load_error(const std::string& dir) {
  try {
    load_profile(dir);
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << "load_profile(" << dir << ") did not throw InputError";
  return InputError("", 0, "");
}

TEST(LoadErrors, OtherFormatVersionIsRejected) {
  TempDir tmp;
  std::string dir = gemm_profile(tmp, "dtype,m,n,k,latency_us\nbf16,1,2,3,4.000\n");
  std::string meta = read_text(dir + "/meta.json");
  size_t at = meta.find("\"version\": 1");
  ASSERT_NE(at, std::string::npos);
  meta.replace(at, 12, "\"version\": 2");
  tmp.write("p/meta.json", meta);
  InputError e = load_error(dir);
  EXPECT_EQ(e.file(), dir + "/meta.json");
  EXPECT_EQ(e.line(), 0);
  EXPECT_STREQ(e.what(), (dir + "/meta.json: \"version\": expected 1, found 2 (this servesim reads "
                                "profile format version 1 only)")
                             .c_str());
}

TEST(LoadErrors, WrongFormatNameIsRejected) {
  TempDir tmp;
  std::string dir = gemm_profile(tmp, "dtype,m,n,k,latency_us\n");
  tmp.write("p/meta.json", R"({"format": "other", "version": 1})");
  EXPECT_EQ(load_error(dir).message(),
            "\"format\": expected \"servesim-profile\", found the string \"other\"");
}

TEST(LoadErrors, MissingMetaKeysAreAllNamed) {
  TempDir tmp;
  std::string dir = gemm_profile(tmp, "dtype,m,n,k,latency_us\n");
  tmp.write(
      "p/meta.json",
      R"({"format": "servesim-profile", "version": 1, "gpu": 7, "tables": {}, "skipped": {}})");
  std::string message = load_error(dir).message();
  EXPECT_NE(message.find("\"gpu\": expected a string, found the integer 7"), std::string::npos)
      << message;
  EXPECT_NE(message.find("\"tp\": expected an integer, found no such key"), std::string::npos)
      << message;
}

TEST(LoadErrors, BadNumberNamesFileLineColumnAndValue) {
  TempDir tmp;
  std::string dir = gemm_profile(tmp, "dtype,m,n,k,latency_us\nbf16,1,2,3,4.000\nbf16,2,2,3,abc\n");
  InputError e = load_error(dir);
  EXPECT_EQ(e.file(), dir + "/gemm.csv");
  EXPECT_EQ(e.line(), 3);
  EXPECT_STREQ(e.what(),
               (dir + "/gemm.csv:3: column latency_us: expected a non-negative decimal number, "
                      "found \"abc\"")
                   .c_str());
}

TEST(LoadErrors, BadIntegerAndFieldCount) {
  TempDir tmp;
  std::string dir = gemm_profile(tmp, "dtype,m,n,k,latency_us\nbf16,0,2,3,4.000\n");
  EXPECT_EQ(load_error(dir).message(), "column m: expected an integer >= 1, found \"0\"");
  tmp.write("p/gemm.csv", "dtype,m,n,k,latency_us\nbf16,1,2,3\n");
  InputError e = load_error(dir);
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.message(), "expected 5 comma-separated fields (as in the header), found 4");
  tmp.write("p/gemm.csv", "dtype,m,n,k,latency_us\n\nbf16,1,2,3,4.000\n");
  EXPECT_EQ(load_error(dir).message(), "expected 5 comma-separated fields, found an empty line");
}

TEST(LoadErrors, MissingColumnListsExpectedAndFound) {
  TempDir tmp;
  std::string dir = gemm_profile(tmp, "dtype,m,n,latency_us\nbf16,1,2,4.000\n");
  InputError e = load_error(dir);
  EXPECT_EQ(e.line(), 1);
  EXPECT_EQ(e.message(),
            "missing column \"k\": expected columns dtype,m,n,k,latency_us, found "
            "dtype,m,n,latency_us");
}

TEST(LoadErrors, DuplicateKeyPointsAtTheFirstLine) {
  TempDir tmp;
  std::string dir =
      gemm_profile(tmp, "dtype,m,n,k,latency_us\nbf16,1,2,3,4.000\nbf16,1,2,3,5.000\n");
  InputError e = load_error(dir);
  EXPECT_EQ(e.line(), 3);
  EXPECT_EQ(e.message(),
            "expected each key (every column but latency_us) at most once, found bf16,1,2,3 again "
            "(first on line 2)");
}

TEST(LoadErrors, DuplicateKeyFoundAmongThousandsOfRows) {
  // 3,000 distinct keys (the check's table grows past its first size), then line 7's key again.
  std::string csv = "dtype,m,n,k,latency_us\n";
  for (int i = 0; i < 3000; ++i)
    csv += fmt::format("bf16,{},{},{},1.0\n", 1 + i % 50, 1 + i / 50, 64);
  csv += "bf16,6,1,64,2.0\n";
  TempDir tmp;
  InputError e = load_error(gemm_profile(tmp, csv));
  EXPECT_EQ(e.line(), 3002);
  EXPECT_EQ(e.message(),
            "expected each key (every column but latency_us) at most once, found bf16,6,1,64 again "
            "(first on line 7)");
}

TEST(LoadErrors, ListedTableWithoutFile) {
  TempDir tmp;
  std::string dir = gemm_profile(tmp, "dtype,m,n,k,latency_us\n");
  fs::remove(dir + "/gemm.csv");
  InputError e = load_error(dir);
  EXPECT_EQ(e.file(), dir + "/meta.json");
  EXPECT_NE(e.message().find("\"tables\": expected the file \"gemm.csv\" of table gemm"),
            std::string::npos)
      << e.message();
}

TEST(LoadErrors, NotJson) {
  TempDir tmp;
  std::string dir = gemm_profile(tmp, "dtype,m,n,k,latency_us\n");
  tmp.write("p/meta.json", "{ not json");
  EXPECT_EQ(load_error(dir).message().rfind("expected a JSON object, found invalid JSON", 0), 0u);
}

TEST(LoadErrors, NumberBeyondADoubleIsInvalidJson) {
  TempDir tmp;
  std::string dir = gemm_profile(tmp, "dtype,m,n,k,latency_us\n");
  tmp.write("p/meta.json", R"({"format": "servesim-profile", "version": 1e999})");
  const std::string message = load_error(dir).message();
  EXPECT_EQ(message.rfind("expected a JSON object, found invalid JSON", 0), 0u) << message;
  EXPECT_NE(message.find("1e999"), std::string::npos) << message;
}

TEST(Load, UnknownDtypeRowsAreSkippedRowByRow) {
  TempDir tmp;
  std::string dir = gemm_profile(
      tmp,
      "dtype,m,n,k,latency_us\nbf16,1,2,3,4.000\nfp4_e2m1,1,2,3,1.000\nbfloat16,1,2,3,x\n"
      "fp8_e4m3,1,2,3,2.500\n");
  Profile p = load_profile(dir);
  ASSERT_EQ(p.gemm.size(), 2u);
  EXPECT_EQ(p.gemm[0].dtype, "bf16");
  EXPECT_EQ(p.gemm[1].dtype, "fp8_e4m3");
  EXPECT_DOUBLE_EQ(p.gemm[1].latency_us, 2.5);
  EXPECT_EQ(p.unknown_dtype_rows.at("gemm"), 2);
}

TEST(Load, ColumnsAreFoundByNameAndOptionalColumnsDefault) {
  TempDir tmp;
  Profile p;
  p.meta = sample_profile().meta;
  p.attention_prefill = sample_profile().attention_prefill;
  p.collective = sample_profile().collective;
  write_profile(p, tmp.path("p"));
  // Reordered columns, an unknown extra column, no kv_dtype / nodes, \r\n line ends, more digits.
  tmp.write("p/attention_prefill.csv",
            "causal,latency_us,dtype,batch,q_tokens,prefix_tokens,num_heads,num_kv_heads,"
            "head_dim,note\r\n1,7.1234,bf16,1,128,0,32,8,128,x\r\n");
  tmp.write("p/collective.csv",
            "op,dtype,num_gpus,message_bytes,latency_us\nall_gather,bf16,8,4096,1.5e1\n");
  Profile back = load_profile(tmp.path("p"));
  ASSERT_EQ(back.attention_prefill.size(), 1u);
  const AttentionPrefillRow& r = back.attention_prefill[0];
  EXPECT_EQ(r.kv_dtype, "bf16");
  EXPECT_TRUE(r.causal);
  EXPECT_EQ(r.q_tokens, 128);
  EXPECT_DOUBLE_EQ(r.latency_us, 7.1234);
  ASSERT_EQ(back.collective.size(), 1u);
  EXPECT_EQ(back.collective[0].nodes, 1);
  EXPECT_DOUBLE_EQ(back.collective[0].latency_us, 15.0);
}

TEST(Load, UnknownTablesAndMetaKeysAreIgnored) {
  TempDir tmp;
  Profile p;
  p.meta = sample_profile().meta;
  p.memcpy = sample_profile().memcpy;
  write_profile(p, tmp.path("p"));
  std::string meta = read_text(tmp.path("p/meta.json"));
  size_t at = meta.find("\"tables\": {");
  ASSERT_NE(at, std::string::npos);
  meta.insert(at + 11, "\"future_table\": \"future.csv\", ");
  meta.insert(1, "\"extra_number\": 2.5, \"extra_object\": {\"a\": 1}, ");
  tmp.write("p/meta.json", meta);
  Profile back = load_profile(tmp.path("p"));
  EXPECT_EQ(back.memcpy.size(), 1u);
  EXPECT_EQ(back.meta.fields.at("extra_number"), "2.5");
  EXPECT_EQ(back.meta.fields.count("extra_object"), 0u);
}

TEST(GpuProfiles, MissingRootsGiveEmptyResults) {
  EXPECT_TRUE(load_gpu_profiles("profiles", "no_such_gpu").empty());
  EXPECT_TRUE(profiled_gpus("no/such/root").empty());
}

}  // namespace
}  // namespace servesim::profiles
