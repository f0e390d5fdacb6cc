#include "program/program_mutants.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "gguf/gguf_writer.h"
#include "program/program_test_support.h"

namespace cellm::program_testing {
namespace {

GgufValue u32_array(std::vector<uint64_t> values) {
  std::vector<GgufValue> elements;
  elements.reserve(values.size());
  for (uint64_t v : values) elements.push_back(GgufValue::u32(static_cast<uint32_t>(v)));
  return GgufValue::array(GgufValueType::kUint32, std::move(elements));
}

std::vector<GgufValue> integers(std::optional<uint64_t> original) {
  std::vector<GgufValue> out;
  for (uint64_t v : {0ull,
                     1ull,
                     2ull,
                     3ull,
                     4ull,
                     5ull,
                     7ull,
                     8ull,
                     16ull,
                     31ull,
                     32ull,
                     48ull,
                     63ull,
                     64ull,
                     65ull,
                     255ull,
                     256ull,
                     257ull,
                     511ull,
                     512ull,
                     513ull,
                     1ull << 16,
                     (1ull << 30) - 1,
                     1ull << 30,
                     (1ull << 30) + 1,
                     0x7fffffffull,
                     0x80000000ull,
                     0xffffffffull}) {
    out.push_back(GgufValue::u32(static_cast<uint32_t>(v)));
  }
  if (original) {
    for (uint64_t v : {*original - 1, *original + 1, *original * 2, *original / 2}) {
      out.push_back(GgufValue::u32(static_cast<uint32_t>(v)));
    }
    out.push_back(GgufValue::u64(*original));  // the same value, wider: must load the same
    out.push_back(GgufValue::i32(static_cast<int32_t>(*original)));
  }
  out.push_back(GgufValue::u8(255));
  out.push_back(GgufValue::i8(-1));
  out.push_back(GgufValue::u16(65535));
  out.push_back(GgufValue::i16(-32768));
  out.push_back(GgufValue::i32(-1));
  out.push_back(GgufValue::i32(std::numeric_limits<int32_t>::min()));
  out.push_back(GgufValue::u64(1ull << 32));
  out.push_back(GgufValue::u64(std::numeric_limits<uint64_t>::max()));
  out.push_back(GgufValue::i64(-1));
  out.push_back(GgufValue::i64(std::numeric_limits<int64_t>::min()));
  out.push_back(GgufValue::i64(std::numeric_limits<int64_t>::max()));
  return out;
}

std::vector<GgufValue> floats(std::optional<double> original) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::vector<GgufValue> out;
  for (float v : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                  kInf, -kInf, -1.0f, 0.0f, -0.0f, std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::min(), 1e-30f, 1e-6f, 0.5f, 1.0f, 10000.0f, 1e30f,
                  std::numeric_limits<float>::max()}) {
    out.push_back(GgufValue::f32(v));
  }
  for (double v : {std::nan(""), std::numeric_limits<double>::infinity(), 5e-324, 1e-300, 1e300,
                   -1e300, 1e-5}) {
    out.push_back(GgufValue::f64(v));
  }
  if (original) {
    for (double v : {*original * 2, -*original, *original * 1e38}) {
      out.push_back(GgufValue::f32(static_cast<float>(v)));
    }
    out.push_back(GgufValue::f64(*original));  // the same value, wider: must load the same
  }
  return out;
}

std::vector<GgufValue> strings(const std::string* original) {
  std::vector<GgufValue> out;
  for (const char* v : {"",
                        "unknown",
                        "llama",
                        "mistral",
                        "qwen2",
                        "qwen3",
                        "gpt2",
                        "LLAMA",
                        "llama ",
                        "llama\n",
                        "bad\narchitecture",
                        "\x01\x7f",
                        "\xff\xfe\xc3",
                        "linear",
                        "none",
                        "yarn",
                        "selected",
                        "full",
                        "last",
                        "cell",
                        "paged",
                        "f32",
                        "f16",
                        "bf16",
                        "q8_0"}) {
    out.push_back(GgufValue::string(v));
  }
  out.push_back(GgufValue::string(std::string("llama\0x", 7)));
  out.push_back(GgufValue::string(std::string(70000, 'a')));
  if (original != nullptr) {
    out.push_back(GgufValue::string(*original + "x"));
    out.push_back(GgufValue::string(*original + "\n"));
  }
  return out;
}

