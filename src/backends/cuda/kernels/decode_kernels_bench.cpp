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
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/kernels/argmax.cuh"
#include "backends/cuda/kernels/bench_kernels.h"
#include "backends/cuda/kernels/bench_support.h"
#include "backends/cuda/kernels/decode_bench_kernels.h"
#include "backends/cuda/kernels/decode_block_major_bench.h"
#include "backends/cuda/kernels/decode_latency_probe.h"
#include "backends/cuda/kernels/decode_matmul.cuh"
#include "backends/cuda/kernels/decode_persistent_bench.h"
#include "backends/cuda/kernels/decode_ring_bench.h"
#include "backends/cuda/kernels/decode_ring_timeline.h"
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
                             "  R%dD%d %5.0f (%.0e)", v.rows_per_block, v.chunks_in_flight,
                             static_cast<double>(w.bytes) / t / 1e9, worst);
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

// Launches the int8 quantization of one row of k f32 activations at src (RMS-normed with `norm`
// when given) into xq / xs and points p's int8 input at them.
void quantize_input(const float* src, int64_t k, const float* norm, const Buffer& xq,
                    const Buffer& xs, cudaStream_t stream, DecodeMatmulParams* p) {
  QuantizeActivationsParams q;
  q.num_tokens = 1;
  q.num_cols = k;
  q.x = src;
  q.x_stride = k;
  q.norm_weight = norm;
  q.norm_eps = 1e-5f;
  q.q = xq.as<int8_t>();
  q.scales = xs.as<float>();
  BENCH_OK(launch_quantize_activations(q, stream));
  p->x_q8 = xq.as<int8_t>();
  p->x_q8_scales = xs.as<float>();
}

