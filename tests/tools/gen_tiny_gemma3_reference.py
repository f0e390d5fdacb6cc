#!/usr/bin/env python3
"""Writes tests/support/tiny_gemma3_reference.inc: HF transformers' greedy tokens and logits for
tiny-gemma3, a Gemma3ForCausalLM made from ../shared/models/arch/tiny-qwen3-hf's weights.

tiny-gemma3 is tiny-qwen3's checkpoint (4 heads of 32 dims over 2 kv heads, q/k norms, tied
embeddings) under a Gemma 3 config that turns on everything the architecture adds: embeddings
scaled by sqrt(hidden), GELU (tanh) gating, norms after the attention and after the MLP, Gemma's
RMSNorm scaling by 1 + w, a sliding window of 5 positions on layer 0 and full attention on layer 1
(sliding_window_pattern 2) with their own rope bases (10000 on the windowed layer, 1e6 linearly
scaled by 8 on the global one), and query_pre_attn_scalar 24 (scores scaled by 1 / sqrt(24), not
by 1 / sqrt(head_dim)). Gemma's four norms per layer come from tiny-qwen3's two, minus 1 (Gemma
stores w where it scales by 1 + w):
  input_layernorm            <- layer i's input_layernorm - 1
  post_attention_layernorm   <- (layer (i + 1) % 2's input_layernorm - 0.0625) * 16
  pre_feedforward_layernorm  <- layer i's post_attention_layernorm - 1
  post_feedforward_layernorm <- (layer (i + 1) % 2's post_attention_layernorm - 0.0625) * 16
(the post norms scale by about 16, so the blocks' outputs weigh against the residual stream,
whose embeddings sqrt(hidden) = 8 scales to an RMS of about 4: with scales of 1 or 4 the stream
keeps its token and greedy decoding repeats it)
  q_norm, k_norm, model.norm <- tiny-qwen3's - 1
The C++ tests (tests/support/tiny_gemma.h) build the same checkpoint the same way.

Over tiny-qwen3's reference prompts 1 and 3 (lengths 1 and 17), 24 greedy tokens each. Float64
forward (the float32 weights upcast), eager attention, the whole sequence recomputed each step (no
cache); a logits row is kept as its 8 largest entries and 8 fixed ones. The document also keeps
the config as transformers 5 writes it back (`config_v5`: layer_types, per-type rope_parameters),
which the export must read the same way.

Needs torch, transformers and safetensors (any CPU install). Run from the repository root:
  python3 tests/tools/gen_tiny_gemma3_reference.py [--models ../shared/models]
"""
import os

from safetensors.torch import load_file
from transformers import Gemma3ForCausalLM

from hf_reference_common import generate_tiny_reference

CONFIG = {
    "architectures": ["Gemma3ForCausalLM"],
    "model_type": "gemma3_text",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "vocab_size": 512,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "rope_local_base_freq": 10000.0,
    "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    "sliding_window": 5,
    "sliding_window_pattern": 2,
    "query_pre_attn_scalar": 24,
    "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 512,
    "tie_word_embeddings": True,
    "attn_logit_softcapping": None,
    "final_logit_softcapping": None,
    "attention_bias": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}


def gemma3_state(qwen3_dir):
    src = load_file(os.path.join(qwen3_dir, "model.safetensors"))
    out = {}
    layers = 2
    for name, tensor in src.items():
        if name.endswith("layernorm.weight"):
            continue  # the four layer norms are made below
        if name.endswith("_norm.weight") or name == "model.norm.weight":
            out[name] = tensor - 1.0
        else:
            out[name] = tensor
    for i in range(layers):
        j = (i + 1) % layers
        p = f"model.layers.{i}."
        q = f"model.layers.{j}."
        out[p + "input_layernorm.weight"] = src[p + "input_layernorm.weight"] - 1.0
        out[p + "post_attention_layernorm.weight"] = (src[q + "input_layernorm.weight"] - 0.0625) * 16.0
        out[p + "pre_feedforward_layernorm.weight"] = src[p + "post_attention_layernorm.weight"] - 1.0
        out[p + "post_feedforward_layernorm.weight"] = (
            src[q + "post_attention_layernorm.weight"] - 0.0625) * 16.0
    return {k: v.contiguous() for k, v in out.items()}


def check(model, prompts):
    assert model.config.layer_types == ["sliding_attention", "full_attention"], \
        model.config.layer_types
    assert abs(model.model.layers[0].self_attn.scaling - 24 ** -0.5) < 1e-15


if __name__ == "__main__":
    generate_tiny_reference("tests/tools/gen_tiny_gemma3_reference.py", Gemma3ForCausalLM, CONFIG,
                            gemma3_state, "tests/support/tiny_gemma3_reference.inc", check)
