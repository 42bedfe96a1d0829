#!/usr/bin/env python3
"""Writes tests/data/h3_pipeline/: MiniMax-H3 end to end as diffusers 0.42.1's modular blocks run it
on Ferry's tiny H3 demo set, for tests/pipeline/h3_pipeline_parity_test.cpp (issue 21).

    XDG_DATA_HOME=/tmp/h3 build/linux-release/cli/ferry-cli demo --model h3 --steps 1
    /work/main/tools/reference/.venv/bin/python tools/reference/make_h3_pipeline_reference.py \
        /tmp/h3/Ferry/demo-model-h3

(the demo set is fixed data, core/models/h3/demo_model.cpp; format version 2: its DiT and video
VAE at layers of gain about 1, so the outputs depend on the conditioning and the schedule). Its
four files are
loaded into diffusers' and transformers' classes: the DiT (DiffSynth's NF4 file, interleaved QKV)
into MiniMaxH3Transformer3DModel, bf16 with the fp32 islands as diffusers keeps them; the conditioner
(50 NF4 decoder layers and the bf16 vision tower) into Qwen3VLForConditionalGeneration, bf16, with a
51st layer of random weights that hidden_states[50] never reaches; the video VAE into
AutoencoderKLMiniMaxH3 (f32, as the release stores it); the audio VAE's decoder into
AutoencoderKLMiniMaxH3Audio (f32). NF4 weights are dequantised as bitsandbytes does (code x scale,
rounded to bf16; make_h3_dit_reference.dequantize_nf4). The latent statistics of both VAEs are the
release's (minimax_h3.md §E.1, §F), read from Ferry's tables (the demo files carry none, and Ferry
uses the release's for 24 / 32 latent channels).

The blocks themselves run (MiniMaxH3{,FL2VA}TextEncoderStep, ResizeStep, KeyframeVaeEncoderStep,
PrepareLayoutStep, PrepareConditionLatentsStep, PrepareLatentsStep, FL2VAPrepareLatentsStep,
SetTimestepsStep, DenoiseStep, AfterDenoiseStep, VideoDecodeStep, AudioDecodeStep), handed a plain
namespace for the pipeline (the property values of MiniMaxH3ModularPipeline, computed from these
components) with two changes: min_duration 0 (the 5 s floor of the release; Ferry's tiny runs are
22 frames) and a video_processor that returns the [0, 1] pixels as they are (the clamped float
video before any 8-bit conversion). The image processor is transformers' PIL backend
(Qwen2VLImageProcessorPil; torchvision is not installed), shown equal to Ferry's by
make_h3_vision_reference.py.

The request: the prompt below, 256 x 256 (the vision tower's smallest keyframe), 22 frames (7 latent
frames, 37 audio latents a channel), 3 steps = diffusers' num_inference_steps 4 (its schedule has N
grid points and N - 1 forwards; Ferry's r.steps forwards over r.steps + 1 points), video shift 12,
audio shift 3, seed 7 for Ferry's own keyframe noise.

Noise, made the same on both sides:
  initial noise  torch.randn under manual_seed(NOISE_SEED + case), passed to the blocks as `latents`
                 and `audio_latents` (no draw), stored as Ferry's noise file (request.noise):
                 "video" [24, 7, 16, 16], "audio" [74, 32] (the DiT's rows, channel-major)
  keyframes      Ferry draws both of its keyframe noises from its own Philox4x32-10 stream
                 (core/models/noise.cpp): the posterior sample eps from seed 42 at offset k * 6144,
                 the augmentation 0.999 z + 0.001 eps from the request's seed at offset
                 (2 + k) << 40. This script reproduces that stream (philox_normals below, checked
                 against Ferry's own values in tests/models/noise_test.cpp's vectors by the C++ test
                 reading `philox.check`) and injects it: DiagonalGaussianDistribution.sample returns
                 mean + std * eps, and the condition step's randn_tensor returns the augmentation.
Keyframes are integer patterns (keyframe() below; the C++ test draws the same) at the canvas size,
so the ResizeStep keeps them as they are and Ferry's resize is the identity (the test checks it).

Floors (stored per case as `<case>.decoded` `floor`, and printed), each against the bf16 run:
  (a) the same blocks with the transformer and the conditioner in f32 (the same bf16-valued
      weights, f32 arithmetic): how far the reference moves when only its rounding points move,
      which is what Ferry's CPU path changes (f32 accumulation, other bf16 rounding points);
  (b) (a) with every NF4 weight dequantised unrounded (code x scale in f32, as Ferry's
      Backend::linear does; bitsandbytes rounds it to bf16): Ferry's own arithmetic choices.
Each is [video latent max, rms, audio latent max, rms, pixel max, rms, pcm max, rms]: floor [16].

Files (each < 200 KB):
  <case>.noise.safetensors    Ferry's noise file: video [24, 7, 16, 16], audio [74, 32] (F32)
  <case>.latents.safetensors  the final latents as Ferry's save_latents lays them: video
                              [24, 7, 16, 16], audio [2, 32, 37] (F32, normalised)
  <case>.text.safetensors     context [L, 64] (F32 of bf16 values): the conditioner's
                              hidden_states[50] the blocks hand the transformer (Ferry's
                              save_text_states "context"); floor [4]: floors (a) and (b) of it
                              (max, rms each)
  <case>.decoded.safetensors  pixels: [4, 3, 32, 32] F32 (frames 0, 7, 14, 21; every 8th row and
                              column), in [0, 1] clamped as the VideoDecodeStep leaves them;
                              frame_means [3, 22] (each frame's channel mean, all pixels);
                              pcm [2, N/3] (every 3rd sample of the decoded soundtrack, clamped to
                              [-1, 1] as the audio VAE leaves it, cut to the video's length:
                              N = 22 / 24 s x 32 kHz = 29333), pcm_rms [2] (all N samples);
                              floor [16]
  <case>.catch.safetensors    the mistakes the bounds catch (CATCH_VARIANTS: another shift, the
                              keyframes swapped, the stereo channels swapped, ...: the reference
                              run again with one thing changed): for each that moves a measure by
                              more than its bound (FLOOR_FACTOR x the larger floor), that run's
                              output in the measure it moves most, "<measure>:<mistake>", in
                              catch_view's thinned view (F32); metadata moved_over_bound: every
                              mistake's measure and moved / bound (printed too)
  philox.safetensors          check: 16 samples of seed 7 from offset (2 << 40) - 8 (F32)
Cases: t2va (the prompt alone), fl2va (first and last keyframe); --case=NAME runs one (two
processes can share the work). With --catch it writes nothing and prints the floors, a sanity line
(finite, the pixels' 8-bit histogram, the soundtrack's clipping) and the catch table. One thread,
deterministic algorithms. About 3 minutes a case on a busy 2-core machine.
"""

