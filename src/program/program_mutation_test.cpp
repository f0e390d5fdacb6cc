// Mutation test of what reads the meaning of a GGUF file — ModelConfig, ModelWeights, ProgramSpec
// and Program::from_file — on the shipped models and on programs exported from three of them,
// re-written thousands of times with a fixed seed (program_mutants.h): each architecture and
// program key replaced by boundary values of its own type and of every other type, removed or
// duplicated, absent keys the config reads added, tensors dropped, cut a row short, transposed,
// re-typed, renamed or added, rope factors overwritten, and random pairs of key mutations. Every
// mutant must either load with every promise recomputed independently (program_test_support.h)
// or be refused with one printable line that names the file and a key or tensor. A crash, an
// abort, an exception, a single allocation above 64 MiB during a load (outside sanitizer builds,
// which have their own allocator), or a sanitizer report fails the test (CI runs it under
// ASan/UBSan). One mutant in 40 goes through a file on disk so that refusals name a real path.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <random>

#include "core/check.h"
#include "core/file_mapping.h"
#include "core/logging.h"
#include "program/exporter.h"
#include "program/program_mutants.h"
#include "program/program_test_support.h"
#include "test_models.h"

#if defined(__SANITIZE_ADDRESS__)
#define CELLM_TRACK_ALLOCATIONS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer) || \
    __has_feature(thread_sanitizer)
#define CELLM_TRACK_ALLOCATIONS 0
#endif
#endif
#ifndef CELLM_TRACK_ALLOCATIONS
#define CELLM_TRACK_ALLOCATIONS 1
#endif

namespace {
std::atomic<bool> g_tracking{false};
std::atomic<size_t> g_largest_bytes{0};  // the largest single allocation while tracking
}  // namespace

