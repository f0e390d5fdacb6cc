#include "backends/cuda/kernels/bench_attention.h"

#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "backends/cuda/kernels/attention.cuh"
#include "backends/cuda/kernels/bench_support.h"

namespace cellm::kernels {

using bench::Buffer;
using bench::fill;
using bench::time_graph;

void bench_attention(cudaStream_t stream, double copy_bw, double tc_rate, int num_sms) {
  const int32_t heads = 32, kv_heads = 8, hd = 128;
  struct Case {
    const char* name;
    int32_t sessions;
    int32_t context;  // cells per session, the step's token at the last position
    int32_t new_tokens;
    bool shuffled;  // cells in random order (else each session's cells are contiguous, as the
                    // cell cache's lowest-free-first placement mostly gives)
  };
  const Case cases[] = {{"decode 1 x 512", 1, 512, 1, false},
                        {"decode 1 x 4096", 1, 4096, 1, false},
                        {"decode 1 x 8192", 1, 8192, 1, false},
                        {"decode 1 x 16384", 1, 16384, 1, false},
                        {"decode 1 x 32768", 1, 32768, 1, false},
                        {"decode 1 x 131072", 1, 131072, 1, false},
                        {"decode 4 x 4096", 4, 4096, 1, false},
                        {"decode 4 x 32768", 4, 32768, 1, false},
                        {"decode 8 x 32768", 8, 32768, 1, false},
                        {"decode 16 x 32768", 16, 32768, 1, false},
                        {"decode 16 x 8192", 16, 8192, 1, false},
                        {"decode 64 x 512", 64, 512, 1, false},
                        {"decode 256 x 512", 256, 512, 1, false},
                        {"decode 256 x 512 shuffled", 256, 512, 1, true},
                        {"prefill 1 x 512", 1, 512, 512, false},
                        {"prefill 4 x 2048 (512 new)", 4, 2048, 512, false}};
  std::printf("\n== attention, bf16 K/V, 32 heads / 8 kv heads / 128 dims ==\n");
  std::printf("%-28s %10s %10s %12s\n", "case", "kernel", "us", "rate");
  std::mt19937 rng(7);
  for (const Case& c : cases) {
    const int64_t cells = static_cast<int64_t>(c.sessions) * c.context;
    const size_t kv_bytes = static_cast<size_t>(cells) * kv_heads * hd * 2;
    Buffer k(kv_bytes), v(kv_bytes);
    fill(k.ptr, TensorType::kBF16, cells, kv_heads * hd, 21, 1.0f, stream);
    fill(v.ptr, TensorType::kBF16, cells, kv_heads * hd, 22, 1.0f, stream);
    std::vector<int32_t> all(static_cast<size_t>(cells));
    std::iota(all.begin(), all.end(), 0);
    if (c.shuffled) std::shuffle(all.begin(), all.end(), rng);
    std::vector<int32_t> offsets = {0}, token_seq, token_pos;
    for (int32_t s = 0; s < c.sessions; ++s) {
      offsets.push_back(offsets.back() + c.context);
      for (int32_t p = c.context - c.new_tokens; p < c.context; ++p) {
        token_seq.push_back(s);
        token_pos.push_back(p);
      }
    }
    const auto num_tokens = static_cast<int32_t>(token_seq.size());
    const auto upload = [&](const std::vector<int32_t>& host) {
      auto buffer = std::make_unique<Buffer>(host.size() * 4);
      BENCH_CUDA(cudaMemcpy(buffer->ptr, host.data(), host.size() * 4, cudaMemcpyHostToDevice));
      return buffer;
    };
    auto cells_dev = upload(all);
    auto offsets_dev = upload(offsets);
    auto seq_dev = upload(token_seq);
    auto pos_dev = upload(token_pos);
    Buffer q(sizeof(float) * num_tokens * heads * hd), out(sizeof(float) * num_tokens * heads * hd);
    fill(q.ptr, TensorType::kF32, num_tokens, heads * hd, 23, 1.0f, stream);
    AttentionArgs a;
    a.num_tokens = num_tokens;
    a.num_heads = heads;
    a.num_kv_heads = kv_heads;
    a.head_dim = hd;
    a.value_head_dim = hd;
    a.scale = 0.088388f;
    a.q = q.as<float>();
    a.q_stride = heads * hd;
    a.k_cache = k.ptr;
    a.v_cache = v.ptr;
    a.cache_dtype = KvDtype::kBF16;
    a.cells = {seq_dev->as<int32_t>(), pos_dev->as<int32_t>(), offsets_dev->as<int32_t>(),
               cells_dev->as<int32_t>()};
    a.out = out.as<float>();
    a.out_stride = heads * hd;
    double kv_read = 0.0;  // bytes one pass over each token's visible K/V rows reads
    double flops = 0.0;
    for (int32_t t = 0; t < num_tokens; ++t) {
      kv_read += (token_pos[static_cast<size_t>(t)] + 1.0) * kv_heads * hd * 2 * 2;
      flops += 4.0 * (token_pos[static_cast<size_t>(t)] + 1.0) * hd * heads;
    }
    DecodeAttentionParams decode;
    decode.args = a;
    decode.max_splits = decode_attention_default_splits(num_tokens, kv_heads, c.context, num_sms);
    decode.min_cells_per_split = 128;
    decode.cluster_merge = c.context <= kDecodeClusterMaxContext;  // as the forward sets it
    const size_t scratch_bytes =
        decode_attention_scratch_bytes(num_tokens, heads, hd, decode.max_splits);
    Buffer scratch(scratch_bytes);
    decode.scratch = scratch.as<float>();
    decode.scratch_bytes = scratch_bytes;
    BENCH_CUDA(cudaStreamSynchronize(stream));
    const double t_decode =
        time_graph(stream, [&] { BENCH_OK(launch_decode_attention(decode, stream)); });
    std::printf("%-28s %10s %10.1f %7.0f GB/s (%.0f%%; %d splits)\n", c.name, "decode",
                t_decode * 1e6, kv_read / t_decode / 1e9, 100.0 * kv_read / t_decode / copy_bw,
                decode.max_splits);
    if (c.sessions <= 16 && c.new_tokens == 1) {
      for (const bool clusters : {true, false}) {
        if (clusters && !decode.cluster_merge) continue;
        std::printf("%-28s %10s", clusters ? "  split sweep (splits:us)" : "  no clusters", "");
        for (const int32_t splits : {2, 4, 8, 12, 16, 24, 32, 48, 64, 128}) {
          DecodeAttentionParams sweep = decode;
          sweep.max_splits = splits;
          sweep.min_cells_per_split = 32;
          sweep.cluster_merge = clusters;
          const size_t bytes = decode_attention_scratch_bytes(num_tokens, heads, hd, splits);
          Buffer sweep_scratch(bytes);
          sweep.scratch = sweep_scratch.as<float>();
          sweep.scratch_bytes = bytes;
          const double t =
              time_graph(stream, [&] { BENCH_OK(launch_decode_attention(sweep, stream)); });
          std::printf(" %d:%.1f", splits, t * 1e6);
        }
        std::printf("\n");
      }
    }
    if (c.new_tokens > 1) {
      const double t_prefill =
          time_graph(stream, [&] { BENCH_OK(launch_prefill_attention(a, stream)); });
      std::printf("%-28s %10s %10.1f %7.1f TFLOP/s (%.1f%% of bf16 rate)\n", c.name, "prefill",
                  t_prefill * 1e6, flops / t_prefill / 1e12, 100.0 * flops / t_prefill / tc_rate);
    }
  }
}

}  // namespace cellm::kernels
