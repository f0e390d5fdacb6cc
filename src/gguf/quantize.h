// Reference quantization of f32 rows to GGUF tensor types, for exporting and for tests.
//
// Q8_0 and Q4_0 follow llama.cpp's reference (round-to-nearest) quantizers exactly, so their
// bytes match llama.cpp's for the same input:
//   Q8_0: d = amax / 127, q = round(x * (1/d)) (halves away from zero), stored d = f16(d);
//   Q4_0: d = max / -8 where max is the signed value of largest magnitude (the first one on
//         ties), q = min(15, trunc(x * (1/d) + 8.5)), stored d = f16(d). Values run from -8d to
//         7d, so an element of the sign opposite to max and magnitude above 7.5|d| clips to 7d.
// F16 and BF16 round to nearest even (core/float16.h); F32 copies.
// Unlike llama.cpp it refuses input it would turn into garbage: a NaN or infinite element of a
// Q8_0/Q4_0 row, a block scale past the f16 range, or a finite value that would become infinite
// in F16/BF16 is an error naming the element or block, and `dst` is left unchanged. Knows rows of
// bytes, not tensors: callers add the tensor name (Status::with_context).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>

#include "core/status.h"
#include "gguf/tensor_type.h"

namespace cellm {

// F32, F16, BF16, Q8_0 and Q4_0.
bool can_quantize(TensorType type);

// Quantizes one row of src.size() elements (a whole number of blocks) into dst, which must be
// exactly that row's size in bytes (row_size_bytes). Errors as described above, plus
// unimplemented for a type it cannot produce and invalid_argument for mismatched sizes.
Status quantize_row(TensorType type, std::span<const float> src,  // src: [num_elements], f32
                    std::span<uint8_t> dst);

}  // namespace cellm
