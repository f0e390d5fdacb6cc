// ProgramSpec: the `cellm.*` metadata of a program (DESIGN §3) — its methods and its cache.
//
// A program is one GGUF v3 file: weights, tokenizer, and these keys. `from_gguf` reads them from
// an exported program (every key required, each missing or inconsistent key an error naming it)
// or, for a plain GGUF model with no `cellm.*` keys, fills documented defaults from the model
// (`defaults_for`). `validate` checks the load-time rules: W ≥ m ≥ 1, max_cells ≥ W,
// W < max_context_len, decode widths ascending from 1 and ≤ W, per-layer cache geometry and vocab
// equal to the model's. `to_metadata` gives the keys to write (the exporter's side).
// Executors read their limits only from here. The recommended slicing plan (what `cellm export`
// writes by default) is here too, so the exporter needs no backend. Thread-safety: plain data.
#pragma once

#include <array>
#include <cstdint>
#include <span>
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

// The slicing plan cellm recommends, chosen for the CUDA executor (`cellm export`'s defaults and
// `cellm bench`'s random programs). Decode calls replay a CUDA graph captured once per static
// width, a narrower slice padded to the next width through a scratch cell; prefill calls run
// eagerly at any width in [m, W]. Both run the same kernels for the same rows (the matrix
// kernels pick the small-M path or tensor cores by row count, whatever the method), so a graph
// only saves launch overhead; padding rows cost little while a step is memory-bound, but from
// a few dozen rows on the products and the attention grow with them. Hence graphs for every power
// of two up to 256 and, from 16 on, the widths halfway between (24, 48, 96, 192): on an H200
// (Llama-3.1-8B geometry, 512-token contexts) 40 / 96 / 160 / 192 sessions decoded 7.7 / 5.2 /
// 1.5 / 1.8% faster (q4_0), 1.2 / 4.0 / 5.7 / 6.3% (bf16) than padded to the next power of two,
// and 13 graphs capture in about the time of 9. m is one past the widest: every step of up to
// 256 tokens (256 concurrent decodes, or decodes plus a short prompt chunk) is one graph replay,
// and only wider steps run eagerly. Widths only matter below m. The CPU executor runs the same
// plan exactly (it skips padding rows).
inline constexpr std::array<int32_t, 13> kRecommendedDecodeWidths = {1,  2,  4,  8,   16,  24, 32,
                                                                     48, 64, 96, 128, 192, 256};

// kRecommendedDecodeWidths below `max_step_tokens` (W), so that the automatic m fits under W.
std::vector<int32_t> recommended_decode_widths(int32_t max_step_tokens);

// The automatic m for `decode_widths` (ascending): one past the widest, but at least
// ProgramSpec::kDefaultMinPrefillChunk (so widths {1} keep the seed's m = 5), and at most
// `max_step_tokens` (W). With W 512 and the recommended widths: 257.
int32_t auto_min_prefill_chunk(std::span<const int32_t> decode_widths, int32_t max_step_tokens);

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
