# CUDA kernels, one op per .cu (owner: kernel work). Appends to CELLM_CUDA_KERNEL_SOURCES and
# defines the kernel parity tests (label cuda).
