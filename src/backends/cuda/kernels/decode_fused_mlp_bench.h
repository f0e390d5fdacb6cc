// decode_fused_mlp_bench: a batch-1 Q4_0 MLP (gate|up, SwiGLU, down) as ONE launch with no
// boundary between gate|up and down, plus a launch that sums its partials into the residual —
// against the launches' quantize + gate|up + quantize + down. The intermediate's 14336 columns
// are cut into half-units of 16; a block owns a contiguous range of half-units (one block per SM,
// 896 half-units over 132 SMs: 6 or 7 each, 3% above the mean where whole blocks of 32 are 18%)
// and, for each, multiplies its 16 gate and 16 up rows (block-major Q4_0, decode_block_major_bench
// .h), takes SwiGLU, quantizes the 16 values to int8 itself, and multiplies them by down's 16
// columns of every row (split-K: the down product's sum over the intermediate is split by block),
// accumulating a partial of the whole output in registers. Down's weights are repacked per
// half-unit (repack_down_half_units) so each half-unit's column slice is contiguous: 8 bytes of
// nibbles and a copy of the block's f16 scale per row (10 bytes per 16 weights where Q4_0 holds 9:
// 11% more of down's bytes, 3.7% of the layer's). Weights of the next phase are loaded while this
// one is multiplied, so the bus never waits for a stage boundary inside the MLP.
// Benchmark only (cuda_decode_bench --persistent / --ring); not linked into the backend.
// Thread-safety: launches on the given stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "backends/cuda/kernels/decode_persistent_bench.h"

namespace cellm::kernels {

// Bytes of repack_down_half_units' output for a [rows, cols] Q4_0 matrix.
int64_t down_half_units_bytes(int64_t rows, int64_t cols);

// A block-major Q4_0 [rows, cols] matrix (repack_q4_0_block_major's layout, device) repacked per
// half-unit of 16 columns: nibbles [cols / 16][rows][8 bytes] (byte j: column j low, j + 8 high),
// then f16 scales [cols / 16][rows] (the block of 32's scale, once per half). cols % 32 == 0.
cudaError_t repack_down_half_units(const uint8_t* block_major, uint8_t* dst, int64_t rows,
                                   int64_t cols, cudaStream_t stream);

struct FusedMlpArgs {
  const uint8_t* gate_up = nullptr;     // [2 · ffn, hidden] block-major Q4_0: gate, then up rows
  const uint8_t* down_units = nullptr;  // repack_down_half_units of down [hidden, ffn]
  const int8_t* x_q8 = nullptr;         // [hidden] int8, natural order: the normed residual
  const float* x_q8_scales = nullptr;   // [hidden / 32] f32
  float* partials = nullptr;            // [num_blocks, hidden] f32, written
  float* x = nullptr;                   // [hidden] f32 residual, += the partials' sum
  int64_t hidden = 0;                   // 4096 (the kernel's shape)
  int64_t ffn = 0;                      // multiple of 16
  int num_blocks = 0;                   // 0: one per SM
};

// The fused launch, then the partials' sum into x (blocks of 32 outputs, partials summed in
// block order: the same bits every run). Both with programmatic dependent launch.
cudaError_t launch_fused_mlp(const FusedMlpArgs& args, cudaStream_t stream);

// The chain of decode_block_major_bench's launches with the MLP fused: owns each layer's down
// repacked per half-unit and the partials. Not copyable.
class FusedMlpChain {
 public:
  enum Stages : int { kFront = 1, kMlp = 2, kBoth = 3 };  // the front: q|k|v and output

  // `layers`: block-major weights (device) of every layer the chain may run.
  FusedMlpChain(const std::vector<PersistentChainLayer>& layers, int64_t hidden, int64_t ffn,
                cudaStream_t stream);
  ~FusedMlpChain();
  FusedMlpChain(const FusedMlpChain&) = delete;
  FusedMlpChain& operator=(const FusedMlpChain&) = delete;

  // a.num_layers layers of the `stages` asked for, each stage as launch_block_major_stage (4
  // rows per block) runs it, or the MLP as the natural-order quantize launch and
  // launch_fused_mlp when `fused`. q / scales: [a.ffn] int8 and [a.ffn / 32] f32, device.
  cudaError_t launch(const PersistentChainArgs& a, int stages, bool fused, int8_t* q, float* scales,
                     cudaStream_t stream) const;

 private:
  std::vector<PersistentChainLayer> layers_;
  std::vector<uint8_t*> down_units_;  // per layer, device
  float* partials_ = nullptr;         // [1024, hidden] f32, device
  int64_t hidden_ = 0, ffn_ = 0;
};

}  // namespace cellm::kernels
