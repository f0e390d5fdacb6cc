// hf_tokenizer: a Hugging Face checkpoint's `tokenizer.json` (+ `tokenizer_config.json`) as the
// GGUF `tokenizer.*` keys that tokenizer/vocab_gguf.h reads.
//
// Two shapes of tokenizer are converted:
//   - byte-level BPE (model BPE, a ByteLevel pre-tokenizer, no byte fallback) → `gpt2`: tokens,
//     merges ("left right"), and `pre` named by matching the pre-tokenizer's regexes (Split
//     patterns, ByteLevel's own GPT-2 regex, Digits) against tokenizer/pretokenizer.h's table;
//     a pattern set it does not know is Unimplemented, listing the patterns;
//   - SentencePiece-style (model BPE with byte_fallback or a '▁' Metaspace/normalizer, or model
//     Unigram) → `llama`: tokens, scores (Unigram: its own; BPE: −(rank of the first merge that
//     produces the token), so the score order is the merge order; tokens no merge produces score
//     below every merge), token types, add_space_prefix from the Prepend/Metaspace settings.
// Token types: added special tokens CONTROL, added others USER_DEFINED, the unk token UNKNOWN,
// `<0xNN>` BYTE (with byte fallback), ids missing below the model's vocab_size become
// "[PAD<id>]" USER_DEFINED (as llama.cpp's converter pads). Special ids come from
// tokenizer_config.json's bos/eos/unk/pad tokens (a string or {"content": ...}), else from
// config.json's ids; add_bos/add_eos from tokenizer_config.json, else from the post-processor's
// template. `chat_template` (a string, or the "default" of a list; else chat_template.jinja)
// becomes `tokenizer.chat_template`. Errors name the file and the key.
// Thread-safety: pure functions.
#pragma once

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

// Every `tokenizer.*` key of a GGUF file, in file order (--tokenizer FILE).
GgufKeys tokenizer_keys_from_gguf(const GgufFile& file);

}  // namespace cellm
