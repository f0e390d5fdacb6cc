// StreamingDetokenizer over the vocabularies' multi-byte vector cases: fed one id at a time it
// never emits invalid UTF-8 and its pieces add up to the full decode; stop strings are held
// back and cut the stream.
#include "tokenizer/streaming_detokenizer.h"

#include <gtest/gtest.h>

#include "tokenizer/tokenizer_test_util.h"
#include "tokenizer/utf8.h"

namespace cellm {
namespace {

using testing::load_tokenizer;
using testing::read_vectors;
using tokenizer_internal::is_valid_utf8;

bool has_multibyte(const std::string& text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return true;
  }
  return false;
}

class StreamingVectorsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(StreamingVectorsTest, MultiByteCasesStreamAsValidUtf8AndAddUpToTheDecode) {
  std::optional<Tokenizer> tokenizer = load_tokenizer("vocab/ggml-vocab-" + GetParam() + ".gguf");
  ASSERT_TRUE(tokenizer.has_value());
  int num_multibyte = 0;
  int num_split_characters = 0;  // chunks that ended before a character did
  for (const testing::VectorCase& c : read_vectors(GetParam())) {
    if (!has_multibyte(c.text)) continue;
    ++num_multibyte;
    StreamingDetokenizer stream(*tokenizer);
    std::string streamed;
    for (int32_t id : c.ids) {
      StatusOr<std::string> chunk = stream.push(id);
      ASSERT_TRUE(chunk.ok()) << chunk.status().to_string();
      EXPECT_TRUE(is_valid_utf8(*chunk)) << "case '" << c.text << "' after id " << id;
      const std::string_view piece = tokenizer->token_piece(id, false);
      if (!is_valid_utf8(piece)) ++num_split_characters;
      streamed += *chunk;
    }
    const std::string tail = stream.finish();
    EXPECT_TRUE(tail.empty()) << "nothing should be left after a complete text";
    streamed += tail;
    StatusOr<std::string> full = tokenizer->decode(c.ids, DecodeOptions{});
    ASSERT_TRUE(full.ok());
    EXPECT_EQ(streamed, *full) << "case '" << c.text << "'";
  }
  EXPECT_GE(num_multibyte, 8);
  EXPECT_GT(num_split_characters, 0) << "the cases should split characters across tokens";
}

INSTANTIATE_TEST_SUITE_P(ByteFallbackAndByteLevel, StreamingVectorsTest,
                         ::testing::Values("llama-spm", "gpt-2", "deepseek-llm", "falcon"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

// Encodes `text` and streams it through `stream`; returns the chunks.
std::vector<std::string> stream_chunks(const Tokenizer& tokenizer, std::string_view text,
                                       StreamingDetokenizer* stream) {
  std::vector<std::string> chunks;
  const StatusOr<std::vector<int32_t>> ids = tokenizer.encode(text, EncodeOptions{});
  EXPECT_TRUE(ids.ok());
  if (!ids.ok()) return chunks;
  for (int32_t id : *ids) {
    chunks.push_back(*stream->push(id));
  }
  chunks.push_back(stream->finish());
  return chunks;
}

TEST(StreamingDetokenizerTest, StopStringCutsTheTextBeforeIt) {
  std::optional<Tokenizer> tokenizer = load_tokenizer("vocab/ggml-vocab-gpt-2.gguf");
  ASSERT_TRUE(tokenizer.has_value());
  StreamingDetokenizer stream(*tokenizer, DecodeOptions{}, {"\nUser:"});
  std::string out;
  for (const std::string& chunk :
       stream_chunks(*tokenizer, "The answer is 4.\nUser: and 3+3?", &stream)) {
    out += chunk;
  }
  EXPECT_EQ(out, "The answer is 4.");
  EXPECT_TRUE(stream.stopped());
  EXPECT_EQ(stream.matched_stop_string(), "\nUser:");
}

TEST(StreamingDetokenizerTest, PossibleStopPrefixIsHeldUntilRuledOut) {
  std::optional<Tokenizer> tokenizer = load_tokenizer("vocab/ggml-vocab-gpt-2.gguf");
  ASSERT_TRUE(tokenizer.has_value());
  StreamingDetokenizer stream(*tokenizer, DecodeOptions{}, {" STOPPING"});
  // "ĠSTOP" decodes to " STOP", a prefix of the stop string: it must not be emitted while the
  // stop string may still follow; "Ġnow" rules it out.
  const auto id = [&](std::string_view text) {
    const std::optional<int32_t> found = tokenizer->token_id(text);
    EXPECT_TRUE(found.has_value()) << text;
    return found.value_or(0);
  };
  EXPECT_EQ(*stream.push(id("Go")), "Go");
  EXPECT_EQ(*stream.push(id("ĠSTOP")), "");
  EXPECT_EQ(*stream.push(id("Ġnow")), " STOP now");
  EXPECT_FALSE(stream.stopped());
  EXPECT_EQ(stream.finish(), "");
}

TEST(StreamingDetokenizerTest, IncompleteCharacterAtTheEndBecomesReplacement) {
  std::optional<Tokenizer> tokenizer = load_tokenizer("vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(tokenizer.has_value());
  StreamingDetokenizer stream(*tokenizer);
  // <0xE2> <0x96>: the first two bytes of a three-byte character.
  EXPECT_EQ(*stream.push(*tokenizer->token_id("<0xE2>")), "");  // ids of the real vocabulary
  EXPECT_EQ(*stream.push(*tokenizer->token_id("<0x96>")), "");
  EXPECT_EQ(stream.finish(), "\xEF\xBF\xBD\xEF\xBF\xBD");
  StreamingDetokenizer bad(*tokenizer);
  EXPECT_FALSE(bad.push(32000).ok());
}

}  // namespace
}  // namespace cellm
