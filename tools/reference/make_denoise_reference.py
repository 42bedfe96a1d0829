#!/usr/bin/env python3
"""Writes tests/data/wan/denoise/: denoising trajectories of the official Wan loop driven by the
tiny DiTs of tests/data/wan/dit/, for tests/models/wan_denoise_test.cpp.

    tools/reference/.venv/bin/python tools/reference/make_dit_reference.py   # the DiTs, if absent
    tools/reference/.venv/bin/python tools/reference/make_denoise_reference.py

The DiTs are the committed ones (read back from tests/data/wan/dit/, not rebuilt), run exactly as
make_dit_reference.py runs them: its WanModel configuration, flash_attention replaced by bf16
SDPA, CPU autocast(bf16) with the official fp32 regions redirected (imported from that script).
The loops follow the official pipelines line by line (wan22 text2video.py `generate`,
textimage2video.py `i2v`): the scheduler built with num_train_timesteps 1000, shift 1, no dynamic
shifting, then set_timesteps(steps, shift); per step a conditional and an unconditional forward
at the step's integer timestep, v = v_uncond + g·(v_cond - v_uncond) in fp32, the sampler step.
text2video.py is the official repository's (github.com/Wan-Video/Wan2.2 @ 42bf4cf), not the PyPI
wheel's (a "lightning" fork, CFG off; nothing here imports it), with one DiT where it switches
between two experts. The T2V cases build per-token timesteps with masks_like (all ones: t on every
token) where text2video.py passes torch.stack([t]), which WanModel.forward expands to every token:
the same values. Checked: make_a14b_reference.py's line-by-line restatement of text2video.py
`generate` (scalar int64 timestep, the step inside the autocast), given this DiT as both experts,
writes the same bytes as `run` here for the unipc case.
  unipc        T2V DiT (16 channels), official FlowUniPCMultistepScheduler.step
  euler        T2V DiT, flow Euler x + (σ_{i+1} - σ_i)·v on the official sigmas (the official
               code has none; diffusers' FlowMatchEulerDiscreteScheduler.step, as
               make_sampler_reference.py restates it)
  ti2v_unipc   TI2V DiT (48 channels) in image-to-video: masks_like(zero=True), z0 blended into
               frame 0 before the loop, per-token timesteps mask2[0][0][:, ::2, ::2]·t (0 on
               frame 0), the blend again after every UniPC step
All three: 4 steps, shift 5.0, guide scale 5.0.

tests/data/wan/denoise/trajectories.safetensors, F32 tensors:
  t2v.noise [16,3,8,12], ti2v.noise [48,3,8,12]   the initial noise (before any blend)
  z0 [48,1,8,12]                                   the stand-in image latent
  context.cond [7,32], context.uncond [5,32]       text embeddings (bf16 values; padded to 512
                                                   rows by the model)
  sigmas [5], timesteps [4]                        the official schedule (timesteps: the int64
                                                   values, exact in F32)
  <case>.step<k>, k = 1..4                         the latent after k steps
Metadata: one key, "source". Deterministic: fixed seeds, one thread; a rerun writes the same bytes
on the same kind of CPU. PyTorch's bf16 CPU kernels round differently with another instruction
set: on an AVX2 machine (torch.backends.cpu.get_cpu_capability()) a rerun moves the committed
unipc trajectory by up to 0.0017 after step 1 and 0.024 after step 4 (tests/data/wan/dit's
velocities by up to 0.006).
"""

import os

import torch
from safetensors.torch import load_file, save_file

import make_dit_reference as dit  # patches autocast and flash_attention for the CPU on import
from make_sampler_reference import official_scheduler, official_utils

SEED = 20261201
OUT = os.path.join(dit.ROOT, "tests", "data", "wan", "denoise")
DIT_DIR = dit.OUT
STEPS, SHIFT, GUIDE = 4, 5.0, 5.0
UNCOND_ROWS = 5


