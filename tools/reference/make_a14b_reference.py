#!/usr/bin/env python3
"""Writes tests/data/wan/a14b/: tiny random Wan 2.2 A14B expert pairs (text-to-video and
image-to-video) and what the official A14B pipelines make with them, for the A14B parity test
(issue 17, "Must show" 1): text-to-video, image-to-video from a start frame, and first–last frame.

    FERRY_DATA_DIR=/tmp/x build/<dir>/cli/ferry-cli demo --width 64 --height 64 --frames 5 \\
        --steps 1 --out /tmp/x/d.mp4                      # writes /tmp/x/demo-model/
    tools/reference/.venv/bin/python tools/reference/make_a14b_reference.py /tmp/x/demo-model

Only the demo folder's text encoder (umt5_demo.safetensors, with its SentencePiece model) is read
from it; the script first checks that file's data section against the content hash
tests/models/wan_demo_model_test.cpp pins (FNV-1a 64), so the contexts are made from exactly the
bytes the C++ test writes at run time (the text encoder is not committed here). Its d_model (64)
is the experts' text_dim. The VAE is the committed tiny Wan 2.1 VAE,
tests/data/wan/vae/wan21_tiny.safetensors (official / ComfyUI names; read, not rewritten).

What it follows, line by line: github.com/Wan-Video/Wan2.2 at 42bf4cf, wan/text2video.py
`WanT2V.generate` and wan/image2video.py `WanI2V.generate`, with the values of
wan/configs/wan_{t2v,i2v}_A14B.py where not stated below. NOT the PyPI `wan22` 2.2.11 wheel's
text2video.py / image2video.py: those are a "lightning" fork (CFG off, hard-coded checkpoint
paths; formats_lora_moe.md §6.8). The wheel's model.py, vae2_1.py, t5.py, fm_solvers_unipc.py,
utils.py and configs are byte-identical to the repository at 42bf4cf (compared with cmp) and are
what runs here, through wan_reference.py; the loops are restated from the repository's files.
  text     as make_pipeline_reference.py (its helpers, imported): Wan's cleaning, the demo's
           SentencePiece model, EOS appended; transformers' UMT5EncoderModel with the demo's
           weights in bf16 on the real tokens only (T5EncoderModel returns u[:seq_len]).
           Negative prompt: the configs' sample_neg_prompt (wan_shared_cfg; both A14B configs).
  size     t2v: target_shape (16, (F−1)/4+1, H/8, W/8), seq_len = T·(H/16)·(W/16).
           i2v, flf: the image as TF.to_tensor(img).sub_(0.5).div_(0.5) (restated: uint8 HWC →
           f32 CHW / 255), aspect = h0/w0, lat_h = round(√(max_area·aspect) // 8 // 2 · 2),
           lat_w = round(√(max_area/aspect) // 8 // 2 · 2) (np.sqrt, float floor division),
           h = 8·lat_h, w = 8·lat_w, max_seq_len = T·lat_h·lat_w // 4; max_area = the requested
           W·H (64·64), and the start image's aspect (3:4) is not the canvas's (1:1).
  y        i2v: msk = ones(1, F, lat_h, lat_w), msk[:, 1:] = 0, the first flag repeated 4 times,
           viewed [1, T, 4, lat_h, lat_w], transposed to [4, T, lat_h, lat_w]; the conditioning
           video [interpolate(img[None], (h, w), 'bicubic') (no antialias, align_corners False,
           no clamp), zeros(3, F−1, h, w)] encoded by the Wan 2.1 VAE (fp32, normalised mu);
           y = concat(msk, y_lat) [20, T, lat_h, lat_w]; the DiT concatenates (x, y) → 36 channels.
  denoise  the official WanModel of each expert (below), run as make_dit_reference.py runs it on a
           CPU (bf16 SDPA for flash_attention; CPU autocast(bf16) with the official fp32 regions
           redirected; imported from it); the official FlowUniPCMultistepScheduler (1000 train
           steps, shift 1, no dynamic shifting, set_timesteps(4, shift)); per step t:
           boundary = config.boundary · 1000, the model = high_noise_model if t.item() ≥ boundary
           else low_noise_model, the guide scale = guide_scale[1] if t.item() ≥ boundary else
           guide_scale[0] (the tuple is (low, high)), timestep = torch.stack([t]) (int64),
           cond then uncond forward, noise_pred_uncond + g·(cond − uncond), scheduler.step.
           The whole loop runs inside the autocast, as the official one does.
  decode   the official WanVAE_ (vae2_1.py) decode in fp32 with the Wan 2.1 latent mean/std,
           clamped to [−1, 1] (Wan2_1_VAE.decode); frames to uint8 as utils.save_video does.

Cases (one file each, <case>_reference.safetensors), 4 steps, shift 5.0, UniPC:
  t2v   T2V experts (in_dim 16); 64×64, 5 frames → latent [16, 2, 8, 8]; boundary 0.875 (the T2V
        config's); guide (low, high) = (3.0, 4.0) (the T2V config's).
  i2v   I2V experts (in_dim 36, model_type 'i2v', no img_emb: Wan 2.2 has no CLIP); start image
        72×54 (W×H); max_area 64·64 → (h, w) = (48, 64), latent [16, 2, 6, 8]; boundary 0.900 (the
        I2V config's); guide (low, high) = (3.5, 4.5).
  flf   the I2V experts with a start image (the i2v one) and an end image 56×70 (W×H, portrait:
        the rule applied to it would give (64, 48)); (h, w) from the start image as in i2v.
The schedule is t = 999, 937, 833, 624: with either boundary (875, 900) steps 0–1 run the high
expert and steps 2–3 the low one (2 + 2), so the switch falls inside and both guide scales are used.

Deviations from the official code (and why):
  * shift 5.0 for T2V (its config has 12.0): with 12.0 the 4 steps are t = 999, 972, 922, 799 →
    3 + 1 at boundary 0.875; 5.0 gives the 2 + 2 split wanted. I2V uses its config's 5.0.
  * I2V guide (3.5, 4.5) in place of the config's (3.5, 3.5): equal scales would not tell the
    tuple's order.
  * First–last frame is not in the official Wan 2.2 code (no first_last_frame2video.py): the flf
    case extends image2video.py `generate` with diffusers' `last_image` semantics
    (pipeline_wan_i2v.py prepare_latents; formats_lora_moe.md §6.4): conditioning video
    [image, zeros(3, F−2, h, w), last image], the last image bicubic-resized to (h, w) like the
    first (no crop: its aspect is distorted to the start image's), mask msk[:, 1:-1] = 0 (p[0] =
    p[F−1] = 1; Wan 2.1's first_last_frame2video.py writes the same flags).
  * The noise is injected: torch.randn on the CPU with fixed seeds (the official draws it on CUDA).
  * DiT on a CPU: CPU autocast(bf16) for CUDA's, bf16 SDPA for flash-attention (make_dit_reference
    .py's patches; the dtype boundaries of wan.md §1 are kept). The scheduler's steps therefore
    run under CPU autocast (the official ones under CUDA autocast): its ops are elementwise but
    one einsum ("k,bkc...->bc...", k = 1), and the 4 steps write the same bytes inside CPU
    autocast(bf16) as outside it (checked on random inputs).
  * Parameters: fp32 tensors holding the stored bf16 values (the official from_pretrained keeps a
    checkpoint's dtype: f32 for the official shards as far as wan.md §1 knows). The VAE's: fp32
    tensors holding the fp16 file's values.
  * The VAE decode runs outside the bf16 autocast: the official Wan2_1_VAE.decode nests
    autocast(dtype=float32), i.e. it runs in fp32, which CPU autocast cannot express.

Expert files (official layout and names; bf16; config.json as the official folders have it):
  {t2v,i2v}/{high,low}_noise_model/diffusion_pytorch_model.safetensors, config.json
  WanModel dim 128, 1 head (head_dim 128: Ferry's DiT, like every real Wan, has heads of 128, so
  dim 128 is the smallest; 2 heads would need dim 256, 4× the bytes), ffn 256, 2 layers, freq_dim
  256, text_dim 64, text_len 512, qk_norm, cross_attn_norm, eps 1e-6, patch (1, 2, 2); in 16 / 36,
  out 16. Random weights (make_dit_reference.py's recipe), a seed per mode and expert, so the four
  experts all differ. The reference runs on the weights read back from the files written.

<case>_reference.safetensors (T, h, w: the case's latent frames and size; L, N: token counts):
  noise                      F32 [16, T, lat_h, lat_w]  the injected initial noise
  prompt, negative_prompt    U8                         UTF-8 text
  prompt.ids, negative_prompt.ids   I32 [L], [N]        the official token ids
  prompt.context, negative_prompt.context   F32 [L, 64], [N, 64]   the umT5 output (bf16 values)
  size                       I32 [2]                    (h, w) in pixels (t2v: the canvas; i2v,
                                                        flf: the size rule's result)
  image                      U8 [54, 72, 3]             i2v, flf: the start image (RGB rows)
  image.resized              F32 [3, h, w]              its bicubic resize in [−1, 1] (not clamped:
                                                        bicubic overshoots), frame 0 of the video
  end_image                  U8 [70, 56, 3]             flf: the end image
  end_image.resized          F32 [3, h, w]              flf: its resize, the video's last frame
  y                          F32 [20, T, lat_h, lat_w]  i2v, flf: concat(mask, VAE latent)
  timesteps                  I32 [4]                    the integer t of each step
  sigmas                     F32 [5]                    the scheduler's sigmas
  experts                    I32 [4]                    per step: 0 high-noise, 1 low-noise
  guide                      F32 [4]                    per step: the guide scale used
  step1 .. step4             F32 [16, T, lat_h, lat_w]  the latent after each step (step4 is the
                                                        final latent)
  latent                     F32 [16, T, lat_h, lat_w]  the final latent (= step4)
  pixels                     F32 [3, F, h, w]           the decode, clamped to [−1, 1]
  frames                     U8 [F, h, w, 3]            the official uint8 frames
  floor                      F32 [R, 4]                 (latent max |Δ|, latent RMS Δ, pixels max
      |Δ|, pixels RMS Δ) of the final latent and pixels when row 0: the initial noise is
      perturbed by ±1e-6 (random signs, the worst of 4 tries); row 1: umT5 runs in f32;
      row 2 (i2v, flf only): y's VAE latent is encoded with bf16 activations (make_vae_reference
      .py's Bf16Activations: Ferry's bf16 VAE recipe) — what the test's bounds are sized against
  y_floor                    F32 [2]                    i2v, flf: max |Δ|, RMS Δ of that bf16 y
Metadata: one key, "source". manifest.json: prompts, seeds, steps, shift, boundary, guide scales
(low, high), sizes, frames, the step split, the floors, and what the bounds catch (the final
latent's distance when the guide tuple is read in the wrong order, the experts are swapped, the
switch is a step late, and for i2v/flf the conditioning is changed).

manifest.json also has, per i2v/flf case, how far y and the final latent move when the resized
images are rounded to 8 bits (a resize done on uint8 pixels): not a floor, a figure for choosing
where Ferry resizes.

Deterministic (fixed seeds, one thread): a rerun writes the same bytes (checked: sha256 of every
file the same over two runs). On the same kind of CPU only: PyTorch's bf16 CPU kernels (oneDNN)
round differently with another instruction set (the manifest records torch's CPU capability; the
committed tests/data/wan/dit and denoise files, made on another machine, are not reproduced
bit for bit on an AVX2 one: velocities differ by up to 0.006), so a rerun elsewhere may move the
references by about their floors — the sizes the tests' bounds already allow for.
"""

