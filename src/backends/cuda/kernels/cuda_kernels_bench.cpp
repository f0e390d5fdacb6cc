// cuda_kernels_bench: figures for the CUDA kernels on Llama-3.1-8B-sized operands with random
// weights (random_fill): the measured device-to-device copy bandwidth and bf16 tensor-core rate
// (the ceilings), the small-M matrix product's achieved GB/s per weight type at M = 1, 2, 4, 8
// (ratio to the copy bandwidth), the wide path's TFLOP/s at M = 64, 256, 512, and the attention
// kernels at decode and prefill shapes. Every timed region is a captured CUDA graph of several
// launches (weights rotated through copies larger than L2), replayed after a warm-up; medians.
// Usage: cuda_kernels_bench [--quick] [--attention] [--wide] [--wide-dequant] [--barrier]
// [--sampling] [--l2-stage] (only those sections; --wide: the wide path by token count —
// CELLM_BENCH_WIDE_M, _SHAPE, _TYPE in the environment keep one token count, the shapes whose name
// holds the text, one weight type (for ncu); --wide-dequant: Q8_0 / Q4_0 wide products as shipped
// against other ways to dequantize and run cuBLAS (bench_wide_dequant.h; CELLM_BENCH_WIDE_M too);
// --barrier: a grid-wide barrier's cost at 1–8 blocks per SM; --sampling: argmax and the sampling
// candidates over 128K-logit rows, bench_sampling.h; --l2-stage: whether bytes pulled into L2 while
// the bus idles are read faster later, bench_l2_stage.h — only when asked). Prints tables; never
// pass/fail (exit 1 only on errors).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/kernels/attention.cuh"
#include "backends/cuda/kernels/bench_attention.h"
#include "backends/cuda/kernels/bench_kernels.h"
#include "backends/cuda/kernels/bench_l2_stage.h"
#include "backends/cuda/kernels/bench_sampling.h"
#include "backends/cuda/kernels/bench_support.h"
#include "backends/cuda/kernels/bench_wide_dequant.h"
#include "backends/cuda/kernels/dequantize.cuh"
#include "backends/cuda/kernels/matmul.cuh"
#include "backends/cuda/kernels/quantize_activations.cuh"
#include "core/check.h"

namespace cellm::kernels {
namespace {

using bench::Buffer;
using bench::fill;
using bench::MatShape;
using bench::time_graph;
using bench::WeightCopies;

const MatShape kShapes[] = {
    {"attn 4096x4096", 4096, 4096},
    {"gate|up 28672x4096", 2 * 14336, 4096},
    {"down 4096x14336", 4096, 14336},
    {"lm head 128256x4096", 128256, 4096},
};
const TensorType kTypes[] = {TensorType::kBF16, TensorType::kQ8_0, TensorType::kQ4_0,
                             TensorType::kQ4_K, TensorType::kQ6_K};
constexpr int64_t kMaxTokens = 512;

// One product's operands: random weight copies, random activations and an output of up to
// kMaxTokens rows, and the parameters over them (weights' data unset; no scratch).
struct MatmulOperands {
  WeightCopies weights;
  Buffer x;  // [kMaxTokens, cols], f32
  Buffer y;  // [kMaxTokens, rows], f32
  MatmulParams params;

