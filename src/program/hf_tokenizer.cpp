#include "program/hf_tokenizer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "model/hf_json.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/vocab.h"

namespace cellm {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr std::string_view kSpaceMark = "\xe2\x96\x81";  // '▁', SentencePiece's space

// What the converter learns from tokenizer.json before writing keys.
struct HfVocab {
  bool spm = false;                 // llama-style vocabulary (else gpt2)
  std::vector<std::string> tokens;  // [n]
  std::vector<float> scores;        // [n], spm only
  std::vector<int32_t> types;       // [n]
  std::vector<std::string> merges;  // gpt2 only
  std::string pre = "default";
  bool add_space_prefix = false;
  std::map<std::string, int32_t> ids;  // token text -> id
};

// node[key], or null when `node` is not an object or lacks the key (never inserts, never throws).
const Json& child(const Json& node, const char* key) {
  static const Json kNull;
  if (!node.is_object()) return kNull;
  const auto it = node.find(key);
  return it == node.end() ? kNull : *it;
}

bool contains_space_mark(const Json& node) {
  if (node.is_string()) return node.get<std::string>().find(kSpaceMark) != std::string::npos;
  if (node.is_array() || node.is_object()) {
    for (const Json& child : node) {
      if (contains_space_mark(child)) return true;
    }
  }
  return false;
}

// True when some node of `node` (a pre-tokenizer/normalizer tree) has "type": `type`.
bool has_type(const Json& node, std::string_view type) {
  if (node.is_object()) {
    if (node.contains("type") && node["type"].is_string() &&
        node["type"].get<std::string>() == type) {
      return true;
    }
    for (const auto& [key, child] : node.items()) {
      if (has_type(child, type)) return true;
    }
  } else if (node.is_array()) {
    for (const Json& child : node) {
      if (has_type(child, type)) return true;
    }
  }
  return false;
}

// The regexes a byte-level pre-tokenizer applies, in order.
StatusOr<std::vector<std::string>> pre_patterns(const Json& node, const std::string& where) {
  std::vector<std::string> patterns;
  if (node.is_null()) return patterns;
  const std::string type = node.value("type", "");
  if (type == "Sequence") {
    for (const Json& child : node.value("pretokenizers", Json::array())) {
      CELLM_ASSIGN_OR_RETURN(std::vector<std::string> more, pre_patterns(child, where));
      patterns.insert(patterns.end(), more.begin(), more.end());
    }
  } else if (type == "Split") {
    const Json pattern = node.value("pattern", Json::object());
    if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
      patterns.push_back(pattern["Regex"].get<std::string>());
    } else {
      return unimplemented(where +
                           ": a Split pre-tokenizer without a Regex pattern is not "
                           "supported");
    }
  } else if (type == "ByteLevel") {
    if (node.value("use_regex", true)) {
      patterns.push_back(
          R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)");
    }
  } else if (type == "Digits") {
    patterns.push_back(node.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
  } else {
    return unimplemented(where + ": pre-tokenizer type '" + text_for_message(type) +
                         "' is not supported");
  }
  return patterns;
}

// The `pre` name whose table patterns equal `patterns` (up to GPT-2's redundant trailing "|\s+").
StatusOr<std::string> match_pre(const std::vector<std::string>& patterns, bool ignore_merges,
                                const std::string& where) {
  const auto same = [](std::string_view a, std::string_view b) {
    constexpr std::string_view kTail = R"(|\s+)";
    return a == b || (a.size() == b.size() + kTail.size() && a.ends_with(kTail) &&
                      a.substr(0, b.size()) == b);
  };
  std::string fallback;
  for (std::string_view name : pre_tokenizer_names()) {
    const PreTokenizerSpec* spec = find_pre_tokenizer(name);
    if (spec == nullptr || spec->patterns.size() != patterns.size() || spec->names[0] != name) {
      continue;
    }
    bool equal = true;
    for (size_t i = 0; i < patterns.size() && equal; ++i)
      equal = same(patterns[i], spec->patterns[i]);
    if (!equal) continue;
    if (spec->ignore_merges == ignore_merges) return std::string(name);
    if (fallback.empty()) fallback = name;
  }
  if (!fallback.empty()) return fallback;
  return unimplemented(
      fmt::format("{}: the pre-tokenizer's regexes match none cellm knows "
                  "(tokenizer/pretokenizer.h): {}",
                  where, json_for_message(Json(patterns))));
}

// A special token named in tokenizer_config.json: "<s>" or {"content": "<s>", ...}.
std::optional<std::string> token_content(const Json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const Json& value = config[key];
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string()) {
    return value["content"].get<std::string>();
  }
  return std::nullopt;
}

