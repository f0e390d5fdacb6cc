// bench_attention: cuda_kernels_bench's --attention section — the decode and prefill attention
// kernels on Llama-3.1-8B heads (32 / 8 × 128, bf16 cache) at several batch sizes and contexts,
// with split-count sweeps (clustered and not) for decode steps of up to 16 tokens. Benchmark
// code only; single-threaded.
#pragma once

#include <cuda_runtime.h>

namespace cellm::kernels {

void bench_attention(cudaStream_t stream, double copy_bw, double tc_rate, int num_sms);

}  // namespace cellm::kernels
