"""Golden fixtures for Ferry's Wan VAEs (core/models/wan/vae*): tiny random VAEs of both kinds,
built from the official modules with reduced channel widths but the real structure and the real
z_dim (so the latent mean/std tables of wan.md §C.5 apply), and their fp32 CPU encodes and decodes.

Writes tests/data/wan/vae/:
  wan21_tiny.safetensors, wan22_tiny.safetensors         official / ComfyUI names, fp16
  wan21_tiny_diffusers.safetensors, wan22_tiny_diffusers.safetensors   diffusers names, bf16
      (every weight is bf16-representable, so both files hold the same values exactly; the
      references below are computed in fp32 from those values)
  wan21_reference.safetensors, wan22_reference.safetensors
      video_f{1,5,9}   [3, F, H, W] in [-1, 1]   (encoder input)
      latent_f{1,5,9}  [z, T, h, w]              official encode (normalised mu)
      z_t{1,2,3}       [z, T, h, w]              random normalised latents (decoder input)
      pixels_t{1,2,3}  [3, F, H, W]              official decode, clamped to [-1, 1]
    and the floors the tests' bounds are derived from, on the same weights:
      pixels_bf16_t{1,2,3}, latent_bf16_f{1,5,9}   the official decode and encode of the same
          inputs with Ferry's bf16-activation recipe (Bf16Activations below)
      tiled_z          [z, 3, 6, 8]              a smooth normalised latent
      tiled_untiled    [3, 9, 6s, 8s]            its official decode, clamped
      tiled_pixels     [3, 9, 6s, 8s]            its tiled decode (tile 5, overlap 3; Ferry's
          tiling restated on the official decoder, tiled_decode below), clamped

The diffusers files are written with a restatement of diffusers' renames and checked by loading
them into diffusers' AutoencoderKLWan (strict) and comparing a decode with the official one.

    tools/reference/.venv/bin/python tools/reference/make_vae_reference.py

Other seeds and sizes, for checking that the tests' bounds hold beyond the committed weights
(tests/models/wan_vae_test.cpp reads FERRY_VAE_FIXTURES=DIR instead of tests/data/wan/vae):

    tools/reference/.venv/bin/python tools/reference/make_vae_reference.py \
        --seed 3 --dim 8 --out scratch/vae-seed3-dim8
"""

import argparse
import pathlib
import re
import sys

import torch
from safetensors.torch import save_file
from torch.overrides import TorchFunctionMode

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from wan_reference import wan_module  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "wan" / "vae"

# (name, module, z_dim, pixel height, pixel width); the encoder and decoder base widths are
# --dim (4 in the committed fixtures).
KINDS = [
    ("wan21", "wan.modules.vae2_1", 16, 16, 32),
    ("wan22", "wan.modules.vae2_2", 48, 32, 64),
]

# The tiled-decode floor: a 6 x 8 latent of 3 frames cut into tiles of 5 with an overlap of 3
# (2 x 3 tiles), as tests/models/wan_vae_test.cpp tiles it.
TILED_LATENT = (3, 6, 8)
TILE, OVERLAP = 5, 3


def build(module_name, z_dim, dim, dec_dim, seed):
    vae = wan_module(module_name)
    kwargs = dict(dim=dim, z_dim=z_dim, dim_mult=[1, 2, 4, 4], num_res_blocks=2,
                  attn_scales=[], temperal_downsample=[False, True, True], dropout=0.0)
    if module_name.endswith("vae2_2"):
        kwargs["dec_dim"] = dec_dim
    model = vae.WanVAE_(**kwargs).eval().requires_grad_(False)
    gen = torch.Generator().manual_seed(seed)
    # Every parameter random (the official init zeroes `proj` and makes gammas ones, which would
    # hide mistakes): weights ~ N(0, 1/fan_in), biases small, gammas around 1.
    for name, p in model.named_parameters():
        if name.endswith("gamma"):
            p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
        elif name.endswith("bias"):
            p.copy_(0.1 * torch.randn(p.shape, generator=gen))
        else:
            fan_in = p[0].numel()
            p.copy_(torch.randn(p.shape, generator=gen) / fan_in**0.5)
        # bf16-representable values, so that the 16-bit files below hold them exactly.
        p.copy_(p.to(torch.bfloat16).float())
        p[p.abs() < 2.0**-14] = 0.0  # nor fp16 subnormals
    return vae, model


