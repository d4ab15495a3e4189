// The goodput regression gate (app/regress.h): the band around the baseline, --update and --json.
#include "app/regress.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "scenarios/json_reader.h"
#include "core/error.h"

namespace servesim::app {
namespace {

namespace fs = std::filesystem;

// The repository's data (scenarios, catalogs).
const scenarios::DataRoot kRoot = scenarios::DataRoot::discover();

// Writes a baseline of the quickstart scenario with `entries` (JSON objects without "scenario";
// "@S" stands for the quickstart's "scenario") into a fresh folder of this process; returns its
// path. ctest runs the tests of this file as parallel processes.
std::string baseline_with(const std::string& name, const std::string& entries) {
  const fs::path dir = fs::temp_directory_path() /
                       ("servesim_regress_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string scenario = (fs::path(kRoot.root) / "scenarios" / "quickstart.json").string();
  std::string text = entries;
  for (size_t at = text.find("@S"); at != std::string::npos; at = text.find("@S")) {
    text.replace(at, 2, "\"scenario\": \"" + scenario + "\"");
  }
  const fs::path path = dir / "baseline.json";
  std::ofstream(path) << "{\"entries\": [" << text << "]}";
  return path.string();
}

// The quickstart's goodput, measured once.
double quickstart_goodput() {
  static const double measured = [] {
    const std::string path = baseline_with("measure", R"({"name": "q", @S})");
    std::ostringstream out;
    run_regression(path, kRoot, {.update = true, .json = true}, out);
    return scenarios::Json::parse(out.str()).at("entries").at(0).at("measured").get<double>();
  }();
  return measured;
}

TEST(Regress, FailsOutsideTheBandOnEitherSide) {
  const double g = quickstart_goodput();
  ASSERT_GT(g, 0);
  const std::string path = baseline_with(
      "band", fmt::format(R"({{"name": "inside", @S, "goodput_tokens_per_s": {}, "tolerance": 0.02}},
                            {{"name": "drop", @S, "goodput_tokens_per_s": {}, "tolerance": 0.02}},
                            {{"name": "jump", @S, "goodput_tokens_per_s": {}, "tolerance": 0.02}})",
                          g, g * 1.5, g / 1.5));
  std::ostringstream out;
  EXPECT_EQ(run_regression(path, kRoot, {}, out), 2) << out.str();
  const std::string text = out.str();
  EXPECT_NE(text.find("FAIL (below baseline - tolerance)"), std::string::npos) << text;
  EXPECT_NE(text.find("FAIL (above baseline + tolerance: --update if intended)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("1 passed, 2 failed"), std::string::npos) << text;
}

TEST(Regress, JsonHasEveryEntryAndTheCounts) {
  const double g = quickstart_goodput();
  const std::string path = baseline_with(
      "json", fmt::format(R"({{"name": "inside", @S, "goodput_tokens_per_s": {}}},
                            {{"name": "drop", @S, "goodput_tokens_per_s": {}}})",
                          g, g * 2));
  std::ostringstream out;
  EXPECT_EQ(run_regression(path, kRoot, {.json = true}, out), 1);
  const scenarios::Json doc = scenarios::Json::parse(out.str());
  ASSERT_EQ(doc.at("entries").size(), 2u);
  EXPECT_EQ(doc["entries"][0]["verdict"], "ok");
  EXPECT_DOUBLE_EQ(doc["entries"][0]["tolerance"].get<double>(), 0.05);  // the default
  EXPECT_NEAR(doc["entries"][1]["change"].get<double>(), -0.5, 1e-9);
  EXPECT_EQ(doc["passed"], 1);
  EXPECT_EQ(doc["failed"], 1);
  EXPECT_EQ(doc["updated"], false);
}

TEST(Regress, UpdateFillsInANewEntryAndReplacesTheFileWhole) {
  const std::string path = baseline_with("update", R"({"name": "new", @S, "tolerance": 0.01})");
  // Without --update the missing value is an error that says how to get it.
  std::ostringstream out;
  try {
    run_regression(path, kRoot, {}, out);
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("entries[0].goodput_tokens_per_s: is required "
                                         "(servesim regress --update measures it"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(run_regression(path, kRoot, {.update = true}, out), 0);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  const scenarios::Json doc = scenarios::read_json_file(path, "baseline");
  EXPECT_NEAR(doc["entries"][0]["goodput_tokens_per_s"].get<double>(), quickstart_goodput(), 0.06);
  EXPECT_DOUBLE_EQ(doc["entries"][0]["tolerance"].get<double>(), 0.01);
  // The updated file passes.
  std::ostringstream again;
  EXPECT_EQ(run_regression(path, kRoot, {}, again), 0) << again.str();
  fs::remove_all(fs::path(path).parent_path());
}

}  // namespace
}  // namespace servesim::app