import argparse
import hashlib
import json
import math
import os
import re
import sys

import numpy as np
import sentencepiece as spm
import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_dit_reference as dit  # noqa: E402  (patches autocast and flash_attention on import)
import make_pipeline_reference as pipe  # noqa: E402
from make_sampler_reference import official_scheduler  # noqa: E402
from make_vae_reference import bf16_encode, scale_of  # noqa: E402
from wan_reference import wan_module  # noqa: E402

ROOT = dit.ROOT
OUT = os.path.join(ROOT, "tests", "data", "wan", "a14b")
DEMO_TEST = os.path.join(ROOT, "tests", "models", "wan_demo_model_test.cpp")
TEXT_FILE = "umt5_demo.safetensors"  # the first of the demo's three files (kContentHashes[0])
VAE_FILE = os.path.join(ROOT, "tests", "data", "wan", "vae", "wan21_tiny.safetensors")

SEED = 20261217
STEPS = 4
FRAMES = 5
WIDTH, HEIGHT = 64, 64  # t2v's canvas; i2v's and flf's max_area is WIDTH·HEIGHT
VAE_STRIDE = (4, 8, 8)
PATCH = (1, 2, 2)
NUM_TRAIN_TIMESTEPS = 1000
EXPERT = dict(dim=128, ffn_dim=256, num_heads=1, num_layers=2, freq_dim=256, text_dim=64,
              text_len=512, out_dim=16)
