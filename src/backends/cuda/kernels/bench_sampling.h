// bench_sampling: cuda_kernels_bench's --sampling section — what a step pays after its LM head to
// pick tokens on the device: argmax (greedy) and the sampling candidates (row_candidates: the
// best 64, the normalizer and the draw) over Llama-3's 128,256-logit rows at 1–256 rows, split
// over blocks (the executor's way) and one block per row, a nucleus past the list drawn from the
// whole row (row_draw), and the log-probabilities summary (row_logprobs, five top tokens).
// Benchmark code only; single-threaded.
#pragma once

#include <cuda_runtime.h>

namespace cellm::kernels {

void bench_sampling(cudaStream_t stream);

}  // namespace cellm::kernels