def scale_of(vae, z_dim):
    # The official wrappers hold the tables but load a checkpoint when built, so the numbers
    # are read from the wrapper's source: the lists that follow `mean = ` and `std = `.
    import inspect
    cls = vae.Wan2_1_VAE if hasattr(vae, "Wan2_1_VAE") else vae.Wan2_2_VAE
    src = inspect.getsource(cls.__init__)
    lists = [re.search(name + r"\s*=\s*(?:torch\.tensor\()?\s*\[(.*?)\]", src, re.S).group(1)
             for name in ("mean", "std")]
    nums = [float(x) for body in lists for x in re.findall(r"-?\d+\.\d+", body)]
    assert len(nums) == 2 * z_dim, (len(nums), z_dim)
    mean = torch.tensor(nums[:z_dim], dtype=torch.float32)
    std = torch.tensor(nums[z_dim:], dtype=torch.float32)
    return [mean, 1.0 / std]


class Bf16Activations(TorchFunctionMode):
    """Ferry's bf16 activations (core/models/wan/vae.cpp, VaeOptions) on the official modules:
    every tensor an op makes is rounded to bf16 and kept in fp32, so the ops still compute in
    fp32 from bf16 inputs, as Ferry's do, and what they store (caches included) is bf16. Views
    are left alone (they hold values already rounded, or the fp32 latent tables); in-place ops
    are rounded in place. While `exact` is set nothing is rounded: Ferry's last layer writes its
    public f32 output (the decoder's head conv, the encoder's latent normalisation). The rounding
    points differ from Ferry's where the official code splits one of Ferry's ops in several (the
    RMS norm is three ops here, one there), so this is a recipe of the same kind, not Ferry's
    numbers: its distance from the fp32 run is the floor Ferry's bf16 bounds are derived from."""

    def __init__(self):
        super().__init__()
        self.exact = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.exact or not isinstance(out, torch.Tensor) or out.dtype != torch.float32:
            return out
        name = getattr(func, "__name__", "")
        if (name.endswith("_") and not name.endswith("__")) or "out" in kwargs:
            out.copy_(out.bfloat16())
            return out
        if out._is_view():
            return out
        return out.bfloat16().float()


def bf16_decode(model, z, scale):
    """The official decode with Bf16Activations, clamped. Each chunk's head conv writes fp32, and
    what follows it (joining the chunks, unpatchify) stays exact until the next chunk."""
    mode = Bf16Activations()

    def exact(_module, _inputs):
        mode.exact = True

    def rounded(_module, _inputs):
        mode.exact = False

    hooks = [model.decoder.register_forward_pre_hook(rounded),
             model.decoder.head[-1].register_forward_pre_hook(exact)]
    try:
        with mode:
            pixels = model.decode(z.unsqueeze(0), scale)
    finally:
        for h in hooks:
            h.remove()
    return pixels.clamp(-1, 1).squeeze(0)


def bf16_encode(model, video, scale):
    """The official encode with Bf16Activations: the pixels rounded once on the way in (Ferry's
    first cache holds them in bf16), the moments conv rounded, the normalisation exact."""
    mode = Bf16Activations()

    def exact_after(_module, _inputs, output):
        mode.exact = True
        return output.bfloat16().float()

    hook = model.conv1.register_forward_hook(exact_after)
    try:
        with mode:
            latent = model.encode(video.bfloat16().float().unsqueeze(0), scale)
    finally:
        hook.remove()
    return latent.squeeze(0)


def tile_starts(size, tile, overlap):
    """vae_tile_starts (core/models/wan/vae_tiling.cpp)."""
    if size <= tile:
        return [0]
    starts, s = [], 0
    while s + tile < size:
        starts.append(s)
        s += tile - overlap
    return starts + [size - tile]


def ramp(n, r, before, after):
    """ramp_weight of vae_tiling.cpp over a tile of n pixels, as fp32."""
    i = torch.arange(n, dtype=torch.float32)
    w = torch.ones(n)
    if r > 0 and before:
        w = torch.minimum(w, (i + 0.5) / r)
    if r > 0 and after:
        w = torch.minimum(w, (n - i - 0.5) / r)
    return w