import copy
import json
import os
import re
import sys
import types

import numpy as np
import torch
from PIL import Image
from safetensors import safe_open
from safetensors.numpy import save_file as save_numpy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_h3_dit_reference as dit_ref  # noqa: E402
import make_h3_video_vae_reference as vae_ref  # noqa: E402

from diffusers import (AutoencoderKLMiniMaxH3, AutoencoderKLMiniMaxH3Audio,  # noqa: E402
                       MiniMaxH3Scheduler, MiniMaxH3Transformer3DModel)
from diffusers.modular_pipelines.modular_pipeline import PipelineState  # noqa: E402
from diffusers.modular_pipelines.minimax_h3 import before_denoise  # noqa: E402
from diffusers.modular_pipelines.minimax_h3.before_denoise import (  # noqa: E402
    MiniMaxH3FL2VAPrepareLatentsStep, MiniMaxH3PrepareConditionLatentsStep,
    MiniMaxH3PrepareLatentsStep, MiniMaxH3PrepareLayoutStep, MiniMaxH3SetTimestepsStep)
from diffusers.modular_pipelines.minimax_h3.before_encoder import MiniMaxH3ResizeStep  # noqa: E402
from diffusers.modular_pipelines.minimax_h3.decoders import (  # noqa: E402
    MiniMaxH3AfterDenoiseStep, MiniMaxH3AudioDecodeStep, MiniMaxH3VideoDecodeStep)
from diffusers.modular_pipelines.minimax_h3.denoise import MiniMaxH3DenoiseStep  # noqa: E402
from diffusers.modular_pipelines.minimax_h3.encoders import (  # noqa: E402
    MiniMaxH3FL2VATextEncoderStep, MiniMaxH3KeyframeVaeEncoderStep, MiniMaxH3TextEncoderStep)
from diffusers.modular_pipelines.minimax_h3.modular_pipeline import (  # noqa: E402
    MiniMaxH3ModularPipeline)
from transformers import Qwen2TokenizerFast, Qwen3VLConfig, Qwen3VLForConditionalGeneration  # noqa: E402
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (  # noqa: E402
    Qwen2VLImageProcessorPil)
from transformers.processing_utils import ProcessorMixin  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "data", "h3_pipeline")
PROMPT = "a ferry horn over a calm fjord, gulls wheeling above the wake"
WIDTH = HEIGHT = 256
FRAMES = 22
STEPS = 3                # Ferry's r.steps: forwards
SEED = 7                 # Ferry's request seed (its keyframe augmentation stream)
NOISE_SEED = 20261221    # torch's initial noise
POSTERIOR_SEED = 42      # Ferry's kKeyframePosteriorSeed
KEPT_FRAMES = (0, 7, 14, 21)
PIXEL_STRIDE = 8
PCM_STRIDE = 3
CASES = {"t2va": 0, "fl2va": 1}
FLOOR_FACTOR = 2         # the test's kFloorFactor: bounds are twice the larger floor
CATCH_THIN = 4           # <case>.catch keeps every 4th channel / row / sample (catch_view)

