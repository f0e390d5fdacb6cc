// About 8,000 seeded mutants of four small Hugging Face tokenizers (Llama 3 and GPT-2 byte-level
// BPE, SentencePiece-style BPE, Unigram: hf_tokenizer_test_util.h) through
// tokenizer_keys_from_hf_text: a sweep of single mutations of tokenizer.json and
// tokenizer_config.json (every key removed; every value replaced by the boundaries of its type,
// by values of other types, by deep nesting and a long array; known keys added), then random
// mixes of semantic mutations and JSON damage (json_mutator_test_util.h). Every mutant either
// converts into keys that keep hf_tokenizer_test_util.h's promises — the engine's own tokenizer
// loads them — or is refused with an expected code and a one-line message that starts with the
// name of one of the two files, within 2 s. Never a crash, an escaping exception or a sanitizer
// report (CI runs it under ASan/UBSan).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "model/json_mutator_test_util.h"
#include "program/hf_tokenizer.h"
#include "program/hf_tokenizer_test_util.h"

namespace cellm {
namespace {

using Json = nlohmann::json;
namespace ht = hf_tokenizer_testing;

// Keys the converter reads, in tokenizer.json or tokenizer_config.json.
std::vector<std::string> tokenizer_keys() {
  return {"model",
          "type",
          "vocab",
          "merges",
          "byte_fallback",
          "unk_token",
          "ignore_merges",
          "added_tokens",
          "id",
          "content",
          "special",
          "normalizer",
          "normalizers",
          "pre_tokenizer",
          "pretokenizers",
          "pattern",
          "Regex",
          "use_regex",
          "individual_digits",
          "prepend_scheme",
          "add_prefix_space",
          "post_processor",
          "single",
          "SpecialToken",
          "bos_token",
          "eos_token",
          "pad_token",
          "add_bos_token",
          "add_eos_token",
          "chat_template",
          "name",
          "template"};
}

std::vector<std::string> tokenizer_strings() {
  return {"BPE",          "Unigram", "WordPiece", "ByteLevel", "Metaspace",
          "Sequence",     "Split",   "Digits",    "Prepend",   "Whitespace",
          "\xe2\x96\x81", "<s>",     "</s>",      "<unk>",     "<0x41>",
          "<0xZZ>",       "a b",     "a b c",     "H e",       "l l",
          "default",      "always",  "never",     "first",     "line one\nline two"};
}

struct Counts {
  int converted = 0;
  int refused = 0;
};

// Converts one mutant (`files` with one file's text mutated) and checks the outcome.
void check_mutant(const ht::Sample& sample, const HfTokenizerFiles& files, const std::string& what,
                  Counts* counts) {
  const auto start = std::chrono::steady_clock::now();
  StatusOr<GgufKeys> keys = tokenizer_keys_from_hf_text(files, sample.config);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_LT(seconds, 2.0) << sample.name << ": mutation: " << what;
  if (!keys.ok()) {
    ++counts->refused;
    const Status& status = keys.status();
    const StatusCode code = status.code();
    ASSERT_TRUE(code == StatusCode::kDataLoss || code == StatusCode::kNotFound ||
                code == StatusCode::kUnimplemented)
        << status.to_string() << "\n"
        << sample.name << ": mutation: " << what;
    const std::string& message = status.message();
    ASSERT_TRUE(message.rfind(files.tokenizer_path + ": ", 0) == 0 ||
                message.rfind(files.tokenizer_config_path + ": ", 0) == 0)
        << message << "\n"
        << sample.name << ": mutation: " << what;
    ASSERT_EQ(message.find('\n'), std::string::npos) << message << "\n"
                                                     << sample.name << ": mutation: " << what;
    ASSERT_LE(message.size(), 300u) << message.substr(0, 300) << "\n"
                                    << sample.name << ": mutation: " << what;
    return;
  }
  ++counts->converted;
  Json tokenizer_config = nullptr;
  ASSERT_TRUE(Json::accept(files.tokenizer_json))
      << "converted a tokenizer.json that is not JSON; " << sample.name << ": mutation: " << what;
  if (files.tokenizer_config_json) {
    ASSERT_TRUE(Json::accept(*files.tokenizer_config_json))
        << "converted a tokenizer_config.json that is not JSON; " << sample.name
        << ": mutation: " << what;
    tokenizer_config = Json::parse(*files.tokenizer_config_json);
  }
  ASSERT_EQ(ht::check_tokenizer_keys(*keys, sample.config, tokenizer_config), "")
      << sample.name << ": mutation: " << what;
}

TEST(HfTokenizerMutationTest, EveryMutantConvertsSanelyOrFailsWithOneLineNamingTheFile) {
  const std::vector<ht::Sample> samples = ht::samples();
  for (const ht::Sample& sample : samples) {
    StatusOr<GgufKeys> keys = tokenizer_keys_from_hf_text(sample.files, sample.config);
    ASSERT_TRUE(keys.ok()) << sample.name << ": " << keys.status().to_string();
    const Json config = sample.files.tokenizer_config_json
                            ? Json::parse(*sample.files.tokenizer_config_json)
                            : Json(nullptr);
    ASSERT_EQ(ht::check_tokenizer_keys(*keys, sample.config, config), "") << sample.name;
  }

  const auto start = std::chrono::steady_clock::now();
  json_mutation_testing::JsonMutator mutator(20250612, tokenizer_keys(), tokenizer_strings());
  Counts sweep;
  Counts random;
  for (const ht::Sample& sample : samples) {
    HfTokenizerFiles files = sample.files;
    files.tokenizer_path = "mutants/tokenizer.json";
    files.tokenizer_config_path = "mutants/tokenizer_config.json";
    // Single mutations of tokenizer.json (every key removed, every value replaced by every boundary
    // of its type and about 3 other palette values, known keys added with about 1), then of
    // tokenizer_config.json (about 8 and 2).
    mutator.sweep(sample.files.tokenizer_json, 3, 1,
                  [&](const std::string& what, std::string text) {
                    if (HasFatalFailure()) return;
                    HfTokenizerFiles mutant = files;
                    mutant.tokenizer_json = std::move(text);
                    check_mutant(sample, mutant, "tokenizer.json: " + what, &sweep);
                  });
    ASSERT_FALSE(HasFatalFailure());
    if (sample.files.tokenizer_config_json) {
      mutator.sweep(*sample.files.tokenizer_config_json, 8, 2,
                    [&](const std::string& what, std::string text) {
                      if (HasFatalFailure()) return;
                      HfTokenizerFiles mutant = files;
                      mutant.tokenizer_config_json = std::move(text);
                      check_mutant(sample, mutant, "tokenizer_config.json: " + what, &sweep);
                    });
      ASSERT_FALSE(HasFatalFailure());
    }
    // Random mixes, mostly of tokenizer.json.
    constexpr int kRandomPerSample = 500;
    for (int i = 0; i < kRandomPerSample; ++i) {
      HfTokenizerFiles mutant = files;
      std::string file = "tokenizer.json";
      if (sample.files.tokenizer_config_json && mutator.pick(4) == 0) {
        mutant.tokenizer_config_json = mutator.mutate(*sample.files.tokenizer_config_json);
        file = "tokenizer_config.json";
      } else {
        mutant.tokenizer_json = mutator.mutate(sample.files.tokenizer_json);
      }
      check_mutant(sample, mutant, file + ": " + mutator.description(), &random);
      ASSERT_FALSE(HasFatalFailure());
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(sweep.refused, 500);
  EXPECT_GT(sweep.converted, 1000);
  EXPECT_GT(random.refused, random.converted / 2);
  EXPECT_GT(random.converted, 200);
  std::printf("sweep: %d converted, %d refused; random: %d converted, %d refused; %.2f s\n",
              sweep.converted, sweep.refused, random.converted, random.refused, seconds);
}

}  // namespace
}  // namespace cellm
