// cpu_matmul (declared in cpu_ops.h): weight rows outer, tokens inner, so each row is
// dequantized once per call and dotted with every token's activations.
#include <cstdint>
#include <span>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#include "core/check.h"
#include "gguf/dequantize.h"

namespace cellm {
namespace {

// Work below which a chunk is not worth a thread's wake-up (multiply-adds).
constexpr int64_t kMinMacsPerChunk = int64_t{1} << 15;

// The row as f32: in place when it is aligned f32 data, else dequantized into `buffer`.
const float* row_as_f32(const WeightView& w, int64_t r, std::vector<float>& buffer) {
  const std::span<const uint8_t> bytes = w.row(r);
  if (w.type == TensorType::kF32 &&
      reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) == 0) {
    return reinterpret_cast<const float*>(bytes.data());
  }
  buffer.resize(static_cast<size_t>(w.num_cols));
  const Status status = dequantize_row(w.type, bytes, buffer);
  CELLM_CHECK(status.ok()) << w.name << " row " << r
                           << " failed to dequantize after ModelWeights checked it: "
                           << status.to_string();
  return buffer.data();
}

}  // namespace

void cpu_matmul(const WeightView& w, const float* x, int64_t num_tokens, float* out,
                ThreadPool* pool) {
  const int64_t num_rows = w.num_rows;
  const int64_t num_cols = w.num_cols;
  CELLM_CHECK(num_rows > 0 && num_cols > 0) << "cpu_matmul with an empty weight " << w.name;
  if (num_tokens <= 0) return;
  const auto body = [&](size_t begin, size_t end) {
    std::vector<float> buffer;  // [num_cols] one dequantized row, f32
    for (size_t r = begin; r < end; ++r) {
      const float* row = row_as_f32(w, static_cast<int64_t>(r), buffer);
      const std::span<const float> weights(row, static_cast<size_t>(num_cols));
      for (int64_t t = 0; t < num_tokens; ++t) {
        const std::span<const float> input(x + t * num_cols, static_cast<size_t>(num_cols));
        out[t * num_rows + static_cast<int64_t>(r)] = dot_f32(weights, input);
      }
    }
  };
  if (pool == nullptr) {
    body(0, static_cast<size_t>(num_rows));
    return;
  }
  const int64_t macs_per_row = num_tokens * num_cols;
  const int64_t min_rows = std::max<int64_t>(1, kMinMacsPerChunk / macs_per_row);
  pool->parallel_for(static_cast<size_t>(num_rows), body, static_cast<size_t>(min_rows));
}

}  // namespace cellm