std::vector<GgufValue> arrays(const GgufValue::Array* original) {
  std::vector<GgufValue> out;
  for (const std::vector<uint64_t>& v :
       std::vector<std::vector<uint64_t>>{{},
                                          {0},
                                          {1},
                                          {2},
                                          {1, 1},
                                          {2, 1},
                                          {1, 2, 4},
                                          {1, 0},
                                          {1, 0xffffffff},
                                          {1, (1ull << 30) + 1},
                                          {1, 1ull << 30},
                                          {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}}) {
    out.push_back(u32_array(v));
  }
  out.push_back(GgufValue::array(GgufValueType::kInt32, {GgufValue::i32(1), GgufValue::i32(-1)}));
  out.push_back(GgufValue::array(GgufValueType::kFloat32, {GgufValue::f32(1.0f)}));
  out.push_back(GgufValue::array(GgufValueType::kString, {GgufValue::string("1")}));
  out.push_back(GgufValue::array(GgufValueType::kUint64, {GgufValue::u64(1)}));
  out.push_back(GgufValue::array(GgufValueType::kBool, {GgufValue::boolean(true)}));
  out.push_back(GgufValue::array(GgufValueType::kArray, {u32_array({1})}));
  std::vector<uint64_t> huge(65536, 1);
  out.push_back(u32_array(huge));
  for (size_t i = 0; i < huge.size(); ++i) huge[i] = i + 1;
  out.push_back(u32_array(huge));
  if (original != nullptr) {
    std::vector<uint64_t> values;
    for (const GgufValue& e : original->elements) values.push_back(e.as_u64().value_or(0));
    if (!values.empty()) {
      std::vector<uint64_t> v = values;
      v.pop_back();
      out.push_back(u32_array(v));
      for (uint64_t change : {0ull, 2ull, 0xffffffffull}) {
        v = values;
        v.front() = change;
        out.push_back(u32_array(v));
        v = values;
        v.back() = change;
        out.push_back(u32_array(v));
      }
      v = values;
      v.push_back(values.back() + 1);
      out.push_back(u32_array(v));
      v = values;
      v.push_back(values.back());
      out.push_back(u32_array(v));
      v = values;
      std::reverse(v.begin(), v.end());
      out.push_back(u32_array(v));
      std::vector<GgufValue> wide;
      for (uint64_t x : values) wide.push_back(GgufValue::i64(static_cast<int64_t>(x)));
      out.push_back(GgufValue::array(GgufValueType::kInt64, std::move(wide)));
    }
  }
  return out;
}

// Bytes of `t` re-typed and re-shaped: the old bytes as far as they go, then 0x3c (finite in
// every float type). Empty when the shape is not whole blocks of the type.
std::optional<EditableTensor> reshaped(const EditableTensor& t, TensorType type,
                                       std::vector<uint64_t> dims) {
  if (dims.empty()) return std::nullopt;
  StatusOr<uint64_t> row = row_size_bytes(type, dims[0]);
  if (!row.ok()) return std::nullopt;
  uint64_t size = *row;
  for (size_t i = 1; i < dims.size(); ++i) size *= dims[i];
  if (size > (64u << 20)) return std::nullopt;
  auto bytes = std::make_shared<std::vector<uint8_t>>(size, 0x3c);
  std::copy_n(t.bytes.begin(), std::min<size_t>(size, t.bytes.size()), bytes->begin());
  EditableTensor out = t;
  out.type = type;
  out.dims = std::move(dims);
  out.bytes = *bytes;
  out.owned = std::move(bytes);
  return out;
}

