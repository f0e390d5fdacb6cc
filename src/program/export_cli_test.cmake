# `cellm export --gguf stories260K.gguf` writes a program that `cellm inspect` describes with
# every cellm.* key of DESIGN §3; a refused export prints one error line naming the flag, exits 1
# and leaves no file. Run by ctest (src/program/CMakeLists.txt) as
#   cmake -DCELLM=... -DMODELS_DEFAULT=... -DWORK_DIR=... -P <this file>
# $CELLM_TEST_MODELS overrides MODELS_DEFAULT, as for the gtest suites.
include("${CMAKE_CURRENT_LIST_DIR}/../../tests/support/cli_test.cmake")
cellm_test_model(model "stories260K.gguf")
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

# --decode-widths 1,2,4 with m left to auto: one past the widest, but at least 5.
if(NOT out MATCHES "cellm\\.min_prefill_chunk +u32 +5\n")
  message(FATAL_ERROR "cellm.min_prefill_chunk is not 5 (auto for widths 1,2,4):\n${out}")
endif()

# The defaults: the recommended decode widths (1 ... 256, below W = 512) and m = 257.
set(defaults "${WORK_DIR}/defaults.gguf")
execute_process(COMMAND "${CELLM}" export --gguf "${model}" --output "${defaults}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cellm export with the default plan failed (${rc}): ${err}")
endif()
execute_process(COMMAND "${CELLM}" inspect "${defaults}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
# (inspect shows the first six values of an array)
if(NOT out MATCHES "cellm\\.decode_widths +array<u32> +\\[13 u32 values: 1, 2, 4, 8, 16, 24, \\.\\.\\.\\]")
  message(FATAL_ERROR "the default cellm.decode_widths are not 1 ... 256:\n${out}")
endif()
if(NOT out MATCHES "cellm\\.min_prefill_chunk +u32 +257\n")
  message(FATAL_ERROR "the default cellm.min_prefill_chunk is not 257:\n${out}")
endif()

execute_process(COMMAND "${CELLM}" export --gguf "${model}" --output "${WORK_DIR}/bad.gguf"
                        --min-prefill-chunk some
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "^cellm export: --min-prefill-chunk 'some': [^\n]*auto\n$")
  message(FATAL_ERROR "a bad --min-prefill-chunk: rc ${rc}, stderr '${err}'")
endif()

set(refused "${WORK_DIR}/refused.gguf")
execute_process(COMMAND "${CELLM}" export --gguf "${model}" --output "${refused}"
                        --max-step-tokens 4 --min-prefill-chunk 5
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
cellm_expect_one_error_line("${rc}" "${out}" "${err}"
  "^cellm export: --max-step-tokens \\(W = 4\\) must be at least --min-prefill-chunk \\(m = 5\\)\n$")
file(GLOB left "${WORK_DIR}/refused*")
if(left)
  message(FATAL_ERROR "a refused export left files: ${left}")
endif()
