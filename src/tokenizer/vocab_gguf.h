// vocab_from_gguf: the `tokenizer.ggml.*` keys of a GGUF file as a Vocab.
//
// Keys read: model (required: llama | gpt2 | bert), tokens (required), scores, token_type,
// merges (required for gpt2), pre, the special-token ids (bos, eos, eot, eom, unknown,
// seperator [sic], padding, mask, cls — used as BOS when there is no bos key —, fim_*),
// add_bos_token, add_eos_token, add_sep_token, add_space_prefix, and tokenizer.chat_template.
// Defaults when a key is absent, as llama.cpp's loader sets them:
//   - special ids: default_special_token_ids(kind), dropped when outside the vocabulary; an id of
//     0xFFFFFFFF (or -1) means "none"; any other id outside the vocabulary is an error;
//   - llama (SPM): add_bos, add_space_prefix; bert: add_bos ([CLS]) and add_sep ([SEP]);
//     gpt2: the pre-tokenizer row's add_bos and ignore_merges (llama3, tekken set both);
//   - gpt2 without `pre`: the "default" pre-tokenizer, with a warning in the log (old gpt-neox and
//     baichuan-era files); an unknown `pre` is an Unimplemented error listing the known ones.
//   - Phi-3 (general.name contains "phi-3" or "phi3"): control and user-defined tokens other than
//     <unk>, <s> and <|endoftext|> swallow the whitespace to their right (rstrip), as the model's
//     Hugging Face tokenizer does; GGUF has no key for this, so llama.cpp decides by name too.
// Every error names the file and the key. Thread-safety: pure function of the file.
#pragma once

#include <string>

#include "core/status.h"
#include "gguf/gguf_file.h"
#include "tokenizer/vocab.h"

namespace cellm {

// The file's vocabulary, checked by validate_vocab.
StatusOr<Vocab> vocab_from_gguf(const GgufFile& file);

// The path, or "GGUF bytes" for a file parsed from memory (prefix of error messages).
std::string gguf_display_name(const GgufFile& file);

}  // namespace cellm