EXPERT_NAMES = ("high_noise_model", "low_noise_model")  # index = the stored expert id
MODES = {
    # in_dim, model_type, boundary, shift, guide (low, high)
    "t2v": dict(in_dim=16, model_type="t2v", boundary=0.875, shift=5.0, guide=(3.0, 4.0)),
    "i2v": dict(in_dim=36, model_type="i2v", boundary=0.900, shift=5.0, guide=(3.5, 4.5)),
}
PROMPTS = {
    "t2v": "A ferry leaves a wooden pier at dusk, lanterns swinging, gulls over the wake",
    "i2v": "The picture comes alive: the sun rises slowly and the bar drifts to the right",
    "flf": "A slow pan from the first picture to the last one, the light warming as it goes",
}
START_SIZE = (54, 72)  # (H, W): aspect 3:4, not the canvas's
END_SIZE = (70, 56)    # (H, W): portrait
PERTURBATION = 1e-6
FLOOR_RUNS = 4


# ---- inputs ------------------------------------------------------------------------------------

def check_text_encoder(folder):
    """The demo's text encoder file against the content hash the C++ demo test pins (the first
    of kContentHashes, the umT5 file)."""
    with open(DEMO_TEST, encoding="utf-8") as f:
        text = f.read()
    pinned = re.findall(r'"([0-9a-f]{16})"',
                        re.search(r"kContentHashes\[\]\s*=\s*\{([^}]*)\}", text).group(1))
    with open(os.path.join(folder, TEXT_FILE), "rb") as f:
        raw = f.read()
    header = int.from_bytes(raw[:8], "little")
    got = f"{pipe.fnv1a64(raw[8 + header:]):016x}"
    if got != pinned[0]:
        sys.exit(f"{TEXT_FILE}: content hash {got}, {os.path.relpath(DEMO_TEST, ROOT)} pins "
                 f"{pinned[0]}: not the demo this checkout writes")
    print(f"{TEXT_FILE} matches the pinned content hash {got}")
    return got