Status read_tokens(const Json& tokenizer, const std::string& where, int32_t vocab_size,
                   HfVocab* v) {
  const Json& model = child(tokenizer, "model");
  const std::string type = model.value("type", "");
  std::map<int64_t, std::string> by_id;
  std::map<int64_t, float> unigram_scores;
  if (type == "BPE") {
    if (!model.contains("vocab") || !child(model, "vocab").is_object()) {
      return data_loss(where + ": key 'model.vocab' is not an object");
    }
    for (const auto& [text, id] : child(model, "vocab").items()) {
      if (!id.is_number_integer()) {
        return data_loss(where + ": model.vocab['" + text_for_message(text) + "'] is not an id");
      }
      by_id[id.get<int64_t>()] = text;
    }
  } else if (type == "Unigram") {
    const Json& vocab = child(model, "vocab");
    if (!vocab.is_array()) return data_loss(where + ": key 'model.vocab' is not a list");
    for (size_t i = 0; i < vocab.size(); ++i) {
      if (!vocab[i].is_array() || vocab[i].size() != 2 || !vocab[i][0].is_string() ||
          !vocab[i][1].is_number()) {
        return data_loss(fmt::format("{}: model.vocab[{}] is not a [piece, score] pair", where, i));
      }
      const double score = vocab[i][1].get<double>();
      if (!(std::abs(score) <= std::numeric_limits<float>::max())) {
        return data_loss(fmt::format("{}: model.vocab[{}] has a score a float cannot hold: {}",
                                     where, i, json_for_message(vocab[i][1])));
      }
      by_id[static_cast<int64_t>(i)] = vocab[i][0].get<std::string>();
      unigram_scores[static_cast<int64_t>(i)] = static_cast<float>(score);
    }
  } else {
    return unimplemented(where + ": tokenizer model type '" + text_for_message(type) +
                         "' is not supported (BPE, Unigram)");
  }
  std::map<int64_t, bool> added;  // id -> special
  for (const Json& token : tokenizer.value("added_tokens", Json::array())) {
    if (!token.contains("id") || !token["id"].is_number_integer() || !token.contains("content") ||
        !token["content"].is_string()) {
      return data_loss(where + ": an entry of 'added_tokens' has no id or content");
    }
    const int64_t id = token["id"].get<int64_t>();
    by_id[id] = token["content"].get<std::string>();
    added[id] = token.value("special", false);
  }
  if (by_id.empty() || by_id.begin()->first < 0)
    return data_loss(where + ": no tokens, or a negative id");
  if (by_id.rbegin()->first >= vocab_size) {
    return data_loss(fmt::format("{}: token id {} is past config.json's vocab_size {}", where,
                                 by_id.rbegin()->first, vocab_size));
  }
  v->spm = type == "Unigram" || model.value("byte_fallback", false) ||
           contains_space_mark(child(tokenizer, "normalizer")) ||
           has_type(child(tokenizer, "pre_tokenizer"), "Metaspace");
  const std::string unk = model.contains("unk_token") && child(model, "unk_token").is_string()
                              ? child(model, "unk_token").get<std::string>()
                              : "";
  v->tokens.resize(static_cast<size_t>(vocab_size));
  v->types.assign(static_cast<size_t>(vocab_size), static_cast<int32_t>(TokenType::kNormal));
  for (int64_t id = 0; id < vocab_size; ++id) {
    const auto it = by_id.find(id);
    auto& type_out = v->types[static_cast<size_t>(id)];
    std::string& text = v->tokens[static_cast<size_t>(id)];
    if (it == by_id.end()) {
      text = fmt::format("[PAD{}]", id);
      type_out = static_cast<int32_t>(TokenType::kUserDefined);
      continue;
    }
    text = it->second;
    v->ids.emplace(text, static_cast<int32_t>(id));
    const bool byte_token = v->spm && text.size() == 6 && text.starts_with("<0x") &&
                            text.ends_with(">") && std::isxdigit(static_cast<uint8_t>(text[3])) &&
                            std::isxdigit(static_cast<uint8_t>(text[4]));
    if (text == unk) {
      type_out = static_cast<int32_t>(TokenType::kUnknown);
    } else if (added.count(id)) {
      type_out = static_cast<int32_t>(added[id] ? TokenType::kControl : TokenType::kUserDefined);
    } else if (byte_token) {
      type_out = static_cast<int32_t>(TokenType::kByte);
    }
  }
  if (type == "Unigram") {
    v->scores.assign(static_cast<size_t>(vocab_size), 0.0f);
    for (const auto& [id, score] : unigram_scores) v->scores[static_cast<size_t>(id)] = score;
  }
  return ok_status();
}

