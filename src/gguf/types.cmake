# Tensor types: block formats, dequantization, quantization (owner: tensor-type work).
set(CELLM_GGUF_TYPES_SOURCES
  dequantize.cpp dequantize_kernels.cpp dequantize_k_kernels.cpp quantize.cpp)
# No fused multiply-add contraction: the reference kernels must round exactly as GGML's do, on
# every target (see dequantize.h).
set_source_files_properties(${CELLM_GGUF_TYPES_SOURCES} PROPERTIES
  COMPILE_OPTIONS -ffp-contract=off)
list(APPEND CELLM_GGUF_SOURCES ${CELLM_GGUF_TYPES_SOURCES})

cellm_add_test(gguf_types_test
  SOURCES dequantize_test.cpp dequantize_k_test.cpp dequantize_reference_test.cpp dot_row_test.cpp
          quantize_test.cpp dequantize_q4g_test.cpp
  LIBS cellm_gguf LABELS unit)
