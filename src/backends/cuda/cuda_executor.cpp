#include "backends/cuda/cuda_executor.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels/matmul.cuh"
#include "core/check.h"
#include "core/logging.h"

namespace cellm {

CudaExecutor::CudaExecutor(const ModelConfig& config, const ModelWeights& weights,
                           const ProgramSpec& spec, const CudaExecutorOptions& options)
    : config_(config), host_weights_(&weights), spec_(spec), options_(options) {}

CudaExecutor::CudaExecutor(const ModelConfig& config, std::shared_ptr<const CudaWeights> weights,
                           const ProgramSpec& spec, const CudaExecutorOptions& options)
    : config_(config), weights_(std::move(weights)), spec_(spec), options_(options) {}

CudaExecutor::~CudaExecutor() {
  // Work in flight reads the pool, the step buffers and the graphs: wait for it on the stream we
  // own (still alive here), then release in reverse order of creation.
  if (stream_.get() != nullptr) {
    const cudaError_t sync = cudaStreamSynchronize(stream_.get());
    if (sync != cudaSuccess) CELLM_LOG(kWarn) << "CudaExecutor: " << cudaGetErrorName(sync);
  }
  for (auto& [width, graph] : graphs_) cudaGraphExecDestroy(graph);
  graphs_.clear();
  forward_.reset();
  if (cublas_ != nullptr) cublasDestroy(cublas_);
}

Status CudaExecutor::validate() {
  CELLM_RETURN_IF_ERROR(spec_.validate(config_).with_context("program"));
  CELLM_RETURN_IF_ERROR(
      validate_slice_params(spec_.max_step_tokens, spec_.min_prefill_chunk, spec_.decode_widths)
          .with_context("program"));
  if (spec_.logits_to_keep_mode == LogitsToKeepMode::kLast) {
    return unimplemented(
        "program: logits_to_keep_mode 'last' cannot serve batches (cellm needs "
        "'selected' or 'full')");
  }
  if (options_.max_session_tokens == 0) options_.max_session_tokens = spec_.max_context_len;
  if (options_.max_session_tokens < 0 || options_.max_session_tokens > spec_.max_context_len) {
    return invalid_argument("max_session_tokens " + std::to_string(options_.max_session_tokens) +
                            " outside [1, " + std::to_string(spec_.max_context_len) +
                            "] (the program's cellm.max_context_len)");
  }
  if (spec_.kv_max_cells >= std::numeric_limits<int32_t>::max() - kFirstCellRow) {
    return invalid_argument("program: cellm.kv.max_cells " + std::to_string(spec_.kv_max_cells) +
                            " is too large");
  }
  return ok_status();
}

Status CudaExecutor::initialize() {
  if (initialized_) return failed_precondition("CudaExecutor::initialize called twice");
  CELLM_RETURN_IF_ERROR(validate());
  SessionTableConfig table_config;
  table_config.max_sessions = options_.max_sessions;
  table_config.max_session_tokens = options_.max_session_tokens;
  table_config.vocab_size = config_.vocab_size;
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
    CELLM_ASSIGN_OR_RETURN(std::unique_ptr<CudaWeights> uploaded,
                           CudaWeights::upload(config_, *host_weights_, weight_options));
    weights_ = std::move(uploaded);
    host_weights_ = nullptr;
  } else if (weights_->config().num_layers != config_.num_layers ||
             weights_->config().hidden_size != config_.hidden_size ||
             weights_->config().vocab_size != config_.vocab_size) {
    return invalid_argument("device weights of another geometry than the model config");
  }

  CELLM_ASSIGN_OR_RETURN(stream_, CudaStream::create());
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
  CELLM_ASSIGN_OR_RETURN(forward_,
                         CudaForward::create(config_, *weights_, *pool_, forward_config, cublas_));

