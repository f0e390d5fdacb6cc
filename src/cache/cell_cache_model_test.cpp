// CellCache against an independent model of the same semantics, driven by random verbs.
//
// The model is deliberately naive: sequences are vectors in a std::map, owners a std::map of
// refcounts, free cells a std::set whose first element is, by the lowest-free-cell rule, exactly
// the cell the next placed token must get. So the model predicts every physical cell, and the
// comparison after each verb checks sharing, freeing, held tails and the placement order all at
// once.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cache/cell_cache.h"

namespace cellm {
namespace {

using Cells = std::vector<int32_t>;

struct Model {
  explicit Model(int32_t num_cells) : max_cells(num_cells) { clear(); }

  void clear() {
    seqs.clear();
    held.clear();
    refcount.clear();
    free.clear();
    for (int32_t c = 0; c < max_cells; ++c) free.insert(c);
  }
  void release(int32_t cell) {
    if (--refcount[cell] == 0) {
      refcount.erase(cell);
      free.insert(cell);
    }
  }
  void rewind(SeqId seq, int32_t pos) {
    Cells& cells = seqs.at(seq);
    while (static_cast<int32_t>(cells.size()) > pos) {
      release(cells.back());
      cells.pop_back();
    }
  }
  void rm(SeqId seq) {
    rewind(seq, 0);
    release_held(seq);
    seqs.erase(seq);
  }
  // The held tail moves out of the list with its refcounts.
  void rewind_held(SeqId seq, int32_t pos) {
    Cells& cells = seqs.at(seq);
    if (pos == static_cast<int32_t>(cells.size())) return;
    held[seq] = {pos, Cells(cells.begin() + pos, cells.end())};
    cells.resize(pos);
  }
  void restore_held(SeqId seq) {
    const auto& [from, tail] = held.at(seq);
    rewind(seq, from);
    Cells& cells = seqs.at(seq);
    cells.insert(cells.end(), tail.begin(), tail.end());
    held.erase(seq);
  }
  void release_held(SeqId seq) {
    const auto it = held.find(seq);
    if (it == held.end()) return;
    for (const int32_t cell : it->second.second) release(cell);
    held.erase(it);
  }
  int32_t held_from(SeqId seq) const {
    const auto it = held.find(seq);
    return it == held.end() ? 0 : it->second.first;
  }
  void clone(SeqId src, int32_t upto, SeqId id) {
    const Cells& from = seqs.at(src);
    Cells cells(from.begin(), from.begin() + upto);
    for (int32_t c : cells) ++refcount[c];
    seqs[id] = cells;
  }
  // Cells the tokens get, in token order.
  Cells place(const std::vector<SeqId>& tokens) {
    Cells placed;
    for (SeqId seq : tokens) {
      const int32_t cell = *free.begin();
      free.erase(free.begin());
      refcount[cell] = 1;
      seqs.at(seq).push_back(cell);
      placed.push_back(cell);
    }
    return placed;
  }
  int32_t high_water() const { return refcount.empty() ? 0 : refcount.rbegin()->first + 1; }

