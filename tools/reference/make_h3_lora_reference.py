#!/usr/bin/env python3
"""Writes tests/data/h3_lora/: a tiny MiniMax-H3 DiT with 128-wide heads (the width diffusers'
DiffSynth de-interleave assumes), two tiny random LoRAs for it, and the velocities diffusers
0.42.1's MiniMaxH3Transformer3DModel computes with each LoRA, for the runtime (bypass) LoRA parity
test tests/models/h3_dit_lora_test.cpp.

    /work/main/tools/reference/.venv/bin/python tools/reference/make_h3_lora_reference.py

The DiT: make_h3_dit_reference.py's build_model (same seed and draws) on the configuration LORA
below (2 heads of 128: inner 256, hidden 16, FFN 32, 2 blocks, 1 refiner block, rope_freq_dim 2),
written as diffusers.safetensors, interleaved.safetensors and stacked.safetensors (its names and
QKV layouts, §C.9), bf16 with f32 islands.
LoRAs (A = down [r, in], B = up [out, r], values drawn in f32 then stored bf16; A ~ N(0, 1/in),
B ~ N(0, 0.5/r)):
  lightx2v.safetensors  the Turbo LoRAs' naming: `diffusion_model.<original>.lora_down.weight` /
                        `.lora_up.weight` / `.alpha`; rank 4 alpha 2 (scale 0.5) on every block
                        and refiner Linear (qkv_proj stacked [q|k|v], out_proj, mlp.fc1
                        [gate; value], mlp.fc2), rank 2 alpha 2 (scale 1) on each adaln_proj.linear
                        and the outer Linears (video/audio_patch_proj, condition_proj,
                        time_embedder.proj_in/out, final_layer.adaln_proj.linear/video_out/
                        audio_out)
  diffsynth.safetensors DiffSynth's peft naming: `<original>.lora_A.default.weight` /
                        `.lora_B.default.weight`, no alpha (scale 1), rank 4, qkv_proj rows per-head
                        interleaved [heads][q,k,v][128], on the blocks' qkv_proj, out_proj, fc1, fc2
  diffsynth_alpha.safetensors  the same tensors with `__metadata__` {"alpha": "2"}, which diffusers'
                        H3 loader reads as every module's network alpha (scale 2 / 4 = 0.5)
The expected outputs: each LoRA through diffusers' MiniMaxH3LoraLoaderMixin.lora_state_dict (which
runs _convert_non_diffusers_minimax_h3_lora_to_diffusers: names, alpha folded, QKV split and
de-interleaved, fc1 halves swapped), merged W + B·A into the f32 model ("f32") and into the
mixed-precision model, rounded to its dtypes ("bf16"); no peft here, so the merge stands in for
load_lora_adapter, whose bypass sum equals it up to rounding; the network alpha the loader returns
in its metadata (`transformer.lora_alpha`) scales B·A by lora_alpha / rank, as peft does. Plus the
model without LoRA ("base").
reference.safetensors, per case K in (t2va, fl2va) and kept step S in (0, 2) of the 5-point
schedule: K.video_in, K.audio_in, K.text_in (as make_h3_dit_reference.py), K.text_tags, and
K.sS.{base,lightx2v,diffsynth,diffsynth_alpha}.{bf16,f32}.{video,audio}.
"""

import os
import sys

import numpy as np
import torch
from safetensors.numpy import save_file as save_numpy
from safetensors.torch import save_file as save_torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_h3_dit_reference as h3  # noqa: E402
from diffusers.loaders.lora_pipeline import MiniMaxH3LoraLoaderMixin  # noqa: E402

SEED = 20261230
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "data", "h3_lora")
LORA = dict(num_attention_heads=2, attention_head_dim=128, hidden_size=16, num_layers=2,
            num_refiner_layers=1, ffn_dim=32, in_channels=4, audio_in_channels=6,
            patch_size=(1, 2, 2), text_dim=8, freq_dim=8, time_embed_hidden_dim=16,
            time_embed_dim=16, rope_freq_dim=2)
GEOMETRY = "tiny"  # make_h3_dit_reference's tiny geometry: T'=2, latent 4x6, 5 audio, 7 text
CASES = {"t2va": (), "fl2va": ("first", "last")}
OUTER = ("video_patch_proj", "audio_patch_proj", "condition_proj", "time_embedder.proj_in",
         "time_embedder.proj_out", "final_layer.adaln_proj.linear", "final_layer.video_out",
         "final_layer.audio_out")


def linear_shapes(original):
    """{original module: (out, in)} for every Linear weight of the original-named state."""
    return {k[: -len(".weight")]: tuple(v.shape) for k, v in original.items()
            if k.endswith(".weight") and v.dim() == 2}


def draw_pair(g, out_f, in_f, rank):
    down = torch.randn(rank, in_f, generator=g) / np.sqrt(in_f)
    up = torch.randn(out_f, rank, generator=g) * (0.5 / np.sqrt(rank))
    return down.to(torch.bfloat16), up.to(torch.bfloat16)


