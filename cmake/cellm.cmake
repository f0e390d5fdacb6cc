# Helpers that keep every folder's CMakeLists.txt short and the layering explicit.

set(CELLM_WARNINGS -Wall -Wextra -Wpedantic)
if(CELLM_WERROR)
  list(APPEND CELLM_WARNINGS -Werror)
endif()

if(CELLM_SANITIZE)
  string(REPLACE ";" "," _cellm_san "${CELLM_SANITIZE}")
  add_compile_options(-fsanitize=${_cellm_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_cellm_san})
endif()

# The dependency arrows of docs/ARCHITECTURE.md: a library may link only the ones listed here.
set(CELLM_ALLOWED_DEPS_core "")
set(CELLM_ALLOWED_DEPS_gguf "core")
set(CELLM_ALLOWED_DEPS_model "core;gguf")
set(CELLM_ALLOWED_DEPS_tokenizer "core;gguf")
set(CELLM_ALLOWED_DEPS_program "core;gguf;model;tokenizer")
set(CELLM_ALLOWED_DEPS_cache "core")
set(CELLM_ALLOWED_DEPS_batching "core;cache")
set(CELLM_ALLOWED_DEPS_backend_cpu "core;gguf;model;program;cache;batching")
set(CELLM_ALLOWED_DEPS_backend_cuda "core;gguf;model;program;cache;batching;backend_cpu")

# cellm_add_library(NAME SOURCES ... DEPS ... [EXTERNAL ...])
# Creates target cellm_<NAME>; DEPS are cellm layer names and must be allowed above.
function(cellm_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;EXTERNAL" ${ARGN})
  foreach(dep IN LISTS ARG_DEPS)
    if(NOT dep IN_LIST CELLM_ALLOWED_DEPS_${name})
      message(FATAL_ERROR "layering: cellm_${name} may not depend on cellm_${dep} "
                          "(allowed: ${CELLM_ALLOWED_DEPS_${name}})")
    endif()
  endforeach()
  set(_deps "")
  foreach(dep IN LISTS ARG_DEPS)
    list(APPEND _deps cellm_${dep})
  endforeach()
  if(NOT ARG_SOURCES)  # a layer that has only headers so far
    add_library(cellm_${name} INTERFACE)
    target_include_directories(cellm_${name} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(cellm_${name} INTERFACE ${_deps} ${ARG_EXTERNAL})
    return()
  endif()
  add_library(cellm_${name} ${ARG_SOURCES})
  target_include_directories(cellm_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(cellm_${name} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:${CELLM_WARNINGS}>)
  target_link_libraries(cellm_${name} PUBLIC ${_deps} ${ARG_EXTERNAL})
endfunction()

# Test binaries by label: cellm_label_targets(LABELS ... TARGETS ...) records what a label's tests
# run; cellm_add_label_targets(), called once at the end, makes a `cellm_tests_<label>` target
# that builds them, so a job that runs one label (the sanitizer jobs) builds only those.
function(cellm_label_targets)
  cmake_parse_arguments(ARG "" "" "LABELS;TARGETS" ${ARGN})
  foreach(label IN LISTS ARG_LABELS)
    set_property(GLOBAL APPEND PROPERTY CELLM_TEST_LABELS ${label})
    set_property(GLOBAL APPEND PROPERTY CELLM_LABEL_TARGETS_${label} ${ARG_TARGETS})
  endforeach()
endfunction()

function(cellm_add_label_targets)
  get_property(labels GLOBAL PROPERTY CELLM_TEST_LABELS)
  list(REMOVE_DUPLICATES labels)
  foreach(label IN LISTS labels)
    get_property(targets GLOBAL PROPERTY CELLM_LABEL_TARGETS_${label})
    add_custom_target(cellm_tests_${label})
    add_dependencies(cellm_tests_${label} ${targets})
  endforeach()
endfunction()

# cellm_add_test(NAME SOURCES ... LIBS ... [LABELS ...] [TIMEOUT s])
# One gtest binary registered as one ctest (gtest filters stay available by hand).
function(cellm_add_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${CELLM_WARNINGS}>)
  # A test's own source checks behaviour; the code under test keeps the build's optimization.
  # At -Og a test source compiles 2-3x faster than at -O2 -g (the dev build's largest part).
  target_compile_options(${name} PRIVATE
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CONFIG:RelWithDebInfo>>:-Og>)
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} cellm_test_support GTest::gtest GTest::gmock)
  cellm_label_targets(LABELS ${ARG_LABELS} TARGETS ${name})
  add_test(NAME ${name} COMMAND ${name})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT}
    ENVIRONMENT "CELLM_TEST_MODELS_DEFAULT=${CELLM_TEST_MODELS}")
  if(ARG_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
endfunction()
