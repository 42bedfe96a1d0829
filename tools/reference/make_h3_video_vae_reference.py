#!/usr/bin/env python3
"""Writes tests/data/h3_video_vae/: tiny MiniMax-H3 video VAEs with random weights in the key
layouts H3's video VAE files use, and the outputs of diffusers 0.42.1's AutoencoderKLMiniMaxH3 that
tests/models/h3_video_vae_test.cpp compares Ferry with.

    /work/main/tools/reference/.venv/bin/python tools/reference/make_h3_video_vae_reference.py

(any venv with torch and diffusers 0.42.1; minimax_h3.md §E, §G, §H.2). Two configurations, both
with the release's temporal geometry (clip 17, token drop 3, x4 in time) and spatial x4:
  tiny  diffusers' own test configuration (§H.2): encoder levels (8, 16), 1 resnet each, 4 latent
        channels, ViT decoder of 2 blocks, 2 heads of 8 (6 dims rotate: 1 frequency per axis), 2
        registers, SwiGLU x2. Every tensor f32 (the release's dtype), diffusers' names.
  wide  decoder only (no encoder tensors: the fixtures stay small): 8 latent channels, 2 blocks of
        2 heads of 32 (24 dims rotate: 4 frequencies per axis), 4 registers, SwiGLU x2; every
        Linear's input a multiple of 64, so DiffSynth's NF4 blocks never straddle rows. Weights
        rounded to bf16 (exactly representable in f16 too), so the bf16, f16 and f32 files hold
        the same values; written as diffusers' names (bf16), the official names (Comfy-Org's f16
        file: fused to_qkv with per-head interleaved rows [heads][q,k,v][D], ff.w1 [gate; value])
        and DiffSynth's NF4 file (official names, register_tokens/scale1/scale2 with ".weight",
        decoder Linears but x_embedder bitsandbytes NF4, the rest bf16), whose own reference is
        computed with the dequantised weights.
Weights: normal draws under torch.manual_seed(SEED): Linear std 1/sqrt(in) (biases 0.1 N(0,1)),
norm weights 1 + 0.2 N(0,1), register tokens N(0,1), scale1/scale2 0.5 + 0.2 N(0,1) (diffusers
initialises them to 0, which would make the blocks identities), convolutions std 1/sqrt(fan in),
group norms 1 + 0.2 N(0,1) / 0.1 N(0,1). Latent statistics: mean 0.5 N(0,1), std 0.5 + U(0,1) per
channel (the release's are in minimax_h3.md §E.1; the test passes these).

reference.safetensors (f32 unless said):
  C.latents_mean, C.latents_std [channels]
  C.decode.N.latent  [ch, T', h, w] normalised latents (what the DiT hands over), N chunks,
                     T' = 5N + 2
  C.decode.N.pixels  [3, 17N + 5, 4h, 4w]: (decode(z·std + mean) · imagenet_std + imagenet_mean),
                     NOT clamped (the pipeline clamps to [0, 1] after)
  tiny: N = 1, 2 at latent 2x3 (N = 3 in three_chunks.safetensors); wide (in
  wide_reference.safetensors): N = 2 at latent 3x2, and
  wide.decode.nf4.2.pixels (the NF4 file's weights dequantised as bitsandbytes does, to bf16) and
  wide.decode.nf4f32.2.pixels (the same weights unrounded, code · scale in f32, as Ferry's
  Backend::linear dequantises them)
  tiny.encode.image  [3, 1, 16, 20] uint8 values (as f32); tiny.encode.moments [8, 1, 4, 5]:
                     quant_conv(encoder((image/255 - imagenet_mean) / imagenet_std)) (mean:
                     channels 0-3, logvar: 4-7); tiny.encode.noise [4, 1, 4, 5] N(0,1);
                     tiny.encode.latent: DF encode_vae_condition's latent with that noise ((mean +
                     exp(logvar/2)·noise) rounded to f16, then (z - latents_mean) / latents_std)
  tiles.L            I32 [2, n]: _split_tiles(L, 256, 64) at x16 (row 0 starts, row 1 overlaps,
                     padded with -1) for the release's widths
  tiny.encode_tiled.image [3, 1, 24, 36], tiny.encode_tiled.moments [8, 1, 6, 9]: the same encode
                     with enable_tiling(16, 16, 4, 4) (2 x 3 tiles of 16 px, latent overlaps 2 and
                     [2, 1], blended in latent space)
tiled.safetensors: tiny.tiled.latent [4, 7, 5, 8], tiny.tiled.pixels [3, 22, 20, 32]: one chunk
  decoded with enable_tiling(16, 16, 4, 4) (pixel tiles of 16 = 4 latent positions: 2 x 3 tiles,
  overlaps 12 and [8, 8]).
Fixed seeds, one thread, deterministic algorithms.
"""

