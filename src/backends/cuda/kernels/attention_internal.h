// attention_internal: the seams between the attention files — argument checks shared by both
// kernels (attention_args.cpp) and each kernel file's shared-memory setup.
// Thread-safety: the prepare functions run once (std::call_once); checks are pure.
#pragma once

#include <string_view>

#include "backends/cuda/kernels/attention.cuh"
#include "core/status.h"

namespace cellm::kernels {

// OK when the sizes, strides and pointers of `args` are usable by both kernels; the error names
// `op` and what is wrong.
Status check_attention_args(const AttentionArgs& args, std::string_view op);

Status prepare_decode_attention_kernels();   // attention_decode.cu
Status prepare_prefill_attention_kernels();  // attention_prefill.cu

}  // namespace cellm::kernels
