#include "backends/cuda/cuda_executor.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/executor_setup.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels/matmul.cuh"
#include "core/check.h"
#include "core/logging.h"

namespace cellm {

CudaExecutor::CudaExecutor(const ModelConfig& config, const ModelWeights& weights,
                           const ProgramSpec& spec, const CudaExecutorOptions& options)
    : TableExecutor("CudaExecutor"),
      config_(config),
      host_weights_(&weights),
      spec_(spec),
      options_(options) {}

CudaExecutor::CudaExecutor(const ModelConfig& config, std::shared_ptr<const CudaWeights> weights,
                           const ProgramSpec& spec, const CudaExecutorOptions& options)
    : TableExecutor("CudaExecutor"),
      config_(config),
      weights_(std::move(weights)),
      spec_(spec),
      options_(options) {}

CudaExecutor::~CudaExecutor() {
  // Work in flight reads the pool, the step buffers and the graphs: wait for it on the stream we
  // own (still alive here), then release in reverse order of creation.
  if (stream_.get() != nullptr) {
    const cudaError_t sync = cudaStreamSynchronize(stream_.get());
    if (sync != cudaSuccess) CELLM_LOG(kWarn) << "CudaExecutor: " << cudaGetErrorName(sync);
  }
  for (auto& [key, graph] : graphs_) cudaGraphExecDestroy(graph);
  graphs_.clear();
  forward_.reset();
  if (cublas_ != nullptr) cublasDestroy(cublas_);
}

Status CudaExecutor::validate() {
  CELLM_RETURN_IF_ERROR(validate_program_for_batching(spec_, config_));
  CELLM_ASSIGN_OR_RETURN(options_.max_session_tokens,
                         resolve_max_session_tokens(options_.max_session_tokens, spec_));
  if (spec_.kv_max_cells >= std::numeric_limits<int32_t>::max() - kFirstCellRow) {
    return invalid_argument("program: cellm.kv.max_cells " + std::to_string(spec_.kv_max_cells) +
                            " is too large");
  }
  return ok_status();
}

StatusOr<uint64_t> cuda_executor_room(const ModelConfig& config, const ProgramSpec& spec,
                                      int device) {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  CELLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  CELLM_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  const uint64_t row_bytes = static_cast<uint64_t>(config.num_layers) * config.num_kv_heads *
                             (config.head_dim + config.value_head_dim) *
                             static_cast<uint64_t>(kv_dtype_bytes(spec.kv_dtype));
  const uint64_t pool_bytes =
      (static_cast<uint64_t>(spec.kv_max_cells) + kFirstCellRow) * row_bytes;
  return pool_bytes + std::max<uint64_t>(uint64_t{2} << 30, total_bytes / 10);
}

Status CudaExecutor::initialize() {
  if (initialized_) return failed_precondition("CudaExecutor::initialize called twice");
  CELLM_RETURN_IF_ERROR(validate());
  const SessionTableConfig table_config = session_table_config(limits());
  CELLM_RETURN_IF_ERROR(validate_session_table_config(table_config));
  if (!cuda_device_available()) {
    return failed_precondition("no usable CUDA device: " + cuda_device_summary());
  }
  CELLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));

  if (weights_ == nullptr) {
    CudaWeightsOptions weight_options;
    weight_options.fuse = options_.fuse_weights;
    weight_options.resident_bf16 = options_.resident_bf16;
    weight_options.device = options_.device;
    if (options_.resident_bf16_if_room) {
      weight_options.resident_bf16_if_room = true;
      CELLM_ASSIGN_OR_RETURN(weight_options.keep_free_bytes,
                             cuda_executor_room(config_, spec_, options_.device));
    }
    CELLM_ASSIGN_OR_RETURN(std::unique_ptr<CudaWeights> uploaded,
                           CudaWeights::upload(config_, *host_weights_, weight_options));
    weights_ = std::move(uploaded);
    if (weights_->has_bf16_copies() && !options_.resident_bf16) {
      CELLM_LOG(kInfo) << "CudaExecutor: bf16 copies of the quantized matrices kept for steps of "
                          "many rows (room left beside the weights; "
                       << weights_->num_bytes() / (1 << 20) << " MiB of weights in all)";
    }
    host_weights_ = nullptr;
  } else if (weights_->config().num_layers != config_.num_layers ||
             weights_->config().hidden_size != config_.hidden_size ||
             weights_->config().vocab_size != config_.vocab_size) {
    return invalid_argument("device weights of another geometry than the model config");
  }

  CELLM_ASSIGN_OR_RETURN(stream_, CudaStream::create());
  CELLM_ASSIGN_OR_RETURN(step_done_, CudaEvent::create());
  for (AheadSlot& slot : ahead_slots_) {
    CELLM_ASSIGN_OR_RETURN(slot.token, PinnedBuffer::allocate(sizeof(int32_t)));
    CELLM_ASSIGN_OR_RETURN(slot.ask, PinnedBuffer::allocate(sizeof(kernels::RowCandidatesAsk)));
    CELLM_ASSIGN_OR_RETURN(slot.lists,
                           PinnedBuffer::allocate(sizeof(kernels::RowCandidatesSummary)));
    CELLM_ASSIGN_OR_RETURN(slot.done, CudaEvent::create());
  }
  if (options_.time_steps) {
    CELLM_ASSIGN_OR_RETURN(step_begin_, CudaEvent::create(true));
    CELLM_ASSIGN_OR_RETURN(step_end_, CudaEvent::create(true));
  }
  CELLM_CUBLAS_RETURN_IF_ERROR(cublasCreate(&cublas_));
  CELLM_ASSIGN_OR_RETURN(cublas_workspace_, DeviceBuffer::allocate(kernels::kCublasWorkspaceBytes));
  CELLM_CUBLAS_RETURN_IF_ERROR(
      cublasSetWorkspace(cublas_, cublas_workspace_.data(), cublas_workspace_.num_bytes()));
  CELLM_CUBLAS_RETURN_IF_ERROR(cublasSetStream(cublas_, stream_.get()));

  KvPoolGeometry geometry;
  geometry.num_layers = config_.num_layers;
  geometry.num_kv_heads = config_.num_kv_heads;
  geometry.head_dim = config_.head_dim;
  geometry.value_head_dim = config_.value_head_dim;
  geometry.dtype = spec_.kv_dtype;
  geometry.max_rows = spec_.kv_max_cells + kFirstCellRow;
  geometry.device = options_.device;
  CELLM_ASSIGN_OR_RETURN(pool_, KvPool::create(geometry));
  CELLM_RETURN_IF_ERROR(pool_->reserve_rows(kFirstCellRow));  // the scratch row exists from now

  CudaCellCacheConfig step_config;
  step_config.max_width = spec_.max_step_tokens;
  step_config.max_session_tokens = options_.max_session_tokens;
  step_config.device = options_.device;
  CELLM_ASSIGN_OR_RETURN(steps_, CudaCellCache::create(step_config));

  CudaForwardConfig forward_config;
  forward_config.max_width = spec_.max_step_tokens;
  forward_config.max_session_tokens = options_.max_session_tokens;
  forward_config.layer_windows = spec_.kv_windows;
  forward_config.argmax = options_.device_argmax;
  forward_config.int8_activations = options_.int8_activations;
  CELLM_ASSIGN_OR_RETURN(forward_,
                         CudaForward::create(config_, *weights_, *pool_, forward_config, cublas_));

  if (options_.use_graphs) CELLM_RETURN_IF_ERROR(capture_graphs());
  replay_graphs_ = options_.use_graphs;
  CELLM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
  create_sessions(spec_.kv_max_cells, table_config);  // last: nothing below can fail
  initialized_ = true;
  return ok_status();
}

