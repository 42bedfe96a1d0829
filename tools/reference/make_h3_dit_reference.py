#!/usr/bin/env python3
"""Writes tests/data/h3_dit/: tiny MiniMax-H3 DiTs with random weights in the key layouts H3's DiT
files use, the packed sequences diffusers builds for them, and the velocities of diffusers'
MiniMaxH3Transformer3DModel that tests/models/h3_dit_test.cpp compares Ferry with.

    /work/main/tools/reference/.venv/bin/python tools/reference/make_h3_dit_reference.py

(any venv with torch and diffusers 0.42.1; minimax_h3.md §C-D, §H.2). Two configurations:
  tiny  diffusers' own test configuration (§H.2): 2 heads of 16, hidden 24, FFN 32, 2 blocks, 2
        refiner blocks, video 4 channels, audio 6, text 8, freq 8, time MLP 24 -> 16, rope_freq_dim
        2 (12 of the 16 head dims rotate)
  wide  4 heads of 32, hidden 64, FFN 128, 2 blocks, 2 refiner blocks, video 8 channels, audio 8,
        text 32, freq 16, time MLP 64 -> 64, rope_freq_dim 4 (24 of 32 dims rotate); every Linear's
        input is a multiple of 64, so bitsandbytes NF4 blocks do not straddle rows (as in the 33B
        model) and this one is also written as DiffSynth's NF4 files, full and pruned
Weights: normal draws under torch.manual_seed(SEED) (Linear std 1/sqrt(in), out and fc2 halved,
biases 0.1 N(0,1), norm weights 1 + 0.2 N(0,1)); the bf16 modules rounded to bf16, the fp32 islands
(patch projections, time MLP, output heads) kept f32, as the release stores them.

Files per configuration C (names and layouts of §C.9, §C.11, §G):
  C/diffusers.safetensors     diffusers' names (to_q/to_k/to_v, ff.net.0.proj [value; gate]), bf16
                              with f32 islands (the release's transformer/ folder)
  C/interleaved.safetensors   original names, qkv_proj rows per-head interleaved [heads][q,k,v][D],
                              fc1 [gate; value] (MiniMaxAI's FL2VA/transformer shards)
  C/stacked.safetensors       original names, qkv_proj rows [q|k|v] (Comfy-Org's layout)
  tiny/f32.safetensors        diffusers' names, every tensor f32 (the same values)
  C/pruned.safetensors        the AdaLN-curve variant (§C.10): original names, stacked QKV, no
                              time_embedder, adaln_t_table [1025, 8] f32, every adaln_proj.linear
                              [.., 8]; its own random curve weights
  wide/nf4.safetensors        DiffSynth's full NF4 file: original names, interleaved QKV, block and
                              refiner Linears (adaln_proj and final adaln too) bitsandbytes NF4
                              (blocksize 64, nested), the f32 islands stored bf16
  wide/nf4_pruned.safetensors DiffSynth's pruned NF4 file: stacked QKV, adaln_proj.linear bf16,
                              adaln_t_table f32
  reference.safetensors       per configuration C and layout K (t2va, i2va_first, i2va_last,
                              fl2va):
      C.K.text_tags (I32 [L]), C.K.positions (F64 [S, 3]), C.K.tags (I32 [S]), C.K.video_indices,
      C.K.audio_indices (I32), and per step s of a 5-point schedule (4 evaluations) kept:
      C.K.sS.timestep (F32, torch.unique's sorted values), C.K.sS.timestep_indices (I32 [S]);
      inputs C.K.video_in (F32 [Nv, patch dim]: keyframe rows then target rows), C.K.audio_in (F32
      [Na, audio ch]), C.K.text_in (F32 [L, text_dim], bf16 values), C.K.latent (F32 [ch, T', h, w],
      whose patchify is the target rows); outputs per kept step and weight kind W (bf16: the mixed
      model, f32: the same weights in f32, and for the pruned/NF4 files their own):
      C.K.sS.W.video (F32 [Nv, patch dim]), C.K.sS.W.audio (F32 [Na, audio ch])
  and the schedules: sched.N.shiftS.sigmas / .timesteps (F32) for N in (2, 5, 20, 50) and shifts
  12, 3, 6; and a 4-step trajectory on tiny/t2va (traj.video / traj.audio: the f32 latents rows
  after the loop of diffusers' scheduler, bf16 model, noise = the inputs).
Layouts: tiny T'=2, latent 4x6 (6 rows a frame), 5 audio latents a channel, 7 text rows; wide T'=3,
latent 8x6 (12 rows), 9 audio latents, 11 text rows (S = 65 for T2VA, 89 for FL2VA: not multiples
of 64). Text tags 1, with a vision block tagged 0 when a keyframe is given. Fixed seeds, one thread,
deterministic algorithms.
"""

