#!/usr/bin/env python3
"""Writes tests/data/h3/vision/: the keyframe path of H3's conditioner (minimax_h3.md §B.4-B.5) as
transformers runs it, for tests/models/h3_vision_test.cpp.

    tools/reference/.venv/bin/python tools/reference/make_h3_vision_reference.py

1. Image preprocessing: transformers' Qwen2VLImageProcessorPil (the processor's PIL backend: PIL's
   bicubic resize on the 8-bit image, rescale 1/255 in f64 then f32, (x - 0.5) / 0.5 in f32,
   patches in merge-block order, the still repeated on the temporal axis). torchvision is not
   installed here, so the torchvision backend (whose uint8 antialiased bicubic is written to equal
   PIL's) cannot be run. Cases `pre.K`: H3's processor (patch 16, merge 2, 65,536-16,777,216 px)
   and a small one (patch 4, merge 2, 1,024-4,096 px), on random smooth images that are resized
   down, up, along one axis only, or kept. The processor's f32 values are all (u8/255 - 0.5)/0.5
   of one byte (asserted here), so `pre.K.patches` stores those bytes ([N, C*T*P*P] U8), and
   `pre.K.image` the input (U8 [H, W, 3]), `pre.K.grid` (I32 [t, h, w]), `pre.K.config` (I32
   [patch, merge, temporal, min_pixels, max_pixels]).
2. The vision tower: Qwen3VLVisionModel with random weights in two configurations:
     tiny  hidden 32, 2 heads of 16, MLP 48, depth 4, DeepStack after blocks 0, 2, 3, patch 16,
           an 8x8 position table, out 16 (the text encoder's tiny/ hidden size)
     wide  hidden 72, 1 head of 72 (the real head size: 18 rotary frequencies per axis), MLP 64,
           depth 3, DeepStack after blocks 0, 1, 2, patch 16, the real 48x48 position table, out 64
   Weights normal under torch.manual_seed(SEED) with scales that make each part matter, rounded
   to bf16. `tower.C.safetensors` holds them under the release's names (model.visual.*).
   Keyframe sets K (below): `keyframes.K.i` (U8 [H, W, 3], the i-th image; the tests preprocess
   them with Ferry, which the cases of 1. show equal to the processor). Cases `tower.C.K`:
   `grids` (I32 [images, 3], the processor's), `f32` / `bf16` (F32 [N/4, out]: the merger's output of the f32 and
   the bf16 model), `deepstack.f32` / `deepstack.bf16` (F32 [3, N/4, out]).
3. The whole conditioner: Qwen3VLModel = the tower (tiny, out 16 or a copy with out 64) + the
   language model of tests/data/h3/text_encoder/{tiny,gqa} (make_h3_text_encoder_reference.py's
   weights, rebuilt from its seed), on H3's presentation of a prompt with one keyframe or two
   keyframes of different canvases, hidden_states[50] of the bf16 and the f32 model (and for gqa
   of the NF4 file's dequantised language model). `C.visual.safetensors` holds the tower under the
   release's names; the language model is the committed text_encoder file. Cases `cond.C.K`:
   `grids`, `ids`, `positions` (I32 [3, L]), `bf16`, `f32` (F32 [L, hidden]), `nf4.bf16`, `nf4.f32`.
Fixed seeds, one thread, deterministic algorithms.
"""

import os
import sys

import numpy as np
import torch
from PIL import Image
from safetensors.numpy import save_file as save_numpy
from safetensors.torch import save_file as save_torch
from tokenizers import Tokenizer
from transformers import Qwen3VLConfig, Qwen3VLModel
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_h3_text_encoder_reference as te  # noqa: E402

