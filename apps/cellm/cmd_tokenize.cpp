// `cellm tokenize --model F [--special] [--parse-special] [--json] TEXT`: the token ids of TEXT,
// one line per token ("id<TAB>'piece'", pieces escaped), or `{"ids": [...]}` with --json.
// `cellm detokenize --model F [--special] IDS...`: the text of ids given as one or more
// arguments separated by commas or spaces. Both read only the vocabulary, so vocabulary-only
// GGUF files work. Errors: one line on stderr, exit status 1.
#include <fmt/format.h>

#include <climits>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace cellm::app {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string text;
  std::vector<std::string> ids;
  bool special = false;
  bool parse_special = false;
  bool json = false;
};

StatusOr<Tokenizer> load(const std::string& path) {
  CELLM_ASSIGN_OR_RETURN(const GgufFile file, GgufFile::open(path));
  return Tokenizer::from_gguf(file);
}

// Printable form of a piece: \n, \t, \\, \' and other control or invalid bytes as \xNN.
std::string escape(std::string_view piece) {
  std::string out;
  for (char c : piece) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\\' || c == '\'') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7F) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out;
}

int fail(std::string_view command, const Status& status) {
  std::cerr << "cellm " << command << ": " << status.message() << "\n";
  return 1;
}

int run_tokenize(const TokenizeOptions& options) {
  StatusOr<Tokenizer> tokenizer = load(options.model);
  if (!tokenizer.ok()) return fail("tokenize", tokenizer.status());
  StatusOr<std::vector<int32_t>> ids = tokenizer->encode(
      options.text,
      EncodeOptions{.add_special = options.special, .parse_special = options.parse_special});
  if (!ids.ok()) return fail("tokenize", ids.status());
  if (options.json) {
    std::cout << nlohmann::json{{"ids", *ids}}.dump() << "\n";
    return 0;
  }
  for (int32_t id : *ids) {
    std::cout << id << "\t'" << escape(tokenizer->token_piece(id, /*render_special=*/true))
              << "'\n";
  }
  return 0;
}

StatusOr<std::vector<int32_t>> parse_ids(const std::vector<std::string>& arguments) {
  std::vector<int32_t> ids;
  for (const std::string& argument : arguments) {
    size_t i = 0;
    while (i < argument.size()) {
      if (argument[i] == ',' || argument[i] == ' ' || argument[i] == '\t' || argument[i] == '\n') {
        ++i;
        continue;
      }
      size_t end = i;
      while (end < argument.size() && argument[end] != ',' && argument[end] != ' ' &&
             argument[end] != '\t' && argument[end] != '\n') {
        ++end;
      }
      const std::string token = argument.substr(i, end - i);
      size_t used = 0;
      long long value = 0;
      try {
        value = std::stoll(token, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != token.size() || value < 0 || value > INT32_MAX) {
        return invalid_argument(fmt::format("'{}' is not a token id", token));
      }
      ids.push_back(static_cast<int32_t>(value));
      i = end;
    }
  }
  return ids;
}

int run_detokenize(const TokenizeOptions& options) {
  StatusOr<std::vector<int32_t>> ids = parse_ids(options.ids);
  if (!ids.ok()) return fail("detokenize", ids.status());
  StatusOr<Tokenizer> tokenizer = load(options.model);
  if (!tokenizer.ok()) return fail("detokenize", tokenizer.status());
  StatusOr<std::string> text =
      tokenizer->decode(*ids, DecodeOptions{.render_special = options.special});
  if (!text.ok()) return fail("detokenize", text.status());
  std::cout << *text << "\n";
  return 0;
}

}  // namespace

void add_tokenize_commands(CLI::App& app, CommandResult& result) {
  auto options = std::make_shared<TokenizeOptions>();

  CLI::App* tokenize = app.add_subcommand("tokenize", "Print the token ids of a text");
  tokenize->add_option("--model", options->model, "GGUF file (a vocabulary-only file is enough)")
      ->required();
  tokenize->add_flag("--special", options->special, "Add BOS/EOS as the vocabulary says");
  tokenize->add_flag("--parse-special", options->parse_special,
                     "Turn special-token text (<s>, <|im_end|>) into those tokens");
  tokenize->add_flag("--json", options->json, "Print {\"ids\": [...]}");
  tokenize->add_option("text", options->text, "Text to tokenize")->required();
  tokenize->callback([options, &result] { result.exit_code = run_tokenize(*options); });

  CLI::App* detokenize = app.add_subcommand("detokenize", "Print the text of token ids");
  detokenize->add_option("--model", options->model, "GGUF file (a vocabulary-only file is enough)")
      ->required();
  detokenize->add_flag("--special", options->special, "Render control tokens as their text");
  detokenize->add_option("ids", options->ids, "Token ids, separated by commas or spaces")
      ->required();
  detokenize->callback([options, &result] { result.exit_code = run_detokenize(*options); });
}

}  // namespace cellm::app
