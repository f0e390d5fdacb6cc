// cuda_backend: the CUDA backend as the rest of cellm sees it — no CUDA type in this header.
//
// apps/cellm (and tests outside this folder) pick the GPU through these functions only:
// cuda_device_available() says whether a usable device is present (false on a machine without a
// GPU or driver, never an abort), and make_cuda_executor() builds a CudaExecutor (Executor,
// batching/executor.h) for a model and program. The executor is returned NOT initialized, like
// CpuExecutor: the caller calls initialize() once (uploads the weights, sizes the pools,
// captures the decode graphs) and gets a Status. The weights' GgufFile must stay alive until
// initialize() returns (the GPU keeps its own copy). Thread-safety: these functions may be called
// from any thread; the executor follows Executor's rule (one engine thread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "batching/executor.h"
#include "core/status.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "program/program_spec.h"

namespace cellm {

struct CudaExecutorOptions {
  int32_t max_sessions = 256;      // sessions open at once
  int32_t max_session_tokens = 0;  // positions one session may hold; 0 = the program's context
  int device = 0;                  // CUDA device ordinal
  bool use_graphs = true;          // false: decode calls run eagerly (the graph-vs-eager check)
  bool fuse_weights = true;        // concatenate q/k/v and gate/up when their types match
  bool resident_bf16 = false;      // keep bf16 copies of quantized matrices (CudaWeightsOptions)
  // Keep them anyway where they fit: uploading the weights itself, the executor keeps the copies
  // when the device memory left free is at least what it needs beside the weights
  // (cuda_executor_room): its KV pool at its largest and a reserve. Q8_0 / Q4_0 models then run
  // steps of more than 32 / 48 rows — many-session decode, prefill — as bf16 GEMMs (2 more bytes
  // per weight; on an H200, Llama-3.1-8B q4_0 at 96 / 128 / 256 sessions +38 / +34 / +33%,
  // prefill +25%; q8_0 at 64 / 128 / 256 +14 / +49 / +37%, prefill +33%).
  bool resident_bf16_if_room = true;
  // Greedy fast path: every output row's argmax is computed on the device and returned in
  // OutputRow::greedy_token (the lowest id on ties), which the Runner takes for plain greedy
  // sessions instead of reading the row; a step whose rows are all plain greedy asks for no
  // logits (return_logits false), and none are copied to the host (unless
  // CudaExecutor::set_copy_logits(true)).
  bool device_argmax = false;
  // Q8_0 / Q4_0 products of slices of up to 16 rows (one row (Q4_0: two) in the fused small-M
  // layer, more on the int8 tensor cores) take int8 activations, quantized per 32 values like the
  // weights: about 3e-3 relative error in those products and faster decode. false keeps them in
  // f32 (up to 4 rows) or bf16 (the tensor-core path) (CudaForwardConfig::int8_activations;
  // `--exact-activations` on the command line).
  bool int8_activations = true;
  // Records an event before each step's first device work and after its last copy
  // (CudaExecutorStats::last_step_device_ms): how much of a step the device is busy, for the
  // benchmark's split of a step's time into device and host. Off: no events.
  bool time_steps = false;
  // Batch-1 greedy decode runs a step ahead: when a one-session step feeds back the previous
  // step's device argmax (and asks for no logits), the executor enqueues the following step
  // too — its token read from the device, its placement pending — before it waits, so the device
  // runs it while the host finishes this one. The next execute() that asks for exactly that step
  // takes it; any other call drops it (its cell freed; its device work, already enqueued, only
  // costs time). Needs device_argmax and decode graphs.
  bool run_ahead = true;
  // Sampled rows whose candidates leave the draw undecided (no top-k inside the list) are drawn
  // from the whole row on the device (kernels/row_draw.cuh; Executor::draws_rows()), so no
  // sampled row without bias or penalties travels to the host, and batch-1 sampled steps run
  // ahead on any cuts. false: such rows are kept for the host to fetch and sample.
  bool row_draws = true;
  // With row_draws, rows whose sampler has bias or penalties are rewritten on the device first
  // (kernels/row_rewrite.cuh; Executor::rewrites_rows()), so those sessions draw there too.
  // false: such rows are kept for the host to fetch, rewrite and sample.
  bool row_rewrites = true;
};

// True when a CUDA device with compute capability 9.0 (the build's sm_90a) can be used.
bool cuda_device_available();

// "NVIDIA H200, 132 SMs, 139.8 GiB, driver 13.0" or why no device is usable.
std::string cuda_device_summary();

// A CudaExecutor over `weights` (views into a GgufFile that must outlive initialize()) running
// `spec`'s methods. Errors: FailedPrecondition when no usable device exists.
StatusOr<std::unique_ptr<Executor>> make_cuda_executor(const ModelConfig& config,
                                                       const ModelWeights& weights,
                                                       const ProgramSpec& spec,
                                                       const CudaExecutorOptions& options);

}  // namespace cellm