import copy
import os
import sys

import numpy as np
import torch
from diffusers import MiniMaxH3Scheduler, MiniMaxH3Transformer3DModel
from diffusers.modular_pipelines.minimax_h3.before_denoise import (
    MiniMaxH3PrepareLayoutStep, MiniMaxH3SetTimestepsStep, patchify_video_latents)
from safetensors.numpy import save_file as save_numpy
from safetensors.torch import save_file as save_torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_bnb4_reference as bnb4  # noqa: E402

SEED = 20261219
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "data", "h3_dit")
CONFIGS = {
    "tiny": dict(num_attention_heads=2, attention_head_dim=16, hidden_size=24, num_layers=2,
                 num_refiner_layers=2, ffn_dim=32, in_channels=4, audio_in_channels=6,
                 patch_size=(1, 2, 2), text_dim=8, freq_dim=8, time_embed_hidden_dim=24,
                 time_embed_dim=16, rope_freq_dim=2),
    "wide": dict(num_attention_heads=4, attention_head_dim=32, hidden_size=64, num_layers=2,
                 num_refiner_layers=2, ffn_dim=128, in_channels=8, audio_in_channels=8,
                 patch_size=(1, 2, 2), text_dim=32, freq_dim=16, time_embed_hidden_dim=64,
                 time_embed_dim=64, rope_freq_dim=4),
}
# (latent frames, latent h, latent w, audio latents a channel, text rows)
GEOMETRY = {"tiny": (2, 4, 6, 5, 7), "wide": (3, 8, 6, 9, 11)}
LAYOUTS = {"t2va": (), "i2va_first": ("first",), "i2va_last": ("last",),
           "fl2va": ("first", "last")}
STEPS = 5           # schedule grid points: 4 evaluations
KEPT_STEPS = (0, 2)  # the steps whose forwards are stored
VIDEO_SHIFT, AUDIO_SHIFT = 12.0, 3.0
KEYFRAME_NOISE_AUG = 0.999
CURVE_WIDTH = 8
CURVE_ROWS = 1025
FP32_KEEP = ("proj_in", "audio_proj_in", "time_embedder", "proj_out", "audio_proj_out", "rope")


def build_model(c):
    torch.manual_seed(SEED)
    model = MiniMaxH3Transformer3DModel(**c).eval()
    with torch.no_grad():
        for name, module in model.named_modules():
            if isinstance(module, torch.nn.Linear):
                std = 1.0 / np.sqrt(module.in_features)
                if name.endswith(("to_out.0", "ff.net.2")):
                    std *= 0.5
                module.weight.normal_(0.0, std)
                if module.bias is not None:
                    module.bias.normal_(0.0, 0.1)
            elif isinstance(module, torch.nn.RMSNorm):
                module.weight.copy_(1.0 + 0.2 * torch.randn_like(module.weight))
        for name, p in model.named_parameters():
            if not is_fp32_island(name):
                p.copy_(p.to(torch.bfloat16).to(torch.float32))
    return model


def is_fp32_island(name):
    """diffusers' rule for _keep_in_fp32_modules: a component of the parameter's name."""
    return any(k in name.split(".") for k in FP32_KEEP)


def mixed(model):
    """The model as diffusers loads the release with torch_dtype=bf16: bf16 but for the modules
    of _keep_in_fp32_modules (from_pretrained needs accelerate for that; the same casts here)."""
    m = copy.deepcopy(model)
    assert tuple(m._keep_in_fp32_modules) == FP32_KEEP
    with torch.no_grad():
        for name, p in m.named_parameters():
            if not is_fp32_island(name):
                p.data = p.data.to(torch.bfloat16)
    return m.eval()


def state_mixed(state):
    return {k: (v if is_fp32_island(k) else v.to(torch.bfloat16)).contiguous()
            for k, v in state.items()}


