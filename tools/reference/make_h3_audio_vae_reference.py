#!/usr/bin/env python3
"""Writes tests/data/h3_audio_vae/: MiniMax-H3's audio VAE decoder (minimax_h3.md §F) as diffusers
0.42.1 runs it (`AutoencoderKLMiniMaxH3Audio.decode`, after the pipeline's per-channel
de-normalisation `z * std + mean`, decoders.py MiniMaxH3AudioDecodeStep), for
tests/models/h3_audio_vae_test.cpp.

    tools/reference/.venv/bin/python tools/reference/make_h3_audio_vae_reference.py [--seed N --out DIR]

Two tiny random configurations:
  bigvgan  hop 20: 8 latent channels -> dec_in_proj 24 -> conv_pre 16, rates (5, 2, 2) with
           kernels (9, 4, 4) (the release's odd 9/5 and even 4/2 transposed convolutions), AMP
           kernels (3, 7, 11) with dilations (1, 3, 5) (the release's), channels 16 -> 8 -> 4 -> 2
  dft      diffusers' own test configuration (minimax_h3.md §H.2): hop 4, rates (2, 2), kernels
           (4, 4), AMP kernels (3, 7) with dilations (1, 3)
Weights are random (weight_g / weight_v of every weight-normed convolution, SnakeBeta alpha/beta in
log space, biases) under torch.manual_seed(seed), with scales that keep the waveform mostly inside
[-1, 1] so the clamp does not hide errors. `C.safetensors` is the model's state dict in the release's names and dtype
(f32) with the persistent `filter` buffers: the decoder side whole (dec_in_proj, decoder.*), of the
encoder side only `encoder.block.0.weight_v`, `pre_block.attn.qkv.weight`, `mean_proj.*`,
`logs_proj.*` (what a decoder must ignore; the whole encoder would pass the fixture size limit);
`C.bf16.safetensors` the same weights rounded to bf16 (DiffSynth's files store the convolutions in
bf16). `C.cases.safetensors`:
  mean, std        [channels] the de-normalisation (random: H3's are not 0 and 1)
  latents.A        [2, channels, A] normalised latents (left, right) for A in LENGTHS
  pcm.A            [2, hop * A] the f32 decode, clamped as diffusers returns it
  floor.A          [1] the largest |f32 - f64| of the same decode (model and latents in float64)
  pcm_bf16w.A      [2, hop * A] the decode of the bf16-rounded weights (computed in f32)
  floor_bf16w.A    [1] its f32-vs-f64 floor
and, for bigvgan only, `bigvgan.nf4.safetensors`: DiffSynth's NF4 layout (minimax_h3.md §G.2) —
the bf16 file's tensors with the encoder's attention pre-block Linears (`pre_block.attn.qkv`,
`pre_block.proj`, `pre_block.attn.proj`, `pre_block.mlp.w0/w1/w2`: 8 to 24 wide here, 32 in the
release, so their 64-value blocks straddle rows) quantised by bitsandbytes (nf4, blocksize 64,
double quantisation, as Linear4bit saves them), and in `bigvgan.cases.safetensors`
`nf4.<linear>` [out, in]: bitsandbytes' dequantize_4bit of each (bf16 values as f32; of the
flattened weight, see dequantize_flat).
One thread, deterministic algorithms.
"""

import argparse
import copy
import math
import os

import torch
from safetensors.torch import save_file
import bitsandbytes.functional as bnb
from diffusers import AutoencoderKLMiniMaxH3Audio

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "data", "h3_audio_vae")

CONFIGS = {
    "bigvgan": dict(encoder_dim=4, encoder_rates=(2, 2, 5), latent_dim=24, latent_channels=8,
                    num_attention_heads=2, decoder_dim=16, decoder_rates=(5, 2, 2),
                    decoder_kernel_sizes=(9, 4, 4), resblock_kernel_sizes=(3, 7, 11),
                    resblock_dilation_sizes=((1, 3, 5), (1, 3, 5), (1, 3, 5))),
    "dft": dict(encoder_dim=4, encoder_rates=(2, 2), latent_dim=32, latent_channels=8,
                num_attention_heads=2, decoder_dim=16, decoder_rates=(2, 2),
                decoder_kernel_sizes=(4, 4), resblock_kernel_sizes=(3, 7),
                resblock_dilation_sizes=((1, 3), (1, 3))),
}
IGNORED = ("encoder.block.0.weight_v", "pre_block.attn.qkv.weight")
NF4_LINEARS = ("pre_block.attn.qkv", "pre_block.proj", "pre_block.attn.proj", "pre_block.mlp.w0",
               "pre_block.mlp.w1", "pre_block.mlp.w2")
# Latent lengths: one latent (padding everywhere), a few, and a length no dilation divides.
LENGTHS = (1, 4, 7)


def randomize(model, generator):
    """Random parameters with scales that make every part matter and keep signals O(1)."""
    for name, p in model.named_parameters():
        with torch.no_grad():
            if name.endswith("weight_v"):
                p.copy_(torch.randn(p.shape, generator=generator))
            elif name.endswith("weight_g"):
                # Row norms near 1 keep each convolution's output O(1).
                p.copy_(0.8 + 0.4 * torch.rand(p.shape, generator=generator))
            elif name.endswith(".alpha") or name.endswith(".beta"):
                p.copy_(0.5 * torch.randn(p.shape, generator=generator))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=generator))
            else:
                p.copy_(torch.randn(p.shape, generator=generator) / math.sqrt(max(1, p.shape[-1])))
