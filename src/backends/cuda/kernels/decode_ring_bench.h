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
  int consumer_warps = 8;      // 4, 8, 16 or 20, plus one producer warp per block
  int slots_per_warp = 2;      // slots per block: consumer_warps · slots_per_warp ≤ 24
  uint32_t slot_bytes = 9216;  // ≥ a weight row; at most 208 KB of slots per block
  // Measurement knob (results wrong when false): no bulk copies, the consumers multiply whatever
  // the slots hold without waiting — their compute rate, and the stage boundaries' cost without
  // weight traffic.
  bool stream_weights = true;
  // Measurement knob (Q4_0; results wrong when true): multiply each lane's 16 weight bytes as one
  // whole block of 32 (one integer sum and one scale per block and row) — the arithmetic a
  // block-major weight layout would cost.
  bool block_major = false;
  // Int8 inputs handed over by their producers: ring_handover_scratch_bytes() of device scratch;
  // nullptr: every block quantizes the stage's f32 input itself.
  void* handover_scratch = nullptr;
};

// Bytes of RingShape::handover_scratch (for hidden and ffn up to 16384 columns).
size_t ring_handover_scratch_bytes();

// Zeroes the barrier word and launches the chain on `stream`, one block per SM (or
// args.num_blocks). Uses args' layers, shapes, buffers and measurement knobs; ignores
// subs_per_block. Q8_0 or Q4_0 weights; sm_90 only (the kernel compiles empty for older
// architectures, which the build does not target).
cudaError_t launch_ring_chain(const PersistentChainArgs& args, const RingShape& shape,
                              cudaStream_t stream);

}  // namespace cellm::kernels