  cache_ = std::make_unique<CellCache>(spec_.kv_max_cells);
  table_ = std::make_unique<SessionTable>(*cache_, table_config);
  if (options_.use_graphs) CELLM_RETURN_IF_ERROR(capture_graphs());
  replay_graphs_ = options_.use_graphs;
  CELLM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
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
  for (const int32_t width : spec_.decode_widths) {
    // Launch shapes of a static-width forward depend on the width only; the sizes below are
    // the worst case a replay may meet (kernels read the real ones from the device).
    DeviceStep shape = steps_->step();
    shape.num_tokens = width;
    shape.width = width;
    shape.num_seqs = width;
    shape.max_seq_len = options_.max_session_tokens;
    shape.num_kept = width;
    shape.total_rows = width * options_.max_session_tokens + 1;
    cudaGraph_t graph = nullptr;
    CELLM_CUDA_RETURN_IF_ERROR(
        cudaStreamBeginCapture(stream_.get(), cudaStreamCaptureModeThreadLocal));
    const Status enqueued = forward_->enqueue(shape, ForwardShape::kStatic, stream_.get());
    const cudaError_t ended = cudaStreamEndCapture(stream_.get(), &graph);
    if (!enqueued.ok()) {
      if (graph != nullptr) cudaGraphDestroy(graph);
      return enqueued.with_context("capturing the decode graph of width " + std::to_string(width));
    }
    CELLM_CUDA_RETURN_IF_ERROR(ended);
    cudaGraphExec_t exec = nullptr;
    const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    CELLM_CUDA_RETURN_IF_ERROR(instantiated);
    graphs_[width] = exec;
  }
  return ok_status();
}

ExecutorLimits CudaExecutor::limits() const {
  ExecutorLimits limits;
  limits.max_step_tokens = spec_.max_step_tokens;
  limits.min_prefill_chunk = spec_.min_prefill_chunk;
  limits.max_sessions = options_.max_sessions;
  limits.max_session_tokens =
      options_.max_session_tokens > 0 ? options_.max_session_tokens : spec_.max_context_len;
  limits.vocab_size = config_.vocab_size;
  return limits;
}

CacheUsage CudaExecutor::cache_usage() const {
  CELLM_CHECK(initialized_) << "CudaExecutor used before initialize()";
  return {cache_->max_cells(), cache_->num_free(), cache_->high_water()};
}

KvPoolMetrics CudaExecutor::kv_metrics() const {
  CELLM_CHECK(initialized_) << "CudaExecutor used before initialize()";
  return pool_->metrics();
}

std::optional<SessionId> CudaExecutor::open_session() {
  CELLM_CHECK(initialized_) << "CudaExecutor used before initialize()";
  return table_->open();
}

Status CudaExecutor::close_session(SessionId id) {
  CELLM_CHECK(initialized_) << "CudaExecutor used before initialize()";
  return table_->close(id);
}

StatusOr<SessionId> CudaExecutor::clone_session(SessionId src, int32_t upto) {
  CELLM_CHECK(initialized_) << "CudaExecutor used before initialize()";
  return table_->clone(src, upto);
}

StatusOr<int32_t> CudaExecutor::session_length(SessionId id) const {
  CELLM_CHECK(initialized_) << "CudaExecutor used before initialize()";
  return table_->length(id);
}

Status CudaExecutor::rewind_session(SessionId id, int32_t pos) {
  CELLM_CHECK(initialized_) << "CudaExecutor used before initialize()";
  return table_->rewind(id, pos);
}

