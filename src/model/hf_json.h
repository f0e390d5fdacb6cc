// hf_json: how cellm reads the JSON files of a Hugging Face checkpoint (config.json,
// tokenizer.json, tokenizer_config.json): nlohmann-json behind a nesting cap, errors as one line
// that starts with the file's name, and short, escaped renderings of values for messages. Used by
// hf_config.cpp, gptq.cpp (quantize_config.json) and program/hf_tokenizer.cpp. It knows JSON, not
// what any of the files mean.
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"

namespace cellm {

// Real files nest 7 deep at most (tokenizer.json's post_processor). The cap keeps any input from
// reaching the recursive parts of nlohmann-json (dump, copy, compare) and of the callers' walks
// with a depth that could exhaust the stack.
inline constexpr int kMaxHfJsonDepth = 64;

// The deepest nesting of arrays and objects in `text`, counted outside strings; stops early
// past `limit`. Callers run it before nlohmann-json sees the text (safetensors headers too).
int json_depth(std::string_view text, int limit);

// Parses `text`. DataLoss "<where>: not valid JSON: ..." or "<where>: JSON nests deeper than 64
// levels"; never throws.
StatusOr<nlohmann::json> parse_hf_json(std::string_view text, std::string_view where);

// `value` as compact JSON for an error message: one line (strings escaped), at most about 60
// characters ("..." marks a cut).
std::string json_for_message(const nlohmann::json& value);

// A string from a JSON file (or an exception's text) for an error message, escaped like
// json_for_message but without the quotes, so "'{}'" formats read as before.
std::string text_for_message(std::string_view text, size_t max_chars = 60);

}  // namespace cellm
