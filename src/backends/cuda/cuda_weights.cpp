#include "backends/cuda/cuda_weights.h"

#include <cmath>
#include <cstring>
#include <numbers>
#include <random>
#include <span>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_weights_tensor.h"
#include "backends/cuda/kernels/dequantize.cuh"
#include "backends/cuda/kernels/random_fill.cuh"
#include "gguf/dequantize.h"
#include "model/rope_pairs.h"

namespace cellm {
namespace {

constexpr size_t kStagingBytes = size_t{64} << 20;

// Two pinned blocks used alternately for host-to-device copies.
class Stager {
 public:
  static StatusOr<Stager> create() {
    Stager stager;
    for (int i = 0; i < 2; ++i) {
      CELLM_ASSIGN_OR_RETURN(stager.blocks_[i], PinnedBuffer::allocate(kStagingBytes));
      CELLM_ASSIGN_OR_RETURN(stager.events_[i], CudaEvent::create());
    }
    CELLM_ASSIGN_OR_RETURN(stager.stream_, CudaStream::create());
    return stager;
  }
  // A block of kStagingBytes free for writing.
  StatusOr<uint8_t*> next() {
    current_ = 1 - current_;
    if (used_[current_]) CELLM_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(events_[current_].get()));
    used_[current_] = false;
    return blocks_[current_].as<uint8_t>();
  }
  // Copies the first `n` bytes of the current block to `device`.
  Status send(void* device, size_t n) {
    CELLM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(device, blocks_[current_].data(), n,
                                               cudaMemcpyHostToDevice, stream_.get()));
    CELLM_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[current_].get(), stream_.get()));
    used_[current_] = true;
    return ok_status();
  }
  Status finish() { return cuda_status(cudaStreamSynchronize(stream_.get()), "weight upload"); }
  cudaStream_t stream() const { return stream_.get(); }

 private:
  PinnedBuffer blocks_[2];
  CudaEvent events_[2];
  bool used_[2] = {false, false};
  int current_ = 1;
  CudaStream stream_;
};

uint64_t gguf_row_bytes(TensorType type, int64_t cols) {
  const TensorTypeTraits& traits = tensor_type_traits(type);
  return static_cast<uint64_t>(cols) / traits.block_size * traits.block_bytes;
}

// llama3-style rope divisors for n pairs (theta 500000, factor 8, low/high 1/4, original 8192).
std::vector<float> llama3_factors(int32_t num_rotary_dims, float freq_base) {
  std::vector<float> factors(static_cast<size_t>(num_rotary_dims / 2));
  const double factor = 8.0, low = 1.0, high = 4.0, original = 8192.0;
  for (size_t i = 0; i < factors.size(); ++i) {
    const double freq =
        std::pow(static_cast<double>(freq_base), -2.0 * static_cast<double>(i) / num_rotary_dims);
    const double wavelength = 2.0 * std::numbers::pi / freq;
    double f = 1.0;
    if (wavelength > original / low) {
      f = factor;
    } else if (wavelength >= original / high) {
      const double s = (original / wavelength - low) / (high - low);
      f = 1.0 / ((1.0 - s) / factor + s);
    }
    factors[i] = static_cast<float>(f);
  }
  return factors;
}

bool pairs_adjacent(const CudaWeights::Tensor& t, size_t source) {
  return source < t.pairs_adjacent.size() && t.pairs_adjacent[source];
}

// Uploads one matrix tensor: each source's rows, converted to the device layout, in chunks.
Status upload_matrix(const CudaWeights::Tensor& t, uint8_t* device, Stager& stager) {
  const uint64_t dev_row = kernels::device_row_bytes(t.type, t.num_cols);
  const uint64_t src_row = gguf_row_bytes(t.type, t.num_cols);
  const int64_t rows_per_chunk =
      std::max<int64_t>(1, static_cast<int64_t>(kStagingBytes / std::max(dev_row, src_row)) / 2);
  uint64_t at = 0;
  std::vector<uint8_t> gathered;  // [rows_per_chunk, src_row]: reordered rows of a chunk
  for (size_t s = 0; s < t.sources.size(); ++s) {
    const WeightView* view = t.sources[s];
    if (view->type != t.type || view->num_cols != t.num_cols) {
      return internal_error("fused weight " + t.name + ": part " + view->name + " differs");
    }
    for (int64_t r = 0; r < view->num_rows; r += rows_per_chunk) {
      const int64_t n = std::min(rows_per_chunk, view->num_rows - r);
      CELLM_ASSIGN_OR_RETURN(uint8_t * block, stager.next());
      std::span<const uint8_t> src =
          view->bytes.subspan(static_cast<size_t>(r) * src_row, static_cast<size_t>(n) * src_row);
      if (pairs_adjacent(t, s)) {
        gathered.resize(static_cast<size_t>(n) * src_row);
        for (int64_t j = 0; j < n; ++j) {
          const int64_t from = neox_source_row(r + j, t.head_dim, t.num_rotary_dims);
          std::memcpy(gathered.data() + static_cast<size_t>(j) * src_row,
                      view->bytes.data() + static_cast<size_t>(from) * src_row, src_row);
        }
        src = gathered;
      }
      CELLM_RETURN_IF_ERROR(kernels::repack_rows_for_device(
                                t.type, t.num_cols, n, src,
                                std::span<uint8_t>(block, static_cast<size_t>(n) * dev_row))
                                .with_context(view->name));
      CELLM_RETURN_IF_ERROR(stager.send(device + at, static_cast<size_t>(n) * dev_row));
      at += static_cast<uint64_t>(n) * dev_row;
    }
  }
  return ok_status();
}

}  // namespace

