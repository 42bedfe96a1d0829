"""Golden fixtures for Ferry's TAEHV preview decoder (core/models/taehv): tiny random TAEHV
decoders for both Wan latent spaces, built from the published module classes (madebyollin/taehv
`taehv.py`: Clamp, conv, MemBlock, TGrow, the decoder's nn.Sequential order and its indices, so
the keys are the real `decoder.<index>.…` names) with reduced channel widths, and their f32 CPU
decodes by the published code.

taehv.py is not part of Ferry and is not committed: fetch it (github.com/madebyollin/taehv, read
at commit 1f14a568f24bf8811e0a0ac601613e04fc1581e8) and pass its path.

Writes tests/data/taehv/:
  taew2_1_tiny.safetensors   z = 16, patch 1 (Wan 2.1 / A14B latent space)
  taew2_2_tiny.safetensors   z = 48, patch 2 (Wan 2.2 TI2V-5B latent space)
      decoder.* in fp16, widths WIDTHS instead of (256, 128, 64, 64); decoder.7.conv.weight is
      stored with twice the rows its stride-1 TGrow needs, as the published files store it, so
      the loader's last-rows rule (TAEHV.patch_tgrow_layers) is exercised; one encoder tensor,
      which a decoder-only loader must ignore.
  taew2_1_reference.safetensors, taew2_2_reference.safetensors
      latent        [z, T, h, w]        Ferry's layout of the decoder input (NTCHW in taehv.py)
      pixels        [3, 4T-3, H, W]     decode_video(parallel=True): clamped to [0, 1], trimmed
      raw           [3, 4T-3, H, W]     the same frames before the clamp (random weights saturate
                                        many pixels; the unclamped values show every error)
      preview_raw   [3, T, H/2, W/2]    the cheap preview decoder of the README: time upscale off
                                        (every TGrow stride 1, last rows) and the last spatial
                                        upsample off; unclamped, nothing trimmed
      floor_raw, floor_preview_raw  [1]  the largest |f32 - f64| of the same decodes (the model
                                        and latent in float64): the f32 rounding floor that the
                                        parity tests' bounds are derived from
  The script also checks that the published streaming path (parallel=False) gives the parallel
  path's frames, and says by how much they differ.

    tools/reference/.venv/bin/python tools/reference/make_taehv_reference.py --taehv /tmp/taehv.py

Other seeds (tests/models/taehv_decoder_test.cpp reads FERRY_TAEHV_FIXTURES=DIR instead):

    tools/reference/.venv/bin/python tools/reference/make_taehv_reference.py --taehv /tmp/taehv.py \
        --seed 5 --out scratch/taehv-seed5
"""

import argparse
import importlib.util
import pathlib

import torch
import torch.nn as nn
from safetensors.torch import save_file

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "taehv"

# Reduced widths for the four decoder stages (the published (256, 128, 64, 64)); the last two
# differ on purpose so a loader that assumes they are equal fails.
WIDTHS = (16, 12, 8, 6)

# (name, latent channels, patch size, latent frames, latent height, latent width)
KINDS = [
    ("taew2_1", 16, 1, 3, 4, 6),
    ("taew2_2", 48, 2, 3, 3, 4),
]


