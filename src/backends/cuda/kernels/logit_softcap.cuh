// logit_softcap: gemma2's final-logit soft cap on the GPU, in place — every logit x of the first
// num_cols columns of each row becomes cap · tanh(x / cap), as the CPU oracle's soft_cap
// (cpu_ops.h) caps it (op_math.cuh, soft_capped); columns past num_cols stay as they are. Not the
// attention scores' cap: the attention kernels cap those themselves (AttentionArgs::softcap).
// Launched with programmatic dependent launch (pdl.cuh); stream-ordered, no allocation,
// capturable. Who calls it: the CUDA forward after the output product (gemma2), the tests.
// Thread-safety: launches on a stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"

namespace cellm::kernels {

struct LogitSoftcapParams {
  float* logits = nullptr;  // [num_rows, stride] f32, capped in place
  int32_t num_rows = 0;
  int64_t num_cols = 0;  // the vocabulary
  int64_t stride = 0;    // ≥ num_cols
  float cap = 0.0f;      // > 0, finite: logits end in (−cap, cap)
};

Status launch_logit_softcap(const LogitSoftcapParams& params, cudaStream_t stream);

}  // namespace cellm::kernels