void CudaWeights::bind(const std::vector<Tensor>& tensors) {
  uint8_t* base = buffer_.as<uint8_t>();
  uint8_t* copies_base = copies_.as<uint8_t>();
  for (const Tensor& t : tensors) {
    if (t.is_matrix) {
      *t.matrix_slot = kernels::make_device_weight(base + t.offset, t.type, t.num_rows, t.num_cols);
      if (t.has_bf16_copy) {
        bf16_copies_[base + t.offset] =
            reinterpret_cast<const uint16_t*>(copies_base + t.bf16_offset);
      }
    } else {
      *t.vector_slot = reinterpret_cast<const float*>(base + t.offset);
    }
  }
  if (config_.tied_embeddings) output_ = token_embd_;
  // Row ranges of the fused matrices.
  const auto rows_of = [](const kernels::DeviceWeight& m, int64_t first, int64_t count) {
    kernels::DeviceWeight part = m;
    part.data = static_cast<const uint8_t*>(m.data) + static_cast<uint64_t>(first) * m.row_bytes;
    part.num_rows = count;
    return part;
  };
  const ModelConfig& c = config_;
  for (CudaLayerWeights& l : layers_) {
    if (l.qkv_fused()) {
      l.wq = rows_of(l.qkv, 0, c.q_width());
      l.wk = rows_of(l.qkv, c.q_width(), c.kv_width());
      l.wv = rows_of(l.qkv, c.q_width() + c.kv_width(), c.v_width());
    }
    if (l.gate_up_fused()) {
      l.w_gate = rows_of(l.gate_up, 0, c.ffn_size);
      l.w_up = rows_of(l.gate_up, c.ffn_size, c.ffn_size);
    }
  }
}

StatusOr<std::unique_ptr<CudaWeights>> CudaWeights::upload(const ModelConfig& config,
                                                           const ModelWeights& weights,
                                                           const CudaWeightsOptions& options) {
  if (static_cast<int32_t>(weights.layers.size()) != config.num_layers) {
    return invalid_argument("cuda weights: " + std::to_string(weights.layers.size()) +
                            " layers of weights for a model of " +
                            std::to_string(config.num_layers));
  }
  CELLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
  std::unique_ptr<CudaWeights> out(new CudaWeights(config));
  std::vector<Tensor> tensors;
  CELLM_RETURN_IF_ERROR(out->plan(&weights, RandomWeightsSpec{}, options, &tensors));
  CELLM_ASSIGN_OR_RETURN(Stager stager, Stager::create());
  uint8_t* base = out->buffer_.as<uint8_t>();
  for (const Tensor& t : tensors) {
    if (t.is_matrix) {
      CELLM_RETURN_IF_ERROR(upload_matrix(t, base + t.offset, stager));
      continue;
    }
    CELLM_ASSIGN_OR_RETURN(uint8_t * block, stager.next());
    float* values = reinterpret_cast<float*>(block);
    int64_t at = 0;
    for (size_t i = 0; i < t.part_sizes.size(); ++i) {
      const WeightView* view = i < t.sources.size() ? t.sources[i] : nullptr;
      const std::span<float> part(values + at, static_cast<size_t>(t.part_sizes[i]));
      if (view == nullptr) {
        std::fill(part.begin(), part.end(), 0.0f);
      } else {
        if (view->num_cols * view->num_rows != t.part_sizes[i]) {
          return internal_error("cuda weights: " + view->name + " has " +
                                std::to_string(view->num_cols * view->num_rows) +
                                " elements, expected " + std::to_string(t.part_sizes[i]));
        }
        CELLM_RETURN_IF_ERROR(
            dequantize_row(view->type, view->bytes, part).with_context(view->name));
        if (pairs_adjacent(t, i)) {
          const std::vector<float> original(part.begin(), part.end());
          for (size_t e = 0; e < part.size(); ++e) {
            part[e] = original[static_cast<size_t>(
                neox_source_row(static_cast<int64_t>(e), t.head_dim, t.num_rotary_dims))];
          }
        }
      }
      at += t.part_sizes[i];
    }
    CELLM_RETURN_IF_ERROR(stager.send(base + t.offset, static_cast<size_t>(t.num_bytes)));
  }
  CELLM_RETURN_IF_ERROR(out->fill_bf16_copies(tensors, stager.stream()));
  CELLM_RETURN_IF_ERROR(stager.finish());
  return out;
}

