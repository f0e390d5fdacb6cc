// Test support for the program loaders (not part of cellm_program): an independent check of
// what a loaded ModelConfig, ModelWeights, ProgramSpec and Program promise, and of what a refusal
// must look like.
//
// Used by program_mutation_test and the libFuzzer target fuzz/model_load_fuzz.cpp. Every check
// recomputes its expectation from the GGUF file's raw metadata values and tensor table (the GGUF
// conventions and DESIGN §3's defaults) rather than trusting the loaders' getters. It knows the
// keys and tensor names the loaders read, nothing of tokenizers' rules or of backends.
// Thread-safety: pure functions.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <unordered_set>

#include "core/status.h"
#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "program/program.h"
#include "program/program_spec.h"

namespace cellm::program_testing {

// The `<arch>.` key suffixes ModelConfig reads ("block_count", "rope.freq_base", ...).
std::span<const std::string_view> config_key_suffixes();

// Every name a refusal may cite: the file's keys and tensors, every key the loaders read for any
// supported architecture (and for the file's own `general.architecture`), and the tensor names
// of the weight table ("blk.<i>.attn_q.weight" for any i).
struct KnownNames {
  std::unordered_set<std::string> keys;
  std::unordered_set<std::string> tensors;
};
KnownNames known_names(const GgufFile& file);

// Empty when `status` is a clean refusal of the file shown as `where` (its path, "GGUF bytes",
// or "gguf" for the container's own refusals): an error whose message is one printable line of
// at most 600 bytes, starts with "<where>: " once and, unless `names` is null, cites a key or
// tensor of `names` as a whole word. Otherwise what is wrong with it.
std::string check_refusal(const Status& status, std::string_view where, const KnownNames* names);

// Each is empty when every promise of an accepted value holds, recomputed from `file`; otherwise
// the first broken one. check_config: the hyperparameters are the keys' values or the
// documented defaults, positive, consistent (kv heads divide heads, widths fit int32, rotary
// dims even and within the head, rope and norm constants finite and positive, windows >= 0).
// check_weights: every view is the file's tensor of the config's shape and a computable type.
// check_spec: the `cellm.*` values (or the defaults for a plain model) and DESIGN §3's rules.
std::string check_config(const GgufFile& file, const ModelConfig& config);
std::string check_weights(const GgufFile& file, const ModelConfig& config,
                          const ModelWeights& weights);
std::string check_spec(const GgufFile& file, const ModelConfig& config, const ProgramSpec& spec,
                       bool used_defaults);
// All of the above for a loaded program, and its tokenizer's size equals the LM head's rows.
std::string check_program(const Program& program);

// Loads `file` stage by stage (ModelConfig, ModelWeights, ProgramSpec and its validation), then
// as a whole with Program::from_file, checking each result; `problem` is empty when every stage
// kept its promises or refused cleanly and the program agrees with the stages. A refusal that
// no stage explains comes from the tokenizer (src/tokenizer, checked by its own tests): it need
// not cite a key, but must still be one line naming the file.
struct LoadOutcome {
  bool loaded = false;
  std::string problem;
  std::string refusal;  // the program's error message when it was refused
};
LoadOutcome load_and_check(GgufFile file);

}  // namespace cellm::program_testing