import os
import sys
import types

import numpy as np
import torch
from diffusers import AutoencoderKLMiniMaxH3
from safetensors.torch import save_file as save_torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_bnb4_reference as bnb4  # noqa: E402

SEED = 20261202
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "data", "h3_video_vae")
IMAGENET_MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1, 1)
IMAGENET_STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1, 1)
COMMON = dict(in_channels=3, out_channels=3, spatial_downsample_factors=(2, 2),
              temporal_downsample_factors=(2, 2), clip_length=17, token_drop=3)
CONFIGS = {
    "tiny": dict(latent_channels=4, block_out_channels=(8, 16), layers_per_block=1,
                 norm_num_groups=8, decoder_num_layers=2, decoder_num_attention_heads=2,
                 decoder_attention_head_dim=8, decoder_num_register_tokens=2, decoder_ffn_mult=2),
    "wide": dict(latent_channels=8, block_out_channels=(8, 16), layers_per_block=1,
                 norm_num_groups=8, decoder_num_layers=2, decoder_num_attention_heads=2,
                 decoder_attention_head_dim=32, decoder_num_register_tokens=4,
                 decoder_ffn_mult=2),
}
RELEASE_WIDTHS = (256, 272, 320, 480, 512, 768, 832, 1344)


def build_model(c, round_bf16):
    torch.manual_seed(SEED)
    channels = c["latent_channels"]
    mean = 0.5 * torch.randn(channels)
    std = 0.5 + torch.rand(channels)
    model = AutoencoderKLMiniMaxH3(**COMMON, **c, latents_mean=tuple(mean.tolist()),
                                   latents_std=tuple(std.tolist())).eval()
    with torch.no_grad():
        for name, module in model.named_modules():
            if isinstance(module, torch.nn.Linear):
                module.weight.normal_(0.0, 1.0 / np.sqrt(module.in_features))
                if module.bias is not None:
                    module.bias.normal_(0.0, 0.1)
            elif isinstance(module, torch.nn.Conv3d):
                fan_in = module.weight[0].numel()
                module.weight.normal_(0.0, 1.0 / np.sqrt(fan_in))
                module.bias.normal_(0.0, 0.1)
            elif isinstance(module, (torch.nn.GroupNorm, torch.nn.LayerNorm)):
                module.weight.copy_(1.0 + 0.2 * torch.randn_like(module.weight))
                module.bias.copy_(0.1 * torch.randn_like(module.bias))
            elif isinstance(module, torch.nn.RMSNorm) and module.weight is not None:
                module.weight.copy_(1.0 + 0.2 * torch.randn_like(module.weight))
        decoder = model.decoder
        decoder.register_tokens.normal_(0.0, 1.0)
        for block in decoder.transformer_blocks:
            block.scale1.copy_(0.5 + 0.2 * torch.randn_like(block.scale1))
            block.scale2.copy_(0.5 + 0.2 * torch.randn_like(block.scale2))
        if round_bf16:
            for p in model.parameters():
                # Below f16's normal range a bf16 value may not survive f16: flush those to 0.
                rounded = p.to(torch.bfloat16).to(torch.float32)
                p.copy_(torch.where(rounded.abs() < 2.0 ** -14, 0.0, rounded))
    return model


def decoder_state(model):
    """The decoder half's state dict (diffusers' names)."""
    return {k: v.detach().clone() for k, v in model.state_dict().items()
            if k.startswith(("decoder.", "post_quant_conv."))}


def official_state(state, c):
    """The official / DiffSynth names of a diffusers decoder state (minimax_h3.md §G.1, §E.3)."""
    heads, hd = c["decoder_num_attention_heads"], c["decoder_attention_head_dim"]
    out = {}
    for name, v in state.items():
        if name.startswith("decoder.proj_in."):
            out[name.replace("decoder.proj_in.", "decoder.x_embedder.")] = v
        elif ".attn.to_q." in name:
            kind = name.rsplit(".", 1)[1]
            q = v
            k = state[name.replace("to_q", "to_k")]
            w = state[name.replace("to_q", "to_v")]
            parts = [x.reshape(heads, 1, hd, -1) for x in (q, k, w)]
            fused = torch.cat(parts, dim=1).reshape(3 * heads * hd, -1)
            if kind == "bias":
                fused = fused.reshape(-1)
            out[name.replace("attn.to_q." + kind, "attn.to_qkv." + kind)] = fused
        elif ".attn.to_k." in name or ".attn.to_v." in name:
            continue
        elif ".attn.to_out.0." in name:
            out[name.replace("attn.to_out.0.", "attn.to_out.")] = v
        elif ".ff.net.0.proj." in name:
            value, gate = v.chunk(2, dim=0)
            out[name.replace("ff.net.0.proj.", "ff.w1.")] = torch.cat([gate, value], dim=0)
        elif ".ff.net.2." in name:
            out[name.replace("ff.net.2.", "ff.w2.")] = v
        else:
            out[name] = v
    return out


