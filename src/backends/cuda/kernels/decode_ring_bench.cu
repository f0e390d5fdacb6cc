// decode_ring_bench: the one-launch chain of a decode step's layer products with its weights
// streamed through a ring of shared-memory slots (see the header). Block b owns a balanced range
// of each stage's tiles (R rows of the stage; gate|up: R / 2 gate rows and their R / 2 up rows);
// the block's tiles of all stages, in stage order, are numbered n = 0, 1, …; tile n goes
// through slot n % slots and is consumer warp n % warps's (slots a multiple of warps, so each
// slot serves one warp, whose waits are then never two phases ahead of the slot's barriers). The
// producer thread waits for the slot's `empty` barrier, then copies the tile into it with one or
// two bulk copies completing on its `full` barrier. The consumer warp waits for `full`,
// multiplies the tile's rows by the stage's int8 input in shared memory (lane l: chunks l,
// l + 32, …), releases the slot and writes the rows' results. Between stages the consumer warps
// meet (a named barrier), count the block in at the grid counter, wait for every block, and
// quantize the next stage's input — or, with the handover, quantize their own blocks of 32
// outputs before counting in and copy the next input as handed over; the producer does not take
// part, so the ring keeps filling. The block's stage of each kind is computed once (StageTable),
// and a kernel is built for each tile shape and weight layout, holding only the code it runs (the
// chains 0.04–0.1 ms faster than with ring_stage at every boundary in one kernel for all cases).
#include <algorithm>

#include "backends/cuda/kernels/decode_chain_bench.cuh"
#include "backends/cuda/kernels/decode_ring_bench.h"
#include "backends/cuda/kernels/decode_ring_handover.cuh"
#include "backends/cuda/kernels/decode_ring_parts.cuh"
#include "backends/cuda/kernels/weight_layout.h"

