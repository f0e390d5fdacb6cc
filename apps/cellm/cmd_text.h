// TextCodec: the tokenizer as `cellm run` and `cellm generate` use it — prompts to token ids
// (BOS added when the vocabulary adds one, as the reference does), chat prompts through the
// model's chat template, the model's stop tokens, and the TextStreamFactory that gives the Runner
// streaming text (whole UTF-8 characters; the first generated token keeps its leading space).
//
// This header names no tokenizer type (pimpl): files that include the Runner (batching/batch.h)
// must not also include tokenizer/vocab.h, which defines cellm::kNoToken a second time.
// Who calls it: the run and generate commands. Thread-safety: immutable after creation; the
// factory may be called from the engine thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "batching/stop_matcher.h"
#include "core/status.h"
#include "gguf/gguf_file.h"

namespace cellm::app {

class TextCodec {
 public:
  // The file's tokenizer; its vocabulary must have `vocab_size` tokens (the LM head's rows).
  static StatusOr<TextCodec> from_gguf(const GgufFile& file, int32_t vocab_size);

  // Plain text: BOS first when the vocabulary adds one; special-token text stays plain text.
  StatusOr<std::vector<int32_t>> encode_prompt(std::string_view text) const;
  // One user message rendered with the model's chat template (recognized from the file),
  // followed by the assistant's turn opening; control-token markers become their tokens.
  StatusOr<std::vector<int32_t>> encode_chat(std::string_view user_message) const;
  // Text of generated tokens (a continuation: a leading space is kept).
  StatusOr<std::string> decode(std::span<const int32_t> tokens) const;

  // EOS, end-of-turn and similar tokens: the Runner's default stop tokens.
  std::vector<int32_t> stop_token_ids() const;
  bool adds_bos() const;
  TextStreamFactory text_streams() const;

 private:
  struct State;
  explicit TextCodec(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  std::shared_ptr<const State> state_;
};

}  // namespace cellm::app