StatusOr<std::unique_ptr<CudaWeights>> CudaWeights::random(const ModelConfig& config,
                                                           const RandomWeightsSpec& spec,
                                                           const CudaWeightsOptions& options) {
  CELLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
  std::unique_ptr<CudaWeights> out(new CudaWeights(config));
  std::vector<Tensor> tensors;
  CELLM_RETURN_IF_ERROR(out->plan(nullptr, spec, options, &tensors));
  CELLM_ASSIGN_OR_RETURN(Stager stager, Stager::create());
  std::mt19937_64 rng(spec.seed);
  std::uniform_real_distribution<float> jitter(-1.0f, 1.0f);
  uint64_t seed = spec.seed * 1000003u;
  for (const Tensor& t : tensors) {
    if (t.is_matrix) {
      // Uniform in ±sqrt(3 / cols): a standard deviation of 1 / sqrt(cols), so activations
      // keep their scale through the layers.
      kernels::RandomFillParams fill;
      fill.data = const_cast<void*>(t.matrix_slot->data);
      fill.type = t.type;
      fill.num_rows = t.num_rows;
      fill.num_cols = t.num_cols;
      fill.seed = ++seed;
      fill.scale = std::sqrt(3.0f / static_cast<float>(t.num_cols));
      CELLM_RETURN_IF_ERROR(
          kernels::launch_random_fill(fill, stager.stream()).with_context(t.name));
      continue;
    }
    CELLM_ASSIGN_OR_RETURN(uint8_t * block, stager.next());
    float* values = reinterpret_cast<float*>(block);
    std::vector<float> factors;
    if (t.fill == Tensor::Fill::kRopeFactors) {
      factors = llama3_factors(config.rope.num_rotary_dims, config.rope.freq_base);
    }
    for (int64_t i = 0; i < t.num_cols; ++i) {
      switch (t.fill) {
        case Tensor::Fill::kOnes:
          values[i] = 1.0f + 0.1f * jitter(rng);
          break;
        case Tensor::Fill::kSmall:
          values[i] = 0.02f * jitter(rng);
          break;
        case Tensor::Fill::kRopeFactors:
          values[i] = factors[static_cast<size_t>(i)];
          break;
        case Tensor::Fill::kMatrix:
          break;
      }
    }
    CELLM_RETURN_IF_ERROR(
        stager.send(out->buffer_.as<uint8_t>() + t.offset, static_cast<size_t>(t.num_bytes)));
  }
  CELLM_RETURN_IF_ERROR(out->fill_bf16_copies(tensors, stager.stream()));
  CELLM_RETURN_IF_ERROR(stager.finish());
  return out;
}

Status CudaWeights::fill_bf16_copies(const std::vector<Tensor>& tensors, cudaStream_t stream) {
  for (const Tensor& t : tensors) {
    if (!t.has_bf16_copy) continue;
    kernels::DequantizeParams p;
    p.w = *t.matrix_slot;
    p.row_begin = 0;
    p.num_rows = t.num_rows;
    p.out = const_cast<uint16_t*>(bf16_copies_.at(t.matrix_slot->data));
    CELLM_RETURN_IF_ERROR(kernels::launch_dequantize_bf16(p, stream).with_context(t.name));
  }
  return ok_status();
}

const uint16_t* CudaWeights::bf16_copy(const kernels::DeviceWeight& w) const {
  const auto it = bf16_copies_.find(w.data);
  return it == bf16_copies_.end() ? nullptr : it->second;
}

uint64_t CudaWeights::matrix_bytes_per_step() const {
  const auto bytes = [](const kernels::DeviceWeight& m) {
    return m.data == nullptr ? 0 : m.row_bytes * static_cast<uint64_t>(m.num_rows);
  };
  uint64_t total = bytes(output_);
  for (const CudaLayerWeights& l : layers_) {
    total += l.qkv_fused() ? bytes(l.qkv) : bytes(l.wq) + bytes(l.wk) + bytes(l.wv);
    total += bytes(l.wo) + bytes(l.w_down);
    total += l.gate_up_fused() ? bytes(l.gate_up) : bytes(l.w_gate) + bytes(l.w_up);
  }
  return total;
}

uint64_t CudaWeights::matrix_macs_per_token() const {
  const auto macs = [](const kernels::DeviceWeight& m) {
    return static_cast<uint64_t>(m.num_rows) * static_cast<uint64_t>(m.num_cols);
  };
  uint64_t total = macs(output_);
  for (const CudaLayerWeights& l : layers_) {
    total += macs(l.wq) + macs(l.wk) + macs(l.wv) + macs(l.wo) + macs(l.w_gate) + macs(l.w_up) +
             macs(l.w_down);
  }
  return total;
}

}  // namespace cellm
