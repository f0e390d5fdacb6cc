// Test-only: a seeded mutator of JSON documents for the mutation tests of the Hugging Face JSON
// parsers (hf_config_mutation_test, hf_tokenizer_mutation_test). Not part of cellm_model.
// Two kinds of mutation, mixed: semantic ones on the parsed tree (a value replaced by one of
// another type — null, bools, 0, negatives, 2^30 ± 1, 2^31, 2^63, 2^64 − 1, 1e30, 1e39, floats
// where integers belong, empty strings, arrays and objects —, a neighbour of a number, a key
// removed, a known key added, an array made very long, a value wrapped or nested thousands deep)
// and structural damage to the text (truncation, deleted, duplicated and swapped bytes, flipped
// brackets, stray and non-UTF-8 bytes). It knows JSON, not what any parser expects: callers pass
// the keys and strings worth trying. Deterministic for a seed. Thread-safety: one per thread.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace cellm::json_mutation_testing {

using Json = nlohmann::json;

class JsonMutator {
 public:
  // `keys`: key names to add to objects; `strings`: string values worth trying.
  JsonMutator(uint32_t seed, std::vector<std::string> keys, std::vector<std::string> strings)
      : rng_(seed), keys_(std::move(keys)) {
    palette_.emplace_back(nullptr);
    palette_.emplace_back(true);
    palette_.emplace_back(false);
    for (int64_t x : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{3}, int64_t{-1}, int64_t{-2},
                      int64_t{7}, int64_t{64}, int64_t{1} << 30, (int64_t{1} << 30) + 1,
                      int64_t{INT32_MAX}, int64_t{1} << 31, int64_t{INT32_MIN}, int64_t{1} << 32,
                      (int64_t{1} << 53) + 1, INT64_MAX, INT64_MIN}) {
      palette_.emplace_back(x);
    }
    palette_.emplace_back(std::numeric_limits<uint64_t>::max());
    for (double x :
         {1e30, -1e30, 1e39, 3.5e38, 1e300, 1e-30, 1e-46, 1e-300, 0.5, -0.5, 2.0, 16.0, -0.0}) {
      palette_.emplace_back(x);
    }
    for (const char* x : {"", " ", "\n", "x", "0", "null"}) palette_.emplace_back(x);
    for (Json x : {Json::array(), Json::object(), Json::array({1}), Json::array({0, 1}),
                   Json::array({nullptr}), Json::array({"a", "b"}), Json::object({{"a", 1}})}) {
      palette_.push_back(std::move(x));
    }
    for (std::string& s : strings) palette_.emplace_back(std::move(s));
  }

  // A mutant of `base` (a valid document's text): semantic mutations, structural damage, or both.
  std::string mutate(const std::string& base) {
    description_.clear();
    const uint32_t mode = pick(20);
    std::string text = base;
    if (mode >= 5) {  // semantic (75%)
      Json root = Json::parse(base);
      const uint32_t num_edits = 1 + pick(3);
      for (uint32_t i = 0; i < num_edits; ++i) mutate_tree(&root);
      text = to_text(root);
    }
    if (mode < 8) {  // structural (40%, with 15% on a semantically mutated document)
      const uint32_t num_edits = 1 + pick(3);
      for (uint32_t i = 0; i < num_edits; ++i) damage(&text);
    }
    return text;
  }

  // Every single mutation of `base` (a valid document's text), for a sweep before the random
  // mutants: each node but the root removed, replaced by palette values, by deep nesting and by a
  // long array of itself, a number by every boundary number, a string by an empty, a multi-line
  // and a long one; each object given each known key it lacks, with palette values.
  // About `per_node` palette values per node and `per_key` per added key, drawn at random (a
  // count of at least the palette's size: every value). Calls visit(description, text) for each
  // mutant, in a fixed order for a seed.
  template <typename Visit>
  void sweep(const std::string& base, size_t per_node, size_t per_key, Visit&& visit) {
    const Json root = Json::parse(base);
    Json scratch = root;
    std::vector<Node> nodes;
    collect(&scratch, nullptr, "", 0, "", &nodes);
    const auto values = [&](size_t count) {
      std::vector<size_t> indices;
      for (size_t v = 0; v < palette_.size(); ++v) {
        if (count >= palette_.size() || pick(static_cast<uint32_t>(palette_.size())) < count) {
          indices.push_back(v);
        }
      }
      return indices;
    };
    const auto shown = [](const std::string& path) { return path.empty() ? "/" : path; };
    for (const Node& n : nodes) {
      const Json::json_pointer pointer(n.path);
      const auto emit = [&](const std::string& what, Json value) {
        Json copy = root;
        copy.at(pointer) = std::move(value);
        visit(shown(n.path) + " := " + what, to_text(copy));
      };
      if (n.parent != nullptr) {
        Json copy = root;
        Json& parent = copy.at(pointer.parent_pointer());
        if (parent.is_object()) {
          parent.erase(n.key);
        } else {
          parent.erase(n.index);
        }
        visit(shown(n.path) + " removed", to_text(copy));
        for (size_t v : values(per_node)) {
          emit(palette_[v].dump(-1, ' ', false, Json::error_handler_t::replace), palette_[v]);
        }
        if (n.node->is_number()) {  // every boundary of its own type
          for (const Json& x : {Json(0), Json(-1), Json(int64_t{1} << 30),
                                Json(std::numeric_limits<int64_t>::max()),
                                Json(std::numeric_limits<int64_t>::min()),
                                Json(std::numeric_limits<uint64_t>::max()), Json(int64_t{1} << 31),
                                Json(1e39), Json(-1e39), Json(1e-46), Json(0.5)}) {
            emit(x.dump(), x);
          }
        } else if (n.node->is_string()) {
          emit("\"\"", "");
          emit("a newline", "line one\nline two");
          emit("a long string", std::string(10000, 'a'));
        }
        emit("deep nesting", kDeepMarker);
        Json long_array = Json::array();
        const Json element = n.node->is_array() && !n.node->empty() ? (*n.node)[0] : *n.node;
        for (size_t i = 0; i < 500; ++i) long_array.push_back(element);
        emit("long array of itself", std::move(long_array));
      }
      if (!n.node->is_object()) continue;
      for (const std::string& key : keys_) {
        if (n.node->contains(key)) continue;
        for (size_t v : values(per_key)) {
          Json copy = root;
          copy.at(pointer)[key] = palette_[v];
          visit(shown(n.path) + "/" + key +
                    " added := " + palette_[v].dump(-1, ' ', false, Json::error_handler_t::replace),
                to_text(copy));
        }
      }
    }
  }

  // What the last mutate() did, for failure messages ("/model/vocab/a := 1e+39; truncate @12").
  const std::string& description() const { return description_; }

  uint32_t pick(uint32_t n) { return static_cast<uint32_t>(rng_() % n); }

 private:
  // A node of the tree and where it hangs: parent == nullptr for the root.
  struct Node {
    Json* node;
    Json* parent;
    std::string key;  // object parent
    size_t index;     // array parent
    std::string path;
  };

  // Stands for deep nesting in the tree; to_text expands it (nlohmann-json's dump recurses, so
  // the tree never holds the nesting itself).
  static constexpr const char* kDeepMarker = "@@deep@@";

  void collect(Json* node, Json* parent, const std::string& key, size_t index, std::string path,
               std::vector<Node>* out) {
    out->push_back({node, parent, key, index, path});
    if (node->is_object()) {
      for (auto it = node->begin(); it != node->end(); ++it) {
        std::string key = it.key();  // escaped as a JSON pointer token
        for (size_t at = key.find_first_of("~/"); at != std::string::npos;
             at = key.find_first_of("~/", at + 2)) {
          key.replace(at, 1, key[at] == '~' ? "~0" : "~1");
        }
        collect(&it.value(), node, it.key(), 0, path + "/" + key, out);
      }
    } else if (node->is_array()) {
      // Long arrays: a sample of their elements is enough.
      const size_t step = node->size() > 64 ? node->size() / 16 : 1;
      for (size_t i = 0; i < node->size(); i += step) {
        collect(&(*node)[i], node, "", i, path + "/" + std::to_string(i), out);
      }
    }
  }

  Json palette_value() { return palette_[pick(static_cast<uint32_t>(palette_.size()))]; }

  void mutate_tree(Json* root) {
    std::vector<Node> nodes;
    collect(root, nullptr, "", 0, "", &nodes);
    const Node& n = nodes[pick(static_cast<uint32_t>(nodes.size()))];
    Json& node = *n.node;
    const std::string at = n.path.empty() ? "/" : n.path;
    switch (pick(12)) {
      case 0:
      case 1:
      case 2:
      case 3:  // another value, usually of another type
        node = palette_value();
        note(at + " := " + node.dump(-1, ' ', false, Json::error_handler_t::replace));
        break;
      case 4:  // remove it
        if (n.parent != nullptr && n.parent->is_object()) {
          n.parent->erase(n.key);
        } else if (n.parent != nullptr) {
          n.parent->erase(n.index);
        }
        note(at + " removed");
        break;
      case 5:  // add a known key
        if (node.is_object()) {
          const std::string& key = keys_[pick(static_cast<uint32_t>(keys_.size()))];
          node[key] = pick(4) == 0 && !nodes.empty()
                          ? *nodes[pick(static_cast<uint32_t>(nodes.size()))].node
                          : palette_value();
          note(at + "/" + key + " added");
        } else {
          node = palette_value();
          note(at + " := palette");
        }
        break;
      case 6:  // a neighbour of a number, or the number as a float
        if (node.is_number()) {
          const double x = node.get<double>();
          const double choices[] = {x + 1, x - 1, -x, x * 1024, x / 2, x + 0.5};
          const double y = choices[pick(6)];
          if (pick(2) == 0 && y >= -9e15 && y <= 9e15 &&
              y == static_cast<double>(static_cast<int64_t>(y))) {
            node = static_cast<int64_t>(y);
          } else {
            node = y;
          }
        } else if (node.is_string()) {
          const std::string s = node.get<std::string>();
          const std::string choices[] = {s + " ", s.empty() ? s : s.substr(1), s + s,
                                         std::string(10000, 'a'), s + "\n" + s};
          node = choices[pick(5)];
        } else {
          node = palette_value();
        }
        note(at + " := neighbour");
        break;
      case 7:  // a very long array
      {
        Json element = node.is_array() && !node.empty() ? node[0] : node;
        if (element.dump(-1, ' ', false, Json::error_handler_t::replace).size() > 200) {
          element = palette_value();  // keep the document a few MB at most
        }
        const size_t count = pick(2) == 0 ? 500 : 5000;
        Json array = Json::array();
        for (size_t i = 0; i < count; ++i)
          array.push_back(pick(8) == 0 ? palette_value() : element);
        node = std::move(array);
        note(at + " := long array");
        break;
      }
      case 8:  // wrap it
        node = pick(2) == 0 ? Json::array({node}) : Json::object({{"content", node}});
        note(at + " wrapped");
        break;
      case 9:  // nest deeply (expanded by to_text)
        node = kDeepMarker;
        note(at + " := deep nesting");
        break;
      case 10:  // reorder or duplicate inside an array or object
        if (node.is_array() && node.size() > 1) {
          std::swap(node[pick(static_cast<uint32_t>(node.size()))],
                    node[pick(static_cast<uint32_t>(node.size()))]);
          Json copy = node[pick(static_cast<uint32_t>(node.size()))];
          node.push_back(std::move(copy));
          note(at + " shuffled");
        } else {
          node = palette_value();
          note(at + " := palette");
        }
        break;
      default:  // empty container of its own type, or null
        node = node.is_array() ? Json::array() : node.is_object() ? Json::object() : Json();
        note(at + " emptied");
        break;
    }
  }

  // The tree's text with the first deep-nesting marker expanded thousands deep (the others two
  // deep: a long array of markers must not grow the document past a few MB).
  std::string to_text(const Json& root) {
    const std::string dumped = root.dump(-1, ' ', false, Json::error_handler_t::replace);
    const std::string marker = std::string("\"") + kDeepMarker + "\"";
    std::string text;
    size_t from = 0;
    bool first = true;
    for (size_t at = dumped.find(marker); at != std::string::npos; at = dumped.find(marker, from)) {
      text.append(dumped, from, at - from);
      const size_t depths[] = {100, 3000, 100000};
      const size_t depth = first ? depths[pick(3)] : 2;
      text.append(depth, '[');
      text += "1";
      text.append(depth, ']');
      from = at + marker.size();
      first = false;
    }
    text.append(dumped, from, std::string::npos);
    return text;
  }

  void damage(std::string* text) {
    if (text->empty()) return;
    const auto at = [&] { return static_cast<size_t>(pick(static_cast<uint32_t>(text->size()))); };
    static const std::string kBytes =
        std::string("{}[]\",:0123456789eE.+-\\ntfu \n\t") + std::string("\x00\xff\xc3\x80", 4);
    switch (pick(8)) {
      case 0: {
        const size_t n = at();
        text->resize(n);
        note("truncated @" + std::to_string(n));
        break;
      }
      case 1: {
        const size_t from = at();
        text->erase(from, 1 + pick(8));
        note("deleted @" + std::to_string(from));
        break;
      }
      case 2: {
        const size_t from = at();
        const std::string copy = text->substr(from, 1 + pick(32));
        text->insert(at(), copy);
        note("duplicated @" + std::to_string(from));
        break;
      }
      case 3:  // flip a bracket
        for (int tries = 0; tries < 64; ++tries) {
          const size_t i = at();
          const char c = (*text)[i];
          if (c == '{' || c == '}' || c == '[' || c == ']') {
            (*text)[i] = "{}[]"[pick(4)];
            note("bracket @" + std::to_string(i));
            break;
          }
        }
        break;
      case 4: {
        const size_t i = at();
        (*text)[i] = kBytes[pick(static_cast<uint32_t>(kBytes.size()))];
        note("byte @" + std::to_string(i));
        break;
      }
      case 5: {
        const size_t i = at();
        const size_t j = at();
        std::swap((*text)[i], (*text)[j]);
        note("swapped @" + std::to_string(i));
        break;
      }
      case 6:  // change a digit
        for (int tries = 0; tries < 64; ++tries) {
          const size_t i = at();
          if ((*text)[i] >= '0' && (*text)[i] <= '9') {
            (*text)[i] = static_cast<char>('0' + pick(10));
            note("digit @" + std::to_string(i));
            break;
          }
        }
        break;
      default: {
        const size_t i = at();
        text->insert(i, 1, kBytes[pick(static_cast<uint32_t>(kBytes.size()))]);
        note("inserted @" + std::to_string(i));
        break;
      }
    }
  }

  void note(const std::string& what) {
    if (!description_.empty()) description_ += "; ";
    description_ += what;
  }

  std::mt19937 rng_;
  std::vector<std::string> keys_;
  std::vector<Json> palette_;
  std::string description_;
};

}  // namespace cellm::json_mutation_testing
