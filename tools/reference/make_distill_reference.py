#!/usr/bin/env python3
"""Writes tests/data/wan/distill/: the step-distilled schedule and trajectories of LightX2V's
WanStepDistillScheduler (formats_lora_moe.md §5.1), for tests/models/wan_distill_test.cpp and
tests/models/wan_denoise_test.cpp.

    tools/reference/.venv/bin/python tools/reference/make_distill_reference.py

LightX2V is not a reference requirement (its package pulls a serving stack), so its scheduler is
restated here from lightx2v/models/schedulers/wan/step_distill/scheduler.py (ModelTC/LightX2V,
read at f8aee98b), op for op in fp32 torch:
  set_denoising_timesteps   sigmas = linspace(1, 0, 1001)[:-1]; sigmas = shift·sigmas /
                            (1 + (shift − 1)·sigmas); timesteps = sigmas·1000; both indexed by
                            1000 − denoising_step_list[k]
  step_post                 x0 = x − σ_k·v (σ_k a Python float from .item()); before the last
                            step x0 + v·σ_{k+1}; the last step x0
  no CFG                    enable_cfg false in the distill configs: one conditional forward
The step list for N steps is Lightning's linspace(1000, 0, N + 1)[:N] where those are integers
([1000, 750, 500, 250] for 4 steps: LightX2V's configs), else the nearest table entry (halves up).

Files written:
  schedules.json   `linspace`: torch.linspace(1, 0, 1001) as fp32 values (the table Ferry
                   recomputes); `schedules`: per (steps, shift) the step list, sigmas (fp32, the
                   last 0 appended for the final x0 step) and the fp32 DiT timesteps; `cases`: the
                   trajectory cases' parameters
  trajectories.safetensors, F32:
    standin.step<k>        the x0-form trajectory on the stand-in model of make_sampler_reference.py
                           (v = a·x + b·(t/1000) + c, its `cond` coefficients and noise read back
                           from tests/data/wan/sampler/trajectories.safetensors), 4 steps, shift 5
    standin8.step8         the same at 8 steps, shift 8 (only the final sample)
    t2v.step<k>            the tiny T2V DiT of tests/data/wan/dit/ driven by the distilled loop from
                           the noise and conditional context of tests/data/wan/denoise/ (4 steps,
                           shift 5, CFG off: the conditional forward only), run as
                           make_denoise_reference.py runs the DiT
    ti2v.step<k>           the tiny TI2V DiT in image-to-video: z0 blended into frame 0 before the
                           loop and after every step, per-token timesteps mask·t (0 on frame 0)
                           with the fractional t, as LightX2V's Wan 2.2 i2v path passes them
Deterministic: a rerun writes the same bytes.
"""

import json
import os

import torch
from safetensors.torch import load_file, save_file

import make_dit_reference as dit  # patches autocast and flash_attention for the CPU on import
from make_denoise_reference import load as load_dit
from make_sampler_reference import official_utils

OUT = os.path.join(dit.ROOT, "tests", "data", "wan", "distill")
SAMPLER = os.path.join(dit.ROOT, "tests", "data", "wan", "sampler", "trajectories.safetensors")
DENOISE = os.path.join(dit.ROOT, "tests", "data", "wan", "denoise", "trajectories.safetensors")
NUM_TRAIN_TIMESTEPS = 1000

# (steps, shift): LightX2V's 4-step recipe at its three shifts (5 T2V/I2V, 8, 16 FLF2V), an 8-step
# list, and lists whose table indices are rounded (3, 6 steps) or trivial (1, 2).
SCHEDULES = [(4, 5.0), (4, 8.0), (4, 16.0), (8, 5.0), (8, 8.0), (1, 5.0), (2, 5.0), (3, 5.0),
             (6, 16.0), (4, 3.7)]


def step_list(steps):
    return [NUM_TRAIN_TIMESTEPS - (2 * NUM_TRAIN_TIMESTEPS * k + steps) // (2 * steps)
            for k in range(steps)]


class StepDistillScheduler:
    """LightX2V's WanStepDistillScheduler (set_denoising_timesteps, step_post), restated."""

    def __init__(self, steps, shift):
        self.denoising_step_list = step_list(steps)
        sigmas = torch.linspace(1.0, 0.0, NUM_TRAIN_TIMESTEPS + 1)[:-1]
        sigmas = shift * sigmas / (1 + (shift - 1) * sigmas)
        timesteps = sigmas * NUM_TRAIN_TIMESTEPS
        index = [NUM_TRAIN_TIMESTEPS - x for x in self.denoising_step_list]
        self.timesteps = timesteps[index]
        self.sigmas = sigmas[index]
        self.infer_steps = len(index)

    def step(self, k, flow_pred, latents):
        flow_pred = flow_pred.to(torch.float32)
        sigma = self.sigmas[k].item()
        x = latents.to(torch.float32) - sigma * flow_pred
        if k < self.infer_steps - 1:
            x = x + flow_pred * self.sigmas[k + 1].item()
        return x


