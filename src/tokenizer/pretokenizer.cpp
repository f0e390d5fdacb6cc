#include "tokenizer/pretokenizer.h"

#include <algorithm>

namespace cellm {
namespace {

// Patterns from the models' own tokenizer.json files (Hugging Face `Split` pre-tokenizers), in
// PCRE2 syntax. Where llama.cpp had to rewrite a pattern for std::regex (no \p{Lu}, no (?i:)),
// the original is used here: PCRE2 runs it as written.

// GPT-2 (openai/gpt-2 encoder.py). The trailing `|\s+` of the original is not needed: a lone
// whitespace character before a non-space is left unmatched and becomes a gap piece anyway.
constexpr std::string_view kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

// Llama 3 (meta-llama/Meta-Llama-3-8B tokenizer.json).
constexpr std::string_view kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*)"
    R"(|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen2 (Qwen/Qwen2-7B tokenizer.json): Llama 3's with single digits.
constexpr std::string_view kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*)"
    R"(|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Mistral's tekken (mistralai/Mistral-Nemo-Base-2407 tokenizer.json).
constexpr std::string_view kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)"
    R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// GPT-4o / Llama 4 (o200k_base).
constexpr std::string_view kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)"
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)"
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// BLOOM / Poro / GPT-3-Finnish.
constexpr std::string_view kBloom = R"( ?[^(\s|.,!?…。，、।۔،)]+)";

// CJK ideographs, the range below them and Hangul, as DeepSeek's tokenizer.json writes them:
// [一-龥ࠀ-一가-퟿].
constexpr std::string_view kDeepseekCjk =
    R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";

// DeepSeek LLM's cased-letter class (deepseek-ai/deepseek-llm-7b-base tokenizer.json), written
// with escapes because several of its characters (U+1F7D, U+1FBE, U+1FD3, U+1FDB, U+2126,
// U+212A) do not survive Unicode normalization of a source file.
constexpr std::string_view kDeepseekLetters =
    R"(\s?[\x{41}-\x{5A}\x{61}-\x{7A}\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF})"
    R"(\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386})"
    R"(\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F})"
    R"(\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA})"
    R"(\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15})"
    R"(\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B})"
    R"(\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4})"
    R"(\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4})"
    R"(\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124})"
    R"(\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F})"
    R"(\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})"
    R"(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17})"
    R"(\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3})"
    R"(\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF})"
    R"(\x{1E900}-\x{1E943}]+)";

// The table. One row per pre-tokenizer; the names are those llama.cpp's converter writes.
const std::vector<PreTokenizerSpec>& table() {
  static const std::vector<PreTokenizerSpec> kTable = {
      {{"default"}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
      {{"gpt-2", "mpt", "olmo", "jais", "phi-2", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de",
        "gigachat", "trillion", "a.x-4.0", "mellum"},
       {kGpt2}},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
       {kLlama3},
       /*ignore_merges=*/true,
       /*add_bos=*/true},
      {{"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}, {kLlama3}},
      {{"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "hunyuan"}, {kQwen2}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
       {R"(\p{N})", kGpt2}},
      {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}},
      {{"deepseek-coder"}, {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepseekCjk, R"(\p{N})"}},
      {{"deepseek-llm"},
       {"[\r\n]", kDeepseekLetters,
        R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)",
        R"(\s+$)", kDeepseekCjk, R"(\p{N}+)"}},
      {{"poro-chat", "bloom", "gpt3-finnish"}, {kBloom}},
      {{"viking"}, {kBloom, R"(\p{N})"}},
      {{"tekken"}, {kTekken}, /*ignore_merges=*/true, /*add_bos=*/true},
      {{"gpt-4o", "llama4"}, {kGpt4o}},
  };
  return kTable;
}

}  // namespace

const PreTokenizerSpec* find_pre_tokenizer(std::string_view pre) {
  for (const PreTokenizerSpec& spec : table()) {
    if (std::find(spec.names.begin(), spec.names.end(), pre) != spec.names.end()) return &spec;
  }
  return nullptr;
}

std::vector<std::string_view> pre_tokenizer_names() {
  std::vector<std::string_view> names;
  for (const PreTokenizerSpec& spec : table()) {
    names.insert(names.end(), spec.names.begin(), spec.names.end());
  }
  std::sort(names.begin(), names.end());
  return names;
}

StatusOr<PreTokenizer> PreTokenizer::compile(const std::vector<std::string_view>& patterns) {
  PreTokenizer pre;
  for (std::string_view pattern : patterns) {
    CELLM_ASSIGN_OR_RETURN(tokenizer_internal::Regex regex,
                           tokenizer_internal::Regex::compile(pattern));
    pre.patterns_.push_back(std::move(regex));
  }
  return pre;
}

Status PreTokenizer::split(std::string_view text, std::vector<TextPiece>* pieces) const {
  pieces->clear();
  if (text.empty()) return ok_status();
  pieces->push_back({0, text.size()});
  std::vector<TextPiece> next;
  for (const tokenizer_internal::Regex& regex : patterns_) {
    tokenizer_internal::Regex::Matcher matcher(regex);
    next.clear();
    for (const TextPiece& piece : *pieces) {
      const std::string_view subject = text.substr(piece.offset, piece.length);
      size_t start = 0;  // next search position inside the piece
      size_t kept = 0;   // end of what has been emitted
      tokenizer_internal::RegexMatch match;
      while (start < subject.size()) {
        CELLM_ASSIGN_OR_RETURN(const bool found, matcher.find(subject, start, &match));
        if (!found) break;
        if (match.end == match.begin) {  // an empty match splits nothing; move one character on
          ++start;
          while (start < subject.size() && (subject[start] & 0xC0) == 0x80) ++start;
          continue;
        }
        if (match.begin > kept) next.push_back({piece.offset + kept, match.begin - kept});
        next.push_back({piece.offset + match.begin, match.end - match.begin});
        kept = match.end;
        start = match.end;
      }
      if (kept < subject.size()) next.push_back({piece.offset + kept, subject.size() - kept});
    }
    pieces->swap(next);
  }
  return ok_status();
}

}  // namespace cellm
