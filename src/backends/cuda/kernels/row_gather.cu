// row_gather: the kept-row copy kernel (row_gather.cuh).
#include <string>

#include "backends/cuda/kernels/kernel_common.cuh"
#include "backends/cuda/kernels/launch_status.h"
#include "backends/cuda/kernels/pdl.cuh"
#include "backends/cuda/kernels/row_gather.cuh"

namespace cellm::kernels {
namespace {

constexpr int kThreads = 256;

// Grid: (row, column block).
__global__ void __launch_bounds__(kThreads) row_gather_kernel(const RowGatherParams p) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t i = static_cast<int64_t>(blockIdx.y) * kThreads + threadIdx.x;
  if (i >= p.dim) return;
  const int32_t src_row = p.rows[blockIdx.x];
  const bool valid = src_row >= 0 && src_row < p.num_src_rows;
  p.dst[blockIdx.x * p.dst_stride + i] =
      valid ? p.src[src_row * p.src_stride + i] : __int_as_float(0x7fc00000);
}

}  // namespace

Status launch_row_gather(const RowGatherParams& p, cudaStream_t stream) {
  if (p.num_rows < 0 || p.dim < 0 || p.src_stride < p.dim || p.dst_stride < p.dim ||
      (p.num_rows > 0 && p.dim > 0 &&
       (p.rows == nullptr || p.src == nullptr || p.dst == nullptr)) ||
      ceil_div(p.dim, kThreads) > 65535) {
    return invalid_argument("row_gather: " + std::to_string(p.num_rows) + " rows of " +
                            std::to_string(p.dim) + " with strides shorter than a row, or null");
  }
  if (p.num_rows == 0 || p.dim == 0) return ok_status();
  const dim3 grid(static_cast<unsigned>(p.num_rows),
                  static_cast<unsigned>(ceil_div(p.dim, kThreads)));
  return pdl_launch_status(launch_pdl(row_gather_kernel, grid, dim3(kThreads), 0, stream, p),
                           "row_gather");
}

}  // namespace cellm::kernels
