// `cellm bench`: throughput and latency of the CUDA executor — on a model or program
// (`--model FILE`) or on random weights of a named geometry built on the GPU (`--geometry
// llama-3.1-8b --weights q4_0`): batch-1 decode tokens/s, decode tokens/s at several numbers of
// concurrent sessions whose prompts are already cached (every step's logits copied to pinned host
// memory and handed over as BatchOutput's view, as the Runner gets them), prefill tokens/s of one
// W-token step and time to first token of a long prompt, each with its ratio to the hardware
// limit measured on the device (copy bandwidth, bf16 GEMM rate). Prints a table; `--json PATH`
// writes the report.
// The measuring lives in src/backends/cuda/cuda_bench.h; this file is flags and output.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"

#ifdef CELLM_HAVE_CUDA
#include "backends/cuda/cuda_bench.h"
#include "backends/cuda/model_geometry.h"
#endif

namespace cellm::app {
namespace {

#ifdef CELLM_HAVE_CUDA
nlohmann::ordered_json report_json(const CudaBenchReport& report) {
  nlohmann::ordered_json out;
  out["device"] = report.device;
  out["model"] = report.model;
  out["bandwidth_gb_s"] = report.bandwidth_gb_s;
  out["bf16_tflops"] = report.bf16_tflops;
  out["weight_bytes_per_step"] = report.weight_bytes_per_step;
  out["matrix_flops_per_token"] = 2 * report.matrix_macs_per_token;
  out["results"] = nlohmann::ordered_json::array();
  for (const CudaBenchResult& r : report.results) {
    out["results"].push_back({{"name", r.name},
                              {"value", r.value},
                              {"unit", r.unit},
                              {"step_ms", r.step_ms},
                              {"device_ms", r.device_ms},
                              {"ratio_to_limit", r.ratio},
                              {"bound", r.bound}});
  }
  return out;
}
#endif

}  // namespace

void add_bench_command(CLI::App& app, CommandResult& result) {
  CLI::App* command = app.add_subcommand(
      "bench", "Measure decode and prefill throughput and latency on the GPU (CUDA backend)");
  struct Flags {
    std::string model;
    std::string geometry = "llama-3.1-8b";
    std::string weights = "bf16";
    std::string kv_dtype = "bf16";
    std::vector<int32_t> sessions = {8, 32, 64, 128, 256};
    int32_t context = 512;
    bool no_sessions = false;
    bool no_batch1 = false;
    bool no_prefill = false;
    int32_t ttft = 2048;
    int32_t steps = 12;
    int32_t warmup = 3;
    int32_t max_step_tokens = 0;
    int32_t min_prefill_chunk = 0;
    std::vector<int32_t> decode_widths;
    bool compare_eager = false;
    bool compare_device_argmax = false;
    int32_t compare_logprobs = -1;
    bool compare_sampling = false;
    bool resident_bf16 = false;
    bool no_resident_bf16 = false;
    bool exact_activations = false;
    bool no_run_ahead = false;
    std::string json;
    int device = 0;
  };
  auto flags = std::make_shared<Flags>();
  command->add_option("--model", flags->model, "A GGUF model or cellm program (default: random)");
#ifdef CELLM_HAVE_CUDA
  const std::string geometries = fmt::format("{}", fmt::join(geometry_names(), ", "));
#else
  const std::string geometries = "none: this cellm has no CUDA backend";
#endif
  command->add_option("--geometry", flags->geometry,
                      "Random weights of this geometry: " + geometries);
  command->add_option(
      "--weights", flags->weights,
      "Random weight type: bf16, f16, q8_0, q4_0, q4_k, q6_k, or q4_k_m (llama.cpp's mix of "
      "Q4_K and Q6_K)");
  command->add_option("--kv-dtype", flags->kv_dtype,
                      "Random program's cache dtype: bf16, f16, f32");
  command
      ->add_option("--sessions", flags->sessions,
                   "Concurrent decode sessions to measure, e.g. 8,32,64")
      ->delimiter(',');
  command->add_option("--context", flags->context, "Positions each session holds before decoding")
      ->check(CLI::PositiveNumber);
  command->add_flag("--no-sessions", flags->no_sessions, "Skip the concurrent-session decodes");
  command->add_flag("--no-batch1", flags->no_batch1, "Skip the batch-1 decode measurement");
  command->add_flag("--no-prefill", flags->no_prefill, "Skip the W-token prefill measurement");
  command->add_option("--ttft", flags->ttft, "Prompt length for time to first token (0: skip)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--steps", flags->steps, "Timed steps per decode measurement")
      ->check(CLI::PositiveNumber);
  command->add_option("--warmup", flags->warmup, "Warm-up steps before timing")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--max-step-tokens", flags->max_step_tokens, "Override W");
  command->add_option("--min-prefill-chunk", flags->min_prefill_chunk, "Override m");
  command->add_option("--decode-widths", flags->decode_widths, "Override the decode widths")
      ->delimiter(',');
  command->add_flag("--compare-eager", flags->compare_eager,
                    "Also time every decode measurement with CUDA graphs off");
  command->add_flag("--compare-device-argmax", flags->compare_device_argmax,
                    "Also time the widest decode with greedy tokens only (no logits copied)");
  command
      ->add_option("--compare-logprobs", flags->compare_logprobs,
                   "Also time the widest decode with every row's log-probabilities and this many "
                   "top tokens: summarized on the device, then from rows copied to the host")
      ->check(CLI::Range(0, 20));
  command->add_flag("--compare-sampling", flags->compare_sampling,
                    "Also time batch-1 decode sampled from candidates listed on the device, and "
                    "the widest decode with every row sampled (T 0.8, top-p 0.95, top-k 20 and "
                    "40): from the candidates (undecided rows fetched), then from the rows");
  command->add_flag("--resident-bf16", flags->resident_bf16,
                    "Keep bf16 copies of quantized matrices for wide products (default: where "
                    "they fit beside the KV pool)");
  command->add_flag("--no-resident-bf16", flags->no_resident_bf16,
                    "Never keep bf16 copies of quantized matrices (dequantize per product)");
  command->add_flag("--exact-activations", flags->exact_activations,
                    "Keep the activations of small quantized products in f32 (no int8)");
  command->add_flag("--no-run-ahead", flags->no_run_ahead,
                    "Run every batch-1 greedy step only when asked (no run-ahead)");
  command->add_option("--json", flags->json, "Write the report as JSON to this file");
  command->add_option("--device", flags->device, "CUDA device ordinal");
  command->callback([flags, &result] {
#ifdef CELLM_HAVE_CUDA
    CudaBenchOptions options;
    options.model_path = flags->model;
    options.geometry = flags->geometry;
    options.weight_type = flags->weights;
    options.kv_dtype = flags->kv_dtype;
    options.session_counts = flags->no_sessions ? std::vector<int32_t>{} : flags->sessions;
    options.context_tokens = flags->context;
    options.batch1 = !flags->no_batch1;
    options.prefill = !flags->no_prefill;
    options.ttft_tokens = flags->ttft;
    options.decode_steps = flags->steps;
    options.warmup_steps = flags->warmup;
    options.max_step_tokens = flags->max_step_tokens;
    options.min_prefill_chunk = flags->min_prefill_chunk;
    options.decode_widths = flags->decode_widths;
    options.compare_eager = flags->compare_eager;
    options.compare_device_argmax = flags->compare_device_argmax;
    options.compare_logprobs = flags->compare_logprobs;
    options.compare_sampling = flags->compare_sampling;
    options.resident_bf16 = flags->resident_bf16;
    options.resident_bf16_if_room = !flags->no_resident_bf16;
    options.int8_activations = !flags->exact_activations;
    options.run_ahead = !flags->no_run_ahead;
    options.device = flags->device;
    for (const int32_t n : options.session_counts) {
      if (n < 1) {
        std::cerr << "cellm bench: --sessions " << n << " is not a positive count\n";
        result.exit_code = 2;
        return;
      }
    }
    const StatusOr<CudaBenchReport> report = run_cuda_bench(
        options, [](const std::string& line) { std::cerr << "bench: " << line << "\n"; });
    if (!report.ok()) {
      std::cerr << "cellm bench: " << report.status().to_string() << "\n";
      result.exit_code = 1;
      return;
    }
    std::cout << bench_report_table(*report);
    if (!flags->json.empty()) {
      std::ofstream out(flags->json);
      out << report_json(*report).dump(2) << "\n";
      if (!out) {
        std::cerr << "cellm bench: cannot write " << flags->json << "\n";
        result.exit_code = 1;
        return;
      }
    }
#else
    (void)flags;
    std::cerr << "cellm bench: this cellm was built without the CUDA backend (configure with "
                 "-DCELLM_CUDA=ON where nvcc is installed)\n";
    result.exit_code = 1;
#endif
  });
}

}  // namespace cellm::app
