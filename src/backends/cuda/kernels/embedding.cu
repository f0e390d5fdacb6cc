// embedding: the token-row gather (embedding.cuh). A block per token; interleaved rows are
// decoded a chunk (32 elements) per thread, GGUF rows an element per thread.
#include <string>

#include "backends/cuda/kernels/embedding.cuh"
#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/pdl.cuh"
#include "backends/cuda/kernels/weight_decode.cuh"

namespace cellm::kernels {
namespace {

constexpr int kThreads = 256;

__device__ bool valid_token(const EmbeddingParams& p, int32_t token) {
  return token >= 0 && token < p.table.num_rows;
}

__device__ const uint8_t* table_row(const EmbeddingParams& p, int32_t token) {
  return static_cast<const uint8_t*>(p.table.data) +
         static_cast<int64_t>(token) * static_cast<int64_t>(p.table.row_bytes);
}

template <class Decoder>
__global__ void __launch_bounds__(kThreads) embedding_interleaved_kernel(const EmbeddingParams p) {
  pdl_launch_dependents();
  const int32_t token = p.tokens[blockIdx.x];
  float* out = p.out + static_cast<int64_t>(blockIdx.x) * p.out_stride;
  const int64_t num_chunks = p.table.num_cols / Decoder::kChunkElems;
  for (int64_t c = threadIdx.x; c < num_chunks; c += kThreads) {
    if (!valid_token(p, token)) {
      for (int g = 0; g < Decoder::kGroups; ++g) {
        for (int i = 0; i < 4; ++i) out[Decoder::x_offset(c, g) + i] = __int_as_float(0x7fc00000);
      }
      continue;
    }
    const typename Decoder::Chunk chunk = Decoder::load(table_row(p, token), p.table.num_cols, c);
    CELLM_UNROLL
    for (int g = 0; g < Decoder::kGroups; ++g) {
      GroupValues v;
      Decoder::group(chunk, g, c, &v);
      float* dst = out + Decoder::x_offset(c, g);
      CELLM_UNROLL
      for (int i = 0; i < 4; ++i) {
        dst[i] = __fmul_rn(
            Decoder::kHasMin ? sub_rn(mul_rn(v.scale, v.q[i]), v.min) : mul_rn(v.q[i], v.scale),
            p.scale);
      }
    }
  }
}

__global__ void __launch_bounds__(kThreads) embedding_gguf_kernel(const EmbeddingParams p) {
  pdl_launch_dependents();
  const int32_t token = p.tokens[blockIdx.x];
  float* out = p.out + static_cast<int64_t>(blockIdx.x) * p.out_stride;
  const bool valid = valid_token(p, token);
  for (int64_t e = threadIdx.x; e < p.table.num_cols; e += kThreads) {
    out[e] = valid ? __fmul_rn(gguf_element(p.table.type, table_row(p, token), e), p.scale)
                   : __int_as_float(0x7fc00000);
  }
}

}  // namespace

Status launch_embedding(const EmbeddingParams& p, cudaStream_t stream) {
  CELLM_RETURN_IF_ERROR(check_device_weight(p.table.type, p.table.num_cols, "embedding"));
  if (p.num_tokens < 0 || p.out_stride < p.table.num_cols ||
      p.table.row_bytes != device_row_bytes(p.table.type, p.table.num_cols) ||
      p.table.layout != device_weight_layout(p.table.type, p.table.num_cols) ||
      (p.num_tokens > 0 && (p.table.data == nullptr || p.tokens == nullptr || p.out == nullptr))) {
    return invalid_argument("embedding: " + std::to_string(p.num_tokens) + " tokens into rows of " +
                            std::to_string(p.table.num_cols) + " (stride " +
                            std::to_string(p.out_stride) +
                            "), a table not from make_device_weight, or a null pointer");
  }
  if (p.num_tokens == 0) return ok_status();
  const auto blocks = static_cast<unsigned>(p.num_tokens);
  if (p.table.layout == WeightLayout::kGguf) {
    embedding_gguf_kernel<<<blocks, kThreads, 0, stream>>>(p);
  } else {
    switch (p.table.type) {
      case TensorType::kQ8_0:
        embedding_interleaved_kernel<DecodeQ8_0><<<blocks, kThreads, 0, stream>>>(p);
        break;
      case TensorType::kQ4_0:
        embedding_interleaved_kernel<DecodeQ4_0><<<blocks, kThreads, 0, stream>>>(p);
        break;
      case TensorType::kQ4_K:
        embedding_interleaved_kernel<DecodeQ4_K><<<blocks, kThreads, 0, stream>>>(p);
        break;
      case TensorType::kQ6_K:
        embedding_interleaved_kernel<DecodeQ6_K><<<blocks, kThreads, 0, stream>>>(p);
        break;
      default:
        return internal_error("embedding: interleaved " +
                              std::string(tensor_type_name(p.table.type)));
    }
  }
  return launch_status("embedding");
}

}  // namespace cellm::kernels
