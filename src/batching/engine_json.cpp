// GenConfig::json_object and json_schema on the engine's side: which tokens keep a generation's
// text a prefix of a value the schema accepts (batching/json_schema_prefix.h), found without
// checking every token where possible.
// Runs on the sampling pool, touching only its generation (engine.h's pick_token).
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "batching/engine.h"

namespace cellm::internal {

std::optional<int32_t> Engine::constrain_to_json(ActiveGeneration& generation,
                                                 std::span<const float> logits, int32_t greedy) {
  const JsonSchemaPrefix& json = *generation.json;
  const std::vector<std::string>& bytes = *generation.token_bytes;
  const auto allows = [&](int32_t t) {
    const std::string& piece = bytes[static_cast<size_t>(t)];
    return !piece.empty() && json.accepts(piece);
  };
  // Plain greedy: the row's argmax, when it keeps the text a JSON prefix, is the masked argmax
  // too (the lowest id on ties either way), and no mask is needed.
  const Sampler& sampler = generation.sampler;
  if (sampler.params().temperature <= 0.0f && !sampler.rewrites_scores()) {
    const int32_t best = greedy != kNoToken ? greedy : argmax_finite(logits);
    if (best != kNoToken && allows(best)) return best;
  }
  // Inside a string most tokens are plain characters, allowed without a check; elsewhere only the
  // tokens whose first byte the text may take next are checked.
  const TokenBytesIndex& index = *generation.token_index;
  std::vector<uint8_t>& allowed = generation.allowed;
  if (json.free_string()) {
    allowed.resize(bytes.size());
    for (size_t t = 0; t < bytes.size(); ++t) {
      allowed[t] = index.plain_string_pieces[t] != 0 || allows(static_cast<int32_t>(t)) ? 1 : 0;
    }
    return std::nullopt;
  }
  allowed.assign(bytes.size(), 0);
  for (size_t first = 0; first < index.by_first_byte.size(); ++first) {
    const std::vector<int32_t>& tokens = index.by_first_byte[first];
    if (tokens.empty() || !json.accepts(std::string(1, static_cast<char>(first)))) continue;
    for (const int32_t t : tokens) allowed[static_cast<size_t>(t)] = allows(t) ? 1 : 0;
  }
  return std::nullopt;
}

}  // namespace cellm::internal
