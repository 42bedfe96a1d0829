#!/usr/bin/env python3
"""Writes tests/data/wan/dit/: two tiny Wan DiTs with random weights and the velocities the
official Wan code (PyPI `wan22`, `wan.modules.model.WanModel`) computes with them, for
tests/models/wan_dit_test.cpp.

    tools/reference/.venv/bin/pip install -r tools/reference/requirements.txt
    tools/reference/.venv/bin/pip install --no-deps -r tools/reference/requirements-nodeps.txt
    tools/reference/.venv/bin/python tools/reference/make_dit_reference.py

The models: the official WanModel at dim 256 (2 heads of 128, so RoPE splits its 64 pairs 22/21/21
as in every real Wan), ffn_dim 128, 2 layers, freq_dim 256, text_len 512, text_dim 32,
qk_norm and cross_attn_norm on, eps 1e-6, patch (1,2,2):
  t2v    in/out 16 channels (Wan 2.1 T2V), one timestep for all tokens
  ti2v   in/out 48 channels (Wan 2.2 TI2V-5B), per-token timesteps: t = 0 on the tokens of latent
         frame 0 (the image frame), t elsewhere (wan.md §B.8)
The two share every tensor but the patch embedding and the head (same seed), so the fixture
stores those once:
  shared.safetensors                 every tensor but patch_embedding.* and head.* (official
                                     names, bf16)
  t2v_io.safetensors, ti2v_io.safetensors
                                     patch_embedding.*, head.head.*, head.modulation (bf16)
  t2v.safetensors.index.json, ti2v.safetensors.index.json
                                     Hugging Face shard indexes: shared + the model's io file
  diffusers_names.txt                "official diffusers" per line: the names diffusers gives
                                     these tensors (diffusers' own converter,
                                     `convert_wan_transformer_to_diffusers`, checked by loading
                                     the converted state dict into WanTransformer3DModel with
                                     strict=True); the test writes the diffusers-layout files from
                                     it, so the weights are not stored twice
  t2v_reference.safetensors, ti2v_reference.safetensors
                                     `x` F32 [C,3,8,12] (the injected noise latent), `context` F32
                                     [7,32] (bf16 values, 7 < 512 rows: the model pads to 512),
                                     and for each case i: `t.i` F32 [72] (the per-token timesteps
                                     passed to the model) and `v.i` F32 [C,3,8,12] (the velocity);
                                     cases 0-2 at t = 999, 500, 37 (ti2v: t = 0 on frame 0),
                                     ti2v case 3 with each token's t drawn from {0, 250, 999}
                                     (scattered: many runs of few distinct values)
Weights: Xavier-like random values under torch.manual_seed(SEED) (norm weights near 1, head not
zero), rounded to bf16 and kept as fp32 parameters holding those values — the official recipe
with a checkpoint stored in fp32 (wan.md §1), and exactly what Ferry reads from the bf16 files.

Running the official forward on a CPU (the math is not changed):
  * `flash_attention` (CUDA only) is replaced in the model module by the official `attention()`
    fallback's recipe: q, k, v cast to bf16, torch's scaled_dot_product_attention, the result cast
    back to q's dtype (k_lens never masks here: self-attention has no padding, cross-attention
    passes none).
  * The forward runs under torch.autocast('cpu', dtype=torch.bfloat16) in place of CUDA's
    autocast(bf16), so every Linear and the patch Conv3d take bf16 inputs and give bf16 outputs.
    The official code's nested `torch.amp.autocast('cuda', dtype=torch.float32)` regions (time
    MLP, modulation adds, gated residual adds, head) are redirected to device 'cpu': CPU autocast
    cannot target float32 and turns itself off inside them, which is the same thing here since
    every parameter is fp32 (what autocast(float32) would compute). The script checks the dtypes
    at the boundaries wan.md §1 names (e, e0 fp32; q/k/v Linear outputs bf16; the head fp32).
Deterministic: a rerun writes the same bytes.
"""

import json
import os
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

# Redirect the official code's CUDA autocast regions to the CPU before it is imported (the RoPE
# functions are decorated with autocast('cuda', enabled=False) at import time).
_real_autocast = torch.amp.autocast


