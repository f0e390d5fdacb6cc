// GenConfig::json_object and json_schema on the engine's side: which tokens keep a generation's
// text a prefix of a value the schema accepts (batching/json_schema_prefix.h), by the Runner's
// JsonTokenMask — or none, when plain greedy's argmax already keeps it one.
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
  const JsonTokenMask& mask = *generation.token_mask;
  // Plain greedy: the row's argmax, when it keeps the text a JSON prefix, is the masked argmax
  // too (the lowest id on ties either way), and no mask is needed.
  const Sampler& sampler = generation.sampler;
  if (sampler.params().temperature <= 0.0f && !sampler.rewrites_scores()) {
    const int32_t best = greedy != kNoToken ? greedy : argmax_finite(logits);
    if (best != kNoToken && mask.allows(json, best)) return best;
  }
  mask.compute(json, generation.allowed, &generation.pattern_masks);
  return std::nullopt;
}

}  // namespace cellm::internal