EditableTensor f32_tensor(std::string name, std::vector<uint64_t> dims, float value) {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  auto bytes = std::make_shared<std::vector<uint8_t>>(n * 4);
  for (uint64_t i = 0; i < n; ++i) std::memcpy(bytes->data() + 4 * i, &value, 4);
  EditableTensor t;
  t.name = std::move(name);
  t.dims = std::move(dims);
  t.bytes = *bytes;
  t.owned = std::move(bytes);
  return t;
}

bool has_tensor(const EditableFile& file, std::string_view name) {
  return std::any_of(file.tensors.begin(), file.tensors.end(),
                     [&](const EditableTensor& t) { return t.name == name; });
}

}  // namespace

EditableFile editable_copy(const GgufFile& file) {
  EditableFile out;
  out.metadata = file.metadata();
  for (const GgufTensorInfo& info : file.tensors()) {
    out.tensors.push_back({info.name, info.type, info.dims, file.tensor_data(info), nullptr});
  }
  return out;
}

EditableFile cut_vocabulary(const GgufFile& file, size_t num_tokens) {
  EditableFile cut = editable_copy(file);
  for (auto& [key, value] : cut.metadata) {
    const GgufValue::Array* array = value.as_array();
    if (key.starts_with("tokenizer.ggml.") && key != "tokenizer.ggml.merges" && array != nullptr &&
        array->elements.size() > num_tokens) {
      std::vector<GgufValue> first(array->elements.begin(),
                                   array->elements.begin() + static_cast<ptrdiff_t>(num_tokens));
      value = GgufValue::array(array->element_type, std::move(first));
    } else if (key.ends_with(".vocab_size")) {
      value = GgufValue::u32(static_cast<uint32_t>(num_tokens));
    }
  }
  for (EditableTensor& t : cut.tensors) {
    if ((t.name == "token_embd.weight" || t.name == "output.weight") && t.dims.size() == 2 &&
        t.dims[1] > num_tokens) {
      const uint64_t row_bytes = t.bytes.size() / t.dims[1];
      t.dims[1] = num_tokens;
      t.bytes = t.bytes.first(row_bytes * num_tokens);
    }
  }
  return cut;
}

StatusOr<std::vector<uint8_t>> write_editable(const EditableFile& file,
                                              const std::string& duplicate_key,
                                              const GgufValue& duplicate_value) {
  GgufWriter writer;
  std::string stand_in = duplicate_key;
  if (!stand_in.empty()) stand_in[0] = stand_in[0] == '#' ? '%' : '#';
  for (const auto& [key, value] : file.metadata) {
    CELLM_RETURN_IF_ERROR(writer.add_metadata(key, value));
    if (key == duplicate_key) CELLM_RETURN_IF_ERROR(writer.add_metadata(stand_in, duplicate_value));
  }
  for (const EditableTensor& t : file.tensors) {
    CELLM_RETURN_IF_ERROR(writer.add_tensor(t.name, t.type, t.dims, t.bytes));
  }
  CELLM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, writer.write_bytes());
  if (!stand_in.empty()) {
    // The stand-in is written as (u64 length, bytes): find it past the first copy and rename it.
    const auto it = std::search(bytes.begin(), bytes.end(), stand_in.begin(), stand_in.end());
    if (it == bytes.end()) return internal_error("stand-in key not found");
    std::copy(duplicate_key.begin(), duplicate_key.end(), it);
  }
  return bytes;
}

std::vector<KeyTarget> key_targets(const GgufFile& file) {
  std::vector<KeyTarget> targets;
  std::string arch = "llama";
  if (const GgufValue* value = file.find("general.architecture");
      value != nullptr && value->as_string() != nullptr) {
    arch = *value->as_string();
  }
  for (const auto& [key, value] : file.metadata()) {
    if (key == "general.architecture" || key.starts_with(arch + ".") || key.starts_with("cellm.")) {
      targets.push_back({key, true});
    }
  }
  for (std::string_view suffix : config_key_suffixes()) {
    const std::string key = arch + "." + std::string(suffix);
    if (!file.has(key)) targets.push_back({key, false});
  }
  return targets;
}