class _CpuAutocast(_real_autocast):
    def __init__(self, device_type, *args, **kwargs):
        super().__init__("cpu" if device_type == "cuda" else device_type, *args, **kwargs)


torch.amp.autocast = _CpuAutocast
warnings.filterwarnings("ignore", message="In CPU autocast, but the target dtype is not supported")

from wan_reference import wan_module  # noqa: E402

SEED = 20261130
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "data", "wan", "dit")
DIM, FFN, HEADS, LAYERS, TEXT_DIM, FREQ_DIM = 256, 128, 2, 2, 32, 256
FRAMES, HEIGHT, WIDTH = 3, 8, 12  # latent; tokens 3 x 4 x 6 = 72
CONTEXT_ROWS = 7
TIMESTEPS = [999, 500, 37]
CONFIGS = {"t2v": 16, "ti2v": 48}

model_module = wan_module("wan.modules.model")


def cpu_flash_attention(q, k, v, q_lens=None, k_lens=None, dropout_p=0.0, softmax_scale=None,
                        q_scale=None, causal=False, window_size=(-1, -1), deterministic=False,
                        dtype=torch.bfloat16, version=None):
    assert q_lens is None and dropout_p == 0.0 and softmax_scale is None and q_scale is None
    assert not causal and tuple(window_size) == (-1, -1)
    if k_lens is not None:
        assert bool((k_lens == k.size(1)).all()), "no key padding in these cases"
    out_dtype = q.dtype
    half = lambda x: x if x.dtype in (torch.float16, torch.bfloat16) else x.to(dtype)
    q, k, v = half(q), half(k), half(v)
    assert q.dtype == k.dtype == v.dtype == torch.bfloat16
    x = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    return x.transpose(1, 2).contiguous().type(out_dtype)


model_module.flash_attention = cpu_flash_attention


def bf16_values(t):
    return t.to(torch.bfloat16).to(torch.float32)


def build(in_out):
    """The model for `in_out` channels; the shared tensors come from the same seed."""
    model = model_module.WanModel(
        model_type="ti2v" if in_out == 48 else "t2v", patch_size=(1, 2, 2), text_len=512,
        in_dim=in_out, dim=DIM, ffn_dim=FFN, freq_dim=FREQ_DIM, text_dim=TEXT_DIM, out_dim=in_out,
        num_heads=HEADS, num_layers=LAYERS, qk_norm=True, cross_attn_norm=True, eps=1e-6).eval()
    gen = torch.Generator().manual_seed(SEED)
    io_gen = torch.Generator().manual_seed(SEED + in_out)
    with torch.no_grad():
        for name, p in model.named_parameters():
            g = io_gen if name.startswith(("patch_embedding", "head.")) else gen
            noise = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if name.endswith("modulation"):
                value = noise / DIM ** 0.5
            elif "norm" in name and name.endswith("weight"):
                value = 1.0 + 0.2 * noise
            elif name.endswith("bias"):
                value = 0.1 * noise
            else:
                fan_in = p[0].numel()
                value = noise / fan_in ** 0.5
            p.copy_(bf16_values(value))
    return model


def check_dtypes(model):
    """Hooks asserting the dtype boundaries of wan.md §1 during one forward."""
    seen = {}

    def record(name):
        def hook(_module, _inputs, output):
            seen.setdefault(name, set()).add(output.dtype)
        return hook

    handles = [
        model.time_embedding.register_forward_hook(record("time_embedding")),
        model.time_projection.register_forward_hook(record("time_projection")),
        model.blocks[0].self_attn.q.register_forward_hook(record("q")),
        model.blocks[0].ffn.register_forward_hook(record("ffn")),
        model.text_embedding.register_forward_hook(record("text_embedding")),
        model.head.register_forward_hook(record("head")),
        model.patch_embedding.register_forward_hook(record("patch_embedding")),
    ]
    return seen, handles


def forward(model, x, t_tokens, context):
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = model([x], t=t_tokens[None, :], context=[context], seq_len=t_tokens.numel())
    return out[0].float()