  MatmulOperands(const MatShape& shape, TensorType type, uint64_t weight_seed, uint64_t x_seed,
                 cublasHandle_t cublas, cudaStream_t stream)
      : weights(type, shape.rows, shape.cols, weight_seed, stream),
        x(sizeof(float) * kMaxTokens * shape.cols),
        y(sizeof(float) * kMaxTokens * shape.rows) {
    fill(x.ptr, TensorType::kF32, kMaxTokens, shape.cols, x_seed, 1.0f, stream);
    params.w = make_device_weight(nullptr, type, shape.rows, shape.cols);
    params.x = x.as<float>();
    params.x_stride = shape.cols;
    params.y = y.as<float>();
    params.y_stride = shape.rows;
    params.cublas = cublas;
  }
};

double bf16_gemm_rate(cudaStream_t stream, cublasHandle_t cublas) {
  const int n = 8192;
  Buffer a(size_t{2} * n * n), b(size_t{2} * n * n), c(size_t{4} * n * n);
  fill(a.ptr, TensorType::kBF16, n, n, 2, 1.0f, stream);
  fill(b.ptr, TensorType::kBF16, n, n, 3, 1.0f, stream);
  const float alpha = 1.0f, beta = 0.0f;
  BENCH_CUDA(cudaStreamSynchronize(stream));
  const double t = time_graph(stream, [&] {
    CELLM_CHECK(cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &alpha, a.ptr, CUDA_R_16BF,
                             n, b.ptr, CUDA_R_16BF, n, &beta, c.ptr, CUDA_R_32F, n,
                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
  });
  return 2.0 * n * static_cast<double>(n) * n / t;
}

void bench_matmul(cudaStream_t stream, cublasHandle_t cublas, double copy_bw, double tc_rate) {
  std::printf("\n== small-M matmul (GB/s of weights; %% of copy bandwidth %.0f GB/s) ==\n",
              copy_bw / 1e9);
  std::printf("%-22s %-6s %10s %10s %10s %10s\n", "shape", "type", "M=1", "M=2", "M=4", "M=8");
  std::vector<std::string> wide_lines;
  std::vector<std::string> variant_lines;
  std::vector<std::string> crossover_lines;
  for (const MatShape& shape : kShapes) {
    for (const TensorType type : kTypes) {
      MatmulOperands operands(shape, type, 10, 5, cublas, stream);
      const WeightCopies& weights = operands.weights;
      const uint64_t bytes = weights.bytes;
      MatmulParams& p = operands.params;
      const int launches = std::max(weights.count(), 8);
      // GB/s and % of the copy bandwidth of the small-M path at M = 1, 2, 4, 8.
      const auto print_small_m = [&](const std::string& label) {
        std::printf("%-22s %-6s", shape.name, label.c_str());
        for (const int m : {1, 2, 4, 8}) {
          p.num_tokens = m;
          const double t = bench::seconds_per_launch(stream, weights, launches, [&](const void* w) {
            p.w.data = w;
            BENCH_OK(launch_matmul_small_m(p, stream));
          });
          const double gbps = static_cast<double>(bytes) / t;
          std::printf(" %5.0f %3.0f%%", gbps / 1e9, 100.0 * gbps / copy_bw);
        }
      };
      print_small_m(std::string(tensor_type_name(type)));
      std::printf("\n");

      // Q8_0 / Q4_0 with int8 activations (dp4a).
      if (type == TensorType::kQ8_0 || type == TensorType::kQ4_0) {
        Buffer xq(static_cast<size_t>(kMaxTokens) * shape.cols);
        Buffer xs(sizeof(float) * kMaxTokens * (shape.cols / 32));
        QuantizeActivationsParams qp;
        qp.num_tokens = 8;
        qp.num_cols = shape.cols;
        qp.x = p.x;
        qp.x_stride = p.x_stride;
        qp.q = xq.as<int8_t>();
        qp.scales = xs.as<float>();
        BENCH_OK(launch_quantize_activations(qp, stream));
        p.x_q8 = xq.as<int8_t>();
        p.x_q8_scales = xs.as<float>();
        print_small_m(std::string(tensor_type_name(type)) + "+i8");
        qp.num_tokens = 1;
        const double t_quantize =
            time_graph(stream, [&] { BENCH_OK(launch_quantize_activations(qp, stream)); });
        std::printf("   (quantizing one row: %.1f us)\n", t_quantize * 1e6);
        BENCH_CUDA(cudaStreamSynchronize(stream));
        p.x_q8 = nullptr;
        p.x_q8_scales = nullptr;
      }

      // Tuning data: M = 1 with 1, 2, 4, 8 rows per block.
      {
        GemvArgs args;
        args.num_rows = shape.rows;
        args.num_cols = shape.cols;
        args.row_bytes = p.w.row_bytes;
        args.x = p.x;
        args.x_stride = p.x_stride;
        args.num_tokens = 1;
        args.y = p.y;
        args.y_stride = p.y_stride;
        char line[256];
        int n = std::snprintf(line, sizeof(line), "%-22s %-6s", shape.name,
                              std::string(tensor_type_name(type)).c_str());
        for (const int r : {1, 2, 4, 8}) {
          const double t = bench::seconds_per_launch(stream, weights, launches, [&](const void* w) {
            args.w = static_cast<const uint8_t*>(w);
            CELLM_CHECK(launch_gemv_variant(type, r, args, stream));
          });
          n += std::snprintf(line + n, sizeof(line) - static_cast<size_t>(n), " %5.0f",
                             static_cast<double>(bytes) / t / 1e9);
        }
        variant_lines.push_back(line);
      }

      // Where the small-M path should hand over to the wide one: both at M = 2, 4, 6, 8.
      {
        char line[256];
        int n = std::snprintf(line, sizeof(line), "%-22s %-6s", shape.name,
                              std::string(tensor_type_name(type)).c_str());
        const size_t crossover_scratch = matmul_wide_scratch_bytes(p.w, 8);
        Buffer scratch(crossover_scratch);
        p.scratch = scratch.ptr;
        p.scratch_bytes = crossover_scratch;
        p.w.data = weights.at(0);
        for (const int m : {2, 4, 6, 8}) {
          p.num_tokens = m;
          const double small =
              time_graph(stream, [&] { BENCH_OK(launch_matmul_small_m(p, stream)); });
          const double wide = time_graph(stream, [&] { BENCH_OK(launch_matmul_wide(p, stream)); });
          n += std::snprintf(line + n, sizeof(line) - static_cast<size_t>(n), " %7.1f/%-7.1f",
                             small * 1e6, wide * 1e6);
        }
        crossover_lines.push_back(line);
        p.scratch = nullptr;
        p.scratch_bytes = 0;
      }

      // Wide path: tile dequantization for quantized types, plus a resident bf16 copy.
      const size_t scratch_bytes = matmul_wide_scratch_bytes(p.w, static_cast<int32_t>(kMaxTokens));
      Buffer scratch(scratch_bytes);
      p.scratch = scratch.ptr;
      p.scratch_bytes = scratch_bytes;
      p.w.data = weights.at(0);
      const bool quantized = type != TensorType::kBF16;
      std::unique_ptr<Buffer> copy;
      if (quantized) {
        copy = std::make_unique<Buffer>(size_t{2} * shape.rows * shape.cols);
        DequantizeParams dq;
        dq.w = p.w;
        dq.num_rows = shape.rows;
        dq.out = copy->as<uint16_t>();
        BENCH_OK(launch_dequantize_bf16(dq, stream));
      }
      for (const bool use_copy : {false, true}) {
        if (use_copy && !quantized) continue;
        p.w_bf16 = use_copy ? copy->as<uint16_t>() : nullptr;
        char line[256];
        int n = std::snprintf(line, sizeof(line), "%-22s %-6s %-9s", shape.name,
                              std::string(tensor_type_name(type)).c_str(),
                              use_copy ? "bf16 copy" : (quantized ? "no copy" : "direct"));
        for (const int m : {64, 256, 512}) {
          p.num_tokens = m;
          const double t = time_graph(stream, [&] { BENCH_OK(launch_matmul_wide(p, stream)); });
          const double flops = 2.0 * m * static_cast<double>(shape.rows) * shape.cols / t;
          n += std::snprintf(line + n, sizeof(line) - static_cast<size_t>(n), " %6.0f %3.0f%%",
                             flops / 1e12, 100.0 * flops / tc_rate);
        }
        wide_lines.push_back(line);
      }
      p.w_bf16 = nullptr;
      BENCH_CUDA(cudaStreamSynchronize(stream));
    }
  }
  std::printf(
      "\n== wide matmul (TFLOP/s; %% of measured bf16 rate %.0f TFLOP/s; no copy: Q8_0/Q4_0 fused "
      "up to M=256, else bf16 tiles) ==\n",
      tc_rate / 1e12);
  std::printf("%-22s %-6s %-9s %11s %11s %11s\n", "shape", "type", "weights", "M=64", "M=256",
              "M=512");
  for (const std::string& line : wide_lines) std::printf("%s\n", line.c_str());
  std::printf(
      "\n== tuning: small-M GB/s at M=1 by rows per block (shipped: bf16 2, q8_0 2, "
      "q4_0 4, q4_K 4, q6_K 2) ==\n");
  std::printf("%-22s %-6s %5s %5s %5s %5s\n", "shape", "type", "R=1", "R=2", "R=4", "R=8");
  for (const std::string& line : variant_lines) std::printf("%s\n", line.c_str());
  std::printf(
      "\n== small-M vs wide path, us (small/wide; wide = fused for Q8_0/Q4_0, bf16 tiles for "
      "K-quants) ==\n");
  std::printf("%-22s %-6s %15s %15s %15s %15s\n", "shape", "type", "M=2", "M=4", "M=6", "M=8");
  for (const std::string& line : crossover_lines) std::printf("%s\n", line.c_str());
}

// The wide path alone at the token counts of batched decode and prefill: bf16 through cuBLAS,
// Q8_0 / Q4_0 through the fused tensor-core kernel (M ≤ 256) or bf16 tiles (M = 512); weight
// copies rotated past L2. TFLOP/s and GB/s of weight bytes per product.
void bench_wide(cudaStream_t stream, cublasHandle_t cublas, double copy_bw, double tc_rate) {
  std::printf(
      "\n== wide path by token count: TFLOP/s (%% of %.0f) / weight GB/s (%% of %.0f copy) ==\n",
      tc_rate / 1e12, copy_bw / 1e9);
  std::vector<int> ms = {8, 16, 32, 64, 128, 256, 512};
  if (const char* only = std::getenv("CELLM_BENCH_WIDE_M")) ms = {std::atoi(only)};
  const char* only_shape = std::getenv("CELLM_BENCH_WIDE_SHAPE");
  const char* only_type = std::getenv("CELLM_BENCH_WIDE_TYPE");
  std::printf("%-22s %-6s", "shape", "type");
  for (const int m : ms) std::printf("          M=%-4d", m);
  std::printf("\n");
  for (const MatShape& shape : kShapes) {
    if (only_shape != nullptr && std::strstr(shape.name, only_shape) == nullptr) continue;
    for (const TensorType type : {TensorType::kBF16, TensorType::kQ8_0, TensorType::kQ4_0}) {
      if (only_type != nullptr && std::string(tensor_type_name(type)) != only_type) continue;
      MatmulOperands operands(shape, type, 30, 6, cublas, stream);
      MatmulParams& p = operands.params;
      const size_t scratch_bytes = matmul_wide_scratch_bytes(p.w, static_cast<int32_t>(kMaxTokens));
      Buffer scratch(scratch_bytes);
      p.scratch = scratch.ptr;
      p.scratch_bytes = scratch_bytes;
      const int launches = std::max(operands.weights.count(), 4);
      std::printf("%-22s %-6s", shape.name, std::string(tensor_type_name(type)).c_str());
      for (const int m : ms) {
        p.num_tokens = m;
        const double t =
            bench::seconds_per_launch(stream, operands.weights, launches, [&](const void* w) {
              p.w.data = w;
              BENCH_OK(launch_matmul_wide(p, stream));
            });
        const double flops = 2.0 * m * static_cast<double>(shape.rows) * shape.cols / t;
        const double gbps = static_cast<double>(operands.weights.bytes) / t;
        std::printf(" %4.0f %2.0f%%/%4.0f %2.0f%%", flops / 1e12, 100.0 * flops / tc_rate,
                    gbps / 1e9, 100.0 * gbps / copy_bw);
      }
      std::printf("\n");
      BENCH_CUDA(cudaStreamSynchronize(stream));
    }
  }
}

}  // namespace
}  // namespace cellm::kernels

namespace cellm::kernels {
namespace {

// Microseconds per grid-wide barrier (launch_grid_barrier_rounds) at 1, 2, 4 and 8 blocks of 128
// threads per SM: the median of 5 launches of 2000 rounds, after a warm-up launch.
void bench_barrier(cudaStream_t stream, int num_sms) {
  std::printf(
      "\n== grid-wide barrier (cooperative launch, 128-thread blocks), us per barrier ==\n");
  constexpr int kRounds = 2000;
  Buffer sync(2 * sizeof(unsigned));
  BENCH_CUDA(cudaMemsetAsync(sync.ptr, 0, 2 * sizeof(unsigned), stream));
  cudaEvent_t start;
  cudaEvent_t stop;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  for (const int per_sm : {1, 2, 4, 8}) {
    const int blocks = per_sm * num_sms;
    auto* words = static_cast<unsigned*>(sync.ptr);
    BENCH_CUDA(launch_grid_barrier_rounds(blocks, kRounds, words, stream));  // warm-up
    std::vector<float> ms;
    for (int i = 0; i < 5; ++i) {
      BENCH_CUDA(cudaEventRecord(start, stream));
      BENCH_CUDA(launch_grid_barrier_rounds(blocks, kRounds, words, stream));
      BENCH_CUDA(cudaEventRecord(stop, stream));
      BENCH_CUDA(cudaEventSynchronize(stop));
      float t = 0.0f;
      BENCH_CUDA(cudaEventElapsedTime(&t, start, stop));
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%2d blocks per SM (%4d blocks): %.2f us\n", per_sm, blocks,
                1e3 * static_cast<double>(ms[2]) / kRounds);
  }
  BENCH_CUDA(cudaEventDestroy(start));
  BENCH_CUDA(cudaEventDestroy(stop));
}

}  // namespace
}  // namespace cellm::kernels

int main(int argc, char** argv) {
  using namespace cellm::kernels;
  // --attention / --wide: only those sections (the wide one by token count); default: all but
  // the by-token-count wide table.
  bool only_attention = false;
  bool only_wide = false;
  bool only_barrier = false;
  bool only_wide_dequant = false;
  bool only_sampling = false;
  bool only_l2_stage = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) bench::set_timed_replays(3);
    if (std::strcmp(argv[i], "--attention") == 0) only_attention = true;
    if (std::strcmp(argv[i], "--wide") == 0) only_wide = true;
    if (std::strcmp(argv[i], "--barrier") == 0) only_barrier = true;
    if (std::strcmp(argv[i], "--wide-dequant") == 0) only_wide_dequant = true;
    if (std::strcmp(argv[i], "--sampling") == 0) only_sampling = true;
    if (std::strcmp(argv[i], "--l2-stage") == 0) only_l2_stage = true;
  }
  const bool all = !only_attention && !only_wide && !only_barrier && !only_wide_dequant &&
                   !only_sampling && !only_l2_stage;
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, %.0f MiB L2\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize / 1048576.0);
  BENCH_OK(prepare_attention_kernels());
  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasHandle_t cublas;
  CELLM_CHECK(cublasCreate(&cublas) == CUBLAS_STATUS_SUCCESS);
  Buffer workspace(kCublasWorkspaceBytes);
  CELLM_CHECK(cublasSetWorkspace(cublas, workspace.ptr, kCublasWorkspaceBytes) ==
              CUBLAS_STATUS_SUCCESS);
  CELLM_CHECK(cublasSetStream(cublas, stream) == CUBLAS_STATUS_SUCCESS);
  double memcpy_bw = 0.0;
  const double copy_bw = bench::copy_bandwidth(stream, &memcpy_bw);
  const double tc_rate = bf16_gemm_rate(stream, cublas);
  std::printf(
      "ceilings: copy kernel %.0f GB/s (read + write; cudaMemcpyAsync %.0f), bf16 GEMM "
      "8192^3 %.0f TFLOP/s\n",
      copy_bw / 1e9, memcpy_bw / 1e9, tc_rate / 1e12);
  if (all) bench_matmul(stream, cublas, copy_bw, tc_rate);
  if (only_wide) bench_wide(stream, cublas, copy_bw, tc_rate);
  if (only_wide_dequant) bench_wide_dequant(stream, cublas, copy_bw, tc_rate);
  if (all || only_attention) bench_attention(stream, copy_bw, tc_rate, prop.multiProcessorCount);
  if (all || only_barrier) bench_barrier(stream, prop.multiProcessorCount);
  if (all || only_sampling) bench_sampling(stream);
  if (only_l2_stage) bench_l2_stage(stream, copy_bw, prop.multiProcessorCount);
  cublasDestroy(cublas);
  BENCH_CUDA(cudaStreamDestroy(stream));
  return 0;
}
