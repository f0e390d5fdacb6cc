// Vocab: a tokenizer's vocabulary as plain data — tokens, scores, token types, BPE merges,
// special-token ids and the flags that steer encoding — plus the checks that make it usable.
//
// `vocab_from_gguf` (vocab_gguf.h) fills one from a GGUF file's `tokenizer.ggml.*` keys; tests
// build them by hand. `validate_vocab` is the single gate: every length, id and merge is checked
// there, so the encoders can index without checks. Knows nothing about how text is split;
// tokenizer.h does that. Thread-safety: plain data.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/token_id.h"

namespace cellm {

// `tokenizer.ggml.model`: "llama" (SentencePiece BPE by score), "gpt2" (byte-level BPE by merge
// rank), "bert" (WordPiece).
enum class VocabKind { kSpm, kBpe, kWpm };

std::string_view vocab_kind_name(VocabKind kind);  // the GGUF name: "llama", "gpt2", "bert"

// `tokenizer.ggml.token_type` values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Special-token ids; kNoToken when the vocabulary has none. GGUF stores "none" either by leaving
// the key out or as 0xFFFFFFFF (the llama2.c converter does the latter).
struct SpecialTokenIds {
  int32_t bos = kNoToken;
  int32_t eos = kNoToken;
  int32_t eot = kNoToken;  // end of turn (<|eot_id|>, <|im_end|>, ...)
  int32_t eom = kNoToken;  // end of message (tool calls)
  int32_t unk = kNoToken;
  int32_t sep = kNoToken;
  int32_t pad = kNoToken;
  int32_t mask = kNoToken;
  int32_t fim_pre = kNoToken;
  int32_t fim_suf = kNoToken;
  int32_t fim_mid = kNoToken;
  int32_t fim_pad = kNoToken;
  int32_t fim_rep = kNoToken;
  int32_t fim_sep = kNoToken;
};

// The defaults llama.cpp assumes when a GGUF file lacks the key (a default that does not fit the
// vocabulary is dropped by vocab_from_gguf): llama: bos 1, eos 2, unk 0; bert: bos ([CLS]) 101,
// unk 100, sep 102, pad 0, mask 103; gpt2: bos 11, eos 11 (Falcon's <|endoftext|>).
SpecialTokenIds default_special_token_ids(VocabKind kind);

struct Vocab {
  VocabKind kind = VocabKind::kSpm;
  // `tokenizer.ggml.pre`: the pre-tokenizer of a byte-level BPE vocabulary (pretokenizer.h);
  // empty when absent. Ignored for SPM and WordPiece.
  std::string pre;
  std::vector<std::string> tokens;     // [num_tokens]; the id is the index
  std::vector<float> scores;           // [num_tokens] or empty (all 0): SPM merge priorities
  std::vector<TokenType> token_types;  // [num_tokens] or empty (all kNormal)
  std::vector<std::string> merges;     // BPE only: "left right", rank = index
  SpecialTokenIds special;

  bool add_bos = false;           // encode(add_special) puts BOS first
  bool add_eos = false;           // ... and EOS last
  bool add_sep = false;           // ... and SEP last (BERT)
  bool add_space_prefix = false;  // SPM: a space before text that starts the input or follows a
                                  // special token; decode strips it from the first token again
  // BPE: a pre-token that is itself a token is emitted whole, merges unused (llama3, tekken).
  bool ignore_merges = false;

  // Special tokens whose match in the text also swallows the whitespace to their left / right
  // (Hugging Face's AddedToken lstrip / rstrip; GGUF does not store these, see vocab_gguf.h).
  std::vector<int32_t> lstrip_ids;
  std::vector<int32_t> rstrip_ids;

  std::string chat_template;  // `tokenizer.chat_template` (Jinja source), empty when absent

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  TokenType type(int32_t id) const {
    return token_types.empty() ? TokenType::kNormal : token_types[static_cast<size_t>(id)];
  }
  float score(int32_t id) const { return scores.empty() ? 0.0f : scores[static_cast<size_t>(id)]; }
};

// Checks everything an encoder relies on: at least one token, scores and token types absent or
// one per token, known token types, special ids in range, BOS/EOS/SEP present when the flags
// ask for them, every BPE merge of the form "left right" whose two parts and whose concatenation
// are tokens, merges only for BPE. `where` prefixes the messages (a file path).
Status validate_vocab(const Vocab& vocab, std::string_view where);

}  // namespace cellm