#if CELLM_TRACK_ALLOCATIONS
void* operator new(size_t size) {
  if (g_tracking.load(std::memory_order_relaxed) &&
      size > g_largest_bytes.load(std::memory_order_relaxed)) {
    g_largest_bytes.store(size, std::memory_order_relaxed);
  }
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
// GCC pairs the free() below with inlined `new` expressions and warns; they are this malloc's.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

namespace cellm {
namespace {

using program_testing::EditableFile;

constexpr size_t kMaxLoadAllocationBytes = size_t{64} << 20;

struct Seed {
  std::string name;
  std::vector<uint8_t> bytes;  // the file; `file` and `editable` point into it
  std::unique_ptr<GgufFile> file;
  EditableFile editable;
};

// The file at `path`, or with `cut_vocabulary_to` > 0 a copy with its vocabulary cut to that many
// tokens (program_testing::cut_vocabulary).
std::unique_ptr<Seed> make_seed(std::string name, const std::string& path,
                                size_t cut_vocabulary_to) {
  auto seed = std::make_unique<Seed>();
  seed->name = std::move(name);
  StatusOr<FileMapping> mapping = FileMapping::open(path);
  CELLM_CHECK(mapping.ok()) << mapping.status().to_string();
  seed->bytes.assign(mapping->bytes().begin(), mapping->bytes().end());
  if (cut_vocabulary_to > 0) {
    StatusOr<GgufFile> whole = GgufFile::parse(seed->bytes);
    CELLM_CHECK(whole.ok()) << path << ": " << whole.status().to_string();
    StatusOr<std::vector<uint8_t>> cut =
        program_testing::write_editable(program_testing::cut_vocabulary(*whole, cut_vocabulary_to));
    CELLM_CHECK(cut.ok()) << path << ": " << cut.status().to_string();
    seed->bytes = std::move(cut).value();
  }
  StatusOr<GgufFile> file = GgufFile::parse(seed->bytes);
  CELLM_CHECK(file.ok()) << path << ": " << file.status().to_string();
  seed->file = std::make_unique<GgufFile>(std::move(file).value());
  seed->editable = program_testing::editable_copy(*seed->file);
  return seed;
}

struct Tally {
  uint64_t mutants = 0;
  uint64_t loaded = 0;
  uint64_t refused = 0;            // by the loaders
  uint64_t refused_container = 0;  // by the GGUF parser (duplicate keys)
  uint64_t unwritable = 0;         // the writer refused the edit: not a mutant
  uint64_t on_disk = 0;
  uint64_t naming_the_target = 0;  // refusals citing the mutated key or tensor itself
  size_t largest_load_bytes = 0;
  double slowest_s = 0;
  int failures = 0;
};

class MutationRun {
 public:
  explicit MutationRun(std::string dir) : dir_(std::move(dir)) {}

  // Writes, parses and loads one mutant and checks the rule; `target` is the mutated key or
  // tensor (for the tally of refusals that cite it).
  void check(const Seed& seed, const std::string& what, const EditableFile& mutant,
             const std::string& target, const std::string& duplicate_key = "",
             const GgufValue& duplicate_value = {}) {
    StatusOr<std::vector<uint8_t>> bytes =
        program_testing::write_editable(mutant, duplicate_key, duplicate_value);
    if (!bytes.ok()) {
      ++tally_.unwritable;
      return;
    }
    ++tally_.mutants;
    const bool on_disk = tally_.mutants % 40 == 0;
    const std::string path = dir_ + "/mutant.gguf";
    if (on_disk) {
      ++tally_.on_disk;
      std::ofstream(path, std::ios::binary)
          .write(reinterpret_cast<const char*>(bytes->data()),
                 static_cast<std::streamsize>(bytes->size()));
    }
    std::string problem;
    const auto start = std::chrono::steady_clock::now();
    try {
      StatusOr<GgufFile> file = on_disk ? GgufFile::open(path) : GgufFile::parse(*bytes);
      if (!file.ok()) {
        ++tally_.refused_container;
        const program_testing::KnownNames names{{duplicate_key, target}, {}};
        problem = program_testing::check_refusal(
            file.status(), on_disk ? path + ": gguf" : std::string("gguf"), &names);
        if (duplicate_key.empty()) problem = "the parser refused: " + file.status().to_string();
      } else if (!duplicate_key.empty()) {
        problem = "the parser accepted a duplicate key";
      } else {
        g_largest_bytes = 0;
        g_tracking = true;
        const program_testing::LoadOutcome outcome =
            program_testing::load_and_check(std::move(file).value());
        g_tracking = false;
        tally_.largest_load_bytes = std::max(tally_.largest_load_bytes, g_largest_bytes.load());
        if (g_largest_bytes > kMaxLoadAllocationBytes) {
          problem = "allocated " + std::to_string(g_largest_bytes) + " bytes at once";
        }
        if (problem.empty()) problem = outcome.problem;
        if (outcome.loaded) {
          ++tally_.loaded;
        } else {
          ++tally_.refused;
          if (!target.empty() && outcome.refusal.find(target) != std::string::npos) {
            ++tally_.naming_the_target;
          }
        }
      }
    } catch (const std::exception& e) {
      g_tracking = false;
      problem = std::string("exception: ") + e.what();
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    tally_.slowest_s = std::max(tally_.slowest_s, seconds);
    if (seconds > 2.0) problem += " (took " + std::to_string(seconds) + " s)";
    if (!problem.empty() && ++tally_.failures <= 400) {
      ADD_FAILURE() << seed.name << ": " << what << ": " << problem;
    }
  }

  const Tally& tally() const { return tally_; }

 private:
  std::string dir_;
  Tally tally_;
};

std::string describe(const std::string& key, const GgufValue& value) {
  return "'" + key + "' := " + value.summary(4).substr(0, 60);
}

EditableFile with_value(const EditableFile& source, const std::string& key,
                        const GgufValue* value) {
  EditableFile mutant = source;
  auto it = std::find_if(mutant.metadata.begin(), mutant.metadata.end(),
                         [&](const auto& kv) { return kv.first == key; });
  if (it == mutant.metadata.end()) {
    if (value != nullptr) mutant.metadata.emplace_back(key, *value);
  } else if (value == nullptr) {
    mutant.metadata.erase(it);
  } else {
    it->second = *value;
  }
  return mutant;
}

// Key mutations of one seed: each target removed, duplicated, and given `num_own` values of its
// own type (all when negative) plus `num_other` of other types; then `num_pairs` random pairs of
// such changes.
void mutate_keys(const Seed& seed, int num_own, int num_other, int num_pairs, std::mt19937_64& rng,
                 MutationRun* run) {
  const std::vector<program_testing::KeyTarget> targets = program_testing::key_targets(*seed.file);
  std::vector<std::pair<std::string, GgufValue>> singles;
  for (const program_testing::KeyTarget& target : targets) {
    const GgufValue* original = seed.file->find(target.key);
    if (target.present) {
      run->check(seed, "'" + target.key + "' removed",
                 with_value(seed.editable, target.key, nullptr), target.key);
      run->check(seed, "'" + target.key + "' duplicated", seed.editable, target.key, target.key,
                 *original);
      run->check(seed, "'" + target.key + "' duplicated as u32 1", seed.editable, target.key,
                 target.key, GgufValue::u32(1));
    }
    const program_testing::Palette palette = program_testing::value_palette(target.key, original);
    std::vector<size_t> picks;
    for (size_t i = 0; i < palette.num_own; ++i) picks.push_back(i);
    for (size_t i = picks.size(); i > 1; --i) std::swap(picks[i - 1], picks[rng() % i]);
    if (num_own >= 0 && picks.size() > static_cast<size_t>(num_own)) picks.resize(num_own);
    for (int i = 0; i < num_other && palette.values.size() > palette.num_own; ++i) {
      picks.push_back(palette.num_own + rng() % (palette.values.size() - palette.num_own));
    }
    for (size_t pick : picks) {
      const GgufValue& value = palette.values[pick];
      run->check(seed, describe(target.key, value), with_value(seed.editable, target.key, &value),
                 target.key);
      singles.emplace_back(target.key, value);
    }
  }
  // The config's fallback for the vocabulary size; the tokenizer's own keys are its tests'
  // business.
  if (seed.file->has("tokenizer.ggml.tokens")) {
    run->check(seed, "'tokenizer.ggml.tokens' removed",
               with_value(seed.editable, "tokenizer.ggml.tokens", nullptr),
               "tokenizer.ggml.tokens");
  }
  for (int i = 0; i < num_pairs && !singles.empty(); ++i) {
    const auto& [key_a, value_a] = singles[rng() % singles.size()];
    const auto& [key_b, value_b] = singles[rng() % singles.size()];
    run->check(seed, describe(key_a, value_a) + " and " + describe(key_b, value_b),
               with_value(with_value(seed.editable, key_a, &value_a), key_b, &value_b), "");
  }
}

// Tensor mutations: every edit of the global tensors and of the first and last layer's, a few
// of the others'; optional parts added; rope factors overwritten.
void mutate_tensors(const Seed& seed, int per_middle_tensor, std::mt19937_64& rng,
                    MutationRun* run) {
  StatusOr<ModelConfig> config = ModelConfig::from_gguf(*seed.file);
  ASSERT_TRUE(config.ok()) << seed.name << ": " << config.status().to_string();
  const std::string last = "blk." + std::to_string(config->num_layers - 1) + ".";
  for (size_t i = 0; i < seed.editable.tensors.size(); ++i) {
    const std::string& name = seed.editable.tensors[i].name;
    const bool all =
        !name.starts_with("blk.") || name.starts_with("blk.0.") || name.starts_with(last);
    std::vector<program_testing::Edit> edits =
        program_testing::tensor_edits(seed.editable, i, all ? 3 : 1, rng);
    for (size_t e = 0; e < edits.size(); ++e) {
      if (!all && static_cast<int>(rng() % edits.size()) >= per_middle_tensor) continue;
      run->check(seed, edits[e].what, edits[e].file, name);
    }
  }
  for (const program_testing::Edit& edit :
       program_testing::tensor_additions(seed.editable, config->hidden_size, config->q_width(),
                                         config->head_dim, config->num_layers)) {
    run->check(seed, edit.what, edit.file, "");
  }
  for (const program_testing::Edit& edit : program_testing::rope_factor_edits(seed.editable)) {
    run->check(seed, edit.what, edit.file, "rope_freqs.weight");
  }
}

std::string export_seed(const std::string& dir, const std::string& model, ExportQuant quant,
                        int32_t max_step_tokens, std::vector<int32_t> widths) {
  ExportOptions options;
  options.input = testing::test_model_path(model);
  options.output = dir + "/" + std::filesystem::path(model).stem().string() + ".cellm.gguf";
  options.quant = quant;
  options.max_seq_len = 1024;
  options.max_step_tokens = max_step_tokens;
  options.max_cells = 4096;
  options.decode_widths = std::move(widths);
  options.kv_dtype = KvDtype::kF16;
  StatusOr<ExportReport> report = export_program(options);
  CELLM_CHECK(report.ok()) << report.status().to_string();
  return options.output;
}

TEST(ProgramMutationTest, EveryMutantLoadsWithItsInvariantsOrFailsWithOneLineNamingTheKey) {
  const auto start = std::chrono::steady_clock::now();
  const std::string dir =
      ::testing::TempDir() + "cellm_program_mutation_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const LogLevel log_level = cellm::log_level();
  set_log_level(LogLevel::kWarn);  // a plain model's defaults are said at info level, per load
  // llama-2-tiny-random's 32,000 tokens make each of its mutants 20 times slower to write and
  // parse than stories260K's: the whole file is only checked to load, its mutants come from a
  // copy with its vocabulary cut to 512 tokens.
  const std::string models = testing::test_models_dir();
  StatusOr<GgufFile> whole = GgufFile::open(models + "/llama-2-tiny-random.gguf");
  ASSERT_TRUE(whole.ok()) << whole.status().to_string();
  const program_testing::LoadOutcome whole_outcome =
      program_testing::load_and_check(std::move(whole).value());
  ASSERT_TRUE(whole_outcome.loaded && whole_outcome.problem.empty()) << whole_outcome.problem;
  struct Plan {
    std::string name;
    std::string path;
    size_t cut_vocabulary_to;  // 0: the file as it is
    int num_own;               // boundary values of the key's own type per key; -1: all of them
    int num_other;             // values of other types per key
    int num_pairs;             // random pairs of key mutations
    int per_middle_tensor;     // edits of each tensor of a middle layer, on average
  };
  const std::vector<Plan> plans = {
      {"stories260K.gguf", models + "/stories260K.gguf", 0, -1, 8, 60, 1},
      {"llama-2-tiny-random.gguf (vocabulary cut to 512)", models + "/llama-2-tiny-random.gguf",
       512, 14, 4, 40, 1},
      {"arch/tiny-llama3.gguf", models + "/arch/tiny-llama3.gguf", 0, 14, 4, 40, 1},
      {"arch/tiny-mistral.gguf", models + "/arch/tiny-mistral.gguf", 0, 14, 4, 40, 1},
      {"arch/tiny-qwen2.gguf", models + "/arch/tiny-qwen2.gguf", 0, 14, 4, 40, 1},
      {"arch/tiny-qwen3.gguf", models + "/arch/tiny-qwen3.gguf", 0, 14, 4, 40, 1},
      {"stories260K program", export_seed(dir, "stories260K.gguf", ExportQuant::kKeep, 64, {}), 0,
       14, 6, 80, 1},
      {"tiny-llama3 q8_0 program",
       export_seed(dir, "arch/tiny-llama3.gguf", ExportQuant::kQ8_0, 128, {1, 2, 3, 8}), 0, 14, 4,
       60, 1},
      {"tiny-qwen3 f16 program",
       export_seed(dir, "arch/tiny-qwen3.gguf", ExportQuant::kF16, 256, {1}), 0, 14, 4, 60, 1},
  };
  std::mt19937_64 rng(0x70726f6772616d);  // fixed: every run sees the same mutants
  MutationRun run(dir);
  for (const Plan& plan : plans) {
    const std::unique_ptr<Seed> seed = make_seed(plan.name, plan.path, plan.cut_vocabulary_to);
    // The unmutated file must load and keep every promise, or the mutants test nothing.
    const program_testing::LoadOutcome base =
        program_testing::load_and_check(GgufFile::parse(seed->bytes).value());
    ASSERT_TRUE(base.loaded && base.problem.empty()) << plan.name << ": " << base.problem;
    mutate_keys(*seed, plan.num_own, plan.num_other, plan.num_pairs, rng, &run);
    mutate_tensors(*seed, plan.per_middle_tensor, rng, &run);
  }
  set_log_level(log_level);
  std::filesystem::remove_all(dir);
  const Tally& t = run.tally();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "program mutants: %llu (%llu loaded and checked, %llu refused by the loaders, %llu of them "
      "citing the mutated key or tensor itself, %llu refused by the parser; %llu through files on "
      "disk; %llu edits the writer refused) in %.2f s; slowest %.3f s; largest allocation in a "
      "load %s\n",
      static_cast<unsigned long long>(t.mutants), static_cast<unsigned long long>(t.loaded),
      static_cast<unsigned long long>(t.refused),
      static_cast<unsigned long long>(t.naming_the_target),
      static_cast<unsigned long long>(t.refused_container),
      static_cast<unsigned long long>(t.on_disk), static_cast<unsigned long long>(t.unwritable),
      seconds, t.slowest_s,
      CELLM_TRACK_ALLOCATIONS ? (std::to_string(t.largest_load_bytes) + " bytes").c_str()
                              : "not tracked (sanitizer build)");
  EXPECT_EQ(t.failures, 0);
  EXPECT_GE(t.mutants, 3000u);
  // Both outcomes must be common, or the mutations are too gentle or too destructive to test
  // anything.
  EXPECT_GE(t.loaded, t.mutants / 20);
  EXPECT_GE(t.refused, t.mutants / 4);
  EXPECT_GE(t.refused_container, 20u);
}

}  // namespace
}  // namespace cellm
