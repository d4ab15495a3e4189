#include "core/registry.h"

#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace servesim {
namespace {

TEST(Registry, AddAndGet) {
  Registry<int> reg("widget");
  reg.add("beta", 2);
  reg.add("alpha", 1);
  EXPECT_TRUE(reg.contains("alpha"));
  EXPECT_FALSE(reg.contains("gamma"));
  EXPECT_EQ(reg.get("alpha"), 1);
  EXPECT_EQ(reg.get("beta"), 2);
  EXPECT_EQ(reg.family(), "widget");
}

TEST(Registry, DuplicateAddThrows) {
  Registry<int> reg("widget");
  reg.add("alpha", 1);
  try {
    reg.add("alpha", 2);
    FAIL() << "duplicate add did not throw";
  } catch (const std::logic_error& e) {
    EXPECT_STREQ(e.what(), "duplicate widget name \"alpha\"");
  }
  EXPECT_EQ(reg.get("alpha"), 1);  // the first registration stays
}

TEST(Registry, NamesAreSorted) {
  Registry<int> reg("widget");
  reg.add("zeta", 0);
  reg.add("alpha", 0);
  reg.add("mu", 0);
  EXPECT_EQ(reg.names(), (std::vector<std::string>{"alpha", "mu", "zeta"}));
  EXPECT_EQ(reg.valid_names(), "alpha, mu, zeta");
}

TEST(Registry, UnknownNameListsValidNamesSorted) {
  Registry<int> reg("router");
  reg.add("round_robin", 0);
  reg.add("least_outstanding", 0);
  reg.add("least_kv_load", 0);
  try {
    reg.get("random");
    FAIL() << "unknown name did not throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "unknown router \"random\"; valid values are: least_kv_load, "
                 "least_outstanding, round_robin");
  }
}

TEST(Registry, UnknownNameInEmptyRegistry) {
  const Registry<int> reg("loader");
  EXPECT_THROW(reg.get("x"), std::invalid_argument);
  EXPECT_EQ(reg.valid_names(), "");
}

}  // namespace
}  // namespace servesim