Status CudaExecutor::capture_graphs() {
  // Each width first runs once eagerly on a valid step (one token in cell 0, padding), so every
  // kernel and cuBLAS is loaded and checked before capture; cell 0 is free and rewritten by
  // whichever session takes it before anything reads it.
  CellStep warmup;
  warmup.num_tokens = 1;
  warmup.num_seqs = 1;
  warmup.token_seq = {0};
  warmup.token_pos = {0};
  warmup.token_cell = {0};
  warmup.token_step_seq = {0};
  warmup.seq_id = {0};
  warmup.seq_pos_begin = {0};
  warmup.seq_len = {1};
  warmup.seq_cell_offsets = {0, 1};
  warmup.seq_cells = {0};
  warmup.max_seq_len = 1;
  const int32_t token = 0;
  const int32_t kept = 0;
  CELLM_RETURN_IF_ERROR(pool_->reserve_rows(kFirstCellRow + 1));
  for (const int32_t width : spec_.decode_widths) {
    CELLM_ASSIGN_OR_RETURN(
        const DeviceStep step,
        steps_->upload(warmup, std::span<const int32_t>(&token, 1),
                       std::span<const int32_t>(&kept, 1), width, stream_.get()));
    CELLM_RETURN_IF_ERROR(
        forward_->enqueue(step, ForwardShape::kStatic, stream_.get())
            .with_context("warming up the decode of width " + std::to_string(width)));
    CELLM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
  }
  // Launch shapes of a static-width forward depend on the width and the context bound only;
  // the sizes below are the worst case a replay may meet (kernels read the real ones from the
  // device). A second bound, when the forward has one, serves steps of short sequences.
  std::vector<int32_t> bounds = {options_.max_session_tokens};
  if (forward_->short_context_bound() > 0) bounds.push_back(forward_->short_context_bound());
  for (const int32_t width : spec_.decode_widths) {
    for (const int32_t bound : bounds) {
      DeviceStep shape = steps_->step();
      shape.num_tokens = width;
      shape.width = width;
      shape.num_seqs = width;
      shape.max_seq_len = bound;
      shape.num_kept = width;
      shape.total_rows = width * options_.max_session_tokens + 1;
      cudaGraph_t graph = nullptr;
      CELLM_CUDA_RETURN_IF_ERROR(
          cudaStreamBeginCapture(stream_.get(), cudaStreamCaptureModeThreadLocal));
      const Status enqueued = forward_->enqueue(shape, ForwardShape::kStatic, stream_.get());
      const cudaError_t ended = cudaStreamEndCapture(stream_.get(), &graph);
      if (!enqueued.ok()) {
        if (graph != nullptr) cudaGraphDestroy(graph);
        return enqueued.with_context("capturing the decode graph of width " +
                                     std::to_string(width) + " for contexts of up to " +
                                     std::to_string(bound) + " cells");
      }
      CELLM_CUDA_RETURN_IF_ERROR(ended);
      cudaGraphExec_t exec = nullptr;
      const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
      cudaGraphDestroy(graph);
      CELLM_CUDA_RETURN_IF_ERROR(instantiated);
      graphs_[{width, bound}] = exec;
    }
  }
  return ok_status();
}

