#!/usr/bin/env python3
"""Writes tests/support/tiny_gemma2_reference.inc: HF transformers' greedy tokens and logits for
tiny-gemma2, a Gemma2ForCausalLM made from ../shared/models/arch/tiny-qwen3-hf's weights.

tiny-gemma2 is tiny-gemma3's checkpoint (gen_tiny_gemma3_reference.py: tiny-qwen3's attention,
MLP and tied embeddings, Gemma's four norms per layer derived from tiny-qwen3's two) without the
q/k norms Gemma 2 does not have, under a Gemma 2 config: embeddings scaled by sqrt(hidden), GELU
(tanh) gating, norms after the attention and after the MLP, a sliding window of 5 positions on
layer 0 and full attention on layer 1 (Gemma 2's pattern: every other layer global), one rope
(base 10000) for both, query_pre_attn_scalar 24, and the soft caps Gemma 2 adds — attention scores
capped at 4 and the final logits at 6, far below Gemma 2's 50 and 30 so that both bite on this
small model (on prompt 3 its logits reach 15.7 uncapped; capping the scores alone moves them by up
to 4.9).
The C++ tests (tests/support/tiny_gemma.h) build the same checkpoint the same way.

Over tiny-qwen3's reference prompts 1 and 3 (lengths 1 and 17), 24 greedy tokens each. Float64
forward, eager attention, the whole sequence recomputed each step; a logits row is kept as its 8
largest entries and 8 fixed ones. The document also keeps the config as transformers 5 writes it
back (`config_v5`), which the export must read the same way.

Needs torch, transformers and safetensors (any CPU install). Run from the repository root:
  python3 tests/tools/gen_tiny_gemma2_reference.py [--models ../shared/models]
"""
import torch
from transformers import Gemma2ForCausalLM

from gen_tiny_gemma3_reference import CONFIG as GEMMA3_CONFIG
from gen_tiny_gemma3_reference import gemma3_state
from hf_reference_common import generate_tiny_reference

# tiny-gemma3's config less its second rope, window pattern key and linear scaling, plus the caps.
CONFIG = {k: v for k, v in GEMMA3_CONFIG.items()
          if k not in ("rope_local_base_freq", "rope_scaling", "sliding_window_pattern")}
CONFIG.update({
    "architectures": ["Gemma2ForCausalLM"],
    "model_type": "gemma2",
    "rope_theta": 10000.0,
    "attn_logit_softcapping": 4.0,
    "final_logit_softcapping": 6.0,
})


def gemma2_state(qwen3_dir):
    return {k: v for k, v in gemma3_state(qwen3_dir).items()
            if not (k.endswith("q_norm.weight") or k.endswith("k_norm.weight"))}


def check(model, prompts):
    assert model.config.layer_types == ["sliding_attention", "full_attention"], \
        model.config.layer_types
    assert abs(model.model.layers[0].self_attn.scaling - 24 ** -0.5) < 1e-15
    # The caps must bite: the uncapped model's logits go well past the final cap.
    with torch.no_grad():
        ids = torch.tensor([prompts[3]])
        capped = model(ids, use_cache=False).logits
        model.config.final_logit_softcapping = None
        uncapped = model(ids, use_cache=False).logits
        model.config.final_logit_softcapping = CONFIG["final_logit_softcapping"]
    print("largest logit uncapped / capped:", float(uncapped.abs().max()),
          float(capped.abs().max()))
    assert float(uncapped.abs().max()) > 1.5 * CONFIG["final_logit_softcapping"]


if __name__ == "__main__":
    generate_tiny_reference("tests/tools/gen_tiny_gemma2_reference.py", Gemma2ForCausalLM, CONFIG,
                            gemma2_state, "tests/support/tiny_gemma2_reference.inc", check)
