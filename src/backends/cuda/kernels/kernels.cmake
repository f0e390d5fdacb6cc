# CUDA kernels, one op per .cu (owner: kernel work). Appends to CELLM_CUDA_KERNEL_SOURCES and
# defines the kernel parity tests (label cuda) and the kernel microbenchmark.
#
# CELLM_CUDA_KERNELS_STANDALONE=ON builds the kernel tests and benchmark against a library of the
# kernels alone (cellm_cuda_kernels), so they build whatever state the rest of the backend is in.
set(_cellm_kernels_dir ${CMAKE_CURRENT_LIST_DIR})

# CMake before 3.28 knows no C++20 flag for nvcc (CMAKE_CUDA_STANDARD is 20 in this project);
# nvcc 12+ accepts -std=c++20. Stated here, in this directory's scope, for the targets below.
if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
set(CELLM_CUDA_KERNELS_CU
  argmax.cu attention_decode.cu attention_prefill.cu decode_matmul.cu dequantize.cu embedding.cu
  gemv_decode_float.cu gemv_decode_kquant.cu gemv_decode_q8_q4.cu gemv_handover.cu
  gemv_swiglu_handover.cu
  gemv_dp4a.cu gemv_float.cu gemv_generic.cu gemv_kquant.cu gemv_q8_q4.cu logit_softcap.cu
  matmul.cu quantize_activations.cu random_fill.cu rms_norm.cu rope_kv.cu row_gather.cu
  row_candidates.cu row_draw.cu row_logprobs.cu row_rewrite.cu swiglu.cu)
# Tensor-core attention for 16-bit caches and the quantized tensor-core products.
list(APPEND CELLM_CUDA_KERNELS_CU attention_decode_tc.cu attention_prefill_tc.cu matmul_int8.cu
  matmul_wide_q.cu)
list(TRANSFORM CELLM_CUDA_KERNELS_CU PREPEND ${_cellm_kernels_dir}/)
set(CELLM_CUDA_KERNELS_SOURCES ${CELLM_CUDA_KERNELS_CU}
  ${_cellm_kernels_dir}/attention_args.cpp ${_cellm_kernels_dir}/rope_kv_output.cpp
  ${_cellm_kernels_dir}/weight_layout.cpp)
list(APPEND CELLM_CUDA_KERNEL_SOURCES ${CELLM_CUDA_KERNELS_SOURCES})

# Device code: warnings are errors, line info for compute-sanitizer, IEEE division and square root
# (nvcc's defaults, stated because parity with the CPU relies on them).
set_source_files_properties(${CELLM_CUDA_KERNELS_CU} PROPERTIES COMPILE_OPTIONS
  "-Werror=all-warnings;-Xcompiler=-Wall,-Wextra;-lineinfo;-prec-div=true;-prec-sqrt=true")