// A decode step's products (no attention) for 32 Llama-3.1-8B layers and the LM head.
void bench_chain(cudaStream_t stream, double ceiling, TensorType type, bool int8) {
  const int64_t hidden = 4096, ffn = 14336, vocab = 128256, kv = 1024;
  const int64_t qkv_rows = hidden + 2 * kv;
  const int layers = 32;
  const bool q8 = int8 && type != TensorType::kBF16;
  struct Layer {
    std::unique_ptr<Buffer> qkv, o, gate_up, down;
  };
  std::vector<Layer> w(layers);
  uint64_t bytes = 0;
  const auto make = [&](int64_t rows, int64_t cols, uint64_t seed) {
    const uint64_t b = device_row_bytes(type, cols) * static_cast<uint64_t>(rows);
    bytes += b;
    auto buffer = std::make_unique<Buffer>(b);
    bench::fill(buffer->ptr, type, rows, cols, seed, 0.02f, stream);
    return buffer;
  };
  for (int l = 0; l < layers; ++l) {
    w[l].qkv = make(qkv_rows, hidden, 100 + 4 * l);
    w[l].o = make(hidden, hidden, 101 + 4 * l);
    w[l].gate_up = make(2 * ffn, hidden, 102 + 4 * l);
    w[l].down = make(hidden, ffn, 103 + 4 * l);
  }
  const std::unique_ptr<Buffer> head = make(vocab, hidden, 99);
  Buffer x(4 * hidden), qkv(4 * qkv_rows), act(4 * ffn), logits(4 * vocab), norm(4 * hidden);
  Buffer xq(ffn), xs(4 * (ffn / 32)), k_cache(2 * 2 * kv), v_cache(2 * 2 * kv), token(4);
  Buffer positions(4), cells(4), scratch(argmax_scratch_bytes(1));
  bench::fill(x.ptr, TensorType::kF32, 1, hidden, 7, 1.0f, stream);
  bench::fill(norm.ptr, TensorType::kF32, 1, hidden, 8, 1.0f, stream);
  BENCH_CUDA(cudaMemsetAsync(positions.ptr, 0, 4, stream));
  BENCH_CUDA(cudaMemsetAsync(cells.ptr, 0, 4, stream));
  BENCH_CUDA(cudaMemsetAsync(scratch.ptr, 0, argmax_scratch_bytes(1), stream));
  BENCH_CUDA(cudaStreamSynchronize(stream));
  const auto input = [&](DecodeMatmulParams* p, const float* src, int64_t k, bool normed) {
    if (q8) {
      quantize_input(src, k, normed ? norm.as<float>() : nullptr, xq, xs, stream, p);
    } else {
      p->x = src;
      p->x_stride = k;
      p->norm_weight = normed ? norm.as<float>() : nullptr;
      p->norm_eps = 1e-5f;
    }
  };
  const auto product = [&](const void* data, int64_t rows, int64_t cols) {
    DecodeMatmulParams p;
    p.w = make_device_weight(data, type, rows, cols);
    p.num_tokens = 1;
    return p;
  };
  const double t = bench::time_graph(stream, [&] {
    for (int l = 0; l < layers; ++l) {
      DecodeMatmulParams a = product(w[l].qkv->ptr, qkv_rows, hidden);
      input(&a, x.as<float>(), hidden, true);
      a.y = qkv.as<float>();
      a.y_stride = qkv_rows;
      a.output = DecodeOutput::kRopeKv;
      a.rope = {positions.as<int32_t>(),
                cells.as<int32_t>(),
                4096,
                1024,
                1024,
                128,
                128,
                500000.0f,
                1.0f,
                nullptr,
                nullptr,
                k_cache.ptr,
                v_cache.ptr,
                KvDtype::kBF16};
      BENCH_OK(launch_decode_matmul(a, stream));
      DecodeMatmulParams o = product(w[l].o->ptr, hidden, hidden);
      input(&o, qkv.as<float>(), hidden, false);  // q stands in for the attention output
      o.y = x.as<float>();
      o.y_stride = hidden;
      o.accumulate = true;
      BENCH_OK(launch_decode_matmul(o, stream));
      DecodeMatmulParams g = product(w[l].gate_up->ptr, 2 * ffn, hidden);
      input(&g, x.as<float>(), hidden, true);
      g.output = DecodeOutput::kSwiglu;
      g.y = act.as<float>();
      g.y_stride = ffn;
      BENCH_OK(launch_decode_matmul(g, stream));
      DecodeMatmulParams d = product(w[l].down->ptr, hidden, ffn);
      input(&d, act.as<float>(), ffn, false);
      d.y = x.as<float>();
      d.y_stride = hidden;
      d.accumulate = true;
      BENCH_OK(launch_decode_matmul(d, stream));
    }
    DecodeMatmulParams h = product(head->ptr, vocab, hidden);
    input(&h, x.as<float>(), hidden, true);
    h.y = logits.as<float>();
    h.y_stride = vocab;
    BENCH_OK(launch_decode_matmul(h, stream));
    ArgmaxParams am;
    am.num_rows = 1;
    am.vocab = vocab;
    am.logits = logits.as<float>();
    am.stride = vocab;
    am.out = token.as<int32_t>();
    am.scratch = scratch.ptr;
    am.scratch_bytes = argmax_scratch_bytes(1);
    BENCH_OK(launch_argmax(am, stream));
  });
  const double gbps = static_cast<double>(bytes) / t / 1e9;
  std::printf(
      "%-5s %-4s %-6s %8.3f ms  %6.2f GB  %5.0f GB/s  %4.1f%% of copy bandwidth  (%.0f tok/s "
      "without attention and host)\n",
      std::string(tensor_type_name(type)).c_str(), q8 ? "i8" : "f32",
      pdl_enabled() ? "pdl" : "no-pdl", t * 1e3, static_cast<double>(bytes) / 1e9, gbps,
      100.0 * gbps * 1e9 / ceiling, 1.0 / t);
}