def original_state(state, c, qkv, pruned=False):
    """diffusers names -> original names (§C.11): fused qkv_proj in `qkv` row layout, fc1 back to
    [gate; value]."""
    heads, hd = c["num_attention_heads"], c["attention_head_dim"]
    out = {}

    def block(src, dst, adaln):
        q, k, v = (state[f"{src}attn.to_{n}.weight"] for n in "qkv")
        if qkv == "interleaved":
            w = torch.stack([x.reshape(heads, hd, -1) for x in (q, k, v)], dim=1).reshape(
                3 * heads * hd, -1)
        else:
            w = torch.cat([q, k, v], dim=0)
        out[f"{dst}attn.qkv_proj.weight"] = w
        out[f"{dst}attn.q_norm.weight"] = state[f"{src}attn.norm_q.weight"]
        out[f"{dst}attn.k_norm.weight"] = state[f"{src}attn.norm_k.weight"]
        out[f"{dst}attn.out_proj.weight"] = state[f"{src}attn.to_out.0.weight"]
        value, gate = state[f"{src}ff.net.0.proj.weight"].chunk(2, dim=0)
        out[f"{dst}mlp.fc1.weight"] = torch.cat([gate, value], dim=0)
        out[f"{dst}mlp.fc2.weight"] = state[f"{src}ff.net.2.weight"]
        out[f"{dst}norm1.weight"] = state[f"{src}norm1.weight"]
        out[f"{dst}norm2.weight"] = state[f"{src}norm2.weight"]
        if adaln:
            out[f"{dst}adaln_proj.linear.weight"] = state[f"{src}adaln_proj.linear.weight"]
            out[f"{dst}adaln_proj.linear.bias"] = state[f"{src}adaln_proj.linear.bias"]

    for i in range(c["num_layers"]):
        block(f"transformer_blocks.{i}.", f"blocks.{i}.", True)
    for j in range(c["num_refiner_layers"]):
        block(f"token_refiner.refiner_blocks.{j}.", f"token_refiner.blocks.{j}.", False)
    renames = {"proj_in": "video_patch_proj", "audio_proj_in": "audio_patch_proj",
               "context_embedder": "condition_proj", "norm_out.linear": "final_layer.adaln_proj.linear",
               "proj_out": "final_layer.video_out", "audio_proj_out": "final_layer.audio_out"}
    if not pruned:
        renames.update({"time_embedder.linear_1": "time_embedder.proj_in",
                        "time_embedder.linear_2": "time_embedder.proj_out"})
    for src, dst in renames.items():
        for suffix in ("weight", "bias"):
            out[f"{dst}.{suffix}"] = state[f"{src}.{suffix}"]
    out["token_refiner.final_norm.weight"] = state["token_refiner.final_norm.weight"]
    out["final_layer.norm.weight"] = state["norm_out.norm.weight"]
    if pruned:
        out["adaln_t_table"] = state["adaln_t_table"]
    return out


# ---- the pruned AdaLN-curve variant (§C.10) on diffusers' modules ----

class CurveTime(torch.nn.Module):
    """t -> lerp(T[i0], T[i0 + 1], p - i0), p = clamp(t, 0, 1) * 1024, i0 = min(floor(p), 1023),
    in f32 (replaces time_proj + time_embedder)."""

    def __init__(self, table):
        super().__init__()
        self.register_buffer("table", table)

    def forward(self, t):
        p = t.float().clamp(0.0, 1.0) * (CURVE_ROWS - 1)
        i0 = torch.clamp(torch.floor(p), max=CURVE_ROWS - 2).long()
        w = (p - i0.float())[:, None]
        return torch.lerp(self.table[i0], self.table[i0 + 1], w)


def adaln_no_silu(self, temb):
    temb = self.linear(temb.to(self.linear.weight.dtype))
    return temb.view(-1, 6 * self.hidden_size).chunk(6, dim=-1)


def out_no_silu(self, hidden_states, temb, timestep_indices):
    shift, scale = self.linear(temb.to(self.linear.weight.dtype)).chunk(2, dim=-1)
    hidden_states = self.norm(hidden_states)
    return hidden_states * (1.0 + scale.index_select(0, timestep_indices)) + shift.index_select(
        0, timestep_indices)