def schedule_entry(steps, shift):
    s = StepDistillScheduler(steps, shift)
    assert s.sigmas.dtype == torch.float32 and s.timesteps.dtype == torch.float32
    return {"steps": steps, "shift": shift, "step_list": s.denoising_step_list,
            "sigmas": [float(v) for v in s.sigmas] + [0.0],
            "timesteps": [float(v) for v in s.timesteps]}


def stand_in_run(steps, shift, inputs):
    s = StepDistillScheduler(steps, shift)
    x = inputs["noise"]
    out = []
    for k in range(steps):
        t = s.timesteps[k] / 1000  # fp32, one value for every element
        v = inputs["cond.a"] * x + inputs["cond.b"] * t + inputs["cond.c"]
        x = s.step(k, v, x)
        out.append(x.clone().contiguous())
    return out


def dit_run(model, noise, context, z0=None, steps=4, shift=5.0):
    """The distilled loop on a tiny DiT, one conditional forward per step."""
    utils = official_utils()
    s = StepDistillScheduler(steps, shift)
    c, f, h, w = noise.shape
    seq_len = f * (h // 2) * (w // 2)
    _, mask2 = utils.masks_like([noise], zero=z0 is not None)
    latent = noise
    if z0 is not None:
        latent = (1. - mask2[0]) * z0 + mask2[0] * latent
    out, passes = [], 0
    for k in range(steps):
        timestep = torch.stack([s.timesteps[k]])
        temp_ts = (mask2[0][0][:, ::2, ::2] * timestep).flatten()
        temp_ts = torch.cat([temp_ts, temp_ts.new_ones(seq_len - temp_ts.size(0)) * timestep])
        v = dit.forward(model, latent, temp_ts, context)
        passes += 1
        assert v.dtype == torch.float32 and torch.isfinite(v).all()
        latent = s.step(k, v, latent)
        if z0 is not None:
            latent = (1. - mask2[0]) * z0 + mask2[0] * latent
        out.append(latent.clone().contiguous())
    assert passes == steps
    return out


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    os.makedirs(OUT, exist_ok=True)

    linspace = torch.linspace(1.0, 0.0, NUM_TRAIN_TIMESTEPS + 1)
    schedules = [schedule_entry(steps, shift) for steps, shift in SCHEDULES]
    four = schedules[0]
    assert four["step_list"] == [1000, 750, 500, 250]
    assert four["timesteps"][:2] == [1000.0, 937.5] and four["timesteps"][3] == 625.0
    assert step_list(8) == [1000, 875, 750, 625, 500, 375, 250, 125]
    # Lightning's list where it is integral (formats_lora_moe.md §5.2).
    for n in (1, 2, 4, 5, 8, 10):
        assert step_list(n) == [int(v) for v in torch.linspace(1000, 0, n + 1)[:n]], n

    tensors = {}
    sampler = load_file(SAMPLER)
    for k, x in enumerate(stand_in_run(4, 5.0, sampler), start=1):
        tensors[f"standin.step{k}"] = x
    tensors["standin8.step8"] = stand_in_run(8, 8.0, sampler)[-1]

    denoise = load_file(DENOISE)
    t2v, ti2v = load_dit("t2v", 16), load_dit("ti2v", 48)
    context = denoise["context.cond"]
    runs = {
        "t2v": dit_run(t2v, denoise["t2v.noise"], context),
        "ti2v": dit_run(ti2v, denoise["ti2v.noise"], context, z0=denoise["z0"]),
    }
    for name, steps in runs.items():
        for k, latent in enumerate(steps, start=1):
            tensors[f"{name}.step{k}"] = latent
        last = steps[-1]
        print(f"{name}: |x4| max {last.abs().max():.4f} rms {last.pow(2).mean().sqrt():.4f}")
    assert torch.equal(runs["ti2v"][-1][:, :1], denoise["z0"])

    save_file({k: v.contiguous() for k, v in tensors.items()},
              os.path.join(OUT, "trajectories.safetensors"),
              metadata={"source": "LightX2V WanStepDistillScheduler restated; tiny DiTs of "
                                  f"tests/data/wan/dit; torch {torch.__version__}"})
    doc = {
        "source": "LightX2V lightx2v/models/schedulers/wan/step_distill/scheduler.py (ModelTC/"
                  "LightX2V f8aee98b), restated in fp32 torch " + torch.__version__,
        "linspace": [float(v) for v in linspace],
        "schedules": schedules,
        "cases": [{"name": "standin", "steps": 4, "shift": 5.0},
                  {"name": "standin8", "steps": 8, "shift": 8.0},
                  {"name": "t2v", "steps": 4, "shift": 5.0, "guide_scale": 1.0},
                  {"name": "ti2v", "steps": 4, "shift": 5.0, "guide_scale": 1.0, "image": True}],
    }
    with open(os.path.join(OUT, "schedules.json"), "w") as f:
        f.write(json.dumps(doc, indent=1) + "\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
