// One test per fuzzing finding (docs/fuzzing.md): the input that crashed a target of fuzz/,
// fed to the same entry point, now ends in ConfigError or InputError (exit code 2).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "profiles/import_aiconfigurator.h"
#include "profiles/import_vidur.h"
#include "scenarios/scenario.h"
#include "core/error.h"

namespace servesim {
namespace {

const scenarios::DataRoot& root() {
  static const scenarios::DataRoot r = scenarios::DataRoot::discover();
  return r;
}

// fuzz_scenario: a `--set` value that is not UTF-8 was kept as a JSON string, and the first
// message quoting it (describe_json) threw nlohmann's type_error.316 out of load_scenario().
TEST(FuzzFindings, OverrideThatIsNotUtf8IsAConfigError) {
  const std::string path = root().root + "/scenarios/quickstart.json";
  for (const std::string& o : {std::string("workload.rate=na\xff\xfe"), std::string("name=\x80"),
                               std::string("cluster.\xc3=1")}) {
    try {
      scenarios::load_scenario(path, {o}, root());
      FAIL() << "no error for " << o;
    } catch (const ConfigError& e) {
      ASSERT_EQ(e.issues().size(), 1u);
      EXPECT_EQ(e.issues()[0].message, "expected UTF-8 text");
    }
  }
  scenarios::Json doc = scenarios::Json::object();
  EXPECT_THROW(scenarios::apply_overrides(doc, {"seed=\xff"}), ConfigError);
}

// fuzz_import_aiconfigurator: a collective's message_size times its element size overflowed
// int64 (4772475060640983728 half elements: UBSan signed-integer-overflow). Now the row is an
// InputError naming the column and the 1 TiB bound, in nccl_perf.csv and custom_allreduce_perf.csv.
TEST(FuzzFindings, CollectiveMessageSizeThatOverflowsIsAnInputError) {
  namespace fs = std::filesystem;
  const fs::path system =
      fs::temp_directory_path() / ("servesim_fuzz_finding_" + std::to_string(::getpid())) / "h100_sxm";
  struct Table {
    std::string dir, file, text;
  };
  for (const Table& t :
       {Table{"nccl_2.0.0", "nccl_perf.csv",
              "framework,version,device,op_name,kernel_source,nccl_dtype,num_gpus,message_size,"
              "latency\nTRTLLM,2.29.2,NVIDIA H200,all_gather,NCCL,half,2,4772475060640983728,"
              "0.00605\n"},
        Table{"vllm_0.1.0", "custom_allreduce_perf.csv",
              "framework,version,device,allreduce_dtype,num_gpus,message_size,latency,backend\n"
              "VLLM,0.1.0,NVIDIA H100,float16,2,4772475060640983728,0.01,vllm_graph\n"}}) {
    SCOPED_TRACE(t.file);
    fs::remove_all(system);
    fs::create_directories(system / "vllm_0.1.0");  // what makes it a system directory
    fs::create_directories(system / t.dir);
    std::ofstream(system / t.dir / t.file) << t.text;
    try {
      profiles::import_aiconfigurator(system.string());
      FAIL() << "no error";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(t.file), std::string::npos) << what;
      EXPECT_NE(what.find("message_size: expected at most"), std::string::npos) << what;
      EXPECT_NE(what.find("(1 TiB)"), std::string::npos) << what;
    }
  }
  fs::remove_all(system.parent_path());
}

// The same kind of overflow in Vidur's model shapes: (heads + 2 x KV heads) x head_dim and the
// gated MLP's 2 x intermediate; dimensions are now bounded before those products.
TEST(FuzzFindings, VidurModelDimensionsThatWouldOverflowAreAnInputError) {
  profiles::VidurModelShape shape;
  shape.num_heads = 1;
  shape.num_kv_heads = int64_t{1} << 62;
  shape.hidden = 1;
  shape.intermediate = int64_t{1} << 62;
  shape.gated_mlp = true;
  shape.tp = 1;
  try {
    profiles::vidur_gemm_shapes(shape, "mlp.csv", 2);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("dimensions of at most 16777216"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace servesim
