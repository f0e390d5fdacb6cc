// Test-only: small valid Hugging Face tokenizers (tokenizer.json + tokenizer_config.json, one of
// each shape hf_tokenizer.h converts) and what "sane" means for the GGUF keys converted from a
// mutant of one, checked without the converter's helpers. Shared by hf_tokenizer_mutation_test,
// the hf_tokenizer fuzz target and its seed writer. Not part of cellm_program.
// The promises: keys unique; model llama or gpt2; tokens exactly config.vocab_size, token types
// 1..6, scores (llama) finite; special ids inside the vocabulary and naming the token that
// tokenizer_config.json names; add_bos/add_eos and chat_template as tokenizer_config.json sets
// them; and the keys, written as GGUF, load in the engine's own tokenizer, which encodes a text.
// Thread-safety: pure functions.
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "model/hf_config.h"
#include "program/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace cellm::hf_tokenizer_testing {

using Json = nlohmann::json;

struct Sample {
  std::string name;
  HfTokenizerFiles files;
  HfConfig config;  // vocab_size and fallback special ids
};

// tokenizer.json from its parts.
inline Json tokenizer_json(Json model, Json added, Json normalizer, Json pre_tokenizer,
                           Json post_processor) {
  return Json{{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens", std::move(added)},
              {"normalizer", std::move(normalizer)},
              {"pre_tokenizer", std::move(pre_tokenizer)},
              {"post_processor", std::move(post_processor)},
              {"decoder", nullptr},
              {"model", std::move(model)}};
}
inline std::string tokenizer_text(Json model, Json added, Json normalizer, Json pre_tokenizer,
                                  Json post_processor) {
  return tokenizer_json(std::move(model), std::move(added), std::move(normalizer),
                        std::move(pre_tokenizer), std::move(post_processor))
      .dump(1);
}

inline Json added_token(int id, const std::string& content, bool special) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", special}};
}