def token_timesteps(in_out, t):
    tokens = FRAMES * (HEIGHT // 2) * (WIDTH // 2)
    ts = torch.full((tokens,), float(t))
    if in_out == 48:
        ts[: (HEIGHT // 2) * (WIDTH // 2)] = 0.0  # latent frame 0 holds the image
    return ts


def main():
    os.makedirs(OUT, exist_ok=True)
    models = {name: build(ch) for name, ch in CONFIGS.items()}
    shared = {}
    for name, model in models.items():
        state = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
        io = {k: v for k, v in state.items() if k.startswith(("patch_embedding", "head."))}
        rest = {k: v for k, v in state.items() if k not in io}
        if shared:
            assert shared.keys() == rest.keys()
            assert all(torch.equal(shared[k], rest[k]) for k in rest)
        shared = rest
        save_file(io, os.path.join(OUT, f"{name}_io.safetensors"), metadata={"format": "pt"})
        weight_map = {k: "shared.safetensors" for k in rest}
        weight_map.update({k: f"{name}_io.safetensors" for k in io})
        with open(os.path.join(OUT, f"{name}.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": sum(v.numel() * 2 for v in state.values())},
                       "weight_map": dict(sorted(weight_map.items()))}, f, indent=1)
            f.write("\n")
    save_file(shared, os.path.join(OUT, "shared.safetensors"), metadata={"format": "pt"})

    # diffusers' names for the same tensors, checked against its model class.
    from diffusers import WanTransformer3DModel
    from diffusers.loaders.single_file_utils import convert_wan_transformer_to_diffusers
    lines = []
    for name, ch in CONFIGS.items():
        official = models[name].state_dict()
        renamed = {}
        for key in official:
            converted = convert_wan_transformer_to_diffusers({key: official[key]})
            (new_key,) = converted.keys()
            renamed[key] = new_key
        df = WanTransformer3DModel(
            patch_size=(1, 2, 2), num_attention_heads=HEADS, attention_head_dim=DIM // HEADS,
            in_channels=ch, out_channels=ch, text_dim=TEXT_DIM, freq_dim=FREQ_DIM, ffn_dim=FFN,
            num_layers=LAYERS, cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6)
        df.load_state_dict({renamed[k]: v for k, v in official.items()}, strict=True)
        lines += [f"{k} {renamed[k]}" for k in official]
    with open(os.path.join(OUT, "diffusers_names.txt"), "w") as f:
        f.write("# official name, diffusers name (diffusers' convert_wan_transformer_to_diffusers)\n")
        f.write("\n".join(sorted(set(lines))) + "\n")

    for name, ch in CONFIGS.items():
        model = models[name]
        gen = torch.Generator().manual_seed(SEED + 1000 + ch)
        x = torch.randn((ch, FRAMES, HEIGHT, WIDTH), generator=gen)
        context = bf16_values(torch.randn((CONTEXT_ROWS, TEXT_DIM), generator=gen))
        tensors = {"x": x.contiguous(), "context": context.contiguous()}
        seen, handles = check_dtypes(model)
        for i, t in enumerate(TIMESTEPS):
            ts = token_timesteps(ch, t)
            v = forward(model, x, ts, context)
            assert v.shape == x.shape and torch.isfinite(v).all()
            tensors[f"t.{i}"] = ts.contiguous()
            tensors[f"v.{i}"] = v.contiguous()
            print(f"{name} t={t}: |v| max {v.abs().max():.4f} rms {v.pow(2).mean().sqrt():.4f}")
        if ch == 48:
            i = len(TIMESTEPS)
            choice = torch.randint(0, 3, (ts.numel(),), generator=gen)
            ts = torch.tensor([0.0, 250.0, 999.0])[choice]
            tensors[f"t.{i}"] = ts.contiguous()
            tensors[f"v.{i}"] = forward(model, x, ts, context).contiguous()
        for h in handles:
            h.remove()
        assert seen["time_embedding"] == {torch.float32}
        assert seen["time_projection"] == {torch.float32}
        assert seen["q"] == {torch.bfloat16} and seen["ffn"] == {torch.bfloat16}
        assert seen["text_embedding"] == {torch.bfloat16}
        assert seen["patch_embedding"] == {torch.bfloat16}
        assert seen["head"] == {torch.float32}
        save_file(tensors, os.path.join(OUT, f"{name}_reference.safetensors"),
                  metadata={"timesteps": ",".join(str(t) for t in TIMESTEPS)})


if __name__ == "__main__":
    main()