Palette value_palette(const std::string& key, const GgufValue* original) {
  const bool is_float = key.ends_with("freq_base") || key.ends_with("factor") ||
                        key.ends_with("epsilon") ||
                        (original != nullptr && original->as_f64().has_value());
  const bool is_string = key == "general.architecture" || key.ends_with("scaling.type") ||
                         key.ends_with("mode") || key.ends_with("layout") ||
                         key.ends_with("dtype") || key == "cellm.source" ||
                         (original != nullptr && original->as_string() != nullptr);
  const bool is_array = key == "cellm.decode_widths" || key == "cellm.kv.heads" ||
                        key == "cellm.kv.head_dims" || key == "cellm.kv.windows" ||
                        (original != nullptr && original->as_array() != nullptr);
  std::optional<uint64_t> integer;
  std::optional<double> real;
  if (original != nullptr) {
    integer = original->as_u64();
    real = original->as_f64();
  }
  std::vector<std::vector<GgufValue>> groups = {
      integers(integer),
      floats(real),
      strings(original ? original->as_string() : nullptr),
      arrays(original ? original->as_array() : nullptr),
      {GgufValue::boolean(true), GgufValue::boolean(false)}};
  const size_t own = is_array ? 3 : is_string ? 2 : is_float ? 1 : 0;
  Palette palette;
  palette.values = groups[own];
  palette.num_own = palette.values.size();
  for (size_t g = 0; g < groups.size(); ++g) {
    if (g != own) palette.values.insert(palette.values.end(), groups[g].begin(), groups[g].end());
  }
  return palette;
}

std::vector<Edit> tensor_edits(const EditableFile& file, size_t index, int num_types,
                               std::mt19937_64& rng) {
  std::vector<Edit> edits;
  const EditableTensor& t = file.tensors[index];
  auto add = [&](std::string what, std::optional<EditableTensor> changed) {
    if (!changed) return;
    Edit edit{"'" + t.name + "' " + std::move(what), file};
    edit.file.tensors[index] = std::move(*changed);
    edits.push_back(std::move(edit));
  };
  Edit dropped{"'" + t.name + "' dropped", file};
  dropped.file.tensors.erase(dropped.file.tensors.begin() + static_cast<ptrdiff_t>(index));
  edits.push_back(std::move(dropped));
  std::vector<uint64_t> d = t.dims;
  const size_t outer = d.size() - 1;
  if (d[outer] > 1) {
    d[outer] -= 1;
    add("one row short", reshaped(t, t.type, d));
  }
  d = t.dims;
  d[outer] += 1;
  add("one row long", reshaped(t, t.type, d));
  d = t.dims;
  d[0] = d[0] > 1 ? d[0] - 1 : 2;
  add("one column short (or long)", reshaped(t, t.type, d));
  if (t.dims.size() == 2) {
    add("transposed", reshaped(t, t.type, {t.dims[1], t.dims[0]}));
    add("flattened", reshaped(t, t.type, {t.dims[0] * t.dims[1]}));
    add("with a zero dim", reshaped(t, t.type, {t.dims[0], 0}));
  } else {
    add("widened to a matrix", reshaped(t, t.type, {t.dims[0], 1}));
    add("emptied", reshaped(t, t.type, {0}));
  }
  d = t.dims;
  d.push_back(1);
  add("given an extra dim", reshaped(t, t.type, d));
  EditableTensor renamed = t;
  renamed.name = t.name + ".renamed";
  add("renamed", renamed);
  constexpr TensorType kTypes[] = {
      TensorType::kF32,  TensorType::kF16,    TensorType::kBF16,   TensorType::kQ8_0,
      TensorType::kQ4_0, TensorType::kQ5_1,   TensorType::kQ4_K,   TensorType::kQ6_K,
      TensorType::kQ8_1, TensorType::kIQ4_NL, TensorType::kI8,     TensorType::kI32,
      TensorType::kF64,  TensorType::kMXFP4,  TensorType::kQ4_G32, TensorType::kQ4_G128};
  for (int i = 0; i < num_types; ++i) {
    const TensorType type = kTypes[rng() % std::size(kTypes)];
    if (type == t.type) continue;
    add("re-typed to " + std::string(tensor_type_name(type)), reshaped(t, type, t.dims));
  }
  return edits;
}

