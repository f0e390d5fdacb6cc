// row_draw: a row's draw over a cluster of blocks (row_draw.cuh).
//
// Each block of a row's cluster holds its part's value keys in shared memory — the logit's bits
// ordered so that a smaller key is a larger logit, non-finite logits marked out — and a token's
// key is (value key << 24) | id, so ascending keys are the sampler's best-first order. A selection
// (the first running key whose cumulative count or mass passes a target) descends the 56-bit key
// 8 bits a pass: every block counts and weighs its running keys that share the digits chosen so
// far by their next digit, the cluster syncs, and every block sums the cluster's histograms and
// picks the same bin. A bin holding one key ends the descent (the bin records that key). A warp
// adds its keys of one bin with one set of 32-bit shared atomics. On the H200 a 128,256-logit row
// with a nucleus past its list takes ≈ 105 µs this way (docs/perf/serve.md, "Ninth call").
// Histograms alternate between two buffers, so one cluster barrier a pass suffices: a block
// clears a buffer only after the barrier that follows every block's reading of it.
#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/row_draw.cuh"
#include "core/listed_draw.h"

namespace cellm::kernels {
namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 1024;
constexpr int kBins = 256;
constexpr int kDigitBits = 8;
constexpr int kIdBits = 24;    // a key's id field: vocabularies below 2^24
constexpr int kTopShift = 48;  // the first digit's shift: keys are 56 bits
constexpr uint32_t kNotFinite = 0xffffffffu;
constexpr uint64_t kNoKey = ~0ull;  // also "no bound": every key lies below it
constexpr unsigned kFull = 0xffffffffu;
// A weight of 1 is 2^kMaxScaleBits or less in fixed point, so 32 masses' parts below and above
// kLowBits each sum within 32 bits.
constexpr int kMaxScaleBits = 46;
constexpr int kLowBits = 26;
constexpr uint64_t kLowMask = (uint64_t{1} << kLowBits) - 1;
static_assert(kLowBits + 5 <= 32 && kMaxScaleBits - kLowBits + 5 <= 32, "warp sums fit 32 bits");

static_assert(kRowDrawMaxVocab < (int64_t{1} << kIdBits), "ids fit the key's id field");

// One block's histogram of a pass: per bin the running keys' count, mass (in two 32-bit halves:
// shared memory has no 64-bit atomic add, and a compare-and-swap loop under the first passes'
// contention — most keys share their top digits — costs tens of microseconds) and its first
// adder's key (the key itself where the bin holds one).
struct Bins {
  unsigned int mass_low[kBins];
  unsigned int mass_high[kBins];
  unsigned int count[kBins];
  unsigned long long key[kBins];