Status read_merges(const Json& tokenizer, const std::string& where, HfVocab* v) {
  const Json& model = child(tokenizer, "model");
  if (model.value("type", "") != "BPE") return ok_status();
  std::map<std::string, int64_t> first_rank;  // merged token -> rank of its first merge
  const Json& merges = child(model, "merges");
  if (!merges.is_null() && !merges.is_array()) {
    return data_loss(where + ": key 'model.merges' is not a list");
  }
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const Json& merge = merges[rank];
    std::string left;
    std::string right;
    if (merge.is_string()) {
      const std::string text = merge.get<std::string>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        return data_loss(fmt::format("{}: model.merges[{}] '{}' is not 'left right'", where, rank,
                                     text_for_message(text)));
      }
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
      if (left.find(' ') != std::string::npos || right.find(' ') != std::string::npos) {
        return unimplemented(
            fmt::format("{}: model.merges[{}] has a part with a space, which "
                        "GGUF merges cannot hold",
                        where, rank));
      }
    } else {
      return data_loss(fmt::format("{}: model.merges[{}] is not a merge", where, rank));
    }
    first_rank.emplace(left + right, static_cast<int64_t>(rank));
    if (!v->spm) {
      // A gpt2 vocabulary's merges must join tokens into a token (Hugging Face refuses the file
      // otherwise, and so does the engine's loader, tokenizer/vocab.h).
      for (const std::string& part : {left, right, left + right}) {
        if (!v->ids.contains(part)) {
          return data_loss(fmt::format("{}: model.merges[{}] '{} {}': '{}' is not a token", where,
                                       rank, text_for_message(left), text_for_message(right),
                                       text_for_message(part)));
        }
      }
      std::string merge = left;
      merge += ' ';
      merge += right;
      v->merges.push_back(std::move(merge));
    }
  }
  if (v->spm) {
    const auto num_merges = static_cast<float>(merges.size());
    v->scores.resize(v->tokens.size());
    for (size_t id = 0; id < v->tokens.size(); ++id) {
      const auto it = first_rank.find(v->tokens[id]);
      const bool normal = v->types[id] == static_cast<int32_t>(TokenType::kNormal);
      v->scores[id] = it != first_rank.end() ? -static_cast<float>(it->second)
                      : normal               ? -num_merges - static_cast<float>(id)
                                             : 0.0f;
    }
  }
  return ok_status();
}