SEED = 20261204
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "data", "h3", "vision")
H3_PROCESSOR = dict(patch_size=16, merge_size=2, temporal_patch_size=2,
                    size={"shortest_edge": 65536, "longest_edge": 16777216},
                    image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
SMALL_PROCESSOR = dict(patch_size=4, merge_size=2, temporal_patch_size=2,
                       size={"shortest_edge": 1024, "longest_edge": 4096},
                       image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
# (processor, height, width): down both axes, up (under min pixels), rounding only (one axis up,
# one down), kept as is (already on multiples of 32), over max pixels.
PRE_CASES = {
    "h3_up": (H3_PROCESSOR, 170, 230),
    "h3_round": (H3_PROCESSOR, 300, 262),
    "h3_kept": (H3_PROCESSOR, 256, 320),
    "h3_down": (H3_PROCESSOR, 333, 431),
    "small_down": (SMALL_PROCESSOR, 150, 97),
    "small_up": (SMALL_PROCESSOR, 21, 40),
    "small_wide": (SMALL_PROCESSOR, 33, 131),
    "small_odd": (SMALL_PROCESSOR, 61, 59),
}
TOWERS = {
    "tiny": dict(depth=4, hidden_size=32, intermediate_size=48, num_heads=2, out_hidden_size=16,
                 num_position_embeddings=64, deepstack_visual_indexes=[0, 2, 3]),
    "wide": dict(depth=3, hidden_size=72, intermediate_size=64, num_heads=1, out_hidden_size=64,
                 num_position_embeddings=2304, deepstack_visual_indexes=[0, 1, 2]),
}
# Keyframe sets (height, width) for the tower and the conditioner: one off-canvas keyframe; two
# keyframes at different canvases.
KEYFRAMES = {"one": [(250, 330)], "two": [(256, 256), (320, 224)]}
CONDITIONERS = {"tiny": ("tiny", 16), "gqa": ("gqa", 64)}


def smooth_image(rng, h, w):
    """A random RGB image with structure at several scales (so resampling matters) and noise."""
    coarse = rng.uniform(0, 255, size=(max(2, h // 16), max(2, w // 16), 3))
    base = np.asarray(Image.fromarray(coarse.astype(np.uint8)).resize((w, h), Image.BILINEAR),
                      np.float64)
    noise = rng.normal(0, 40, size=(h, w, 3))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def processor(config):
    return Qwen2VLImageProcessorPil(do_resize=True, do_rescale=True, do_normalize=True,
                                    do_convert_rgb=True, **config)


def preprocess(config, image):
    out = processor(config)(images=[Image.fromarray(image)], return_tensors="np")
    return out["pixel_values"].astype(np.float32), out["image_grid_thw"].astype(np.int32)


def as_bytes(pixels):
    """The byte each processor value is (u8/255 - 0.5)/0.5 of; asserts the values are exactly that."""
    table = ((np.arange(256, dtype=np.float64) * (1 / 255)).astype(np.float32) -
             np.float32(0.5)) / np.float32(0.5)
    codes = np.searchsorted(table, pixels)
    codes = np.clip(codes, 0, 255)
    assert np.array_equal(table[codes], pixels), "a processor value is not one byte's"
    return codes.astype(np.uint8)


def vision_config(t):
    return dict(hidden_act="gelu_pytorch_tanh", in_channels=3, patch_size=16, spatial_merge_size=2,
                temporal_patch_size=2, **t)


def randomize_tower(visual, seed):
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in visual.named_parameters():
            if name.endswith("pos_embed.weight"):
                p.normal_(0.0, 0.5)
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.normal_(0.0, 0.1)
            else:
                fan_in = int(np.prod(p.shape[1:]))
                std = 1.0 / np.sqrt(fan_in)
                if name.endswith(("attn.proj.weight", "linear_fc2.weight")) and "blocks" in name:
                    std *= 0.5
                p.normal_(0.0, std)
            p.copy_(p.to(torch.bfloat16).to(torch.float32))


def tower_model(t, seed):
    config = Qwen3VLConfig(text_config=dict(vocab_size=16, hidden_size=t["out_hidden_size"],
                                            intermediate_size=16, num_hidden_layers=1,
                                            num_attention_heads=2, num_key_value_heads=2,
                                            head_dim=8),
                           vision_config=vision_config(t))
    config.vision_config._attn_implementation = "eager"
    model = Qwen3VLModel(config).eval()
    randomize_tower(model.visual, seed)
    return model.visual


def to_bf16(model):
    """The model in bf16 as from_pretrained(dtype=bf16) loads it: the parameters bf16, the rotary
    inv_freq buffers (computed in f32 at init, not in the checkpoint) kept f32."""
    buffers = {n: b.clone() for n, b in model.named_buffers() if "inv_freq" in n}
    model.to(torch.bfloat16)
    for n, b in buffers.items():
        owner, attr = n.rsplit(".", 1)
        setattr(model.get_submodule(owner), attr, b)
    return model


def visual_state(visual):
    return {"model.visual." + k: v.detach().to(torch.bfloat16).contiguous()
            for k, v in visual.state_dict().items()}


def keyframe_images(name):
    rng = np.random.default_rng(SEED + 2)
    images = {k: [smooth_image(rng, h, w) for h, w in c] for k, c in KEYFRAMES.items()}
    return images[name]


def keyframe_pixels(name):
    pixels, grids = [], []
    for image in keyframe_images(name):
        p, g = preprocess(H3_PROCESSOR, image)
        as_bytes(p)  # the preprocessing test's premise holds for these too
        pixels.append(p)
        grids.append(g)
    return np.concatenate(pixels), np.concatenate(grids)


def run_tower(visual, pixels, grids):
    with torch.no_grad():
        dtype = next(visual.parameters()).dtype
        out = visual(torch.from_numpy(pixels).to(dtype), grid_thw=torch.from_numpy(grids).long())
        return (out.pooler_output.float().numpy(),
                np.stack([d.float().numpy() for d in out.deepstack_features]))


def rel(a, b):
    return np.sqrt(((a - b) ** 2).sum() / (b ** 2).sum())


def conditioner_model(text_name, out, seed, tokenizer):
    c = te.CONFIGS[text_name]
    config = te.qwen_config(c)
    vision = vision_config(dict(TOWERS["tiny"], out_hidden_size=out))
    config = Qwen3VLConfig(text_config=config.text_config.to_dict(), vision_config=vision,
                           image_token_id=tokenizer.token_to_id("<|image_pad|>"),
                           video_token_id=tokenizer.token_to_id("<|video_pad|>"),
                           vision_start_token_id=tokenizer.token_to_id("<|vision_start|>"),
                           vision_end_token_id=tokenizer.token_to_id("<|vision_end|>"))
    config.text_config._attn_implementation = "eager"
    config.vision_config._attn_implementation = "eager"
    model = Qwen3VLModel(config).eval()
    # The language model: the text encoder script's weights (its seed), as committed.
    model.language_model.load_state_dict(te.build_model(c).language_model.state_dict())
    committed = os.path.join(te.OUT, text_name, "release.safetensors")
    from safetensors.torch import load_file
    for k, v in load_file(committed).items():
        if k.startswith("model.language_model."):
            mine = model.language_model.state_dict()[k[len("model.language_model."):]]
            assert torch.equal(mine.to(torch.bfloat16), v), f"{k} differs from {committed}"
    randomize_tower(model.visual, seed)
    return model


def presentation(tokenizer, grids):
    """H3's presentation (core/models/h3/presentation.cpp) of te.PROMPT with keyframes of these
    processor grids: "<Picture k>: ", <|vision_start|>, (h/2)(w/2) <|image_pad|>, <|vision_end|>."""
    encode = lambda text: tokenizer.encode(text, add_special_tokens=False).ids  # noqa: E731
    ids = []
    for k, (_, gh, gw) in enumerate(grids):
        ids += encode(f"<Picture {k + 1}>: ")
        ids += [tokenizer.token_to_id("<|vision_start|>")]
        ids += [tokenizer.token_to_id("<|image_pad|>")] * ((gh // 2) * (gw // 2))
        ids += [tokenizer.token_to_id("<|vision_end|>")]
    return ids + encode(te.PROMPT)


def hidden_50(model, ids, pixels, grids):
    with torch.no_grad():
        x = torch.tensor([ids], dtype=torch.long)
        types = (x == model.config.image_token_id).int()
        dtype = model.visual.patch_embed.proj.weight.dtype
        out = model(input_ids=x, pixel_values=torch.from_numpy(pixels).to(dtype),
                    image_grid_thw=torch.from_numpy(grids).long(), mm_token_type_ids=types,
                    output_hidden_states=True)
        assert len(out.hidden_states) == te.LAYERS + 1
        return out.hidden_states[te.OUTPUT_LAYER][0].float().numpy()


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(OUT, exist_ok=True)
    ref = {}
    rng = np.random.default_rng(SEED)
    for name, (config, h, w) in PRE_CASES.items():
        image = smooth_image(rng, h, w)
        pixels, grid = preprocess(config, image)
        key = f"pre.{name}"
        ref[key + ".image"] = image
        ref[key + ".patches"] = as_bytes(pixels)
        ref[key + ".grid"] = grid[0]
        ref[key + ".config"] = np.asarray(
            [config["patch_size"], config["merge_size"], config["temporal_patch_size"],
             config["size"]["shortest_edge"], config["size"]["longest_edge"]], np.int32)
        print(f"{key:20s} {h}x{w} -> grid {grid[0].tolist()}")

    for tname, t in TOWERS.items():
        visual = tower_model(t, SEED + 1)
        save_torch(visual_state(visual), os.path.join(OUT, f"tower.{tname}.safetensors"))
        visual_bf16 = to_bf16(tower_model(t, SEED + 1))
        for kname in KEYFRAMES:
            pixels, grids = keyframe_pixels(kname)
            key = f"tower.{tname}.{kname}"
            ref[key + ".grids"] = grids
            merged, deep = run_tower(visual, pixels, grids)
            merged16, deep16 = run_tower(visual_bf16, pixels, grids)
            ref[key + ".f32"], ref[key + ".deepstack.f32"] = merged, deep
            ref[key + ".bf16"], ref[key + ".deepstack.bf16"] = merged16, deep16
            print(f"{key:20s} N={pixels.shape[0]}  bf16 vs f32: merged rel rms "
                  f"{rel(merged16, merged):.5f} max {np.abs(merged16 - merged).max():.4f}; "
                  f"deepstack rel rms {rel(deep16, deep):.5f}")

    for kname in KEYFRAMES:
        for i, image in enumerate(keyframe_images(kname)):
            ref[f"keyframes.{kname}.{i}"] = image
    tokenizer = Tokenizer.from_file(te.TOKENIZER)
    for cname, (text_name, out) in CONDITIONERS.items():
        model = conditioner_model(text_name, out, SEED + 3, tokenizer)
        save_torch(visual_state(model.visual), os.path.join(OUT, f"{cname}.visual.safetensors"))
        model_bf16 = to_bf16(conditioner_model(text_name, out, SEED + 3, tokenizer))
        model_nf4 = None
        if text_name == "gqa":
            _, meant = te.nf4_files(te.lm_state(te.build_model(te.CONFIGS[text_name])))
            model_nf4 = conditioner_model(text_name, out, SEED + 3, tokenizer)
            model_nf4.language_model.load_state_dict(meant, strict=False)
        for kname in KEYFRAMES:
            pixels, grids = keyframe_pixels(kname)
            ids = presentation(tokenizer, grids)
            x = torch.tensor([ids], dtype=torch.long)
            types = (x == tokenizer.token_to_id("<|image_pad|>")).int()
            positions, _ = model.get_rope_index(x, types, image_grid_thw=torch.from_numpy(grids))
            key = f"cond.{cname}.{kname}"
            ref[key + ".grids"] = grids
            ref[key + ".ids"] = np.asarray(ids, np.int32)
            ref[key + ".positions"] = positions[:, 0, :].numpy().astype(np.int32)
            ref[key + ".f32"] = hidden_50(model, ids, pixels, grids)
            ref[key + ".bf16"] = hidden_50(model_bf16, ids, pixels, grids)
            if model_nf4 is not None:
                ref[key + ".nf4.f32"] = hidden_50(model_nf4, ids, pixels, grids)
                ref[key + ".nf4.bf16"] = hidden_50(to_bf16(model_nf4), ids, pixels, grids)
                model_nf4.to(torch.float32)
            d = ref[key + ".bf16"] - ref[key + ".f32"]
            print(f"{key:20s} L={len(ids)} grids {grids.tolist()}  bf16 vs f32: rel rms "
                  f"{rel(ref[key + '.bf16'], ref[key + '.f32']):.5f} max {np.abs(d).max():.4f}")
    save_numpy(ref, os.path.join(OUT, "reference.safetensors"),
               metadata={"generator": f"tools/reference/make_h3_vision_reference.py "
                                      f"(torch {torch.__version__}, seed {SEED})"})


if __name__ == "__main__":
    main()