def picture(height, width, variant):
    """A smooth picture (gradients, a disc, a bar), as make_pipeline_reference.start_image, at any
    size; variant 1 moves and recolours things so the end frame is another picture."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    u, v = x / (width - 1), y / (height - 1)
    if variant == 0:
        r, g, b = 40 + 170 * u, 60 + 150 * v, 200 - 120 * (u + v) / 2
        disc = ((u - 0.34) / 0.19) ** 2 + ((v - 0.6) / 0.22) ** 2 < 1
        bar = (v >= 0.16) & (v < 0.26) & (u >= 0.45) & (u < 0.9)
        colours = ((235, 210, 60), (20, 30, 40))
    else:
        r, g, b = 220 - 150 * v, 90 + 100 * u * v, 60 + 160 * u
        disc = ((u - 0.7) / 0.2) ** 2 + ((v - 0.3) / 0.16) ** 2 < 1
        bar = (u >= 0.1) & (u < 0.22) & (v >= 0.5) & (v < 0.95)
        colours = ((250, 240, 200), (70, 20, 90))
    for mask, (cr, cg, cb) in zip((disc, bar), colours):
        r[mask], g[mask], b[mask] = cr, cg, cb
    return np.stack([r, g, b], axis=-1).round().clip(0, 255).astype(np.uint8)


def to_tensor(image):
    """TF.to_tensor(img).sub_(0.5).div_(0.5): uint8 [H, W, 3] → f32 [3, H, W] in [−1, 1]."""
    return torch.from_numpy(image).permute(2, 0, 1).contiguous().float().div(255).sub_(0.5) \
        .div_(0.5)


# ---- models ------------------------------------------------------------------------------------

def new_expert(mode):
    m = MODES[mode]
    return dit.model_module.WanModel(
        model_type=m["model_type"], patch_size=PATCH, text_len=EXPERT["text_len"],
        in_dim=m["in_dim"], dim=EXPERT["dim"], ffn_dim=EXPERT["ffn_dim"],
        freq_dim=EXPERT["freq_dim"], text_dim=EXPERT["text_dim"], out_dim=EXPERT["out_dim"],
        num_heads=EXPERT["num_heads"], num_layers=EXPERT["num_layers"], qk_norm=True,
        cross_attn_norm=True, eps=1e-6).eval().requires_grad_(False)


def random_expert(mode, index):
    """make_dit_reference.build's recipe (Xavier-like weights, norm weights near 1, small biases,
    modulation / √dim), bf16 values, one seed per (mode, expert)."""
    model = new_expert(mode)
    gen = torch.Generator().manual_seed(SEED + 100 * (1 + list(MODES).index(mode)) + index)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if name.endswith("modulation"):
                value = noise / EXPERT["dim"] ** 0.5
            elif "norm" in name and name.endswith("weight"):
                value = 1.0 + 0.2 * noise
            elif name.endswith("bias"):
                value = 0.1 * noise
            else:
                value = noise / p[0].numel() ** 0.5
            p.copy_(dit.bf16_values(value))
    return model


def official_config(mode):
    """config.json as the official high_noise_model/ and low_noise_model/ folders carry it (the
    WanModel arguments from_pretrained reads). WanModel ignores text_dim in a config (its
    ignore_for_config; the real experts' is the default 4096), so it is not written: the tiny
    experts' 64 is the shape of text_embedding.0.weight (checked: WanModel(**config.json,
    text_dim=64) loads each file with strict=True and the same values)."""
    m = MODES[mode]
    return {"_class_name": "WanModel", "_diffusers_version": "0.33.0", "dim": EXPERT["dim"],
            "eps": 1e-06, "ffn_dim": EXPERT["ffn_dim"], "freq_dim": EXPERT["freq_dim"],
            "in_dim": m["in_dim"], "model_type": m["model_type"],
            "num_heads": EXPERT["num_heads"], "num_layers": EXPERT["num_layers"],
            "out_dim": EXPERT["out_dim"], "text_len": EXPERT["text_len"]}


def write_experts(mode):
    """Writes the mode's two experts and returns them read back from their files:
    {"high_noise_model": WanModel, "low_noise_model": WanModel}."""
    experts = {}
    for index, name in enumerate(EXPERT_NAMES):
        folder = os.path.join(OUT, mode, name)
        os.makedirs(folder, exist_ok=True)
        model = random_expert(mode, index)
        state = {k: v.detach().to(torch.bfloat16).contiguous()
                 for k, v in model.state_dict().items()}
        path = os.path.join(folder, "diffusion_pytorch_model.safetensors")
        save_file(state, path, metadata={"format": "pt"})
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(official_config(mode), f, indent=2, sort_keys=True)
            f.write("\n")
        back = new_expert(mode)
        back.load_state_dict({k: v.to(torch.float32) for k, v in load_file(path).items()},
                             strict=True)
        experts[name] = back
    high, low = (experts[n].state_dict() for n in EXPERT_NAMES)
    assert all(not torch.equal(high[k], low[k]) for k in high), "the experts must differ"
    return experts


def wan21_vae():
    vae = wan_module("wan.modules.vae2_1")
    with safe_open(VAE_FILE, framework="pt") as f:
        state = {k: f.get_tensor(k).to(torch.float32) for k in f.keys()}
    dim = state["encoder.conv1.weight"].shape[0]
    model = vae.WanVAE_(dim=dim, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2,
                        attn_scales=[], temperal_downsample=[False, True, True],
                        dropout=0.0).eval().requires_grad_(False)
    model.load_state_dict(state, strict=True)
    return model, scale_of(vae, 16)


# ---- the official pipelines -------------------------------------------------------------------

def best_size(img, max_area):
    """image2video.py: (lat_h, lat_w) from the image's aspect and max_area."""
    h, w = img.shape[1:]
    aspect_ratio = h / w
    lat_h = round(np.sqrt(max_area * aspect_ratio) // VAE_STRIDE[1] // PATCH[1] * PATCH[1])
    lat_w = round(np.sqrt(max_area / aspect_ratio) // VAE_STRIDE[2] // PATCH[2] * PATCH[2])
    return lat_h, lat_w


def i2v_condition(vae, scale, img, lat_h, lat_w, end_img=None, bf16=False, eight_bit=False):
    """image2video.py's y = concat(msk, VAE latent of the conditioning video), msk, and the
    resized images [3, h, w]; with end_img, diffusers' last_image: the last frame given too.
    bf16: encode with Bf16Activations (the floor's row 2). eight_bit: the resized images rounded
    to 8 bits (a resize done on uint8 pixels; a figure for the README, not the reference)."""
    F_ = FRAMES
    h, w = lat_h * VAE_STRIDE[1], lat_w * VAE_STRIDE[2]
    msk = torch.ones(1, F_, lat_h, lat_w)
    if end_img is None:
        msk[:, 1:] = 0
    else:
        msk[:, 1:-1] = 0
    msk = torch.concat([torch.repeat_interleave(msk[:, 0:1], repeats=4, dim=1), msk[:, 1:]],
                       dim=1)
    msk = msk.view(1, msk.shape[1] // 4, 4, lat_h, lat_w)
    msk = msk.transpose(1, 2)[0]

    def resize(im):
        out = F.interpolate(im[None].cpu(), size=(h, w), mode='bicubic').transpose(0, 1)
        if eight_bit:
            out = ((out * 0.5 + 0.5) * 255).round().clamp(0, 255) / 255 * 2 - 1
        return out

    first = resize(img)
    if end_img is None:
        video = torch.concat([first, torch.zeros(3, F_ - 1, h, w)], dim=1)
        resized = [first[:, 0]]
    else:
        last = resize(end_img)
        video = torch.concat([first, torch.zeros(3, F_ - 2, h, w), last], dim=1)
        resized = [first[:, 0], last[:, 0]]
    with torch.no_grad():
        if bf16:
            y = bf16_encode(vae, video, scale).float()
        else:  # Wan2_1_VAE.encode: model.encode(u.unsqueeze(0), scale).float().squeeze(0)
            y = vae.encode(video.unsqueeze(0), scale).float().squeeze(0)
    return torch.concat([msk, y]), msk, resized


def denoise(experts, noise, contexts, seq_len, mode_cfg, y=None, guide=None, boundary=None,
            swap_experts=False):
    """The sampling loop of text2video.py / image2video.py `generate` (y None: text-to-video).
    guide, boundary, swap_experts: changes for the 'what the bounds catch' figures only.
    Returns the latent after every step, the expert index and guide scale of every step, and the
    scheduler."""
    guide_scale = mode_cfg["guide"] if guide is None else guide
    seed_g = torch.Generator().manual_seed(SEED)  # passed to step() as the official; unused there
    steps, experts_used, guides_used = [], [], []
    with torch.amp.autocast('cuda', dtype=torch.bfloat16), torch.no_grad():
        boundary = (mode_cfg["boundary"] if boundary is None else boundary) * NUM_TRAIN_TIMESTEPS
        sample_scheduler = official_scheduler(STEPS, mode_cfg["shift"])
        timesteps = sample_scheduler.timesteps

        latent = noise
        arg_c = {'context': [contexts[0]], 'seq_len': seq_len}
        arg_null = {'context': [contexts[1]], 'seq_len': seq_len}
        if y is not None:
            arg_c['y'] = [y]
            arg_null['y'] = [y]

        for _, t in enumerate(timesteps):
            latent_model_input = [latent]
            timestep = [t]
            timestep = torch.stack(timestep)

            # _prepare_model_for_timestep
            high = t.item() >= boundary
            name = EXPERT_NAMES[0 if high != swap_experts else 1]
            model = experts[name]
            sample_guide_scale = guide_scale[1] if t.item() >= boundary else guide_scale[0]

            noise_pred_cond = model(latent_model_input, t=timestep, **arg_c)[0]
            noise_pred_uncond = model(latent_model_input, t=timestep, **arg_null)[0]
            noise_pred = noise_pred_uncond + sample_guide_scale * (
                noise_pred_cond - noise_pred_uncond)
            assert noise_pred.dtype == torch.float32 and torch.isfinite(noise_pred).all()

            temp_x0 = sample_scheduler.step(
                noise_pred.unsqueeze(0), t, latent.unsqueeze(0), return_dict=False,
                generator=seed_g)[0]
            latent = temp_x0.squeeze(0)
            assert latent.dtype == torch.float32

            steps.append(latent.clone().contiguous())
            experts_used.append(EXPERT_NAMES.index(name))
            guides_used.append(sample_guide_scale)
    return steps, experts_used, guides_used, sample_scheduler


def decode(vae, scale, latent):
    """Wan2_1_VAE.decode: model.decode(u.unsqueeze(0), scale).float().clamp_(-1, 1).squeeze(0)."""
    with torch.no_grad():
        return vae.decode(latent.unsqueeze(0), scale).float().clamp_(-1, 1).squeeze(0)


# ---- cases -------------------------------------------------------------------------------------

def check_mask(msk, end):
    """formats_lora_moe.md §6.3 step 4 / §6.4 by hand, F = 5 pixel frames, T = 2: flags p[f] (1 =
    frame given), m[c, 0] = p[0], m[c, 1] = p[4 + c − 3] = p[c + 1]."""
    p = [1, 0, 0, 0, 1 if end else 0]
    want = [[p[0], p[c + 1]] for c in range(4)]  # [c][t]
    got = [[int(msk[c, t].unique().item()) for t in range(2)] for c in range(4)]
    assert all(msk[c, t].unique().numel() == 1 for c in range(4) for t in range(2))
    assert got == want, (got, want)


def run_case(case, experts, vae, scale, text):
    """Everything stored for one case, the floor and the 'what the bounds catch' distances."""
    mode = "t2v" if case == "t2v" else "i2v"
    cfg = MODES[mode]
    gen = torch.Generator().manual_seed(SEED + 1000 + list(PROMPTS).index(case))
    out, info = {}, {"mode": mode}
    ids = {"prompt": pipe.tokenize(text["sp"], PROMPTS[case]),
           "negative_prompt": pipe.tokenize(text["sp"], text["negative"])}
    contexts = tuple(pipe.encode_text(text["bf16"], ids[k]) for k in ("prompt", "negative_prompt"))
    f32_contexts = tuple(pipe.encode_text(text["f32"], ids[k]).to(torch.bfloat16)
                         for k in ("prompt", "negative_prompt"))
    assert all(c.dtype == torch.bfloat16 for c in contexts)

    T = (FRAMES - 1) // VAE_STRIDE[0] + 1
    y = y_bf16 = None
    if mode == "t2v":
        lat_h, lat_w = HEIGHT // VAE_STRIDE[1], WIDTH // VAE_STRIDE[2]
        seq_len = math.ceil((lat_h * lat_w) / (PATCH[1] * PATCH[2]) * T)
    else:
        image = picture(*START_SIZE, 0)
        end = picture(*END_SIZE, 1) if case == "flf" else None
        img = to_tensor(image)
        end_img = to_tensor(end) if end is not None else None
        lat_h, lat_w = best_size(img, WIDTH * HEIGHT)
        seq_len = T * lat_h * lat_w // (PATCH[1] * PATCH[2])
        y, msk, resized = i2v_condition(vae, scale, img, lat_h, lat_w, end_img)
        check_mask(msk, end is not None)
        y_bf16 = i2v_condition(vae, scale, img, lat_h, lat_w, end_img, bf16=True)[0]
        y_8bit = i2v_condition(vae, scale, img, lat_h, lat_w, end_img, eight_bit=True)[0]
        out["image"] = image
        out["image.resized"] = resized[0].contiguous()
        if end is not None:
            out["end_image"] = end
            out["end_image.resized"] = resized[1].contiguous()
        out["y"] = y.contiguous()
        if end is not None:  # the end rule would give another size: (h, w) is the start's
            assert best_size(end_img, WIDTH * HEIGHT) != (lat_h, lat_w)
    h, w = lat_h * VAE_STRIDE[1], lat_w * VAE_STRIDE[2]
    noise = torch.randn(16, T, lat_h, lat_w, generator=gen, dtype=torch.float32)

    run = lambda n=noise, c=contexts, yy=y, **kw: denoise(experts, n, c, seq_len, cfg, yy, **kw)
    steps, experts_used, guides_used, scheduler = run()
    latent = steps[-1]
    pixels = decode(vae, scale, latent)

    def moved(new_latent):
        new_pixels = decode(vae, scale, new_latent)
        return torch.cat([pipe.distance(new_latent, latent), pipe.distance(new_pixels, pixels)])

    floor = torch.zeros(2 if y is None else 3, 4)
    for _ in range(FLOOR_RUNS):
        sign = torch.randint(0, 2, noise.shape, generator=gen).float() * 2 - 1
        floor[0] = torch.maximum(floor[0], moved(run(n=noise + PERTURBATION * sign)[0][-1]))
    floor[1] = moved(run(c=f32_contexts)[0][-1])
    if y is not None:
        floor[2] = moved(run(yy=y_bf16)[0][-1])
        out["y_floor"] = pipe.distance(y_bf16, y)

    # What the bounds catch: the final latent's distance from the reference's (max, rms).
    low, high = cfg["guide"]
    first_low = experts_used.index(1)
    late = (float(scheduler.timesteps[first_low]) - 0.5) / NUM_TRAIN_TIMESTEPS  # one more high
    catches = {
        "guide (low, high) read as (high, low)": run(guide=(high, low)),
        "experts swapped": run(swap_experts=True),
        "switch one step late (3 + 1)": run(boundary=late),
    }
    if y is not None:
        catches["y's channels in the wrong order (latent, then mask)"] = run(
            yy=torch.cat([y[4:], y[:4]]))
        catches["mask channels zeroed"] = run(yy=torch.cat([torch.zeros_like(y[:4]), y[4:]]))
        if case == "flf":
            img_only = i2v_condition(vae, scale, to_tensor(out["image"]), lat_h, lat_w)[0]
            catches["end frame dropped (the i2v conditioning)"] = run(yy=img_only)
    info["catches"] = {k: [round(float(d), 4) for d in pipe.distance(v[0][-1], latent)]
                       for k, v in catches.items()}
    if y is not None:  # what a resize on 8-bit pixels (FFmpeg's, say) would move
        info["resized images rounded to 8 bits"] = {
            "y": [round(float(d), 6) for d in pipe.distance(y_8bit, y)],
            "latent": [round(float(d), 6) for d in pipe.distance(run(yy=y_8bit)[0][-1], latent)]}

    out.update({
        "noise": noise.contiguous(),
        "prompt": torch.frombuffer(bytearray(PROMPTS[case].encode("utf-8")), dtype=torch.uint8),
        "negative_prompt": torch.frombuffer(bytearray(text["negative"].encode("utf-8")),
                                            dtype=torch.uint8),
        "prompt.ids": torch.tensor(ids["prompt"], dtype=torch.int32),
        "negative_prompt.ids": torch.tensor(ids["negative_prompt"], dtype=torch.int32),
        "prompt.context": contexts[0].float().contiguous(),
        "negative_prompt.context": contexts[1].float().contiguous(),
        "size": torch.tensor([h, w], dtype=torch.int32),
        "timesteps": scheduler.timesteps.to(torch.int32).contiguous(),
        "sigmas": scheduler.sigmas.to(torch.float32).contiguous(),
        "experts": torch.tensor(experts_used, dtype=torch.int32),
        "guide": torch.tensor(guides_used, dtype=torch.float32),
        "latent": latent.clone(),
        "pixels": pixels.contiguous(),
        "frames": pipe.to_uint8(pixels),
        "floor": floor,
    })
    for k, s in enumerate(steps, start=1):
        out[f"step{k}"] = s
    for k in ("image", "end_image"):
        if k in out:
            out[k] = torch.from_numpy(np.ascontiguousarray(out[k]))
    info.update({
        "prompt": PROMPTS[case], "noise_seed": SEED + 1000 + list(PROMPTS).index(case),
        "size_hw": [h, w], "latent": [16, T, lat_h, lat_w], "seq_len": seq_len,
        "timesteps": [int(t) for t in scheduler.timesteps], "experts": experts_used,
        "guide_per_step": guides_used,
        "floor": [[round(float(v), 6) for v in row] for row in floor],
    })
    if y is not None:
        info["y_floor"] = [round(float(v), 6) for v in out["y_floor"]]
    return out, info


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("demo_folder", help="the folder ferry-cli demo wrote (demo-model/)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    text_hash = check_text_encoder(args.demo_folder)

    text_state = pipe.load(args.demo_folder, TEXT_FILE)
    assert text_state["shared.weight"].shape[1] == EXPERT["text_dim"]
    text = {
        "sp": spm.SentencePieceProcessor(model_proto=text_state["spiece_model"].numpy().tobytes()),
        "negative": wan_module("wan.configs.shared_config").wan_shared_cfg.sample_neg_prompt,
        "bf16": pipe.text_encoder(text_state),
        "f32": pipe.text_encoder(text_state, torch.float32),
    }
    for mode in MODES:  # the configs this follows: the A14B ones, negative prompt included
        config = getattr(wan_module(f"wan.configs.wan_{mode}_A14B"), f"{mode}_A14B")
        assert config.sample_neg_prompt == text["negative"] and config.vae_stride == VAE_STRIDE
        assert config.patch_size == PATCH and config.num_train_timesteps == NUM_TRAIN_TIMESTEPS
        assert config.boundary == MODES[mode]["boundary"]
        assert (config.low_noise_checkpoint, config.high_noise_checkpoint) == EXPERT_NAMES[::-1]
    vae, scale = wan21_vae()
    os.makedirs(OUT, exist_ok=True)
    experts = {mode: write_experts(mode) for mode in MODES}

    manifest = {
        "source": "tools/reference/make_a14b_reference.py: github.com/Wan-Video/Wan2.2 @ 42bf4cf "
                  "wan/text2video.py, wan/image2video.py (+ diffusers' last_image for flf), "
                  f"modules from PyPI wan22 2.2.11; torch {torch.__version__}",
        "text_encoder": f"ferry-cli demo's {TEXT_FILE} (content FNV-1a 64 {text_hash})",
        "vae": os.path.relpath(VAE_FILE, ROOT),
        "expert": EXPERT,
        "modes": {m: {"in_dim": c["in_dim"], "model_type": c["model_type"],
                      "boundary": c["boundary"], "shift": c["shift"],
                      "guide_low_high": list(c["guide"]), "sampler": "unipc", "steps": STEPS,
                      "experts": {n: f"{m}/{n}/diffusion_pytorch_model.safetensors"
                                  for n in EXPERT_NAMES}}
                  for m, c in MODES.items()},
        "frames": FRAMES, "canvas_wh": [WIDTH, HEIGHT], "max_area": WIDTH * HEIGHT,
        "image_hw": list(START_SIZE), "end_image_hw": list(END_SIZE),
        "negative_prompt": text["negative"],
        "perturbation": PERTURBATION, "floor_runs": FLOOR_RUNS,
        "step_split": "t = 999, 937 high-noise expert; 833, 624 low-noise expert (2 + 2)",
        # bf16 matmuls on a CPU round differently with another instruction set (see the README).
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cases": {},
    }
    for case in PROMPTS:
        mode = "t2v" if case == "t2v" else "i2v"
        out, info = run_case(case, experts[mode], vae, scale, text)
        path = os.path.join(OUT, f"{case}_reference.safetensors")
        save_file({k: v.contiguous() for k, v in out.items()}, path,
                  # One key: safetensors writes a map's keys in no fixed order.
                  metadata={"source": manifest["source"]})
        manifest["cases"][case] = info
        latent = out["latent"]
        print(f"{case}: (h, w) {tuple(info['size_hw'])}, latent {tuple(latent.shape)}, t "
              f"{info['timesteps']}, experts {info['experts']}, guide {info['guide_per_step']}")
        print(f"  latent |x| max {latent.abs().max():.4f} rms {latent.pow(2).mean().sqrt():.4f}; "
              f"pixels std {out['pixels'].std():.3f} "
              f"({100 * (out['pixels'].abs() < 1).float().mean():.0f}% unclamped)")
        rows = [f"noise ±{PERTURBATION:g}, worst of {FLOOR_RUNS}", "umT5 in f32",
                "y encoded with bf16 activations"]
        for row, f in zip(rows, out["floor"]):
            print(f"  floor ({row}): latent max {f[0]:.3g} rms {f[1]:.3g}; pixels max {f[2]:.3g} "
                  f"rms {f[3]:.3g}")
        if "y_floor" in out:
            print(f"  y: |y| max {out['y'].abs().max():.3f}; bf16 encode moves it max "
                  f"{out['y_floor'][0]:.3g} rms {out['y_floor'][1]:.3g}")
        for what, d in info["catches"].items():
            print(f"  catches: {what}: max {d[0]:.3g} rms {d[1]:.3g}")
        if "resized images rounded to 8 bits" in info:
            d = info["resized images rounded to 8 bits"]
            print(f"  resized images rounded to 8 bits: y max {d['y'][0]:.3g} rms {d['y'][1]:.3g};"
                  f" latent max {d['latent'][0]:.3g} rms {d['latent'][1]:.3g}")
    with open(os.path.join(OUT, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)
        f.write("\n")
    for folder, _, names in sorted(os.walk(OUT)):
        for name in sorted(names):
            path = os.path.join(folder, name)
            print(f"{os.path.relpath(path, OUT)}: {os.path.getsize(path) / 1e3:.0f} kB "
                  f"sha256 {sha256(path)[:16]}")


if __name__ == "__main__":
    main()