// The keys of the parsed files. nlohmann-json throws on a value of an unexpected type;
// tokenizer_keys_from_hf_text catches it.
StatusOr<GgufKeys> keys_from_json(const Json& tokenizer, const Json& tok_config,
                                  const HfTokenizerFiles& files, const HfConfig& config) {
  const std::string& path = files.tokenizer_path;
  const std::string& config_path = files.tokenizer_config_path;
  HfVocab v;
  if (!child(tokenizer, "model").is_object()) {
    return data_loss(path + ": key 'model' is missing");
  }
  if (!tok_config.is_object()) return data_loss(config_path + ": not a JSON object");
  CELLM_RETURN_IF_ERROR(read_tokens(tokenizer, path, config.vocab_size, &v));
  CELLM_RETURN_IF_ERROR(read_merges(tokenizer, path, &v));
  if (v.spm) {
    const Json& pre = child(tokenizer, "pre_tokenizer");
    v.add_space_prefix = has_type(child(tokenizer, "normalizer"), "Prepend");
    if (has_type(pre, "Metaspace")) {
      const std::string scheme = pre.value("prepend_scheme", "always");
      v.add_space_prefix = pre.value("add_prefix_space", true) && scheme != "never";
    }
  } else {
    if (!has_type(child(tokenizer, "pre_tokenizer"), "ByteLevel")) {
      return unimplemented(path +
                           ": a BPE tokenizer without byte fallback needs a ByteLevel "
                           "pre-tokenizer");
    }
    CELLM_ASSIGN_OR_RETURN(std::vector<std::string> patterns,
                           pre_patterns(child(tokenizer, "pre_tokenizer"), path));
    CELLM_ASSIGN_OR_RETURN(
        v.pre, match_pre(patterns, child(tokenizer, "model").value("ignore_merges", false), path));
  }

  GgufKeys keys;
  const auto u32 = [](int32_t id) { return GgufValue::u32(static_cast<uint32_t>(id)); };
  const auto strings = [](const std::vector<std::string>& values) {
    std::vector<GgufValue> out;
    out.reserve(values.size());
    for (const std::string& s : values) out.push_back(GgufValue::string(s));
    return GgufValue::array(GgufValueType::kString, std::move(out));
  };
  keys.emplace_back("tokenizer.ggml.model", GgufValue::string(v.spm ? "llama" : "gpt2"));
  keys.emplace_back("tokenizer.ggml.pre", GgufValue::string(v.pre));
  keys.emplace_back("tokenizer.ggml.tokens", strings(v.tokens));
  if (v.spm) {
    std::vector<GgufValue> scores;
    for (float s : v.scores) scores.push_back(GgufValue::f32(s));
    keys.emplace_back("tokenizer.ggml.scores", GgufValue::array(GgufValueType::kFloat32, scores));
  }
  std::vector<GgufValue> types;
  for (int32_t t : v.types) types.push_back(GgufValue::i32(t));
  keys.emplace_back("tokenizer.ggml.token_type", GgufValue::array(GgufValueType::kInt32, types));
  if (!v.spm) keys.emplace_back("tokenizer.ggml.merges", strings(v.merges));

  // Special ids: tokenizer_config.json names them; config.json's ids are the fallback.
  struct Special {
    const char* config_key;
    const char* gguf_key;
    std::optional<int32_t> fallback;
  };
  const std::optional<int32_t> eos =
      config.eos_token_ids.empty() ? std::nullopt : std::optional(config.eos_token_ids[0]);
  for (const Special& s : {Special{"bos_token", "bos_token_id", config.bos_token_id},
                           Special{"eos_token", "eos_token_id", eos},
                           Special{"unk_token", "unknown_token_id", std::nullopt},
                           Special{"pad_token", "padding_token_id", std::nullopt}}) {
    std::optional<int32_t> id = s.fallback;
    if (const std::optional<std::string> content = token_content(tok_config, s.config_key)) {
      const auto it = v.ids.find(*content);
      if (it == v.ids.end()) {
        return data_loss(fmt::format("{}: {} '{}' is not a token of tokenizer.json", config_path,
                                     s.config_key, text_for_message(*content)));
      }
      id = it->second;
    }
    if (id) keys.emplace_back(std::string("tokenizer.ggml.") + s.gguf_key, u32(*id));
  }

  bool add_bos = false;
  bool add_eos = false;
  const Json& single = child(child(tokenizer, "post_processor"), "single");
  if (single.is_array() && !single.empty()) {
    add_bos = single.front().contains("SpecialToken");
    add_eos = single.size() > 1 && single.back().contains("SpecialToken");
  }
  if (tok_config.contains("add_bos_token") && tok_config["add_bos_token"].is_boolean()) {
    add_bos = tok_config["add_bos_token"].get<bool>();
  }
  if (tok_config.contains("add_eos_token") && tok_config["add_eos_token"].is_boolean()) {
    add_eos = tok_config["add_eos_token"].get<bool>();
  }
  keys.emplace_back("tokenizer.ggml.add_bos_token", GgufValue::boolean(add_bos));
  keys.emplace_back("tokenizer.ggml.add_eos_token", GgufValue::boolean(add_eos));
  if (v.spm) {
    keys.emplace_back("tokenizer.ggml.add_space_prefix", GgufValue::boolean(v.add_space_prefix));
  }

  std::string chat_template;
  if (tok_config.contains("chat_template")) {
    const Json& t = tok_config["chat_template"];
    if (t.is_string()) chat_template = t.get<std::string>();
    for (const Json& entry : t.is_array() ? t : Json::array()) {
      if (!entry.is_object() || !entry.contains("template") || !entry["template"].is_string())
        continue;
      if (chat_template.empty() || child(entry, "name") == "default") {
        chat_template = entry["template"].get<std::string>();
      }
    }
  } else if (files.chat_template_jinja) {
    chat_template = *files.chat_template_jinja;
  }
  if (!chat_template.empty()) {
    keys.emplace_back("tokenizer.chat_template", GgufValue::string(chat_template));
  }
  return keys;
}

}  // namespace

