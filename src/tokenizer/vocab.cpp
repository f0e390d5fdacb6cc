#include "tokenizer/vocab.h"

#include <unordered_set>

#include "fmt/format.h"
#include "gguf/gguf_text.h"

namespace cellm {

std::string_view vocab_kind_name(VocabKind kind) {
  switch (kind) {
    case VocabKind::kSpm:
      return "llama";
    case VocabKind::kBpe:
      return "gpt2";
    case VocabKind::kWpm:
      return "bert";
  }
  return "?";
}

SpecialTokenIds default_special_token_ids(VocabKind kind) {
  SpecialTokenIds ids;
  switch (kind) {
    case VocabKind::kSpm:
      ids.bos = 1, ids.eos = 2, ids.unk = 0;
      break;
    case VocabKind::kWpm:
      ids.bos = 101, ids.unk = 100, ids.sep = 102, ids.pad = 0, ids.mask = 103;
      break;
    case VocabKind::kBpe:
      ids.bos = 11, ids.eos = 11;
      break;
  }
  return ids;
}

namespace {

struct NamedId {
  std::string_view name;
  int32_t id;
};

std::vector<NamedId> named_ids(const SpecialTokenIds& s) {
  return {{"bos", s.bos},         {"eos", s.eos},         {"eot", s.eot},
          {"eom", s.eom},         {"unknown", s.unk},     {"separator", s.sep},
          {"padding", s.pad},     {"mask", s.mask},       {"fim_pre", s.fim_pre},
          {"fim_suf", s.fim_suf}, {"fim_mid", s.fim_mid}, {"fim_pad", s.fim_pad},
          {"fim_rep", s.fim_rep}, {"fim_sep", s.fim_sep}};
}

Status check_merges(const Vocab& vocab, std::string_view where) {
  if (vocab.kind != VocabKind::kBpe) {
    if (!vocab.merges.empty()) {
      return data_loss(fmt::format("{}: tokenizer.ggml.merges given for a '{}' vocabulary", where,
                                   vocab_kind_name(vocab.kind)));
    }
    return ok_status();
  }
  std::unordered_set<std::string_view> tokens(vocab.tokens.begin(), vocab.tokens.end());
  std::string joined;
  for (size_t i = 0; i < vocab.merges.size(); ++i) {
    const std::string& merge = vocab.merges[i];
    const size_t space = merge.size() > 1 ? merge.find(' ', 1) : std::string::npos;
    if (space == std::string::npos || space + 1 >= merge.size()) {
      return data_loss(fmt::format("{}: tokenizer.ggml.merges[{}] {} is not 'left right'", where, i,
                                   gguf_quote(merge)));
    }
    const std::string_view left(merge.data(), space);
    const std::string_view right(merge.data() + space + 1, merge.size() - space - 1);
    joined.assign(left);
    joined.append(right);
    for (std::string_view part : {left, right, std::string_view(joined)}) {
      if (!tokens.contains(part)) {
        return data_loss(fmt::format("{}: tokenizer.ggml.merges[{}] {}: {} is not a token", where,
                                     i, gguf_quote(merge), gguf_quote(part)));
      }
    }
  }
  return ok_status();
}

}  // namespace

Status validate_vocab(const Vocab& vocab, std::string_view where) {
  const size_t n = vocab.tokens.size();
  if (n == 0) return data_loss(fmt::format("{}: tokenizer.ggml.tokens is empty", where));
  if (n > static_cast<size_t>(INT32_MAX)) {
    return data_loss(fmt::format("{}: {} tokens do not fit 32-bit ids", where, n));
  }
  if (!vocab.scores.empty() && vocab.scores.size() != n) {
    return data_loss(fmt::format("{}: tokenizer.ggml.scores has {} entries for {} tokens", where,
                                 vocab.scores.size(), n));
  }
  if (!vocab.token_types.empty() && vocab.token_types.size() != n) {
    return data_loss(fmt::format("{}: tokenizer.ggml.token_type has {} entries for {} tokens",
                                 where, vocab.token_types.size(), n));
  }
  for (size_t i = 0; i < vocab.token_types.size(); ++i) {
    const auto type = static_cast<int32_t>(vocab.token_types[i]);
    if (type < 0 || type > static_cast<int32_t>(TokenType::kByte)) {
      return data_loss(
          fmt::format("{}: tokenizer.ggml.token_type[{}] = {} is not a token type "
                      "(0..6)",
                      where, i, type));
    }
  }
  for (const NamedId& named : named_ids(vocab.special)) {
    if (named.id != kNoToken && (named.id < 0 || static_cast<size_t>(named.id) >= n)) {
      return data_loss(
          fmt::format("{}: tokenizer.ggml.{}_token_id = {} is out of range ({} tokens)", where,
                      named.name, named.id, n));
    }
  }
  for (const auto* list : {&vocab.lstrip_ids, &vocab.rstrip_ids}) {
    for (int32_t id : *list) {
      if (id < 0 || static_cast<size_t>(id) >= n) {
        return data_loss(fmt::format("{}: strip token id {} is out of range", where, id));
      }
    }
  }
  if (vocab.add_bos && vocab.special.bos == kNoToken) {
    return data_loss(
        fmt::format("{}: tokenizer.ggml.add_bos_token is set but there is no BOS id", where));
  }
  if (vocab.add_eos && vocab.special.eos == kNoToken) {
    return data_loss(
        fmt::format("{}: tokenizer.ggml.add_eos_token is set but there is no EOS id", where));
  }
  if (vocab.add_sep && vocab.special.sep == kNoToken) {
    return data_loss(fmt::format("{}: the vocabulary adds a separator but has no SEP id", where));
  }
  if (vocab.kind == VocabKind::kWpm && vocab.special.unk == kNoToken) {
    return data_loss(fmt::format("{}: a WordPiece vocabulary needs an unknown-token id", where));
  }
  return check_merges(vocab, where);
}

}  // namespace cellm