def make_pruned(model, c, table):
    """The model with its time MLP replaced by the curve table and every AdaLN projection taking
    the 8-wide curve value without SiLU; the projections get their own random weights."""
    width = CURVE_WIDTH
    g = torch.Generator().manual_seed(SEED + 7)
    with torch.no_grad():
        for block in model.transformer_blocks:
            lin = block.adaln_proj.linear
            new = torch.nn.Linear(width, lin.out_features, dtype=lin.weight.dtype)
            new.weight.copy_(torch.randn(new.weight.shape, generator=g) / np.sqrt(width))
            new.bias.copy_(0.1 * torch.randn(new.bias.shape, generator=g))
            block.adaln_proj.linear = new
            block.adaln_proj.forward = adaln_no_silu.__get__(block.adaln_proj)
        lin = model.norm_out.linear
        new = torch.nn.Linear(width, lin.out_features, dtype=lin.weight.dtype)
        new.weight.copy_(torch.randn(new.weight.shape, generator=g) / np.sqrt(width))
        new.bias.copy_(0.1 * torch.randn(new.bias.shape, generator=g))
        model.norm_out.linear = new
        model.norm_out.forward = out_no_silu.__get__(model.norm_out)
    model.time_proj = torch.nn.Identity()
    model.time_embedder = CurveTime(table)
    return model


def round_bf16_(model, keep_f32):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not keep_f32(name):
                p.copy_(p.to(torch.bfloat16).to(torch.float32))


def pruned_pair(c):
    """(f32 pruned model, its mixed-precision twin, diffusers-named state of the f32 one)."""
    g = torch.Generator().manual_seed(SEED + 3)
    # A smooth rank-8 curve basis over t in [0, 1] (what the files' tables look like).
    t = torch.linspace(0, 1, CURVE_ROWS, dtype=torch.float64)[:, None]
    k = torch.arange(CURVE_WIDTH, dtype=torch.float64)[None, :]
    table = (torch.cos(np.pi * (k + 1) * t + torch.rand(1, CURVE_WIDTH, generator=g,
                                                       dtype=torch.float64) * 3)).float()
    f32 = make_pruned(build_model(c), c, table)
    round_bf16_(f32, lambda n: is_fp32_island(n))
    m = make_pruned(mixed(build_model(c)), c, table)
    m.load_state_dict(f32.state_dict(), strict=True)
    for block, src in zip(m.transformer_blocks, f32.transformer_blocks):
        block.adaln_proj.linear.to(torch.bfloat16)
    m.norm_out.linear.to(torch.bfloat16)
    state = {k: v.detach().clone() for k, v in f32.state_dict().items()}
    state["adaln_t_table"] = state.pop("time_embedder.table")
    return f32, m, state


# ---- NF4 (DiffSynth's files, §G.2) ----

NF4_KEEP = ("video_patch_proj", "audio_patch_proj", "condition_proj", "time_embedder",
            "final_layer.video_out", "final_layer.audio_out", "adaln_t_table")


def nf4_file(original, pruned):
    """(tensors of DiffSynth's NF4 file, the dequantised original-named state)."""
    tensors, meant = {}, {}
    for name, v in original.items():
        quantize = (name.endswith(".weight") and v.dim() == 2 and
                    not any(k in name for k in NF4_KEEP) and
                    not (pruned and "adaln_proj" in name))
        if quantize:
            parts, state = bnb4.quantize_4bit(v.float().numpy(), "nf4")
            for suffix, array in parts.items():
                tensors[name[: -len("weight")] + suffix] = torch.from_numpy(np.array(array))
            tensors[name + ".quant_state.bitsandbytes__nf4"] = torch.from_numpy(
                bnb4.state_bytes(state))
            meant[name] = dequantize_nf4(parts, state)
        elif name == "adaln_t_table":
            tensors[name] = v.float().contiguous()
            meant[name] = v.float()
        else:
            tensors[name] = v.to(torch.bfloat16).contiguous()
            meant[name] = v.to(torch.bfloat16).float()
    return tensors, meant


def dequantize_nf4(parts, state):
    packed = parts["weight"].reshape(-1)
    codes = np.empty(packed.size * 2, np.int64)
    codes[0::2] = packed >> 4
    codes[1::2] = packed & 15
    n = int(np.prod(state["shape"]))
    dmap = parts["weight.nested_quant_map"]
    nested = parts["weight.nested_absmax"]
    qabs = parts["weight.absmax"].astype(np.int64)
    scale = (dmap[qabs] * np.repeat(nested, 256)[: qabs.size] +
             np.float32(state["nested_offset"])).astype(np.float32)
    values = parts["weight.quant_map"][codes[:n]] * np.repeat(scale, 64)[:n]
    w = torch.from_numpy(values.astype(np.float32).reshape(state["shape"]))
    return w.to(torch.bfloat16).to(torch.float32)


