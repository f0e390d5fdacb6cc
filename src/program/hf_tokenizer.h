// hf_tokenizer: a Hugging Face checkpoint's `tokenizer.json` (+ `tokenizer_config.json`) as the
// GGUF `tokenizer.*` keys that tokenizer/vocab_gguf.h reads.
//
// Two shapes of tokenizer are converted:
//   - byte-level BPE (model BPE, a ByteLevel pre-tokenizer, no byte fallback) → `gpt2`: tokens,
//     merges ("left right"; both parts and their join must be tokens, as Hugging Face requires),
//     and `pre` named by matching the pre-tokenizer's regexes (Split patterns, ByteLevel's own
//     GPT-2 regex, Digits) against tokenizer/pretokenizer.h's table; a pattern set it does not
//     know is Unimplemented, listing the patterns;
//   - SentencePiece-style (model BPE with byte_fallback or a '▁' Metaspace/normalizer, or model
//     Unigram) → `llama`: tokens, scores (Unigram: its own, which a float must hold; BPE: −(rank of
//     the first merge that produces the token), so the score order is the merge order; tokens no
//     merge produces score below every merge), token types, add_space_prefix from the
//     Prepend/Metaspace settings.
// Token types: added special tokens CONTROL, added others USER_DEFINED, the unk token UNKNOWN,
// `<0xNN>` BYTE (with byte fallback), ids missing below the model's vocab_size become
// "[PAD<id>]" USER_DEFINED (as llama.cpp's converter pads). Special ids come from
// tokenizer_config.json's bos/eos/unk/pad tokens (a string or {"content": ...}), else from
// config.json's ids; add_bos/add_eos from tokenizer_config.json, else from the post-processor's
// template. `chat_template` (a string, or the "default" of a list; else chat_template.jinja, else
// chat_template.json's `chat_template`, a processor's file)
// becomes `tokenizer.chat_template`. Errors are one line that starts with the file's name and names
// the key; JSON nesting deeper than model/hf_json.h's cap is refused before it is walked.
// tokenizer_keys_from_hf reads the files; tokenizer_keys_from_hf_text takes their text (no file
// access: its mutation test and fuzz target call it). Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "gguf/gguf_file.h"
#include "model/hf_config.h"

namespace cellm {

using GgufKeys = std::vector<std::pair<std::string, GgufValue>>;

// True when `dir` holds a tokenizer.json.
bool has_hf_tokenizer(const std::string& dir);

// The GGUF tokenizer keys of `dir`'s tokenizer.json; `config` gives the vocabulary size to pad to
// and fallback special ids.
StatusOr<GgufKeys> tokenizer_keys_from_hf(const std::string& dir, const HfConfig& config);

// The text of a checkpoint's tokenizer files, and the names errors give them.
struct HfTokenizerFiles {
  std::string tokenizer_json;                        // tokenizer.json
  std::optional<std::string> tokenizer_config_json;  // tokenizer_config.json, when there is one
  // chat_template.jinja, else chat_template.json's template, when there is one
  std::optional<std::string> chat_template_jinja;
  std::string tokenizer_path = "tokenizer.json";
  std::string tokenizer_config_path = "tokenizer_config.json";
};

// tokenizer_keys_from_hf from the files' text.
StatusOr<GgufKeys> tokenizer_keys_from_hf_text(const HfTokenizerFiles& files,
                                               const HfConfig& config);

// Every `tokenizer.*` key of a GGUF file, in file order (--tokenizer FILE).
GgufKeys tokenizer_keys_from_gguf(const GgufFile& file);

}  // namespace cellm
