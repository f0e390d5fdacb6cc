// decode_kernels_bench: figures for the batch-1 decode path's kernels on Llama-3.1-8B shapes with
// random weights — the measured copy bandwidth (the ceiling); the small-M product's GB/s per
// weight type and shape: the previous kernel (gemv_kernel.cuh, its shipped rows per block) and
// the fused decode kernel (decode_matmul.cuh) with f32, normed f32 and int8 inputs at M = 1, and
// at M = 2, 4, 8; a tuning table of the decode kernel's rows-per-block / chunks-in-flight variants
// at M = 1 (each checked against the shipped variant's output); and the whole chain of a decode
// step's products (32 layers of q|k|v with RoPE, output, gate|up with SwiGLU, down, then the LM
// head and argmax; int8 quantize launches where they apply; no attention) as one captured graph,
// against the sum of its parts and the bytes it reads. Every timed region is a graph replayed
// after a warm-up; medians; weights rotated through copies larger than L2.
// --persistent: only the one-launch prototype of the layers' products (decode_persistent_bench.h)
// against the same products as launches (and, for Q4_0, as launches over block-major weights:
// decode_block_major_bench.h), with the residuals' differences; --ring: the same
// for the one-launch prototype whose weights stream through a shared-memory ring
// (decode_ring_bench.h); --latency: the round trips of a grid-wide handoff with and without
// weights streaming (decode_latency_probe.h).
// Usage: cuda_decode_bench [--chain-only] [--persistent] [--ring] [--latency] [--quick].
// CELLM_CUDA_PDL=0 times
// the same launches without programmatic dependent launch. Prints tables; never pass/fail (exit 1
// on errors).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/kernels/bench_kernels.h"
#include "backends/cuda/kernels/bench_support.h"
#include "backends/cuda/kernels/decode_bench_kernels.h"
#include "backends/cuda/kernels/decode_chain_benches.h"
#include "backends/cuda/kernels/decode_latency_probe.h"
#include "backends/cuda/kernels/decode_matmul.cuh"
#include "backends/cuda/kernels/pdl.cuh"
#include "backends/cuda/kernels/quantize_activations.cuh"
#include "core/check.h"

