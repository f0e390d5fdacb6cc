#include "backends/cpu/cpu_model.h"

#include <utility>

namespace cellm {

StatusOr<CpuModel> CpuModel::open(const std::string& path) {
  CELLM_ASSIGN_OR_RETURN(Program program, Program::load(path));
  ModelConfig config = program.config();
  ModelWeights weights = program.weights();
  ProgramSpec spec = program.spec();
  const bool spec_is_default = program.uses_default_spec();
  return CpuModel{std::move(program), std::move(config), std::move(weights), std::move(spec),
                  spec_is_default};
}

}  // namespace cellm
