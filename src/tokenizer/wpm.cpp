#include "tokenizer/wpm.h"

#include <algorithm>

#include "tokenizer/spm.h"
#include "tokenizer/utf8.h"
#include "tokenizer/wpm_fold.h"

namespace cellm::tokenizer_internal {
namespace {

// Hugging Face's BertPreTokenizer / Google's BERT tokenization.py, as regular-expression classes.
// Dropped: category C (control, format, unassigned, private use) other than \t \n \r, and U+FFFD.
constexpr std::string_view kDropped = R"((?:(?![\t\n\r])[\p{C}\x{FFFD}])+)";
// BERT's _is_punctuation: ASCII 33-47, 58-64, 91-96, 123-126, or Unicode category P.
constexpr std::string_view kPunctuation = R"(!-/:-@\[-`{-~\p{P})";
// BERT's _is_chinese_char: the CJK Unified Ideographs blocks and their extensions.
constexpr std::string_view kCjk =
    R"(\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F})"
    R"(\x{2B740}-\x{2B81F}\x{2B820}-\x{2CEAF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F})";

std::string classes_pattern() {
  std::string pattern = "(" + std::string(kDropped) + ")";
  pattern += R"(|(\s+))";
  pattern += "|([" + std::string(kPunctuation) + std::string(kCjk) + "])";
  pattern += R"(|([^\s\p{C}\x{FFFD})" + std::string(kPunctuation) + std::string(kCjk) + "]+)";
  return pattern;
}

constexpr uint32_t kHangulFirst = 0xAC00;
constexpr uint32_t kHangulCount = 11172;

void fold_code_point(uint32_t cp, std::string* out) {
  if (cp >= kHangulFirst && cp < kHangulFirst + kHangulCount) {
    // Unicode 3.12, Hangul syllable decomposition: leading, vowel and (optional) trailing jamo.
    const uint32_t index = cp - kHangulFirst;
    append_utf8(0x1100 + index / 588, out);
    append_utf8(0x1161 + (index % 588) / 28, out);
    if (index % 28 != 0) append_utf8(0x11A7 + index % 28, out);
    return;
  }
  const WpmFoldEntry* end = kWpmFoldTable + kWpmFoldTableSize;
  const WpmFoldEntry* entry = std::lower_bound(
      kWpmFoldTable, end, cp, [](const WpmFoldEntry& e, uint32_t c) { return e.code_point < c; });
  if (entry == end || entry->code_point != cp) {
    append_utf8(cp, out);
    return;
  }
  for (uint8_t i = 0; i < entry->num_outputs; ++i) append_utf8(entry->outputs[i], out);
}

constexpr size_t kMaxWordChars = 100;  // Hugging Face's max_input_chars_per_word

size_t count_chars(std::string_view word) {
  return static_cast<size_t>(
      std::count_if(word.begin(), word.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

}  // namespace

std::string wpm_fold(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    size_t length = 1;
    uint32_t cp = 0xFFFD;
    if (scan_utf8(text.substr(i), &length, &cp) != Utf8Scan::kValid) length = 1, cp = 0xFFFD;
    fold_code_point(cp, &out);
    i += length;
  }
  return out;
}

StatusOr<WpmEncoder> WpmEncoder::create(const Vocab& vocab, const TokenIndex& index) {
  CELLM_ASSIGN_OR_RETURN(Regex classes, Regex::compile(classes_pattern()));
  return WpmEncoder(vocab, index, std::move(classes));
}

StatusOr<std::vector<std::string>> WpmEncoder::split_words(std::string_view text) const {
  const std::string folded = wpm_fold(text);
  std::vector<std::string> words;
  std::string word;
  const auto finish_word = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  Regex::Matcher matcher(classes_);
  RegexMatch match;
  size_t start = 0;
  while (start < folded.size()) {
    CELLM_ASSIGN_OR_RETURN(const bool found, matcher.find(folded, start, &match));
    CELLM_CHECK(found && match.begin == start && match.end > start)
        << "the WordPiece classes must cover every character";
    const std::string_view piece(folded.data() + match.begin, match.end - match.begin);
    switch (match.group) {
      case 1:  // dropped: a word goes on across it
        break;
      case 2:
        finish_word();
        break;
      case 3:
        finish_word();
        words.emplace_back(piece);
        break;
      default:
        word.append(piece);
        break;
    }
    start = match.end;
  }
  finish_word();
  return words;
}

Status WpmEncoder::encode(std::string_view text, std::vector<int32_t>* out) const {
  CELLM_ASSIGN_OR_RETURN(const std::vector<std::string> words, split_words(text));
  const size_t max_length = index_->max_token_length_bytes();
  std::string word;
  for (const std::string& bare : words) {
    const size_t first_new = out->size();
    bool matched_all = count_chars(bare) <= kMaxWordChars;
    word.assign(kSpaceMarker);  // a word start is stored as "▁word"
    word.append(bare);
    for (size_t i = 0; matched_all && i < word.size();) {
      bool matched = false;
      for (size_t j = std::min(word.size(), i + max_length); j > i; --j) {
        if (const std::optional<int32_t> id =
                index_->find(std::string_view(word).substr(i, j - i))) {
          out->push_back(*id);
          i = j;
          matched = true;
          break;
        }
      }
      matched_all = matched;
    }
    if (!matched_all) {
      out->resize(first_new);
      out->push_back(vocab_->special.unk);
    }
  }
  return ok_status();
}

}  // namespace cellm::tokenizer_internal