  int32_t max_cells;
  std::map<SeqId, Cells> seqs;
  std::map<SeqId, std::pair<int32_t, Cells>> held;  // holder -> (held_from, tail)
  std::map<int32_t, int32_t> refcount;              // used cells only
  std::set<int32_t> free;
};

::testing::AssertionResult same(const CellCache& cache, const Model& model) {
  if (cache.num_seqs() != static_cast<int32_t>(model.seqs.size())) {
    return ::testing::AssertionFailure()
           << "num_seqs " << cache.num_seqs() << " vs model " << model.seqs.size();
  }
  for (const auto& [seq, cells] : model.seqs) {
    if (!cache.is_live(seq)) return ::testing::AssertionFailure() << "seq " << seq << " not live";
    const auto got = cache.cells(seq);
    if (!std::equal(got.begin(), got.end(), cells.begin(), cells.end())) {
      return ::testing::AssertionFailure() << "seq " << seq << " cells differ from the model";
    }
    const auto held = model.held.find(seq);
    const Cells tail = held == model.held.end() ? Cells{} : held->second.second;
    const auto got_tail = cache.held_cells(seq);
    if (!std::equal(got_tail.begin(), got_tail.end(), tail.begin(), tail.end())) {
      return ::testing::AssertionFailure() << "seq " << seq << " held tail differs from the model";
    }
    if (!tail.empty() && cache.held_from(seq) != held->second.first) {
      return ::testing::AssertionFailure() << "seq " << seq << " held_from differs";
    }
  }
  if (cache.num_holders() != static_cast<int32_t>(model.held.size())) {
    return ::testing::AssertionFailure()
           << "num_holders " << cache.num_holders() << " vs model " << model.held.size();
  }
  if (cache.num_free() != static_cast<int32_t>(model.free.size())) {
    return ::testing::AssertionFailure()
           << "num_free " << cache.num_free() << " vs model " << model.free.size();
  }
  if (cache.high_water() != model.high_water()) {
    return ::testing::AssertionFailure()
           << "high_water " << cache.high_water() << " vs model " << model.high_water();
  }
  for (int32_t c = 0; c < model.max_cells; ++c) {
    const auto it = model.refcount.find(c);
    const int32_t expected = it == model.refcount.end() ? 0 : it->second;
    if (cache.refcount(c) != expected) {
      return ::testing::AssertionFailure()
             << "cell " << c << " refcount " << cache.refcount(c) << " vs model " << expected;
    }
  }
  const Status invariants = cache.check_invariants();
  if (!invariants.ok()) return ::testing::AssertionFailure() << invariants.to_string();
  return ::testing::AssertionSuccess();
}

// Checks a placed CellStep against the model state before (pos_before) and after placement.
void expect_step_matches(const CellStep& step, const std::vector<SeqId>& tokens,
                         const Cells& placed_cells, const std::map<SeqId, int32_t>& pos_before,
                         const Model& model, std::mt19937& rng) {
  ASSERT_EQ(step.num_tokens, static_cast<int32_t>(tokens.size()));
  ASSERT_EQ(step.token_cell, placed_cells);
  std::vector<SeqId> order;  // sequences by first appearance
  std::map<SeqId, int32_t> next = pos_before;
  for (int32_t t = 0; t < step.num_tokens; ++t) {
    const SeqId seq = tokens[t];
    if (std::find(order.begin(), order.end(), seq) == order.end()) order.push_back(seq);
    ASSERT_EQ(step.token_seq[t], seq);
    ASSERT_EQ(step.token_pos[t], next[seq]++);
    ASSERT_EQ(step.seq_id[step.token_step_seq[t]], seq);
    const Cells& history = model.seqs.at(seq);
    const int32_t window = static_cast<int32_t>(rng() % 6);  // 0 = full
    const int32_t pos = step.token_pos[t];
    const int32_t begin = window == 0 ? 0 : std::max(0, pos - window + 1);
    const auto visible = step.visible_cells(t, window);
    ASSERT_TRUE(std::equal(visible.begin(), visible.end(), history.begin() + begin,
                           history.begin() + pos + 1));
  }
  ASSERT_EQ(step.seq_id, order);
  ASSERT_EQ(step.num_seqs, static_cast<int32_t>(order.size()));
  ASSERT_EQ(step.seq_cell_offsets.size(), order.size() + 1);
  for (size_t s = 0; s < order.size(); ++s) {
    ASSERT_EQ(step.seq_pos_begin[s], pos_before.at(order[s]));
    ASSERT_EQ(step.seq_len[s], static_cast<int32_t>(model.seqs.at(order[s]).size()));
    const auto cells = step.cells_of(static_cast<int32_t>(s));
    ASSERT_EQ(Cells(cells.begin(), cells.end()), model.seqs.at(order[s]));
  }
  ASSERT_EQ(step.seq_cells.size(), static_cast<size_t>(step.seq_cell_offsets.back()));
}

TEST(CellCacheModelTest, AHundredThousandRandomVerbsMatchAnIndependentModel) {
  constexpr int32_t kMaxCells = 128;
  constexpr int32_t kMaxSeqs = 24;
  constexpr int kNumVerbs = 100000;
  CellCache cache(kMaxCells);
  Model model(kMaxCells);
  std::mt19937 rng(20240604);
  std::map<std::string, int> counts;  // verbs that really ran, to prove coverage
  auto random_live = [&]() {
    auto it = model.seqs.begin();
    std::advance(it, rng() % model.seqs.size());
    return it->first;
  };
  for (int verb = 0; verb < kNumVerbs; ++verb) {
    SCOPED_TRACE("verb " + std::to_string(verb));
    const int32_t num_live = static_cast<int32_t>(model.seqs.size());
    const uint32_t roll = rng() % 1000;
    if (roll < 1) {
      cache.clear();
      model.clear();
      ++counts["clear"];
    } else if (roll < 100 || num_live == 0) {
      if (num_live >= kMaxSeqs) continue;
      const SeqId id = cache.seq_new();
      ASSERT_EQ(model.seqs.count(id), 0u) << "id " << id << " is already live";
      model.seqs[id] = {};
      ++counts["new"];
    } else if (roll < 200) {
      if (num_live >= kMaxSeqs) continue;
      const SeqId src = random_live();
      const int32_t upto = static_cast<int32_t>(rng() % (model.seqs[src].size() + 1));
      const SeqId id = cache.seq_clone(src, upto);
      ASSERT_EQ(model.seqs.count(id), 0u) << "id " << id << " is already live";
      model.clone(src, upto, id);
      ++counts["clone"];
    } else if (roll < 270) {
      const SeqId seq = random_live();
      cache.seq_rm(seq);
      model.rm(seq);
      ++counts["rm"];
    } else if (roll < 400) {
      const SeqId seq = random_live();
      // A sequence holding a tail may not rewind below it.
      const int32_t pos = std::max(model.held_from(seq),
                                   static_cast<int32_t>(rng() % (model.seqs[seq].size() + 3)));
      cache.rewind(seq, pos);
      model.rewind(seq, pos);
      ++counts["rewind"];
    } else if (roll < 450) {
      const SeqId seq = random_live();
      if (model.held.count(seq) != 0) continue;
      const int32_t pos = static_cast<int32_t>(rng() % (model.seqs[seq].size() + 1));
      cache.rewind_held(seq, pos);
      model.rewind_held(seq, pos);
      ++counts["rewind_held"];
    } else if (roll < 480) {
      if (model.held.empty()) continue;
      auto it = model.held.begin();
      std::advance(it, rng() % model.held.size());
      const SeqId seq = it->first;
      cache.rewind(seq, it->second.first);  // what a rollback does first
      cache.restore_held(seq);
      model.restore_held(seq);
      ++counts["restore_held"];
    } else if (roll < 500) {
      cache.release_held();
      while (!model.held.empty()) model.release_held(model.held.begin()->first);
      ++counts["release_held"];
    } else {
      // A step: a few distinct sequences, a few tokens each, interleaved at random.
      std::vector<SeqId> step_seqs;
      for (const auto& [seq, cells] : model.seqs) step_seqs.push_back(seq);
      std::shuffle(step_seqs.begin(), step_seqs.end(), rng);
      step_seqs.resize(1 + rng() % std::min<size_t>(6, step_seqs.size()));
      std::vector<SeqId> tokens;
      for (SeqId seq : step_seqs) tokens.insert(tokens.end(), 1 + rng() % 5, seq);
      std::shuffle(tokens.begin(), tokens.end(), rng);
      std::map<SeqId, int32_t> pos_before;
      for (SeqId seq : step_seqs) pos_before[seq] = static_cast<int32_t>(model.seqs[seq].size());
      const uint32_t kind = rng() % 100;
      StatusOr<bool> admitted = false;
      if (kind < 40) {
        admitted = cache.declare_step(tokens);
      } else {
        std::map<SeqId, int32_t> next = pos_before;
        Cells positions;
        for (SeqId seq : tokens) positions.push_back(next[seq]++);
        const bool corrupt = kind >= 85;
        if (corrupt) {
          const size_t i = rng() % positions.size();
          const int32_t deltas[] = {-1, 1, -positions[i] - 1, 2};
          positions[i] += deltas[rng() % 4];
        }
        admitted = cache.declare_step(tokens, positions);
        if (corrupt) {
          ASSERT_FALSE(admitted.ok()) << "a wrong position was accepted";
          ASSERT_TRUE(same(cache, model));
          ++counts["step_bad_position"];
          continue;
        }
      }
      ASSERT_TRUE(admitted.ok()) << admitted.status().to_string();
      const bool fits = tokens.size() <= model.free.size();
      ASSERT_EQ(*admitted, fits);
      if (!fits) {
        ASSERT_FALSE(cache.has_declared_step());
        ++counts["step_refused"];
      } else if (rng() % 20 == 0) {
        cache.cancel_step();
        ++counts["step_cancelled"];
      } else {
        const CellStep step = cache.place();
        const Cells placed = model.place(tokens);
        expect_step_matches(step, tokens, placed, pos_before, model, rng);
        if (HasFatalFailure()) return;
        ++counts["step"];
        if (rng() % 7 == 0) {  // the forward failed: undo the step
          cache.rollback(step);
          for (const auto& [seq, pos] : pos_before) model.rewind(seq, pos);
          ++counts["rollback"];
        }
      }
    }
    ASSERT_TRUE(same(cache, model));
  }
  for (const char* name :
       {"clear", "new", "clone", "rm", "rewind", "rewind_held", "restore_held", "release_held",
        "step", "step_refused", "step_cancelled", "step_bad_position", "rollback"}) {
    EXPECT_GT(counts[name], 0) << name << " never ran";
  }
  EXPECT_GT(counts["step_refused"], 1000) << "the pool was rarely full: reuse is under-tested";
}

}  // namespace
}  // namespace cellm
