// bench_wide_dequant: how a wide Q8_0 / Q4_0 product is best run at 64–512 tokens — the path
// launch_matmul_wide takes (the fused tensor-core product of matmul_wide.cuh up to
// kFusedMaxTokens, 64 Mi-element bf16 tiles + cuBLAS beyond) against the other ways to dequantize
// to bf16 and run cuBLAS: 16 Mi-element tiles one after the other (the tile size before
// prefill_and_batch.md's version 4), the whole weight at once, or row chunks whose dequantization
// on a second stream overlaps the previous chunk's product. Part of cuda_kernels_bench
// (--wide-dequant). Figures only.
#include "backends/cuda/kernels/bench_wide_dequant.h"

#include <cublas_v2.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cuda/kernels/bench_support.h"
#include "backends/cuda/kernels/dequantize.cuh"
#include "backends/cuda/kernels/matmul.cuh"
#include "backends/cuda/kernels/matmul_wide.cuh"

namespace cellm::kernels {
namespace {

using bench::Buffer;

struct Shape {
  const char* name;
  int64_t rows;
  int64_t cols;
};

const Shape kDequantShapes[] = {
    {"q|k|v 6144x4096", 6144, 4096},
    {"attn 4096x4096", 4096, 4096},
    {"gate|up 28672x4096", 2 * 14336, 4096},
    {"down 4096x14336", 4096, 14336},
};

// C[rows, m] (ld y_stride, f32) = W[rows, k] (bf16, row-major) · act[m, k]ᵀ.
void gemm(cublasHandle_t cublas, const uint16_t* w, int64_t rows, int64_t k, const uint16_t* act,
          int m, float* y, int64_t y_stride) {
  const float alpha = 1.0f;
  const float beta = 0.0f;
  CELLM_CHECK(cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), m,
                           static_cast<int>(k), &alpha, w, CUDA_R_16BF, static_cast<int>(k), act,
                           CUDA_R_16BF, static_cast<int>(k), &beta, y, CUDA_R_32F,
                           static_cast<int>(y_stride), CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
}

void dequantize(const DeviceWeight& w, int64_t row, int64_t rows, uint16_t* out,
                cudaStream_t stream) {
  DequantizeParams dq;
  dq.w = w;
  dq.row_begin = row;
  dq.num_rows = rows;
  dq.out = out;
  BENCH_OK(launch_dequantize_bf16(dq, stream));
}

void convert(const float* x, int64_t k, int m, uint16_t* act, cudaStream_t stream) {
  ConvertParams c;
  c.x = x;
  c.x_stride = k;
  c.num_rows = m;
  c.num_cols = k;
  c.out = act;
  c.out_stride = k;
  BENCH_OK(launch_convert_to_half(c, stream));
}

}  // namespace

void bench_wide_dequant(cudaStream_t stream, cublasHandle_t cublas, double copy_bw,
                        double tc_rate) {
  std::printf(
      "\n== wide Q8_0 / Q4_0 product: fused vs dequantize + cuBLAS, TFLOP/s (%% of %.0f) ==\n"
      "S as shipped (fused up to %d tokens, then 64 Mi-element tiles); T 16 Mi-element tiles;\n"
      "W whole weight, one GEMM; P2 / P4 chunks, the next one dequantized on a second stream;\n"
      "G the GEMM alone (bf16 weight)\n",
      tc_rate / 1e12, kFusedMaxTokens);
  (void)copy_bw;
  std::vector<int> ms = {64, 128, 256, 512};
  if (const char* only = std::getenv("CELLM_BENCH_WIDE_M")) ms = {std::atoi(only)};
  constexpr int kMax = 512;
  cudaStream_t side;
  BENCH_CUDA(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  std::vector<cudaEvent_t> events(64);
  for (cudaEvent_t& e : events) BENCH_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  for (const Shape& shape : kDequantShapes) {
    const int64_t n = shape.rows;
    const int64_t k = shape.cols;
    Buffer x(sizeof(float) * kMax * k);
    Buffer y(sizeof(float) * kMax * n);
    Buffer act(2 * kMax * k);
    Buffer whole(2 * n * k);               // [n, k] bf16: the whole weight
    Buffer second(2 * (n / 2 + 128) * k);  // [n / 2 + 128, k] bf16: P's second chunk
    bench::fill(x.ptr, TensorType::kF32, kMax, k, 6, 1.0f, stream);
    for (const TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0}) {
      bench::WeightCopies weights(type, n, k, 30, stream);
      MatmulParams p;
      p.w = make_device_weight(nullptr, type, n, k);
      p.x = x.as<float>();
      p.x_stride = k;
      p.y = y.as<float>();
      p.y_stride = n;
      p.cublas = cublas;
      const size_t scratch_bytes = matmul_wide_scratch_bytes(p.w, kMax);
      Buffer scratch(scratch_bytes);
      p.scratch = scratch.ptr;
      p.scratch_bytes = scratch_bytes;
      const int launches = std::max(weights.count(), 4);
      std::printf("%-20s %-5s", shape.name, std::string(tensor_type_name(type)).c_str());
      for (const int m : ms) {
        const double flops = 2.0 * m * static_cast<double>(n) * k;
        const auto rate = [&](const char* tag, double t) {
          std::printf(" %s %4.0f", tag, flops / t / 1e12);
        };
        std::printf("  | M=%-3d", m);
        p.num_tokens = m;
        rate("S", bench::seconds_per_launch(stream, weights, launches, [&](const void* w) {
               p.w.data = w;
               BENCH_OK(launch_matmul_wide(p, stream));
             }));
        const int64_t tile =
            std::min(n, std::max<int64_t>(128, (int64_t{16} << 20) / k / 128 * 128));
        rate("T", bench::seconds_per_launch(stream, weights, launches, [&](const void* w) {
               DeviceWeight dw = p.w;
               dw.data = w;
               convert(x.as<float>(), k, m, act.as<uint16_t>(), stream);
               for (int64_t row = 0; row < n; row += tile) {
                 const int64_t rows = std::min(tile, n - row);
                 dequantize(dw, row, rows, whole.as<uint16_t>(), stream);
                 gemm(cublas, whole.as<uint16_t>(), rows, k, act.as<uint16_t>(), m,
                      y.as<float>() + row, n);
               }
             }));
        rate("W", bench::seconds_per_launch(stream, weights, launches, [&](const void* w) {
               DeviceWeight dw = p.w;
               dw.data = w;
               convert(x.as<float>(), k, m, act.as<uint16_t>(), stream);
               dequantize(dw, 0, n, whole.as<uint16_t>(), stream);
               gemm(cublas, whole.as<uint16_t>(), n, k, act.as<uint16_t>(), m, y.as<float>(), n);
             }));
        for (const int chunks : {2, 4}) {
          const int64_t chunk = (n / chunks + 127) / 128 * 128;
          const char* tag = chunks == 2 ? "P2" : "P4";
          rate(tag, bench::seconds_per_launch(stream, weights, launches, [&](const void* w) {
                 DeviceWeight dw = p.w;
                 dw.data = w;
                 uint16_t* buffers[2] = {whole.as<uint16_t>(), second.as<uint16_t>()};
                 size_t next_event = 0;
                 const auto record = [&](cudaStream_t s) {
                   cudaEvent_t e = events[next_event++ % events.size()];
                   BENCH_CUDA(cudaEventRecord(e, s));
                   return e;
                 };
                 BENCH_CUDA(cudaStreamWaitEvent(side, record(stream), 0));
                 convert(x.as<float>(), k, m, act.as<uint16_t>(), stream);
                 std::vector<cudaEvent_t> ready;
                 std::vector<cudaEvent_t> freed;
                 const int64_t count = (n + chunk - 1) / chunk;
                 const auto dq = [&](int64_t i) {
                   if (i >= 2) BENCH_CUDA(cudaStreamWaitEvent(side, freed[i - 2], 0));
                   const int64_t row = i * chunk;
                   dequantize(dw, row, std::min(chunk, n - row), buffers[i % 2], side);
                   ready.push_back(record(side));
                 };
                 dq(0);
                 if (count > 1) dq(1);
                 for (int64_t i = 0; i < count; ++i) {
                   BENCH_CUDA(cudaStreamWaitEvent(stream, ready[i], 0));
                   const int64_t row = i * chunk;
                   gemm(cublas, buffers[i % 2], std::min(chunk, n - row), k, act.as<uint16_t>(), m,
                        y.as<float>() + row, n);
                   freed.push_back(record(stream));
                   if (i + 2 < count) dq(i + 2);
                 }
               }));
        }
        rate("G", bench::time_graph(stream, [&] {
               convert(x.as<float>(), k, m, act.as<uint16_t>(), stream);
               gemm(cublas, whole.as<uint16_t>(), n, k, act.as<uint16_t>(), m, y.as<float>(), n);
             }));
      }
      std::printf("\n");
      BENCH_CUDA(cudaStreamSynchronize(stream));
    }
  }
  for (cudaEvent_t e : events) BENCH_CUDA(cudaEventDestroy(e));
  BENCH_CUDA(cudaStreamDestroy(side));
}

}  // namespace cellm::kernels
