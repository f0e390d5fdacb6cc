# `cellm inspect` on a model cut inside its header must print exactly one error line that names
# the offset, print nothing on stdout, and exit 1. Run by ctest (reader.cmake) as
#   cmake -DCELLM=... -DTRUNCATE=... -DMODELS_DEFAULT=... -DWORK_DIR=... -P <this file>
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
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "expected exit status 1, got '${rc}'")
endif()
if(NOT out STREQUAL "")
  message(FATAL_ERROR "expected nothing on stdout, got: ${out}")
endif()
string(REGEX MATCHALL "\n" newlines "${err}")
list(LENGTH newlines num_lines)
if(NOT num_lines EQUAL 1)
  message(FATAL_ERROR "expected exactly one error line, got ${num_lines}")
endif()
if(NOT err MATCHES "^cellm inspect: [^\n]*stories260K-cut-at-5000\\.gguf: gguf: [^\n]*offset [0-9]+")
  message(FATAL_ERROR "the error line does not name the file and the offset")
endif()
