// decode_ring_timeline: the summary of the ring chain's timeline (see the header).
#include "backends/cuda/kernels/decode_ring_timeline.h"

#include <algorithm>
#include <cstdio>

#include "backends/cuda/kernels/decode_ring_bench.h"

namespace cellm::kernels {
namespace {

constexpr int kStagesPerLayer = 4;

// The words of a timeline; times as ns after `base_ns` (the first block's start), subtracted in
// integers: globaltimer counts ns since 1970, beyond a double's exact integers.
struct Words {
  const std::vector<uint64_t>& words;
  int num_blocks;
  uint64_t base_ns = 0;
  uint64_t word(int row, int block, int field) const {
    return words[(static_cast<size_t>(row) * num_blocks + block) * RingTimeline::kFields + field];
  }
  double ns(int row, int block, int field) const {
    return static_cast<double>(static_cast<int64_t>(word(row, block, field) - base_ns));
  }
  double raw(int row, int block, int field) const {
    return static_cast<double>(word(row, block, field));
  }
};

}  // namespace

RingTimelineSummary summarize_ring_timeline(const std::vector<uint64_t>& words, int num_layers,
                                            int num_blocks) {
  RingTimelineSummary summary;
  summary.kinds.resize(kStagesPerLayer);
  std::vector<RingStageTimes>& kinds = summary.kinds;
  const int num_stages = num_layers * kStagesPerLayer;
  if (num_layers < 1 || num_blocks < 1 ||
      words.size() != static_cast<size_t>(num_stages + 1) * num_blocks * RingTimeline::kFields) {
    return summary;
  }
  Words w{words, num_blocks};
  w.base_ns = w.word(num_stages, 0, RingTimeline::kStartNs);
  for (int b = 1; b < num_blocks; ++b) {
    w.base_ns = std::min(w.base_ns, w.word(num_stages, b, RingTimeline::kStartNs));
  }
  // Cycles to ns from the blocks' start and end (each block's own clock).
  double ns_sum = 0, cycles_sum = 0;
  for (int b = 0; b < num_blocks; ++b) {
    ns_sum +=
        w.ns(num_stages, b, RingTimeline::kEndNs) - w.ns(num_stages, b, RingTimeline::kStartNs);
    cycles_sum += w.raw(num_stages, b, RingTimeline::kEndCycles) -
                  w.raw(num_stages, b, RingTimeline::kStartCycles);
  }
  const double ns_per_cycle = cycles_sum > 0 ? ns_sum / cycles_sum : 0.0;
  summary.sm_clock_ghz = ns_sum > 0 ? cycles_sum / ns_sum : 0.0;
  // The timer's step: the smallest positive gap between two points of a block's stage.
  uint64_t step = 0;
  for (int s = 0; s < num_stages; ++s) {
    for (int b = 0; b < num_blocks; ++b) {
      for (int f = RingTimeline::kReady; f < RingTimeline::kPassed; ++f) {
        const uint64_t from = w.word(s, b, f), to = w.word(s, b, f + 1);
        if (to > from && (step == 0 || to - from < step)) step = to - from;
      }
    }
  }
  summary.timer_step_ns = static_cast<double>(step);
  const int first_stage = num_layers > 1 ? kStagesPerLayer : 0;
  for (int s = first_stage; s < num_stages; ++s) {
    RingStageTimes& k = kinds[s % kStagesPerLayer];
    // The release the stage began with: the first block's after the previous barrier, or the
    // first block's start.
    double begin = 1e300, release = 1e300, last_handed = -1e300, mean_handed = 0, mean_tiles = 0;
    int last_block = 0;
    for (int b = 0; b < num_blocks; ++b) {
      begin = std::min(begin, s > 0 ? w.ns(s - 1, b, RingTimeline::kPassed)
                                    : w.ns(num_stages, b, RingTimeline::kStartNs));
      release = std::min(release, w.ns(s, b, RingTimeline::kPassed));
      const double handed = w.ns(s, b, RingTimeline::kHanded);
      if (handed > last_handed) {
        last_handed = handed;
        last_block = b;
      }
      mean_handed += handed / num_blocks;
      mean_tiles += w.raw(s, b, RingTimeline::kTiles) / num_blocks;
    }
    double input = 0, work = 0, work_max = 0, wait = 0, handover_own = 0, handover = 0;
    for (int b = 0; b < num_blocks; ++b) {
      const double passed_before = s > 0 ? w.ns(s - 1, b, RingTimeline::kPassed)
                                         : w.ns(num_stages, b, RingTimeline::kStartNs);
      const double ready = w.ns(s, b, RingTimeline::kReady);
      const double done = w.ns(s, b, RingTimeline::kTilesDone);
      input += (ready - passed_before) / num_blocks;
      work += (done - ready) / num_blocks;
      work_max = std::max(work_max, done - ready);
      wait += w.raw(s, b, RingTimeline::kWaitCycles) * ns_per_cycle / num_blocks;
      handover_own += (w.ns(s, b, RingTimeline::kHandedOwn) - done) / num_blocks;
      handover += (w.ns(s, b, RingTimeline::kHanded) - done) / num_blocks;
    }
    k.stage_us += (release - begin) / 1e3;
    k.input_us += input / 1e3;
    k.work_us += work / 1e3;
    k.work_max_us += work_max / 1e3;
    k.wait_us += wait / 1e3;
    k.handover_own_us += handover_own / 1e3;
    k.handover_us += handover / 1e3;
    k.last_after_mean_us += (last_handed - mean_handed) / 1e3;
    k.barrier_us += (release - last_handed) / 1e3;
    k.last_tiles_ratio +=
        mean_tiles > 0 ? w.raw(s, last_block, RingTimeline::kTiles) / mean_tiles : 0.0;
    ++k.num_stages;
  }
  for (RingStageTimes& k : kinds) {
    if (k.num_stages == 0) continue;
    const double n = k.num_stages;
    for (double* v :
         {&k.stage_us, &k.input_us, &k.work_us, &k.work_max_us, &k.wait_us, &k.handover_own_us,
          &k.handover_us, &k.last_after_mean_us, &k.barrier_us, &k.last_tiles_ratio}) {
      *v /= n;
    }
  }
  return summary;
}

std::string format_ring_timeline(const RingTimelineSummary& summary) {
  const std::vector<RingStageTimes>& kinds = summary.kinds;
  static const char* const kNames[kStagesPerLayer] = {"q|k|v", "output", "gate|up", "down"};
  std::string out =
      "  stage     µs/stage  input  work (max)      waits  handover (own)  last−mean  barrier  "
      "last's tiles\n";
  char line[160];
  RingStageTimes total;
  const auto row = [&](const char* name, const RingStageTimes& k, bool tiles) {
    std::snprintf(line, sizeof(line),
                  "  %-8s  %8.2f  %5.2f  %5.2f (%5.2f)  %5.2f  %8.2f (%4.2f)  %9.2f  %7.2f", name,
                  k.stage_us, k.input_us, k.work_us, k.work_max_us, k.wait_us, k.handover_us,
                  k.handover_own_us, k.last_after_mean_us, k.barrier_us);
    out += line;
    if (tiles) {
      std::snprintf(line, sizeof(line), "  %5.2f ×", k.last_tiles_ratio);
      out += line;
    }
    out += "\n";
  };
  for (size_t i = 0; i < kinds.size() && i < kStagesPerLayer; ++i) {
    const RingStageTimes& k = kinds[i];
    row(kNames[i], k, true);
    for (const auto field :
         {&RingStageTimes::stage_us, &RingStageTimes::input_us, &RingStageTimes::work_us,
          &RingStageTimes::work_max_us, &RingStageTimes::wait_us, &RingStageTimes::handover_own_us,
          &RingStageTimes::handover_us, &RingStageTimes::last_after_mean_us,
          &RingStageTimes::barrier_us}) {
      total.*field += k.*field;
    }
  }
  row("a layer", total, false);
  std::snprintf(line, sizeof(line), "  (SM clock %.2f GHz; timer step %.0f ns or less)\n",
                summary.sm_clock_ghz, summary.timer_step_ns);
  out += line;
  return out;
}

}  // namespace cellm::kernels