DIT = "minimax-h3-fl2va-nf4.safetensors"
TEXT = "minimax-h3-text-encoder-nf4.safetensors"
VIDEO_VAE = "video_vae_nf4.safetensors"
AUDIO_VAE = "audio_vae_nf4.safetensors"


# ---- Ferry's Philox4x32-10 normals (core/models/noise.cpp restated) ----

def philox_normals(seed, offset, count):
    """The (offset + i)-th standard normal samples of `seed`'s stream, i < count (f32)."""
    index = np.arange(offset, offset + count, dtype=np.uint64)
    counter = index // np.uint64(4)
    lane = (index % np.uint64(4)).astype(np.int64)
    m32 = np.uint64(0xFFFFFFFF)
    c = [counter & m32, counter >> np.uint64(32), np.zeros_like(counter), np.zeros_like(counter)]
    k0, k1 = np.uint64(seed & 0xFFFFFFFF), np.uint64((seed >> 32) & 0xFFFFFFFF)
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c[0]
        p1 = np.uint64(0xCD9E8D57) * c[2]
        hi0, lo0 = p0 >> np.uint64(32), p0 & m32
        hi1, lo1 = p1 >> np.uint64(32), p1 & m32
        c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
        k0 = (k0 + np.uint64(0x9E3779B9)) & m32
        k1 = (k1 + np.uint64(0xBB67AE85)) & m32
    words = np.stack(c, axis=1)  # [count, 4]
    pair = lane // 2 * 2
    rows = np.arange(count)
    u1 = (words[rows, pair].astype(np.float64) + 1.0) / 4294967296.0
    u2 = (words[rows, pair + 1].astype(np.float64) + 1.0) / 4294967296.0
    radius = np.sqrt(-2.0 * np.log(u1))
    angle = 2.0 * np.pi * u2
    return np.where(lane % 2 == 0, radius * np.cos(angle), radius * np.sin(angle)).astype(np.float32)


# ---- the keyframes: integer patterns the C++ test draws too ----

def keyframe(k):
    """[H, W, 3] u8: a ramp across the frame (the first keyframe left to right, the last bottom to
    top) under a fine texture: channel c at (y, x) = ((k ? 255 - y : x) (c + 1) / 2 + ((x ^ y) & 15)
    (k + 1) + 40 c) mod 256. The video VAE's encoder normalises every channel over the frame, so
    only what differs across the frame tells two keyframes apart: two textures of the same
    statistics would encode alike, and the keyframes swapped would go unseen."""
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.int64)
    ramp = (255 - y) if k else x
    out = np.empty((HEIGHT, WIDTH, 3), np.uint8)
    for c in range(3):
        value = ramp * (c + 1) // 2 + ((x ^ y) & 15) * (k + 1) + 40 * c
        out[..., c] = (value % 256).astype(np.uint8)
    return out


# ---- the demo set's files into the reference's classes ----

def read_state(path, exact=False):
    """name -> f32 tensor; bitsandbytes NF4 weights dequantised as bitsandbytes does (code x scale
    rounded to bf16), or with `exact` unrounded (f32, as Ferry's Backend::linear dequantises)."""
    out = {}
    with safe_open(path, "pt") as f:
        names = list(f.keys())
        for name in names:
            if ".quant_state." in name or name.endswith(
                    (".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map")):
                continue
            state_name = name + ".quant_state.bitsandbytes__nf4"
            if state_name in names:
                base = name[: -len("weight")]
                parts = {"weight": f.get_tensor(name).numpy()}
                for suffix in ("absmax", "quant_map", "nested_absmax", "nested_quant_map"):
                    parts["weight." + suffix] = f.get_tensor(base + "weight." + suffix).numpy()
                state = json.loads(bytes(f.get_tensor(state_name).numpy()).decode("utf-8"))
                dequantize = vae_ref.dequantize_nf4 if exact else dit_ref.dequantize_nf4
                out[name] = dequantize(parts, state)
            else:
                out[name] = f.get_tensor(name).float()
    return out


def ferry_table(path, name):
    text = open(os.path.join(ROOT, path)).read()
    body = re.search(name + r"[^{]*\{([^}]*)\}", text).group(1)
    return [float(v.rstrip("f")) for v in re.findall(r"-?[0-9.]+(?:e-?[0-9]+)?f", body)]


