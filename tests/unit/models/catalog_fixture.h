// A test fixture holding the shipped GPU and model catalogs, loaded once per test suite from the
// repository root (where the tests run).
#pragma once

#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/catalog/hardware.h"

namespace servesim::models {

class CatalogFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    gpus_ = new GpuCatalog(GpuCatalog::load(kDefaultGpuCatalogPath));
    models_ = new ModelCatalog(ModelCatalog::load(kDefaultModelCatalogDir));
  }
  static void TearDownTestSuite() {
    delete gpus_;
    delete models_;
    gpus_ = nullptr;
    models_ = nullptr;
  }

  // A shipped catalog file as written, for the fields the loader does not keep.
  static nlohmann::json catalog_doc(const std::string& key) {
    std::ifstream in(std::string(kDefaultModelCatalogDir) + "/" + key + ".json");
    return nlohmann::json::parse(in);
  }

  inline static GpuCatalog* gpus_ = nullptr;
  inline static ModelCatalog* models_ = nullptr;
};

}  // namespace servesim::models