namespace cellm::kernels {
namespace {

using bench::Buffer;
using bench::WeightCopies;
using Shape = bench::MatShape;

const Shape kShapes[] = {{"qkv 6144x4096", 6144, 4096},
                         {"o 4096x4096", 4096, 4096},
                         {"gate|up 28672x4096", 28672, 4096},
                         {"down 4096x14336", 4096, 14336},
                         {"lm head 128256x4096", 128256, 4096}};
const TensorType kTypes[] = {TensorType::kBF16, TensorType::kQ8_0, TensorType::kQ4_0};

// Launches per timed graph over a shape's weight copies.
int launches(const WeightCopies& w) { return std::max(w.count(), 8); }

// Activations: f32 rows, their int8 quantization, a norm weight.
struct Inputs {
  Buffer x, norm, xq, xs, y;
  Inputs(int64_t k, int64_t n, cudaStream_t stream)
      : x(sizeof(float) * 8 * static_cast<size_t>(k)),
        norm(sizeof(float) * static_cast<size_t>(k)),
        xq(8 * static_cast<size_t>(k)),
        xs(sizeof(float) * 8 * static_cast<size_t>(k / 32 + 1)),
        y(sizeof(float) * 8 * static_cast<size_t>(n)) {
    bench::fill(x.ptr, TensorType::kF32, 8, k, 5, 1.0f, stream);
    bench::fill(norm.ptr, TensorType::kF32, 1, k, 6, 1.0f, stream);
    QuantizeActivationsParams q;
    q.num_tokens = 8;
    q.num_cols = k;
    q.x = x.as<float>();
    q.x_stride = k;
    q.q = xq.as<int8_t>();
    q.scales = xs.as<float>();
    BENCH_OK(launch_quantize_activations(q, stream));
  }
};

DecodeMatmulParams product_params(TensorType type, const Shape& s, const Inputs& in, int32_t m,
                                  bool normed, bool int8) {
  DecodeMatmulParams p;
  p.w = make_device_weight(nullptr, type, s.rows, s.cols);
  p.num_tokens = m;
  if (int8) {
    p.x_q8 = in.xq.as<int8_t>();
    p.x_q8_scales = in.xs.as<float>();
  } else {
    p.x = in.x.as<float>();
    p.x_stride = s.cols;
    if (normed) {
      p.norm_weight = in.norm.as<float>();
      p.norm_eps = 1e-5f;
    }
  }
  p.y = in.y.as<float>();
  p.y_stride = s.rows;
  return p;
}

// GB/s of weights read by launches of p rotated over the copies.
double product_gbps(cudaStream_t stream, const WeightCopies& w, DecodeMatmulParams p) {
  const double t = bench::seconds_per_launch(stream, w, launches(w), [&](const void* data) {
    p.w.data = data;
    BENCH_OK(launch_decode_matmul(p, stream));
  });
  return static_cast<double>(w.bytes) / t / 1e9;
}

void bench_products(cudaStream_t stream, double ceiling) {
  std::printf("\n== decode products, GB/s of weights (%% of copy bandwidth %.0f GB/s) ==\n",
              ceiling / 1e9);
  std::printf("%-20s %-5s %11s %11s %11s %11s %11s %11s %11s\n", "shape", "type", "old M=1",
              "f32 M=1", "norm M=1", "i8 M=1", "M=2", "M=4", "M=8");
  std::vector<std::string> tuning;
  const auto cell = [ceiling](double gbps) {
    char text[32];
    std::snprintf(text, sizeof(text), " %5.0f %4.0f%%", gbps, 100.0 * gbps * 1e9 / ceiling);
    return std::string(text);
  };
  for (const Shape& s : kShapes) {
    for (const TensorType type : kTypes) {
      const WeightCopies w(type, s.rows, s.cols, 10, stream);
      const Inputs in(s.cols, s.rows, stream);
      const bool has_int8 = type != TensorType::kBF16;
      std::string line;
      {  // the previous kernel with its shipped rows per block
        GemvArgs args;
        args.num_rows = s.rows;
        args.num_cols = s.cols;
        args.row_bytes = device_row_bytes(type, s.cols);
        args.x = in.x.as<float>();
        args.x_stride = s.cols;
        args.num_tokens = 1;
        args.y = in.y.as<float>();
        args.y_stride = s.rows;
        const int rows = type == TensorType::kBF16
                             ? 2
                             : (s.rows <= 8192 ? 1 : (type == TensorType::kQ4_0 ? 4 : 2));
        const double t = bench::seconds_per_launch(stream, w, launches(w), [&](const void* data) {
          args.w = static_cast<const uint8_t*>(data);
          CELLM_CHECK(launch_gemv_variant(type, rows, args, stream));
        });
        line += cell(static_cast<double>(w.bytes) / t / 1e9);
      }
      line += cell(product_gbps(stream, w, product_params(type, s, in, 1, false, false)));
      line += cell(product_gbps(stream, w, product_params(type, s, in, 1, true, false)));
      line += has_int8 ? cell(product_gbps(stream, w, product_params(type, s, in, 1, false, true)))
                       : std::string(12, ' ');
      for (const int32_t m : {2, 4, 8}) {
        line += cell(product_gbps(stream, w, product_params(type, s, in, m, false, has_int8)));
      }
      std::printf("%-20s %-5s%s\n", s.name, std::string(tensor_type_name(type)).c_str(),
                  line.c_str());

      // Tuning: variants at M = 1, with the largest relative difference from the shipped output.
      for (const bool int8 : {false, true}) {
        if (int8 && !has_int8) continue;
        const std::vector<DecodeVariant> variants = decode_variants(type, int8);
        if (variants.empty()) continue;
        DecodeMatmulParams p = product_params(type, s, in, 1, false, int8);
        p.w.data = w.at(0);
        // The stream does not synchronize with the legacy default stream: wait for it explicitly.
        BENCH_OK(launch_decode_matmul(p, stream));
        BENCH_CUDA(cudaStreamSynchronize(stream));
        std::vector<float> shipped(static_cast<size_t>(s.rows)), got(shipped.size());
        BENCH_CUDA(
            cudaMemcpy(shipped.data(), in.y.ptr, shipped.size() * 4, cudaMemcpyDeviceToHost));
        char text[512];
        int n = std::snprintf(text, sizeof(text), "%-20s %-5s %-4s", s.name,
                              std::string(tensor_type_name(type)).c_str(), int8 ? "i8" : "f32");
        for (const DecodeVariant& v : variants) {
          DecodeGemvArgs a = make_decode_gemv_args(p);
          BENCH_CUDA(cudaMemsetAsync(in.y.ptr, 0xff, shipped.size() * 4, stream));
          BENCH_CUDA(v.launch(a, stream));
          BENCH_CUDA(cudaStreamSynchronize(stream));
          BENCH_CUDA(cudaMemcpy(got.data(), in.y.ptr, got.size() * 4, cudaMemcpyDeviceToHost));
          double worst = 0.0;
          for (size_t i = 0; i < got.size(); ++i) {
            const double d = std::fabs(static_cast<double>(got[i]) - shipped[i]) /
                             std::max(1e-3, std::fabs(static_cast<double>(shipped[i])));
            worst = std::isnan(d) ? INFINITY : std::max(worst, d);
          }
          const double t = bench::seconds_per_launch(stream, w, launches(w), [&](const void* data) {
            a.w = static_cast<const uint8_t*>(data);
            BENCH_CUDA(v.launch(a, stream));
          });
          n += std::snprintf(text + n, sizeof(text) - static_cast<size_t>(n),
                             "  R%dD%d%s %5.0f (%.0e)", v.rows_per_block, v.chunks_in_flight,
                             v.note, static_cast<double>(w.bytes) / t / 1e9, worst);
        }
        tuning.push_back(text);
      }
      BENCH_CUDA(cudaStreamSynchronize(stream));
    }
  }
  std::printf(
      "\n== tuning at M=1: GB/s per rows-per-block R / chunks-in-flight D (max rel diff "
      "from shipped) ==\n");
  for (const std::string& line : tuning) std::printf("%s\n", line.c_str());
}

}  // namespace
}  // namespace cellm::kernels