def diffsynth_names(official):
    return {(k + ".weight" if k.endswith(("register_tokens", "scale1", "scale2")) else k): v
            for k, v in official.items()}


def diffusers_from_official(official, c):
    heads, hd = c["decoder_num_attention_heads"], c["decoder_attention_head_dim"]
    out = {}
    for name, v in official.items():
        if name.startswith("decoder.x_embedder."):
            out[name.replace("decoder.x_embedder.", "decoder.proj_in.")] = v
        elif ".attn.to_qkv." in name:
            kind = name.rsplit(".", 1)[1]
            rows = v.reshape(heads, 3, hd, -1)
            for i, n in enumerate("qkv"):
                x = rows[:, i].reshape(heads * hd, -1)
                out[name.replace("attn.to_qkv." + kind, f"attn.to_{n}.{kind}")] = (
                    x.reshape(-1) if kind == "bias" else x)
        elif ".attn.to_out." in name:
            out[name.replace("attn.to_out.", "attn.to_out.0.")] = v
        elif ".ff.w1." in name:
            gate, value = v.chunk(2, dim=0)
            out[name.replace("ff.w1.", "ff.net.0.proj.")] = torch.cat([value, gate], dim=0)
        elif ".ff.w2." in name:
            out[name.replace("ff.w2.", "ff.net.2.")] = v
        else:
            out[name] = v
    return out


def nf4_file(official):
    """(DiffSynth's NF4 tensors, the dequantised official state as bitsandbytes gives it (bf16),
    the same unrounded (f32: code · scale))."""
    tensors, meant, exact = {}, {}, {}
    for name, v in official.items():
        quantize = (name.endswith(".weight") and v.dim() == 2 and name.startswith("decoder.")
                    and "x_embedder" not in name)
        if quantize:
            parts, state = bnb4.quantize_4bit(v.float().numpy(), "nf4")
            for suffix, array in parts.items():
                tensors[name[: -len("weight")] + suffix] = torch.from_numpy(np.array(array))
            tensors[name + ".quant_state.bitsandbytes__nf4"] = torch.from_numpy(
                bnb4.state_bytes(state))
            exact[name] = dequantize_nf4(parts, state)
            meant[name] = exact[name].to(torch.bfloat16).to(torch.float32)
        else:
            tensors[name] = v.to(torch.bfloat16).contiguous()
            meant[name] = exact[name] = v.to(torch.bfloat16).float()
    return diffsynth_names(tensors), meant, exact


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
    return torch.from_numpy(values.astype(np.float32).reshape(state["shape"]))


def decode_pixels(model, latent):
    """The pipeline's decode (DF decoders.py): de-normalise, decode, ImageNet de-normalise."""
    mean = torch.tensor(model.config.latents_mean).view(1, -1, 1, 1, 1)
    std = torch.tensor(model.config.latents_std).view(1, -1, 1, 1, 1)
    with torch.no_grad():
        video = model.decode(latent[None] * std + mean, return_dict=False)[0]
    return (video.float() * IMAGENET_STD + IMAGENET_MEAN)[0]


