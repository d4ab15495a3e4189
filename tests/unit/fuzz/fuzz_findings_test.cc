// One test per fuzzing finding (README.md, "Fuzzing"): the input that crashed a target of fuzz/,
// fed to the same entry point, now ends in ConfigError or InputError (exit code 2).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "scenarios/scenario.h"
#include "sim/core/error.h"

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

}  // namespace
}  // namespace servesim