def tiled_decode(model, z, scale, spatial):
    """Ferry's decode_tiled on the official decoder: each tile (all frames, its own caches)
    decoded alone and unclamped, blended with weights that ramp linearly across the overlaps,
    divided by the summed weights, then clamped."""
    _, frames, h, w = z.shape
    rows, cols = tile_starts(h, TILE, OVERLAP), tile_starts(w, TILE, OVERLAP)
    th, tw = min(TILE, h), min(TILE, w)
    r = OVERLAP * spatial
    out, total = None, torch.zeros(h * spatial, w * spatial)
    for iy, y0 in enumerate(rows):
        for ix, x0 in enumerate(cols):
            tile = z[:, :, y0:y0 + th, x0:x0 + tw].contiguous()
            px = model.decode(tile.unsqueeze(0), scale).squeeze(0)
            if out is None:
                out = torch.zeros(px.shape[0], px.shape[1], h * spatial, w * spatial)
            wy = ramp(th * spatial, r, iy > 0, iy + 1 < len(rows))
            wx = ramp(tw * spatial, r, ix > 0, ix + 1 < len(cols))
            weight = wy[:, None] * wx[None, :]
            ys, xs = slice(y0 * spatial, (y0 + th) * spatial), slice(x0 * spatial, (x0 + tw) * spatial)
            out[:, :, ys, xs] += weight * px
            total[ys, xs] += weight
    return (out / total).clamp(-1, 1)


def smooth_latent(z_dim, gen):
    """A smooth normalised latent: per channel and frame a random level plus a low-frequency
    wave, closer to real latents than white noise (as the tiled tests' own latents)."""
    t, h, w = TILED_LATENT
    level = torch.randn((z_dim, t, 1, 1), generator=gen)
    c = torch.arange(z_dim, dtype=torch.float32)[:, None, None, None]
    f = torch.arange(t, dtype=torch.float32)[None, :, None, None]
    y = torch.arange(h, dtype=torch.float32)[None, None, :, None]
    x = torch.arange(w, dtype=torch.float32)[None, None, None, :]
    return level + 0.3 * torch.sin(0.5 * (x + c)) * torch.cos(0.4 * (y + f))


RES_PARTS = [("residual.0.", "norm1."), ("residual.2.", "conv1."), ("residual.3.", "norm2."),
             ("residual.6.", "conv2."), ("shortcut.", "conv_shortcut.")]


def res_part(rest):
    for off, dif in RES_PARTS:
        if rest.startswith(off):
            return dif + rest[len(off):]
    return None


def diffusers_name(name, kind):
    """diffusers' AutoencoderKLWan name for an official one (a restatement of its renames)."""
    top = {"conv1.": "quant_conv.", "conv2.": "post_quant_conv."}
    for off, dif in top.items():
        if name.startswith(off):
            return dif + name[len(off):]
    side, rest = name.split(".", 1)
    for off, dif in [("conv1.", "conv_in."), ("head.0.", "norm_out."), ("head.2.", "conv_out.")]:
        if rest.startswith(off):
            return f"{side}.{dif}{rest[len(off):]}"
    m = re.match(r"middle\.(\d)\.(.*)", rest)
    if m:
        i, tail = int(m.group(1)), m.group(2)
        if i == 1:
            return f"{side}.mid_block.attentions.0.{tail}"
        return f"{side}.mid_block.resnets.{i // 2}.{res_part(tail)}"
    if side == "encoder":
        if kind == "wan21":
            m = re.match(r"downsamples\.(\d+)\.(.*)", rest)
            i, tail = m.group(1), m.group(2)
            return f"encoder.down_blocks.{i}.{res_part(tail) or tail}"
        m = re.match(r"downsamples\.(\d+)\.downsamples\.(\d+)\.(.*)", rest)
        s, k, tail = m.group(1), int(m.group(2)), m.group(3)
        if tail.startswith(("resample.", "time_conv.")):
            return f"encoder.down_blocks.{s}.downsampler.{tail}"
        return f"encoder.down_blocks.{s}.resnets.{k}.{res_part(tail)}"
    if kind == "wan21":
        m = re.match(r"upsamples\.(\d+)\.(.*)", rest)
        i, tail = int(m.group(1)), m.group(2)
        s, k = i // 4, i % 4
        if k == 3:
            return f"decoder.up_blocks.{s}.upsamplers.0.{tail}"
        return f"decoder.up_blocks.{s}.resnets.{k}.{res_part(tail)}"
    m = re.match(r"upsamples\.(\d+)\.upsamples\.(\d+)\.(.*)", rest)
    s, k, tail = m.group(1), int(m.group(2)), m.group(3)
    if tail.startswith(("resample.", "time_conv.")):
        return f"decoder.up_blocks.{s}.upsampler.{tail}"
    return f"decoder.up_blocks.{s}.resnets.{k}.{res_part(tail)}"