def contiguous(d):
    return {k: v.contiguous() for k, v in d.items()}


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(OUT, exist_ok=True)
    ref, tiled, three, wide_ref = {}, {}, {}, {}
    gen = torch.Generator().manual_seed(SEED + 1)

    # ---- tiny: f32, diffusers names, encoder and decoder ----
    c = CONFIGS["tiny"]
    tiny = build_model(c, round_bf16=False)
    save_torch(contiguous(tiny.state_dict()), os.path.join(OUT, "tiny.safetensors"))
    ref["tiny.latents_mean"] = torch.tensor(tiny.config.latents_mean)
    ref["tiny.latents_std"] = torch.tensor(tiny.config.latents_std)
    for n in (1, 2, 3):
        latent = torch.randn(4, 5 * n + 2, 2, 3, generator=gen)
        out = three if n == 3 else ref  # files stay under 200 KB
        out[f"tiny.decode.{n}.latent"] = latent
        out[f"tiny.decode.{n}.pixels"] = decode_pixels(tiny, latent)
    image = torch.randint(0, 256, (3, 1, 16, 20), generator=gen).to(torch.float32)
    with torch.no_grad():
        tiny.use_tiling = False  # 16 px: one tile either way
        pixels = (image[None] / 255.0 - IMAGENET_MEAN) / IMAGENET_STD
        moments = tiny.quant_conv(tiny.encoder(pixels))
        tiny.use_tiling = True
        posterior = tiny.encode(pixels).latent_dist
    assert torch.equal(posterior.mean, moments[:, :4])
    noise = torch.randn(posterior.mean.shape, generator=gen)
    sample = posterior.mean + posterior.std * noise  # DiagonalGaussianDistribution.sample
    mean = torch.tensor(tiny.config.latents_mean).view(1, -1, 1, 1, 1)
    std = torch.tensor(tiny.config.latents_std).view(1, -1, 1, 1, 1)
    ref["tiny.encode.image"] = image
    ref["tiny.encode.moments"] = moments[0]
    ref["tiny.encode.noise"] = noise[0]
    ref["tiny.encode.latent"] = ((sample.to(torch.float16).float() - mean) / std)[0]
    tiny.enable_tiling(16, 16, 4, 4)
    image = torch.randint(0, 256, (3, 1, 24, 36), generator=gen).to(torch.float32)
    with torch.no_grad():
        pixels = (image[None] / 255.0 - IMAGENET_MEAN) / IMAGENET_STD
        ref["tiny.encode_tiled.moments"] = tiny._encode(pixels)[0]
    ref["tiny.encode_tiled.image"] = image
    latent = torch.randn(4, 7, 5, 8, generator=gen)
    tiled["tiny.tiled.latent"] = latent
    tiled["tiny.tiled.pixels"] = decode_pixels(tiny, latent)

    # ---- wide: decoder only, bf16-exact values in three layouts ----
    c = CONFIGS["wide"]
    wide = build_model(c, round_bf16=True)
    state = decoder_state(wide)
    official = official_state(state, c)
    save_torch(contiguous({k: v.to(torch.bfloat16) for k, v in state.items()}),
               os.path.join(OUT, "wide_bf16.safetensors"))
    save_torch(contiguous({k: v.to(torch.float16) for k, v in official.items()}),
               os.path.join(OUT, "wide_official_f16.safetensors"))
    for k, v in official.items():  # bf16 values must survive f16 exactly
        assert torch.equal(v.to(torch.float16).float(), v), k
    nf4_tensors, meant, exact = nf4_file(official)
    save_torch(contiguous(nf4_tensors), os.path.join(OUT, "wide_nf4.safetensors"),
               metadata={"format": "pt"})
    ref["wide.latents_mean"] = torch.tensor(wide.config.latents_mean)
    ref["wide.latents_std"] = torch.tensor(wide.config.latents_std)
    latent = torch.randn(8, 12, 3, 2, generator=gen)
    wide_ref["wide.decode.2.latent"] = latent
    wide_ref["wide.decode.2.pixels"] = decode_pixels(wide, latent)
    nf4 = build_model(c, round_bf16=True)
    missing = nf4.load_state_dict(diffusers_from_official(meant, c), strict=False)
    assert not missing.unexpected_keys, missing.unexpected_keys
    assert all(not k.startswith("decoder.") for k in missing.missing_keys), missing.missing_keys
    wide_ref["wide.decode.nf4.2.pixels"] = decode_pixels(nf4, latent)
    missing = nf4.load_state_dict(diffusers_from_official(exact, c), strict=False)
    wide_ref["wide.decode.nf4f32.2.pixels"] = decode_pixels(nf4, latent)

    # ---- tile geometry at the release's x16 ----
    geometry = types.SimpleNamespace(spatial_compression_ratio=16)
    for length in RELEASE_WIDTHS:
        starts, _, overlaps = AutoencoderKLMiniMaxH3._split_tiles(geometry, length, 256, 64)
        row = np.full((2, len(starts)), -1, np.int32)
        row[0] = starts
        row[1, : len(overlaps)] = overlaps
        ref[f"tiles.{length}"] = torch.from_numpy(row)

    save_torch(contiguous(ref), os.path.join(OUT, "reference.safetensors"))
    save_torch(contiguous(tiled), os.path.join(OUT, "tiled.safetensors"))
    save_torch(contiguous(three), os.path.join(OUT, "three_chunks.safetensors"))
    save_torch(contiguous(wide_ref), os.path.join(OUT, "wide_reference.safetensors"))
    for f in sorted(os.listdir(OUT)):
        print(f, os.path.getsize(os.path.join(OUT, f)))
    for k in sorted(ref):
        v = ref[k].float()
        print(k, tuple(v.shape), f"rms {v.pow(2).mean().sqrt():.4f} max {v.abs().max():.4f}")


if __name__ == "__main__":
    main()