std::vector<Edit> tensor_additions(const EditableFile& file, int64_t hidden, int64_t q_width,
                                   int64_t head_dim, int64_t num_layers) {
  std::vector<Edit> edits;
  auto add = [&](std::string what, std::vector<EditableTensor> tensors) {
    for (const EditableTensor& t : tensors) {
      if (has_tensor(file, t.name)) return;
    }
    Edit edit{std::move(what), file};
    edit.file.tensors.insert(edit.file.tensors.end(), tensors.begin(), tensors.end());
    edits.push_back(std::move(edit));
  };
  const auto n = static_cast<uint64_t>(std::max<int64_t>(head_dim / 2, 1));
  const auto h = static_cast<uint64_t>(hidden);
  const auto q = static_cast<uint64_t>(q_width);
  const auto d = static_cast<uint64_t>(head_dim);
  add("'blk.0.attn_q.bias' added", {f32_tensor("blk.0.attn_q.bias", {q}, 0.0f)});
  add("'blk.0.attn_q_norm.weight' added", {f32_tensor("blk.0.attn_q_norm.weight", {d}, 1.0f)});
  std::vector<EditableTensor> norms;
  for (int64_t i = 0; i < num_layers; ++i) {
    for (const char* which : {"q", "k"}) {
      norms.push_back(
          f32_tensor("blk." + std::to_string(i) + ".attn_" + which + "_norm.weight", {d}, 1.0f));
    }
  }
  add("q/k norms added to every layer", norms);
  add("'rope_freqs.weight' added", {f32_tensor("rope_freqs.weight", {n}, 1.0f)});
  add("'rope_freqs.weight' added one too long", {f32_tensor("rope_freqs.weight", {n + 1}, 1.0f)});
  add("'rope_freqs.weight' added as zeros", {f32_tensor("rope_freqs.weight", {n}, 0.0f)});
  add("'output.weight' added (untied)", {f32_tensor("output.weight", {h, 8}, 0.0f)});
  add("'mystery.weight' added", {f32_tensor("mystery.weight", {4}, 0.0f)});
  const std::string past = "blk." + std::to_string(num_layers) + ".attn_norm.weight";
  add("'" + past + "' added", {f32_tensor(past, {h}, 1.0f)});
  return edits;
}

std::vector<Edit> rope_factor_edits(const EditableFile& file) {
  std::vector<Edit> edits;
  for (size_t i = 0; i < file.tensors.size(); ++i) {
    const EditableTensor& t = file.tensors[i];
    if (t.name != "rope_freqs.weight" || t.type != TensorType::kF32 || t.bytes.size() < 4) continue;
    for (float value :
         {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(),
          std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min(), 2.0f}) {
      for (size_t at : {size_t{0}, t.bytes.size() / 4 - 1}) {
        auto bytes = std::make_shared<std::vector<uint8_t>>(t.bytes.begin(), t.bytes.end());
        std::memcpy(bytes->data() + 4 * at, &value, 4);
        Edit edit{
            "'rope_freqs.weight' value " + std::to_string(value) + " at " + std::to_string(at),
            file};
        edit.file.tensors[i].bytes = *bytes;
        edit.file.tensors[i].owned = std::move(bytes);
        edits.push_back(std::move(edit));
      }
    }
  }
  return edits;
}

}  // namespace cellm::program_testing
