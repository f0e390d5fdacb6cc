#include "backends/cuda/cuda_bench.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_bench_rig.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/model_geometry.h"
#include "batching/sampler.h"
#include "program/program.h"

namespace cellm {
namespace {

using cuda_bench_internal::StepTimes;

// The random weights `name` asks for: one type, or q4_k_m (RandomWeightsSpec::q4_k_m).
StatusOr<TensorType> parse_weight_type(const std::string& name) {
  if (name == "q4_k_m") return TensorType::kQ4_K;
  const std::optional<TensorType> type = tensor_type_from_name(name);
  if (!type ||
      (*type != TensorType::kBF16 && *type != TensorType::kF16 && *type != TensorType::kQ8_0 &&
       *type != TensorType::kQ4_0 && *type != TensorType::kQ4_K && *type != TensorType::kQ6_K &&
       *type != TensorType::kF32)) {
    return invalid_argument("--weights " + name +
                            ": random weights are f32, bf16, f16, q8_0, q4_0, q4_k, q4_k_m or "
                            "q6_k");
  }
  return *type;
}

// The sampled sessions of --compare-sampling: temperature 0.8, top-p 0.95 and `top_k` (0: none);
// `penalized`: with the penalties chat clients often send (a repetition penalty of 1.1, presence
// 0.3, frequency 0.5, over the last 64 tokens).
SamplingParams bench_sampling(int32_t top_k, bool penalized = false) {
  SamplingParams sampling;
  sampling.temperature = 0.8f;
  sampling.top_k = top_k;
  sampling.top_p = 0.95f;
  if (penalized) {
    sampling.repetition_penalty = 1.1f;
    sampling.presence_penalty = 0.3f;
    sampling.frequency_penalty = 0.5f;
  }
  return sampling;
}

std::string sampling_name(const SamplingParams& s) {
  const std::string cuts =
      s.top_k > 0 ? fmt::format("T {}, top-k {}, top-p {}", s.temperature, s.top_k, s.top_p)
                  : fmt::format("T {}, top-p {}", s.temperature, s.top_p);
  return Sampler(s, 0).rewrites_scores() ? cuts + ", penalties" : cuts;
}

}  // namespace

StatusOr<CudaBenchReport> run_cuda_bench(const CudaBenchOptions& options,
                                         const std::function<void(const std::string&)>& progress) {
  const auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  if (!cuda_device_available()) {
    return failed_precondition("no usable CUDA device: " + cuda_device_summary());
  }
  CudaBenchReport report;
  report.device = cuda_device_summary();
  say("measuring memory bandwidth and the bf16 tensor-core rate");
  CELLM_ASSIGN_OR_RETURN(const HardwareLimits limits, measure_hardware_limits(options.device));
  report.bandwidth_gb_s = limits.bandwidth_bytes_per_s / 1e9;
  report.bf16_tflops = limits.bf16_flops_per_s / 1e12;

  const int32_t max_sessions =
      options.session_counts.empty()
          ? 1
          : *std::max_element(options.session_counts.begin(), options.session_counts.end());
  // Every timed run at the largest session count feeds each session warmup + decode tokens: one
  // per count (two with eager graphs), the device-argmax and log-probability runs, the sampling
  // runs (four samplers, each from candidates and from the rows), and a few to spare.
  const int32_t decode_positions =
      (static_cast<int32_t>(options.session_counts.size()) * (options.compare_eager ? 2 : 1) + 3 +
       (options.compare_logprobs >= 0 ? 2 : 0) + (options.compare_sampling ? 8 : 0)) *
          (options.warmup_steps + options.decode_steps) +
      16;

  // The model: a file, or random weights of a geometry.
  std::unique_ptr<Program> file_model;
  ModelConfig config;
  ProgramSpec spec;
  std::shared_ptr<const CudaWeights> weights;
  std::optional<TensorType> random_type;  // random weights of this type (built below)
  if (!options.model_path.empty()) {
    say("opening " + options.model_path);
    CELLM_ASSIGN_OR_RETURN(Program opened, Program::load(options.model_path));
    file_model = std::make_unique<Program>(std::move(opened));
    config = file_model->config();
    spec = file_model->spec();
    report.model = options.model_path;
  } else {
    CELLM_ASSIGN_OR_RETURN(config, named_geometry(options.geometry));
    CELLM_ASSIGN_OR_RETURN(const TensorType type, parse_weight_type(options.weight_type));
    CELLM_ASSIGN_OR_RETURN(const KvDtype kv, parse_kv_dtype(options.kv_dtype));
    const int32_t w = ProgramSpec::kDefaultMaxStepTokens;
    const std::vector<int32_t> widths = recommended_decode_widths(w);
    spec = random_program(config, config.context_length, w, auto_min_prefill_chunk(widths, w),
                          widths, kv, ProgramSpec::kDefaultMaxCells);
    random_type = type;
    report.model = options.geometry + " " + options.weight_type + " (random weights), " +
                   options.kv_dtype + " cache";
  }
  if (options.max_step_tokens > 0) spec.max_step_tokens = options.max_step_tokens;
  if (options.min_prefill_chunk > 0) spec.min_prefill_chunk = options.min_prefill_chunk;
  if (!options.decode_widths.empty()) spec.decode_widths = options.decode_widths;
  const int32_t w = spec.max_step_tokens;
  const int32_t needed_context =
      std::max({options.context_tokens + decode_positions, options.ttft_tokens + 1, w + 1});
  spec.max_context_len = std::max(spec.max_context_len, needed_context);
  const int64_t needed_cells =
      static_cast<int64_t>(max_sessions + 1) * (options.context_tokens + decode_positions) +
      options.ttft_tokens + 2 * w;
  spec.kv_max_cells = static_cast<int32_t>(std::max<int64_t>(spec.kv_max_cells, needed_cells));
  if (random_type.has_value()) {
    say(fmt::format("building random {} weights of {} on the device", options.weight_type,
                    options.geometry));
    CudaWeightsOptions weight_options;
    weight_options.device = options.device;
    weight_options.resident_bf16 = options.resident_bf16;
    weight_options.resident_bf16_if_room = options.resident_bf16_if_room;
    if (options.resident_bf16_if_room) {
      CELLM_ASSIGN_OR_RETURN(weight_options.keep_free_bytes,
                             cuda_executor_room(config, spec, options.device));
    }
    CELLM_ASSIGN_OR_RETURN(
        std::unique_ptr<CudaWeights> random,
        CudaWeights::random(config, {*random_type, options.seed, options.weight_type == "q4_k_m"},
                            weight_options));
    weights = std::move(random);
  }
  CudaExecutorOptions executor_options;
  executor_options.max_sessions = max_sessions + 2;
  executor_options.device = options.device;
  executor_options.device_argmax = true;  // as the Runner's executor (cellm run) has it
  executor_options.time_steps = true;     // each result's device time
  executor_options.resident_bf16 = options.resident_bf16;
  executor_options.resident_bf16_if_room = options.resident_bf16_if_room;
  executor_options.int8_activations = options.int8_activations;
  executor_options.run_ahead = options.run_ahead;
  std::unique_ptr<CudaExecutor> executor =
      weights != nullptr
          ? std::make_unique<CudaExecutor>(config, weights, spec, executor_options)
          : std::make_unique<CudaExecutor>(config, file_model->weights(), spec, executor_options);
  say("initializing the executor (upload, pool, graphs)");
  CELLM_RETURN_IF_ERROR(executor->initialize());
  if (executor->weights().has_bf16_copies()) report.model += ", resident bf16 copies";
  report.weight_bytes_per_step = executor->weights().matrix_bytes_per_step();
  report.matrix_macs_per_token = executor->weights().matrix_macs_per_token();

  cuda_bench_internal::BenchRig bench(options, limits, *executor, report);
  if (options.batch1) {
    say("batch-1 decode");
    CELLM_ASSIGN_OR_RETURN(const std::vector<SessionId> one,
                           bench.open_with_context(1, options.context_tokens));
    // A greedy session as `cellm run` decodes it: the device's argmax comes back, the row's
    // logits stay on the device. Then the same with the row copied, as a sampler needs it.
    CELLM_ASSIGN_OR_RETURN(const StepTimes t, bench.time_decode(one, 1, false));
    bench.add_result("decode batch 1", "tok/s", 1e3 / t.ms, t, 1, 1, 1);
    CELLM_ASSIGN_OR_RETURN(const StepTimes copied, bench.time_decode(one, 1, true));
    bench.add_result("decode batch 1, logits copied", "tok/s", 1e3 / copied.ms, copied, 1, 1, 1);
    if (options.compare_sampling) {
      // A sampled session (T 0.8, top-k 20, top-p 0.95): its candidates listed on the device and
      // its token drawn there, no row copied, its next step run ahead on the device's draw (the
      // host's draw from the same list is the token, and the step run ahead is taken when they
      // agree). Then one without a top-k, whose nucleus on these flat rows lies past the list:
      // drawn from the whole row on the device (Executor::draws_rows()), or else its row fetched.
      // Last, a top-k 40 session with penalties: its row rewritten on the device
      // (Executor::rewrites_rows()) before its candidates, not run ahead.
      for (const auto& [top_k, penalized] :
           {std::pair{20, false}, std::pair{0, false}, std::pair{40, true}}) {
        const SamplingParams sampling = bench_sampling(top_k, penalized);
        const int64_t ahead_before = executor->stats().num_steps_run_ahead;
        const int64_t dropped_before = executor->stats().num_steps_ahead_dropped;
        CELLM_ASSIGN_OR_RETURN(const StepTimes sampled,
                               bench.time_decode(one, 1, false, -1, false, &sampling, true));
        const auto counts = bench.take_candidate_counts();
        say(
            fmt::format("  the candidates decided {} of {} draws, {} drawn from the row on the "
                        "device; {} steps run ahead, {} given back",
                        counts.decided, counts.rows, counts.row_draws,
                        executor->stats().num_steps_run_ahead - ahead_before,
                        executor->stats().num_steps_ahead_dropped - dropped_before));
        bench.add_result(top_k > 0 && !penalized
                             ? std::string("decode batch 1, sampled from device candidates")
                             : fmt::format("decode batch 1, sampled ({}) on the device",
                                           sampling_name(sampling)),
                         "tok/s", 1e3 / sampled.ms, sampled, 1, 1, 1);
      }
    }
    for (const SessionId s : one) CELLM_RETURN_IF_ERROR(executor->close_session(s));
  }
  if (!options.session_counts.empty()) {
    std::vector<int32_t> counts = options.session_counts;
    std::sort(counts.begin(), counts.end());
    say(fmt::format("filling {} sessions with {}-token prompts", max_sessions,
                    options.context_tokens));
    CELLM_ASSIGN_OR_RETURN(const std::vector<SessionId> sessions,
                           bench.open_with_context(max_sessions, options.context_tokens));
    for (const int32_t n : counts) {
      say(fmt::format("decode with {} sessions", n));
      const int64_t calls = (n + w - 1) / w;
      // Every row's logits copied to the host, as a step of sampled sessions needs them.
      CELLM_ASSIGN_OR_RETURN(const StepTimes t, bench.time_decode(sessions, n, true));
      bench.add_result(fmt::format("decode {} sessions", n), "tok/s", n * 1e3 / t.ms, t, n, n,
                       calls);
      if (options.compare_eager) {
        CELLM_RETURN_IF_ERROR(executor->set_use_graphs(false));
        CELLM_ASSIGN_OR_RETURN(const StepTimes eager, bench.time_decode(sessions, n, true));
        CELLM_RETURN_IF_ERROR(executor->set_use_graphs(true));
        bench.add_result(fmt::format("decode {} sessions, no graphs", n), "tok/s",
                         n * 1e3 / eager.ms, eager, n, n, calls);
      }
    }
    if (options.compare_device_argmax) {
      const int32_t n = counts.back();
      say(fmt::format("decode with {} sessions, greedy tokens on the device, no logits copy", n));
      const StatusOr<StepTimes> t = bench.time_decode(sessions, n, false);
      CELLM_RETURN_IF_ERROR(t.status());
      bench.add_result(fmt::format("decode {} sessions, device argmax only", n), "tok/s",
                       n * 1e3 / t->ms, *t, n, n, (n + w - 1) / w);
    }
    if (options.compare_logprobs >= 0) {
      const int32_t n = counts.back();
      const int32_t top = options.compare_logprobs;
      for (const bool host : {false, true}) {
        say(fmt::format("decode with {} sessions, log-probabilities ({} top) {}", n, top,
                        host ? "from the rows on the host" : "summarized on the device"));
        const StatusOr<StepTimes> t = bench.time_decode(sessions, n, host, top, host);
        CELLM_RETURN_IF_ERROR(t.status());
        bench.add_result(fmt::format("decode {} sessions, logprobs {} on the {}", n, top,
                                     host ? "host" : "device"),
                         "tok/s", n * 1e3 / t->ms, *t, n, n, (n + w - 1) / w);
      }
    }
    if (options.compare_sampling) {
      const int32_t n = counts.back();
      // A top-k inside the list of 64 is always decided by the candidates (the engine then copies
      // no rows either): top-k 20, and top-k 40 (llama.cpp's and Ollama's default, with T 0.8 and
      // top-p 0.95), whose nucleus on the bench's nearly flat random rows would fall past a list
      // of 32.
      // And no top-k (T 0.8, top-p 0.95): drawn from the whole rows on the device. Last, top-k
      // 40 with penalties: the rows rewritten on the device first.
      for (const auto& [top_k, penalized] :
           {std::pair{20, false}, std::pair{40, false}, std::pair{0, false}, std::pair{40, true}}) {
        const SamplingParams sampling = bench_sampling(top_k, penalized);
        const std::string what = sampling_name(sampling);
        for (const bool listed : {true, false}) {
          say(fmt::format("decode with {} sessions, every row sampled ({}) on the host thread {}",
                          n, what,
                          listed ? "from candidates listed on the device" : "from the rows"));
          const int64_t fetched_before = executor->stats().num_fetched_rows;
          const StatusOr<StepTimes> t =
              bench.time_decode(sessions, n, !listed, -1, false, &sampling, listed);
          CELLM_RETURN_IF_ERROR(t.status());
          const auto counts = bench.take_candidate_counts();
          if (listed) {
            say(
                fmt::format("  the candidates decided {} of {} draws, {} drawn from the row on "
                            "the device, {} rows fetched",
                            counts.decided, counts.rows, counts.row_draws,
                            executor->stats().num_fetched_rows - fetched_before));
          }
          bench.add_result(fmt::format("decode {} sessions, sampled ({}) from {}", n, what,
                                       listed ? "device candidates" : "the rows"),
                           "tok/s", n * 1e3 / t->ms, *t, n, n, (n + w - 1) / w);
        }
      }
    }
    for (const SessionId s : sessions) CELLM_RETURN_IF_ERROR(executor->close_session(s));
  }
  if (options.prefill) {
    say(fmt::format("prefill of {} tokens", w));
    CELLM_ASSIGN_OR_RETURN(const StepTimes t, bench.time_prompt(w, 2, 5));
    bench.add_result(fmt::format("prefill {}", w), "tok/s", w * 1e3 / t.ms, t, w, 1, 1);
  }
  if (options.ttft_tokens > 0) {
    say(fmt::format("time to first token, {}-token prompt", options.ttft_tokens));
    CELLM_ASSIGN_OR_RETURN(const StepTimes t, bench.time_prompt(options.ttft_tokens, 1, 3));
    bench.add_result(fmt::format("ttft {}", options.ttft_tokens), "ms", t.ms, t,
                     options.ttft_tokens, 1, (options.ttft_tokens + w - 1) / w);
  }
  return report;
}

std::string bench_report_table(const CudaBenchReport& report) {
  std::string out = fmt::format(
      "device: {}\nmodel: {}\nmeasured: {:.0f} GB/s copy (read + write), {:.0f} TFLOP/s bf16 "
      "GEMM\nweights read per step: {:.2f} GB; matrix FLOPs per token: {:.2f} G\n",
      report.device, report.model, report.bandwidth_gb_s, report.bf16_tflops,
      static_cast<double>(report.weight_bytes_per_step) / 1e9,
      2.0 * static_cast<double>(report.matrix_macs_per_token) / 1e9);
  out += fmt::format("{:<42} {:>12} {:>10} {:>10} {:>9} {:>8}\n", "measurement", "value", "step ms",
                     "device ms", "of limit", "bound");
  for (const CudaBenchResult& r : report.results) {
    out += fmt::format("{:<42} {:>8.1f} {:<4}{:>9.3f} {:>10.3f} {:>8.1f}% {:>8}\n", r.name, r.value,
                       r.unit, r.step_ms, r.device_ms, 100.0 * r.ratio, r.bound);
  }
  return out;
}

}  // namespace cellm
