# Third-party libraries: Debian's packages (Makefile's `deps` target installs them).
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(GTest REQUIRED)
if(CELLM_BENCH)
  find_package(benchmark REQUIRED)
endif()

# PCRE2 (8-bit code units) has no CMake package on Debian 12; find header and library directly.
# On the device machine the header comes from .devdeps (see scripts/device-check).
find_path(PCRE2_INCLUDE_DIR pcre2.h REQUIRED)
find_library(PCRE2_LIBRARY NAMES pcre2-8 REQUIRED)
add_library(cellm_pcre2 INTERFACE)
target_include_directories(cellm_pcre2 SYSTEM INTERFACE ${PCRE2_INCLUDE_DIR})
target_link_libraries(cellm_pcre2 INTERFACE ${PCRE2_LIBRARY})
target_compile_definitions(cellm_pcre2 INTERFACE PCRE2_CODE_UNIT_WIDTH=8)

# cpp-httplib (Debian's libcpp-httplib-dev, through pkg-config: its flags select the TLS and
# compression build the library was made with) for `cellm serve`. Optional: the device machine
# lacks it, and `cellm serve` then says so. CELLM_HTTP=OFF leaves it out anywhere.
set(CELLM_HAVE_HTTP OFF)
if(NOT CELLM_HTTP STREQUAL "OFF")
  find_package(PkgConfig)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(CELLM_HTTPLIB IMPORTED_TARGET cpp-httplib)
  endif()
  if(CELLM_HTTPLIB_FOUND)
    set(CELLM_HAVE_HTTP ON)
  elseif(CELLM_HTTP STREQUAL "ON")
    message(FATAL_ERROR "CELLM_HTTP=ON but cpp-httplib was not found (libcpp-httplib-dev)")
  endif()
endif()
message(STATUS "cellm: HTTP server ${CELLM_HAVE_HTTP}")

# CUDA: built whenever nvcc is found (CI compiles it; only the device machine runs it).
set(CELLM_HAVE_CUDA OFF)
if(NOT CELLM_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # SASS for the H200 only: PTX of compute_90a could be JIT-compiled for no other GPU, and
    # embedding it costs a sixth of every .cu file's compile.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90a-real)
    endif()
    enable_language(CUDA)
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)  # CMake < 3.28 knows no nvcc C++20 flag
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(CELLM_HAVE_CUDA ON)
  elseif(CELLM_CUDA STREQUAL "ON")
    message(FATAL_ERROR "CELLM_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
message(STATUS "cellm: CUDA backend ${CELLM_HAVE_CUDA}")
