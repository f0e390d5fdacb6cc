// cuda_bench: throughput and latency of the CUDA executor on a model file or on random weights
// of a named geometry — what `cellm bench` prints. No CUDA types in this header (apps include
// it).
//
// Measures, each timed on the host's clock from one execute()'s return to the next one's after
// warm-up (medians), the greedy token of each row computed on the device and fed back as the
// session's next token (what the Runner does for greedy sessions), and — except where a figure
// says otherwise — every step's kept logits copied to pinned host memory and returned as
// BatchOutput::logits (a view of that memory, as the Runner gets them): batch-1 decode tokens/s
// (a session holding `context_tokens` positions; first as `cellm run` decodes a greedy session,
// no logits copied and its steps run ahead (CudaExecutorOptions::run_ahead), then with the row
// copied); decode tokens/s with N concurrent sessions whose `context_tokens`-token prompts are
// already in the cache; prefill tokens/s of one W-token step; time to first token of a
// `ttft_tokens` prompt (one execute of W-token slices). Each result carries its ratio to the
// hardware limit: the step's floor time — max(weight bytes read / measured bandwidth, matrix
// FLOPs / measured bf16 tensor-core rate) — over the measured time (hardware_limits.h).
// Thread-safety: one run at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "program/program_spec.h"

namespace cellm {

struct CudaBenchOptions {
  std::string model_path;                 // a GGUF model or program; empty: random weights
  std::string geometry = "llama-3.1-8b";  // named_geometry() when model_path is empty
  std::string weight_type = "bf16";    // random weights: bf16, f16, q8_0, q4_0, q4_k, q4_k_m, q6_k
  std::string kv_dtype = "bf16";       // cache dtype of the random program (f32, f16, bf16)
  int32_t max_step_tokens = 0;         // W; 0: the program's (random: 512)
  int32_t min_prefill_chunk = 0;       // m; 0: the program's (random: auto_min_prefill_chunk)
  std::vector<int32_t> decode_widths;  // empty: the program's (random: recommended_decode_widths)
  int32_t context_tokens = 512;        // positions each session holds before decoding
  std::vector<int32_t> session_counts = {8, 32, 64, 128, 256};  // concurrent decode runs
  bool batch1 = true;                                           // measure batch-1 decode
  bool prefill = true;                                          // measure one W-token prefill step
  int32_t ttft_tokens = 2048;  // 0: skip the time-to-first-token run
  int32_t decode_steps = 12;   // timed steps per decode measurement
  int32_t warmup_steps = 3;
  bool compare_eager = false;  // also time decodes with graphs off
  // Also time the widest decode with the greedy tokens alone (no logits copied to the host).
  bool compare_device_argmax = false;
  // >= 0: also time the widest decode with every row's log-probabilities and this many top
  // tokens (at most 20), greedy tokens fed back: summarized on the device with no logits copied,
  // then from every row copied to the host (token_logprobs on the host thread).
  int32_t compare_logprobs = -1;
  // Also time batch-1 decode sampled from the device's candidates (temperature 0.8, top-k 20,
  // top-p 0.95), and the widest decode with every row sampled (temperature 0.8, top-p 0.95,
  // top-k 20 and 40) on the host thread: from the sampling candidates listed on
  // the device (no rows copied with top-k 20, which they always decide; with 40 only the
  // undecided rows, fetched from the device after the step), then from the rows.
  bool compare_sampling = false;
  bool resident_bf16 = false;         // bf16 copies of quantized matrices for wide products
  bool resident_bf16_if_room = true;  // or where they fit (CudaExecutorOptions's default)
  bool int8_activations = true;       // CudaExecutorOptions::int8_activations
  bool run_ahead = true;              // CudaExecutorOptions::run_ahead
  int device = 0;
  uint64_t seed = 1;
};

struct CudaBenchResult {
  std::string name;  // "decode batch 1", "decode 64 sessions", "prefill 512", "ttft 2048"
  std::string unit;  // "tok/s" or "ms"
  double value = 0.0;
  double step_ms = 0.0;  // median time of one timed step (one execute)
  // Median device part of it (CudaExecutorStats::last_step_device_ms): the rest is the host's
  // preparation of the step and its wait for the result.
  double device_ms = 0.0;
  double ratio = 0.0;  // floor time / measured time (1 = at the hardware limit)
  std::string bound;   // "memory" or "compute": which limit the floor comes from
};

struct CudaBenchReport {
  std::string device;
  std::string model;            // file or "<geometry> <type> (random)"
  double bandwidth_gb_s = 0.0;  // measured, read + write
  double bf16_tflops = 0.0;     // measured
  uint64_t weight_bytes_per_step = 0;
  uint64_t matrix_macs_per_token = 0;
  std::vector<CudaBenchResult> results;
};

// Runs the measurements; `progress` (may be empty) receives one line per stage.
StatusOr<CudaBenchReport> run_cuda_bench(const CudaBenchOptions& options,
                                         const std::function<void(const std::string&)>& progress);

// The report as an aligned table (the command line writes its JSON).
std::string bench_report_table(const CudaBenchReport& report);

}  // namespace cellm
