#include "cache/cell_cache.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace cellm {
namespace {

using Cells = std::vector<int32_t>;

#define EXPECT_INVARIANTS(cache)                              \
  do {                                                        \
    const Status invariants_ = (cache).check_invariants();    \
    EXPECT_TRUE(invariants_.ok()) << invariants_.to_string(); \
  } while (false)

Cells cells_of(const CellCache& cache, SeqId seq) {
  const auto cells = cache.cells(seq);
  return Cells(cells.begin(), cells.end());
}

Cells to_vector(std::span<const int32_t> span) { return Cells(span.begin(), span.end()); }

// Everything observable about a cache, to prove that a call changed nothing.
struct Snapshot {
  std::vector<Cells> seq_cells;  // per id in `ids`
  std::vector<int32_t> refcounts;
  int32_t num_free = 0;
  int32_t high_water = 0;
  int32_t num_seqs = 0;
  bool declared = false;
  bool operator==(const Snapshot&) const = default;
};

Snapshot snapshot(const CellCache& cache, const std::vector<SeqId>& ids) {
  Snapshot s;
  for (SeqId id : ids) s.seq_cells.push_back(cache.is_live(id) ? cells_of(cache, id) : Cells{});
  for (int32_t c = 0; c < cache.max_cells(); ++c) s.refcounts.push_back(cache.refcount(c));
  s.num_free = cache.num_free();
  s.high_water = cache.high_water();
  s.num_seqs = cache.num_seqs();
  s.declared = cache.has_declared_step();
  return s;
}

// Declares and places a step; fails the test if it is refused.
CellStep step(CellCache& cache, const std::vector<SeqId>& token_seqs) {
  StatusOr<bool> admitted = cache.declare_step(token_seqs);
  EXPECT_TRUE(admitted.ok()) << admitted.status().to_string();
  EXPECT_TRUE(admitted.ok() && *admitted) << "step refused";
  return cache.place();
}

TEST(CellCacheTest, ASecondSequenceSeesNoneOfTheFirstsCellsAtEqualPositions) {
  CellCache cache(16);
  const SeqId a = cache.seq_new();
  const SeqId b = cache.seq_new();
  const CellStep placed = step(cache, {a, b, a, b, b});  // interleaved tokens
  EXPECT_EQ(cells_of(cache, a), (Cells{0, 2}));
  EXPECT_EQ(cells_of(cache, b), (Cells{1, 3, 4}));
  EXPECT_EQ(placed.token_pos, (Cells{0, 0, 1, 1, 2}));
  EXPECT_EQ(placed.token_cell, (Cells{0, 1, 2, 3, 4}));
  EXPECT_EQ(placed.token_step_seq, (Cells{0, 1, 0, 1, 1}));
  // Each token reads its own sequence's cells up to its own position, never b's from a.
  EXPECT_EQ(to_vector(placed.visible_cells(0, 0)), (Cells{0}));
  EXPECT_EQ(to_vector(placed.visible_cells(1, 0)), (Cells{1}));
  EXPECT_EQ(to_vector(placed.visible_cells(2, 0)), (Cells{0, 2}));
  EXPECT_EQ(to_vector(placed.visible_cells(3, 0)), (Cells{1, 3}));
  EXPECT_EQ(to_vector(placed.visible_cells(4, 0)), (Cells{1, 3, 4}));
  EXPECT_INVARIANTS(cache);
}

TEST(CellCacheTest, CellStepIsAFlatCsrOfEveryStepSequence) {
  CellCache cache(32);
  const SeqId a = cache.seq_new();
  const SeqId b = cache.seq_new();
  const SeqId idle = cache.seq_new();
  step(cache, {a, a, a, idle});  // a: 0 1 2, idle: 3
  const CellStep placed = step(cache, {b, a, b});
  EXPECT_EQ(placed.num_tokens, 3);
  EXPECT_EQ(placed.num_seqs, 2);
  EXPECT_EQ(placed.token_seq, (std::vector<SeqId>{b, a, b}));
  EXPECT_EQ(placed.token_pos, (Cells{0, 3, 1}));
  EXPECT_EQ(placed.token_cell, (Cells{4, 5, 6}));
  EXPECT_EQ(placed.seq_id, (std::vector<SeqId>{b, a}));
  EXPECT_EQ(placed.seq_pos_begin, (Cells{0, 3}));
  EXPECT_EQ(placed.seq_len, (Cells{2, 4}));
  EXPECT_EQ(placed.seq_cell_offsets, (Cells{0, 2, 6}));
  EXPECT_EQ(placed.seq_cells, (Cells{4, 6, 0, 1, 2, 5}));
  EXPECT_EQ(placed.max_seq_len, 4);
  EXPECT_EQ(to_vector(placed.cells_of(1)), (Cells{0, 1, 2, 5}));
}

TEST(CellCacheTest, AReusedCellStepIsRefilledWithoutStaleEntries) {
  CellCache cache(64);
  const SeqId a = cache.seq_new();
  const SeqId b = cache.seq_new();
  CellStep reused;
  ASSERT_TRUE(*cache.declare_step(std::vector<SeqId>{a, a, a, a, b, b}));
  cache.place(&reused);
  ASSERT_TRUE(*cache.declare_step(std::vector<SeqId>{b}));
  cache.place(&reused);
  EXPECT_EQ(reused.num_tokens, 1);
  EXPECT_EQ(reused.num_seqs, 1);
  EXPECT_EQ(reused.token_cell, (Cells{6}));
  EXPECT_EQ(reused.seq_id, (std::vector<SeqId>{b}));
  EXPECT_EQ(reused.seq_cell_offsets, (Cells{0, 3}));
  EXPECT_EQ(reused.seq_cells, (Cells{4, 5, 6}));
}

TEST(CellCacheTest, ACloneSharesCellsAndACellIsFreedOnlyWhenItsLastOwnerLeaves) {
  CellCache cache(8);
  const SeqId a = cache.seq_new();
  step(cache, {a, a, a, a, a});
  const SeqId b = cache.seq_clone(a, 3);
  EXPECT_EQ(cells_of(cache, b), (Cells{0, 1, 2}));
  EXPECT_EQ(cache.pos(b), 3);
  EXPECT_EQ(cache.refcount(0), 2);
  EXPECT_EQ(cache.refcount(3), 1);
  EXPECT_EQ(cache.num_free(), 3);  // the clone took no cell
  step(cache, {b});                // the clone writes its own cell, a keeps its position 3
  EXPECT_EQ(cells_of(cache, b), (Cells{0, 1, 2, 5}));
  EXPECT_EQ(cells_of(cache, a), (Cells{0, 1, 2, 3, 4}));

  cache.seq_rm(a);
  EXPECT_EQ(cache.refcount(3), 0);
  EXPECT_EQ(cache.refcount(4), 0);
  EXPECT_EQ(cache.refcount(0), 1);
  EXPECT_EQ(cache.num_free(), 4);
  EXPECT_EQ(cache.high_water(), 6);
  cache.rewind(b, 1);  // b was the last owner of 1 and 2
  EXPECT_EQ(cache.refcount(1), 0);
  EXPECT_EQ(cache.refcount(2), 0);
  EXPECT_EQ(cache.high_water(), 1);
  cache.seq_rm(b);
  EXPECT_EQ(cache.num_free(), 8);
  EXPECT_EQ(cache.high_water(), 0);
  EXPECT_INVARIANTS(cache);
}

TEST(CellCacheTest, RewindingACloneLeavesTheSharedCellsToTheOtherOwner) {
  CellCache cache(8);
  const SeqId a = cache.seq_new();
  step(cache, {a, a, a, a});
  const SeqId b = cache.seq_clone(a, 4);
  cache.rewind(b, 0);
  EXPECT_EQ(cache.pos(b), 0);
  EXPECT_EQ(cells_of(cache, a), (Cells{0, 1, 2, 3}));
  EXPECT_EQ(cache.num_free(), 4);
  const CellStep placed = step(cache, {b});
  EXPECT_EQ(placed.token_cell, (Cells{4}));
  EXPECT_INVARIANTS(cache);
}

TEST(CellCacheTest, FreedCellsAreReusedBeforeThePoolGrows) {
  CellCache cache(64);
  const SeqId a = cache.seq_new();
  const SeqId b = cache.seq_new();
  step(cache, {a, a, a, a, b, b, b, b});  // a: 0-3, b: 4-7
  cache.rewind(a, 1);                     // frees 1, 2, 3
  EXPECT_EQ(cache.high_water(), 8);
  const CellStep placed = step(cache, {b, b, b, a, a});
  EXPECT_EQ(placed.token_cell, (Cells{1, 2, 3, 8, 9}));
  EXPECT_EQ(cache.high_water(), 10);
  // b's list is no longer ascending, and each token still sees exactly its own history.
  EXPECT_EQ(cells_of(cache, b), (Cells{4, 5, 6, 7, 1, 2, 3}));
  EXPECT_EQ(to_vector(placed.visible_cells(1, 0)), (Cells{4, 5, 6, 7, 1, 2}));
  EXPECT_EQ(to_vector(placed.visible_cells(3, 0)), (Cells{0, 8}));
  EXPECT_EQ(to_vector(placed.visible_cells(4, 0)), (Cells{0, 8, 9}));
  EXPECT_INVARIANTS(cache);
}

TEST(CellCacheTest, AStepMayNotRewriteAHeldPositionOrGoBackwards) {
  CellCache cache(16);
  const SeqId a = cache.seq_new();
  const SeqId b = cache.seq_new();
  step(cache, {a, a, a});
  const std::vector<SeqId> ids = {a, b};
  const Snapshot before = snapshot(cache, ids);
  struct Case {
    std::vector<SeqId> seqs;
    std::vector<int32_t> positions;
  };
  const std::vector<Case> bad = {
      {{a}, {2}},              // rewrites the held position 2
      {{a}, {0}},              // rewrites position 0
      {{a}, {4}},              // leaves a gap at 3
      {{a, a}, {4, 3}},        // backwards within the step
      {{a, a}, {3, 3}},        // the same position twice
      {{b, a, b}, {0, 3, 0}},  // b's second token rewrites b's first
      {{a, b}, {3, -1}},       // negative position
      {{a}, {3, 4}},           // positions do not match tokens
      {{a, 99}, {3, 0}},       // a sequence that does not exist
  };
  for (const Case& c : bad) {
    StatusOr<bool> result = cache.declare_step(c.seqs, c.positions);
    EXPECT_FALSE(result.ok()) << "positions accepted: " << c.positions.size();
    EXPECT_EQ(snapshot(cache, ids), before);
    EXPECT_INVARIANTS(cache);
  }
  StatusOr<bool> good =
      cache.declare_step(std::vector<SeqId>{a, b, a}, std::vector<int32_t>{3, 0, 4});
  ASSERT_TRUE(good.ok()) << good.status().to_string();
  EXPECT_TRUE(*good);
  EXPECT_EQ(cache.place().token_pos, (Cells{3, 0, 4}));
}

TEST(CellCacheTest, ARefusedDeclarationChangesNothing) {
  CellCache cache(8);
  const SeqId a = cache.seq_new();
  const SeqId b = cache.seq_new();
  step(cache, {a, a, a, b, b, b});
  const std::vector<SeqId> ids = {a, b};
  const Snapshot before = snapshot(cache, ids);
  StatusOr<bool> refused = cache.declare_step(std::vector<SeqId>{a, b, a});
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(*refused);
  EXPECT_FALSE(cache.has_declared_step());
  EXPECT_EQ(snapshot(cache, ids), before);
  EXPECT_INVARIANTS(cache);
  // A step that fits exactly is admitted, and placement then cannot fail.
  StatusOr<bool> admitted = cache.declare_step(std::vector<SeqId>{a, b});
  ASSERT_TRUE(admitted.ok() && *admitted);
  EXPECT_EQ(cache.place().token_cell, (Cells{6, 7}));
  EXPECT_EQ(cache.num_free(), 0);
}

TEST(CellCacheTest, ACancelledDeclarationChangesNothing) {
  CellCache cache(8);
  const SeqId a = cache.seq_new();
  step(cache, {a, a});
  const Snapshot before = snapshot(cache, {a});
  ASSERT_TRUE(*cache.declare_step(std::vector<SeqId>{a, a}));
  cache.cancel_step();
  EXPECT_EQ(snapshot(cache, {a}), before);
  EXPECT_INVARIANTS(cache);
}

TEST(CellCacheTest, RollingBackAPlacedStepRestoresEverything) {
  CellCache cache(32);
  const SeqId a = cache.seq_new();
  const SeqId b = cache.seq_new();
  step(cache, {a, a, a, a, b, b, b, b, a});
  cache.rewind(a, 2);  // holes at 2, 3 and 8: the step below reuses them
  const SeqId c = cache.seq_clone(b, 2);
  const std::vector<SeqId> ids = {a, b, c};
  const Snapshot before = snapshot(cache, ids);
  const CellStep placed = step(cache, {c, a, b, c, a, a, a});
  EXPECT_EQ(placed.token_cell, (Cells{2, 3, 8, 9, 10, 11, 12}));
  EXPECT_NE(snapshot(cache, ids), before);
  cache.rollback(placed);
  EXPECT_EQ(snapshot(cache, ids), before);
  EXPECT_INVARIANTS(cache);
  // The same step placed again lands on the same cells.
  EXPECT_EQ(step(cache, {c, a, b, c, a, a, a}).token_cell, placed.token_cell);
}

TEST(CellCacheTest, WindowVisibilityIsExact) {
  EXPECT_EQ(visible_range(0, 0).begin, 0);
  EXPECT_EQ(visible_range(0, 0).end, 1);
  EXPECT_EQ(visible_range(9, 0).begin, 0);
  EXPECT_EQ(visible_range(9, 0).end, 10);
  EXPECT_EQ(visible_range(9, 1).begin, 9);
  EXPECT_EQ(visible_range(9, 4).begin, 6);
  EXPECT_EQ(visible_range(9, 4).end, 10);
  EXPECT_EQ(visible_range(3, 4).begin, 0);  // exactly w positions
  EXPECT_EQ(visible_range(2, 4).begin, 0);  // fewer than w exist
  EXPECT_EQ(visible_range(4, 4).begin, 1);
  EXPECT_EQ(visible_range(2, 100).begin, 0);

  CellCache cache(32);
  const SeqId other = cache.seq_new();
  const SeqId a = cache.seq_new();
  step(cache, {a, other, a, other, a, a, a, a, a});  // a: 0 2 4 5 6 7 8
  const CellStep placed = step(cache, {a, a, a});    // a: ... 9 10 11 at positions 7 8 9
  EXPECT_EQ(to_vector(placed.visible_cells(2, 4)), (Cells{8, 9, 10, 11}));  // positions 6-9
  EXPECT_EQ(to_vector(placed.visible_cells(0, 3)), (Cells{7, 8, 9}));
  EXPECT_EQ(to_vector(placed.visible_cells(0, 1)), (Cells{9}));
  EXPECT_EQ(to_vector(placed.visible_cells(1, 0)), (Cells{0, 2, 4, 5, 6, 7, 8, 9, 10}));
  // Full history stays in the cache whatever the windows.
  EXPECT_EQ(cache.pos(a), 10);
  EXPECT_EQ(cells_of(cache, a), (Cells{0, 2, 4, 5, 6, 7, 8, 9, 10, 11}));
}

TEST(CellCacheTest, AThousandLiveSequencesWork) {
  constexpr int32_t kNumSeqs = 1000;
  CellCache cache(4 * kNumSeqs);
  const SeqId root = cache.seq_new();
  step(cache, {root, root});
  std::vector<SeqId> seqs;
  for (int32_t i = 0; i < kNumSeqs; ++i) seqs.push_back(cache.seq_clone(root, 2));
  EXPECT_EQ(cache.num_seqs(), kNumSeqs + 1);
  EXPECT_EQ(cache.refcount(0), kNumSeqs + 1);  // far past a 64-bit owner mask
  // One step with a token of every sequence, then one with two more each, interleaved.
  std::vector<SeqId> tokens(seqs.begin(), seqs.end());
  const CellStep first = step(cache, tokens);
  EXPECT_EQ(first.num_seqs, kNumSeqs);
  tokens.insert(tokens.end(), seqs.begin(), seqs.end());
  const CellStep second = step(cache, tokens);
  EXPECT_EQ(second.num_seqs, kNumSeqs);
  std::set<int32_t> private_cells;
  for (int32_t i = 0; i < kNumSeqs; ++i) {
    const Cells cells = cells_of(cache, seqs[i]);
    ASSERT_EQ(cells.size(), 5u);
    EXPECT_EQ(cells[0], 0);
    EXPECT_EQ(cells[1], 1);
    EXPECT_EQ(cells[2], 2 + i);
    EXPECT_EQ(cells[3], 2 + kNumSeqs + i);
    EXPECT_EQ(cells[4], 2 + 2 * kNumSeqs + i);
    private_cells.insert(cells.begin() + 2, cells.end());
    EXPECT_EQ(to_vector(second.cells_of(i)), cells);
  }
  EXPECT_EQ(private_cells.size(), 3u * kNumSeqs);
  EXPECT_INVARIANTS(cache);
  for (int32_t i = 0; i < kNumSeqs; i += 2) cache.seq_rm(seqs[i]);
  EXPECT_EQ(cache.num_seqs(), kNumSeqs / 2 + 1);
  EXPECT_EQ(cache.refcount(0), kNumSeqs / 2 + 1);
  EXPECT_EQ(cache.num_free(), cache.max_cells() - 2 - 3 * kNumSeqs / 2);
  EXPECT_INVARIANTS(cache);
}

TEST(CellCacheTest, AHeldRewindKeepsItsCellsOwnedUntilReleased) {
  CellCache cache(16);
  const SeqId a = cache.seq_new();
  step(cache, {a, a, a, a, a});  // a: 0 1 2 3 4
  const SeqId b = cache.seq_clone(a, 4);
  cache.rewind_held(a, 2);
  EXPECT_EQ(cache.pos(a), 2);
  EXPECT_EQ(to_vector(cache.held_cells(a)), (Cells{2, 3, 4}));
  EXPECT_EQ(cache.held_from(a), 2);
  EXPECT_EQ(cache.num_holders(), 1);
  EXPECT_EQ(cache.num_free(), 11) << "held cells are not free";
  EXPECT_INVARIANTS(cache);
  // A step takes other cells; then the release frees cell 4 only (b still owns 2 and 3).
  EXPECT_EQ(step(cache, {a, a}).token_cell, (Cells{5, 6}));
  cache.release_held();
  EXPECT_TRUE(cache.held_cells(a).empty());
  EXPECT_EQ(cache.num_holders(), 0);
  EXPECT_EQ(cache.refcount(2), 1);
  EXPECT_EQ(cache.refcount(4), 0);
  EXPECT_EQ(cache.num_free(), 16 - 6);
  EXPECT_EQ(cells_of(cache, b), (Cells{0, 1, 2, 3}));
  EXPECT_INVARIANTS(cache);
}

TEST(CellCacheTest, RestoringAHeldTailGivesBackTheExactList) {
  CellCache cache(16);
  const SeqId a = cache.seq_new();
  const SeqId other = cache.seq_new();
  step(cache, {a, other, a, a, other, a});  // a: 0 2 3 5, other: 1 4
  const Snapshot before = snapshot(cache, {a, other});
  cache.rewind_held(a, 1);
  const CellStep placed = step(cache, {a, other, a});
  EXPECT_EQ(placed.token_cell, (Cells{6, 7, 8}));
  cache.rollback(placed);  // a back at 1, other at 2
  cache.restore_held(a);
  EXPECT_EQ(snapshot(cache, {a, other}), before);
  EXPECT_EQ(cache.num_holders(), 0);
  EXPECT_INVARIANTS(cache);
  // Holding nothing (rewind to the length) is allowed and leaves no tail.
  cache.rewind_held(a, cache.pos(a));
  EXPECT_EQ(cache.num_holders(), 0);
}

TEST(CellCacheTest, RemovingAHolderFreesItsHeldTail) {
  CellCache cache(8);
  const SeqId a = cache.seq_new();
  step(cache, {a, a, a});
  cache.rewind_held(a, 1);
  cache.seq_rm(a);
  EXPECT_EQ(cache.num_free(), 8);
  EXPECT_EQ(cache.num_holders(), 0);
  EXPECT_INVARIANTS(cache);
}

TEST(CellCacheTest, AnEmptyStepPlacesNothing) {
  CellCache cache(4);
  const CellStep placed = step(cache, {});
  EXPECT_EQ(placed.num_tokens, 0);
  EXPECT_EQ(placed.num_seqs, 0);
  EXPECT_EQ(placed.seq_cell_offsets, (Cells{0}));
  EXPECT_TRUE(placed.seq_cells.empty());
  EXPECT_EQ(cache.num_free(), 4);
}

TEST(CellCacheTest, ClearFreesEverythingAndIdsOfRemovedSequencesAreReused) {
  CellCache cache(8);
  const SeqId a = cache.seq_new();
  const SeqId b = cache.seq_new();
  step(cache, {a, b, b});
  cache.seq_rm(a);
  EXPECT_FALSE(cache.is_live(a));
  EXPECT_EQ(cache.seq_new(), a);
  EXPECT_EQ(cache.pos(a), 0);
  ASSERT_TRUE(*cache.declare_step(std::vector<SeqId>{b}));
  cache.clear();
  EXPECT_FALSE(cache.has_declared_step());
  EXPECT_EQ(cache.num_seqs(), 0);
  EXPECT_EQ(cache.num_free(), 8);
  EXPECT_EQ(cache.high_water(), 0);
  EXPECT_FALSE(cache.is_live(b));
  EXPECT_INVARIANTS(cache);
}

TEST(CellCacheDeathTest, AVerbWhileAStepIsDeclaredIsABug) {
  CellCache cache(8);
  const SeqId a = cache.seq_new();
  ASSERT_TRUE(*cache.declare_step(std::vector<SeqId>{a}));
  EXPECT_DEATH(cache.rewind(a, 0), "a step is declared");
  EXPECT_DEATH(cache.seq_clone(a, 0), "a step is declared");
}

TEST(CellCacheDeathTest, RewindingBelowAHeldTailIsABug) {
  CellCache cache(8);
  const SeqId a = cache.seq_new();
  step(cache, {a, a, a});
  cache.rewind_held(a, 2);
  EXPECT_DEATH(cache.rewind(a, 1), "below its held tail");
  EXPECT_DEATH(cache.rewind_held(a, 1), "already holds a tail");
  step(cache, {a});
  EXPECT_DEATH(cache.restore_held(a), "where the tail was dropped");
}

TEST(CellCacheDeathTest, ACloneBeyondItsSourceIsABug) {
  CellCache cache(8);
  const SeqId a = cache.seq_new();
  EXPECT_DEATH(cache.seq_clone(a, 1), "past its length");
  EXPECT_DEATH(cache.pos(a + 1), "not live");
}

}  // namespace
}  // namespace cellm