def diffusers_from_original(original, c, qkv, pruned=False):
    """The inverse of original_state (for loading dequantised NF4 weights into diffusers)."""
    heads, hd = c["num_attention_heads"], c["attention_head_dim"]
    out = {}

    def block(src, dst, adaln):
        w = original[f"{src}attn.qkv_proj.weight"]
        if qkv == "interleaved":
            q, k, v = w.reshape(heads, 3, hd, -1).unbind(1)
            q, k, v = (x.reshape(heads * hd, -1) for x in (q, k, v))
        else:
            q, k, v = w.chunk(3, dim=0)
        for n, x in zip("qkv", (q, k, v)):
            out[f"{dst}attn.to_{n}.weight"] = x
        out[f"{dst}attn.norm_q.weight"] = original[f"{src}attn.q_norm.weight"]
        out[f"{dst}attn.norm_k.weight"] = original[f"{src}attn.k_norm.weight"]
        out[f"{dst}attn.to_out.0.weight"] = original[f"{src}attn.out_proj.weight"]
        gate, value = original[f"{src}mlp.fc1.weight"].chunk(2, dim=0)
        out[f"{dst}ff.net.0.proj.weight"] = torch.cat([value, gate], dim=0)
        out[f"{dst}ff.net.2.weight"] = original[f"{src}mlp.fc2.weight"]
        out[f"{dst}norm1.weight"] = original[f"{src}norm1.weight"]
        out[f"{dst}norm2.weight"] = original[f"{src}norm2.weight"]
        if adaln:
            out[f"{dst}adaln_proj.linear.weight"] = original[f"{src}adaln_proj.linear.weight"]
            out[f"{dst}adaln_proj.linear.bias"] = original[f"{src}adaln_proj.linear.bias"]

    for i in range(c["num_layers"]):
        block(f"blocks.{i}.", f"transformer_blocks.{i}.", True)
    for j in range(c["num_refiner_layers"]):
        block(f"token_refiner.blocks.{j}.", f"token_refiner.refiner_blocks.{j}.", False)
    renames = {"video_patch_proj": "proj_in", "audio_patch_proj": "audio_proj_in",
               "condition_proj": "context_embedder", "final_layer.adaln_proj.linear": "norm_out.linear",
               "final_layer.video_out": "proj_out", "final_layer.audio_out": "audio_proj_out"}
    if not pruned:
        renames.update({"time_embedder.proj_in": "time_embedder.linear_1",
                        "time_embedder.proj_out": "time_embedder.linear_2"})
    for src, dst in renames.items():
        for suffix in ("weight", "bias"):
            out[f"{dst}.{suffix}"] = original[f"{src}.{suffix}"]
    out["token_refiner.final_norm.weight"] = original["token_refiner.final_norm.weight"]
    out["norm_out.norm.weight"] = original["final_layer.norm.weight"]
    if pruned:
        out["time_embedder.table"] = original["adaln_t_table"]
    return out


# ---- the packed sequences and their inputs ----

def layout_case(cname, c, anchors):
    frames, lh, lw, audio, text = GEOMETRY[cname]
    tags = torch.ones(text, dtype=torch.long)
    if anchors:
        tags[2:5] = 0  # a vision block inside the presentation
    (positions, token_tags, video_indices, audio_indices, text_indices, cond_rows,
     cond_audio) = MiniMaxH3PrepareLayoutStep.build_packed_sequence(
        tags, frames, lh, lw, audio, c["patch_size"], 2, 2, 0, anchors)
    return dict(text_tags=tags, positions=positions, tags=token_tags, video_indices=video_indices,
                audio_indices=audio_indices, text_indices=text_indices, cond_rows=cond_rows,
                cond_audio=cond_audio)


def schedules():
    video, audio = MiniMaxH3Scheduler(shift=VIDEO_SHIFT), MiniMaxH3Scheduler(shift=AUDIO_SHIFT)
    video.set_timesteps(STEPS)
    audio.set_timesteps(STEPS)
    return video, audio


