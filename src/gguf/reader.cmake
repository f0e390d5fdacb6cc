# GGUF reader and writer (owner: format work).
list(APPEND CELLM_GGUF_SOURCES
  gguf_file.cpp gguf_file_getters.cpp gguf_tensor_geometry.cpp gguf_text.cpp gguf_value.cpp
  gguf_value_reader.cpp gguf_writer.cpp)

# Test support (not in the library): independent invariant checks and small copies of models.
add_library(cellm_gguf_test_support STATIC gguf_test_support.cpp)
target_compile_options(cellm_gguf_test_support PRIVATE ${CELLM_WARNINGS})
target_link_libraries(cellm_gguf_test_support PUBLIC cellm_gguf)

cellm_add_test(gguf_file_test
  SOURCES gguf_file_test.cpp gguf_malformed_test.cpp gguf_models_test.cpp
  LIBS cellm_gguf cellm_gguf_test_support LABELS unit)
cellm_add_test(gguf_writer_test SOURCES gguf_writer_test.cpp LIBS cellm_gguf LABELS unit)
cellm_add_test(gguf_mutation_test SOURCES gguf_mutation_test.cpp
  LIBS cellm_gguf cellm_gguf_test_support LABELS unit TIMEOUT 300)

# `cellm inspect` on a truncated model: one error line naming the offset, exit 1. A CMake script
# checks exit status, stdout and stderr; a tiny helper makes the truncated copy at test time.
add_executable(gguf_truncate_copy gguf_truncate_tool.cpp)
target_compile_options(gguf_truncate_copy PRIVATE ${CELLM_WARNINGS})
add_test(NAME cellm_inspect_truncated
  COMMAND ${CMAKE_COMMAND} -DCELLM=$<TARGET_FILE:cellm> -DTRUNCATE=$<TARGET_FILE:gguf_truncate_copy>
          -DMODELS_DEFAULT=${CELLM_TEST_MODELS} -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/inspect_test
          -P ${CMAKE_CURRENT_SOURCE_DIR}/gguf_inspect_truncated_test.cmake)
set_tests_properties(cellm_inspect_truncated PROPERTIES LABELS unit TIMEOUT 60)
cellm_label_targets(LABELS unit TARGETS cellm gguf_truncate_copy)