def load(name, in_out):
    """The committed tiny DiT `name` in the official WanModel, fp32 parameters holding the stored
    bf16 values (what make_dit_reference.py's build() made before saving them)."""
    model = dit.model_module.WanModel(
        model_type="ti2v" if in_out == 48 else "t2v", patch_size=(1, 2, 2), text_len=512,
        in_dim=in_out, dim=dit.DIM, ffn_dim=dit.FFN, freq_dim=dit.FREQ_DIM,
        text_dim=dit.TEXT_DIM, out_dim=in_out, num_heads=dit.HEADS, num_layers=dit.LAYERS,
        qk_norm=True, cross_attn_norm=True, eps=1e-6).eval()
    state = load_file(os.path.join(DIT_DIR, "shared.safetensors"))
    state.update(load_file(os.path.join(DIT_DIR, f"{name}_io.safetensors")))
    model.load_state_dict({k: v.to(torch.float32) for k, v in state.items()}, strict=True)
    return model


def run(model, sampler, noise, contexts, z0=None):
    """The official loop; returns the latent after every step."""
    utils = official_utils()
    scheduler = official_scheduler(STEPS, SHIFT)
    c, f, h, w = noise.shape
    seq_len = f * (h // 2) * (w // 2)
    _, mask2 = utils.masks_like([noise], zero=z0 is not None)
    latent = noise
    if z0 is not None:
        latent = (1. - mask2[0]) * z0 + mask2[0] * latent
    out = []
    for i, t in enumerate(scheduler.timesteps):
        timestep = torch.stack([t])
        temp_ts = (mask2[0][0][:, ::2, ::2] * timestep).flatten()
        temp_ts = torch.cat([temp_ts, temp_ts.new_ones(seq_len - temp_ts.size(0)) * timestep])
        v_cond = dit.forward(model, latent, temp_ts, contexts[0])
        v_uncond = dit.forward(model, latent, temp_ts, contexts[1])
        v = v_uncond + GUIDE * (v_cond - v_uncond)
        assert v.dtype == torch.float32 and torch.isfinite(v).all()
        if sampler == "unipc":
            latent = scheduler.step(v.unsqueeze(0), t, latent.unsqueeze(0),
                                    return_dict=False)[0].squeeze(0)
        else:
            latent = latent + (scheduler.sigmas[i + 1] - scheduler.sigmas[i]) * v
        if z0 is not None:
            latent = (1. - mask2[0]) * z0 + mask2[0] * latent
        out.append(latent.clone().contiguous())
    return out


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    os.makedirs(OUT, exist_ok=True)
    gen = torch.Generator().manual_seed(SEED)
    shape = (dit.FRAMES, dit.HEIGHT, dit.WIDTH)
    tensors = {
        "t2v.noise": torch.randn((16, *shape), generator=gen),
        "ti2v.noise": torch.randn((48, *shape), generator=gen),
        "z0": torch.randn((48, 1, dit.HEIGHT, dit.WIDTH), generator=gen),
        "context.cond": dit.bf16_values(
            torch.randn((dit.CONTEXT_ROWS, dit.TEXT_DIM), generator=gen)),
        "context.uncond": dit.bf16_values(torch.randn((UNCOND_ROWS, dit.TEXT_DIM), generator=gen)),
    }
    scheduler = official_scheduler(STEPS, SHIFT)
    tensors["sigmas"] = scheduler.sigmas.to(torch.float32).clone()
    tensors["timesteps"] = scheduler.timesteps.to(torch.float32).clone()
    assert torch.equal(tensors["timesteps"].to(torch.int64), scheduler.timesteps)
    contexts = (tensors["context.cond"], tensors["context.uncond"])

    t2v, ti2v = load("t2v", 16), load("ti2v", 48)
    cases = {
        "unipc": run(t2v, "unipc", tensors["t2v.noise"], contexts),
        "euler": run(t2v, "euler", tensors["t2v.noise"], contexts),
        "ti2v_unipc": run(ti2v, "unipc", tensors["ti2v.noise"], contexts, z0=tensors["z0"]),
    }
    for name, steps in cases.items():
        for k, latent in enumerate(steps, start=1):
            tensors[f"{name}.step{k}"] = latent
        last = steps[-1]
        print(f"{name}: |x4| max {last.abs().max():.4f} rms {last.pow(2).mean().sqrt():.4f}")
    assert torch.equal(cases["ti2v_unipc"][-1][:, :1], tensors["z0"])

    save_file({k: v.contiguous() for k, v in tensors.items()},
              os.path.join(OUT, "trajectories.safetensors"),
              metadata={"source": f"wan22 official loop, tiny DiTs of tests/data/wan/dit; "
                                  f"torch {torch.__version__}"})
    print("wrote", OUT)


if __name__ == "__main__":
    main()
