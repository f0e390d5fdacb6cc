// Program: a loaded program (DESIGN §3) — one GGUF file's model config, weight table, `cellm.*`
// spec and tokenizer, validated together.
//
// `Program::load(path)` maps and parses the file, reads the ModelConfig, binds the ModelWeights
// (shape- and type-checked views into the mapping), reads the ProgramSpec (a plain GGUF model
// gets the documented defaults, said once in the log at info level) and validates it against
// the model — a phi3 model serving more positions than its original context then uses its long
// LongRoPE factors (ModelWeights::use_long_rope_factors) — and builds the Tokenizer from the
// `tokenizer.*` keys; the tokenizer's vocabulary must equal the LM head's rows. Every error names
// the file and the key or tensor. Executors read their limits only from `spec()`. It knows nothing
// of backends, sessions or exporting (exporter.h writes programs). Move-only; the weight views stay
// valid across moves (they point into the mapping the GgufFile holds). The header does not include
// tokenizer.h, so code that only runs the model need not see the tokenizer's declarations.
// Thread-safety: immutable after load; read from any thread.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "program/program_spec.h"

namespace cellm {

class Tokenizer;  // tokenizer/tokenizer.h: include it to use tokenizer()

class Program {
 public:
  // Opens the file at `path`; errors are prefixed with the path.
  static StatusOr<Program> load(const std::string& path);
  // Builds a program from a parsed file (its bytes must outlive the Program when it was parsed
  // from memory). Errors are prefixed with the file's path or "GGUF bytes".
  static StatusOr<Program> from_file(GgufFile file);

  Program(Program&&) noexcept = default;
  Program& operator=(Program&&) noexcept = default;
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  const GgufFile& file() const { return file_; }
  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const ProgramSpec& spec() const { return spec_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // True when the file had no `cellm.*` keys and the spec holds ProgramSpec::defaults_for.
  bool uses_default_spec() const { return uses_default_spec_; }

  // A few lines for logs and `cellm inspect`: model, spec, tokenizer.
  std::string summary() const;

 private:
  Program(GgufFile file, ModelConfig config, ModelWeights weights, ProgramSpec spec,
          std::shared_ptr<const Tokenizer> tokenizer, bool uses_default_spec)
      : file_(std::move(file)),
        config_(std::move(config)),
        weights_(std::move(weights)),
        spec_(std::move(spec)),
        tokenizer_(std::move(tokenizer)),
        uses_default_spec_(uses_default_spec) {}

  GgufFile file_;  // owns the mapping every WeightView of weights_ points into
  ModelConfig config_;
  ModelWeights weights_;
  ProgramSpec spec_;
  std::shared_ptr<const Tokenizer> tokenizer_;  // never null
  bool uses_default_spec_ = false;
};

}  // namespace cellm
