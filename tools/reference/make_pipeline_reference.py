#!/usr/bin/env python3
"""Writes tests/data/pipeline/: the official Wan 2.2 TI2V pipeline run end to end on Ferry's
built-in demo model set (core/pipeline/demo_model.h), for tests/pipeline/pipeline_parity_test.cpp.

    FERRY_DATA_DIR=/tmp/x build/<dir>/cli/ferry-cli demo --width 64 --height 64 --frames 5 \\
        --steps 1 --out /tmp/x/d.mp4                      # writes /tmp/x/demo-model/
    tools/reference/.venv/bin/python tools/reference/make_pipeline_reference.py /tmp/x/demo-model

The demo folder is Ferry's (the three single files write_demo_model writes); the script first
checks each file's data section against the content hash tests/models/wan_demo_model_test.cpp pins
(FNV-1a 64), so the reference is made from exactly the bytes the test writes.

The pipeline, piece by piece as the official code runs it (wan22 textimage2video.py `t2v`/`i2v`):
  text     Wan's cleaning (ftfy.fix_text, html.unescape twice, whitespace; wan.md §A.1), the
           SentencePiece model embedded in the text-encoder file (`spiece_model`), EOS appended,
           at most 512 ids; transformers' UMT5EncoderModel (the architecture of wan.md §A.2) with
           the file's weights, run in bf16 (the official t5_dtype) on the real tokens only
           (§A.4: the model pads the context to 512 rows with zeros). Prompt and the official
           default negative prompt (wan.configs.shared_config) separately, batch 1 each.
  image    image-to-video only: a fixed 64×64 RGB image stored here as raw pixels, already at the
           target size (so the official LANCZOS resize and centre crop are the identity and
           Ferry's FFmpeg resize, a known deviation, is out of the comparison; the test checks
           that Ferry's resize leaves it unchanged), to [-1, 1] as TF.to_tensor(...).sub_(0.5)
           .div_(0.5), encoded by the official WanVAE_ (vae2_2.py) in fp32 to z0 [48, 1, 4, 4].
  denoise  the official WanModel (TI2V configuration of the demo: dim 256, ffn 512, 2 heads,
           2 layers, text_dim 64, in/out 48, qk_norm, cross_attn_norm, eps 1e-6) run as
           make_dit_reference.py runs it on a CPU (bf16 SDPA for flash_attention, CPU autocast
           bf16 with the official fp32 regions redirected); the official
           FlowUniPCMultistepScheduler (3 steps, shift 5), guide scale 5; TI2V image-to-video as
           in textimage2video.py `i2v` (masks_like(zero=True), z0 blended into frame 0 before the
           loop and after every step, per-token timesteps 0 on frame 0).
  decode   the official WanVAE_ decode in fp32 with the Wan 2.2 latent mean/std, clamped to
           [-1, 1]; frames to uint8 as utils.save_video does ((x + 1) / 2 · 255, truncated).

Writes tests/data/pipeline/reference.safetensors:
  t2v.noise, i2v.noise         F32 [48, 2, 4, 4]   the injected initial noise (before any blend)
  image                        U8 [64, 64, 3]      the start image, RGB rows top to bottom
  z0                           F32 [48, 1, 4, 4]   its official VAE encode
  prompt, negative_prompt      U8                  UTF-8 text (the official default negative)
  prompt.ids, negative_prompt.ids   I32            the official token ids
  prompt.context, negative_prompt.context   F32 [L, 64]   the umT5 output (bf16 values), L ids
  <case>.latent                F32 [48, 2, 4, 4]   the final latent (before the decode)
  <case>.pixels                F32 [3, 5, 64, 64]  the decode, clamped to [-1, 1]
  <case>.frames                U8 [5, 64, 64, 3]   the official uint8 frames
  <case>.floor                 F32 [2, 4]          the floor (run_case): how far the reference's
                               own latent and pixels move (latent max |Δ|, latent RMS Δ, pixels
                               max |Δ|, pixels RMS Δ) when row 0: its initial noise is perturbed
                               by ±1e-6; row 1: its umT5 runs in f32 — what the test's bounds are
                               sized against
with <case> = t2v (text-to-video) and i2v (image-to-video). Metadata: one key, "source".
Deterministic (fixed seeds, one thread): a rerun writes the same bytes.

With --ferry DIR the script writes nothing: it runs the official DiT and sampler from Ferry's own
text embeddings and compares the final latents with Ferry's, both as pipeline_parity_test wrote
them with FERRY_PARITY_DUMP=DIR (separating the text stage's drift from the rest).
"""

