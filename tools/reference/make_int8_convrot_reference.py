#!/usr/bin/env python3
"""Writes tests/data/int8_convrot/linear.safetensors: Comfy-Org int8 ConvRot Linears
(minimax_h3.md §G.3) made by comfy-kitchen 0.2.40's own quantiser from random f32 weights, with
inputs and the outputs of its own dequantiser, for tests/backend/cpu_int8_convrot_test.cpp.

Per case <c> (out, in, group): <c>.weight int8 [out, in], <c>.weight_scale f32 [out, 1],
<c>.comfy_quant (uint8 JSON bytes, as the files carry it), <c>.x f32 [M, in],
<c>.y f32 [M, out] = x · W_deqᵀ computed in float64, W_deq = comfy-kitchen's
dequantize_int8_convrot_weight (f32). reference.json holds the measured floors:
  f32_floor   max |f32 torch x · W_deqᵀ − y| (what any f32 GEMM of the same weight misses by)
  rot_floor   max |f32 (x · H per group) · (q · s)ᵀ − y| (the rotate-x association Ferry uses)
  quant_floor max |x · Wᵀ − y| / max |y| (what int8 ConvRot costs against the f32 weight)

It also writes tests/data/int8_convrot/dit_tiny.safetensors: tests/data/h3_dit/tiny/
stacked.safetensors (original names, stacked QKV, bf16) with every block Linear (blocks.N and
token_refiner.blocks.N: qkv, out, fc1, fc2, adaln) quantised by comfy-kitchen to int8 ConvRot as
Comfy-Org's files store them, the group size per layer the largest power of 4 (at most 256) that
divides its input width. dit_floor in reference.json is the int8 floor at the DiT's output: diffusers'
model with comfy-kitchen's dequantised weights (bf16, as Comfy casts them) against the bf16
reference outputs of tests/data/h3_dit/reference.safetensors, worst relative RMS and max |d| over
the tiny configuration's 4 layouts, 2 steps, video and audio.

Deterministic (seeded). Run with the reference venv:

    /work/main/tools/reference/.venv/bin/python tools/reference/make_int8_convrot_reference.py
"""

import json
import os

import torch
from comfy_kitchen.backends.eager.quantization import (dequantize_int8_convrot_weight,
                                                       quantize_int8_convrot_weight)
from comfy_kitchen.tensor.int8_utils import _build_hadamard
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "data", "int8_convrot")

# name: (out, in, group, tokens)
CASES = {"g256": (48, 512, 256, 5), "g64": (40, 192, 64, 3), "g16": (24, 48, 16, 4),
         "g4": (8, 32, 4, 2)}


def comfy_quant(group):
    text = json.dumps({"format": "int8_tensorwise", "convrot": True, "convrot_groupsize": group})
    return torch.frombuffer(bytearray(text.encode("utf-8")), dtype=torch.uint8).clone()


def main():
    os.makedirs(OUT, exist_ok=True)
    gen = torch.Generator().manual_seed(20261202)
    tensors, floors = {}, {}
    for name, (out_f, in_f, group, tokens) in CASES.items():
        w = torch.randn(out_f, in_f, generator=gen) * 0.05
        x = torch.randn(tokens, in_f, generator=gen)
        q, s = quantize_int8_convrot_weight(w, group)
        w_deq = dequantize_int8_convrot_weight(q, s, group)
        y = (x.double() @ w_deq.double().T)
        f32 = x @ w_deq.T
        h = _build_hadamard(group)
        x_rot = (x.reshape(tokens, -1, group) @ h).reshape(tokens, in_f)
        rot = x_rot @ (q.float() * s).T
        exact = x.double() @ w.double().T
        floors[name] = {
            "f32_floor": (f32.double() - y).abs().max().item(),
            "rot_floor": (rot.double() - y).abs().max().item(),
            "max_abs_y": y.abs().max().item(),
            "quant_floor": ((exact - y).abs().max() / y.abs().max()).item(),
        }
        tensors[f"{name}.weight"] = q.contiguous()
        tensors[f"{name}.weight_scale"] = s.float().contiguous()
        tensors[f"{name}.comfy_quant"] = comfy_quant(group)
        tensors[f"{name}.x"] = x.contiguous()
        tensors[f"{name}.y"] = y.float().contiguous()
    save_file(tensors, os.path.join(OUT, "linear.safetensors"))
    os.chmod(os.path.join(OUT, "linear.safetensors"), 0o644)
    dit_floor = make_dit()
    with open(os.path.join(OUT, "reference.json"), "w") as f:
        json.dump({"cases": {k: list(v) for k, v in CASES.items()}, "floors": floors,
                   "dit_floor": dit_floor}, f, indent=1)
    print(json.dumps(floors, indent=1))
    print("dit_floor", json.dumps(dit_floor))


