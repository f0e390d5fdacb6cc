// decode_chain_benches: the layers' chains of `cuda_decode_bench` — launches against the
// persistent and ring prototypes (see the header); the step's chain is decode_step_chain_bench.cpp.
#include "backends/cuda/kernels/decode_chain_benches.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/kernels/argmax.cuh"
#include "backends/cuda/kernels/bench_support.h"
#include "backends/cuda/kernels/decode_block_major_bench.h"
#include "backends/cuda/kernels/decode_chain_input.h"
#include "backends/cuda/kernels/decode_fused_front_bench.h"
#include "backends/cuda/kernels/decode_fused_mlp_bench.h"
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

}  // namespace

void quantize_chain_input(const float* src, int64_t k, const float* norm, const Buffer& xq,
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
    quantize_chain_input(src, cols, normed ? norm.as<float>() : nullptr, xq, xs, stream, &p);
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
  // The block-major launches with the MLP as one fused launch and a partials' sum
  // (decode_fused_mlp_bench.h) in place of quantize + gate|up + quantize + down.
  if (type == TensorType::kQ4_0) {
    FusedMlpChain chain(block_major_layers, hidden, ffn, stream);
    const auto run = [&](int num_layers, int stages, bool fused) {
      return chain.launch(chain_args(num_layers, false, false), stages, fused, xq.as<int8_t>(),
                          xs.as<float>(), stream);
    };
    const char* name = "launches, block-major, fused MLP";
    const std::optional<std::string> check = check_chain(
        name, type, stream, [&](int n) { return run(n, FusedMlpChain::kBoth, true); }, reset,
        residual, difference, want, layers);
    if (check) {
      const auto time = [&](int stages, bool fused) {
        return bench::time_graph(stream, [&] {
          reset();
          BENCH_CUDA(run(layers, stages, fused));
        });
      };
      report(name, time(FusedMlpChain::kBoth, true), *check);
      report("  the front alone (q|k|v, output)", time(FusedMlpChain::kFront, false), "");
      report("  the MLP alone, launches", time(FusedMlpChain::kMlp, false), "");
      report("  the MLP alone, fused", time(FusedMlpChain::kMlp, true), "");
    }
    // The front as one cluster launch per layer (decode_fused_front_bench.h), the MLP as the
    // block-major launches.
    bench_fused_front(
        stream, x.as<float>(), norm.as<float>(), reset,
        [&](int l) {
          const PersistentChainArgs pa = chain_args(layers, false, false);
          for (const int kind : {2, 3}) {
            const cudaError_t error = launch_block_major_stage(
                pa, block_major_layers[l], kind, 4, xq.as<int8_t>(), xs.as<float>(), stream);
            if (error != cudaSuccess) return error;
          }
          return cudaSuccess;
        },
        [&](const char* name, double t) { report(name, t, ""); });
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
}  // namespace cellm::kernels