def row_timesteps(lay, t_video, t_audio):
    return MiniMaxH3SetTimestepsStep.build_row_timesteps(
        lay["video_indices"], lay["audio_indices"], lay["cond_rows"], lay["cond_audio"],
        lay["text_indices"].numel(), float(t_video), float(t_audio),
        max(float(t_video), KEYFRAME_NOISE_AUG), 1.0)


def forward(model, inputs, lay, timestep, indices):
    with torch.no_grad():
        out = model(hidden_states=inputs["video"][None], audio_hidden_states=inputs["audio"][None],
                    encoder_hidden_states=inputs["text"][None], timestep=timestep,
                    timestep_indices=indices, token_tags=lay["tags"], position_ids=lay["positions"],
                    video_indices=lay["video_indices"], audio_indices=lay["audio_indices"],
                    text_indices=lay["text_indices"])
    return out.sample[0].float(), out.audio_sample[0].float()


def make_inputs(cname, c, lay, seed):
    frames, lh, lw, audio, text = GEOMETRY[cname]
    g = torch.Generator().manual_seed(seed)
    latent = torch.randn(1, c["in_channels"], frames, lh, lw, generator=g)
    target = patchify_video_latents(latent, c["patch_size"])
    cond = torch.randn(lay["cond_rows"], target.shape[1], generator=g)
    video = torch.cat([cond, target], dim=0)
    audio_rows = torch.randn(2 * audio, c["audio_in_channels"], generator=g)
    text_in = torch.randn(text, c["text_dim"], generator=g).to(torch.bfloat16).float()
    return dict(latent=latent[0], video=video, audio=audio_rows, text=text_in)


def rel(a, b):
    return float(((a - b) ** 2).sum().sqrt() / (b ** 2).sum().sqrt())


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(OUT, exist_ok=True)
    ref = {}
    video_sched, audio_sched = schedules()
    for cname, c in CONFIGS.items():
        os.makedirs(os.path.join(OUT, cname), exist_ok=True)
        f32 = build_model(c)
        state = {k: v.detach().clone() for k, v in f32.state_dict().items()}
        bf16 = mixed(f32)
        save_torch(state_mixed(state), os.path.join(OUT, cname, "diffusers.safetensors"))
        if cname == "tiny":
            save_torch({k: v.float().contiguous() for k, v in state.items()},
                       os.path.join(OUT, cname, "f32.safetensors"))
        for qkv in ("interleaved", "stacked"):
            save_torch(state_mixed(original_state(state, c, qkv)),
                       os.path.join(OUT, cname, f"{qkv}.safetensors"))
        p_f32, p_bf16, p_state = pruned_pair(c)
        p_original = original_state(p_state, c, "stacked", pruned=True)
        save_torch({k: (v.float() if is_fp32_island(k) or k == "adaln_t_table" else
                        v.to(torch.bfloat16)).contiguous() for k, v in p_original.items()},
                   os.path.join(OUT, cname, "pruned.safetensors"))
        kinds = {"bf16": bf16, "f32": f32, "pruned.bf16": p_bf16, "pruned.f32": p_f32}
        if cname == "wide":
            full_nf4, meant = nf4_file(original_state(state, c, "interleaved"), pruned=False)
            save_torch(full_nf4, os.path.join(OUT, cname, "nf4.safetensors"),
                       metadata={"format": "pt"})
            m = build_model(c)
            m.load_state_dict(diffusers_from_original(meant, c, "interleaved"))
            kinds["nf4.bf16"] = mixed(m)
            pr_nf4, pr_meant = nf4_file(p_original, pruned=True)
            save_torch(pr_nf4, os.path.join(OUT, cname, "nf4_pruned.safetensors"),
                       metadata={"format": "pt"})
            _, pm, _ = pruned_pair(c)
            pm.load_state_dict(diffusers_from_original(pr_meant, c, "stacked", pruned=True))
            for block in pm.transformer_blocks:
                block.adaln_proj.linear.to(torch.bfloat16)
            pm.norm_out.linear.to(torch.bfloat16)
            kinds["nf4_pruned.bf16"] = pm
        for lname, anchors in LAYOUTS.items():
            lay = layout_case(cname, c, anchors)
            key = f"{cname}.{lname}"
            inputs = make_inputs(cname, c, lay, SEED + len(key) * 31 + len(anchors))
            ref[f"{key}.text_tags"] = lay["text_tags"].numpy().astype(np.int32)
            ref[f"{key}.positions"] = lay["positions"].numpy()
            ref[f"{key}.tags"] = lay["tags"].numpy().astype(np.int32)
            ref[f"{key}.video_indices"] = lay["video_indices"].numpy().astype(np.int32)
            ref[f"{key}.audio_indices"] = lay["audio_indices"].numpy().astype(np.int32)
            ref[f"{key}.video_in"] = inputs["video"].numpy()
            ref[f"{key}.audio_in"] = inputs["audio"].numpy()
            ref[f"{key}.text_in"] = inputs["text"].numpy()
            ref[f"{key}.latent"] = inputs["latent"].numpy()
            for s in range(STEPS - 1):
                timestep, indices = row_timesteps(lay, video_sched.timesteps[s],
                                                  audio_sched.timesteps[s])
                ref[f"{key}.s{s}.timestep"] = timestep.numpy()
                ref[f"{key}.s{s}.timestep_indices"] = indices.numpy().astype(np.int32)
                if s not in KEPT_STEPS:
                    continue
                for kind, model in kinds.items():
                    v, a = forward(model, inputs, lay, timestep, indices)
                    ref[f"{key}.s{s}.{kind}.video"] = v.numpy()
                    ref[f"{key}.s{s}.{kind}.audio"] = a.numpy()
                for kind in ("", "pruned."):
                    vb, vf = ref[f"{key}.s{s}.{kind}bf16.video"], ref[f"{key}.s{s}.{kind}f32.video"]
                    ab, af = ref[f"{key}.s{s}.{kind}bf16.audio"], ref[f"{key}.s{s}.{kind}f32.audio"]
                    print(f"{key:18s} s{s} {kind or 'full.'}bf16 vs f32: video rel rms "
                          f"{rel(torch.tensor(vb), torch.tensor(vf)):.5f} max "
                          f"{np.abs(vb - vf).max():.4f} |v| {np.abs(vf).max():.2f}; audio rel rms "
                          f"{rel(torch.tensor(ab), torch.tensor(af)):.5f} max "
                          f"{np.abs(ab - af).max():.4f}")
        if cname == "tiny":
            trajectory(ref, c, bf16, f32)
    for n in (2, 5, 20, 50):
        for shift in (12.0, 3.0, 6.0):
            s = MiniMaxH3Scheduler(shift=shift)
            s.set_timesteps(n)
            ref[f"sched.{n}.shift{int(shift)}.sigmas"] = s.sigmas.numpy()
            ref[f"sched.{n}.shift{int(shift)}.timesteps"] = s.timesteps.numpy()
    path = os.path.join(OUT, "reference.safetensors")
    save_numpy(ref, path,
               metadata={"generator": f"tools/reference/make_h3_dit_reference.py (torch "
                                      f"{torch.__version__}, seed {SEED})"})
    for folder, _, files in os.walk(OUT):
        for f in files:
            os.chmod(os.path.join(folder, f), 0o644)


