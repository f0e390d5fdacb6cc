// decode_code_probe: what running code the SM has not run lately costs — the other suspect
// (decode.md version 18) behind the ring chain's slow stage boundaries, whose handover takes
// 1.4 µs without any memory traffic after one tile loop and 0.8 µs after another. One warp runs a
// straight block of `instructions` independent FMAs (four chains, 16 bytes of code each) three
// times in a loop and times each pass: the first fetches the block from memory, the later ones
// from the instruction caches while the block fits them. Block sizes 4 KB … 256 KB show where
// the caches end. The decode benchmark runs it (`cuda_decode_bench --latency`). Benchmark only;
// not linked into the backend. Thread-safety: launches on the given stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace cellm::kernels {

inline constexpr int kCodeProbePasses = 3;

// The block sizes built, in instructions (16 bytes each): 256 (4 KB) … 16384 (256 KB).
inline constexpr int kCodeProbeSizes[] = {256, 512, 1024, 2048, 4096, 8192, 16384};

// Runs the block of `instructions` (one of kCodeProbeSizes) and writes each pass's cycles into
// cycles[0 .. kCodeProbePasses) (device memory, kCodeProbePasses + 1 words: the last keeps the
// arithmetic observable); cudaErrorInvalidValue for another size.
cudaError_t launch_code_probe(int instructions, uint64_t* cycles, cudaStream_t stream);

}  // namespace cellm::kernels
