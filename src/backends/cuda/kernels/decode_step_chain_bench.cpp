// decode_step_chain_bench: the step's chain of `cuda_decode_bench` — a decode step's products as
// one captured graph against the bytes they read (decode_chain_benches.h).
#include <cuda_runtime.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/kernels/argmax.cuh"
#include "backends/cuda/kernels/bench_support.h"
#include "backends/cuda/kernels/decode_chain_benches.h"
#include "backends/cuda/kernels/decode_chain_input.h"
#include "backends/cuda/kernels/decode_matmul.cuh"
#include "backends/cuda/kernels/pdl.cuh"

namespace cellm::kernels {

using bench::Buffer;

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
      quantize_chain_input(src, k, normed ? norm.as<float>() : nullptr, xq, xs, stream, p);
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
                1.0f,
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

}  // namespace cellm::kernels
