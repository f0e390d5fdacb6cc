#include "backends/cuda/kernels/rope_kv_output.h"

namespace cellm::kernels {

std::string rope_kv_output_problem(const RopeKvOutput& r, int64_t num_rows, int64_t y_stride) {
  const bool ok = r.head_dim > 0 && r.head_dim % 2 == 0 && r.num_rotary_dims >= 0 &&
                  r.num_rotary_dims % 2 == 0 && r.num_rotary_dims <= r.head_dim &&
                  r.q_width % r.head_dim == 0 && r.kv_width % r.head_dim == 0 &&
                  r.v_width % 2 == 0 && r.kv_width > 0 &&
                  static_cast<int64_t>(r.q_width) + r.kv_width + r.v_width == num_rows &&
                  y_stride >= r.q_width && r.positions != nullptr && r.cells != nullptr &&
                  r.k_cache != nullptr && r.v_cache != nullptr;
  if (ok) return {};
  return "RoPE output: q/k/v widths " + std::to_string(r.q_width) + "/" +
         std::to_string(r.kv_width) + "/" + std::to_string(r.v_width) + " for " +
         std::to_string(num_rows) + " rows, head_dim " + std::to_string(r.head_dim) + ", " +
         std::to_string(r.num_rotary_dims) +
         " rotary dims: odd or mismatched sizes, a y stride below the q width, or a null pointer";
}

}  // namespace cellm::kernels