ExecutorLimits CudaExecutor::limits() const {
  return executor_limits(spec_, config_, options_.max_sessions, options_.max_session_tokens);
}

KvPoolMetrics CudaExecutor::kv_metrics() const {
  CELLM_CHECK(initialized_) << "CudaExecutor used before initialize()";
  return pool_->metrics();
}

Status CudaExecutor::set_use_graphs(bool use_graphs) {
  if (!initialized_) return failed_precondition("CudaExecutor::set_use_graphs before initialize()");
  if (use_graphs && !options_.use_graphs) {
    return failed_precondition("decode graphs were not captured (options.use_graphs is off)");
  }
  drop_ahead();
  replay_graphs_ = use_graphs;
  return ok_status();
}

Status CudaExecutor::synchronize() {
  if (!initialized_) return failed_precondition("CudaExecutor::synchronize before initialize()");
  return cuda_status(cudaStreamSynchronize(stream_.get()), "CudaExecutor stream");
}

StatusOr<BatchOutput> CudaExecutor::execute(const BatchInput& batch, bool return_logits) {
  if (!initialized_) return failed_precondition("CudaExecutor::execute before initialize()");
  // The engine thread may not be the one that initialized: bind it to the device.
  CELLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  kept_valid_ = false;
  if (ahead_.has_value()) {
    if (follows_tail(batch, return_logits) && batch.inputs[0].session == ahead_->session) {
      return take_ahead();  // follows_tail checked the position, the token and the ask
    }
    drop_ahead();
  }
  const bool then_run_ahead = follows_tail(batch, return_logits);
  CELLM_ASSIGN_OR_RETURN(PackedStep step, table().pack(batch));
  BatchOutput output = step.make_output();
  const size_t vocab = static_cast<size_t>(config_.vocab_size);
  const bool copy_logits = return_logits || copy_logits_ || !options_.device_argmax;
  const size_t logits_bytes = copy_logits ? output.outputs.size() * vocab * sizeof(float) : 0;
  const size_t tokens_bytes = options_.device_argmax ? output.outputs.size() * sizeof(int32_t) : 0;
  last_logits_ = {};
  // Rows copied anyway answer fetch_logits() from pinned memory.
  const bool keep = batch.keep_logits && !copy_logits;
  kept_rows_.assign(keep ? output.outputs.size() : 0, nullptr);
  // No copy is in flight between steps (the previous execute() synchronized): grow freely.
  for (auto [buffer, bytes] :
       {std::pair{&host_logits_, logits_bytes}, std::pair{&host_tokens_, tokens_bytes}}) {
    if (const Status grown = buffer->grow_to(bytes); !grown.ok()) {
      abort_step(step);
      return grown.with_context("pinned step outputs");
    }
  }
  RowAsks asks;
  {
    const StatusOr<bool> summarize = prepare_logprobs(batch, output);
    const StatusOr<bool> list = summarize.ok() ? prepare_candidates(batch, output) : false;
    const StatusOr<bool> rewrite = list.ok() ? prepare_rewrites(batch, output) : false;
    if (!summarize.ok() || !list.ok() || !rewrite.ok()) {
      abort_step(step);
      return !summarize.ok() ? summarize.status() : !list.ok() ? list.status() : rewrite.status();
    }
    asks = {*summarize, *list, *rewrite, keep};
  }
  const std::vector<SliceCall> calls = plan_slices(step.num_tokens, spec_.max_step_tokens,
                                                   spec_.min_prefill_chunk, spec_.decode_widths);
  if (keep && calls.size() > 1) {  // rows of the calls before the last are copied aside
    if (const Status grown = kept_logits_.grow_to(output.outputs.size() * vocab * sizeof(float));
        !grown.ok()) {
      abort_step(step);
      return grown.with_context("device rows kept for fetch_logits");
    }
  }
  Status status = ok_status();
  for (const SliceCall& call : calls) {
    status = run_call(step, call, copy_logits, asks, CallTargets{});
    if (!status.ok()) {
      status = status.with_context(std::string(slice_method_name(call.method)) + " call at token " +
                                   std::to_string(call.begin));
      break;
    }
  }
  const bool timed = options_.time_steps && !calls.empty();  // a call records step_begin_
  if (status.ok() && timed) {
    status = cuda_status(cudaEventRecord(step_end_.get(), stream_.get()), "step timing");
  }
  if (status.ok()) status = cuda_status(cudaEventRecord(step_done_.get(), stream_.get()), "step");
  // The session's next step goes on the stream before this one is waited for.
  if (status.ok() && then_run_ahead) {
    run_ahead(batch.inputs[0].session, batch.inputs[0].start_pos + batch.inputs[0].begin + 1,
              next_ask(ask_of(batch)));
  }
  // Errors of work already enqueued show up here; either way nothing may still run on the step
  // when it is rolled back (a step run ahead is given back first, then this one).
  const Status synced =
      status.ok() ? cuda_status(cudaEventSynchronize(step_done_.get()), "CudaExecutor step")
                  : cuda_status(cudaStreamSynchronize(stream_.get()), "CudaExecutor step");
  if (status.ok()) status = synced;
  if (status.ok() && options_.time_steps) {
    float ms = 0.0f;  // a step of no calls did no device work
    if (timed) {
      status =
          cuda_status(cudaEventElapsedTime(&ms, step_begin_.get(), step_end_.get()), "step timing");
    }
    stats_.last_step_device_ms = ms;
  }
  if (!status.ok()) {
    drop_ahead();
    abort_step(step);
    return status;
  }
  if (copy_logits) {
    last_logits_ = std::span<const float>(host_logits_.as<float>(), output.outputs.size() * vocab);
  }
  if (options_.device_argmax) {
    for (size_t i = 0; i < output.outputs.size(); ++i) {
      const int32_t token = host_tokens_.as<int32_t>()[i];
      output.outputs[i].greedy_token = token < 0 ? kNoToken : token;  // -1: nothing finite
    }
  }
  if (asks.logprobs) take_logprobs(batch, output);
  if (asks.candidates) take_candidates(batch, output);
  if (return_logits) {  // a view of the pinned rows: no copy
    output.vocab_size = config_.vocab_size;
    output.logits = last_logits_;
  }
  if (!ahead_.has_value()) commit_step();  // else its pack() committed this step
  note_tail(batch, output);
  count_step(calls);
  kept_valid_ = batch.keep_logits;
  return output;
}