int main(int argc, char** argv) {
  using namespace cellm::kernels;
  using cellm::TensorType;
  bool chain_only = false;
  bool persistent_only = false;
  bool ring_only = false;
  bool latency_only = false;
  bench::set_timed_replays(15);
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--chain-only") == 0) chain_only = true;
    if (std::strcmp(argv[i], "--persistent") == 0) persistent_only = true;
    if (std::strcmp(argv[i], "--ring") == 0) ring_only = true;
    if (std::strcmp(argv[i], "--latency") == 0) latency_only = true;
    if (std::strcmp(argv[i], "--quick") == 0) bench::set_timed_replays(5);
  }
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, %.0f MiB L2; programmatic dependent launch %s\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize / 1048576.0,
              pdl_enabled() ? "on" : "off (CELLM_CUDA_PDL=0)");
  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const double ceiling = bench::copy_bandwidth(stream);
  std::printf("ceiling: copy kernel %.0f GB/s (read + write)\n", ceiling / 1e9);
  if (latency_only) {
    bench_latency_probe(stream, ceiling);
    BENCH_CUDA(cudaStreamDestroy(stream));
    return 0;
  }
  if (persistent_only || ring_only) {
    std::printf("\n== layers' products, launches vs one %s launch (32 layers, int8) ==\n",
                ring_only ? "ring" : "persistent");
    for (const TensorType type : {TensorType::kQ4_0, TensorType::kQ8_0}) {
      bench_persistent(stream, ceiling, type, ring_only);
    }
    BENCH_CUDA(cudaStreamDestroy(stream));
    return 0;
  }
  if (!chain_only) bench_products(stream, ceiling);
  std::printf("\n== decode step's products as one graph (32 layers + LM head + argmax) ==\n");
  for (const TensorType type : kTypes) {
    for (const bool int8 : {false, true}) {
      if (int8 && type == TensorType::kBF16) continue;
      if (chain_only && !int8 && type != TensorType::kBF16) continue;
      bench_chain(stream, ceiling, type, int8);
    }
  }
  BENCH_CUDA(cudaStreamDestroy(stream));
  return 0;
}
