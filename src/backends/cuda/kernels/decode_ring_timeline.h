// decode_ring_timeline: reads the ring chain's timeline (RingShape::timeline, RingTimeline's
// layout in decode_ring_bench.h) into where a stage's time goes, per kind of stage, averaged over
// the layers after the first. Plain host code over the copied words; knows nothing of the kernel
// but the layout. Called by `cuda_decode_bench --ring`. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cellm::kernels {

// One kind of stage (q|k|v, output, gate|up, down), microseconds averaged over its stages.
struct RingStageTimes {
  double stage_us = 0;     // from the first block's release from the previous barrier to its own
  double input_us = 0;     // mean over blocks: that release to its input being ready
  double work_us = 0;      // mean over blocks: input ready to its tiles multiplied
  double work_max_us = 0;  // the same, the slowest block
  double wait_us = 0;      // mean over blocks: its consumer warps' waits for full slots
  double handover_own_us = 0;     // mean over blocks: its tiles multiplied to its first warp's
                                  // own outputs handed over
  double handover_us = 0;         // the same, to all its outputs handed over
  double last_after_mean_us = 0;  // the last block's handover after the mean block's
  double barrier_us = 0;          // the last block's handover to the first block's release
  double last_tiles_ratio = 0;    // the last block's tiles over the mean block's
  int num_stages = 0;             // stages averaged
};

struct RingTimelineSummary {
  std::vector<RingStageTimes> kinds;  // q|k|v, output, gate|up, down
  double sm_clock_ghz = 0;            // the SMs' clock cycles per ns over the launch
  double timer_step_ns = 0;           // the smallest positive gap between a stage's points
};

// `words`: [num_layers · 4 + 1][num_blocks][RingTimeline::kFields]. Layers after the first only
// (all of them when there is one); all zero when the words are not of that size.
RingTimelineSummary summarize_ring_timeline(const std::vector<uint64_t>& words, int num_layers,
                                            int num_blocks);

// The summary as a table, one line per kind of stage, with a total line and the clock.
std::string format_ring_timeline(const RingTimelineSummary& summary);

}  // namespace cellm::kernels
