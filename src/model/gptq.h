// GPTQ 4-bit linear layers of a Hugging Face checkpoint, repacked (never re-quantized) into tensor
// types cellm runs.
//
// The layout read, per linear `<prefix>` (AutoGPTQ / GPTQModel / transformers, 4 bits):
//   `<prefix>.qweight` I32 [in / 8, out]: input i of output j is nibble i % 8 (bits 4·(i % 8))
//                      of qweight[i / 8][j];
//   `<prefix>.qzeros`  I32 [groups, out / 8]: the zero of group g, output j is nibble j % 8 of
//                      qzeros[g][j / 8];
//   `<prefix>.scales`  F16 [groups, out];
//   `<prefix>.g_idx`   I32 [in], optional: must be i / group_size (no act-order);
//   w[j][i] = scale[g][j] · (q[i][j] − zero[g][j]), g = i / group_size.
// Zeros: checkpoint_format "gptq" (v1, the default, what AutoGPTQ writes) stores zero − 1, so
// cellm adds 1 (a symmetric v1 checkpoint stores 7 and means 8); "gptq_v2" stores the zero
// itself. Settings come from quantize_config.json, else config.json's `quantization_config`:
// bits 4 only, group_size 32/64/128, desc_act false only (act-order is Unimplemented), sym.
// Repacking: a group-32 layer whose every zero is 8 becomes Q4_0 exactly (d = scale, q − 8);
// anything else becomes cellm's q4_g32/q4_g64/q4_g128 (block_formats.h BlockQ4G), one GGUF row
// per output channel. Errors name the file and the tensor. Thread-safety: immutable after bind.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"
#include "gguf/tensor_type.h"
#include "model/safetensors_set.h"

namespace cellm {

struct GptqConfig {
  int32_t bits = 4;
  int32_t group_size = 128;
  bool sym = true;
  bool zeros_stored_minus_one = true;  // v1 ("gptq"); false for "gptq_v2"

  // quantize_config.json, else config.json's quantization_config; NotFound when neither has one.
  static StatusOr<GptqConfig> from_dir(const std::string& dir);
};

class GptqLinear {
 public:
  // Finds and checks `<prefix>.qweight/.qzeros/.scales[/.g_idx]` for a layer of `num_outputs` x
  // `num_inputs` (HF [out, in]); picks the output type.
  static StatusOr<GptqLinear> bind(const SafetensorsSet& weights, const std::string& prefix,
                                   const GptqConfig& config, int64_t num_outputs,
                                   int64_t num_inputs);

  const std::string& prefix() const { return prefix_; }
  TensorType type() const { return type_; }  // kQ4_0 or kQ4_G32/64/128
  int64_t num_inputs() const { return num_inputs_; }
  int64_t num_outputs() const { return num_outputs_; }

  int32_t quant(int64_t input, int64_t output) const;        // 0..15
  int32_t zero(int64_t group, int64_t output) const;         // the real zero (v1: stored + 1)
  uint16_t scale_bits(int64_t group, int64_t output) const;  // f16

  // Output channel `channel` as one row of type() (num_inputs elements): out is the row's bytes.
  void repack_row(int64_t channel, std::span<uint8_t> out) const;
  // Output channel `channel` dequantized to f32: out [num_inputs].
  void dequantize_row(int64_t channel, std::span<float> out) const;

 private:
  GptqLinear() = default;

  std::string prefix_;
  GptqConfig config_;
  TensorType type_ = TensorType::kQ4_0;
  int64_t num_inputs_ = 0;
  int64_t num_outputs_ = 0;
  const SafetensorsTensor* qweight_ = nullptr;  // I32 [in / 8, out]
  const SafetensorsTensor* qzeros_ = nullptr;   // I32 [groups, out / 8]
  const SafetensorsTensor* scales_ = nullptr;   // F16 [groups, out]
};

}  // namespace cellm