def load_taehv(path):
    spec = importlib.util.spec_from_file_location("taehv", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def small_decoder(th, z, p, n_f, time_up=(False, True, True), space_up=(True, True, True)):
    """The base decoder of TAEHV.__init__ (same modules, same order, so the same indices), with
    the widths n_f."""
    conv = th.conv
    return nn.Sequential(
        th.Clamp(), conv(z, n_f[0]), nn.ReLU(inplace=True),
        th.MemBlock(n_f[0], n_f[0]), th.MemBlock(n_f[0], n_f[0]), th.MemBlock(n_f[0], n_f[0]),
        nn.Upsample(scale_factor=2 if space_up[0] else 1), th.TGrow(n_f[0], 2 if time_up[0] else 1),
        conv(n_f[0], n_f[1], bias=False),
        th.MemBlock(n_f[1], n_f[1]), th.MemBlock(n_f[1], n_f[1]), th.MemBlock(n_f[1], n_f[1]),
        nn.Upsample(scale_factor=2 if space_up[1] else 1), th.TGrow(n_f[1], 2 if time_up[1] else 1),
        conv(n_f[1], n_f[2], bias=False),
        th.MemBlock(n_f[2], n_f[2]), th.MemBlock(n_f[2], n_f[2]), th.MemBlock(n_f[2], n_f[2]),
        nn.Upsample(scale_factor=2 if space_up[2] else 1), th.TGrow(n_f[2], 2 if time_up[2] else 1),
        conv(n_f[2], n_f[3], bias=False),
        nn.ReLU(inplace=True), conv(n_f[3], 3 * p * p),
    )


def make_model(th, z, p, decoder):
    """A published TAEHV object (no checkpoint) whose decoder is `decoder`; its computed
    properties (t_upscale, frames_to_trim) re-derived from it as __init__ derives them."""
    model = th.TAEHV(checkpoint_path=None, patch_size=p, latent_channels=z)
    model.decoder = decoder
    model.t_upscale = 2 ** sum(t.stride == 2 for t in decoder if isinstance(t, th.TGrow))
    model.frames_to_trim = model.t_upscale - 1
    return model.eval().requires_grad_(False)


def random_file_state(th, z, p, gen):
    """Random fp16 decoder weights as the file stores them (decoder.7 with extra rows)."""
    state = {}
    for name, t in small_decoder(th, z, p, WIDTHS).state_dict().items():
        shape = list(t.shape)
        if name == "decoder.7.conv.weight":
            shape[0] *= 2  # the published files keep a stride-2 TGrow's rows here
        if name.endswith("bias"):
            v = 0.1 * torch.randn(shape, generator=gen)
            if name == "decoder.22.bias":
                v += 0.5  # pixels around mid-grey, so the [0, 1] clamp keeps most of them
        else:
            fan_in = torch.Size(shape[1:]).numel()
            # N(0, 1/fan_in): with the ReLUs and the residual adds, activations stay O(1).
            v = torch.randn(shape, generator=gen) / fan_in**0.5
        state["decoder." + name] = v.half()
    # The published files also hold the encoder; a decoder-only loader ignores it.
    state["encoder.0.weight"] = (0.1 * torch.randn(64, 3 * p * p, 3, 3, generator=gen)).half()
    return state


def decode_raw(th, model, latent_ntchw, parallel):
    """decode_video without the clamp: the decoder, pixel shuffle, trim."""
    x = th.apply_model_with_memblocks(model.decoder, latent_ntchw, parallel, False)
    if model.patch_size > 1:
        x = torch.nn.functional.pixel_shuffle(x, model.patch_size)
    return x[:, model.frames_to_trim:]


def to_ferry(ntchw):
    """[1, T, C, H, W] → Ferry's [C, T, H, W]."""
    return ntchw[0].permute(1, 0, 2, 3).contiguous()


def build(th, z, p, file_state, time_up, space_up, dtype):
    model = make_model(th, z, p, small_decoder(th, z, p, WIDTHS, time_up, space_up))
    state = {k[len("decoder."):]: v for k, v in file_state.items() if k.startswith("decoder.")}
    patched = model.patch_tgrow_layers({"decoder." + k: v.float() for k, v in state.items()})
    model.load_state_dict({k: v for k, v in patched.items() if k.startswith("decoder.")},
                          strict=False)
    return model.to(dtype)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--taehv", type=pathlib.Path, required=True,
                        help="path of the published taehv.py (not committed)")
    parser.add_argument("--seed", type=int, default=0, help="weights and latents seed")
    parser.add_argument("--out", type=pathlib.Path, default=OUT, help="folder to write")
    return parser.parse_args()


def main():
    args = parse_args()
    th = load_taehv(args.taehv)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_grad_enabled(False)
    for index, (name, z, p, t, h, w) in enumerate(KINDS):
        gen = torch.Generator().manual_seed(args.seed * 100 + index)
        file_state = random_file_state(th, z, p, gen)
        # ~N(0, 1.5²): some values reach the tanh's soft clamp.
        latent = 1.5 * torch.randn(1, t, z, h, w, generator=gen)

        full = (False, True, True), (True, True, True)
        preview = (False, False, False), (True, True, False)
        ref = {"latent": to_ferry(latent)}
        for key, (time_up, space_up) in (("raw", full), ("preview_raw", preview)):
            m32 = build(th, z, p, file_state, time_up, space_up, torch.float32)
            m64 = build(th, z, p, file_state, time_up, space_up, torch.float64)
            raw32 = decode_raw(th, m32, latent, True)
            raw64 = decode_raw(th, m64, latent.double(), True)
            streamed = decode_raw(th, m32, latent, False)
            stream_diff = (streamed - raw32).abs().max().item()
            floor = (raw32.double() - raw64).abs().max().item()
            ref[key] = to_ferry(raw32)
            ref["floor_" + key] = torch.tensor([floor], dtype=torch.float32)
            if key == "raw":
                pixels = m32.decode_video(latent, parallel=True, show_progress_bar=False)
                assert torch.equal(pixels, raw32.clamp(0, 1))
                ref["pixels"] = to_ferry(pixels)
            inside = ((raw32 > 0) & (raw32 < 1)).float().mean().item()
            print(f"{name} {key}: {list(ref[key].shape)}, raw in [{raw32.min():.3f}, "
                  f"{raw32.max():.3f}] ({inside:.0%} inside [0, 1]), f32 floor {floor:.3g}, "
                  f"streaming vs parallel {stream_diff:.3g}")
        save_file(file_state, args.out / f"{name}_tiny.safetensors")
        save_file({k: v.contiguous() for k, v in ref.items()},
                  args.out / f"{name}_reference.safetensors")


if __name__ == "__main__":
    main()
