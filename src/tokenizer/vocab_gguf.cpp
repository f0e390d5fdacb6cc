#include "tokenizer/vocab_gguf.h"

#include <algorithm>
#include <cctype>

#include "core/logging.h"
#include "fmt/format.h"
#include "gguf/gguf_text.h"
#include "tokenizer/pretokenizer.h"

namespace cellm {
namespace {

template <typename T>
using Getter = StatusOr<T> (GgufFile::*)(std::string_view) const;

// The key's value, `fallback` when the key is absent, or the getter's error (wrong type).
template <typename T>
StatusOr<T> get_or(const GgufFile& file, Getter<T> getter, std::string_view key, T fallback) {
  if (!file.has(key)) return fallback;
  return (file.*getter)(key);
}

// A special-token id: absent -> `fallback` (kept only if it fits), 0xFFFFFFFF / -1 -> none,
// out of range -> error naming the key.
StatusOr<int32_t> special_id(const GgufFile& file, std::string_view key, int32_t fallback,
                             size_t num_tokens) {
  const GgufValue* value = file.find(key);
  if (value == nullptr) {
    return fallback >= 0 && static_cast<size_t>(fallback) < num_tokens ? fallback : kNoToken;
  }
  const std::optional<int64_t> signed_value = value->as_i64();
  const std::optional<uint64_t> unsigned_value = value->as_u64();
  if (!signed_value && !unsigned_value) {
    return data_loss(fmt::format("{}: gguf: key '{}' has type {}, expected an integer id",
                                 gguf_display_name(file), key, value->summary()));
  }
  if ((signed_value && *signed_value == -1) || (unsigned_value && *unsigned_value == 0xFFFFFFFFu)) {
    return kNoToken;
  }
  if (!unsigned_value || *unsigned_value >= num_tokens) {
    return data_loss(fmt::format("{}: gguf: key '{}' = {} is out of range ({} tokens)",
                                 gguf_display_name(file), key, value->summary(), num_tokens));
  }
  return static_cast<int32_t>(*unsigned_value);
}

Status read_special_ids(const GgufFile& file, Vocab* vocab) {
  const SpecialTokenIds defaults = default_special_token_ids(vocab->kind);
  const size_t n = vocab->tokens.size();
  SpecialTokenIds& ids = vocab->special;
  struct Key {
    std::string_view name;
    int32_t SpecialTokenIds::*field;
  };
  static constexpr Key kKeys[] = {
      {"bos", &SpecialTokenIds::bos},         {"eos", &SpecialTokenIds::eos},
      {"eot", &SpecialTokenIds::eot},         {"eom", &SpecialTokenIds::eom},
      {"unknown", &SpecialTokenIds::unk},     {"seperator", &SpecialTokenIds::sep},
      {"padding", &SpecialTokenIds::pad},     {"mask", &SpecialTokenIds::mask},
      {"fim_pre", &SpecialTokenIds::fim_pre}, {"fim_suf", &SpecialTokenIds::fim_suf},
      {"fim_mid", &SpecialTokenIds::fim_mid}, {"fim_pad", &SpecialTokenIds::fim_pad},
      {"fim_rep", &SpecialTokenIds::fim_rep}, {"fim_sep", &SpecialTokenIds::fim_sep},
  };
  for (const Key& key : kKeys) {
    CELLM_ASSIGN_OR_RETURN(ids.*key.field,
                           special_id(file, fmt::format("tokenizer.ggml.{}_token_id", key.name),
                                      defaults.*key.field, n));
  }
  // BERT files name their BOS "cls".
  if (!file.has("tokenizer.ggml.bos_token_id") && file.has("tokenizer.ggml.cls_token_id")) {
    CELLM_ASSIGN_OR_RETURN(ids.bos, special_id(file, "tokenizer.ggml.cls_token_id", kNoToken, n));
  }
  return ok_status();
}

void apply_phi3_rstrip(const GgufFile& file, Vocab* vocab) {
  const GgufValue* name_value = file.find("general.name");
  if (name_value == nullptr || name_value->as_string() == nullptr) return;
  std::string name = *name_value->as_string();
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (name.find("phi-3") == std::string::npos && name.find("phi3") == std::string::npos) return;
  for (int32_t id = 0; id < vocab->num_tokens(); ++id) {
    const TokenType type = vocab->type(id);
    const std::string& text = vocab->tokens[static_cast<size_t>(id)];
    const bool special = type == TokenType::kControl || type == TokenType::kUserDefined ||
                         type == TokenType::kUnknown || text == "</s>";
    if (special && text != "<unk>" && text != "<s>" && text != "<|endoftext|>") {
      vocab->rstrip_ids.push_back(id);
    }
  }
}

}  // namespace

std::string gguf_display_name(const GgufFile& file) {
  return file.path().empty() ? std::string("GGUF bytes") : file.path();
}

StatusOr<Vocab> vocab_from_gguf(const GgufFile& file) {
  const std::string where = gguf_display_name(file);
  Vocab vocab;
  CELLM_ASSIGN_OR_RETURN(const std::string model, file.get_string("tokenizer.ggml.model"));
  if (model == "llama") {
    vocab.kind = VocabKind::kSpm;
    vocab.add_bos = true;
    vocab.add_space_prefix = true;
  } else if (model == "gpt2") {
    vocab.kind = VocabKind::kBpe;
  } else if (model == "bert") {
    vocab.kind = VocabKind::kWpm;
    vocab.add_bos = true;
    vocab.add_sep = true;
  } else {
    return unimplemented(
        fmt::format("{}: tokenizer.ggml.model {} is not supported (supported: llama, gpt2, bert)",
                    where, gguf_quote(model)));
  }
  CELLM_ASSIGN_OR_RETURN(vocab.tokens, file.get_string_array("tokenizer.ggml.tokens"));
  if (file.has("tokenizer.ggml.scores")) {
    CELLM_ASSIGN_OR_RETURN(vocab.scores, file.get_f32_array("tokenizer.ggml.scores"));
  }
  if (file.has("tokenizer.ggml.token_type")) {
    CELLM_ASSIGN_OR_RETURN(const std::vector<int32_t> types,
                           file.get_i32_array("tokenizer.ggml.token_type"));
    vocab.token_types.reserve(types.size());
    for (int32_t type : types) vocab.token_types.push_back(static_cast<TokenType>(type));
  }
  CELLM_ASSIGN_OR_RETURN(
      vocab.pre, get_or<std::string>(file, &GgufFile::get_string, "tokenizer.ggml.pre", ""));
  if (vocab.kind == VocabKind::kBpe) {
    if (!file.has("tokenizer.ggml.merges")) {
      return data_loss(fmt::format("{}: a 'gpt2' vocabulary needs tokenizer.ggml.merges", where));
    }
    CELLM_ASSIGN_OR_RETURN(vocab.merges, file.get_string_array("tokenizer.ggml.merges"));
    if (vocab.pre.empty()) {
      CELLM_LOG(kWarn) << where << ": no tokenizer.ggml.pre; using the 'default' pre-tokenizer";
    }
    const PreTokenizerSpec* spec = find_pre_tokenizer(vocab.pre.empty() ? "default" : vocab.pre);
    if (spec == nullptr) {
      return unimplemented(fmt::format("{}: unknown tokenizer.ggml.pre {} (known: {})", where,
                                       gguf_quote(vocab.pre),
                                       fmt::join(pre_tokenizer_names(), ", ")));
    }
    vocab.add_bos = spec->add_bos;
    vocab.ignore_merges = spec->ignore_merges;
  }
  CELLM_RETURN_IF_ERROR(read_special_ids(file, &vocab));
  CELLM_ASSIGN_OR_RETURN(vocab.add_bos, get_or(file, &GgufFile::get_bool,
                                               "tokenizer.ggml.add_bos_token", vocab.add_bos));
  CELLM_ASSIGN_OR_RETURN(vocab.add_eos, get_or(file, &GgufFile::get_bool,
                                               "tokenizer.ggml.add_eos_token", vocab.add_eos));
  CELLM_ASSIGN_OR_RETURN(vocab.add_sep, get_or(file, &GgufFile::get_bool,
                                               "tokenizer.ggml.add_sep_token", vocab.add_sep));
  CELLM_ASSIGN_OR_RETURN(
      vocab.add_space_prefix,
      get_or(file, &GgufFile::get_bool, "tokenizer.ggml.add_space_prefix", vocab.add_space_prefix));
  CELLM_ASSIGN_OR_RETURN(vocab.chat_template, get_or<std::string>(file, &GgufFile::get_string,
                                                                  "tokenizer.chat_template", ""));
  // validate_vocab needs the token types before the rstrip rule reads them.
  CELLM_RETURN_IF_ERROR(validate_vocab(vocab, where));
  apply_phi3_rstrip(file, &vocab);
  return vocab;
}

}  // namespace cellm
