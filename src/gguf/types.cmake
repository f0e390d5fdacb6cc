# Tensor types: block formats, dequantization, quantization (owner: tensor-type work).