StatusOr<std::span<const float>> CudaExecutor::fetch_logits(std::span<const int32_t> rows) {
  if (!kept_valid_) {
    return failed_precondition("CudaExecutor::fetch_logits: the last step kept no rows");
  }
  if (!last_logits_.empty()) return last_logits_;  // the step copied every row anyway
  const size_t num_rows = kept_rows_.size();
  CELLM_RETURN_IF_ERROR(check_fetch_rows(rows, num_rows));
  CELLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  const size_t vocab = static_cast<size_t>(config_.vocab_size);
  // No copy is in flight (the step synchronized): grow freely.
  CELLM_RETURN_IF_ERROR(host_logits_.grow_to(num_rows * vocab * sizeof(float)));
  float* host = host_logits_.as<float>();
  for (size_t k = 0; k < rows.size();) {
    const auto first = static_cast<size_t>(rows[k]);
    size_t end = k + 1;  // a run of rows adjacent in the output and on the device: one copy
    while (end < rows.size() && static_cast<size_t>(rows[end]) == first + (end - k) &&
           kept_rows_[first + (end - k)] == kept_rows_[first] + (end - k) * vocab) {
      ++end;
    }
    CELLM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host + first * vocab, kept_rows_[first],
                                               (end - k) * vocab * sizeof(float),
                                               cudaMemcpyDeviceToHost, stream_.get()));
    k = end;
  }
  CELLM_RETURN_IF_ERROR(
      cuda_status(cudaStreamSynchronize(stream_.get()), "CudaExecutor::fetch_logits"));
  stats_.num_fetched_rows += static_cast<int64_t>(rows.size());
  return std::span<const float>(host, num_rows * vocab);
}

