// hardware_limits: the two ceilings a benchmark compares against, measured on the device itself
// — memory bandwidth from a large device-to-device copy (bytes read + bytes written over the
// time) and the bf16 tensor-core rate from a cuBLAS 8192³ bf16 GEMM with f32 accumulation, both
// on random data, timed with CUDA events after warm-up, medians. No CUDA types in this header.
// Thread-safety: one call at a time per device.
#pragma once

#include <cstdint>

#include "core/status.h"

namespace cellm {

struct HardwareLimits {
  double bandwidth_bytes_per_s = 0.0;  // device-to-device copy, read + write
  double bf16_flops_per_s = 0.0;       // cuBLAS bf16 GEMM, 8192³
  int32_t num_sms = 0;
};

// Takes a few seconds and about 3 GiB of device memory (freed on return).
StatusOr<HardwareLimits> measure_hardware_limits(int device);

}  // namespace cellm
