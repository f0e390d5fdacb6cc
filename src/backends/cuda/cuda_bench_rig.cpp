#include "backends/cuda/cuda_bench_rig.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <span>

#include "batching/token_logprobs.h"
#include "core/check.h"

namespace cellm::cuda_bench_internal {
namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[values.size() / 2];
}

}  // namespace

BenchRig::BenchRig(const CudaBenchOptions& options, const HardwareLimits& limits,
                   CudaExecutor& executor, CudaBenchReport& report)
    : options_(options),
      limits_(limits),
      executor_(executor),
      report_(report),
      tokens_(options.seed, executor.limits().vocab_size) {
  const ModelConfig& c = executor.weights().config();
  lm_macs_ = static_cast<uint64_t>(c.vocab_size) * static_cast<uint64_t>(c.hidden_size);
  layer_macs_ = executor.weights().matrix_macs_per_token() - lm_macs_;
}

template <typename Make, typename After>
StatusOr<StepTimes> BenchRig::time_steps(int32_t warmup, int32_t steps, bool return_logits,
                                         Make make_batch, After after) {
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

void BenchRig::add_result(std::string name, std::string unit, double value, const StepTimes& times,
                          int64_t rows, int64_t kept, int64_t calls) {
  const double step_ms = times.ms;
  const double bytes =
      static_cast<double>(executor_.weights().matrix_bytes_per_step()) * static_cast<double>(calls);
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

StatusOr<std::vector<SessionId>> BenchRig::open_with_context(int32_t n, int32_t context) {
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

StatusOr<StepTimes> BenchRig::time_decode(const std::vector<SessionId>& sessions, int32_t n,
                                          bool return_logits, int32_t num_top_logprobs,
                                          bool host_logprobs, const SamplingParams* sampling,
                                          bool from_candidates) {
  std::vector<Sampler> samplers;
  std::vector<std::vector<int32_t>> contexts(static_cast<size_t>(n));
  if (sampling != nullptr) {
    for (int32_t i = 0; i < n; ++i) samplers.emplace_back(*sampling, 11 + i);
  }
  // Rows rewritten for bias and penalties on the device, as the engine asks where it can.
  const bool rewrites = from_candidates && !samplers.empty() &&
                        samplers.front().rewrites_scores() && executor_.rewrites_rows();
  std::vector<SamplerRewrite> rewrite_storage(rewrites ? static_cast<size_t>(n) : 0);
  const bool keep = from_candidates && !return_logits && !samplers.empty() &&
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

void BenchRig::sample_rows(std::vector<Sampler>& samplers,
                           std::vector<std::vector<int32_t>>& contexts, const BatchOutput& output,
                           std::vector<int32_t>& next) {
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

BenchRig::CandidateCounts BenchRig::take_candidate_counts() {
  const CandidateCounts counts = {num_candidate_rows_, num_decided_rows_, num_row_draws_};
  num_candidate_rows_ = num_decided_rows_ = num_row_draws_ = 0;
  return counts;
}

StatusOr<StepTimes> BenchRig::time_prompt(int32_t length, int32_t warmup, int32_t steps) {
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

}  // namespace cellm::cuda_bench_internal
