// decode_ring_bench: the second feasibility prototype of decode.md's "What is left" 1 — a decode
// step's layer products for one token (the chain of decode_persistent_bench.h: q|k|v, output,
// gate|up with SwiGLU, down; no attention) as ONE cooperative launch whose weights stream into a
// ring of shared-memory slots by bulk copies (TMA) that one producer thread issues for the
// block's tiles of every stage in order, decoupled from the stages' grid barriers: while the
// block's consumer warps wait at a barrier or quantize the next stage's input, the ring keeps
// filling, so the bus need not idle at stage boundaries. Each consumer warp multiplies whole
// tiles (a few rows) from the ring with the shipped int8 dot products. Optionally the blocks hand
// each stage's output to the next as int8 (RingShape::handover_scratch).
// The decode benchmark (`cuda_decode_bench --ring`) times it against the launches and reports
// the residuals' difference. Benchmark only; not linked into the backend. Thread-safety:
// launches on the given stream.
#pragma once

#include <cuda_runtime.h>

#include "backends/cuda/kernels/decode_persistent_bench.h"

namespace cellm::kernels {

struct RingShape {
  int consumer_warps = 8;      // 8 or 16, plus one producer warp per block
  int slots_per_warp = 2;      // slots per block: consumer_warps · slots_per_warp ≤ 24
  uint32_t slot_bytes = 9216;  // ≥ a weight row; at most 208 KB of slots per block
  // Bulk copies in flight per block at most (0: one per slot). Every round trip of a boundary
  // waits behind the chip's bytes in flight, a release fence behind its SM's
  // (decode_latency_probe.h: a handoff 2.5–9.8 µs one way with 192 KB in flight on every
  // SM, 1.6–2.3 µs with 64 KB, the stream within 5%); slots whose copies have landed cost nothing.
  // The chain measured the same with 3 or 4 in flight as with 8 (decode.md version 18): its
  // boundaries are paced elsewhere.
  int copies_in_flight = 0;
  // Measurement knob (results wrong when false): no bulk copies, the consumers multiply whatever
  // the slots hold without waiting — their compute rate, and the stage boundaries' cost without
  // weight traffic.
  bool stream_weights = true;
  // Q4_0 weights in the block-major layout of repack_q4_0_block_major (args.layers must hold
  // them): each lane's 16 weight bytes are one whole block of 32, multiplied by int8 inputs in
  // natural order — one integer sum and one scale per block and row instead of per group of 4.
  bool block_major = false;
  // Int8 inputs handed over by their producers: ring_handover_scratch_bytes() of device scratch;
  // nullptr: every block quantizes the stage's f32 input itself.
  void* handover_scratch = nullptr;
  // Measurement (timing unchanged otherwise): when set, ring_timeline_words() words that the
  // kernel fills with when each block reached each point of each stage (RingTimeline).
  uint64_t* timeline = nullptr;
};

// The timeline's layout: [num_stages + 1][num_blocks][kFields] words. Row s < num_stages, block b:
// globaltimer ns when b's input for stage s was ready, when its tiles of s were multiplied, when
// its first consumer warp had handed its own outputs over, when all had, when it passed the grid
// barrier after s (the last stage: the handover time again); the clock cycles its consumer warps
// waited for full slots in s (the mean over warps); its tiles in s. Row num_stages: globaltimer
// ns and clock cycles at the kernel's start and end (their ratio converts cycles to ns).
struct RingTimeline {
  enum Field : int {
    kReady = 0,
    kTilesDone,
    kHandedOwn,
    kHanded,
    kPassed,
    kWaitCycles,
    kTiles,
    kFields
  };
  enum EndField : int { kStartNs = 0, kStartCycles, kEndNs, kEndCycles };
};
size_t ring_timeline_words(int num_layers, int num_blocks);

// The Q4_0 weight rows of `rows` × `cols` in the device layout (weight_layout.h: each 32-element
// chunk holds four elements of each of a span's 8 blocks) rewritten block-major into `dst`: chunk
// c is block c, its 16 bytes the block's nibbles in GGUF order (byte i: elements i and i + 16),
// the row's f16 block scales after its nibbles as before. Benchmark only.
cudaError_t repack_q4_0_block_major(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols,
                                    cudaStream_t stream);

// Bytes of RingShape::handover_scratch (for hidden and ffn up to 16384 columns).
size_t ring_handover_scratch_bytes();

// Zeroes the barrier word and launches the chain on `stream`, one block per SM (or
// args.num_blocks). Uses args' layers, shapes, buffers and measurement knobs; ignores
// subs_per_block. Q8_0 or Q4_0 weights; sm_90 only (the kernel compiles empty for older
// architectures, which the build does not target).
cudaError_t launch_ring_chain(const PersistentChainArgs& args, const RingShape& shape,
                              cudaStream_t stream);

}  // namespace cellm::kernels
