#include "batching/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace cellm {
namespace {

constexpr int kBucketsPerOctave = 16;

// Bucket 0 holds 0 us; bucket b >= 1 holds [lower(b), lower(b + 1)).
size_t bucket_of(int64_t us) {
  if (us <= 0) return 0;
  const double octaves = std::log2(static_cast<double>(us));
  return 1 + static_cast<size_t>(octaves * kBucketsPerOctave);
}

int64_t bucket_upper_us(size_t bucket) {
  if (bucket == 0) return 0;
  return static_cast<int64_t>(
      std::ceil(std::exp2(static_cast<double>(bucket) / kBucketsPerOctave)));
}

std::string ms(double us) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f ms", us / 1000.0);
  return text;
}

std::string latency_line(const char* name, const LatencySummary& s) {
  if (s.count == 0) return std::string(name) + ": none\n";
  return std::string(name) + ": " + std::to_string(s.count) + " samples, mean " + ms(s.mean_us) +
         ", p50 " + ms(static_cast<double>(s.p50_us)) + ", p90 " +
         ms(static_cast<double>(s.p90_us)) + ", p99 " + ms(static_cast<double>(s.p99_us)) +
         ", max " + ms(static_cast<double>(s.max_us)) + "\n";
}

}  // namespace

void LatencyStats::add(int64_t us) {
  us = std::max<int64_t>(us, 0);
  if (count_ == 0) {
    min_us_ = us;
    max_us_ = us;
  } else {
    min_us_ = std::min(min_us_, us);
    max_us_ = std::max(max_us_, us);
  }
  ++count_;
  total_us_ += us;
  const size_t bucket = bucket_of(us);
  if (bucket >= buckets_.size()) buckets_.resize(bucket + 1, 0);
  ++buckets_[bucket];
}

LatencySummary LatencyStats::summary() const {
  LatencySummary s;
  s.count = count_;
  if (count_ == 0) return s;
  s.total_us = total_us_;
  s.mean_us = static_cast<double>(total_us_) / static_cast<double>(count_);
  s.min_us = min_us_;
  s.max_us = max_us_;
  const auto percentile = [&](double q) {
    const auto rank = static_cast<int64_t>(std::ceil(q * static_cast<double>(count_)));
    int64_t seen = 0;
    for (size_t b = 0; b < buckets_.size(); ++b) {
      seen += buckets_[b];
      if (seen >= std::max<int64_t>(rank, 1)) {
        return std::clamp(bucket_upper_us(b), min_us_, max_us_);
      }
    }
    return max_us_;
  };
  s.p50_us = percentile(0.50);
  s.p90_us = percentile(0.90);
  s.p99_us = percentile(0.99);
  return s;
}

std::string format_report(const EngineMetrics& m) {
  char line[256];
  std::string out;
  std::snprintf(line, sizeof(line),
                "generated %lld tokens in %.3f s: %.1f tokens/s overall, %.1f tokens/s in decode "
                "steps\n",
                static_cast<long long>(m.num_generated_tokens),
                static_cast<double>(m.elapsed_us) / 1e6, m.generated_tokens_per_s,
                m.decode_tokens_per_s);
  out += line;
  out += latency_line("time to first token", m.ttft);
  out += latency_line("inter-token latency", m.inter_token);
  std::snprintf(
      line, sizeof(line),
      "steps: %lld (%lld decode-only, %lld prompt-only, %lld mixed, %lld failed); "
      "tokens run: %lld decode, %lld prompt (%lld recomputed)\n",
      static_cast<long long>(m.num_steps), static_cast<long long>(m.decode_steps.count),
      static_cast<long long>(m.prompt_steps.count), static_cast<long long>(m.mixed_steps.count),
      static_cast<long long>(m.num_failed_steps), static_cast<long long>(m.num_decode_tokens),
      static_cast<long long>(m.num_prompt_tokens), static_cast<long long>(m.num_recomputed_tokens));
  out += line;
  out += latency_line("decode step time", m.decode_steps);
  out += latency_line("prompt step time", m.prompt_steps);
  out += latency_line("mixed step time", m.mixed_steps);
  std::snprintf(line, sizeof(line),
                "cell pool: %d of %d cells in use, peak %d; high water %d, peak %d (%d growths)\n",
                m.pool_used_cells, m.pool_max_cells, m.pool_peak_used_cells, m.pool_high_water,
                m.pool_peak_high_water, m.pool_num_growths);
  out += line;
  std::snprintf(line, sizeof(line),
                "generations: %lld submitted, %lld refused; %lld stop token, %lld stop string, "
                "%lld format complete, %lld token limit, %lld cancelled, %lld failed; %lld "
                "preemptions, %lld idle evictions\n",
                static_cast<long long>(m.num_submitted), static_cast<long long>(m.num_refusals),
                static_cast<long long>(m.finished(FinishReason::kStopToken)),
                static_cast<long long>(m.finished(FinishReason::kStopString)),
                static_cast<long long>(m.finished(FinishReason::kFormatComplete)),
                static_cast<long long>(m.finished(FinishReason::kNewTokenLimit)),
                static_cast<long long>(m.finished(FinishReason::kCancelled)),
                static_cast<long long>(m.finished(FinishReason::kFailed)),
                static_cast<long long>(m.num_preemptions),
                static_cast<long long>(m.num_idle_evictions));
  out += line;
  if (m.num_prefix_hits > 0 || m.num_retained_prefixes > 0) {
    std::snprintf(line, sizeof(line),
                  "prefix reuse: %lld generations started from other sessions' cells (%lld after "
                  "waiting for them), %lld positions not computed; %d closed sessions retained\n",
                  static_cast<long long>(m.num_prefix_hits),
                  static_cast<long long>(m.num_prefix_waits),
                  static_cast<long long>(m.num_reused_tokens), m.num_retained_prefixes);
    out += line;
  }
  return out;
}

}  // namespace cellm