DIT_CONFIG = dict(num_attention_heads=1, attention_head_dim=128, hidden_size=128, num_layers=2,
                  num_refiner_layers=1, ffn_dim=128, in_channels=24, audio_in_channels=32,
                  patch_size=(1, 2, 2), text_dim=64, freq_dim=256, time_embed_hidden_dim=64,
                  time_embed_dim=64, rope_freq_dim=16)


def load_transformer(folder, exact=False):
    original = read_state(os.path.join(folder, DIT), exact)
    model = MiniMaxH3Transformer3DModel(**DIT_CONFIG).eval()
    state = dit_ref.diffusers_from_original(original, DIT_CONFIG, "interleaved")
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and all("rope" in k for k in missing), (missing, unexpected)
    return model


def load_text_encoder(folder, exact=False):
    tokenizer = Qwen2TokenizerFast.from_pretrained(os.path.join(folder, "processor"))
    special = {f"{name}_token_id": tokenizer.convert_tokens_to_ids(f"<|{name}|>")
               for name in ("image_pad", "video_pad", "vision_start", "vision_end")}
    text = dict(vocab_size=151936, hidden_size=64, intermediate_size=128, num_hidden_layers=51,
                num_attention_heads=2, num_key_value_heads=1, head_dim=128, rms_norm_eps=1e-6,
                rope_parameters={"rope_type": "default", "rope_theta": 5e6,
                                 "mrope_section": [24, 20, 20], "mrope_interleaved": True})
    vision = dict(depth=27, hidden_size=144, intermediate_size=128, num_heads=2,
                  out_hidden_size=64, patch_size=16, spatial_merge_size=2, temporal_patch_size=2,
                  num_position_embeddings=16, deepstack_visual_indexes=[8, 16, 24])
    # The demo's tokenizer has the vision tokens at ids of its own (not the release's 151655...).
    config = Qwen3VLConfig(text_config=text, vision_config=vision,
                           image_token_id=special["image_pad_token_id"],
                           video_token_id=special["video_pad_token_id"],
                           vision_start_token_id=special["vision_start_token_id"],
                           vision_end_token_id=special["vision_end_token_id"])
    config.text_config._attn_implementation = "eager"
    config.vision_config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = Qwen3VLForConditionalGeneration(config).eval()
    state = read_state(os.path.join(folder, TEXT), exact)
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    # What the file does not hold: layer 50, the final norm and the head (never reached).
    assert all(".layers.50." in k or k.endswith("language_model.norm.weight") or
               k == "lm_head.weight" for k in missing), missing
    return model


def load_video_vae(folder, exact=False):
    official = read_state(os.path.join(folder, VIDEO_VAE), exact)
    state = {}
    for name, v in official.items():
        if name.endswith(("register_tokens.weight", "scale1.weight", "scale2.weight")):
            name = name[: -len(".weight")]
        name = re.sub(r"encoder\.down\.(\d+)\.block\.", r"encoder.down_blocks.\1.resnets.", name)
        name = re.sub(r"encoder\.down\.(\d+)\.downsample\.", r"encoder.down_blocks.\1.downsamplers.0.",
                      name)
        state[name] = v
    c = dict(decoder_num_attention_heads=1, decoder_attention_head_dim=64)
    state = vae_ref.diffusers_from_official(state, c)
    mean = ferry_table("core/models/h3/video_vae_weights.cpp", "kReleaseMean")
    std = ferry_table("core/models/h3/video_vae_weights.cpp", "kReleaseStd")
    model = AutoencoderKLMiniMaxH3(latent_channels=24, block_out_channels=(32,) * 6,
                                   layers_per_block=2, decoder_num_layers=2,
                                   decoder_num_attention_heads=1, decoder_attention_head_dim=64,
                                   decoder_ffn_mult=2, latents_mean=tuple(mean),
                                   latents_std=tuple(std)).eval()
    model.load_state_dict(state, strict=True)
    return model


def load_audio_vae(folder):
    state = read_state(os.path.join(folder, AUDIO_VAE))
    mean = ferry_table("core/models/h3/audio_vae_weights.cpp", "kAudioLatentMean")
    std = ferry_table("core/models/h3/audio_vae_weights.cpp", "kAudioLatentStd")
    model = AutoencoderKLMiniMaxH3Audio(encoder_dim=2, latent_dim=64, decoder_dim=256,
                                        num_attention_heads=2, latents_mean=mean,
                                        latents_std=std).eval()
    decoder = {k: v for k, v in state.items() if k.startswith(("decoder.", "dec_in_proj."))}
    missing, unexpected = model.load_state_dict(decoder, strict=False)
    assert not unexpected and not [k for k in missing if k.startswith(("decoder.", "dec_in"))]
    return model


