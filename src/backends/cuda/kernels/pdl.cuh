// pdl: programmatic dependent launch (Hopper) for the kernels of a forward — a kernel launched
// with launch_pdl() may start while the kernel before it on the stream is still running, so its
// blocks can load what no earlier kernel writes (weights) and wait at pdl_wait() for the rest.
//
// The contract every kernel launched through launch_pdl() keeps: each block calls pdl_wait()
// before it reads anything an earlier kernel writes and before it writes anything an earlier
// kernel reads, and no block leaves before its pdl_wait() (except a block with nothing to read or
// write while other blocks of its grid wait: the grid still ends after the kernel before it).
// pdl_wait() returns once the previous kernel has finished and its writes are visible; since that
// kernel waited in turn for the one before it, the order of the whole stream holds.
// pdl_launch_dependents() lets the next kernel start launching once every block of this one has
// called it (kernels call it first thing — except the decode attention kernels, which let the
// next kernel launch only as their blocks leave: attention_decode_tc.cu says why; and kernels
// launched with PdlTrigger::kAfterWait, which call it right after pdl_wait()).
// Launched plainly (<<< >>>) or with PDL off, both are no-ops, so the same kernel runs either
// way. A kernel that follows something other than a kernel (a copy, an event) waits for it
// fully. Capturable: the dependency becomes a programmatic edge of the graph.
// CELLM_CUDA_PDL=0 in the environment turns the attribute off process-wide (for measuring what
// it brings). Who calls it: the kernels' launch functions. Thread-safety: pure launches.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "backends/cuda/kernels/launch_status.h"
#include "core/status.h"

namespace cellm::kernels {

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Where a kernel that takes it calls pdl_launch_dependents(). kAtStart: the next kernel may launch
// while this one still waits for the one before, so two kernels can be waiting ahead of the one
// running, their blocks holding SMs and their weight loads the bus. kAfterWait: only once every
// block of this kernel has passed pdl_wait(), i.e. the kernel before it has finished — one kernel
// ahead at most. On the H200, batch-1 decode (Llama-3.1-8B geometry, the fused layer's products
// and quantize launches after their wait) q8_0 2.540–2.543 → 2.511–2.513 ms, q4_0 1.791–1.792 →
// 1.774–1.779; at 2–16 sessions the quantize launches before the int8 tensor-core products lose
// 1–6% with it and the products themselves gain nothing (docs/perf/decode.md, version 15). On the
// H100 kAtStart is the faster at batch 1 (version 35), so the forward picks by the device.
enum class PdlTrigger : unsigned char { kAtStart, kAfterWait };

__device__ __forceinline__ void pdl_trigger_at_start(PdlTrigger trigger) {
  if (trigger == PdlTrigger::kAtStart) pdl_launch_dependents();
}

// pdl_wait(), then pdl_launch_dependents() for kAfterWait.
__device__ __forceinline__ void pdl_wait_then_trigger(PdlTrigger trigger) {
  pdl_wait();
  if (trigger == PdlTrigger::kAfterWait) pdl_launch_dependents();
}

// False when CELLM_CUDA_PDL is "0" (read once).
inline bool pdl_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("CELLM_CUDA_PDL");
    return value == nullptr || std::strcmp(value, "0") != 0;
  }();
  return enabled;
}

// kernel<<<grid, block, smem_bytes, stream>>>(args...), allowed to overlap the previous kernel
// when `allow` (and PDL is enabled).
template <typename... KernelArgs, typename... Args>
cudaError_t launch_pdl_if(bool allow, void (*kernel)(KernelArgs...), dim3 grid, dim3 block,
                          size_t smem_bytes, cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = allow && pdl_enabled() ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

// kernel<<<grid, block, smem_bytes, stream>>>(args...), allowed to overlap the previous kernel.
template <typename... KernelArgs, typename... Args>
cudaError_t launch_pdl(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem_bytes,
                       cudaStream_t stream, Args&&... args) {
  return launch_pdl_if(true, kernel, grid, block, smem_bytes, stream, std::forward<Args>(args)...);
}

// The Status of a launch_pdl() call: its own error, else launch_status(op).
inline Status pdl_launch_status(cudaError_t launched, std::string_view op) {
  if (launched != cudaSuccess) {
    (void)cudaGetLastError();  // clear it: the error is reported here
    return internal_error(std::string(op) + ": " + cudaGetErrorName(launched) + ": " +
                          cudaGetErrorString(launched));
  }
  return launch_status(op);
}

}  // namespace cellm::kernels