import argparse
import html
import os
import re
import sys

import ftfy
import numpy as np
import sentencepiece as spm
import torch
from safetensors import safe_open
from safetensors.numpy import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_dit_reference as dit  # noqa: E402  (patches autocast and flash_attention on import)
from make_sampler_reference import official_scheduler, official_utils  # noqa: E402
from make_vae_reference import scale_of  # noqa: E402
from wan_reference import wan_module  # noqa: E402

ROOT = dit.ROOT
OUT = os.path.join(ROOT, "tests", "data", "pipeline")
DEMO_TEST = os.path.join(ROOT, "tests", "models", "wan_demo_model_test.cpp")
FILES = ["umt5_demo.safetensors", "wan2.2_ti2v_demo.safetensors", "wan2.2_vae_demo.safetensors"]

SEED = 20261202
PROMPT = "A small ferry crossing a calm fjord at dawn, mist over the water, mountains behind"
WIDTH, HEIGHT, FRAMES = 64, 64, 5
LATENT = (48, (FRAMES - 1) // 4 + 1, HEIGHT // 16, WIDTH // 16)
STEPS, SHIFT, GUIDE = 3, 5.0, 5.0
TEXT_LEN, EOS_ID = 512, 1
# The demo's configuration (core/pipeline/demo_model.h DemoModel).
UMT5 = dict(vocab_size=1280, d_model=64, d_kv=16, d_ff=96, num_layers=2, num_heads=4)
DIT = dict(dim=256, ffn_dim=512, num_heads=2, num_layers=2, text_dim=64, freq_dim=256, in_out=48)
VAE_DIM, VAE_DEC_DIM = 8, 8
PERTURBATION = 1e-6
FLOOR_RUNS = 4


# ---- the demo files ----------------------------------------------------------------------------

def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def pinned_hashes():
    with open(DEMO_TEST, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"kContentHashes\[\]\s*=\s*\{([^}]*)\}", text)
    hashes = re.findall(r'"([0-9a-f]{16})"', m.group(1))
    assert len(hashes) == len(FILES), hashes
    return hashes


def check_demo(folder):
    for name, want in zip(FILES, pinned_hashes()):
        with open(os.path.join(folder, name), "rb") as f:
            raw = f.read()
        header = int.from_bytes(raw[:8], "little")
        got = f"{fnv1a64(raw[8 + header:]):016x}"
        if got != want:
            sys.exit(f"{name}: content hash {got}, wan_demo_model_test.cpp pins {want}: not the demo "
                     f"this checkout writes")
    print("demo files match the pinned content hashes")


def load(folder, name, dtype=torch.float32):
    out = {}
    with safe_open(os.path.join(folder, name), framework="pt") as f:
        for k in f.keys():
            t = f.get_tensor(k)
            out[k] = t if t.dtype == torch.uint8 else t.to(dtype)
    return out


# ---- text --------------------------------------------------------------------------------------

def wan_clean(text):
    """Wan's HuggingfaceTokenizer._clean, mode 'whitespace' (wan.md §A.1)."""
    text = ftfy.fix_text(text)
    text = html.unescape(html.unescape(text)).strip()
    return re.sub(r"\s+", " ", text).strip()


def tokenize(sp, text):
    ids = sp.encode(wan_clean(text), out_type=int)
    return ids[: TEXT_LEN - 1] + [EOS_ID]


def text_encoder(state, dtype=torch.bfloat16):
    from transformers import UMT5Config, UMT5EncoderModel
    config = UMT5Config(
        **UMT5, relative_attention_num_buckets=32, relative_attention_max_distance=128,
        feed_forward_proj="gated-gelu", layer_norm_epsilon=1e-6, dropout_rate=0.0,
        tie_word_embeddings=False, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    model = UMT5EncoderModel(config).eval()
    weights = {k: v for k, v in state.items() if k != "spiece_model"}
    weights["encoder.embed_tokens.weight"] = weights["shared.weight"]
    model.load_state_dict(weights, strict=True)
    return model.to(dtype)


def encode_text(model, ids):
    with torch.no_grad():
        x = torch.tensor([ids], dtype=torch.long)
        return model(input_ids=x, attention_mask=torch.ones_like(x)).last_hidden_state[0]


# ---- DiT and VAE -------------------------------------------------------------------------------

def wan_dit(state):
    model = dit.model_module.WanModel(
        model_type="ti2v", patch_size=(1, 2, 2), text_len=TEXT_LEN, in_dim=DIT["in_out"],
        dim=DIT["dim"], ffn_dim=DIT["ffn_dim"], freq_dim=DIT["freq_dim"],
        text_dim=DIT["text_dim"], out_dim=DIT["in_out"], num_heads=DIT["num_heads"],
        num_layers=DIT["num_layers"], qk_norm=True, cross_attn_norm=True, eps=1e-6).eval()
    model.load_state_dict(state, strict=True)  # fp32 parameters holding the file's bf16 values
    return model


def wan_vae(state):
    vae = wan_module("wan.modules.vae2_2")
    model = vae.WanVAE_(dim=VAE_DIM, dec_dim=VAE_DEC_DIM, z_dim=48, dim_mult=[1, 2, 4, 4],
                        num_res_blocks=2, attn_scales=[], temperal_downsample=[False, True, True],
                        dropout=0.0).eval().requires_grad_(False)
    model.load_state_dict(state, strict=True)
    return model, scale_of(vae, 48)


def denoise(model, noise, contexts, z0=None):
    """textimage2video.py `t2v` (z0 None) / `i2v`: the final latent."""
    utils = official_utils()
    scheduler = official_scheduler(STEPS, SHIFT)
    c, f, h, w = noise.shape
    seq_len = f * (h // 2) * (w // 2)
    _, mask2 = utils.masks_like([noise], zero=z0 is not None)
    latent = noise
    if z0 is not None:
        latent = (1. - mask2[0]) * z0 + mask2[0] * latent
    for t in scheduler.timesteps:
        timestep = torch.stack([t])
        temp_ts = (mask2[0][0][:, ::2, ::2] * timestep).flatten()
        temp_ts = torch.cat([temp_ts, temp_ts.new_ones(seq_len - temp_ts.size(0)) * timestep])
        v_cond = dit.forward(model, latent, temp_ts, contexts[0])
        v_uncond = dit.forward(model, latent, temp_ts, contexts[1])
        v = v_uncond + GUIDE * (v_cond - v_uncond)
        assert v.dtype == torch.float32 and torch.isfinite(v).all()
        latent = scheduler.step(v.unsqueeze(0), t, latent.unsqueeze(0),
                                return_dict=False)[0].squeeze(0)
        if z0 is not None:
            latent = (1. - mask2[0]) * z0 + mask2[0] * latent
    return latent.contiguous()


def decode(vae, scale, latent):
    with torch.no_grad():
        return vae.decode(latent.unsqueeze(0), scale).float().clamp_(-1, 1).squeeze(0)


def to_uint8(pixels):
    """utils.save_video: clamp to [-1, 1], normalise to [0, 1], ×255, truncated; [F, H, W, 3]."""
    x = pixels.clamp(-1, 1)
    x = (x - (-1)) / (1 - (-1))
    return (x * 255).type(torch.uint8).permute(1, 2, 3, 0).contiguous()


def start_image():
    """A smooth 64×64 picture (gradients, a disc, a bar): what the VAE encodes meaningfully."""
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float64)
    r = 40 + 170 * x / (WIDTH - 1)
    g = 60 + 150 * y / (HEIGHT - 1)
    b = 200 - 120 * (x + y) / (WIDTH + HEIGHT - 2)
    disc = (x - 22) ** 2 + (y - 38) ** 2 < 12 ** 2
    r[disc], g[disc], b[disc] = 235, 210, 60
    bar = (y >= 10) & (y < 16) & (x >= 30) & (x < 58)
    r[bar], g[bar], b[bar] = 20, 30, 40
    return np.stack([r, g, b], axis=-1).round().astype(np.uint8)


def distance(a, b):
    d = a - b
    return torch.stack([d.abs().max(), d.pow(2).mean().sqrt()])


def run_case(models, noise, contexts, z0=None):
    """The final latent, the pixels, and the floor [2, 4]: how far the reference's own final
    latent and pixels move (max |Δ|, RMS Δ of each) under
      row 0  its initial noise perturbed by ±1e-6 (random signs; the worst of FLOOR_RUNS tries)
      row 1  the umT5 run in f32 instead of bf16 (the same f16 weights): a text-stage drift of
             the size Ferry's bf16 encoder has (tests/models/umt5_encoder_test.cpp: as close to
             the f32 run as PyTorch's bf16 run is)
    bf16 roundings that flip under either are multiplied by the guidance (×5) and carried through
    the steps, so both are far above their causes."""
    latent = denoise(models["dit"], noise, contexts, z0)
    pixels = decode(models["vae"], models["scale"], latent)

    def moved(new_latent):
        new_pixels = decode(models["vae"], models["scale"], new_latent)
        return torch.cat([distance(new_latent, latent), distance(new_pixels, pixels)])

    gen = torch.Generator().manual_seed(SEED + 1)
    floor = torch.zeros(2, 4)
    for _ in range(FLOOR_RUNS):
        sign = torch.randint(0, 2, noise.shape, generator=gen).float() * 2 - 1
        d = moved(denoise(models["dit"], noise + PERTURBATION * sign, contexts, z0))
        floor[0] = torch.maximum(floor[0], d)
    floor[1] = moved(denoise(models["dit"], noise, models["f32_contexts"], z0))
    return latent, pixels, floor


def check_ferry(folder, dump):
    """--ferry: the official DiT and sampler run from Ferry's own text embeddings, against Ferry's
    final latents (both written by pipeline_parity_test with FERRY_PARITY_DUMP=dump): what is left
    once the text stage's drift is taken out. Writes nothing."""
    from safetensors.numpy import load_file
    ref = load_file(os.path.join(OUT, "reference.safetensors"))
    read = lambda name: torch.from_numpy(np.fromfile(os.path.join(dump, name), dtype=np.float32))
    contexts = tuple(read(f"{n}.context.f32").reshape(-1, DIT["text_dim"]).to(torch.bfloat16)
                     for n in ("prompt", "negative_prompt"))
    model = wan_dit(load(folder, FILES[1]))
    for case, z0 in (("t2v", None), ("i2v", torch.from_numpy(ref["z0"]))):
        official = denoise(model, torch.from_numpy(ref[f"{case}.noise"]), contexts, z0)
        ferry = read(f"{case}.latent.f32").reshape(official.shape)
        d = distance(ferry, official)
        print(f"{case}: Ferry against the official DiT and sampler from Ferry's text embeddings: "
              f"max {d[0]:.3g} rms {d[1]:.3g}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("demo_folder", help="the folder ferry-cli demo wrote (demo-model/)")
    parser.add_argument("--ferry", metavar="DIR",
                        help="compare with what pipeline_parity_test wrote to DIR "
                             "(FERRY_PARITY_DUMP=DIR) instead of writing the reference")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    check_demo(args.demo_folder)
    if args.ferry:
        check_ferry(args.demo_folder, args.ferry)
        return

    text_state = load(args.demo_folder, FILES[0])
    sp = spm.SentencePieceProcessor(model_proto=text_state["spiece_model"].numpy().tobytes())
    negative = wan_module("wan.configs.shared_config").wan_shared_cfg.sample_neg_prompt
    umt5 = text_encoder(text_state)
    ids = {"prompt": tokenize(sp, PROMPT), "negative_prompt": tokenize(sp, negative)}
    contexts = (encode_text(umt5, ids["prompt"]), encode_text(umt5, ids["negative_prompt"]))
    assert all(c.dtype == torch.bfloat16 for c in contexts)
    umt5_f32 = text_encoder(text_state, torch.float32)
    f32_contexts = tuple(encode_text(umt5_f32, ids[k]).to(torch.bfloat16)
                         for k in ("prompt", "negative_prompt"))

    vae, scale = wan_vae(load(args.demo_folder, FILES[2]))
    models = {"dit": wan_dit(load(args.demo_folder, FILES[1])), "vae": vae, "scale": scale,
              "f32_contexts": f32_contexts}

    gen = torch.Generator().manual_seed(SEED)
    noise = {"t2v": torch.randn(LATENT, generator=gen), "i2v": torch.randn(LATENT, generator=gen)}
    image = start_image()
    img = torch.from_numpy(image).permute(2, 0, 1).float().div(255)  # TF.to_tensor
    img = img.sub_(0.5).div_(0.5).unsqueeze(1)  # [3, 1, H, W]
    with torch.no_grad():
        z0 = vae.encode(img.unsqueeze(0), scale).float().squeeze(0).contiguous()

    out = {
        "t2v.noise": noise["t2v"].numpy(),
        "i2v.noise": noise["i2v"].numpy(),
        "image": image,
        "z0": z0.numpy(),
        "prompt": np.frombuffer(PROMPT.encode("utf-8"), dtype=np.uint8),
        "negative_prompt": np.frombuffer(negative.encode("utf-8"), dtype=np.uint8),
        "prompt.ids": np.asarray(ids["prompt"], dtype=np.int32),
        "negative_prompt.ids": np.asarray(ids["negative_prompt"], dtype=np.int32),
        "prompt.context": contexts[0].float().numpy(),
        "negative_prompt.context": contexts[1].float().numpy(),
    }
    for case, z in (("t2v", None), ("i2v", z0)):
        latent, pixels, floor = run_case(models, noise[case], contexts, z)
        if z is not None:
            assert torch.equal(latent[:, :1], z0)
        out[f"{case}.latent"] = latent.numpy()
        out[f"{case}.pixels"] = pixels.contiguous().numpy()
        out[f"{case}.frames"] = to_uint8(pixels).numpy()
        out[f"{case}.floor"] = floor.numpy()
        inside = (pixels.abs() < 1).float().mean().item()
        print(f"{case}: latent |x| max {latent.abs().max():.4f} rms "
              f"{latent.pow(2).mean().sqrt():.4f}; pixels std {pixels.std():.3f} "
              f"({100 * inside:.0f}% unclamped)")
        for row, what in enumerate((f"noise ±{PERTURBATION:g}, worst of {FLOOR_RUNS}",
                                    "umT5 in f32")):
            f = floor[row]
            print(f"  floor ({what}): latent max {f[0]:.3g} rms {f[1]:.3g}; pixels max "
                  f"{f[2]:.3g} rms {f[3]:.3g}")
    print(f"prompt: {len(ids['prompt'])} ids, negative prompt: {len(ids['negative_prompt'])} ids")

    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "reference.safetensors")
    save_file({k: np.ascontiguousarray(v) for k, v in out.items()}, path,
              # One key: safetensors writes a map's keys in no fixed order.
              metadata={"source": f"tools/reference/make_pipeline_reference.py: wan22 official "
                                  f"pipeline on the demo model set (content hashes "
                                  f"{', '.join(pinned_hashes())}); torch {torch.__version__}"})
    print(f"wrote {path} ({os.path.getsize(path) / 1e3:.0f} kB)")


if __name__ == "__main__":
    main()
