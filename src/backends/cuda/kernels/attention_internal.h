// attention_internal: the seams between the attention files — argument checks shared by both
// kernels (attention_args.cpp), each kernel file's shared-memory setup, and the tensor-core
// kernels for 16-bit caches (attention_decode_tc.cu, attention_prefill_tc.cu) that the launch
// functions pick when tensor_core_attention_applies().
// Thread-safety: the prepare functions run once (std::call_once); checks are pure.
#pragma once

#include <string_view>

#include "backends/cuda/kernels/attention.cuh"
#include "core/status.h"

namespace cellm::kernels {

// OK when the sizes, strides and pointers of `args` are usable by both kernels; the error names
// `op` and what is wrong.
Status check_attention_args(const AttentionArgs& args, std::string_view op);

Status prepare_decode_attention_kernels();   // attention_decode.cu (and its tensor-core kernel)
Status prepare_prefill_attention_kernels();  // attention_prefill.cu (and its tensor-core kernel)

// The decode kernels' arguments: the split rule and where several splits leave their partials.
struct DecodeKernelArgs {
  AttentionArgs a;
  int32_t max_splits = 1;
  int32_t min_cells = 1;
  float* partial_out = nullptr;  // [num_tokens, num_heads, max_splits, value_head_dim]
  float* partial_ml = nullptr;   // [num_tokens, num_heads, max_splits, 2]: max, sum
};

// True when the tensor-core kernels take these arguments: a 16-bit cache (f16, bf16) and equal
// key and value head sizes of 64 or 128. Other steps use the f32 CUDA-core kernels.
bool tensor_core_attention_applies(const AttentionArgs& args);

// Tensor-core decode (attention_decode_tc.cu): the grid and outputs of the CUDA-core decode
// kernel (partials when a token has several splits; the caller runs the combine).
void launch_decode_attention_tc(const DecodeKernelArgs& args, cudaStream_t stream);
Status prepare_decode_attention_tc_kernels();

// Tensor-core prefill (attention_prefill_tc.cu).
void launch_prefill_attention_tc(const AttentionArgs& args, cudaStream_t stream);
Status prepare_prefill_attention_tc_kernels();

}  // namespace cellm::kernels
