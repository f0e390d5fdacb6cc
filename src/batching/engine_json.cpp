// GenConfig::json_object, json_schema and text_pattern on the engine's side: which tokens keep a
// generation's text a prefix of a value the schema accepts (batching/json_schema_prefix.h) or of
// a text the pattern matches (batching/text_pattern_prefix.h; stop tokens too where it matches
// already), by the Runner's JsonTokenMask — or none, when plain greedy's argmax already keeps it
// one.
// Runs on the sampling pool, touching only its generation (engine.h's pick_token).
#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "batching/engine.h"

namespace cellm::internal {

bool Engine::is_stop_token(const ActiveGeneration& generation, int32_t token) {
  return std::find(generation.stop_tokens.begin(), generation.stop_tokens.end(), token) !=
         generation.stop_tokens.end();
}

void Engine::allow_stop_tokens(ActiveGeneration& generation) {
  for (const int32_t t : generation.stop_tokens) {
    if (t >= 0 && static_cast<size_t>(t) < generation.allowed.size()) {
      generation.allowed[static_cast<size_t>(t)] = 1;
    }
  }
}

std::optional<int32_t> Engine::constrain(ActiveGeneration& generation,
                                         std::span<const float> logits, int32_t greedy) {
  const JsonTokenMask& mask = *generation.token_mask;
  const JsonSchemaPrefix* json = generation.json.has_value() ? &*generation.json : nullptr;
  const TextPatternPrefix* text = generation.text.has_value() ? &*generation.text : nullptr;
  // A match, or a whole JSON value that could still go on (a top-level number), may end with a
  // stop token.
  const bool may_end = json != nullptr ? json->complete() : text->complete();
  // Plain greedy: the row's argmax, when it keeps the text a prefix, is the masked argmax too
  // (the lowest id on ties either way), and no mask is needed.
  const Sampler& sampler = generation.sampler;
  if (sampler.params().temperature <= 0.0f && !sampler.rewrites_scores()) {
    const int32_t best = greedy != kNoToken ? greedy : argmax_finite(logits);
    const auto allows = [&](int32_t t) {
      return json != nullptr ? mask.allows(*json, t) : mask.allows_text(*text, t);
    };
    if (best != kNoToken && (allows(best) || (may_end && is_stop_token(generation, best)))) {
      return best;
    }
  }
  if (json != nullptr) {
    mask.compute(*json, generation.allowed, &generation.pattern_masks);
  } else {
    mask.compute_text(*text, generation.allowed, &generation.pattern_masks);
  }
  if (may_end) allow_stop_tokens(generation);
  return std::nullopt;
}

}  // namespace cellm::internal
