#include "backends/cuda/cuda_bench.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <optional>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_executor.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/hardware_limits.h"
#include "backends/cuda/model_geometry.h"
#include "batching/sampler.h"
#include "batching/token_logprobs.h"
#include "core/check.h"
#include "program/program.h"

namespace cellm {
namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[values.size() / 2];
}

// Medians of a measurement's timed steps: the whole execute, and the device's part of it.
struct StepTimes {
  double ms = 0.0;
  double device_ms = 0.0;
};

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

// Deterministic token ids spread over the vocabulary.
class TokenSource {
 public:
  TokenSource(uint64_t seed, int32_t vocab) : state_(seed * 2654435761u + 1), vocab_(vocab) {}
  int32_t next() {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int32_t>((state_ >> 33) % static_cast<uint64_t>(vocab_));
  }
  std::vector<int32_t> take(int32_t n) {
    std::vector<int32_t> tokens(static_cast<size_t>(n));
    for (int32_t& t : tokens) t = next();
    return tokens;
  }

 private:
  uint64_t state_;
  int32_t vocab_;
};

// Everything one run needs: the executor, its model and what the floor of a step is.
class Bench {
 public:
  Bench(const CudaBenchOptions& options, const HardwareLimits& limits, CudaExecutor& executor,
        CudaBenchReport& report)
      : options_(options),
        limits_(limits),
        executor_(executor),
        report_(report),
        tokens_(options.seed, executor.limits().vocab_size) {
    const ModelConfig& c = executor.weights().config();
    lm_macs_ = static_cast<uint64_t>(c.vocab_size) * static_cast<uint64_t>(c.hidden_size);
    layer_macs_ = executor.weights().matrix_macs_per_token() - lm_macs_;
  }

  // Medians of timed executes of `make_batch(i)` after warm-up ones: the wall time from one
  // execute's return to the next one's (so a step the executor ran ahead counts from when the
  // previous one was handed back, and the host's own work between steps is counted too); the
  // device part from the executor's step timing. `after(i, output)` runs after each.
  template <typename Make, typename After>
  StatusOr<StepTimes> time_steps(int32_t warmup, int32_t steps, bool return_logits, Make make_batch,
                                 After after) {
    std::vector<double> times;
    std::vector<double> device_times;
    CELLM_RETURN_IF_ERROR(executor_.synchronize());
    auto last = std::chrono::steady_clock::now();
    for (int32_t i = 0; i < warmup + steps; ++i) {
      const BatchInput batch = make_batch(i);
      CELLM_ASSIGN_OR_RETURN(const BatchOutput output, executor_.execute(batch, return_logits));
      const auto now = std::chrono::steady_clock::now();
      const double ms = std::chrono::duration<double, std::milli>(now - last).count();
      last = now;
      if (i >= warmup) {
        times.push_back(ms);
        device_times.push_back(executor_.stats().last_step_device_ms);
      }
      after(i, output);
    }
    return StepTimes{median(times), median(device_times)};
  }

  // The floor of a step running `rows` token rows and `kept` LM-head rows, `calls` forwards.
  void add_result(std::string name, std::string unit, double value, const StepTimes& times,
                  int64_t rows, int64_t kept, int64_t calls) {
    const double step_ms = times.ms;
    const double bytes = static_cast<double>(executor_.weights().matrix_bytes_per_step()) *
                         static_cast<double>(calls);
    const double flops = 2.0 * (static_cast<double>(layer_macs_) * static_cast<double>(rows) +
                                static_cast<double>(lm_macs_) * static_cast<double>(kept));
    const double memory_ms = bytes / limits_.bandwidth_bytes_per_s * 1e3;
    const double compute_ms = flops / limits_.bf16_flops_per_s * 1e3;
    CudaBenchResult r;
    r.name = std::move(name);
    r.unit = std::move(unit);
    r.value = value;
    r.step_ms = step_ms;
    r.device_ms = times.device_ms;
    r.ratio = std::max(memory_ms, compute_ms) / step_ms;
    r.bound = memory_ms >= compute_ms ? "memory" : "compute";
    report_.results.push_back(r);
  }