def dequantize_flat(packed, quant, weight):
    """bitsandbytes' dequantize_4bit of the flattened weight, viewed [out, in]. bitsandbytes
    0.50.2's CPU path dequantises some [out, in] shapes whose 64-value blocks straddle rows with
    another block's scale ([8, 16] and [4, 32] here: up to 0.8 off, 3x its own quantisation error;
    [16, 8] is right); the flat weight is what its quantizer blocked, and what its CUDA kernels
    decode. Checked here against the weight it came from."""
    flat = copy.deepcopy(quant)
    flat.shape = torch.Size([weight.numel()])
    values = bnb.dequantize_4bit(packed, flat).float().view(weight.shape)
    error = (values - weight.float()).abs().max() / weight.float().abs().max()
    assert error < 0.2, f"NF4 dequantisation {error:.3f} off"
    return values


def set_output_scale(model, mean, std, generator):
    """The final convolution (no bias) sets the waveform's scale: std 0.3 before the clamp on a
    probe latent, so most samples stay inside [-1, 1] and the clamp hides few errors."""
    seen = []
    hook = model.decoder.conv_post.register_forward_hook(lambda m, i, o: seen.append(o))
    with torch.no_grad():
        probe = torch.randn(1, mean.numel(), 6, generator=generator)
        decode(model, probe, mean, std)
        model.decoder.conv_post.weight_g.mul_(0.3 / seen[0].std())
    hook.remove()


def decode(model, latents, mean, std):
    z = latents * std.view(1, -1, 1) + mean.view(1, -1, 1)
    return model.decode(z, return_dict=False)[0][:, 0, :]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(args.out, exist_ok=True)

    for index, (name, config) in enumerate(CONFIGS.items()):
        generator = torch.Generator().manual_seed(args.seed + index)
        model = AutoencoderKLMiniMaxH3Audio(**config, sampling_rate=32000).eval()
        randomize(model, generator)
        channels = config["latent_channels"]
        hop = math.prod(config["decoder_rates"])
        mean = 0.3 * torch.randn(channels, generator=generator)
        std = 1.5 + torch.rand(channels, generator=generator)
        set_output_scale(model, mean, std, generator)

        # The decoder's tensors, and two of the encoder side that a decoder must ignore (the
        # release files hold the encoder too; all of it would pass the fixture size limit).
        state = {k: v.detach().contiguous() for k, v in model.state_dict().items()
                 if not k.startswith(("encoder.", "pre_block.")) or k in IGNORED}
        save_file(state, os.path.join(args.out, f"{name}.safetensors"))
        bf16_state = {k: v.to(torch.bfloat16) for k, v in state.items()}
        save_file(bf16_state, os.path.join(args.out, f"{name}.bf16.safetensors"))
        model_bf16w = AutoencoderKLMiniMaxH3Audio(**config, sampling_rate=32000).eval()
        missing = model_bf16w.load_state_dict({k: v.float() for k, v in bf16_state.items()},
                                             strict=False).missing_keys
        assert not [k for k in missing if k.startswith(("decoder.", "dec_in_proj."))], missing

        cases = {"mean": mean, "std": std}
        with torch.no_grad():
            for length in LENGTHS:
                latents = torch.randn(2, channels, length, generator=generator)
                cases[f"latents.{length}"] = latents
                for suffix, m in (("", model), ("_bf16w", model_bf16w)):
                    pcm = decode(m, latents, mean, std)
                    pcm64 = decode(m.double(), latents.double(), mean.double(), std.double())
                    m.float()
                    floor = (pcm.double() - pcm64).abs().max().item()
                    assert pcm.shape == (2, hop * length)
                    cases[f"pcm{suffix}.{length}"] = pcm.contiguous()
                    cases[f"floor{suffix}.{length}"] = torch.tensor([floor], dtype=torch.float32)
                    clamped = (pcm.abs() >= 1).float().mean().item()
                    print(f"{name} A={length}{suffix}: pcm std {pcm.std():.3f}, "
                          f"{clamped:.0%} clamped, f32 floor {floor:.3g}")
        if name == "bigvgan":
            nf4_state = dict(bf16_state)
            full = {k: v.detach() for k, v in model.state_dict().items()}
            for linear in NF4_LINEARS:
                weight = full[linear + ".weight"].to(torch.bfloat16)
                packed, quant = bnb.quantize_4bit(weight, blocksize=64, quant_type="nf4",
                                                  compress_statistics=True)
                nf4_state.pop(linear + ".weight", None)
                nf4_state[linear + ".weight"] = packed
                for key, value in quant.as_dict(packed=True).items():
                    nf4_state[f"{linear}.weight.{key}"] = value
                cases[f"nf4.{linear}"] = dequantize_flat(packed, quant, weight)
            save_file({k: v.contiguous() for k, v in nf4_state.items()},
                      os.path.join(args.out, f"{name}.nf4.safetensors"))
        save_file({k: v.contiguous() for k, v in cases.items()},
                  os.path.join(args.out, f"{name}.cases.safetensors"))


if __name__ == "__main__":
    main()
