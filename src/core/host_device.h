// CELLM_HOST_DEVICE: marks a function that host and device code both call — `__host__ __device__`
// when nvcc compiles the file, nothing otherwise — so that core's pure arithmetic (core/hash.h,
// core/listed_draw.h) is one definition for the CPU and the GPU. Thread-safety: a macro.
#pragma once

#if defined(__CUDACC__)
#define CELLM_HOST_DEVICE __host__ __device__
#else
#define CELLM_HOST_DEVICE
#endif