  __device__ void clear(int b) {
    mass_low[b] = 0;
    mass_high[b] = 0;
    count[b] = 0;
    key[b] = 0;
  }
  // Adds `num` keys of `mass` to bin b, one of them `any_key` (kept by the bin's first adder).
  __device__ void add(int b, unsigned num, uint64_t mass, uint64_t any_key) {
    if (atomicAdd(&count[b], num) == 0) key[b] = any_key;
    add_mass(b, mass);
  }
  __device__ void add_mass(int b, uint64_t mass) {
    const auto low = static_cast<unsigned>(mass);
    auto high = static_cast<unsigned>(mass >> 32);
    const unsigned before = atomicAdd(&mass_low[b], low);
    if (before + low < before) ++high;  // the carry out of the low half
    if (high != 0) atomicAdd(&mass_high[b], high);
  }
  __device__ uint64_t mass(int b) const {
    return (static_cast<uint64_t>(mass_high[b]) << 32) | mass_low[b];
  }
};

struct Shared {
  Bins bins[2];  // alternate passes
  // The cluster's histogram of the current pass (summed by every block alike).
  unsigned long long sum_mass[kBins];
  unsigned long long sum_key[kBins];  // the key of a bin that holds one
  unsigned int sum_count[kBins];
  int picked_bin;                    // kBins: the histogram's weight does not pass the target
  unsigned long long picked_before;  // the weight of the bins before it
};

// What a selection found: the key, the running mass before it and its own mass.
struct Selection {
  uint64_t key = kNoKey;  // kNoKey: nothing passes the target
  uint64_t mass_before = 0;
  uint64_t mass = 0;
};

enum class By { kCount, kMass };

__device__ __forceinline__ uint32_t value_key(float v) {
  if (!isfinite(v)) return kNotFinite;
  if (v == 0.0f) v = 0.0f;  // −0 ties +0, as the host compares them
  const uint32_t bits = __float_as_uint(v);
  const uint32_t ascending = (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
  return ~ascending;
}

__device__ __forceinline__ float logit_of(uint32_t value_key) {
  const uint32_t ascending = ~value_key;
  return __uint_as_float((ascending & 0x80000000u) != 0 ? ascending & 0x7fffffffu : ~ascending);
}

// A row's part and the chain's constants, the same in every thread of the cluster.
struct Row {
  const uint32_t* keys;  // shared: the part's value keys
  int32_t num;           // the part's length
  int32_t first_id;      // the part's first token
  double inv_temperature;
  double top;    // max · (1/T), as the host computes it
  double min_p;  // 0: no min-p
  double scale;  // a weight of 1 in fixed point: 2^min(46, 63 − bits of the vocabulary)

  // exp(v · (1/T) − top), the product and the difference rounded apart as the host's.
  __device__ double weight(uint32_t value_key) const {
    return exp(
        __dsub_rn(__dmul_rn(static_cast<double>(logit_of(value_key)), inv_temperature), top));
  }
  __device__ uint64_t mass(double weight) const { return __double2ull_rn(weight * scale); }
  __device__ uint64_t key(int i) const {
    return (uint64_t{keys[i]} << kIdBits) | static_cast<uint64_t>(first_id + i);
  }
};

// This block's histogram, by the digit at `shift`, of its running keys: finite, at most `bound`,
// sharing `prefix`'s digits above `shift`, with min-p at a weight of at least it. Masses are
// computed only where `weighs` (or min-p needs the weight). A warp adds its keys that share a bin
// at once (the first passes put most keys of a part in a few bins; later ones spread them).
__device__ void count_part(const Row& row, Bins& bins, uint64_t prefix, int shift, uint64_t bound,
                           bool with_min_p, bool weighs) {
  for (int b = static_cast<int>(threadIdx.x); b < kBins; b += kThreads) bins.clear(b);
  __syncthreads();
  const int lane = static_cast<int>(threadIdx.x & 31);
  for (int first = static_cast<int>(threadIdx.x) - lane; first < row.num; first += kThreads) {
    const int i = first + lane;  // the warp's trip count is uniform
    bool running = i < row.num && row.keys[i] != kNotFinite;
    const uint64_t key = running ? row.key(i) : 0;
    running =
        running && key <= bound &&
        (shift == kTopShift || (key >> (shift + kDigitBits)) == (prefix >> (shift + kDigitBits)));
    uint64_t mass = 0;
    if (running && (weighs || with_min_p)) {
      const double weight = row.weight(row.keys[i]);
      running = !with_min_p || weight >= row.min_p;
      mass = row.mass(weight);
    }
    const int bin = running ? static_cast<int>((key >> shift) & (kBins - 1)) : -1;
    // The warp's keys that share a bin are added by their first lane — each group's sums wait
    // only for its own members: their count, and their mass summed as parts of 26 bits and less
    // (the first passes put most keys of a part in a few bins, later ones spread them; a warp
    // looping over the shared bins with full-warp sums measured 5% slower).
    const unsigned peers = __match_any_sync(kFull, bin);
    if (running) {
      uint64_t sum = mass;
      if (weighs && __popc(peers) > 1) {
        const unsigned low = __reduce_add_sync(peers, static_cast<unsigned>(mass & kLowMask));
        const unsigned high = __reduce_add_sync(peers, static_cast<unsigned>(mass >> kLowBits));
        sum = (static_cast<uint64_t>(high) << kLowBits) + low;
      }
      if (lane == __ffs(peers) - 1) bins.add(bin, __popc(peers), sum, key);
    }
  }
}

// After every block's count_part into `buffer`: the cluster's histogram in s.sum_*.
__device__ void sum_cluster(cg::cluster_group& cluster, Shared& s, int buffer) {
  cluster.sync();
  for (int b = static_cast<int>(threadIdx.x); b < kBins; b += kThreads) {
    unsigned long long mass = 0;
    unsigned long long key = 0;
    unsigned int count = 0;
    for (int rank = 0; rank < kRowDrawBlocks; ++rank) {
      const Bins* remote = cluster.map_shared_rank(&s.bins[buffer], rank);
      mass += remote->mass(b);
      if (remote->count[b] != 0) key = remote->key[b];  // read where the cluster's count is 1
      count += remote->count[b];
    }
    s.sum_mass[b] = mass;
    s.sum_key[b] = key;
    s.sum_count[b] = count;
  }
  __syncthreads();
}

// The first warp: the first bin, in key order, where the histogram's running weight passes
// `target`, and the weight of the bins before it (s.picked_*). Every thread waits after it.
__device__ void pick_bin(Shared& s, By by, uint64_t target) {
  if (threadIdx.x < 32) {
    const int lane = static_cast<int>(threadIdx.x);
    constexpr int kPerLane = kBins / 32;
    uint64_t weight[kPerLane];
    uint64_t sum = 0;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int b = lane * kPerLane + k;
      weight[k] = by == By::kMass ? s.sum_mass[b] : s.sum_count[b];
      sum += weight[k];
    }
    uint64_t inclusive = sum;
    for (int offset = 1; offset < 32; offset <<= 1) {
      const uint64_t below = __shfl_up_sync(kFull, inclusive, offset);
      if (lane >= offset) inclusive += below;
    }
    const unsigned passing = __ballot_sync(kFull, inclusive > target);
    if (passing == 0) {
      if (lane == 0) s.picked_bin = kBins;
    } else if (lane == __ffs(passing) - 1) {
      uint64_t before = inclusive - sum;
      int k = 0;
      while (before + weight[k] <= target) before += weight[k++];  // k < kPerLane: it passes
      s.picked_bin = lane * kPerLane + k;
      s.picked_before = before;
    }
  }
  __syncthreads();
}

// The first running key (as count_part runs them) whose cumulative count or mass, in key order,
// exceeds `target`. Uniform over the cluster.
__device__ Selection select_key(cg::cluster_group& cluster, const Row& row, Shared& s, int& pass,
                                By by, uint64_t target, uint64_t bound, bool with_min_p) {
  uint64_t prefix = 0;
  uint64_t mass_before = 0;
  for (int shift = kTopShift; shift >= 0; shift -= kDigitBits) {
    const int buffer = pass++ & 1;
    count_part(row, s.bins[buffer], prefix, shift, bound, with_min_p, by == By::kMass);
    sum_cluster(cluster, s, buffer);
    pick_bin(s, by, target);
    const int bin = s.picked_bin;
    if (bin == kBins) return {};
    target -= s.picked_before;
    mass_before += by == By::kMass ? s.picked_before : 0;
    prefix |= static_cast<uint64_t>(bin) << shift;
    if (s.sum_count[bin] == 1 || shift == 0) return {s.sum_key[bin], mass_before, s.sum_mass[bin]};
  }
  return {};  // not reached: the last digit's bin holds one key
}

// The running keys' (at most `bound`) total mass, and that of those at or above min-p.
__device__ void sum_masses(cg::cluster_group& cluster, const Row& row, Shared& s, int& pass,
                           uint64_t bound, bool with_min_p, uint64_t* total, uint64_t* kept) {
  const int buffer = pass++ & 1;
  Bins& bins = s.bins[buffer];
  for (int b = static_cast<int>(threadIdx.x); b < kBins; b += kThreads) bins.clear(b);
  __syncthreads();
  unsigned long long all = 0;
  unsigned long long above = 0;
  for (int i = static_cast<int>(threadIdx.x); i < row.num; i += kThreads) {
    if (row.keys[i] == kNotFinite || row.key(i) > bound) continue;
    const double weight = row.weight(row.keys[i]);
    const uint64_t mass = row.mass(weight);
    all += mass;
    if (!with_min_p || weight >= row.min_p) above += mass;
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    all += __shfl_xor_sync(kFull, all, offset);
    above += __shfl_xor_sync(kFull, above, offset);
  }
  if ((threadIdx.x & 31) == 0) {
    bins.add_mass(0, all);
    bins.add_mass(1, above);
  }
  sum_cluster(cluster, s, buffer);
  *total = s.sum_mass[0];
  *kept = s.sum_mass[1];
}

// grid (kRowDrawBlocks, rows), a cluster a row; `part` logits a block (the last may hold fewer).
__global__ void __cluster_dims__(kRowDrawBlocks, 1, 1) __launch_bounds__(kThreads)
    row_draw_kernel(RowDrawParams p, int32_t part, double scale) {
  cg::cluster_group cluster = cg::this_cluster();
  const auto row_index = static_cast<int64_t>(blockIdx.y);
  const RowCandidatesAsk ask = p.asks[row_index];
  RowCandidatesSummary* summary = p.summaries + row_index;
  // Every block reads the summary before its first barrier and the first block writes it after
  // its last, so the choice is the whole cluster's.
  if (!(ask.temperature > 0.0f) || ask.draw == 0 || summary->num <= 0 ||
      summary->drawn != kListedUndecided) {
    return;
  }
  extern __shared__ uint32_t keys[];  // [part] the part's value keys
  __shared__ Shared s;
  const auto first = static_cast<int64_t>(cluster.block_rank()) * part;
  const int32_t num = static_cast<int32_t>(max(int64_t{0}, min(int64_t{part}, p.vocab - first)));
  const float* logits = p.logits + row_index * p.stride + first;
  for (int i = static_cast<int>(threadIdx.x); i < num; i += kThreads)
    keys[i] = value_key(logits[i]);
  __syncthreads();

  Row row;
  row.keys = keys;
  row.num = num;
  row.first_id = static_cast<int32_t>(first);
  row.inv_temperature = 1.0 / static_cast<double>(ask.temperature);
  row.top = __dmul_rn(static_cast<double>(summary->max_logit), row.inv_temperature);
  row.min_p = static_cast<double>(ask.cuts.min_p);
  row.scale = scale;
  const bool with_min_p = ask.cuts.min_p > 0.0f;

  int pass = 0;
  uint64_t bound = kNoKey;
  if (ask.cuts.top_k > 0) {  // the k-th best, where there are k
    const Selection kth = select_key(cluster, row, s, pass, By::kCount,
                                     static_cast<uint64_t>(ask.cuts.top_k - 1), kNoKey, false);
    if (kth.key != kNoKey) bound = kth.key;
  }
  uint64_t total = 0;
  uint64_t kept = 0;
  sum_masses(cluster, row, s, pass, bound, with_min_p, &total, &kept);
  if (ask.cuts.top_p < 1.0f) {  // the first key whose cumulative mass reaches top-p of the total
    const double reach = ceil(static_cast<double>(ask.cuts.top_p) * static_cast<double>(total));
    const uint64_t target = reach < 1.0 ? 0 : static_cast<uint64_t>(reach) - 1;
    const Selection cut = select_key(cluster, row, s, pass, By::kMass, target, bound, with_min_p);
    if (cut.key != kNoKey) {
      bound = cut.key;
      kept = cut.mass_before + cut.mass;
    }
  }
  // The draw: the first key whose cumulative mass exceeds u · kept (the last if rounding says
  // none).
  const double u = draw_uniform(ask.seed, ask.position);
  uint64_t target = static_cast<uint64_t>(floor(u * static_cast<double>(kept)));
  if (target >= kept) target = kept - 1;
  const Selection drawn = select_key(cluster, row, s, pass, By::kMass, target, bound, with_min_p);
  if (cluster.block_rank() == 0 && threadIdx.x == 0 && drawn.key != kNoKey) {
    summary->drawn = static_cast<int32_t>(drawn.key & ((uint64_t{1} << kIdBits) - 1));
    summary->drawn_from_row = 1;
    summary->drawn_logit = logit_of(static_cast<uint32_t>(drawn.key >> kIdBits));
  }
  cluster.sync();  // no block leaves while another may still read its histograms
}

}  // namespace

