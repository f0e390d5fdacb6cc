// bench_l2_stage: cuda_kernels_bench's --l2-stage section — whether bytes pulled into L2 while
// the bus is idle are read faster afterwards. A batch-1 layer's front (q|k|v, the attention, the
// output product) leaves the bus idle for ≈ 10–15 µs while a ring in shared memory can hold only
// ≈ 4.5 µs of an SM's share of it (decode.md "What is left" 1c); a persistent chain could keep
// the bus busy through the front only by staging the MLP's first weights in L2. This measures that
// in isolation: an idle kernel (every block sleeps T µs) that optionally prefetches the first P MiB
// of a matrix into L2, then a kernel streaming the whole matrix (X MB, the gate|up product's
// bytes), its span timed on the device. Benchmark code only; single-threaded.
#pragma once

#include <cuda_runtime.h>

namespace cellm::kernels {

void bench_l2_stage(cudaStream_t stream, double copy_bandwidth, int num_sms);

}  // namespace cellm::kernels
