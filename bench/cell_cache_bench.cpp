// Cost of one step's cell bookkeeping: CellCache::declare_step + place (which builds the
// CellStep, including every step sequence's full visible cell list), for the two shapes of
// issue 4: a 512-token step of 256 sessions over a 65,536-cell pool, and a decode step of 256
// sessions with 2,000-token contexts (a CellStep of 512,000 visible cells). Each iteration also
// rolls the step back (256 rewinds) so the cache stays the same from one iteration to the next;
// that is included in the time. Run: cell_cache_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <vector>

#include "batching/session_table.h"
#include "cache/cell_cache.h"

namespace cellm {
namespace {

constexpr int32_t kNumSessions = 256;

// num_seqs sequences of `context` positions each, filled one token per sequence per step, as
// decoding would, so each sequence's cells are strided across the pool.
std::vector<SeqId> fill(CellCache& cache, int32_t num_seqs, int32_t context) {
  std::vector<SeqId> seqs;
  for (int32_t i = 0; i < num_seqs; ++i) seqs.push_back(cache.seq_new());
  CellStep step;
  for (int32_t p = 0; p < context; ++p) {
    if (!*cache.declare_step(seqs)) std::abort();
    cache.place(&step);
  }
  return seqs;
}

// tokens_per_seq tokens for each sequence, sequence-major (s0 s0 s1 s1 ...).
std::vector<SeqId> step_tokens(const std::vector<SeqId>& seqs, int32_t tokens_per_seq) {
  std::vector<SeqId> tokens;
  for (SeqId seq : seqs) tokens.insert(tokens.end(), tokens_per_seq, seq);
  return tokens;
}

void run_steps(benchmark::State& state, int32_t max_cells, int32_t context, int32_t tokens_per_seq,
               bool reuse_step) {
  CellCache cache(max_cells);
  const std::vector<SeqId> seqs = fill(cache, kNumSessions, context);
  const std::vector<SeqId> tokens = step_tokens(seqs, tokens_per_seq);
  CellStep reused;
  size_t num_visible = 0;
  for (auto _ : state) {
    StatusOr<bool> admitted = cache.declare_step(tokens);
    if (!admitted.ok() || !*admitted) {
      state.SkipWithError("step refused");
      break;
    }
    if (reuse_step) {
      cache.place(&reused);
      num_visible = reused.seq_cells.size();
      benchmark::DoNotOptimize(reused.seq_cells.data());
      cache.rollback(reused);
    } else {
      const CellStep fresh = cache.place();
      num_visible = fresh.seq_cells.size();
      benchmark::DoNotOptimize(fresh.seq_cells.data());
      cache.rollback(fresh);
    }
  }
  state.counters["tokens"] = static_cast<double>(tokens.size());
  state.counters["visible_cells"] = static_cast<double>(num_visible);
}

// 512 tokens (2 per session), sessions with no context yet: a prompt step.
void BM_PrefillStep512TokensOf256Sessions(benchmark::State& state) {
  run_steps(state, 65536, 0, 2, true);
}
BENCHMARK(BM_PrefillStep512TokensOf256Sessions)->Unit(benchmark::kMicrosecond);

// The same 512 tokens on sessions that already hold 200 positions each.
void BM_PrefillStep512TokensOf256SessionsWithContext200(benchmark::State& state) {
  run_steps(state, 65536, 200, 2, true);
}
BENCHMARK(BM_PrefillStep512TokensOf256SessionsWithContext200)->Unit(benchmark::kMicrosecond);

// One token per session, 2,000-token contexts: 512,256 cells in use, 512,256 visible.
void BM_DecodeStep256SessionsOf2000Tokens(benchmark::State& state) {
  run_steps(state, 1 << 19, 2000, 1, true);
}
BENCHMARK(BM_DecodeStep256SessionsOf2000Tokens)->Unit(benchmark::kMicrosecond);

// The same with a fresh CellStep per step: what buffer reuse saves.
void BM_DecodeStep256SessionsOf2000TokensFreshCellStep(benchmark::State& state) {
  run_steps(state, 1 << 19, 2000, 1, false);
}
BENCHMARK(BM_DecodeStep256SessionsOf2000TokensFreshCellStep)->Unit(benchmark::kMicrosecond);

// What an executor does per decode step before its forward: pack the batch in the session table,
// then declare and place it (one slice), then (here) roll it back.
void BM_PackAndPlaceDecodeStep256SessionsOf2000Tokens(benchmark::State& state) {
  CellCache cache(1 << 19);
  SessionTable table(
      cache, {.max_sessions = kNumSessions, .max_session_tokens = 4096, .vocab_size = 32000});
  std::vector<SessionId> sessions;
  for (int32_t i = 0; i < kNumSessions; ++i) sessions.push_back(*table.open());
  const std::vector<int32_t> one_token = {7};
  for (int32_t p = 0; p < 2000; ++p) {
    BatchInput batch;
    for (SessionId id : sessions) batch.inputs.push_back({id, p, one_token, 0, 1, true});
    StatusOr<PackedStep> packed = table.pack(batch);
    if (!packed.ok() || !*cache.declare_step(packed->seq_ids, packed->positions)) std::abort();
    cache.place();
  }
  BatchInput batch;
  for (SessionId id : sessions) batch.inputs.push_back({id, 2000, one_token, 0, 1, true});
  CellStep step;
  for (auto _ : state) {
    StatusOr<PackedStep> packed = table.pack(batch);
    if (!packed.ok() || !*cache.declare_step(packed->seq_ids, packed->positions)) {
      state.SkipWithError("step refused");
      break;
    }
    cache.place(&step);
    benchmark::DoNotOptimize(step.seq_cells.data());
    table.rollback(*packed);
  }
}
BENCHMARK(BM_PackAndPlaceDecodeStep256SessionsOf2000Tokens)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace cellm

BENCHMARK_MAIN();