# ---- the pipeline namespace ----

class Processor:
    """The conditioner's processor as the blocks use it: its image processor and the token-type
    ids (transformers' ProcessorMixin.create_mm_token_type_ids)."""

    def __init__(self, folder, tokenizer):
        config = json.load(open(os.path.join(folder, "processor", "preprocessor_config.json")))
        keep = ("patch_size", "merge_size", "temporal_patch_size", "size", "image_mean",
                "image_std", "do_resize", "do_rescale", "do_normalize")
        self.image_processor = Qwen2VLImageProcessorPil(**{k: config[k] for k in keep})
        self.image_token_ids = [tokenizer.convert_tokens_to_ids("<|image_pad|>")]
        self.video_token_ids = [tokenizer.convert_tokens_to_ids("<|video_pad|>")]
        self.audio_token_ids = []
        self.image_token_id = self.image_token_ids[0]
        self.video_token_id = self.video_token_ids[0]

    create_mm_token_type_ids = ProcessorMixin.create_mm_token_type_ids


def pipeline_namespace(folder, models):
    tokenizer = Qwen2TokenizerFast.from_pretrained(os.path.join(folder, "processor"))
    ns = types.SimpleNamespace(**models)
    ns.tokenizer = tokenizer
    ns.processor = Processor(folder, tokenizer)
    ns.scheduler = MiniMaxH3Scheduler(shift=12.0)
    ns.audio_scheduler = MiniMaxH3Scheduler(shift=3.0)
    ns.video_processor = types.SimpleNamespace(postprocess_video=lambda video, output_type: video)
    ns.image_processor = None  # keyframes already at the canvas: never used
    ns._execution_device = torch.device("cpu")
    ns.config = types.SimpleNamespace(canvas_short_edge=768, canvas_max_pixels=768 * 1344)
    cls = MiniMaxH3ModularPipeline
    for _ in range(3):  # some properties read others
        for name in dir(cls):
            prop = getattr(cls, name, None)
            if isinstance(prop, property) and name not in ("components", "device", "dtype",
                                                           "_execution_device", "config"):
                try:
                    setattr(ns, name, prop.fget(ns))
                except (AttributeError, TypeError):
                    pass
    ns.min_duration = 0.0
    return ns


# ---- one run of the blocks ----

class InjectedKeyframeNoise:
    """Ferry's keyframe noises in place of torch's draws: the posterior sample (seed 42, offset
    k * size) and the condition step's augmentation (the request seed, offset (2 + k) << 40)."""

    def __init__(self, posterior_scale=1.0, augment_scale=1.0):
        self.posterior_k = 0
        self.augment_k = 0
        self.posterior_scale = posterior_scale  # --catch's variants: 0 drops the draw
        self.augment_scale = augment_scale

    def __enter__(self):
        self.saved_randn = before_denoise.randn_tensor
        vae_module = sys.modules[AutoencoderKLMiniMaxH3.__module__]
        self.dist = type(self._posterior_class(vae_module))
        self.saved_sample = self.dist.sample
        noise = self

        def sample(dist, generator=None):
            eps = philox_normals(POSTERIOR_SEED, noise.posterior_k * dist.mean.numel(),
                                 dist.mean.numel())
            noise.posterior_k += 1
            eps = torch.from_numpy(eps).view(dist.mean.shape) * noise.posterior_scale
            return dist.mean + dist.std * eps

        def randn(shape, generator=None, device=None, dtype=None):
            n = int(np.prod(shape))
            eps = philox_normals(SEED, (2 + noise.augment_k) << 40, n)
            noise.augment_k += 1
            return (torch.from_numpy(eps).view(shape) * noise.augment_scale).to(dtype)

        self.dist.sample = sample
        before_denoise.randn_tensor = randn
        return self

    @staticmethod
    def _posterior_class(vae_module):
        for value in vars(vae_module).values():
            if isinstance(value, type) and value.__name__ == "DiagonalGaussianDistribution":
                return value(torch.zeros(1, 2, 1, 1, 1))
        from diffusers.models.autoencoders.vae import DiagonalGaussianDistribution
        return DiagonalGaussianDistribution(torch.zeros(1, 2, 1, 1, 1))

    def __exit__(self, *exc):
        self.dist.sample = self.saved_sample
        before_denoise.randn_tensor = self.saved_randn