DIT_LINEARS = ("attn.qkv_proj", "attn.out_proj", "mlp.fc1", "mlp.fc2", "adaln_proj.linear")


def convrot_group(in_f):
    group = 4
    while group * 4 <= 256 and in_f % (group * 4) == 0:
        group *= 4
    return group


def make_dit():
    """The int8 tiny DiT and its floor (see the module's docstring)."""
    import sys
    import numpy as np
    from safetensors.torch import load_file
    sys.path.insert(0, HERE)
    import make_h3_dit_reference as h3  # noqa: E402
    torch.set_num_threads(1)
    h3_out = h3.OUT
    src = load_file(os.path.join(h3_out, "tiny", "stacked.safetensors"))
    out, meant = {}, {}
    for name, v in src.items():
        base = name[: -len(".weight")] if name.endswith(".weight") else None
        quantise = (base is not None and v.dim() == 2 and name.startswith(("blocks.", "token_refiner.blocks."))
                    and base.split(".", 2 if name.startswith("blocks.") else 3)[-1] in DIT_LINEARS)
        meant[name] = v.float()
        if not quantise:
            out[name] = v
            continue
        group = convrot_group(v.shape[1])
        q, s = quantize_int8_convrot_weight(v.float(), group)
        out[name] = q.contiguous()
        out[base + ".weight_scale"] = s.float().contiguous()
        out[base + ".comfy_quant"] = comfy_quant(group)
        meant[name] = dequantize_int8_convrot_weight(q, s, group).to(torch.bfloat16).float()
    save_file(out, os.path.join(OUT, "dit_tiny.safetensors"), metadata={"format": "pt"})
    os.chmod(os.path.join(OUT, "dit_tiny.safetensors"), 0o644)

    c = h3.CONFIGS["tiny"]
    model = h3.build_model(c)
    model.load_state_dict(h3.diffusers_from_original(meant, c, "stacked"))
    model = h3.mixed(model)
    ref = load_file(os.path.join(h3_out, "reference.safetensors"))
    worst = {"rel_rms": 0.0, "max_abs": 0.0}
    for lname, anchors in h3.LAYOUTS.items():
        lay = h3.layout_case("tiny", c, anchors)
        key = f"tiny.{lname}"
        inputs = {"video": ref[f"{key}.video_in"], "audio": ref[f"{key}.audio_in"],
                  "text": ref[f"{key}.text_in"]}
        for step in h3.KEPT_STEPS:
            timestep = ref[f"{key}.s{step}.timestep"]
            indices = ref[f"{key}.s{step}.timestep_indices"].long()
            video, audio = h3.forward(model, inputs, lay, timestep, indices)
            for part, got in (("video", video), ("audio", audio)):
                want = ref[f"{key}.s{step}.bf16.{part}"]
                worst["rel_rms"] = max(worst["rel_rms"], h3.rel(got, want))
                worst["max_abs"] = max(worst["max_abs"], float((got - want).abs().max()))
    return worst


if __name__ == "__main__":
    main()