  // Opens `n` sessions, each holding `context` positions (prompts run W tokens per call).
  StatusOr<std::vector<SessionId>> open_with_context(int32_t n, int32_t context) {
    std::vector<SessionId> sessions;
    const int32_t per_batch = std::max(1, 8192 / std::max(1, context));
    for (int32_t first = 0; first < n; first += per_batch) {
      BatchInput batch;
      std::vector<std::vector<int32_t>> prompts;
      prompts.reserve(static_cast<size_t>(per_batch));
      for (int32_t i = first; i < std::min(n, first + per_batch); ++i) {
        const std::optional<SessionId> id = executor_.open_session();
        if (!id) return resource_exhausted("bench: cannot open session " + std::to_string(i));
        sessions.push_back(*id);
        prompts.push_back(tokens_.take(context));
        StepInput input;
        input.session = *id;
        input.tokens = prompts.back();
        input.end = context;
        batch.inputs.push_back(input);
      }
      CELLM_RETURN_IF_ERROR(executor_.execute(batch, false).status());
    }
    return sessions;
  }

  // Times decode steps of the first `n` sessions of `sessions` (each one new token).
  // With `num_top_logprobs` >= 0 every row also asks for its log-probabilities: summarized by
  // the executor (OutputRow::logprobs), or with `host_logprobs` computed from each row on this
  // thread (token_logprobs), as for an executor that summarizes none.
  // With `sampling`, every row is sampled with it on this thread instead: from the row, or with
  // `from_candidates` from the candidates the executor lists; where they may not decide, the
  // steps keep their rows on the device and the undecided ones are fetched, as the engine does.
  StatusOr<StepTimes> time_decode(const std::vector<SessionId>& sessions, int32_t n,
                                  bool return_logits, int32_t num_top_logprobs = -1,
                                  bool host_logprobs = false,
                                  const SamplingParams* sampling = nullptr,
                                  bool from_candidates = false) {
    std::vector<Sampler> samplers;
    std::vector<std::vector<int32_t>> contexts(static_cast<size_t>(n));
    if (sampling != nullptr) {
      for (int32_t i = 0; i < n; ++i) samplers.emplace_back(*sampling, 11 + i);
    }
    // Rows rewritten for bias and penalties on the device, as the engine asks where it can.
    const bool rewrites = from_candidates && !samplers.empty() &&
                          samplers.front().rewrites_scores() && executor_.rewrites_rows();
    std::vector<SamplerRewrite> rewrite_storage(rewrites ? static_cast<size_t>(n) : 0);
    const bool keep =
        from_candidates && !return_logits && !samplers.empty() &&
        !samplers.front().candidates_always_decide() &&
        !(executor_.draws_rows() && (samplers.front().takes_candidates() || rewrites));
    std::vector<int32_t> next(static_cast<size_t>(n));
    std::vector<int32_t> pos(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) {
      CELLM_ASSIGN_OR_RETURN(pos[static_cast<size_t>(i)],
                             executor_.session_length(sessions[static_cast<size_t>(i)]));
      next[static_cast<size_t>(i)] = tokens_.next();
    }
    return time_steps(
        options_.warmup_steps, options_.decode_steps, return_logits,
        [&](int32_t) {
          BatchInput batch;
          batch.keep_logits = keep;
          for (int32_t i = 0; i < n; ++i) {
            StepInput input;
            input.session = sessions[static_cast<size_t>(i)];
            input.start_pos = pos[static_cast<size_t>(i)];
            input.tokens = std::span<const int32_t>(&next[static_cast<size_t>(i)], 1);
            input.end = 1;
            input.wants_output = true;
            if (!host_logprobs) input.num_top_logprobs = num_top_logprobs;
            if (from_candidates) {  // and drawn on the device, as the engine asks
              input.candidates_temperature = sampling->temperature;
              const auto i_size = static_cast<size_t>(i);
              input.candidates_draw = {true, listed_draw_params(*sampling), samplers[i_size].seed(),
                                       static_cast<int64_t>(contexts[i_size].size())};
              if (rewrites) {
                samplers[i_size].rewrite_into(contexts[i_size], rewrite_storage[i_size]);
                input.rewrite = rewrite_storage[i_size].view();
              }
            }
            batch.inputs.push_back(input);
          }
          return batch;
        },
        [&](int32_t, const BatchOutput& output) {
          // Each session's greedy token fed back where the device computed it, as `cellm run`
          // decodes a greedy session; a random one otherwise.
          if (sampling != nullptr) sample_rows(samplers, contexts, output, next);
          for (int32_t i = 0; i < n; ++i) {
            ++pos[static_cast<size_t>(i)];
            const OutputRow& row = output.outputs[static_cast<size_t>(i)];
            if (sampling == nullptr) {
              next[static_cast<size_t>(i)] =
                  row.greedy_token != kNoToken ? row.greedy_token : tokens_.next();
            }
            if (num_top_logprobs < 0) continue;
            const int32_t token = next[static_cast<size_t>(i)];
            const auto vocab = static_cast<size_t>(output.vocab_size);
            CELLM_CHECK(host_logprobs || row.logprobs.has_value()) << "a row not summarized";
            const TokenLogprobs logprobs =
                host_logprobs
                    ? token_logprobs(output.logits.subspan(static_cast<size_t>(i) * vocab, vocab),
                                     token, num_top_logprobs)
                    : logprobs_from_summary(*row.logprobs, token,
                                            token == row.greedy_token
                                                ? row.logprobs->max_logit
                                                : std::numeric_limits<float>::quiet_NaN());
            logprob_sum_ += logprobs.logprob;  // used, so that nothing is optimized away
          }
        });
  }

