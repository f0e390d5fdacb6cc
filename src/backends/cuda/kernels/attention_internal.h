// attention_internal: the seams between the attention files — argument checks shared by both
// kernels (attention_args.cpp), each kernel file's shared-memory setup, and the tensor-core
// kernels for 16-bit caches (attention_decode_tc.cu, attention_prefill_tc.cu) that the launch
// functions pick when tensor_core_attention_applies().
// Thread-safety: the prepare functions run once (std::call_once); checks are pure.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <string_view>
#include <type_traits>

#include "backends/cuda/kernels/attention.cuh"
#include "backends/cuda/kernels/launch_status.h"
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
  float softcap_inverse = 0.0f;  // soft_cap_inverse(a.softcap) (op_math.cuh)
};

// The instantiations of a kernel template <KvDtype, int kDim>: cache types and head sizes. The
// helpers below call f(std::integral_constant<KvDtype, kType>, std::integral_constant<int, kDim>)
// (f reads decltype(arg)::value).
template <KvDtype... kTypes>
struct CacheTypes {};
template <int... kDims>
struct HeadDims {};
inline constexpr CacheTypes<KvDtype::kF32, KvDtype::kF16, KvDtype::kBF16> kAllCacheTypes;
inline constexpr CacheTypes<KvDtype::kF16, KvDtype::kBF16> k16BitCacheTypes;

template <KvDtype kType, int kDim, int... kRest, class F>
auto with_head_dim(int dim, const F& f) {
  if constexpr (sizeof...(kRest) > 0) {
    if (dim > kDim) return with_head_dim<kType, kRest...>(dim, f);
  }
  return f(std::integral_constant<KvDtype, kType>{}, std::integral_constant<int, kDim>{});
}

// f(kType, kDim) for the instantiation that runs `dtype` (one of the types;
// else the last) with heads of `dim`: the first of the sizes ≥ dim (else the last).
template <KvDtype kType, KvDtype... kRest, int... kDims, class F>
auto with_kernel_shape(CacheTypes<kType, kRest...> /*types*/, HeadDims<kDims...> dims,
                       KvDtype dtype, int dim, const F& f) {
  if constexpr (sizeof...(kRest) > 0) {
    if (dtype != kType) return with_kernel_shape(CacheTypes<kRest...>{}, dims, dtype, dim, f);
  }
  return with_head_dim<kType, kDims...>(dim, f);
}

template <KvDtype kType, int kDim, int... kRest, class F>
Status for_each_head_dim(const F& f) {
  CELLM_RETURN_IF_ERROR(
      f(std::integral_constant<KvDtype, kType>{}, std::integral_constant<int, kDim>{}));
  if constexpr (sizeof...(kRest) > 0) {
    return for_each_head_dim<kType, kRest...>(f);
  } else {
    return ok_status();
  }
}

// f(kType, kDim) → Status for every instantiation, up to the first error.
template <KvDtype kType, KvDtype... kRest, int... kDims, class F>
Status for_each_kernel_shape(CacheTypes<kType, kRest...> /*types*/, HeadDims<kDims...> dims,
                             const F& f) {
  CELLM_RETURN_IF_ERROR((for_each_head_dim<kType, kDims...>(f)));
  if constexpr (sizeof...(kRest) > 0) {
    return for_each_kernel_shape(CacheTypes<kRest...>{}, dims, f);
  } else {
    return ok_status();
  }
}

// Raises `kernel`'s dynamic shared-memory limit to `bytes`; an error names `op`.
template <class Kernel>
Status raise_smem_limit(Kernel* kernel, size_t bytes, std::string_view op) {
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       static_cast<int>(bytes));
  return launch_status(op);
}

// The grid of a prefill kernel whose blocks take `rows` logical rows: tokens × `slots` query heads
// of one kv head, slots a power of two ≤ max_slots covering the GQA group if it can.
struct PrefillGrid {
  dim3 grid;
  int slots = 1;
};
inline PrefillGrid prefill_attention_grid(const AttentionArgs& a, int rows, int max_slots) {
  const int group = a.num_heads / a.num_kv_heads;
  PrefillGrid g;
  while (g.slots < group && g.slots < max_slots) g.slots *= 2;
  const int tokens_per_block = rows / g.slots;
  g.grid = dim3(static_cast<unsigned>((a.num_tokens + tokens_per_block - 1) / tokens_per_block),
                static_cast<unsigned>(a.num_kv_heads * ((group + g.slots - 1) / g.slots)));
  return g;
}

// True when CELLM_CUDA_ATTENTION_PDL is "1" (read once): the decode attention kernels and the
// combine then launch with programmatic dependent launch. Off by default: on the H200 it made
// batch-1 decode slower (bf16 4.55 → 5.79 ms per token, q8_0 2.83 → 2.94; docs/perf/decode.md).
inline bool attention_pdl_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("CELLM_CUDA_ATTENTION_PDL");
    return value != nullptr && std::string_view(value) == "1";
  }();
  return enabled;
}

// The grid of a decode kernel whose blocks take up to `rows` query heads of one kv head:
// (kv heads × batches of heads, tokens, splits).
inline dim3 decode_attention_grid(const DecodeKernelArgs& args, int rows) {
  const int group = args.a.num_heads / args.a.num_kv_heads;
  return dim3(static_cast<unsigned>(args.a.num_kv_heads * ((group + rows - 1) / rows)),
              static_cast<unsigned>(args.a.num_tokens), static_cast<unsigned>(args.max_splits));
}

// True when the tensor-core kernels take these arguments: a 16-bit cache (f16, bf16) and equal
// key and value head sizes of 64, 96, 128 or 256 (not 96 with CELLM_CUDA_TC_HEAD96=0, for
// measurements). Other steps use the f32 CUDA-core kernels.
bool tensor_core_attention_applies(const AttentionArgs& args);

// Tensor-core decode (attention_decode_tc.cu): the grid and outputs of the CUDA-core decode
// kernel (partials when a token has several splits; the caller runs the combine). The decode
// kernels and the combine keep pdl.cuh's contract, so they may be launched with programmatic
// dependent launch (attention_pdl_enabled()).
cudaError_t launch_decode_attention_tc(const DecodeKernelArgs& args, cudaStream_t stream);
// The same splits (args.max_splits of them, ≤ 8) as one thread-block cluster per (head batch,
// token), merged inside the cluster into the output (and args.a.out_q8 when set): no partials,
// no combine launch. Launched with programmatic dependent launch only when `early` (the kernel
// before is small: DecodeAttentionParams::early_launch), and its blocks let the next kernel
// launch only as they leave: either earlier start lets the products crowd the SMs around it
// (docs/perf/decode.md, version 7).
cudaError_t launch_decode_attention_tc_cluster(const DecodeKernelArgs& args, bool early,
                                               cudaStream_t stream);
// The largest cluster (8, 4 or 2 blocks) of that kernel the device can run, 0 for none (asked
// once, after prepare_decode_attention_tc_kernels()).
int32_t decode_attention_tc_max_cluster();
// Blocks of that kernel resident on one SM at once (its shared memory allows three on the H200).
int32_t decode_attention_tc_cluster_blocks_per_sm();
Status prepare_decode_attention_tc_kernels();

// Tensor-core prefill (attention_prefill_tc.cu).
void launch_prefill_attention_tc(const AttentionArgs& args, cudaStream_t stream);
Status prepare_prefill_attention_tc_kernels();

}  // namespace cellm::kernels