option(CELLM_CUDA_KERNELS_STANDALONE "Build kernel tests against the kernels alone" OFF)
if(CELLM_CUDA_KERNELS_STANDALONE)
  add_library(cellm_cuda_kernels STATIC ${CELLM_CUDA_KERNELS_SOURCES})
  target_include_directories(cellm_cuda_kernels PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(cellm_cuda_kernels PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${CELLM_WARNINGS}>)
  target_link_libraries(cellm_cuda_kernels PUBLIC cellm_core cellm_gguf cellm_model cellm_program
    CUDA::cudart CUDA::cublas)
  set(_cellm_kernels_lib cellm_cuda_kernels)
else()
  set(_cellm_kernels_lib cellm_backend_cuda)
endif()
# The backend library is created after this file is included: link the CUDA runtime and cuBLAS
# the kernels need once it exists.
cmake_language(DEFER CALL target_link_libraries cellm_backend_cuda PUBLIC CUDA::cudart CUDA::cublas)

# Shared helpers of the kernel tests (kernel_test_support.h).
add_library(cellm_cuda_kernel_test_support STATIC ${_cellm_kernels_dir}/kernel_test_support.cpp)
target_compile_options(cellm_cuda_kernel_test_support PRIVATE ${CELLM_WARNINGS})
target_link_libraries(cellm_cuda_kernel_test_support PUBLIC cellm_core cellm_gguf cellm_model
  CUDA::cudart GTest::gtest)

# Host-only tests of the kernels' layouts and decoders (no GPU needed: they run everywhere).
cellm_add_test(cuda_kernel_layout_test
  SOURCES ${_cellm_kernels_dir}/weight_layout_test.cpp
  LIBS ${_cellm_kernels_lib} cellm_cuda_kernel_test_support cellm_backend_cpu LABELS unit)
# The decode benchmark's ring timeline summary (host code over made-up words).
cellm_add_test(cuda_ring_timeline_test
  SOURCES ${_cellm_kernels_dir}/decode_ring_timeline_test.cpp
    ${_cellm_kernels_dir}/decode_ring_timeline.cpp
  LIBS cellm_core CUDA::cudart LABELS unit)

# Parity tests against the CPU oracle: they need a GPU (label cuda) and fail without one.
foreach(_cellm_test attention decode_handover decode_int8 decode_matmul elementwise embedding
    matmul matmul_int8 quantize_activations rope_kv row_candidates row_draw row_logprobs row_rewrite)
  cellm_add_test(cuda_kernel_${_cellm_test}_test
    SOURCES ${_cellm_kernels_dir}/${_cellm_test}_test.cpp
    LIBS ${_cellm_kernels_lib} cellm_cuda_kernel_test_support cellm_backend_cpu
    LABELS unit cuda)
endforeach()

# Kernel microbenchmark (figures, not pass/fail): GB/s and TFLOP/s on 8B-sized operands.
if(CELLM_BENCH)
  add_executable(cuda_kernels_bench ${_cellm_kernels_dir}/cuda_kernels_bench.cpp
    ${_cellm_kernels_dir}/bench_wide_dequant.cpp ${_cellm_kernels_dir}/bench_attention.cpp
    ${_cellm_kernels_dir}/bench_sampling.cpp ${_cellm_kernels_dir}/bench_l2_stage.cu
    ${_cellm_kernels_dir}/bench_support.cpp ${_cellm_kernels_dir}/bench_kernels.cu)
  set_source_files_properties(${_cellm_kernels_dir}/bench_kernels.cu
    ${_cellm_kernels_dir}/bench_l2_stage.cu PROPERTIES COMPILE_OPTIONS
    "-Werror=all-warnings;-Xcompiler=-Wall,-Wextra;-lineinfo")
  target_compile_options(cuda_kernels_bench PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${CELLM_WARNINGS}>)
  target_link_libraries(cuda_kernels_bench PRIVATE ${_cellm_kernels_lib})
  # The batch-1 decode path: products per type and shape, tuning variants, the step's chain.
  add_executable(cuda_decode_bench ${_cellm_kernels_dir}/decode_kernels_bench.cpp
    ${_cellm_kernels_dir}/bench_support.cpp ${_cellm_kernels_dir}/bench_kernels.cu
    ${_cellm_kernels_dir}/decode_bench_kernels.cu ${_cellm_kernels_dir}/decode_persistent_bench.cu
    ${_cellm_kernels_dir}/decode_ring_bench.cu ${_cellm_kernels_dir}/decode_ring_timeline.cpp
    ${_cellm_kernels_dir}/decode_latency_probe.cu ${_cellm_kernels_dir}/decode_latency_bench.cpp
    ${_cellm_kernels_dir}/decode_code_probe.cu ${_cellm_kernels_dir}/decode_block_major_bench.cu
    ${_cellm_kernels_dir}/decode_fused_mlp_bench.cu ${_cellm_kernels_dir}/decode_chain_benches.cpp
    ${_cellm_kernels_dir}/decode_step_chain_bench.cpp
    ${_cellm_kernels_dir}/decode_fused_front_bench.cu ${_cellm_kernels_dir}/decode_fused_front_run.cpp)
  set_source_files_properties(${_cellm_kernels_dir}/decode_bench_kernels.cu
    ${_cellm_kernels_dir}/decode_persistent_bench.cu ${_cellm_kernels_dir}/decode_ring_bench.cu
    ${_cellm_kernels_dir}/decode_latency_probe.cu ${_cellm_kernels_dir}/decode_code_probe.cu
    ${_cellm_kernels_dir}/decode_block_major_bench.cu ${_cellm_kernels_dir}/decode_fused_mlp_bench.cu
    ${_cellm_kernels_dir}/decode_fused_front_bench.cu
    PROPERTIES
    COMPILE_OPTIONS "-Werror=all-warnings;-Xcompiler=-Wall,-Wextra;-lineinfo")
  target_compile_options(cuda_decode_bench PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${CELLM_WARNINGS}>)
  target_link_libraries(cuda_decode_bench PRIVATE ${_cellm_kernels_lib})
endif()