Status CudaExecutor::set_use_graphs(bool use_graphs) {
  if (!initialized_) return failed_precondition("CudaExecutor::set_use_graphs before initialize()");
  if (use_graphs && !options_.use_graphs) {
    return failed_precondition("decode graphs were not captured (options.use_graphs is off)");
  }
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
  CELLM_ASSIGN_OR_RETURN(PackedStep step, table_->pack(batch));
  BatchOutput output = step.make_output();
  const size_t vocab = static_cast<size_t>(config_.vocab_size);
  const bool copy_logits = return_logits || copy_logits_ || !options_.device_argmax;
  const size_t logits_bytes = copy_logits ? output.outputs.size() * vocab * sizeof(float) : 0;
  const size_t tokens_bytes = options_.device_argmax ? output.outputs.size() * sizeof(int32_t) : 0;
  last_logits_ = {};
  // No copy is in flight between steps (the previous execute() synchronized): grow freely.
  for (auto [buffer, bytes] :
       {std::pair{&host_logits_, logits_bytes}, std::pair{&host_tokens_, tokens_bytes}}) {
    if (buffer->num_bytes() >= bytes) continue;
    buffer->reset();
    StatusOr<PinnedBuffer> grown = PinnedBuffer::allocate(bytes);
    if (!grown.ok()) {
      table_->rollback(step);
      return grown.status().with_context("pinned step outputs");
    }
    *buffer = std::move(grown).value();
  }
  const std::vector<SliceCall> calls = plan_slices(step.num_tokens, spec_.max_step_tokens,
                                                   spec_.min_prefill_chunk, spec_.decode_widths);
  Status status = ok_status();
  for (const SliceCall& call : calls) {
    status = run_call(step, call, copy_logits);
    if (!status.ok()) {
      status = status.with_context(std::string(slice_method_name(call.method)) + " call at token " +
                                   std::to_string(call.begin));
      break;
    }
  }
  // Errors of work already enqueued show up here; either way nothing may still run on the step
  // when it is rolled back.
  const Status synced = cuda_status(cudaStreamSynchronize(stream_.get()), "CudaExecutor step");
  if (status.ok()) status = synced;
  if (!status.ok()) {
    if (cache_->has_declared_step()) cache_->cancel_step();
    table_->rollback(step);
    return status;
  }
  if (copy_logits) {
    last_logits_ = std::span<const float>(host_logits_.as<float>(), output.outputs.size() * vocab);
  }
  if (options_.device_argmax) {
    for (size_t i = 0; i < output.outputs.size(); ++i) {
      output.outputs[i].token = host_tokens_.as<int32_t>()[i];
    }
  }
  if (return_logits) {
    output.vocab_size = config_.vocab_size;
    output.logits.assign(last_logits_.begin(), last_logits_.end());
  }
  table_->commit();  // the step succeeded: cells its rewinds dropped are free now
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
  return output;
}

Status CudaExecutor::run_call(const PackedStep& step, const SliceCall& call, bool copy_logits) {
  const int32_t begin = call.begin;
  const int32_t num_tokens = call.num_tokens;
  const auto seqs = std::span<const SeqId>(step.seq_ids).subspan(begin, num_tokens);
  const auto positions = std::span<const int32_t>(step.positions).subspan(begin, num_tokens);
  CELLM_ASSIGN_OR_RETURN(const bool admitted, cache_->declare_step(seqs, positions));
  if (!admitted) {
    return internal_error("the cell pool refused " + std::to_string(num_tokens) +
                          " tokens that SessionTable::pack admitted");
  }
  cache_->place(&cell_step_);
  CELLM_RETURN_IF_ERROR(pool_->reserve_rows(cache_->high_water() + kFirstCellRow));
  const RowSelection rows = step.select_rows(begin, begin + num_tokens);
  const bool decode = call.method == SliceMethod::kDecode;
  const int32_t width = decode ? call.width : num_tokens;
  CELLM_ASSIGN_OR_RETURN(
      const DeviceStep device_step,
      steps_->upload(cell_step_, std::span<const int32_t>(step.tokens).subspan(begin, num_tokens),
                     rows.local_rows, width, stream_.get()));
  if (decode && replay_graphs_) {
    const auto graph = graphs_.find(width);
    CELLM_CHECK(graph != graphs_.end()) << "no decode graph of width " << width;
    CELLM_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graph->second, stream_.get()));
  } else {
    CELLM_RETURN_IF_ERROR(forward_->enqueue(
        device_step, decode ? ForwardShape::kStatic : ForwardShape::kDynamic, stream_.get()));
  }
  if (!rows.local_rows.empty() && options_.device_argmax) {
    CELLM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        host_tokens_.as<int32_t>() + rows.first_kept, forward_->argmax_tokens(),
        rows.local_rows.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_.get()));
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