inline Json template_processing(const std::string& bos, int bos_id) {
  return {{"type", "TemplateProcessing"},
          {"single",
           {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
            {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
          {"special_tokens", {{bos, {{"id", bos}, {"ids", {bos_id}}, {"tokens", {bos}}}}}}};
}

// tokenizer.json of a SentencePiece-style BPE, as transformers' LlamaTokenizerFast writes it:
// <unk>, <s>, </s> special at ids 0, 1, 2, a Prepend(U+2581) + Replace(" " -> U+2581)
// normalizer, no pre-tokenizer, a template that prepends <s>, byte fallback. `vocab` maps pieces to
// ids, `merges` are "left right" strings. The export suites' HF checkpoints use it too
// (tests/export_hf_writer.h).
inline Json spm_bpe_tokenizer_json(Json vocab, Json merges) {
  return tokenizer_json(
      {{"type", "BPE"},
       {"dropout", nullptr},
       {"unk_token", "<unk>"},
       {"fuse_unk", true},
       {"byte_fallback", true},
       {"ignore_merges", false},
       {"vocab", std::move(vocab)},
       {"merges", std::move(merges)}},
      {added_token(0, "<unk>", true), added_token(1, "<s>", true), added_token(2, "</s>", true)},
      {{"type", "Sequence"},
       {"normalizers",
        {{{"type", "Prepend"}, {"prepend", "\xe2\x96\x81"}},
         {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xe2\x96\x81"}}}}},
      nullptr, template_processing("<s>", 1));
}

// Byte-level pieces of "Hello world 123" ("Ġ" is the byte-level space) and merges building them.
inline Json byte_level_vocab() {
  const char* pieces[] = {
      "!",   "H",     "e",         "l",  "o",           "\xc4\xa0", "w",
      "r",   "d",     "1",         "2",  "3",           "He",       "ll",
      "llo", "Hello", "\xc4\xa0w", "or", "\xc4\xa0wor", "ld",       "\xc4\xa0world",
      "12",  "123"};
  Json vocab = Json::object();
  int id = 0;
  for (const char* piece : pieces) vocab[piece] = id++;
  return vocab;
}
inline std::vector<std::pair<std::string, std::string>> byte_level_merges() {
  return {{"H", "e"}, {"l", "l"},          {"ll", "o"}, {"He", "llo"},         {"\xc4\xa0", "w"},
          {"o", "r"}, {"\xc4\xa0w", "or"}, {"l", "d"},  {"\xc4\xa0wor", "ld"}, {"1", "2"},
          {"12", "3"}};
}

// Meta's Llama 3 split regex, as its tokenizer.json writes it.
inline constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*)"
    R"(|\s*[\r\n]+|\s+(?!\S)|\s+)";

inline std::vector<Sample> samples() {
  std::vector<Sample> out;
  {  // Llama 3 style: byte-level BPE, Split + ByteLevel, merges as pairs, ignore_merges.
    Json merges = Json::array();
    for (const auto& [l, r] : byte_level_merges()) merges.push_back({l, r});
    Sample s;
    s.name = "llama3";
    s.files.tokenizer_json = tokenizer_text(
        {{"type", "BPE"},
         {"dropout", nullptr},
         {"unk_token", nullptr},
         {"byte_fallback", false},
         {"ignore_merges", true},
         {"vocab", byte_level_vocab()},
         {"merges", merges}},
        {added_token(23, "<|begin_of_text|>", true), added_token(24, "<|end_of_text|>", true),
         added_token(25, "<|eot_id|>", true)},
        nullptr,
        {{"type", "Sequence"},
         {"pretokenizers",
          {{{"type", "Split"},
            {"pattern", {{"Regex", kLlama3Regex}}},
            {"behavior", "Isolated"},
            {"invert", false}},
           {{"type", "ByteLevel"},
            {"add_prefix_space", false},
            {"trim_offsets", true},
            {"use_regex", false}}}}},
        {{"type", "Sequence"},
         {"processors",
          {{{"type", "ByteLevel"}, {"trim_offsets", false}},
           template_processing("<|begin_of_text|>", 23)}}});
    s.files.tokenizer_config_json =
        Json{{"bos_token", "<|begin_of_text|>"},
             {"eos_token", "<|eot_id|>"},
             {"clean_up_tokenization_spaces", true},
             {"model_max_length", 131072},
             {"added_tokens_decoder", {{"23", added_token(23, "<|begin_of_text|>", true)}}},
             {"chat_template",
              "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}"
              "<|end_header_id|>\n\n{{ m['content'] }}<|eot_id|>{% endfor %}"}}
            .dump(1);
    s.config.vocab_size = 32;  // ids 26..31 are padding
    s.config.bos_token_id = 23;
    s.config.eos_token_ids = {25};
    out.push_back(std::move(s));
  }
  {  // GPT-2: byte-level BPE, ByteLevel's own regex, merges as strings, no tokenizer_config.json
     // and no special ids in config.json.
    Json merges = Json::array();
    for (const auto& [l, r] : byte_level_merges()) merges.push_back(l + " " + r);
    Sample s;
    s.name = "gpt2";
    s.files.tokenizer_json =
        tokenizer_text({{"type", "BPE"}, {"vocab", byte_level_vocab()}, {"merges", merges}},
                       {added_token(23, "<|endoftext|>", true)}, nullptr,
                       {{"type", "ByteLevel"},
                        {"add_prefix_space", false},
                        {"trim_offsets", true},
                        {"use_regex", true}},
                       nullptr);
    s.config.vocab_size = 24;
    out.push_back(std::move(s));
  }
  {  // SentencePiece-style BPE with byte fallback, a Prepend/Replace normalizer, a template.
    const char* pieces[] = {"<unk>",
                            "<s>",
                            "</s>",
                            "<0x0A>",
                            "<0x20>",
                            "<0x41>",
                            "\xe2\x96\x81",
                            "H",
                            "e",
                            "l",
                            "o",
                            "w",
                            "r",
                            "d",
                            "\xe2\x96\x81H",
                            "ll",
                            "llo",
                            "\xe2\x96\x81He",
                            "\xe2\x96\x81Hello",
                            "or",
                            "\xe2\x96\x81w",
                            "\xe2\x96\x81wor",
                            "ld",
                            "\xe2\x96\x81world"};
    Json vocab = Json::object();
    int id = 0;
    for (const char* piece : pieces) vocab[piece] = id++;
    const Json merges = {"\xe2\x96\x81 H",
                         "l l",
                         "ll o",
                         "\xe2\x96\x81H e",
                         "\xe2\x96\x81He llo",
                         "o r",
                         "\xe2\x96\x81 w",
                         "\xe2\x96\x81w or",
                         "l d",
                         "\xe2\x96\x81wor ld"};
    Sample s;
    s.name = "spm-bpe";
    s.files.tokenizer_json = spm_bpe_tokenizer_json(vocab, merges).dump(1);
    s.files.tokenizer_config_json = Json{
        {"add_bos_token", true},
        {"add_eos_token", false},
        {"bos_token",
         {{"__type", "AddedToken"}, {"content", "<s>"}, {"lstrip", false}, {"special", true}}},
        {"eos_token", "</s>"},
        {"unk_token", "<unk>"},
        {"pad_token", nullptr},
        {"chat_template",
         {{{"name", "default"}, {"template", "{% for m in messages %}{{ m.content }}{% endfor %}"}},
          {{"name", "tool_use"},
           {"template",
            "{{ tools }}"}}}}}.dump(1);
    s.config.vocab_size = 26;
    s.config.bos_token_id = 1;
    s.config.eos_token_ids = {2};
    out.push_back(std::move(s));
  }
  {  // Unigram with a Metaspace pre-tokenizer; the chat template in chat_template.jinja.
    Json vocab = Json::array();
    for (const auto& [piece, score] :
         std::vector<std::pair<std::string, double>>{{"<unk>", 0.0},
                                                     {"<s>", 0.0},
                                                     {"</s>", 0.0},
                                                     {"\xe2\x96\x81", -2.0},
                                                     {"\xe2\x96\x81Hello", -5.5},
                                                     {"\xe2\x96\x81world", -6.0},
                                                     {"H", -8.0},
                                                     {"e", -8.1},
                                                     {"l", -8.2},
                                                     {"o", -8.3},
                                                     {"w", -8.4},
                                                     {"r", -8.5},
                                                     {"d", -8.6},
                                                     {"<0x41>", -10.0}}) {
      vocab.push_back({piece, score});
    }
    Sample s;
    s.name = "unigram";
    s.files.tokenizer_json = tokenizer_text(
        {{"type", "Unigram"}, {"unk_id", 0}, {"vocab", vocab}, {"byte_fallback", false}},
        {added_token(0, "<unk>", true), added_token(1, "<s>", true), added_token(2, "</s>", true)},
        nullptr,
        {{"type", "Metaspace"},
         {"replacement", "\xe2\x96\x81"},
         {"prepend_scheme", "first"},
         {"split", true}},
        template_processing("<s>", 1));
    s.files.tokenizer_config_json = Json{
        {"add_bos_token", true},
        {"bos_token", "<s>"},
        {"eos_token", "</s>"},
        {"unk_token", "<unk>"},
        {"pad_token", "<unk>"}}.dump(1);
    s.files.chat_template_jinja = "{% for m in messages %}{{ m.content }}{% endfor %}";
    s.config.vocab_size = 16;
    s.config.bos_token_id = 1;
    s.config.eos_token_ids = {2};
    out.push_back(std::move(s));
  }
  return out;
}

// The token a tokenizer_config.json entry names: "<s>" or {"content": "<s>"}.
inline std::optional<std::string> named_token(const Json& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) return std::nullopt;
  const Json& value = config[key];
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string()) {
    return value["content"].get<std::string>();
  }
  return std::nullopt;
}

// Empty when `keys` (converted from a tokenizer whose tokenizer_config.json parses as
// `tokenizer_config`, an object or null) keep the promises above; otherwise the first broken one.
inline std::string check_tokenizer_keys(const GgufKeys& keys, const HfConfig& config,
                                        const Json& tokenizer_config) {
  std::set<std::string> seen;
  GgufWriter writer;
  const GgufValue* model = nullptr;
  const GgufValue* tokens = nullptr;
  const GgufValue* types = nullptr;
  const GgufValue* scores = nullptr;
  std::vector<std::pair<std::string, const GgufValue*>> ids;
  for (const auto& [key, value] : keys) {
    if (!key.starts_with("tokenizer.")) return "key " + key + " outside tokenizer.*";
    if (!seen.insert(key).second) return "key " + key + " twice";
    if (key == "tokenizer.ggml.model") model = &value;
    if (key == "tokenizer.ggml.tokens") tokens = &value;
    if (key == "tokenizer.ggml.token_type") types = &value;
    if (key == "tokenizer.ggml.scores") scores = &value;
    if (key.ends_with("_token_id")) ids.emplace_back(key, &value);
    if (!writer.add_metadata(key, value).ok()) return "GgufWriter refuses " + key;
  }
  if (model == nullptr || model->as_string() == nullptr ||
      (*model->as_string() != "llama" && *model->as_string() != "gpt2")) {
    return "tokenizer.ggml.model is not llama or gpt2";
  }
  const bool spm = *model->as_string() == "llama";
  const auto n = static_cast<size_t>(config.vocab_size);
  if (tokens == nullptr || tokens->as_array() == nullptr ||
      tokens->as_array()->elements.size() != n) {
    return "tokenizer.ggml.tokens is not config.vocab_size strings";
  }
  const std::vector<GgufValue>& texts = tokens->as_array()->elements;
  if (types == nullptr || types->as_array() == nullptr || types->as_array()->elements.size() != n) {
    return "tokenizer.ggml.token_type is not one per token";
  }
  for (const GgufValue& type : types->as_array()->elements) {
    const std::optional<int64_t> t = type.as_i64();
    if (!t || *t < 1 || *t > 6) return "a token type outside 1..6";
  }
  if (spm != (scores != nullptr)) return "scores present without llama, or missing with it";
  if (scores != nullptr) {
    if (scores->as_array() == nullptr || scores->as_array()->elements.size() != n) {
      return "tokenizer.ggml.scores is not one per token";
    }
    for (const GgufValue& score : scores->as_array()->elements) {
      if (!score.as_f64() || !std::isfinite(*score.as_f64())) return "a score not finite";
    }
  }
  for (const auto& [key, value] : ids) {
    const std::optional<uint64_t> id = value->as_u64();
    if (!id || *id >= n) return key + " outside the vocabulary";
  }
  const auto id_of = [&](const std::string& key) -> std::optional<uint64_t> {
    for (const auto& [k, value] : ids) {
      if (k == key) return value->as_u64();
    }
    return std::nullopt;
  };
  for (const auto& [config_key, gguf_key] :
       {std::pair{"bos_token", "tokenizer.ggml.bos_token_id"},
        std::pair{"eos_token", "tokenizer.ggml.eos_token_id"},
        std::pair{"unk_token", "tokenizer.ggml.unknown_token_id"},
        std::pair{"pad_token", "tokenizer.ggml.padding_token_id"}}) {
    const std::optional<std::string> named = named_token(tokenizer_config, config_key);
    if (!named) continue;
    const std::optional<uint64_t> id = id_of(gguf_key);
    if (!id || texts[*id].as_string() == nullptr || *texts[*id].as_string() != *named) {
      return std::string(gguf_key) + " is not the token tokenizer_config.json names";
    }
  }
  for (const char* flag : {"add_bos_token", "add_eos_token"}) {
    if (!tokenizer_config.is_object() || !tokenizer_config.contains(flag) ||
        !tokenizer_config[flag].is_boolean()) {
      continue;
    }
    bool found = false;
    for (const auto& [key, value] : keys) {
      if (key == std::string("tokenizer.ggml.") + flag) {
        found = value.as_bool() == tokenizer_config[flag].get<bool>();
      }
    }
    if (!found) return std::string(flag) + " differs from tokenizer_config.json";
  }
  if (tokenizer_config.is_object() && tokenizer_config.contains("chat_template") &&
      tokenizer_config["chat_template"].is_string() &&
      !tokenizer_config["chat_template"].get<std::string>().empty()) {
    bool found = false;
    for (const auto& [key, value] : keys) {
      if (key == "tokenizer.chat_template") {
        found = value.as_string() != nullptr &&
                *value.as_string() == tokenizer_config["chat_template"].get<std::string>();
      }
    }
    if (!found) return "chat_template differs from tokenizer_config.json";
  }

  // The engine's tokenizer loads the keys and encodes a text (the result may be an error: a
  // mutant can leave letters without tokens).
  StatusOr<std::vector<uint8_t>> bytes = writer.write_bytes();
  if (!bytes.ok()) return "GgufWriter: " + bytes.status().message();
  StatusOr<GgufFile> file = GgufFile::parse(*bytes);
  if (!file.ok()) return "GgufFile: " + file.status().message();
  StatusOr<Tokenizer> tokenizer = Tokenizer::from_gguf(*file);
  if (!tokenizer.ok()) return "the engine's tokenizer refuses it: " + tokenizer.status().message();
  if (tokenizer->vocab_size() != config.vocab_size) return "the engine's vocabulary size differs";
  (void)tokenizer->encode("Hello world 123 <s>", {.add_special = true});
  return "";
}

}  // namespace cellm::hf_tokenizer_testing
