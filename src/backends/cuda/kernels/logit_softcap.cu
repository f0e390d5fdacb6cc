// logit_softcap: the in-place soft cap of logit rows (logit_softcap.cuh).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "backends/cuda/kernels/kernel_common.cuh"
#include "backends/cuda/kernels/logit_softcap.cuh"
#include "backends/cuda/kernels/op_math.cuh"
#include "backends/cuda/kernels/pdl.cuh"

namespace cellm::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxColumnBlocks = 256;  // a 256K vocabulary: four columns per thread

// Block (x, y): columns blockIdx.x · kThreads + threadIdx.x, then gridDim.x · kThreads further,
// … of rows y, y + gridDim.y, … (grid-stride both ways).
__global__ void __launch_bounds__(kThreads)
    logit_softcap_kernel(const LogitSoftcapParams p, float cap_inverse) {
  pdl_launch_dependents();
  pdl_wait();  // the logits come from the product before
  const int64_t column_step = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t r = blockIdx.y; r < p.num_rows; r += gridDim.y) {
    float* row = p.logits + r * p.stride;
    for (int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; c < p.num_cols;
         c += column_step) {
      row[c] = soft_capped(row[c], p.cap, cap_inverse);
    }
  }
}

}  // namespace

Status launch_logit_softcap(const LogitSoftcapParams& p, cudaStream_t stream) {
  if (!std::isfinite(p.cap) || p.cap <= 0.0f || p.num_rows < 0 || p.num_cols < 0 ||
      p.stride < p.num_cols || (p.num_rows > 0 && p.num_cols > 0 && p.logits == nullptr)) {
    return invalid_argument("logit_softcap: cap " + std::to_string(p.cap) +
                            " (positive and finite) over " + std::to_string(p.num_rows) +
                            " rows of " + std::to_string(p.num_cols) + ", stride " +
                            std::to_string(p.stride) + " (≥ the columns), logits " +
                            (p.logits == nullptr ? "null" : "given"));
  }
  if (p.num_rows == 0 || p.num_cols == 0) return ok_status();
  const dim3 grid(static_cast<unsigned>(std::min(ceil_div(p.num_cols, kThreads), kMaxColumnBlocks)),
                  static_cast<unsigned>(std::min(p.num_rows, 65535)));
  return pdl_launch_status(
      launch_pdl(logit_softcap_kernel, grid, dim3(kThreads), 0, stream, p, soft_cap_inverse(p.cap)),
      "logit_softcap");
}

}  // namespace cellm::kernels
