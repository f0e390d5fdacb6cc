#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <optional>

#include "fmt/format.h"
#include "gguf/gguf_text.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/spm.h"
#include "tokenizer/token_index.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab_gguf.h"
#include "tokenizer/wpm.h"

namespace cellm {

using tokenizer_internal::BpeEncoder;
using tokenizer_internal::Fragment;
using tokenizer_internal::SpecialTokenSplitter;
using tokenizer_internal::SpmEncoder;
using tokenizer_internal::TokenIndex;
using tokenizer_internal::WpmEncoder;

namespace {

// Token texts that end a turn in common chat formats (llama.cpp's end-of-generation list).
constexpr std::string_view kEndOfTurnTexts[] = {
    "<|eot_id|>",           "<|im_end|>",         "<|end|>",    "<end_of_turn>",
    "<|endoftext|>",        "<|eom_id|>",         "<EOT>",      "_<EOT>",
    "<|end_of_text|>",      "<end_of_utterance>", "<|return|>", "<|call|>",
    "<｜end▁of▁sentence｜>"};

// "<0xAB>" -> 0xAB.
std::optional<uint8_t> parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return std::nullopt;
  int value = 0;
  for (char c : text.substr(3, 2)) {
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (digit < 0) return std::nullopt;
    value = value * 16 + digit;
  }
  return static_cast<uint8_t>(value);
}

std::string replace_space_markers(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (text.substr(i, 3) == tokenizer_internal::kSpaceMarker) {
      out.push_back(' ');
      i += 3;
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

}  // namespace

struct Tokenizer::State {
  explicit State(Vocab v) : vocab(std::move(v)), index(vocab), splitter(vocab) {}
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  Vocab vocab;
  TokenIndex index;  // views into vocab.tokens
  SpecialTokenSplitter splitter;
  std::optional<SpmEncoder> spm;
  std::optional<BpeEncoder> bpe;
  std::optional<PreTokenizer> pre_tokenizer;
  std::optional<WpmEncoder> wpm;
  std::vector<std::string> pieces;  // [num_tokens]: decoded bytes, special tokens as their text
  std::vector<int32_t> stop_ids;

  Status encode_fragment(std::string_view text, bool after_special,
                         std::vector<int32_t>* out) const;
  // encode() and encode_parts(): `plain` as SpecialTokenSplitter::partition takes it.
  StatusOr<std::vector<int32_t>> encode(std::string_view text, bool add_special, bool parse_special,
                                        std::span<const Fragment> plain) const;
};

Status Tokenizer::State::encode_fragment(std::string_view text, bool after_special,
                                         std::vector<int32_t>* out) const {
  switch (vocab.kind) {
    case VocabKind::kSpm: {
      if (vocab.add_space_prefix && after_special) {
        std::string prefixed = " ";
        prefixed.append(text);
        return spm->encode(prefixed, out);
      }
      return spm->encode(text, out);
    }
    case VocabKind::kBpe: {
      const bool valid = tokenizer_internal::is_valid_utf8(text);
      std::string sanitized;
      if (!valid) sanitized = tokenizer_internal::sanitize_utf8(text);
      const std::string_view clean = valid ? text : std::string_view(sanitized);
      std::vector<TextPiece> words;
      CELLM_RETURN_IF_ERROR(pre_tokenizer->split(clean, &words));
      for (const TextPiece& word : words) {
        CELLM_RETURN_IF_ERROR(bpe->encode_word(clean.substr(word.offset, word.length), out));
      }
      return ok_status();
    }
    case VocabKind::kWpm:
      return wpm->encode(text, out);
  }
  return internal_error("tokenizer: unknown vocabulary kind");
}

StatusOr<Tokenizer> Tokenizer::from_vocab(Vocab vocab, std::string_view where) {
  CELLM_RETURN_IF_ERROR(validate_vocab(vocab, where));
  auto state = std::make_shared<State>(std::move(vocab));
  const Vocab& v = state->vocab;
  switch (v.kind) {
    case VocabKind::kSpm:
      state->spm.emplace(v, state->index);
      break;
    case VocabKind::kBpe: {
      const std::string pre = v.pre.empty() ? "default" : v.pre;
      const PreTokenizerSpec* spec = find_pre_tokenizer(pre);
      if (spec == nullptr) {
        return unimplemented(fmt::format("{}: unknown tokenizer.ggml.pre {} (known: {})", where,
                                         gguf_quote(pre), fmt::join(pre_tokenizer_names(), ", ")));
      }
      CELLM_ASSIGN_OR_RETURN(PreTokenizer pre_tokenizer, PreTokenizer::compile(*spec));
      state->pre_tokenizer.emplace(std::move(pre_tokenizer));
      state->bpe.emplace(v, state->index);
      break;
    }
    case VocabKind::kWpm: {
      CELLM_ASSIGN_OR_RETURN(WpmEncoder wpm, WpmEncoder::create(v, state->index));
      state->wpm.emplace(std::move(wpm));
      break;
    }
  }

  state->pieces.resize(v.tokens.size());
  for (int32_t id = 0; id < v.num_tokens(); ++id) {
    const std::string& text = v.tokens[static_cast<size_t>(id)];
    std::string& piece = state->pieces[static_cast<size_t>(id)];
    switch (v.type(id)) {
      case TokenType::kControl:
      case TokenType::kUnknown:
      case TokenType::kUserDefined:
        piece = text;
        break;
      case TokenType::kByte: {
        const std::optional<uint8_t> byte = parse_byte_token(text);
        if (!byte) {
          return data_loss(
              fmt::format("{}: tokenizer.ggml.tokens[{}] {} has type byte but is not <0xNN>", where,
                          id, gguf_quote(text)));
        }
        piece.assign(1, static_cast<char>(*byte));
        break;
      }
      case TokenType::kNormal:
        piece = v.kind == VocabKind::kBpe ? BpeEncoder::decode_token_text(text)
                                          : replace_space_markers(text);
        break;
      case TokenType::kUndefined:
      case TokenType::kUnused:
        break;  // render as nothing, as llama.cpp does
    }
  }

  const SpecialTokenIds& s = v.special;
  for (int32_t id : {s.eos, s.eot, s.eom}) {
    if (id != kNoToken) state->stop_ids.push_back(id);
  }
  for (std::string_view text : kEndOfTurnTexts) {
    if (const std::optional<int32_t> id = state->index.find(text)) state->stop_ids.push_back(*id);
  }
  std::sort(state->stop_ids.begin(), state->stop_ids.end());
  state->stop_ids.erase(std::unique(state->stop_ids.begin(), state->stop_ids.end()),
                        state->stop_ids.end());
  return Tokenizer(std::move(state));
}

StatusOr<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
  CELLM_ASSIGN_OR_RETURN(Vocab vocab, vocab_from_gguf(file));
  return from_vocab(std::move(vocab), gguf_display_name(file));
}

StatusOr<std::vector<int32_t>> Tokenizer::State::encode(std::string_view text, bool add_special,
                                                        bool parse_special,
                                                        std::span<const Fragment> plain) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_special && vocab.add_bos) ids.push_back(vocab.special.bos);
  std::vector<Fragment> fragments;
  splitter.partition(text, parse_special, &fragments, plain);
  bool after_special = true;
  for (const Fragment& fragment : fragments) {
    if (fragment.token != kNoToken) {
      ids.push_back(fragment.token);
      after_special = true;
      continue;
    }
    CELLM_RETURN_IF_ERROR(
        encode_fragment(text.substr(fragment.offset, fragment.length), after_special, &ids));
    after_special = false;
  }
  if (add_special && vocab.add_eos) ids.push_back(vocab.special.eos);
  if (add_special && vocab.add_sep) ids.push_back(vocab.special.sep);
  return ids;
}

