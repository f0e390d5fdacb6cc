// ProgramSpec: the `cellm.*` metadata of a program (DESIGN §3) — its methods and its cache.
//
// A program is one GGUF v3 file: weights, tokenizer, and these keys. `from_gguf` reads them from
// an exported program (every key required, each missing or inconsistent key an error naming it)
// or, for a plain GGUF model with no `cellm.*` keys, fills documented defaults from the model
// (`defaults_for`). `validate` checks the load-time rules: W ≥ m ≥ 1, max_cells ≥ W,
// W < max_context_len, decode widths ascending from 1 and ≤ W, per-layer cache geometry and vocab
// equal to the model's. `to_metadata` gives the keys to write (the exporter's side).
// Executors read their limits only from here. Thread-safety: plain data.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "gguf/gguf_file.h"
#include "model/model_config.h"

namespace cellm {

enum class LogitsToKeepMode { kSelected, kFull, kLast };
enum class KvDtype { kF32, kF16, kBF16 };

std::string_view logits_to_keep_mode_name(LogitsToKeepMode mode);
std::string_view kv_dtype_name(KvDtype dtype);
StatusOr<KvDtype> parse_kv_dtype(std::string_view name);

struct ProgramSpec {
  static constexpr uint32_t kFormatVersion = 1;
  static constexpr int32_t kDefaultMaxStepTokens = 512;
  static constexpr int32_t kDefaultMinPrefillChunk = 5;
  static constexpr int32_t kDefaultMaxCells = 65536;

  uint32_t format_version = kFormatVersion;
  int32_t max_context_len = 0;                          // positions one session may hold
  int32_t max_step_tokens = kDefaultMaxStepTokens;      // W: widest forward
  int32_t min_prefill_chunk = kDefaultMinPrefillChunk;  // m: narrowest prefill
  std::vector<int32_t> decode_widths = {1};             // static decode widths, ascending from 1
  LogitsToKeepMode logits_to_keep_mode = LogitsToKeepMode::kSelected;
  std::string kv_layout = "cell";
  int32_t kv_max_cells = kDefaultMaxCells;  // rows of the shared cell pool
  KvDtype kv_dtype = KvDtype::kF32;
  std::vector<int32_t> kv_heads;      // [num_layers]
  std::vector<int32_t> kv_head_dims;  // [num_layers]
  std::vector<int32_t> kv_windows;    // [num_layers]; 0 = full attention
  int32_t vocab_size = 0;
  std::string source;  // "gguf", "checkpoint", "prequantized" plus the recipe

  // Defaults for a plain GGUF model: W 512, m 5, widths {1}, 65536 cells, f32 cells, context =
  // the model's trained context (at least W + 1).
  static ProgramSpec defaults_for(const ModelConfig& config);

  // Reads the `cellm.*` keys; a file with none of them gets `defaults_for` and
  // `*used_defaults` = true. A file with some but not all is an error naming the first missing.
  static StatusOr<ProgramSpec> from_gguf(const GgufFile& file, const ModelConfig& config,
                                         bool* used_defaults);

  Status validate(const ModelConfig& config) const;

  // The keys and values to write into an exported program, in DESIGN §3's order.
  std::vector<std::pair<std::string, GgufValue>> to_metadata() const;

  // One line per key for `cellm inspect` and logs.
  std::string summary() const;
};

}  // namespace cellm
