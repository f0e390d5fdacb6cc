// Tokenizer: text → token ids → text for one model's vocabulary (SPM, byte-level BPE or
// WordPiece), with the same ids the model's reference tokenizer gives.
//
// encode(): special-token text is split out first (special_tokens.h), then each plain-text
// fragment goes to the vocabulary's encoder: SPM (spm.h; a space is put before a fragment that
// starts the input or follows a special token when the vocabulary says add_space_prefix), BPE
// (pre-tokenizer regexes, then merges; bpe.h, pretokenizer.h) or WordPiece (wpm.h).
// Byte-level BPE input that is not valid UTF-8 has each bad byte replaced by U+FFFD first (as
// llama.cpp does); SPM keeps the bytes (byte fallback, one byte token each).
// decode(): the concatenation of every token's piece — SPM '▁' becomes a space, byte tokens
// become their byte, byte-level BPE characters are mapped back to bytes; control and unknown
// tokens render as nothing unless asked for; with a space-prefix vocabulary one leading space
// is dropped from the first piece, so decode(encode(text)) == text for SPM. Round trips are exact
// for byte-level BPE on valid UTF-8; WordPiece gives back its normalized form (lowercase, no
// accents, one space before each word and punctuation mark).
// Knows nothing about models or chat formats (chat_template.h). Who calls it: the CLI, the
// runner (through StreamingDetokenizer), tests. Thread-safety: immutable after creation; every
// method is const and may run on many threads at once; copies share the same state.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/vocab.h"

namespace cellm {

class GgufFile;

struct EncodeOptions {
  bool add_special = false;    // BOS / EOS / SEP as the vocabulary's add_* flags say
  bool parse_special = false;  // control-token text ("<s>", "<|im_end|>") becomes that token;
                               // otherwise it is encoded as plain text
};

// One piece of a text given to Tokenizer::encode_parts.
struct TextPart {
  std::string_view text;
  bool parse_special = false;  // control-token text in this part may become that token
};

struct DecodeOptions {
  bool render_special = false;      // control and unknown tokens render as their text
  bool strip_leading_space = true;  // drop one space from the first piece (space-prefix vocabs)
};

class Tokenizer {
 public:
  // Validates the vocabulary and builds the encoder; errors name `where` (a path) and the key.
  static StatusOr<Tokenizer> from_vocab(Vocab vocab, std::string_view where = "vocabulary");
  // vocab_from_gguf + from_vocab.
  static StatusOr<Tokenizer> from_gguf(const GgufFile& file);

  StatusOr<std::vector<int32_t>> encode(std::string_view text, const EncodeOptions& options) const;
  // Encodes the concatenation of `parts` as encode() encodes one text (plain text runs across
  // parts as one fragment, BOS / EOS once, as add_special asks), except that a control token is
  // taken only where its whole text lies in a part with parse_special. The ids equal
  // encode(concatenation, {add_special, parse_special = true}) whenever the other parts hold no
  // control-token text (none starts or ends inside them). For a chat template's markup around
  // user text: chat_prompt.h.
  StatusOr<std::vector<int32_t>> encode_parts(std::span<const TextPart> parts,
                                              bool add_special) const;
  // InvalidArgument naming the first id outside [0, vocab_size()).
  StatusOr<std::string> decode(std::span<const int32_t> ids, const DecodeOptions& options) const;

  // The bytes one token decodes to (no leading-space strip); "" for an id out of range.
  std::string_view token_piece(int32_t id, bool render_special) const;
  // The token's text as the vocabulary stores it ("▁Hello", "Ġworld", "<0x0A>").
  std::string_view token_text(int32_t id) const;
  std::optional<int32_t> token_id(std::string_view text) const;

  int32_t vocab_size() const;
  VocabKind kind() const;
  const Vocab& vocab() const;
  int32_t bos_id() const;  // kNoToken when none
  int32_t eos_id() const;
  // Tokens that end a generation: EOS, EOT, EOM and tokens named like an end of turn
  // (<|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>, <|endoftext|>, ...). Sorted, unique.
  const std::vector<int32_t>& stop_token_ids() const;
  bool is_control(int32_t id) const;  // control or unknown (rendered only on request)

 private:
  struct State;
  explicit Tokenizer(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  std::shared_ptr<const State> state_;
};

}  // namespace cellm
