// Tokenizer encode throughput (bytes/s) on ~4 MB of mixed text: SPM (llama-spm vocabulary),
// byte-level BPE with GPT-2's pre-tokenizer, with Llama 3's pre-tokenizer (over the GPT-2
// vocabulary: no Llama 3 vocabulary file is available), and with DeepSeek LLM's six-pattern
// sequence. The text is made deterministically from the llama.cpp vector cases (multilingual,
// emoji, code-like) and ASCII prose, cut into documents of about 4 KB, each encoded by itself
// (no special tokens). Vocabularies come from $CELLM_TEST_MODELS (default ../shared/models).
// Run: build/<dir>/bench/tokenizer_bench
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_gguf.h"

namespace {

using cellm::EncodeOptions;
using cellm::GgufFile;
using cellm::Tokenizer;
using cellm::Vocab;

constexpr size_t kTextBytes = 4 << 20;
constexpr size_t kDocumentBytes = 4096;

std::string models_dir() {
  const char* env = std::getenv("CELLM_TEST_MODELS");
  return env != nullptr ? env : "../shared/models";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

constexpr std::string_view kProse =
    "The engine serves many sessions from one model. Each step, the scheduler packs decode "
    "tokens and prompt chunks into a single forward pass; only the rows that will be sampled "
    "go through the output head. In 2024, a 7B model needed about 14 GB in half precision, "
    "and quantized weights (Q4_0, Q8_0) cut that by a factor of 2-4.\n"
    "def encode(text: str) -> list[int]:\n    return [ord(c) for c in text]  # naive!\n\n";

// Deterministic documents: prose and shuffled vector cases, ~kDocumentBytes each.
std::vector<std::string> make_documents() {
  const std::string inp = read_file(models_dir() + "/vocab/ggml-vocab-gpt-2.gguf.inp");
  std::vector<std::string> cases;
  const std::string separator = "\n__ggml_vocab_test__\n";
  size_t start = 0;
  for (size_t end; (end = inp.find(separator, start)) != std::string::npos;
       start = end + separator.size()) {
    cases.push_back(inp.substr(start, end - start));
  }
  if (cases.empty()) {
    std::cerr << "tokenizer_bench: no vector cases under " << models_dir()
              << " (set CELLM_TEST_MODELS)\n";
    std::exit(1);
  }
  uint64_t state = 0x9E3779B97F4A7C15ull;
  const auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<size_t>(state >> 33);
  };
  std::vector<std::string> documents;
  size_t total = 0;
  std::string document;
  while (total < kTextBytes) {
    if (next() % 2 == 0) {
      document += kProse;
    } else {
      document += cases[next() % cases.size()];
      document += ' ';
    }
    if (document.size() >= kDocumentBytes) {
      total += document.size();
      documents.push_back(std::move(document));
      document.clear();
    }
  }
  return documents;
}

const std::vector<std::string>& documents() {
  static const std::vector<std::string> kDocuments = make_documents();
  return kDocuments;
}

std::optional<Tokenizer> load(const std::string& name, const std::string& pre_override = "") {
  const std::string path = models_dir() + "/vocab/ggml-vocab-" + name + ".gguf";
  cellm::StatusOr<GgufFile> file = GgufFile::open(path);
  if (!file.ok()) {
    std::cerr << file.status().to_string() << "\n";
    return std::nullopt;
  }
  cellm::StatusOr<Vocab> vocab = cellm::vocab_from_gguf(*file);
  if (!vocab.ok()) {
    std::cerr << vocab.status().to_string() << "\n";
    return std::nullopt;
  }
  if (!pre_override.empty()) {
    vocab->pre = pre_override;
    vocab->ignore_merges = pre_override == "llama-bpe";
  }
  cellm::StatusOr<Tokenizer> tokenizer = Tokenizer::from_vocab(*std::move(vocab), path);
  if (!tokenizer.ok()) {
    std::cerr << tokenizer.status().to_string() << "\n";
    return std::nullopt;
  }
  return *std::move(tokenizer);
}

void run_encode(benchmark::State& state, const std::optional<Tokenizer>& tokenizer) {
  if (!tokenizer) {
    state.SkipWithError("vocabulary not loaded");
    return;
  }
  size_t bytes = 0;
  size_t tokens = 0;
  for (auto _ : state) {
    for (const std::string& document : documents()) {
      cellm::StatusOr<std::vector<int32_t>> ids = tokenizer->encode(document, EncodeOptions{});
      if (!ids.ok()) {
        state.SkipWithError(ids.status().message().c_str());
        return;
      }
      tokens += ids->size();
      bytes += document.size();
      benchmark::DoNotOptimize(ids->data());
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["bytes_per_token"] = tokens ? static_cast<double>(bytes) / tokens : 0.0;
}

void BM_EncodeSpmLlama(benchmark::State& state) {
  static const std::optional<Tokenizer> tokenizer = load("llama-spm");
  run_encode(state, tokenizer);
}

void BM_EncodeBpeGpt2(benchmark::State& state) {
  static const std::optional<Tokenizer> tokenizer = load("gpt-2");
  run_encode(state, tokenizer);
}

void BM_EncodeBpeLlama3PreOnGpt2Vocab(benchmark::State& state) {
  static const std::optional<Tokenizer> tokenizer = load("gpt-2", "llama-bpe");
  run_encode(state, tokenizer);
}

void BM_EncodeBpeDeepseekLlm(benchmark::State& state) {
  static const std::optional<Tokenizer> tokenizer = load("deepseek-llm");
  run_encode(state, tokenizer);
}

BENCHMARK(BM_EncodeSpmLlama)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_EncodeBpeGpt2)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_EncodeBpeLlama3PreOnGpt2Vocab)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_EncodeBpeDeepseekLlm)->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