def lightx2v_lora(shapes):
    g = torch.Generator().manual_seed(SEED)
    out = {}
    for module, (out_f, in_f) in sorted(shapes.items()):
        block_linear = module.endswith(("qkv_proj", "out_proj", "mlp.fc1", "mlp.fc2"))
        if not (block_linear or module.endswith("adaln_proj.linear") or module in OUTER):
            continue
        rank = 4 if block_linear else 2
        down, up = draw_pair(g, out_f, in_f, rank)
        key = "diffusion_model." + module
        out[key + ".lora_down.weight"] = down
        out[key + ".lora_up.weight"] = up
        out[key + ".alpha"] = torch.tensor(2.0, dtype=torch.float32)
    return out


def diffsynth_lora(shapes):
    g = torch.Generator().manual_seed(SEED + 1)
    out = {}
    for module, (out_f, in_f) in sorted(shapes.items()):
        if not module.startswith("blocks.") or not module.endswith(
                ("qkv_proj", "out_proj", "mlp.fc1", "mlp.fc2")):
            continue
        down, up = draw_pair(g, out_f, in_f, 4)
        out[module + ".lora_A.default.weight"] = down
        out[module + ".lora_B.default.weight"] = up
    return out


def merged(model, lora_path):
    """`model` (diffusers names) with the LoRA at lora_path merged: W += B·A in f32, then stored in
    the parameter's dtype."""
    state, metadata = MiniMaxH3LoraLoaderMixin.lora_state_dict(lora_path,
                                                                return_lora_metadata=True)
    network_alpha = (metadata or {}).get("transformer.lora_alpha")
    params = dict(model.named_parameters())
    with torch.no_grad():
        for key, a in state.items():
            if ".lora_A." not in key:
                continue
            module = key[len("transformer."): key.index(".lora_A.")]
            b = state[key.replace(".lora_A.", ".lora_B.")]
            scale = 1.0 if network_alpha is None else network_alpha / b.shape[1]
            w = params[module + ".weight"]
            w.copy_((w.float() + scale * (b.float() @ a.float())).to(w.dtype))
    return model


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(OUT, exist_ok=True)
    c = LORA
    f32 = h3.build_model(c)
    state = {k: v.detach().clone() for k, v in f32.state_dict().items()}
    save_torch(h3.state_mixed(state), os.path.join(OUT, "diffusers.safetensors"))
    for qkv in ("interleaved", "stacked"):
        save_torch(h3.state_mixed(h3.original_state(state, c, qkv)),
                   os.path.join(OUT, f"{qkv}.safetensors"))
    shapes = linear_shapes(h3.original_state(state, c, "stacked"))
    loras = {"lightx2v": lightx2v_lora(shapes), "diffsynth": diffsynth_lora(shapes)}
    loras["diffsynth_alpha"] = loras["diffsynth"]
    metadata = {"diffsynth_alpha": {"alpha": "2"}}
    models = {("base", "f32"): f32, ("base", "bf16"): h3.mixed(f32)}
    for name, tensors in loras.items():
        path = os.path.join(OUT, f"{name}.safetensors")
        save_torch({k: v.contiguous() for k, v in tensors.items()}, path,
                   metadata=metadata.get(name))
        models[(name, "f32")] = merged(h3.build_model(c), path)
        models[(name, "bf16")] = merged(h3.mixed(h3.build_model(c)), path)

    ref = {}
    video_sched, audio_sched = h3.schedules()
    for case, anchors in CASES.items():
        lay = h3.layout_case(GEOMETRY, c, anchors)
        inputs = h3.make_inputs(GEOMETRY, c, lay, SEED + len(case) * 31 + len(anchors))
        ref[f"{case}.text_tags"] = lay["text_tags"].numpy().astype(np.int32)
        ref[f"{case}.video_in"] = inputs["video"].numpy()
        ref[f"{case}.audio_in"] = inputs["audio"].numpy()
        ref[f"{case}.text_in"] = inputs["text"].numpy()
        for s in h3.KEPT_STEPS:
            timestep, indices = h3.row_timesteps(lay, video_sched.timesteps[s],
                                                 audio_sched.timesteps[s])
            for (name, kind), model in models.items():
                v, a = h3.forward(model, inputs, lay, timestep, indices)
                ref[f"{case}.s{s}.{name}.{kind}.video"] = v.numpy()
                ref[f"{case}.s{s}.{name}.{kind}.audio"] = a.numpy()
            for name in ("base", *loras):
                for part in ("video", "audio"):
                    b = torch.tensor(ref[f"{case}.s{s}.{name}.bf16.{part}"])
                    f = torch.tensor(ref[f"{case}.s{s}.{name}.f32.{part}"])
                    base = torch.tensor(ref[f"{case}.s{s}.base.f32.{part}"])
                    print(f"{case:6s} s{s} {name:9s} {part}: bf16 vs f32 rel rms {h3.rel(b, f):.5f}"
                          f" max {float((b - f).abs().max()):.4f} |v| {float(f.abs().max()):.2f};"
                          f" LoRA effect rel rms {h3.rel(f, base):.4f}")
    save_numpy(ref, os.path.join(OUT, "reference.safetensors"),
               metadata={"generator": f"tools/reference/make_h3_lora_reference.py (torch "
                                      f"{torch.__version__}, seed {SEED})"})
    for f in os.listdir(OUT):
        os.chmod(os.path.join(OUT, f), 0o644)


if __name__ == "__main__":
    main()
