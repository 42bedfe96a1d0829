#!/usr/bin/env python3
"""Writes tests/data/wan/sampler/: the official Wan flow-matching schedule and sampler
trajectories that tests/models/wan_sampler_test.cpp and tests/models/wan_ti2v_test.cpp compare
Ferry with (wan.md §D, §B.8).

    tools/reference/.venv/bin/python tools/reference/make_sampler_reference.py

Everything runs on the CPU in fp32 torch with fixed seeds; rerunning rewrites the same bytes.

Files written:
  schedules.json        per (steps, shift): the sigmas (float32, steps+1 values, the last 0) and
                        the integer timesteps the DiT is called with, from the official
                        FlowUniPCMultistepScheduler built as text2video.py / textimage2video.py
                        build it (num_train_timesteps 1000, shift 1, no dynamic shifting, then
                        set_timesteps(steps, shift=shift)); plus, per trajectory case, its
                        parameters, the steps whose samples are stored and, for the TI2V case,
                        the per-token timesteps of some steps
  trajectories.safetensors
                        F32 tensors: `noise` and `z0` (the stand-in image latent, one frame), the
                        stand-in models' coefficients `cond.a`, `cond.b`, `cond.c`, `uncond.a`, …,
                        and `<case>.step<k>`, the sample after k steps; `<case>.rounded_final`,
                        the last sample of the same run with the scheduler's scalar fp32 log and
                        expm1 computed in fp64 and rounded (as Ferry computes them: torch's fp32
                        kernels, MKL's on x86, differ from that in the last bit for about one
                        value in ten), which Ferry must reproduce bit for bit

The stand-in model replaces the DiT: v = a·x + b·(t/1000) + c elementwise, with t the timestep of
the element's token (its latent frame and 2×2 patch, wan.md §B.2) and fixed random a, b, c; the
conditional and unconditional passes are two stand-ins combined as the official pipelines combine
them (uncond + g·(cond − uncond)). UniPC steps are the official FlowUniPCMultistepScheduler.step.
The official code has no flow Euler; its step is diffusers' FlowMatchEulerDiscreteScheduler.step
(x + (σ_{i+1} − σ_i)·v in fp32), restated here on the official sigmas (wan.md §D.3). The TI2V case
follows textimage2video.py `i2v` line by line: masks_like(zero=True), the frame-0 blend before the
loop, per-token timesteps `mask2[0][0][:, ::2, ::2] * t` flattened, and the blend after every step.
wan/utils/utils.py (masks_like) imports imageio and torchvision for its savers; where they are not
installed, empty modules stand in for them (official_utils below).
"""

import contextlib
import importlib
import json
import math
import pathlib
import sys
import types

import torch
from safetensors.torch import save_file

from wan_reference import wan_module

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "wan" / "sampler"

# (steps, shift): Wan's defaults (wan.md §D.4) and edge cases (1 and 2 steps, shift 1).
SCHEDULES = [(1, 5.0), (2, 5.0), (3, 5.0), (4, 5.0), (10, 16.0), (20, 5.0), (30, 8.0),
             (40, 5.0), (40, 12.0), (50, 1.0), (50, 3.0), (50, 5.0), (100, 5.0)]

LATENT_SHAPE = (48, 3, 4, 4)  # [C, T, H, W]: a Wan 2.2 latent, 3 frames of 2x2 patches

# name, sampler, steps, shift, guide scale, ti2v
CASES = [
    ("unipc_4", "unipc", 4, 5.0, 5.0, False),
    ("unipc_20", "unipc", 20, 5.0, 5.0, False),
    ("unipc_50", "unipc", 50, 3.0, 3.5, False),
    ("euler_20", "euler", 20, 5.0, 5.0, False),
    ("ti2v_unipc_20", "unipc", 20, 5.0, 5.0, True),
]


def official_scheduler(steps, shift):
    solvers = wan_module("wan.utils.fm_solvers_unipc")
    scheduler = solvers.FlowUniPCMultistepScheduler(num_train_timesteps=1000, shift=1,
                                                    use_dynamic_shifting=False)
    scheduler.set_timesteps(steps, device="cpu", shift=shift)
    return scheduler