  // Every row's token into `next` (and appended to its context): from its candidates when they
  // decide it, else from its row — the step's, or fetched from the device with the other
  // undecided rows in one call when the step kept them (BatchInput::keep_logits).
  void sample_rows(std::vector<Sampler>& samplers, std::vector<std::vector<int32_t>>& contexts,
                   const BatchOutput& output, std::vector<int32_t>& next) {
    std::vector<int32_t> undecided;
    for (size_t i = 0; i < samplers.size(); ++i) {
      const OutputRow& row = output.outputs[i];
      std::optional<int32_t> token;
      if (row.candidates.has_value()) {
        token = samplers[i].sample_from_candidates(*row.candidates,
                                                   static_cast<int64_t>(contexts[i].size()));
        ++num_candidate_rows_;
        num_decided_rows_ += token.has_value();
        if (!token.has_value() && executor_.draws_rows() && row.candidates->drawn != kNoToken) {
          token = row.candidates->drawn;  // drawn from the whole row on the device, as the engine
          ++num_row_draws_;               // takes it
        }
      }
      if (token.has_value()) {
        next[i] = *token;
      } else {
        undecided.push_back(static_cast<int32_t>(i));
      }
    }
    std::span<const float> logits = output.logits;
    if (!undecided.empty() && logits.empty()) {
      const StatusOr<std::span<const float>> fetched = executor_.fetch_logits(undecided);
      CELLM_CHECK(fetched.ok()) << "the candidates left draws to rows not kept: "
                                << fetched.status().to_string();
      logits = *fetched;
    }
    const auto vocab = static_cast<size_t>(executor_.limits().vocab_size);
    for (const int32_t r : undecided) {
      const auto i = static_cast<size_t>(r);
      const StatusOr<int32_t> sampled =
          samplers[i].sample(logits.subspan(i * vocab, vocab), contexts[i]);
      CELLM_CHECK(sampled.ok()) << sampled.status().to_string();
      next[i] = *sampled;
    }
    for (size_t i = 0; i < samplers.size(); ++i) contexts[i].push_back(next[i]);
  }

  // Rows that listed candidates since the last call, how many of them decided the draw, and how
  // many of the others the device drew from the whole row.
  struct CandidateCounts {
    int64_t rows = 0;
    int64_t decided = 0;
    int64_t row_draws = 0;
  };
  CandidateCounts take_candidate_counts() {
    const CandidateCounts counts = {num_candidate_rows_, num_decided_rows_, num_row_draws_};
    num_candidate_rows_ = num_decided_rows_ = num_row_draws_ = 0;
    return counts;
  }

  // Times one execute of a fresh session's `length`-token prompt, keeping its last row.
  StatusOr<StepTimes> time_prompt(int32_t length, int32_t warmup, int32_t steps) {
    const std::vector<int32_t> prompt = tokens_.take(length);
    SessionId session = 0;
    return time_steps(
        warmup, steps, false,
        [&](int32_t) {
          session = executor_.open_session().value_or(0);
          BatchInput batch;
          StepInput input;
          input.session = session;
          input.tokens = prompt;
          input.end = length;
          input.wants_output = true;
          batch.inputs.push_back(input);
          return batch;
        },
        [&](int32_t, const BatchOutput&) { (void)executor_.close_session(session); });
  }

  TokenSource& tokens() { return tokens_; }

 private:
  const CudaBenchOptions& options_;
  const HardwareLimits& limits_;
  CudaExecutor& executor_;
  CudaBenchReport& report_;
  TokenSource tokens_;
  uint64_t lm_macs_ = 0;
  uint64_t layer_macs_ = 0;
  double logprob_sum_ = 0.0;
  int64_t num_candidate_rows_ = 0;
  int64_t num_decided_rows_ = 0;
  int64_t num_row_draws_ = 0;
};

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

  Bench bench(options, limits, *executor, report);
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