// A chain prototype's launch `run(num_layers)` checked against the launches' residuals `want`
// (after one layer and after all): nullopt, the reason printed, when it cannot launch; else the
// check's text for the report.
template <class Run, class Reset, class Residual, class Difference>
std::optional<std::string> check_chain(const char* name, TensorType type, cudaStream_t stream,
                                       const Run& run, const Reset& reset, const Residual& residual,
                                       const Difference& difference,
                                       const std::vector<float> (&want)[2], int layers) {
  const cudaError_t probe = run(1);
  if (probe != cudaSuccess) {
    std::printf("%-5s %s: %s\n", std::string(tensor_type_name(type)).c_str(), name,
                cudaGetErrorString(probe));
    (void)cudaGetLastError();
    return std::nullopt;
  }
  BENCH_CUDA(cudaStreamSynchronize(stream));
  double diff[2];
  for (int v = 0; v < 2; ++v) {
    reset();
    BENCH_CUDA(run(v == 0 ? 1 : layers));
    diff[v] = difference(want[v], residual());
  }
  char check[96];
  std::snprintf(check, sizeof(check), "residual vs launches: %.2e (1 layer), %.2e (%d layers)",
                diff[0], diff[1], layers);
  return std::string(check);
}

// The ring prototype (decode_ring_bench.h) in each shape, checked against the launches' residuals
// `want` (after one layer and after all) and timed, then timed without its grid barriers, without
// its input quantization, without both (the weight stream alone), and without weights (the
// consumers' compute rate; the stage boundaries without weight traffic). The shapes that hand
// their inputs over also print their timeline (decode_ring_timeline.h).
template <class Launch, class Reset, class Residual, class Difference, class Report>
void bench_ring_variants(const Launch& launch, cudaStream_t stream, const Reset& reset,
                         const Residual& residual, const Difference& difference,
                         const std::vector<float> (&want)[2], int layers, const Report& report,
                         TensorType type) {
  Buffer scratch(ring_handover_scratch_bytes());
  std::vector<RingShape> shapes = {RingShape{8, 1, 18432}, RingShape{16, 1, 9216}};
  for (const bool block_major : {false, true}) {
    if (block_major && type != TensorType::kQ4_0) continue;
    for (RingShape shape : {RingShape{8, 1, 18432}, RingShape{16, 1, 9216}}) {
      shape.handover_scratch = scratch.ptr;
      shape.block_major = block_major;
      shapes.push_back(shape);
    }
  }
  // The handover shape of 8 warps (block-major for Q4_0) with fewer bulk copies in flight; and
  // with tiles of 4 and 1 rows in two 9 KB slots per warp (the same ring, 19 KB of tile loops and
  // boundary code run per layer instead of 30).
  for (const int copies : {4, 3, 2, 0}) {
    RingShape shape = copies > 0 ? RingShape{8, 1, 18432} : RingShape{8, 2, 9216};
    shape.handover_scratch = scratch.ptr;
    shape.block_major = type == TensorType::kQ4_0;
    shape.copies_in_flight = copies;
    shapes.push_back(shape);
  }
  int device = 0, num_sms = 0;
  BENCH_CUDA(cudaGetDevice(&device));
  BENCH_CUDA(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device));
  Buffer timeline(sizeof(uint64_t) * ring_timeline_words(layers, num_sms));
  for (const RingShape& shape : shapes) {
    char name[96];
    char in_flight[24] = "";
    if (shape.copies_in_flight > 0) {
      std::snprintf(in_flight, sizeof(in_flight), ", %d in flight", shape.copies_in_flight);
    }
    std::snprintf(name, sizeof(name), "ring, %d warps × %d slots of %u KB%s%s%s",
                  shape.consumer_warps, shape.slots_per_warp, shape.slot_bytes / 1024,
                  shape.handover_scratch != nullptr ? ", handover" : "",
                  shape.block_major ? ", block-major" : "", in_flight);
    const std::optional<std::string> check = check_chain(
        name, type, stream, [&](int num_layers) { return launch(num_layers, shape, false, false); },
        reset, residual, difference, want, layers);
    if (!check) continue;
    const auto time = [&](const RingShape& variant, int skip) {
      return bench::time_graph(stream, [&] {
        reset();
        BENCH_CUDA(launch(layers, variant, skip & 1, skip & 2));
      });
    };
    report(name, time(shape, 0), *check);
    RingShape no_weights = shape;
    no_weights.stream_weights = false;
    report("  no barriers", time(shape, 1), "");
    report("  no inputs", time(shape, 2), "");
    report("  no barriers, inputs (the stream)", time(shape, 3), "");
    report("  no weights, barriers, inputs", time(no_weights, 3), "");
    report("  no weights", time(no_weights, 0), "");
    if (shape.handover_scratch == nullptr) continue;
    // The timeline, with the weights streamed and without (the boundaries without traffic).
    for (const RingShape& variant : {shape, no_weights}) {
      RingShape timed = variant;
      timed.timeline = timeline.as<uint64_t>();
      reset();
      BENCH_CUDA(launch(layers, timed, false, false));
      std::vector<uint64_t> words(ring_timeline_words(layers, num_sms));
      BENCH_CUDA(cudaMemcpyAsync(words.data(), timeline.ptr, sizeof(uint64_t) * words.size(),
                                 cudaMemcpyDeviceToHost, stream));
      BENCH_CUDA(cudaStreamSynchronize(stream));
      std::printf("%s%s", variant.stream_weights ? "" : "  no weights:\n",
                  format_ring_timeline(summarize_ring_timeline(words, layers, num_sms)).c_str());
    }
  }
}