void CudaExecutor::count_step(const std::vector<SliceCall>& calls) {
  ++stats_.num_steps;
  for (const SliceCall& call : calls) {
    if (call.method == SliceMethod::kPrefill) {
      ++stats_.num_prefill_calls;
    } else {
      ++stats_.num_decode_calls;
      if (replay_graphs_) ++stats_.num_graph_launches;
    }
    stats_.num_tokens += call.num_tokens;
    stats_.num_padding_rows += call.width - call.num_tokens;
  }
}

Status CudaExecutor::run_call(const PackedStep& step, const SliceCall& call, bool copy_logits,
                              RowAsks asks, const CallTargets& targets) {
  const int32_t begin = call.begin;
  const int32_t num_tokens = call.num_tokens;
  CELLM_RETURN_IF_ERROR(place_call(step, call, &cell_step_));
  CELLM_RETURN_IF_ERROR(pool_->reserve_rows(cache().high_water() + kFirstCellRow));
  const RowSelection rows = step.select_rows(begin, begin + num_tokens);
  const bool decode = call.method == SliceMethod::kDecode;
  const int32_t width = decode ? call.width : num_tokens;
  if (targets.timed && options_.time_steps && begin == 0) {  // the step's first device work follows
    CELLM_CUDA_RETURN_IF_ERROR(cudaEventRecord(step_begin_.get(), stream_.get()));
  }
  CELLM_ASSIGN_OR_RETURN(
      const DeviceStep device_step,
      steps_->upload(cell_step_, std::span<const int32_t>(step.tokens).subspan(begin, num_tokens),
                     rows.local_rows, width, stream_.get()));
  if (targets.token_source != nullptr) {
    CELLM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(const_cast<int32_t*>(device_step.tokens),
                                               targets.token_source,
                                               static_cast<size_t>(num_tokens) * sizeof(int32_t),
                                               cudaMemcpyDeviceToDevice, stream_.get()));
  }
  if (decode && replay_graphs_) {
    const int32_t bound = forward_->static_context_bound(cell_step_.max_seq_len);
    const auto graph = graphs_.find({width, bound});
    CELLM_CHECK(graph != graphs_.end())
        << "no decode graph of width " << width << " for contexts of up to " << bound << " cells";
    CELLM_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graph->second, stream_.get()));
  } else {
    CELLM_RETURN_IF_ERROR(forward_->enqueue(
        device_step, decode ? ForwardShape::kStatic : ForwardShape::kDynamic, stream_.get()));
  }
  if (!rows.local_rows.empty() && options_.device_argmax) {
    int32_t* dst =
        targets.host_tokens != nullptr ? targets.host_tokens : host_tokens_.as<int32_t>();
    CELLM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst + rows.first_kept, forward_->argmax_tokens(),
                                               rows.local_rows.size() * sizeof(int32_t),
                                               cudaMemcpyDeviceToHost, stream_.get()));
  }
  const auto num_kept = static_cast<int32_t>(rows.local_rows.size());
  if (num_kept > 0 && asks.logprobs) {
    CELLM_RETURN_IF_ERROR(summarize_rows(rows.first_kept, num_kept));
  }
  if (num_kept > 0 && asks.rewrites) {  // after the summaries (of the raw rows)
    CELLM_RETURN_IF_ERROR(rewrite_rows(rows.first_kept, num_kept));
  }
  if (num_kept > 0 && asks.candidates) {
    CELLM_RETURN_IF_ERROR(list_candidates(
        rows.first_kept, num_kept,
        targets.host_lists != nullptr ? targets.host_lists
                                      : host_candidate_rows_.as<kernels::RowCandidatesSummary>()));
  }
  if (num_kept > 0 && asks.keep) {
    const size_t vocab = static_cast<size_t>(config_.vocab_size);
    const float* home = forward_->logits();  // the last call's rows stay there until the next step
    if (begin + num_tokens < step.num_tokens) {
      float* aside = kept_logits_.as<float>() + static_cast<size_t>(rows.first_kept) * vocab;
      CELLM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
          aside, forward_->logits(), static_cast<size_t>(num_kept) * vocab * sizeof(float),
          cudaMemcpyDeviceToDevice, stream_.get()));
      home = aside;
    }
    for (int32_t k = 0; k < num_kept; ++k) {
      kept_rows_[static_cast<size_t>(rows.first_kept + k)] = home + static_cast<size_t>(k) * vocab;
    }
  }
  if (!rows.local_rows.empty() && copy_logits) {
    const size_t vocab = static_cast<size_t>(config_.vocab_size);
    float* dst = host_logits_.as<float>() + static_cast<size_t>(rows.first_kept) * vocab;
    CELLM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, forward_->logits(),
                                               rows.local_rows.size() * vocab * sizeof(float),
                                               cudaMemcpyDeviceToHost, stream_.get()));
  }
  return ok_status();
}

}  // namespace cellm
