// decode_persistent_bench: a feasibility prototype of decode.md's "What is left" 1a — a decode
// step's layer products (q|k|v, output, gate|up with SwiGLU, down; no attention, no RoPE) for
// one token as ONE cooperative launch: one block per SM, made of sub-blocks of 128 threads that
// each run the shipped product's row groups (gemv_decode.cuh's loads and int8 dot products), the
// stages separated by grid-wide barriers instead of kernel boundaries. Each sub-block's last
// refill of a stage loads its first chunk of the next stage's weights, so weights are in flight
// across every barrier; after the barrier each block quantizes the stage's f32 input (RMS-normed
// where the stage's input is) into its shared memory — no quantize launches.
// The decode benchmark times it against the same products as launches (quantize + product per
// stage) and reports how far the two chains' residuals differ. Benchmark only; not linked into
// the backend. Thread-safety: launches on the given stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gguf/tensor_type.h"

namespace cellm::kernels {

// One layer's weights, device layout (Q8_0 or Q4_0, interleaved).
struct PersistentChainLayer {
  const uint8_t* qkv = nullptr;      // [qkv_rows, hidden]
  const uint8_t* o = nullptr;        // [hidden, hidden]
  const uint8_t* gate_up = nullptr;  // [2 · ffn, hidden]: gate rows, then up rows
  const uint8_t* down = nullptr;     // [hidden, ffn]
};

struct PersistentChainArgs {
  TensorType type = TensorType::kQ4_0;  // Q8_0 or Q4_0
  int num_layers = 0;
  const PersistentChainLayer* layers = nullptr;  // [num_layers] device
  int64_t hidden = 0;  // multiple of 4096 / sub-block threads · 4 (see the launcher's checks)
  int64_t ffn = 0;
  int64_t qkv_rows = 0;  // ≥ hidden: rows [0, hidden) stand in for the attention output
  const float* norm_weight = nullptr;  // [hidden] f32, one for every normed stage
  float norm_eps = 1e-5f;
  float* x = nullptr;           // [hidden] f32 residual, updated in place
  float* qkv = nullptr;         // [qkv_rows] f32
  float* act = nullptr;         // [ffn] f32, SwiGLU of gate|up
  unsigned* barrier = nullptr;  // one word, zeroed by the launcher (stream-ordered)
  int subs_per_block = 8;       // 4, 6 or 8 sub-blocks of 128 threads
  int num_blocks = 0;           // 0: one per SM
  // Measurement knobs (results wrong when set): no grid barriers; no input quantization (the
  // stage computes on whatever the block's shared memory holds).
  bool skip_barriers = false;
  bool skip_inputs = false;
};

// Zeroes the barrier word and launches the chain (cooperative launch) on `stream`.
cudaError_t launch_persistent_chain(const PersistentChainArgs& args, cudaStream_t stream);

}  // namespace cellm::kernels
