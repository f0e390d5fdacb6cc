#include "backends/cpu/cpu_model.h"

#include <utility>

namespace cellm {

StatusOr<CpuModel> CpuModel::open(const std::string& path) {
  CELLM_ASSIGN_OR_RETURN(GgufFile file, GgufFile::open(path));
  StatusOr<ModelConfig> config = ModelConfig::from_gguf(file);
  if (!config.ok()) return config.status().with_context(path);
  StatusOr<ModelWeights> weights = ModelWeights::from_gguf(file, *config);
  if (!weights.ok()) return weights.status().with_context(path);
  bool spec_is_default = false;
  StatusOr<ProgramSpec> spec = ProgramSpec::from_gguf(file, *config, &spec_is_default);
  if (!spec.ok()) return spec.status().with_context(path);
  return CpuModel{std::move(file), std::move(config).value(), std::move(weights).value(),
                  std::move(spec).value(), spec_is_default};
}

}  // namespace cellm
