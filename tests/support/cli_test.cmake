# Helpers of the CMake scripts that run the `cellm` command as ctest tests
# (src/gguf/gguf_inspect_truncated_test.cmake, src/program/export_cli_test.cmake). A script run
# with `cmake -P` includes this file by its path; everything here fails the test with
# message(FATAL_ERROR) naming what was wrong.

# Sets `out_var` (in the caller) to the path of test model `relative`, found like the gtest
# suites find it: under $CELLM_TEST_MODELS when set, else under MODELS_DEFAULT (-D of the script).
function(cellm_test_model out_var relative)
  if(DEFINED ENV{CELLM_TEST_MODELS} AND NOT "$ENV{CELLM_TEST_MODELS}" STREQUAL "")
    set(models "$ENV{CELLM_TEST_MODELS}")
  else()
    set(models "${MODELS_DEFAULT}")
  endif()
  set(model "${models}/${relative}")
  if(NOT EXISTS "${model}")
    message(FATAL_ERROR "test model '${model}' does not exist; set CELLM_TEST_MODELS")
  endif()
  set(${out_var} "${model}" PARENT_SCOPE)
endfunction()

# A refusal as every cellm command gives one: exit status 1, nothing on stdout, and exactly one
# line on stderr, which must match `pattern`.
function(cellm_expect_one_error_line rc out err pattern)
  if(NOT rc EQUAL 1)
    message(FATAL_ERROR "expected exit status 1, got '${rc}'")
  endif()
  if(NOT out STREQUAL "")
    message(FATAL_ERROR "expected nothing on stdout, got: ${out}")
  endif()
  string(REGEX MATCHALL "\n" newlines "${err}")
  list(LENGTH newlines num_lines)
  if(NOT num_lines EQUAL 1)
    message(FATAL_ERROR "expected exactly one error line, got ${num_lines}: ${err}")
  endif()
  if(NOT err MATCHES "${pattern}")
    message(FATAL_ERROR "the error line does not match '${pattern}': ${err}")
  endif()
endfunction()
