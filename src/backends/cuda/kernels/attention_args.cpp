#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "backends/cuda/kernels/attention_internal.h"

namespace cellm::kernels {

Status check_attention_args(const AttentionArgs& a, std::string_view op) {
  const auto fail = [&](const std::string& what) {
    return invalid_argument(
        std::string(op) + ": " + what + " (" + std::to_string(a.num_tokens) + " tokens, heads " +
        std::to_string(a.num_heads) + "/" + std::to_string(a.num_kv_heads) + ", head dims " +
        std::to_string(a.head_dim) + "/" + std::to_string(a.value_head_dim) + ")");
  };
  if (a.num_tokens < 0 || a.num_tokens > 65535) return fail("token count outside [0, 65535]");
  if (a.num_kv_heads <= 0 || a.num_heads <= 0 || a.num_heads % a.num_kv_heads != 0) {
    return fail("query heads must be a positive multiple of kv heads");
  }
  if (a.head_dim <= 0 || a.head_dim % 8 != 0 || a.head_dim > kAttentionMaxHeadDim ||
      a.value_head_dim <= 0 || a.value_head_dim % 8 != 0 ||
      a.value_head_dim > kAttentionMaxHeadDim) {
    return fail("head sizes must be multiples of 8 up to " + std::to_string(kAttentionMaxHeadDim));
  }
  if (a.window < 0) return fail("negative window");
  if (!std::isfinite(a.softcap) || a.softcap < 0.0f) {
    return fail("softcap " + std::to_string(a.softcap) + " must be finite and ≥ 0");
  }
  if (a.q_stride < static_cast<int64_t>(a.num_heads) * a.head_dim ||
      a.out_stride < static_cast<int64_t>(a.num_heads) * a.value_head_dim) {
    return fail("q or out stride shorter than a token's heads");
  }
  if (a.num_tokens > 0 &&
      (a.q == nullptr || a.out == nullptr || a.k_cache == nullptr || a.v_cache == nullptr ||
       a.cells.token_step_seq == nullptr || a.cells.token_pos == nullptr ||
       a.cells.seq_cell_offsets == nullptr || a.cells.seq_cells == nullptr)) {
    return fail("a null pointer");
  }
  if (reinterpret_cast<uintptr_t>(a.k_cache) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(a.v_cache) % 16 != 0) {
    return fail("K/V caches must be 16-byte aligned");
  }
  return ok_status();
}

bool tensor_core_attention_applies(const AttentionArgs& a) {
  // Heads of 96 (Phi-3) too, checked on the device (docs/perf/decode.md, version 28);
  // CELLM_CUDA_TC_HEAD96=0 gives them to the CUDA-core kernels, for measurements.
  static const bool head96 = [] {
    const char* value = std::getenv("CELLM_CUDA_TC_HEAD96");
    return value == nullptr || std::string(value) != "0";
  }();
  // Heads of 256 (Gemma) likewise; CELLM_CUDA_TC_HEAD256=0 for measurements.
  static const bool head256 = [] {
    const char* value = std::getenv("CELLM_CUDA_TC_HEAD256");
    return value == nullptr || std::string(value) != "0";
  }();
  return a.cache_dtype != KvDtype::kF32 && a.head_dim == a.value_head_dim &&
         (a.head_dim == 64 || (a.head_dim == 96 && head96) || a.head_dim == 128 ||
          (a.head_dim == 256 && head256));
}

Status prepare_attention_kernels() {
  CELLM_RETURN_IF_ERROR(prepare_decode_attention_kernels());
  return prepare_prefill_attention_kernels();
}

}  // namespace cellm::kernels
