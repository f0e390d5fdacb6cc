// Mutants of a GGUF model or program for program_mutation_test: a file held as editable metadata
// and tensor lists (bytes borrowed from the source), and the edits the test applies — metadata
// values replaced by boundary values of every GGUF type, keys removed or duplicated, tensors
// dropped, re-shaped, re-typed, renamed or added, rope factors overwritten.
//
// It knows which keys and tensors the loaders read (to aim at them) but nothing of their rules:
// whether a mutant should load is program_test_support.h's business. Deterministic for a given
// random engine. Thread-safety: plain data and pure functions.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "gguf/gguf_file.h"

namespace cellm::program_testing {

struct EditableTensor {
  std::string name;
  TensorType type = TensorType::kF32;
  std::vector<uint64_t> dims;                         // innermost first
  std::span<const uint8_t> bytes;                     // the source's, or `owned`'s
  std::shared_ptr<const std::vector<uint8_t>> owned;  // set when the bytes were made here
};

struct EditableFile {
  std::vector<std::pair<std::string, GgufValue>> metadata;  // file order
  std::vector<EditableTensor> tensors;                      // file order
};

// A copy of `file` whose tensor bytes point into `file`'s (keep it alive).
EditableFile editable_copy(const GgufFile& file);

// `file` with its vocabulary cut to its first `num_tokens` tokens (the `tokenizer.ggml.*` arrays
// but merges, `<arch>.vocab_size`, the embedding's and the LM head's rows): a small model that
// still loads, cheap to mutate and to fuzz. Unchanged where the vocabulary is smaller.
EditableFile cut_vocabulary(const GgufFile& file, size_t num_tokens);

// The bytes GgufWriter writes for `file`: an error when the writer refuses a key or tensor.
// `duplicate_key`, when not empty, is added a second time with `duplicate_value` (the writer
// refuses duplicates, so it is written under a stand-in name of the same length, patched after).
StatusOr<std::vector<uint8_t>> write_editable(const EditableFile& file,
                                              const std::string& duplicate_key = "",
                                              const GgufValue& duplicate_value = {});

// A key the loaders read, and the values worth trying for it: boundary values of its own type
// first (`num_own`), then every other type's.
struct KeyTarget {
  std::string key;
  bool present = false;
};
// general.architecture, every `<arch>.` and `cellm.` key of `file`, and the `<arch>.` keys the
// config reads that `file` lacks.
std::vector<KeyTarget> key_targets(const GgufFile& file);
struct Palette {
  std::vector<GgufValue> values;
  size_t num_own = 0;
};
Palette value_palette(const std::string& key, const GgufValue* original);

// One tensor edit: a short description and the edited file; empty edits (not applicable to the
// tensor) are skipped by the caller.
struct Edit {
  std::string what;
  EditableFile file;
};
// Every edit of tensor `index`: dropped, a row short or long, a column short, transposed, an extra
// dim, flattened, widened to a matrix, emptied, renamed, and re-typed to `num_types` types
// picked by `rng`.
std::vector<Edit> tensor_edits(const EditableFile& file, size_t index, int num_types,
                               std::mt19937_64& rng);
// Tensors the config treats as optional parts added (biases, q/k norms, rope factors of good and
// bad size and values, an untied LM head, an unknown tensor, a layer past the last), for a model
// whose hidden size, q width (heads x head size), head size and layer count are given.
std::vector<Edit> tensor_additions(const EditableFile& file, int64_t hidden, int64_t q_width,
                                   int64_t head_dim, int64_t num_layers);
// rope_freqs.weight's values overwritten with 0, -1, NaN, infinity and a denormal, one at a time.
std::vector<Edit> rope_factor_edits(const EditableFile& file);

}  // namespace cellm::program_testing
