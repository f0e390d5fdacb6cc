# `cellm inspect` on a model cut inside its header must print exactly one error line that names
# the offset, print nothing on stdout, and exit 1. Run by ctest (reader.cmake) as
#   cmake -DCELLM=... -DTRUNCATE=... -DMODELS_DEFAULT=... -DWORK_DIR=... -P <this file>
# $CELLM_TEST_MODELS overrides MODELS_DEFAULT, as for the gtest suites.
include("${CMAKE_CURRENT_LIST_DIR}/../../tests/support/cli_test.cmake")
cellm_test_model(model "stories260K.gguf")

file(MAKE_DIRECTORY "${WORK_DIR}")
set(truncated "${WORK_DIR}/stories260K-cut-at-5000.gguf")
# 5000 bytes ends inside the token list (the header is 14,152 bytes).
execute_process(COMMAND "${TRUNCATE}" "${model}" "${truncated}" 5000 RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gguf_truncate_copy failed (${rc})")
endif()

execute_process(COMMAND "${CELLM}" inspect "${truncated}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "exit ${rc}; stderr: ${err}")
# The line names the file and the offset.
cellm_expect_one_error_line("${rc}" "${out}" "${err}"
  "^cellm inspect: [^\n]*stories260K-cut-at-5000\\.gguf: gguf: [^\n]*offset [0-9]+")
