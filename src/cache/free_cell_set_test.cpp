#include "cache/free_cell_set.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace cellm {
namespace {

void expect_consistent(const FreeCellSet& cells) {
  const Status status = cells.check_invariants();
  ASSERT_TRUE(status.ok()) << status.to_string();
}

TEST(FreeCellSetTest, HandsOutTheLowestFreeCellFirst) {
  FreeCellSet cells(10);
  for (int32_t i = 0; i < 6; ++i) EXPECT_EQ(cells.take_lowest(), i);
  cells.give_back(4);
  cells.give_back(1);
  EXPECT_EQ(cells.take_lowest(), 1);
  EXPECT_EQ(cells.take_lowest(), 4);
  EXPECT_EQ(cells.take_lowest(), 6);
  EXPECT_EQ(cells.num_free(), 3);
  expect_consistent(cells);
}

TEST(FreeCellSetTest, HighWaterFollowsTheHighestUsedCellDownAndUp) {
  FreeCellSet cells(200);
  for (int32_t i = 0; i < 130; ++i) cells.take_lowest();
  EXPECT_EQ(cells.high_water(), 130);
  cells.give_back(3);
  EXPECT_EQ(cells.high_water(), 130);
  for (int32_t i = 129; i >= 5; --i) cells.give_back(i);  // empties two whole words
  EXPECT_EQ(cells.high_water(), 5);
  cells.give_back(4);
  EXPECT_EQ(cells.high_water(), 3);  // cell 3 is already free
  for (int32_t i = 2; i >= 0; --i) cells.give_back(i);
  EXPECT_EQ(cells.high_water(), 0);
  EXPECT_EQ(cells.take_lowest(), 0);
  EXPECT_EQ(cells.high_water(), 1);
  expect_consistent(cells);
}

TEST(FreeCellSetTest, FillsPoolsOfEveryAwkwardSizeExactly) {
  for (int32_t size : {1, 63, 64, 65, 4095, 4096, 4097, 64 * 64 * 3 + 1}) {
    FreeCellSet cells(size);
    for (int32_t i = 0; i < size; ++i) ASSERT_EQ(cells.take_lowest(), i) << "size " << size;
    EXPECT_EQ(cells.num_free(), 0);
    EXPECT_EQ(cells.high_water(), size);
    expect_consistent(cells);
    cells.give_back(size - 1);
    EXPECT_EQ(cells.take_lowest(), size - 1);
    cells.reset();
    EXPECT_EQ(cells.num_free(), size);
    EXPECT_EQ(cells.high_water(), 0);
    expect_consistent(cells);
  }
}

TEST(FreeCellSetTest, AgreesWithAnOrderedSetUnderRandomUse) {
  // Sizes that cross summary words, so the second level is exercised.
  for (int32_t size : {70, 5000, 9000}) {
    FreeCellSet cells(size);
    std::set<int32_t> free_model;
    std::set<int32_t> used_model;
    for (int32_t i = 0; i < size; ++i) free_model.insert(i);
    std::mt19937 rng(size);
    for (int op = 0; op < 20000; ++op) {
      const bool take = used_model.empty() || (!free_model.empty() && rng() % 100 < 55);
      if (take) {
        const int32_t expected = *free_model.begin();
        ASSERT_EQ(cells.take_lowest(), expected);
        free_model.erase(free_model.begin());
        used_model.insert(expected);
      } else {
        auto it = used_model.lower_bound(static_cast<int32_t>(rng() % size));
        if (it == used_model.end()) it = used_model.begin();
        cells.give_back(*it);
        free_model.insert(*it);
        used_model.erase(it);
      }
      ASSERT_EQ(cells.num_free(), static_cast<int32_t>(free_model.size()));
      ASSERT_EQ(cells.high_water(), used_model.empty() ? 0 : *used_model.rbegin() + 1);
      if (op % 97 == 0) expect_consistent(cells);
    }
    expect_consistent(cells);
  }
}

}  // namespace
}  // namespace cellm