def check_diffusers(kind, model, z_dim, dim, dec_dim, state, z, scale):
    from diffusers import AutoencoderKLWan
    if kind == "wan21":
        d = AutoencoderKLWan(base_dim=dim, z_dim=z_dim)
    else:
        d = AutoencoderKLWan(base_dim=dim, decoder_base_dim=dec_dim, z_dim=z_dim, is_residual=True,
                             in_channels=12, out_channels=12, patch_size=2,
                             scale_factor_spatial=16)
    d.load_state_dict(state, strict=True)
    d.eval()
    with torch.no_grad():
        zz = z.unsqueeze(0) / scale[1].view(1, -1, 1, 1, 1) + scale[0].view(1, -1, 1, 1, 1)
        ours = d.decode(zz).sample.clamp(-1, 1)
        official = model.decode(z.unsqueeze(0), scale).clamp(-1, 1)
    err = (ours - official).abs().max().item()
    print(f"  diffusers layout check: max |diffusers - official| = {err:.3g}")
    assert err < 1e-4, err


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0,
                        help="weights and inputs seed (0: the committed fixtures)")
    parser.add_argument("--dim", type=int, default=4,
                        help="encoder and decoder base width (4: the committed fixtures)")
    parser.add_argument("--out", type=pathlib.Path, default=OUT, help="folder to write")
    return parser.parse_args()


def main():
    args = arguments()
    out_dir = args.out
    torch.manual_seed(0)
    out_dir.mkdir(parents=True, exist_ok=True)
    for n, (kind, module_name, z_dim, height, width) in enumerate(KINDS):
        dim = dec_dim = args.dim
        seed = 1000 * args.seed + n
        vae, model = build(module_name, z_dim, dim, dec_dim, seed=100 + seed)
        scale = scale_of(vae, z_dim)
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        # Official names in fp16 (as ComfyUI's files), diffusers names in bf16: the same values.
        half = {k: v.half() for k, v in state.items()}
        assert all(torch.equal(half[k].float(), v) for k, v in state.items())
        save_file(half, out_dir / f"{kind}_tiny.safetensors")
        diff_state = {diffusers_name(k, kind): v for k, v in state.items()}
        save_file({k: v.bfloat16() for k, v in diff_state.items()},
                  out_dir / f"{kind}_tiny_diffusers.safetensors")

        gen = torch.Generator().manual_seed(200 + seed)
        spatial = 16 if kind == "wan22" else 8
        ref = {}
        with torch.no_grad():
            for frames in (1, 5, 9):
                video = torch.rand((3, frames, height, width), generator=gen) * 2 - 1
                latent = model.encode(video.unsqueeze(0), scale).squeeze(0)
                ref[f"video_f{frames}"] = video
                ref[f"latent_f{frames}"] = latent
            for t in (1, 2, 3):
                z = torch.randn((z_dim, t, height // spatial, width // spatial), generator=gen)
                pixels = model.decode(z.unsqueeze(0), scale).clamp(-1, 1).squeeze(0)
                ref[f"z_t{t}"] = z
                ref[f"pixels_t{t}"] = pixels
                inside = (pixels.abs() < 1).float().mean().item()
                print(f"{kind} decode t={t}: pixels std {pixels.std():.3f}, "
                      f"{100 * inside:.0f}% unclamped")
            # The floors, after the inputs above so that those stay as they were.
            for frames in (1, 5, 9):
                latent = bf16_encode(model, ref[f"video_f{frames}"], scale)
                ref[f"latent_bf16_f{frames}"] = latent
                err = (latent - ref[f"latent_f{frames}"]).abs().max().item()
                print(f"{kind} bf16 encode f={frames}: max |bf16 - fp32| {err:.3g}")
            for t in (1, 2, 3):
                pixels = bf16_decode(model, ref[f"z_t{t}"], scale)
                ref[f"pixels_bf16_t{t}"] = pixels
                err = (pixels - ref[f"pixels_t{t}"]).abs().max().item()
                print(f"{kind} bf16 decode t={t}: max |bf16 - fp32| {err:.3g}")
            z = smooth_latent(z_dim, torch.Generator().manual_seed(300 + seed))
            untiled = model.decode(z.unsqueeze(0), scale).clamp(-1, 1).squeeze(0)
            tiled = tiled_decode(model, z, scale, spatial)
            ref["tiled_z"], ref["tiled_untiled"], ref["tiled_pixels"] = z, untiled, tiled
            gap = (tiled - untiled).abs()
            print(f"{kind} tiled decode: |tiled - untiled| max {gap.max():.3g}, "
                  f"mean {gap.mean():.3g}")
        for k, v in ref.items():
            print(f"  {k}: {tuple(v.shape)}")
        save_file({k: v.contiguous() for k, v in ref.items()},
                  out_dir / f"{kind}_reference.safetensors")
        check_diffusers(kind, model, z_dim, dim, dec_dim, diff_state, ref["z_t3"], scale)
    for f in sorted(out_dir.iterdir()):
        print(f"{f.name}: {f.stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