def run_blocks(ns, case, noise_video, noise_audio_rows, audio_latents, variant=None):
    """The blocks' run; `variant` (--catch only): prompt, swap_keyframes, posterior_scale,
    augment_scale."""
    variant = variant or {}
    state = PipelineState()
    for key, value in dict(prompt=variant.get("prompt", PROMPT), height=HEIGHT, width=WIDTH, num_frames=FRAMES,
                           num_inference_steps=STEPS + 1, output_type="pt",
                           latents=noise_video[None].clone(),
                           audio_latents=noise_audio_rows.reshape(2, audio_latents, -1)
                           .permute(0, 2, 1).clone(),
                           generator=None).items():
        state.set(key, value)
    if case == "fl2va":
        first, last = (1, 0) if variant.get("swap_keyframes") else (0, 1)
        state.set("image", Image.fromarray(keyframe(first)))
        state.set("last_image", Image.fromarray(keyframe(last)))
        blocks = [MiniMaxH3ResizeStep, MiniMaxH3FL2VATextEncoderStep,
                  MiniMaxH3KeyframeVaeEncoderStep, MiniMaxH3PrepareLayoutStep,
                  MiniMaxH3PrepareConditionLatentsStep, MiniMaxH3PrepareLatentsStep,
                  MiniMaxH3FL2VAPrepareLatentsStep]
    else:
        state.set("keyframe_anchors", ())
        blocks = [MiniMaxH3TextEncoderStep, MiniMaxH3PrepareLayoutStep,
                  MiniMaxH3PrepareLatentsStep]
    blocks += [MiniMaxH3SetTimestepsStep, MiniMaxH3DenoiseStep]
    with torch.no_grad(), InjectedKeyframeNoise(variant.get("posterior_scale", 1.0),
                                                variant.get("augment_scale", 1.0)) as injected:
        for block in blocks:
            ns, state = block()(ns, state)
        text = state.get("prompt_embeds")[0].float().clone()  # [L, 64], bf16 values
        # Each keyframe drew its posterior sample and its augmentation from Ferry's stream.
        keyframes = 2 if case == "fl2va" else 0
        assert injected.posterior_k == keyframes and injected.augment_k == keyframes
        # The final latents before the decode steps reshape them (Ferry's save_latents layout).
        after = MiniMaxH3AfterDenoiseStep()
        ns, state = after(ns, state)
        video = state.get("latents")[0].float().clone()
        audio = state.get("audio_latents").float().clone()  # [2, 32, A]
        for block in (MiniMaxH3VideoDecodeStep, MiniMaxH3AudioDecodeStep):
            ns, state = block()(ns, state)
    pixels = state.get("videos")[0].float()  # [3, F, H, W] in [0, 1]
    # The soundtrack as long as the video (Ferry's: the decoder's 800 x A samples cut there).
    pcm = state.get("audio")[0].float()[:, : FRAMES * 32000 // 24]  # [2, N]
    return dict(video=video, audio=audio, pixels=pixels, pcm=pcm, text=text)


def case_noise(index):
    audio_latents = before_denoise.audio_latent_num_frames(FRAMES)
    g = torch.Generator().manual_seed(NOISE_SEED + index)
    frames = before_denoise.video_latent_num_frames(FRAMES, 17, 5)
    noise_video = torch.randn(24, frames, HEIGHT // 16, WIDTH // 16, generator=g)
    noise_audio = torch.randn(2 * audio_latents, 32, generator=g)
    return noise_video, noise_audio, audio_latents


CATCH_VARIANTS = {
    "t2va": {"video shift 6": dict(shift=6.0), "audio shift 12": dict(audio_shift=12.0),
             "audio noise rows time-major": dict(audio_rows_time_major=True),
             "another prompt": dict(prompt="a ferry horn over a calm fjord"),
             "another prompt, same length": dict(prompt=PROMPT.replace("wake", "lake")),
             "stereo channels swapped": dict(swap_stereo=True)},
    "fl2va": {"keyframes swapped": dict(swap_keyframes=True),
              "no augmentation noise": dict(augment_scale=0.0),
              "posterior mean (no sample)": dict(posterior_scale=0.0),
              "video shift 6": dict(shift=6.0),
              "stereo channels swapped": dict(swap_stereo=True)},
}
MEASURES = ("text", "video", "audio", "pixels", "pcm")


def kept_pixels(pixels):
    """[3, F, H, W] -> the test's [4, 3, 32, 32]: frames KEPT_FRAMES, every PIXEL_STRIDE-th."""
    return pixels[:, list(KEPT_FRAMES), ::PIXEL_STRIDE, ::PIXEL_STRIDE].permute(1, 0, 2, 3)


def catch_view(run, key):
    """A measure as <case>.catch keeps it (the C++ test's catch_view): the text states and audio
    latent whole, every CATCH_THIN-th channel of the video latent, every CATCH_THIN-th row of the
    kept pixels, every CATCH_THIN-th kept sample of each soundtrack channel."""
    if key == "video":
        return run["video"][::CATCH_THIN]
    if key == "pixels":
        return kept_pixels(run["pixels"])[:, :, ::CATCH_THIN]
    if key == "pcm":
        return run["pcm"][:, ::PCM_STRIDE][:, ::CATCH_THIN]
    return run[key]


def run_variant(folder, models, case, noise, v):
    ns = pipeline_namespace(folder, models)
    ns.scheduler = MiniMaxH3Scheduler(shift=v.get("shift", 12.0))
    ns.audio_scheduler = MiniMaxH3Scheduler(shift=v.get("audio_shift", 3.0))
    video, audio, latents = noise
    if v.get("audio_rows_time_major"):  # rows (j, s) read as (s, j)
        audio = audio.reshape(latents, 2, -1).permute(1, 0, 2).reshape(2 * latents, -1)
    out = run_blocks(ns, case, video, audio, latents, variant=v)
    if v.get("swap_stereo"):
        out["pcm"] = out["pcm"].flip(0)
    return out


def measure_floors(ref, low, ferry_like):
    """Per measure, the larger of floors (a) and (b): [max, rms]."""
    return {k: [max(x, y) for x, y in zip(difference(low[k], ref[k]),
                                          difference(ferry_like[k], ref[k]))] for k in MEASURES}


def catch_variants(folder, models, case, noise, ref, floors):
    """Runs each of the case's mistakes. Per variant and measure: how far it moves the catch view
    over the test's bounds (FLOOR_FACTOR x the larger floor; the larger of the max and rms
    ratios, infinite where the shapes differ: the test asserts them). Returns {variant: (measure,
    ratio, its catch view)} for the measure that moves most."""
    caught = {}
    for name, v in CATCH_VARIANTS[case].items():
        out = run_variant(folder, models, case, noise, v)
        ratios = {}
        for key in MEASURES:
            if out[key].shape != ref[key].shape:
                ratios[key] = float("inf")
                continue
            moved = difference(catch_view(out, key), catch_view(ref, key))
            ratios[key] = max(moved[i] / (FLOOR_FACTOR * floors[key][i]) for i in (0, 1))
        best = max(ratios, key=ratios.get)
        caught[name] = (best, ratios[best], catch_view(out, best))
        print(f"catch {case} {name}: moved / bound " +
              ", ".join(f"{k} {r:.3g}" for k, r in ratios.items()) + f"; best {best}")
    return caught


def catch(folder, models, f32, exact, cases):
    """--catch: how far the reference moves under mistakes Ferry could make, against the test's
    bounds (FLOOR_FACTOR x the floors); writes nothing."""
    for case in cases:
        noise = case_noise(CASES[case])
        ref = run_blocks(pipeline_namespace(folder, models), case, *noise)
        sanity(case, ref)
        low = run_blocks(pipeline_namespace(folder, f32), case, *noise)
        ferry_like = run_blocks(pipeline_namespace(folder, exact), case, *noise)
        floors = measure_floors(ref, low, ferry_like)
        print(f"floors {case}: " + ", ".join(f"{k} {floors[k][0]:.3g}/{floors[k][1]:.3g}"
                                            for k in MEASURES))
        catch_variants(folder, models, case, noise, ref, floors)


def sanity(case, ref):
    """Whether the demo's output is a clip: finite, the pixels' 8-bit histogram (saturated?), the
    soundtrack's level and clipping."""
    pixels = ref["pixels"]
    finite = all(bool(torch.isfinite(ref[k]).all()) for k in MEASURES)
    levels = (pixels * 255).round().clamp(0, 255).to(torch.int64).flatten()
    hist = torch.bincount(levels, minlength=256).double() / levels.numel()
    deciles = [round(float(hist[i * 26:(i + 1) * 26].sum()), 3) for i in range(10)]
    print(f"sanity {case}: finite {finite}; |latent| max {ref['video'].abs().max():.3g} rms "
          f"{ref['video'].pow(2).mean().sqrt():.3g}; pixels mean {pixels.mean():.3f} std "
          f"{pixels.std():.3f}, at 0 {float(hist[0]):.3f}, at 255 {float(hist[255]):.3f}, "
          f"tenths {deciles}; pcm rms {ref['pcm'].pow(2).mean().sqrt():.3g}, at +-1 "
          f"{float((ref['pcm'].abs() >= 0.999).double().mean()):.3f}")


def difference(a, b):
    d = (a.double() - b.double()).abs()
    return float(d.max()), float(d.pow(2).mean().sqrt())


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    cases = [a[len("--case="):] for a in sys.argv[1:] if a.startswith("--case=")] or list(CASES)
    if len(args) != 1:
        sys.exit(__doc__.split("\n\n")[1])
    folder = args[0]
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(OUT, exist_ok=True)
    transformer = load_transformer(folder)
    text_encoder = load_text_encoder(folder)
    vae, audio_vae = load_video_vae(folder), load_audio_vae(folder)
    f32 = dict(transformer=transformer, text_encoder=text_encoder, vae=vae, audio_vae=audio_vae)
    bf16 = dict(transformer=dit_ref.mixed(transformer),
                text_encoder=copy.deepcopy(text_encoder).to(torch.bfloat16), vae=vae,
                audio_vae=audio_vae)
    exact = dict(transformer=load_transformer(folder, exact=True),
                 text_encoder=load_text_encoder(folder, exact=True),
                 vae=load_video_vae(folder, exact=True), audio_vae=audio_vae)
    if "--catch" in sys.argv:
        return catch(folder, bf16, f32, exact, cases)
    save_numpy({"check": philox_normals(SEED, (2 << 40) - 8, 16)},
               os.path.join(OUT, "philox.safetensors"))
    for case in cases:
        index = CASES[case]
        ns = pipeline_namespace(folder, bf16)
        noise_video, noise_audio, audio_latents = case_noise(index)
        ref = run_blocks(ns, case, noise_video, noise_audio, audio_latents)
        low = run_blocks(pipeline_namespace(folder, f32), case, noise_video, noise_audio,
                         audio_latents)
        ferry_like = run_blocks(pipeline_namespace(folder, exact), case, noise_video,
                                noise_audio, audio_latents)
        floor = []
        for run in (low, ferry_like):
            for key in ("video", "audio", "pixels", "pcm"):
                floor += difference(run[key], ref[key])
        text_floor = difference(low["text"], ref["text"]) + difference(ferry_like["text"],
                                                                       ref["text"])
        save_numpy({"context": ref["text"].contiguous().numpy(),
                    "floor": np.asarray(text_floor, np.float32)},
                   os.path.join(OUT, f"{case}.text.safetensors"))
        print(f"{case}: text states {tuple(ref['text'].shape)} |y| max "
              f"{ref['text'].abs().max():.3g}, floors {np.round(text_floor, 5).tolist()}")
        print(f"{case}: |latent| max {ref['video'].abs().max():.3g}, |audio latent| max "
              f"{ref['audio'].abs().max():.3g}, pixels mean {ref['pixels'].mean():.3f}, pcm rms "
              f"{ref['pcm'].pow(2).mean().sqrt():.3g}; floors (f32 arithmetic) "
              f"{np.round(floor[:8], 5).tolist()}, (and unrounded NF4) "
              f"{np.round(floor[8:], 5).tolist()}")
        sanity(case, ref)
        caught = catch_variants(folder, bf16, case, (noise_video, noise_audio, audio_latents), ref,
                                measure_floors(ref, low, ferry_like))
        # What the test holds Ferry away from: each caught mistake's output, in the measure that
        # moves most (a mistake caught only by a shape the test asserts has nothing to keep).
        kept = {f"{key}:{name}": view.contiguous().float().numpy()
                for name, (key, ratio, view) in caught.items() if np.isfinite(ratio) and ratio > 1}
        save_numpy(kept, os.path.join(OUT, f"{case}.catch.safetensors"),
                   metadata={"moved_over_bound": json.dumps(
                       {name: [key, round(ratio, 3)] for name, (key, ratio, _) in caught.items()})})
        save_numpy({"video": noise_video.numpy(), "audio": noise_audio.numpy()},
                   os.path.join(OUT, f"{case}.noise.safetensors"))
        save_numpy({"video": ref["video"].contiguous().numpy(),
                    "audio": ref["audio"].contiguous().numpy()},
                   os.path.join(OUT, f"{case}.latents.safetensors"))
        pixels = ref["pixels"]
        kept = pixels[:, list(KEPT_FRAMES), ::PIXEL_STRIDE, ::PIXEL_STRIDE].permute(1, 0, 2, 3)
        save_numpy({"pixels": kept.contiguous().numpy(),
                    "frame_means": pixels.double().mean(dim=(2, 3)).float().numpy(),
                    "pcm": ref["pcm"][:, ::PCM_STRIDE].contiguous().numpy(),
                    "pcm_rms": ref["pcm"].double().pow(2).mean(dim=1).sqrt().float().numpy(),
                    "floor": np.asarray(floor, np.float32)},
                   os.path.join(OUT, f"{case}.decoded.safetensors"),
                   metadata={"generator": "tools/reference/make_h3_pipeline_reference.py "
                                          f"(torch {torch.__version__})",
                             "pixels_shape": json.dumps(list(pixels.shape)),
                             "pcm_samples": json.dumps(ref["pcm"].shape[1])})
    for f in os.listdir(OUT):
        os.chmod(os.path.join(OUT, f), 0o644)


if __name__ == "__main__":
    main()
