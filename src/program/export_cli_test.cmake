# `cellm export --gguf stories260K.gguf` writes a program that `cellm inspect` describes with
# every cellm.* key of DESIGN §3; a refused export prints one error line naming the flag, exits 1
# and leaves no file. Run by ctest (src/program/CMakeLists.txt) as
#   cmake -DCELLM=... -DMODELS_DEFAULT=... -DWORK_DIR=... -P <this file>
# $CELLM_TEST_MODELS overrides MODELS_DEFAULT, as for the gtest suites.
if(DEFINED ENV{CELLM_TEST_MODELS} AND NOT "$ENV{CELLM_TEST_MODELS}" STREQUAL "")
  set(models "$ENV{CELLM_TEST_MODELS}")
else()
  set(models "${MODELS_DEFAULT}")
endif()
set(model "${models}/stories260K.gguf")
if(NOT EXISTS "${model}")
  message(FATAL_ERROR "test model '${model}' does not exist; set CELLM_TEST_MODELS")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(program "${WORK_DIR}/stories260K.program.gguf")

execute_process(COMMAND "${CELLM}" export --gguf "${model}" --output "${program}"
                        --decode-widths 1,2,4
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cellm export failed (${rc}): ${err}")
endif()
if(NOT out MATCHES "^wrote [^\n]*stories260K\\.program\\.gguf: 48 tensors")
  message(FATAL_ERROR "unexpected export summary: ${out}")
endif()

execute_process(COMMAND "${CELLM}" inspect "${program}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cellm inspect failed (${rc}): ${err}")
endif()
foreach(key format_version max_context_len max_step_tokens min_prefill_chunk decode_widths
            logits_to_keep_mode kv.layout kv.max_cells kv.dtype kv.heads kv.head_dims kv.windows
            vocab_size source)
  string(REPLACE "." "\\." pattern "cellm.${key}")
  if(NOT out MATCHES "\n  ${pattern} ")
    message(FATAL_ERROR "cellm inspect does not show cellm.${key}:\n${out}")
  endif()
endforeach()
if(NOT out MATCHES "cellm\\.decode_widths +array<u32> +\\[3 u32 values: 1, 2, 4\\]")
  message(FATAL_ERROR "cellm.decode_widths is not [1, 2, 4]:\n${out}")
endif()

set(refused "${WORK_DIR}/refused.gguf")
execute_process(COMMAND "${CELLM}" export --gguf "${model}" --output "${refused}"
                        --max-step-tokens 4 --min-prefill-chunk 5
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "expected exit status 1, got '${rc}'")
endif()
if(NOT err STREQUAL "cellm export: --max-step-tokens (W = 4) must be at least --min-prefill-chunk (m = 5)\n")
  message(FATAL_ERROR "unexpected error output: '${err}'")
endif()
file(GLOB left "${WORK_DIR}/refused*")
if(left)
  message(FATAL_ERROR "a refused export left files: ${left}")
endif()
