// row_rewrite.cuh's kernel: one thread per entry, each a load, rewrite_score and a store.
#include <cstdint>
#include <string>

#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/row_rewrite.cuh"

namespace cellm::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void row_rewrite_kernel(RowRewriteParams p) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.num_entries) return;
  const RowRewriteEntry entry = p.entries[i];
  const int32_t row = entry.row - p.first_row;
  if (row < 0 || row >= p.num_rows || entry.token < 0 || entry.token >= p.vocab) return;
  float& score = p.logits[static_cast<int64_t>(row) * p.stride + entry.token];
  score = rewrite_score(score, p.biases + entry.first_bias, entry.num_biases, entry.count,
                        p.penalties[entry.penalties]);
}

}  // namespace

Status launch_row_rewrite(const RowRewriteParams& p, cudaStream_t stream) {
  if (p.num_entries < 0 || p.num_rows < 0 || p.vocab <= 0 || p.stride < p.vocab ||
      (p.num_entries > 0 && (p.entries == nullptr || p.biases == nullptr ||
                             p.penalties == nullptr || p.logits == nullptr))) {
    return invalid_argument("row rewrite: " + std::to_string(p.num_entries) + " entries over " +
                            std::to_string(p.num_rows) + " rows of " + std::to_string(p.vocab) +
                            " logits, stride " + std::to_string(p.stride) + ", or a null pointer");
  }
  if (p.num_entries == 0) return ok_status();
  const unsigned blocks = static_cast<unsigned>((p.num_entries + kThreads - 1) / kThreads);
  row_rewrite_kernel<<<blocks, kThreads, 0, stream>>>(p);
  return launch_status("row rewrite");
}

}  // namespace cellm::kernels
