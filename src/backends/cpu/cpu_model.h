// CpuModel: a model opened from one GGUF file, with everything a CpuExecutor is built from.
//
// Holds the file (which owns the mapping the weight views point into), the ModelConfig, the
// ModelWeights (checked shapes and types) and the ProgramSpec (the file's cellm.* keys, or the
// documented defaults for a plain GGUF model). Tests and the command line open a model with it;
// it knows nothing of tokenizers, sessions or backends. Move it freely: the views stay valid
// while the file is alive. Thread-safety: immutable plain data after open().
#pragma once

#include <string>

#include "core/status.h"
#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "program/program_spec.h"

namespace cellm {

struct CpuModel {
  GgufFile file;
  ModelConfig config;
  ModelWeights weights;
  ProgramSpec spec;
  bool spec_is_default = false;  // the file had no cellm.* keys

  // Opens, parses and checks the file; errors name the file and what failed.
  static StatusOr<CpuModel> open(const std::string& path);
};

}  // namespace cellm