// The layers' products (q|k|v stored, no RoPE; output; gate|up with SwiGLU; down; no attention:
// q stands in for its output) of `layers` Llama-3.1-8B layers with int8 activations: as quantize
// + product launches, and as the persistent prototype at 4 / 6 / 8 sub-blocks per SM. Prints the
// times, GB/s of weights, and the largest difference of the two chains' residuals (relative to
// the largest residual value) after one layer and after all.
void bench_persistent(cudaStream_t stream, double ceiling, TensorType type, bool ring) {
  const int64_t hidden = 4096, ffn = 14336, qkv_rows = hidden + 2 * 1024;
  const int layers = 32;
  std::vector<std::unique_ptr<Buffer>> weights;
  std::vector<PersistentChainLayer> host_layers(layers);
  uint64_t bytes = 0;
  const auto make = [&](int64_t rows, int64_t cols, uint64_t seed) {
    const uint64_t b = device_row_bytes(type, cols) * static_cast<uint64_t>(rows);
    bytes += b;
    weights.push_back(std::make_unique<Buffer>(b));
    bench::fill(weights.back()->ptr, type, rows, cols, seed, 0.02f, stream);
    return static_cast<const uint8_t*>(weights.back()->ptr);
  };
  for (int l = 0; l < layers; ++l) {
    host_layers[l].qkv = make(qkv_rows, hidden, 100 + 4 * l);
    host_layers[l].o = make(hidden, hidden, 101 + 4 * l);
    host_layers[l].gate_up = make(2 * ffn, hidden, 102 + 4 * l);
    host_layers[l].down = make(hidden, ffn, 103 + 4 * l);
  }
  Buffer layer_table(sizeof(PersistentChainLayer) * layers);
  BENCH_CUDA(cudaMemcpy(layer_table.ptr, host_layers.data(), sizeof(PersistentChainLayer) * layers,
                        cudaMemcpyHostToDevice));
  Buffer x(4 * hidden), x0(4 * hidden), qkv(4 * qkv_rows), act(4 * ffn), norm(4 * hidden);
  Buffer xq(ffn), xs(4 * (ffn / 32)), barrier(4);
  bench::fill(x0.ptr, TensorType::kF32, 1, hidden, 7, 1.0f, stream);
  bench::fill(norm.ptr, TensorType::kF32, 1, hidden, 8, 1.0f, stream);
  const auto reset = [&] {
    BENCH_CUDA(cudaMemcpyAsync(x.ptr, x0.ptr, 4 * hidden, cudaMemcpyDeviceToDevice, stream));
  };
  // One product of the chain: its input quantized, then `data` (rows × cols) into y.
  const auto step = [&](const uint8_t* data, int64_t rows, int64_t cols, const float* src,
                        bool normed, float* y, DecodeOutput output, bool accumulate) {
    DecodeMatmulParams p;
    p.w = make_device_weight(data, type, rows, cols);
    p.num_tokens = 1;
    quantize_input(src, cols, normed ? norm.as<float>() : nullptr, xq, xs, stream, &p);
    p.y = y;
    p.y_stride = output == DecodeOutput::kSwiglu ? rows / 2 : rows;
    p.output = output;
    p.accumulate = accumulate;
    BENCH_OK(launch_decode_matmul(p, stream));
  };
  const auto launches = [&](int num_layers) {
    constexpr DecodeOutput kStore = DecodeOutput::kStore;
    for (int l = 0; l < num_layers; ++l) {
      const PersistentChainLayer& w = host_layers[l];
      step(w.qkv, qkv_rows, hidden, x.as<float>(), true, qkv.as<float>(), kStore, false);
      step(w.o, hidden, hidden, qkv.as<float>(), false, x.as<float>(), kStore, true);
      step(w.gate_up, 2 * ffn, hidden, x.as<float>(), true, act.as<float>(), DecodeOutput::kSwiglu,
           false);
      step(w.down, hidden, ffn, act.as<float>(), false, x.as<float>(), kStore, true);
    }
  };
  // The chain's arguments over this benchmark's weights and buffers.
  const auto chain_args = [&](int num_layers, bool skip_barriers, bool skip_inputs) {
    PersistentChainArgs pa;
    pa.type = type;
    pa.num_layers = num_layers;
    pa.layers = static_cast<const PersistentChainLayer*>(layer_table.ptr);
    pa.hidden = hidden;
    pa.ffn = ffn;
    pa.qkv_rows = qkv_rows;
    pa.norm_weight = norm.as<float>();
    pa.x = x.as<float>();
    pa.qkv = qkv.as<float>();
    pa.act = act.as<float>();
    pa.barrier = barrier.as<unsigned>();
    pa.skip_barriers = skip_barriers;
    pa.skip_inputs = skip_inputs;
    return pa;
  };
  const auto persistent = [&](int num_layers, int subs, bool skip_barriers = false,
                              bool skip_inputs = false) {
    PersistentChainArgs pa = chain_args(num_layers, skip_barriers, skip_inputs);
    pa.subs_per_block = subs;
    return launch_persistent_chain(pa, stream);
  };
  const auto residual = [&] {
    std::vector<float> host(hidden);
    BENCH_CUDA(cudaMemcpyAsync(host.data(), x.ptr, 4 * hidden, cudaMemcpyDeviceToHost, stream));
    BENCH_CUDA(cudaStreamSynchronize(stream));
    return host;
  };
  const auto difference = [](const std::vector<float>& want, const std::vector<float>& got) {
    double largest = 0.0, worst = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
      largest = std::max(largest, std::fabs(static_cast<double>(want[i])));
      worst = std::max(worst, std::fabs(static_cast<double>(want[i]) - got[i]));
    }
    return largest > 0.0 ? worst / largest : worst;
  };
  std::vector<float> want[2];
  for (int v = 0; v < 2; ++v) {
    reset();
    launches(v == 0 ? 1 : layers);
    want[v] = residual();
  }
  const double gb = static_cast<double>(bytes) / 1e9;
  const auto report = [&](const char* name, double t, const std::string& check) {
    std::printf("%-5s %-32s %8.3f ms  %5.0f GB/s  %5.1f%% of copy  %s\n",
                std::string(tensor_type_name(type)).c_str(), name, t * 1e3, gb / t,
                100.0 * gb * 1e9 / t / ceiling, check.c_str());
  };
  report("launches",
         bench::time_graph(stream,
                           [&] {
                             reset();
                             launches(layers);
                           }),
         "");
  // The same weights block-major (RingShape::block_major, decode_block_major_bench.h), for Q4_0.
  std::vector<PersistentChainLayer> block_major_layers(layers);
  const auto repacked = [&](const uint8_t* from, int64_t rows, int64_t cols) {
    weights.push_back(std::make_unique<Buffer>(device_row_bytes(type, cols) * rows));
    BENCH_CUDA(repack_q4_0_block_major(from, weights.back()->as<uint8_t>(), rows, cols, stream));
    return static_cast<const uint8_t*>(weights.back()->ptr);
  };
  for (int l = 0; l < layers && type == TensorType::kQ4_0; ++l) {
    const PersistentChainLayer& w = host_layers[l];
    block_major_layers[l] = {repacked(w.qkv, qkv_rows, hidden), repacked(w.o, hidden, hidden),
                             repacked(w.gate_up, 2 * ffn, hidden), repacked(w.down, hidden, ffn)};
  }
  Buffer block_major_table(sizeof(PersistentChainLayer) * layers);
  BENCH_CUDA(cudaMemcpy(block_major_table.ptr, block_major_layers.data(),
                        sizeof(PersistentChainLayer) * layers, cudaMemcpyHostToDevice));
  // The launches again with block-major weights: a natural-order quantize launch and a one-token
  // product of 4 or 8 rows per block for each stage.
  for (const int rows_per_block : {4, 8}) {
    if (type != TensorType::kQ4_0) break;
    const auto block_major_launches = [&](int num_layers) {
      const PersistentChainArgs pa = chain_args(num_layers, false, false);
      for (int l = 0; l < num_layers; ++l) {
        for (int kind = 0; kind < kBlockMajorStagesPerLayer; ++kind) {
          const cudaError_t error =
              launch_block_major_stage(pa, block_major_layers[l], kind, rows_per_block,
                                       xq.as<int8_t>(), xs.as<float>(), stream);
          if (error != cudaSuccess) return error;
        }
      }
      return cudaSuccess;
    };
    char name[64];
    std::snprintf(name, sizeof(name), "launches, block-major, %d rows", rows_per_block);
    const std::optional<std::string> check = check_chain(name, type, stream, block_major_launches,
                                                         reset, residual, difference, want, layers);
    if (!check) continue;
    report(name,
           bench::time_graph(stream,
                             [&] {
                               reset();
                               BENCH_CUDA(block_major_launches(layers));
                             }),
           *check);
  }
  if (ring) {
    bench_ring_variants(
        [&](int num_layers, const RingShape& shape, bool skip_barriers, bool skip_inputs) {
          PersistentChainArgs pa = chain_args(num_layers, skip_barriers, skip_inputs);
          if (shape.block_major) {
            pa.layers = static_cast<const PersistentChainLayer*>(block_major_table.ptr);
          }
          return launch_ring_chain(pa, shape, stream);
        },
        stream, reset, residual, difference, want, layers, report, type);
    return;
  }
  for (const int subs : {4, 6, 8}) {
    char name[64];
    std::snprintf(name, sizeof(name), "persistent, %d subs", subs);
    const std::optional<std::string> check = check_chain(
        name, type, stream, [&](int num_layers) { return persistent(num_layers, subs); }, reset,
        residual, difference, want, layers);
    if (!check) continue;
    report(name,
           bench::time_graph(stream,
                             [&] {
                               reset();
                               BENCH_CUDA(persistent(layers, subs));
                             }),
           *check);
    for (const int skip : {1, 2, 3}) {
      std::snprintf(name, sizeof(name), "  %d subs, no %s", subs,
                    skip == 1 ? "barriers" : (skip == 2 ? "inputs" : "barriers, inputs"));
      report(name,
             bench::time_graph(stream,
                               [&] {
                                 reset();
                                 BENCH_CUDA(persistent(layers, subs, skip & 1, skip & 2));
                               }),
             "");
    }
  }
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
