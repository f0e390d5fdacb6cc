#!/usr/bin/env python3
"""Writes tests/support/tiny_phi3_reference.inc: HF transformers' greedy tokens and logits for
tiny-phi3, a Phi3ForCausalLM made from ../shared/models/arch/tiny-mistral-hf's weights.

tiny-phi3 is tiny-mistral's checkpoint with q|k|v fused into qkv_proj and gate|up into
gate_up_proj (Phi-3's layout), under a Phi-3 config that turns on everything the architecture
adds: LongRoPE (short and long factor lists, attention factor sqrt(1 + ln 8 / ln 64) from
max_position_embeddings 512 over original_max_position_embeddings 64), a partial rotary head
(3/4 of 16 dims, as Phi-4-mini has), and a sliding window of 9 positions. The C++ tests
(tests/support/tiny_phi3.h) fuse the same tensors the same way and export the checkpoint.

Two variants, each over tiny-mistral's reference prompts 1 and 3 (lengths 1 and 17) with 24
greedy tokens, every sequence shorter than 64 positions:
  short  Hugging Face as it runs (sequences up to 64 positions use the short factors); a
         program serving at most 64 positions must match it.
  long   the long factors forced (the rotary module's original_inv_freq set to them): a program
         serving more than 64 positions uses them at every length (llama.cpp's rule).

Float64 forward (the float32 weights upcast), eager attention, the whole sequence recomputed
each step (no cache); a logits row is kept as its 8 largest entries and 8 fixed ones.

Needs torch, transformers and safetensors (any CPU install). Run from the repository root:
  python3 tests/tools/gen_tiny_phi3_reference.py [--models ../shared/models]
"""
import os

import torch
from safetensors.torch import load_file
from transformers import Phi3ForCausalLM

from hf_reference_common import greedy, load_tiny_model, write_reference_inc

SHORT_FACTORS = [1.0, 1.25, 1.75, 2.5, 3.5, 5.0]
LONG_FACTORS = [1.5, 3.0, 6.0, 11.0, 20.0, 36.0]
NUM_NEW_TOKENS = 24

CONFIG = {
    "architectures": ["Phi3ForCausalLM"],
    "model_type": "phi3",
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "vocab_size": 512,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "partial_rotary_factor": 0.75,
    "max_position_embeddings": 512,
    "original_max_position_embeddings": 64,
    "rope_scaling": {"type": "longrope", "short_factor": SHORT_FACTORS,
                     "long_factor": LONG_FACTORS},
    "sliding_window": 9,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}


def phi3_state(mistral_dir):
    src = load_file(os.path.join(mistral_dir, "model.safetensors"))
    out = {}
    for name, tensor in src.items():
        if ".self_attn.k_proj." in name or ".self_attn.v_proj." in name:
            continue
        if ".mlp.up_proj." in name:
            continue
        if ".self_attn.q_proj." in name:
            prefix = name.split(".self_attn.")[0]
            out[prefix + ".self_attn.qkv_proj.weight"] = torch.cat(
                [src[prefix + ".self_attn.q_proj.weight"], src[prefix + ".self_attn.k_proj.weight"],
                 src[prefix + ".self_attn.v_proj.weight"]], dim=0).contiguous()
        elif ".mlp.gate_proj." in name:
            prefix = name.split(".mlp.")[0]
            out[prefix + ".mlp.gate_up_proj.weight"] = torch.cat(
                [src[prefix + ".mlp.gate_proj.weight"], src[prefix + ".mlp.up_proj.weight"]],
                dim=0).contiguous()
        else:
            out[name] = tensor
    return out


def main():
    args, prompts, model, _ = load_tiny_model("tiny-mistral", Phi3ForCausalLM, CONFIG, phi3_state,
                                              "tests/support/tiny_phi3_reference.inc")
    rotary = model.model.rotary_emb
    assert abs(rotary.attention_scaling - (1 + torch.log(torch.tensor(8.0)).item() /
                                           torch.log(torch.tensor(64.0)).item()) ** 0.5) < 1e-12
    dim = 12
    base = CONFIG["rope_theta"]
    exponents = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
    long_inv_freq = 1.0 / (torch.tensor(LONG_FACTORS, dtype=torch.float32) * base**exponents)

    variants = []
    for variant, max_seq_len in (("short", 64), ("long", 512)):
        if variant == "long":
            rotary.original_inv_freq.copy_(long_inv_freq)
        cases = []
        for number in (1, 3):
            tokens, rows = greedy(model, prompts[number], NUM_NEW_TOKENS)
            cases.append({"case": number, "prompt_tokens": prompts[number],
                          "generated_tokens": tokens, "logit_rows": rows})
        variants.append({"variant": variant, "max_seq_len": max_seq_len, "cases": cases})

    import transformers
    document = {
        "generator": "tests/tools/gen_tiny_phi3_reference.py",
        "implementation": f"HF transformers {transformers.__version__} (torch {torch.__version__}), "
                          "Phi3ForCausalLM, float64, eager attention, CPU",
        "attention_factor": rotary.attention_scaling,
        "config": CONFIG,
        "variants": variants,
    }
    cases = [c for v in variants for c in v["cases"]]
    size = write_reference_inc(document, cases, "tests/tools/gen_tiny_phi3_reference.py",
                               args.output)
    print(f"wrote {args.output}: {size} bytes")
    for v in variants:
        for c in v["cases"]:
            print(v["variant"], c["case"], c["generated_tokens"])


if __name__ == "__main__":
    main()