namespace cellm::kernels {
namespace ring {
namespace {

// kTimed: RingShape::timeline is set (a kernel of its own, so that the timing code cannot change
// the untimed one). kBlockMajor: RingShape::block_major. kHiddenRows / kFfnRows: the tiles' rows
// of the stages over `hidden` / `ffn` columns. A kernel holds only the code it runs.
template <class Decoder, int kConsumers, bool kTimed, bool kBlockMajor, int kHiddenRows,
          int kFfnRows>
__global__ void __launch_bounds__((kConsumers + 1) * 32, 1)
    ring_chain_kernel(const RingKernelArgs k) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  constexpr int kThreads = kConsumers * 32;
  const PersistentChainArgs& a = k.a;
  extern __shared__ __align__(128) uint8_t ring_smem[];
  __shared__ uint64_t full[kMaxSlots];
  __shared__ uint64_t empty[kMaxSlots];
  __shared__ StageTable table;
  __shared__ double norm_partial[kConsumers];
  __shared__ float staged[256];      // handover: the block's outputs of the stage
  __shared__ float residual_x[256];  // handover: ResidualSlice
  __shared__ float residual_norm[256];
  __shared__ unsigned long long stage_wait[2];  // timeline: cycles waited for full slots
  const int64_t max_cols = a.hidden > a.ffn ? a.hidden : a.ffn;
  uint8_t* ring = ring_smem;  // [slots][slot_bytes]
  auto* scales = reinterpret_cast<float*>(ring_smem + static_cast<size_t>(k.slots) * k.slot_bytes);
  auto* q = reinterpret_cast<int8_t*>(scales + max_cols / 32);  // [max_cols], interleaved
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (threadIdx.x == 0) {
    for (int i = 0; i < k.slots; ++i) {
      mbarrier_init(&full[i], 1);
      mbarrier_init(&empty[i], 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    stage_wait[0] = 0;
    stage_wait[1] = 0;
    for (int kind = 0; kind < kStagesPerLayer; ++kind) table.kinds[kind] = ring_stage(k, kind);
  }
  __syncthreads();
  const TimelineWriter<kTimed> timeline{k.timeline};
  const int num_stages = a.num_layers * kStagesPerLayer;
  timeline.mark(num_stages, RingTimeline::kStartNs);
  timeline.mark_cycles(num_stages, RingTimeline::kStartCycles);
  if (warp == kConsumers) {
    if (lane == 0 && k.stream_weights) produce(k, table, ring, full, empty);
    return;
  }
  Int8Rows<1> input;
  input.x[0] = q;
  input.scales[0] = scales;
  const ResidualSlice slice{residual_x, residual_norm};
  if (k.handover) {  // ordered before their first use by prepare_input's barriers
    const int64_t first = 32 * (a.hidden / 32 * blockIdx.x / gridDim.x);
    const int64_t count = 32 * (a.hidden / 32 * (blockIdx.x + 1) / gridDim.x) - first;
    for (int64_t i = threadIdx.x; i < count; i += kThreads) {
      residual_x[i] = __ldcg(a.x + first + i);
      residual_norm[i] = __ldg(a.norm_weight + first + i);
    }
  }
  uint32_t n = 0;                      // the block's first tile of the stage
  unsigned long long wait_cycles = 0;  // timeline: this warp's waits for full slots in the stage
  RingStage st = table.at(k, 0);
  constexpr int kNormVectors = norm_vectors(kConsumers);
  if (!a.skip_inputs)
    prepare_input<kThreads, kNormVectors>(a, st.kind, q, scales, norm_partial, !k.block_major);
  timeline.mark(0, RingTimeline::kReady);
  for (int s = 0; s < num_stages; ++s) {
    const int64_t num_tiles = st.num_tiles();
    // Tile m is warp m % kConsumers's, so a slot (m % slots) serves one warp, in its order.
    const int64_t first = (warp - static_cast<int>(n % kConsumers) + kConsumers) % kConsumers;
    for (int64_t i = first; i < num_tiles; i += kConsumers) {
      const uint32_t m = n + static_cast<uint32_t>(i);
      const uint32_t slot = m % static_cast<uint32_t>(k.slots);
      if (k.stream_weights) {
        const long long wait_start = kTimed ? clock64() : 0;
        mbarrier_wait(&full[slot], (m / static_cast<uint32_t>(k.slots)) & 1);
        if (kTimed) wait_cycles += clock64() - wait_start;
      }
      const uint8_t* tile = ring + static_cast<size_t>(slot) * k.slot_bytes;
      uint64_t* slot_empty = k.stream_weights ? &empty[slot] : nullptr;
      float* outputs = k.handover ? staged : nullptr;
      if (st.kind == kDownStage) {
        consume_tile<Decoder, kBlockMajor, kFfnRows>(a, tile, st, st.tile(i), input, lane,
                                                     slot_empty, outputs);
      } else {
        consume_tile<Decoder, kBlockMajor, kHiddenRows>(a, tile, st, st.tile(i), input, lane,
                                                        slot_empty, outputs);
      }
    }
    n += static_cast<uint32_t>(num_tiles);
    if (kTimed && lane == 0) atomicAdd(&stage_wait[s & 1], wait_cycles);
    wait_cycles = 0;
    consumer_barrier<kThreads>();  // the block is done with stage s and its input
    if constexpr (kTimed) {
      timeline.mark(s, RingTimeline::kTilesDone);
      timeline.put(s, RingTimeline::kWaitCycles, stage_wait[s & 1] / kConsumers);
      timeline.put(s, RingTimeline::kTiles, static_cast<uint64_t>(num_tiles));
      if (threadIdx.x == 0) stage_wait[(s + 1) & 1] = 0;  // added to after the next barrier
    }
    if (k.handover) {
      hand_over<kConsumers>(k, st, s, s + 1 == num_stages, staged, slice, warp, lane);
      timeline.mark(s, RingTimeline::kHandedOwn);
      consumer_barrier<kThreads>();
    }
    timeline.mark(s, RingTimeline::kHanded);
    if (s + 1 == num_stages) {
      timeline.mark(s, RingTimeline::kPassed);
      break;
    }
    st = table.at(k, s + 1);
    if (!a.skip_barriers) {
      if (threadIdx.x == 0) {
        // Release: the block's outputs, ordered before by the named barrier, then the count.
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(a.barrier) : "memory");
        const unsigned target = static_cast<unsigned>(s + 1) * gridDim.x;
        const uint64_t start = global_ns();
        while (load_acquire(a.barrier) < target) {
          if (global_ns() - start > kWaitLimitNs) __trap();
        }
      }
      consumer_barrier<kThreads>();
    }
    timeline.mark(s, RingTimeline::kPassed);
    if (!a.skip_inputs) {
      if (k.handover) {
        take_handover<kThreads>(k, st.kind, s & 1, q, scales, norm_partial);
      } else {
        prepare_input<kThreads, kNormVectors>(a, st.kind, q, scales, norm_partial, !k.block_major);
      }
    }
    timeline.mark(s + 1, RingTimeline::kReady);
  }
  timeline.mark(num_stages, RingTimeline::kEndNs);
  timeline.mark_cycles(num_stages, RingTimeline::kEndCycles);
#else
  (void)k;
#endif
}

// Rows per tile: the most of 8, 4, 2, 1 whose bytes fit a slot (gate|up: at least 2); 0 if none.
int tile_rows(uint64_t row_bytes, uint64_t slot_bytes, bool pairs) {
  for (const int r : {8, 4, 2, 1}) {
    if (row_bytes * r <= slot_bytes) return r == 1 && pairs ? 0 : r;
  }
  return 0;
}

template <class Decoder, int kConsumers, int kHiddenRows, int kFfnRows>
cudaError_t launch_rows(const RingKernelArgs& k, cudaStream_t stream) {
  using Kernel = void (*)(RingKernelArgs);
  const bool timed = k.timeline != nullptr;
  Kernel kernel = timed
                      ? ring_chain_kernel<Decoder, kConsumers, true, false, kHiddenRows, kFfnRows>
                      : ring_chain_kernel<Decoder, kConsumers, false, false, kHiddenRows, kFfnRows>;
  if constexpr (std::is_same_v<Decoder, DecodeQ4_0>) {
    if (k.block_major) {
      kernel = timed ? ring_chain_kernel<Decoder, kConsumers, true, true, kHiddenRows, kFfnRows>
                     : ring_chain_kernel<Decoder, kConsumers, false, true, kHiddenRows, kFfnRows>;
    }
  }
  const int64_t max_cols = std::max(k.a.hidden, k.a.ffn);
  const size_t smem_bytes = static_cast<size_t>(k.slots) * k.slot_bytes +
                            static_cast<size_t>(max_cols / 32 * 4 + max_cols);
  return launch_chain(kernel, k, k.a, (kConsumers + 1) * 32, smem_bytes, stream);
}

// The tile shapes built: 8 warps, 8 rows over `hidden` and 2 over `ffn` (Q4_0 in 18 KB slots) or
// 4 and 1 (Q8_0 in 18 KB, Q4_0 in 9 KB); 16 warps, 4 and 1.
template <class Decoder, int kConsumers>
cudaError_t launch_typed(const RingKernelArgs& k, cudaStream_t stream) {
  if (k.a.hidden > 4 * norm_vectors(kConsumers) * 32 * kConsumers) return cudaErrorInvalidValue;
  if (k.hidden_tile_rows == 4 && k.ffn_tile_rows == 1) {
    return launch_rows<Decoder, kConsumers, 4, 1>(k, stream);
  }
  if constexpr (kConsumers == 8) {
    if (k.hidden_tile_rows == 8 && k.ffn_tile_rows == 2) {
      return launch_rows<Decoder, kConsumers, 8, 2>(k, stream);
    }
  }
  return cudaErrorInvalidValue;
}

template <class Decoder>
cudaError_t launch_decoder(const RingKernelArgs& k, int consumer_warps, cudaStream_t stream) {
  switch (consumer_warps) {
    case 8:
      return launch_typed<Decoder, 8>(k, stream);
    case 16:
      return launch_typed<Decoder, 16>(k, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

// One thread per byte of a block-major row (repack_q4_0_block_major).
__global__ void repack_q4_0_kernel(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols) {
  const int64_t nibble_bytes = cols / 2;
  const int64_t row_bytes = nibble_bytes + cols / 16;  // nibbles, then an f16 scale per 32
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * row_bytes) return;
  const int64_t row = i / row_bytes;
  const int64_t b = i % row_bytes;
  const uint8_t* from = src + row * row_bytes;
  if (b >= nibble_bytes) {  // the scales keep their place
    dst[i] = from[b];
    return;
  }
  // Element e of block `block` sits in the device layout's chunk 8 · (block / 8) + e / 4, word
  // (block % 8) / 2, byte e % 4, nibble (block % 2).
  const int64_t block = b / 16;
  const auto nibble = [&](int e) {
    const int64_t at = 16 * (8 * (block >> 3) + (e >> 2)) + 4 * ((block & 7) >> 1) + (e & 3);
    return (from[at] >> (4 * (block & 1))) & 0x0f;
  };
  const int lo = static_cast<int>(b % 16);
  dst[i] = static_cast<uint8_t>(nibble(lo) | (nibble(lo + 16) << 4));
}

}  // namespace
}  // namespace ring

cudaError_t repack_q4_0_block_major(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols,
                                    cudaStream_t stream) {
  if (src == nullptr || dst == nullptr || rows <= 0 || cols <= 0 || cols % 256 != 0) {
    return cudaErrorInvalidValue;
  }
  const int64_t bytes = rows * (cols / 2 + cols / 16);
  constexpr int kThreads = 256;
  ring::repack_q4_0_kernel<<<static_cast<unsigned>((bytes + kThreads - 1) / kThreads), kThreads, 0,
                             stream>>>(src, dst, rows, cols);
  return cudaGetLastError();
}

size_t ring_timeline_words(int num_layers, int num_blocks) {
  return static_cast<size_t>(num_layers * ring::kStagesPerLayer + 1) * num_blocks *
         RingTimeline::kFields;
}

size_t ring_handover_scratch_bytes() {
  return 2 *
         (ring::kHandPartials * sizeof(double) + ring::kHandScales * sizeof(float) + ring::kHandQ);
}

cudaError_t launch_ring_chain(const PersistentChainArgs& a, const RingShape& shape,
                              cudaStream_t stream) {
  const bool shape_ok =
      a.num_layers > 0 && a.hidden % 256 == 0 && a.ffn % 256 == 0 && a.qkv_rows >= a.hidden &&
      shape.slots_per_warp >= 1 && shape.consumer_warps * shape.slots_per_warp <= ring::kMaxSlots &&
      shape.copies_in_flight >= 0 && shape.slot_bytes % 16 == 0 &&
      static_cast<size_t>(shape.consumer_warps) * shape.slots_per_warp * shape.slot_bytes <=
          ring::kMaxRingBytes;
  if (!shape_ok || a.layers == nullptr || a.x == nullptr || a.qkv == nullptr || a.act == nullptr ||
      a.norm_weight == nullptr || a.barrier == nullptr) {
    return cudaErrorInvalidValue;
  }
  ring::RingKernelArgs k;
  k.a = a;
  k.hidden_row_bytes = static_cast<uint32_t>(device_row_bytes(a.type, a.hidden));
  k.ffn_row_bytes = static_cast<uint32_t>(device_row_bytes(a.type, a.ffn));
  k.hidden_tile_rows = ring::tile_rows(k.hidden_row_bytes, shape.slot_bytes, true);
  k.ffn_tile_rows = ring::tile_rows(k.ffn_row_bytes, shape.slot_bytes, false);
  k.slots = shape.consumer_warps * shape.slots_per_warp;
  k.slot_bytes = shape.slot_bytes;
  k.copies_in_flight =
      shape.copies_in_flight > 0 ? std::min(shape.copies_in_flight, k.slots) : k.slots;
  k.stream_weights = shape.stream_weights;
  k.block_major = shape.block_major && a.type == TensorType::kQ4_0;
  k.handover = shape.handover_scratch != nullptr;
  k.timeline = shape.timeline;
  if (k.handover) {
    auto* scratch = static_cast<uint8_t*>(shape.handover_scratch);
    k.hand_partials = reinterpret_cast<double*>(scratch);
    k.hand_scales = reinterpret_cast<float*>(scratch + 2 * ring::kHandPartials * sizeof(double));
    k.hand_q = reinterpret_cast<int8_t*>(scratch + 2 * ring::kHandPartials * sizeof(double) +
                                         2 * ring::kHandScales * sizeof(float));
    if (std::max(a.hidden, a.ffn) > ring::kHandQ || a.hidden / 32 > ring::kHandPartials) {
      return cudaErrorInvalidValue;
    }
  }
  if (k.handover) {  // at most 8 blocks of 32 per block and stage (staged), k|v shares ≥ 0
    int blocks = 0;
    if (const cudaError_t error = chain_bench::chain_blocks(a, &blocks); error != cudaSuccess) {
      return error;
    }
    if (std::max(a.qkv_rows, a.ffn) / 32 > 8 * static_cast<int64_t>(blocks) ||
        k.hidden_tile_rows < 1 || 32 % k.hidden_tile_rows != 0) {
      return cudaErrorInvalidValue;
    }
    for (int64_t b = 0; b < blocks; ++b) {
      if (ring::qkv_kv_tile_begin(a.hidden, a.qkv_rows, k.hidden_tile_rows, b + 1, blocks) <
          ring::qkv_kv_tile_begin(a.hidden, a.qkv_rows, k.hidden_tile_rows, b, blocks)) {
        return cudaErrorInvalidValue;
      }
    }
  }
  const bool tiles_ok = k.hidden_tile_rows >= 2 && k.ffn_tile_rows >= 1 &&
                        a.qkv_rows % k.hidden_tile_rows == 0 &&
                        a.hidden % k.hidden_tile_rows == 0 &&
                        a.ffn % (k.hidden_tile_rows / 2) == 0 && a.hidden % k.ffn_tile_rows == 0;
  if (!tiles_ok) return cudaErrorInvalidValue;
  switch (a.type) {
    case TensorType::kQ8_0:
      return ring::launch_decoder<DecodeQ8_0>(k, shape.consumer_warps, stream);
    case TensorType::kQ4_0:
      return ring::launch_decoder<DecodeQ4_0>(k, shape.consumer_warps, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace cellm::kernels