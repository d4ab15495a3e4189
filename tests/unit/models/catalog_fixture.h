// A test fixture holding the shipped GPU and model catalogs, loaded once per test suite from the
// repository root (where the tests run).
#pragma once

#include <gtest/gtest.h>

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

  inline static GpuCatalog* gpus_ = nullptr;
  inline static ModelCatalog* models_ = nullptr;
};

}  // namespace servesim::models
