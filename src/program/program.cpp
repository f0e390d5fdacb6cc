#include "program/program.h"

#include <fmt/format.h>

#include <utility>

#include "core/logging.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_gguf.h"

namespace cellm {
namespace {

// `status` prefixed with the file's name, unless it already starts with it (GgufFile's getters
// name the path of a file opened from one).
Status in_file(const Status& status, const std::string& where) {
  if (status.message().starts_with(where + ": ")) return status;
  return status.with_context(where);
}

}  // namespace

StatusOr<Program> Program::load(const std::string& path) {
  CELLM_ASSIGN_OR_RETURN(GgufFile file, GgufFile::open(path));
  return from_file(std::move(file));
}

StatusOr<Program> Program::from_file(GgufFile file) {
  const std::string where = gguf_display_name(file);
  StatusOr<ModelConfig> config = ModelConfig::from_gguf(file);
  if (!config.ok()) return in_file(config.status(), where);
  StatusOr<ModelWeights> weights = ModelWeights::from_gguf(file, *config);
  if (!weights.ok()) return in_file(weights.status(), where);
  bool used_defaults = false;
  StatusOr<ProgramSpec> spec = ProgramSpec::from_gguf(file, *config, &used_defaults);
  if (!spec.ok()) return in_file(spec.status(), where);
  if (Status valid = spec->validate(*config); !valid.ok()) return in_file(valid, where);
  // phi3 LongRoPE: the long factors for a program that serves more than the original context
  // (llama.cpp's rule; Hugging Face switches per forward by its longest sequence).
  const int32_t long_above = config->rope.long_factors_above_context;
  if (long_above > 0 && spec->max_context_len > long_above) weights->use_long_rope_factors();
  if (used_defaults) {
    CELLM_LOG(kInfo) << where
                     << ": using cellm defaults for a plain GGUF model: " << spec->summary();
  }
  // Most tokenizer errors already name the file (vocab_from_gguf, Tokenizer::from_vocab); a
  // getter's error on bytes parsed from memory does not.
  StatusOr<Tokenizer> loaded = Tokenizer::from_gguf(file);
  if (!loaded.ok()) return in_file(loaded.status(), where);
  auto tokenizer = std::make_shared<const Tokenizer>(std::move(loaded).value());
  if (tokenizer->vocab_size() != config->vocab_size) {
    return data_loss(fmt::format(
        "{}: the tokenizer has {} tokens ('tokenizer.ggml.tokens') but the LM head has {} rows",
        where, tokenizer->vocab_size(), config->vocab_size));
  }
  return Program(std::move(file), std::move(config).value(), std::move(weights).value(),
                 std::move(spec).value(), std::move(tokenizer), used_defaults);
}

std::string Program::summary() const {
  return fmt::format("model: {}{}\nprogram: {}{}\ntokenizer: {}, {} tokens", config_.summary(),
                     config_.rope.long_factors_above_context == 0 ? ""
                     : weights_.uses_long_rope_factors()          ? " (long factors in use)"
                                                                  : " (short factors in use)",
                     spec_.summary(), uses_default_spec_ ? " (cellm defaults)" : "",
                     vocab_kind_name(tokenizer_->kind()), tokenizer_->vocab_size());
}

}  // namespace cellm