StatusOr<std::vector<int32_t>> Tokenizer::encode(std::string_view text,
                                                 const EncodeOptions& options) const {
  return state_->encode(text, options.add_special, options.parse_special, {});
}

StatusOr<std::vector<int32_t>> Tokenizer::encode_parts(std::span<const TextPart> parts,
                                                       bool add_special) const {
  std::string text;
  std::vector<Fragment> plain;  // the parts without parse_special, as byte ranges of text
  for (const TextPart& part : parts) {
    if (part.text.empty()) continue;
    if (!part.parse_special) {
      if (!plain.empty() && plain.back().offset + plain.back().length == text.size()) {
        plain.back().length += part.text.size();
      } else {
        plain.push_back({kNoToken, text.size(), part.text.size()});
      }
    }
    text.append(part.text);
  }
  return state_->encode(text, add_special, /*parse_special=*/true, plain);
}

StatusOr<std::string> Tokenizer::decode(std::span<const int32_t> ids,
                                        const DecodeOptions& options) const {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= vocab_size()) {
      return invalid_argument(
          fmt::format("token id {} (position {}) is out of range: the "
                      "vocabulary has {} tokens",
                      id, i, vocab_size()));
    }
    std::string_view piece = token_piece(id, options.render_special);
    if (i == 0 && options.strip_leading_space && state_->vocab.add_space_prefix && !piece.empty() &&
        piece[0] == ' ') {
      piece.remove_prefix(1);
    }
    text.append(piece);
  }
  return text;
}

std::string_view Tokenizer::token_piece(int32_t id, bool render_special) const {
  if (id < 0 || id >= vocab_size()) return {};
  if (!render_special && is_control(id)) return {};
  return state_->pieces[static_cast<size_t>(id)];
}

std::string_view Tokenizer::token_text(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return state_->vocab.tokens[static_cast<size_t>(id)];
}

std::optional<int32_t> Tokenizer::token_id(std::string_view text) const {
  return state_->index.find(text);
}

int32_t Tokenizer::vocab_size() const { return state_->vocab.num_tokens(); }
VocabKind Tokenizer::kind() const { return state_->vocab.kind; }
const Vocab& Tokenizer::vocab() const { return state_->vocab; }
int32_t Tokenizer::bos_id() const { return state_->vocab.special.bos; }
int32_t Tokenizer::eos_id() const { return state_->vocab.special.eos; }
const std::vector<int32_t>& Tokenizer::stop_token_ids() const { return state_->stop_ids; }

bool Tokenizer::is_control(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return false;
  const TokenType type = state_->vocab.type(id);
  return type == TokenType::kControl || type == TokenType::kUnknown;
}

}  // namespace cellm
