#!/usr/bin/env python3
"""Writes tests/data/h3/text_encoder/tiny/int8.safetensors: the tiny text encoder of
make_h3_text_encoder_reference.py (config `tiny`: hidden 16, 2 heads of 8, MLP 16) with its 50
layers' seven Linears quantised to Comfy-Org's int8 ConvRot by comfy-kitchen 0.2.40
(quantize_int8_convrot_weight, group 16: the largest power of 4 dividing 16), and the hidden
states transformers' Qwen3VLModel gives with comfy-kitchen's dequantised weights
(dequantize_int8_convrot_weight, rounded to bf16 as Comfy's mixed ops hand them to the model).

    tools/reference/.venv/bin/python tools/reference/make_h3_text_encoder_int8_reference.py

A Comfy-Org file with one tensor per Linear would not fit a small fixture (its header alone, 1050
tensors, is over 100 KB), so the codes and scales are stacked; tests/models/
h3_text_encoder_test.cpp writes them into tiny/comfy.safetensors's names as Comfy-Org's file
holds them (`.weight` I8, `.weight_scale` F32 [out, 1], `.comfy_quant`):
  codes   I8 [50, 7, 16, 16]  layer, Linear (q, k, v, o, gate, up, down), [out, in]
  scales  F32 [50, 7, 16]     the row scales
  C.bf16  F32 [L, 16]         hidden_states[50] of the bf16 model with the dequantised weights,
  C.f32   F32 [L, 16]         and of the f32 model with the same weights, for the cases C of
                              make_h3_text_encoder_reference.py (their ids, positions and vision
                              rows are in reference.safetensors under tiny.C.*)
It prints each case's floor: the bf16 run against the f32 run of the same weights.
"""

import os
import sys

import numpy as np
import torch
from comfy_kitchen.backends.eager.quantization import (dequantize_int8_convrot_weight,
                                                       quantize_int8_convrot_weight)
from safetensors.numpy import save_file
from safetensors.torch import load_file
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_h3_text_encoder_reference as te  # noqa: E402

GROUP = 16


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    c = te.CONFIGS["tiny"]
    model = te.build_model(c)
    lm = te.lm_state(model)
    # The same weights as the committed tiny/comfy.safetensors.
    comfy = load_file(os.path.join(te.OUT, "tiny", "comfy.safetensors"))
    for name, v in comfy.items():
        assert torch.equal(v.float(), lm[name[len("model."):]].float()), name
    codes = np.zeros((te.OUTPUT_LAYER, len(te.LINEARS), 16, 16), np.int8)
    scales = np.zeros((te.OUTPUT_LAYER, len(te.LINEARS), 16), np.float32)
    meant = {}
    for layer in range(te.OUTPUT_LAYER):
        for k, linear in enumerate(te.LINEARS):
            name = f"layers.{layer}.{linear}.weight"
            q, s = quantize_int8_convrot_weight(lm[name].float(), GROUP)
            assert q.dtype == torch.int8 and tuple(q.shape) == (16, 16)
            codes[layer, k] = q.numpy()
            scales[layer, k] = s.float().reshape(-1).numpy()
            meant[name] = dequantize_int8_convrot_weight(q, s, GROUP).to(torch.bfloat16).float()
    model.language_model.load_state_dict(meant, strict=False)
    model_bf16 = te.build_model(c)
    model_bf16.language_model.load_state_dict(meant, strict=False)
    model_bf16 = model_bf16.to(torch.bfloat16)

    tokenizer = Tokenizer.from_file(te.TOKENIZER)
    reference = load_file(os.path.join(te.OUT, "reference.safetensors"))
    out = {"codes": codes, "scales": scales}
    for case in te.CASES:
        key = f"tiny.{case}"
        ids = reference[key + ".ids"].tolist()
        positions = reference[key + ".positions"].long()[:, None, :]
        vision = None
        if key + ".vision_rows" in reference:
            rows = reference[key + ".vision_rows"].long()
            vision = (rows, reference[key + ".vision_embeds"],
                      list(reference[key + ".deepstack"]))
        assert ids == te.presentation(tokenizer, te.CASES[case])[0]
        out[case + ".bf16"] = te.hidden_50(model_bf16, ids, positions, vision).numpy()
        out[case + ".f32"] = te.hidden_50(model, ids, positions, vision).numpy()
        d = np.abs(out[case + ".bf16"] - out[case + ".f32"])
        ref = out[case + ".f32"]
        print(f"{key:18s} L={len(ids):3d}  bf16 vs f32: max {d.max():.4f}  rel rms "
              f"{np.sqrt((d ** 2).sum() / (ref ** 2).sum()):.5f}  |y| max {np.abs(ref).max():.2f}")
    path = os.path.join(te.OUT, "tiny", "int8.safetensors")
    save_file(out, path, metadata={"format": "pt"})
    os.chmod(path, 0o644)
    print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