def trajectory(ref, c, bf16, f32):
    """4 Euler steps of diffusers' two schedulers on tiny/t2va from the stored inputs as noise:
    target rows only (T2VA has no conditioning rows)."""
    lay = layout_case("tiny", c, ())
    key = "tiny.t2va"
    video = torch.tensor(ref[f"{key}.video_in"])
    audio = torch.tensor(ref[f"{key}.audio_in"])
    text = torch.tensor(ref[f"{key}.text_in"])
    for kind, model in (("bf16", bf16), ("f32", f32)):
        vs, as_ = schedules()
        v, a = video.clone(), audio.clone()
        for tv, ta in zip(vs.timesteps, as_.timesteps):
            timestep, indices = row_timesteps(lay, tv, ta)
            out_v, out_a = forward(model, dict(video=v, audio=a, text=text), lay, timestep,
                                   indices)
            v = vs.step(out_v, tv, v).prev_sample
            a = as_.step(out_a, ta, a).prev_sample
        ref[f"traj.{kind}.video"] = v.numpy()
        ref[f"traj.{kind}.audio"] = a.numpy()
    print(f"trajectory bf16 vs f32: video rel rms "
          f"{rel(torch.tensor(ref['traj.bf16.video']), torch.tensor(ref['traj.f32.video'])):.5f} "
          f"audio rel rms "
          f"{rel(torch.tensor(ref['traj.bf16.audio']), torch.tensor(ref['traj.f32.audio'])):.5f}")


if __name__ == "__main__":
    main()
