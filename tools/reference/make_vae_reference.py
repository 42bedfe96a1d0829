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

The diffusers files are written with a restatement of diffusers' renames and checked by loading
them into diffusers' AutoencoderKLWan (strict) and comparing a decode with the official one.

    tools/reference/.venv/bin/python tools/reference/make_vae_reference.py
"""

import pathlib
import re
import sys

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from wan_reference import wan_module  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "wan" / "vae"

# (name, module, z_dim, encoder dim, decoder dim, pixel height, pixel width)
KINDS = [
    ("wan21", "wan.modules.vae2_1", 16, 4, 4, 16, 32),
    ("wan22", "wan.modules.vae2_2", 48, 4, 4, 32, 64),
]


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


def main():
    torch.manual_seed(0)
    OUT.mkdir(parents=True, exist_ok=True)
    for n, (kind, module_name, z_dim, dim, dec_dim, height, width) in enumerate(KINDS):
        vae, model = build(module_name, z_dim, dim, dec_dim, seed=100 + n)
        scale = scale_of(vae, z_dim)
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        # Official names in fp16 (as ComfyUI's files), diffusers names in bf16: the same values.
        half = {k: v.half() for k, v in state.items()}
        assert all(torch.equal(half[k].float(), v) for k, v in state.items())
        save_file(half, OUT / f"{kind}_tiny.safetensors")
        diff_state = {diffusers_name(k, kind): v for k, v in state.items()}
        save_file({k: v.bfloat16() for k, v in diff_state.items()},
                  OUT / f"{kind}_tiny_diffusers.safetensors")

        gen = torch.Generator().manual_seed(200 + n)
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
        for k, v in ref.items():
            print(f"  {k}: {tuple(v.shape)}")
        save_file({k: v.contiguous() for k, v in ref.items()}, OUT / f"{kind}_reference.safetensors")
        check_diffusers(kind, model, z_dim, dim, dec_dim, diff_state, ref["z_t3"], scale)
    for f in sorted(OUT.iterdir()):
        print(f"{f.name}: {f.stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