bool has_hf_tokenizer(const std::string& dir) {
  std::error_code error;
  return fs::exists(fs::path(dir) / "tokenizer.json", error);
}

StatusOr<GgufKeys> tokenizer_keys_from_hf(const std::string& dir, const HfConfig& config) {
  HfTokenizerFiles files;
  files.tokenizer_path = (fs::path(dir) / "tokenizer.json").string();
  files.tokenizer_config_path = (fs::path(dir) / "tokenizer_config.json").string();
  CELLM_ASSIGN_OR_RETURN(files.tokenizer_json, read_file_to_string(files.tokenizer_path));
  std::error_code error;
  if (fs::exists(files.tokenizer_config_path, error)) {
    CELLM_ASSIGN_OR_RETURN(files.tokenizer_config_json,
                           read_file_to_string(files.tokenizer_config_path));
  }
  const std::string template_path = (fs::path(dir) / "chat_template.jinja").string();
  const std::string template_json_path = (fs::path(dir) / "chat_template.json").string();
  if (fs::exists(template_path, error)) {
    CELLM_ASSIGN_OR_RETURN(files.chat_template_jinja, read_file_to_string(template_path));
  } else if (fs::exists(template_json_path, error)) {
    // A processor's template (Gemma 3's multimodal checkpoints): {"chat_template": "..."}.
    CELLM_ASSIGN_OR_RETURN(const std::string text, read_file_to_string(template_json_path));
    CELLM_ASSIGN_OR_RETURN(const Json json, parse_hf_json(text, template_json_path));
    const auto it = json.is_object() ? json.find("chat_template") : json.end();
    if (!json.is_object() || it == json.end() || !it->is_string()) {
      return data_loss(template_json_path + ": key 'chat_template' is missing or not a string");
    }
    files.chat_template_jinja = it->get<std::string>();
  }
  return tokenizer_keys_from_hf_text(files, config);
}

StatusOr<GgufKeys> tokenizer_keys_from_hf_text(const HfTokenizerFiles& files,
                                               const HfConfig& config) {
  CELLM_ASSIGN_OR_RETURN(const Json tokenizer,
                         parse_hf_json(files.tokenizer_json, files.tokenizer_path));
  Json tok_config = Json::object();
  if (files.tokenizer_config_json) {
    CELLM_ASSIGN_OR_RETURN(
        tok_config, parse_hf_json(*files.tokenizer_config_json, files.tokenizer_config_path));
  }
  try {
    return keys_from_json(tokenizer, tok_config, files, config);
  } catch (const Json::exception& e) {
    return data_loss(files.tokenizer_path +
                     ": unexpected value: " + text_for_message(e.what(), 160));
  }
}

GgufKeys tokenizer_keys_from_gguf(const GgufFile& file) {
  GgufKeys keys;
  for (const auto& [key, value] : file.metadata()) {
    if (key.starts_with("tokenizer.")) keys.emplace_back(key, value);
  }
  return keys;
}

}  // namespace cellm