Status launch_row_draw(const RowDrawParams& p, cudaStream_t stream) {
  if (p.num_rows < 0 || p.num_rows > 65535 || p.vocab <= 0 || p.vocab > kRowDrawMaxVocab ||
      p.stride < p.vocab ||
      (p.num_rows > 0 && (p.logits == nullptr || p.asks == nullptr || p.summaries == nullptr))) {
    return invalid_argument("row draw: " + std::to_string(p.num_rows) + " rows of " +
                            std::to_string(p.vocab) + " logits (at most " +
                            std::to_string(kRowDrawMaxVocab) + "), stride " +
                            std::to_string(p.stride) + ", or a null pointer");
  }
  if (p.num_rows == 0) return ok_status();
  const auto part = static_cast<int32_t>((p.vocab + kRowDrawBlocks - 1) / kRowDrawBlocks);
  const size_t shared_bytes = static_cast<size_t>(part) * sizeof(uint32_t);
  const int vocab_bits = 64 - __builtin_clzll(static_cast<unsigned long long>(p.vocab));
  // vocab · scale <= 2^63: every sum fits.
  const double scale = std::ldexp(1.0, std::min(kMaxScaleBits, 63 - vocab_bits));
  // Raised once, to the longest part (not a stream operation: fine under capture).
  static const Status raised = [] {
    cudaFuncSetAttribute(row_draw_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(kRowDrawMaxVocab / kRowDrawBlocks * sizeof(uint32_t)));
    return launch_status("row draw: cudaFuncSetAttribute");
  }();
  CELLM_RETURN_IF_ERROR(raised);
  const dim3 grid(kRowDrawBlocks, static_cast<unsigned>(p.num_rows));
  row_draw_kernel<<<grid, kThreads, shared_bytes, stream>>>(p, part, scale);
  return launch_status("row draw");
}

}  // namespace cellm::kernels
