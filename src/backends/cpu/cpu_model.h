// CpuModel: a loaded Program (program/program.h) with its config, weights and spec copied out as
// public fields — kept only for the code that still names it (src/backends/cuda). New code uses
// Program directly; once nothing includes this header it is to be deleted.
//
// open() is Program::load (model config, weights, spec validated against the model, tokenizer),
// so an error names the file and the key or tensor. The copies are plain data: `weights` views
// point into the mapping `program` owns, which stays put when a CpuModel moves. It knows nothing
// of sessions or backends. Thread-safety: immutable plain data after open().
#pragma once

#include <string>

#include "core/status.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "program/program.h"
#include "program/program_spec.h"

namespace cellm {

struct CpuModel {
  Program program;  // owns the file every view of `weights` points into
  ModelConfig config;
  ModelWeights weights;
  ProgramSpec spec;
  bool spec_is_default = false;  // the file had no cellm.* keys

  // Program::load(path) with the fields above copied out of it.
  static StatusOr<CpuModel> open(const std::string& path);
};

}  // namespace cellm
