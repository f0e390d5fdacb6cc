// CudaWeights::Tensor: one planned tensor of the weights' single allocation and where its
// values come from. Internal to CudaWeights (cuda_weights.cpp uploads and binds what
// cuda_weights_plan.cpp plans); nothing else includes it. Plain data, no thread-safety rule.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/cuda/cuda_weights.h"

namespace cellm {

// Where each tensor starts in the allocation: a multiple of this many bytes.
constexpr uint64_t kTensorAlignment = 256;

// One tensor of the single allocation: a matrix (rows of the device layout) or an f32 vector.
struct CudaWeights::Tensor {
  std::string name;
  bool is_matrix = true;
  TensorType type = TensorType::kF32;  // matrices; vectors are f32
  int64_t num_rows = 0;                // matrices: rows; vectors: 1
  int64_t num_cols = 0;                // matrices: cols; vectors: elements
  // Upload: the views whose rows (matrices) or elements (vectors) are concatenated, in order;
  // a null view stands for zeros of `part_sizes[i]` elements (a missing bias part).
  std::vector<const WeightView*> sources;
  std::vector<int64_t> part_sizes;
  // Per source: its rows (matrices) or elements (vectors) are q or k heads whose neox pairs are
  // made adjacent (model/rope_pairs.h); empty: none is.
  std::vector<bool> pairs_adjacent;
  int32_t head_dim = 0;         // with pairs_adjacent
  int32_t num_rotary_dims = 0;  // with pairs_adjacent
  // Random: how a vector is drawn (matrices use kernels::launch_random_fill).
  enum class Fill { kMatrix, kOnes, kSmall, kRopeFactors } fill = Fill::kMatrix;
  uint64_t offset = 0;  // in buffer_
  uint64_t num_bytes = 0;
  bool has_bf16_copy = false;  // a resident bf16 copy sits at bf16_offset in copies_
  uint64_t bf16_offset = 0;
  kernels::DeviceWeight* matrix_slot = nullptr;
  const float** vector_slot = nullptr;
};

}  // namespace cellm
