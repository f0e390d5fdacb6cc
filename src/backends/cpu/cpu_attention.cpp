// cpu_attention (declared in cpu_ops.h): one work item per (query, head), each reading only
// the cells its query may see.
#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#include "core/check.h"
#include "core/float16.h"
#include "gguf/dequantize.h"

namespace cellm {
namespace {

// Work below which a chunk is not worth a thread's wake-up (multiply-adds).
constexpr int64_t kMinMacsPerChunk = int64_t{1} << 14;

// One head of one row as f32: in place for f32 caches, else converted into `scratch` [head_dim].
const float* load_head(const KvCacheView& view, int32_t row, int32_t head, float* scratch) {
  CELLM_CHECK(row >= 0 && row < view.num_rows)
      << "attention reads cell " << row << " of a cache of " << view.num_rows << " rows";
  const int64_t offset = (static_cast<int64_t>(row) * view.num_heads + head) * view.head_dim;
  switch (view.dtype) {
    case KvDtype::kF32:
      return static_cast<const float*>(view.data) + offset;
    case KvDtype::kF16: {
      const uint16_t* bits = static_cast<const uint16_t*>(view.data) + offset;
      for (int32_t d = 0; d < view.head_dim; ++d) scratch[d] = f16_to_f32(bits[d]);
      return scratch;
    }
    case KvDtype::kBF16: {
      const uint16_t* bits = static_cast<const uint16_t*>(view.data) + offset;
      for (int32_t d = 0; d < view.head_dim; ++d) scratch[d] = bf16_to_f32(bits[d]);
      return scratch;
    }
  }
  CELLM_CHECK(false) << "unknown kv dtype";
  return nullptr;
}

}  // namespace

void cpu_attention(const float* q, std::span<const std::span<const int32_t>> visible_cells,
                   const KvCacheView& k, const KvCacheView& v, const AttentionParams& params,
                   float* out, ThreadPool* pool) {
  const int32_t num_heads = params.num_heads;
  CELLM_CHECK(params.num_kv_heads > 0 && num_heads % params.num_kv_heads == 0)
      << num_heads << " query heads over " << params.num_kv_heads << " kv heads";
  CELLM_CHECK(k.num_heads == params.num_kv_heads && v.num_heads == params.num_kv_heads &&
              k.head_dim == params.head_dim && v.head_dim == params.value_head_dim)
      << "cpu_attention: cache views do not match the attention params";
  const int32_t group = num_heads / params.num_kv_heads;  // query heads per kv head
  const int64_t num_queries = static_cast<int64_t>(visible_cells.size());
  size_t max_cells = 0;
  int64_t total_cells = 0;
  for (const auto& cells : visible_cells) {
    CELLM_CHECK(!cells.empty()) << "a query with no visible cell";
    max_cells = std::max(max_cells, cells.size());
    total_cells += static_cast<int64_t>(cells.size());
  }
  const auto body = [&](size_t begin, size_t end) {
    std::vector<float> scores(max_cells);  // [visible cells] of one (query, head)
    std::vector<float> k_scratch(static_cast<size_t>(params.head_dim));
    std::vector<float> v_scratch(static_cast<size_t>(params.value_head_dim));
    for (size_t item = begin; item < end; ++item) {
      const int64_t i = static_cast<int64_t>(item) / num_heads;
      const int32_t h = static_cast<int32_t>(static_cast<int64_t>(item) % num_heads);
      const int32_t kv_head = h / group;
      const std::span<const int32_t> cells = visible_cells[static_cast<size_t>(i)];
      const std::span<const float> q_head(q + (i * num_heads + h) * params.head_dim,
                                          static_cast<size_t>(params.head_dim));
      float max_score = -INFINITY;
      for (size_t j = 0; j < cells.size(); ++j) {
        const float* k_head = load_head(k, cells[j], kv_head, k_scratch.data());
        scores[j] =
            dot_f32(q_head, std::span<const float>(k_head, static_cast<size_t>(params.head_dim))) *
            params.scale;
        if (params.softcap > 0.0f) scores[j] = soft_cap(scores[j], params.softcap);
        max_score = std::max(max_score, scores[j]);
      }
      double sum = 0.0;
      for (size_t j = 0; j < cells.size(); ++j) {
        scores[j] = std::exp(scores[j] - max_score);
        sum += static_cast<double>(scores[j]);
      }
      const float inv_sum = static_cast<float>(1.0 / sum);
      float* out_head = out + (i * num_heads + h) * params.value_head_dim;
      std::fill(out_head, out_head + params.value_head_dim, 0.0f);
      for (size_t j = 0; j < cells.size(); ++j) {
        const float p = scores[j] * inv_sum;
        const float* v_head = load_head(v, cells[j], kv_head, v_scratch.data());
        for (int32_t d = 0; d < params.value_head_dim; ++d) out_head[d] += p * v_head[d];
      }
    }
  };
  const size_t num_items = static_cast<size_t>(num_queries * num_heads);
  if (pool == nullptr || num_items == 0) {
    body(0, num_items);
    return;
  }
  // Only the smallest chunk size depends on the work (an item costs about its cells ×
  // (head_dim + value_head_dim) multiply-adds); results never depend on the split.
  const int64_t macs_per_item =
      std::max<int64_t>(1, total_cells / std::max<int64_t>(1, num_queries) *
                               (params.head_dim + params.value_head_dim));
  const int64_t min_items = std::max<int64_t>(1, kMinMacsPerChunk / macs_per_item);
  pool->parallel_for(num_items, body, static_cast<size_t>(min_items));
}

}  // namespace cellm