class _RoundedScalars:
    """torch, except that log and expm1 of 0-dim tensors are computed in fp64 and rounded to fp32
    (what Ferry does; torch's own fp32 kernels differ from that in the last bit for about one
    value in ten)."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def log(x):
        if x.dim() != 0:
            return torch.log(x)
        v = float(x)
        return torch.tensor(math.log(v) if v > 0 else -math.inf, dtype=torch.float64).float()

    @staticmethod
    def expm1(x):
        if x.dim() != 0:
            return torch.expm1(x)
        return torch.tensor(math.expm1(float(x)), dtype=torch.float64).float()


@contextlib.contextmanager
def rounded_scalars():
    solvers = wan_module("wan.utils.fm_solvers_unipc")
    saved = solvers.torch
    solvers.torch = _RoundedScalars()
    try:
        yield
    finally:
        solvers.torch = saved


def stand_in(coef, x, t_elem):
    # t_elem: float32, the element's token timestep / 1000.
    return coef["a"] * x + coef["b"] * t_elem + coef["c"]


def element_times(token_t):
    # token_t: float32 [T * H/2 * W/2] in token order -> [C, T, H, W] of t / 1000.
    c, t, h, w = LATENT_SHAPE
    grid = (token_t / 1000).reshape(t, h // 2, w // 2)
    grid = grid.repeat_interleave(2, dim=1).repeat_interleave(2, dim=2)
    return grid.unsqueeze(0).expand(c, t, h, w)


def stored_steps(n):
    return sorted({k for k in (1, 2, 3, n // 2, n) if 1 <= k <= n})


def official_utils():
    # wan/utils/utils.py imports imageio and torchvision at the top for its video/image savers;
    # masks_like needs neither, and neither is a reference requirement, so empty modules stand in
    # for them while it is imported (only when they are really absent).
    for name in ("imageio", "torchvision"):
        try:
            importlib.import_module(name)
        except ModuleNotFoundError:
            sys.modules[name] = types.ModuleType(name)
    return wan_module("wan.utils.utils")


def run_case(name, sampler, steps, shift, guide, ti2v, inputs, tensors):
    utils = official_utils()
    scheduler = official_scheduler(steps, shift)
    noise, z = inputs["noise"], inputs["z0"]
    c, t, h, w = LATENT_SHAPE
    seq_len = t * (h // 2) * (w // 2)
    keep = stored_steps(steps)
    token_timesteps = {}

    mask1, mask2 = utils.masks_like([noise], zero=ti2v)
    latent = noise
    if ti2v:
        latent = (1. - mask2[0]) * z + mask2[0] * latent
    for i, step_t in enumerate(scheduler.timesteps):
        timestep = torch.stack([step_t])
        if ti2v:
            temp_ts = (mask2[0][0][:, ::2, ::2] * timestep).flatten()
            temp_ts = torch.cat([temp_ts, temp_ts.new_ones(seq_len - temp_ts.size(0)) * timestep])
        else:
            temp_ts = timestep.to(torch.float32).expand(seq_len)
        if ti2v and i in (0, 1, steps - 1):
            token_timesteps[str(i)] = [float(v) for v in temp_ts]
        t_elem = element_times(temp_ts)
        v_cond = stand_in(inputs["cond"], latent, t_elem)
        v_uncond = stand_in(inputs["uncond"], latent, t_elem)
        v = v_uncond + guide * (v_cond - v_uncond)
        if sampler == "unipc":
            latent = scheduler.step(v.unsqueeze(0), step_t, latent.unsqueeze(0),
                                    return_dict=False)[0].squeeze(0)
        else:
            dt = scheduler.sigmas[i + 1] - scheduler.sigmas[i]
            latent = latent + dt * v
        if ti2v:
            latent = (1. - mask2[0]) * z + mask2[0] * latent
        if i + 1 in keep:
            tensors[f"{name}.step{i + 1}"] = latent.clone().contiguous()
    case = {"name": name, "sampler": sampler, "steps": steps, "shift": shift,
            "guide_scale": guide, "ti2v": ti2v, "stored_steps": keep}
    if ti2v:
        case["token_timesteps"] = token_timesteps
    return case


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)

    schedules = []
    for steps, shift in SCHEDULES:
        s = official_scheduler(steps, shift)
        assert s.sigmas.dtype == torch.float32 and s.timesteps.dtype == torch.int64
        schedules.append({"steps": steps, "shift": shift,
                          "sigmas": [float(v) for v in s.sigmas],
                          "timesteps": [int(v) for v in s.timesteps]})

    g = torch.Generator().manual_seed(20260301)
    c, t, h, w = LATENT_SHAPE
    inputs = {
        "noise": torch.randn(LATENT_SHAPE, generator=g, dtype=torch.float32),
        "z0": torch.randn((c, 1, h, w), generator=g, dtype=torch.float32),
    }
    for model in ("cond", "uncond"):
        inputs[model] = {
            "a": (torch.rand(LATENT_SHAPE, generator=g) - 0.5) * 0.6,
            "b": torch.randn(LATENT_SHAPE, generator=g),
            "c": torch.randn(LATENT_SHAPE, generator=g) * 0.5,
        }
    tensors = {"noise": inputs["noise"], "z0": inputs["z0"]}
    for model in ("cond", "uncond"):
        for k, v in inputs[model].items():
            tensors[f"{model}.{k}"] = v.contiguous()

    cases = [run_case(*case, inputs, tensors) for case in CASES]
    # The same runs with the scheduler's scalar log/expm1 correctly rounded: Ferry's result,
    # which must match bit for bit (only the last sample is kept).
    for case in CASES:
        rounded = {}
        with rounded_scalars():
            run_case(*case, inputs, rounded)
        tensors[f"{case[0]}.rounded_final"] = rounded[f"{case[0]}.step{case[2]}"]

    save_file(tensors, str(OUT / "trajectories.safetensors"))
    doc = {
        "source": "wan22 2.2.11 (PyPI) wan/utils/fm_solvers_unipc.py, wan/utils/utils.py, "
                  "wan/textimage2video.py; torch " + torch.__version__,
        "latent_shape": list(LATENT_SHAPE),
        "schedules": schedules,
        "cases": cases,
    }
    (OUT / "schedules.json").write_text(json.dumps(doc, indent=1) + "\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
