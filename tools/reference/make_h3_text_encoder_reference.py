#!/usr/bin/env python3
"""Writes tests/data/h3/text_encoder/: tiny Qwen3-VL language models with random weights in the key
layouts H3's conditioner files use, and the hidden states tests/models/h3_text_encoder_test.cpp
compares Ferry with.

    tools/reference/.venv/bin/python tools/reference/make_h3_text_encoder_reference.py

The model is transformers' Qwen3VLModel (minimax_h3.md §B.1-B.3; its language_model is the
Qwen3VLTextModel H3 runs, its get_rope_index gives the 3-axis positions) at the tiny sizes of §H.2:
51 decoder layers, because H3 reads hidden_states[50] (the output of the 50th decoder layer, before
the final norm). Three configurations:
  tiny   §H.2's text config: hidden 16, 2 heads of 8, 2 KV heads, MLP 16, mrope sections [1,1,2]
  gqa    hidden 64, 4 query heads of 16 sharing 1 KV head, MLP 128, sections [2,3,3]; every Linear's
         input is a multiple of 64, so bitsandbytes NF4 blocks do not straddle rows (as in the
         32B model) and this one is also written as DiffSynth's NF4 file
  wide   hidden 16, 2 query heads of 128 sharing 1 KV head, MLP 16, sections [24,20,20] (the 32B
         model's head geometry: Qwen3-VL's rotary layout exactly)
Each has rope_theta 5e6, RMSNorm eps 1e-6 and 3072 embedding rows (the committed tokenizer of
tests/data/h3/tokenizer has 3033 ids). Weights: normal draws under torch.manual_seed(SEED) with
scales that make every layer matter (Linear std 1/sqrt(in), o_proj and down_proj halved, norm
weights 1 + 0.2 N(0,1), embeddings N(0,1)), rounded to bf16 (the release dtype).

Files per configuration C:
  C/release.safetensors   the release's names (model.language_model.{embed_tokens, layers.N.*, norm},
                          lm_head.weight), all 51 layers, bf16
  tiny/comfy.safetensors  ComfyUI's text-encoder names (model.embed_tokens, model.layers.0-49.*; no
                          norm, no lm_head), bf16
  gqa/nf4.safetensors     DiffSynth's NF4 file: model.language_model.layers.0-49.* with the seven
                          Linears as bitsandbytes NF4 (blocksize 64, nested; the numpy quantizer of
                          make_bnb4_reference.py), embed_tokens and norms bf16; no norm, no lm_head
  reference.safetensors   per case K: `K.ids` (I32), `K.positions` (I32 [3, L], get_rope_index's),
                          `K.bf16` (F32 [L, hidden]: hidden_states[50] of the bf16 model), `K.f32`
                          (the same weights in f32); for the vision cases `K.vision_rows` (I32, the
                          <|image_pad|> rows), `K.vision_embeds` (F32 [N, hidden], replacing the
                          embedding lookup at those rows, bf16 values) and `K.deepstack` (F32
                          [3, N, hidden], added after decoder layers 0, 1, 2 at those rows); for gqa
                          also `K.nf4.bf16` / `K.nf4.f32` (the NF4 file's dequantised weights)
Cases: text (T2VA: the prompt alone), one_image (I2VA: one keyframe of 256x320 px, 8x10 = 80 vision
tokens), two_images (FL2VA-like: keyframes of 256x256 and 320x256 px, 64 and 80 tokens), each with
the ids of H3's presentation (core/models/h3/presentation.cpp restated) from the committed
tokenizer. Fixed seeds, one thread, deterministic algorithms. About 8 minutes on a busy 2-core
machine (user time 15 s).
"""

import json
import os
import sys

import numpy as np
import torch
from safetensors.numpy import save_file as save_numpy
from safetensors.torch import save_file as save_torch
from tokenizers import Tokenizer
from transformers import Qwen3VLConfig, Qwen3VLModel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_bnb4_reference as bnb4  # noqa: E402

SEED = 20261203
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "data", "h3", "text_encoder")
TOKENIZER = os.path.join(ROOT, "tests", "data", "h3", "tokenizer", "tokenizer.json")
LAYERS = 51
OUTPUT_LAYER = 50  # hidden_states[50]
VOCAB = 3072
DEEPSTACK = 3
LINEARS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
CONFIGS = {
    "tiny": dict(hidden_size=16, intermediate_size=16, num_attention_heads=2,
                 num_key_value_heads=2, head_dim=8, mrope_section=[1, 1, 2]),
    "gqa": dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                num_key_value_heads=1, head_dim=16, mrope_section=[2, 3, 3]),
    "wide": dict(hidden_size=16, intermediate_size=16, num_attention_heads=2,
                 num_key_value_heads=1, head_dim=128, mrope_section=[24, 20, 20]),
}
PROMPT = ("A red fox trots across a snowy field at dawn, <d>its breath</d> steaming; "
          "the camera pans left. 狐狸在雪地上奔跑。")
# Keyframe canvases (height, width) in pixels per case; H3 puts them on multiples of 32.
CASES = {"text": [], "one_image": [(256, 320)], "two_images": [(256, 256), (320, 256)]}


def qwen_config(c):
    text = dict(vocab_size=VOCAB, hidden_size=c["hidden_size"],
                intermediate_size=c["intermediate_size"], num_hidden_layers=LAYERS,
                num_attention_heads=c["num_attention_heads"],
                num_key_value_heads=c["num_key_value_heads"], head_dim=c["head_dim"],
                rms_norm_eps=1e-6,
                rope_parameters={"rope_type": "default", "rope_theta": 5e6,
                                 "mrope_section": c["mrope_section"], "mrope_interleaved": True})
    vision = dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2,
                  out_hidden_size=c["hidden_size"], patch_size=16, spatial_merge_size=2,
                  temporal_patch_size=2, num_position_embeddings=64, deepstack_visual_indexes=[0])
    config = Qwen3VLConfig(text_config=text, vision_config=vision)
    config.text_config._attn_implementation = "eager"
    return config


def build_model(c):
    torch.manual_seed(SEED)
    model = Qwen3VLModel(qwen_config(c)).eval()
    lm = model.language_model
    with torch.no_grad():
        lm.embed_tokens.weight.normal_(0.0, 1.0)
        for layer in lm.layers:
            for name in LINEARS:
                lin = layer.get_submodule(name)
                std = 1.0 / np.sqrt(lin.in_features)
                if name.endswith(("o_proj", "down_proj")):
                    std *= 0.5
                lin.weight.normal_(0.0, std)
            for norm in (layer.input_layernorm, layer.post_attention_layernorm,
                         layer.self_attn.q_norm, layer.self_attn.k_norm):
                norm.weight.copy_(1.0 + 0.2 * torch.randn_like(norm.weight))
        lm.norm.weight.copy_(1.0 + 0.2 * torch.randn_like(lm.norm.weight))
        for p in lm.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    return model


def lm_state(model):
    return {k: v.detach().clone() for k, v in model.language_model.state_dict().items()}


def release_state(lm):
    out = {"model.language_model." + k: v for k, v in lm.items()}
    torch.manual_seed(SEED + 1)
    out["lm_head.weight"] = torch.randn(VOCAB, lm["embed_tokens.weight"].shape[1])
    return out


def comfy_state(lm):
    out = {}
    for k, v in lm.items():
        if k.startswith("layers."):
            if int(k.split(".")[1]) >= OUTPUT_LAYER:
                continue
        elif k != "embed_tokens.weight":
            continue
        out["model." + k] = v
    return out


def bf16_numpy(t):
    return t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


def nf4_files(lm):
    """(DiffSynth NF4 tensors for safetensors.torch, the dequantised state for load_state_dict)."""
    tensors, meant = {}, {}
    for k, v in lm.items():
        if k.startswith("layers.") and int(k.split(".")[1]) >= OUTPUT_LAYER:
            continue
        if k == "norm.weight":
            continue
        name = "model.language_model." + k
        base = k[: -len(".weight")]
        if any(base.endswith(n) for n in LINEARS):
            w = v.float().numpy()
            parts, state = bnb4.quantize_4bit(w, "nf4")
            for suffix, array in parts.items():
                tensors[name[: -len("weight")] + suffix] = torch.from_numpy(np.array(array))
            tensors[name + ".quant_state.bitsandbytes__nf4"] = torch.from_numpy(
                bnb4.state_bytes(state))
            meant[k] = torch.from_numpy(dequantize_nf4(parts, state))
        else:
            tensors[name] = v.to(torch.bfloat16).contiguous()
            meant[k] = v.clone()
    return tensors, meant


def dequantize_nf4(parts, state):
    """bitsandbytes' dequantize_4bit of one weight (minimax_h3.md §G.2), to bf16 values in f32."""
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
    w = torch.from_numpy(values.astype(np.float32).reshape(state["shape"]))
    return w.to(torch.bfloat16).to(torch.float32).numpy()


def presentation(tokenizer, canvases):
    """H3's presentation (core/models/h3/presentation.cpp): per keyframe "<Picture k>: " and a
    vision block of (H/32)(W/32) <|image_pad|>, then the prompt; (ids, per-image (gh, gw))."""
    encode = lambda text: tokenizer.encode(text, add_special_tokens=False).ids  # noqa: E731
    ids, grids = [], []
    for k, (h, w) in enumerate(canvases):
        ids += encode(f"<Picture {k + 1}>: ")
        gh, gw = h // 32, w // 32
        ids += [tokenizer.token_to_id("<|vision_start|>")]
        ids += [tokenizer.token_to_id("<|image_pad|>")] * (gh * gw)
        ids += [tokenizer.token_to_id("<|vision_end|>")]
        grids.append((gh, gw))
    return ids + encode(PROMPT), grids


def hidden_50(model, ids, positions, vision):
    """hidden_states[50] of the language model with the vision rows' embeddings replaced and the
    DeepStack additions made (Qwen3VLModel.forward's injection, on the text model alone)."""
    lm = model.language_model
    dtype = lm.embed_tokens.weight.dtype
    with torch.no_grad():
        x = torch.tensor([ids], dtype=torch.long)
        embeds = lm.embed_tokens(x)
        kwargs = {}
        if vision is not None:
            rows, image, deepstack = vision
            mask = torch.zeros_like(x, dtype=torch.bool)
            mask[0, rows] = True
            embeds = embeds.masked_scatter(mask[..., None], image.to(dtype))
            kwargs = dict(visual_pos_masks=mask,
                          deepstack_visual_embeds=[d.to(dtype) for d in deepstack])
        out = lm(inputs_embeds=embeds, position_ids=positions, output_hidden_states=True, **kwargs)
        # hidden_states[0] is the embedding, [k] the output of decoder layer k-1.
        assert len(out.hidden_states) == LAYERS + 1
        return out.hidden_states[OUTPUT_LAYER][0].float()


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    tokenizer = Tokenizer.from_file(TOKENIZER)
    image_pad = tokenizer.token_to_id("<|image_pad|>")
    os.makedirs(OUT, exist_ok=True)
    reference = {}
    for cname, c in CONFIGS.items():
        os.makedirs(os.path.join(OUT, cname), exist_ok=True)
        model = build_model(c)
        lm = lm_state(model)
        save_torch({k: v.to(torch.bfloat16).contiguous() for k, v in release_state(lm).items()},
                   os.path.join(OUT, cname, "release.safetensors"))
        if cname == "tiny":
            save_torch({k: v.to(torch.bfloat16).contiguous() for k, v in comfy_state(lm).items()},
                       os.path.join(OUT, cname, "comfy.safetensors"))
        model_nf4 = None
        if cname == "gqa":
            tensors, meant = nf4_files(lm)
            save_torch(tensors, os.path.join(OUT, cname, "nf4.safetensors"),
                       metadata={"format": "pt"})
            model_nf4 = build_model(c)
            model_nf4.language_model.load_state_dict(meant, strict=False)
        model_bf16 = build_model(c).to(torch.bfloat16)
        hidden = c["hidden_size"]
        for case, canvases in CASES.items():
            ids, grids = presentation(tokenizer, canvases)
            x = torch.tensor([ids], dtype=torch.long)
            types = (x == image_pad).int()
            thw = torch.tensor([[1, 2 * gh, 2 * gw] for gh, gw in grids]) if grids else None
            positions, _ = model.get_rope_index(x, types, image_grid_thw=thw)
            key = f"{cname}.{case}"
            vision = None
            if grids:
                g = torch.Generator().manual_seed(SEED + len(ids))
                rows = torch.nonzero(x[0] == image_pad).reshape(-1)
                image = torch.randn(rows.numel(), hidden, generator=g)
                image = image.to(torch.bfloat16).float()
                deepstack = torch.randn(DEEPSTACK, rows.numel(), hidden, generator=g)
                deepstack = deepstack.to(torch.bfloat16).float()
                vision = (rows, image, list(deepstack))
                reference[key + ".vision_rows"] = rows.numpy().astype(np.int32)
                reference[key + ".vision_embeds"] = image.numpy()
                reference[key + ".deepstack"] = deepstack.numpy()
            reference[key + ".ids"] = np.asarray(ids, np.int32)
            reference[key + ".positions"] = positions[:, 0, :].numpy().astype(np.int32)
            reference[key + ".bf16"] = hidden_50(model_bf16, ids, positions, vision).numpy()
            reference[key + ".f32"] = hidden_50(model, ids, positions, vision).numpy()
            if model_nf4 is not None:
                reference[key + ".nf4.f32"] = hidden_50(model_nf4, ids, positions,
                                                        vision).numpy()
                reference[key + ".nf4.bf16"] = hidden_50(model_nf4.to(torch.bfloat16), ids,
                                                         positions, vision).numpy()
                model_nf4.to(torch.float32)
            d = np.abs(reference[key + ".bf16"] - reference[key + ".f32"])
            ref = reference[key + ".f32"]
            print(f"{key:20s} L={len(ids):3d}  bf16 vs f32: max {d.max():.4f}  rel rms "
                  f"{np.sqrt((d ** 2).sum() / (ref ** 2).sum()):.5f}  |y| max "
                  f"{np.abs(ref).max():.2f}")
    # get_rope_index's positions for layouts of its own (the pure function's test): text only,
    # one block, two blocks of different grids, a block at the very start and one at the end.
    layouts = {"text": [("t", 7)], "one": [("t", 3), ("i", (2, 3)), ("t", 4)],
               "two": [("t", 2), ("i", (3, 2)), ("t", 3), ("i", (4, 4)), ("t", 1)],
               "edges": [("i", (1, 5)), ("t", 2), ("i", (2, 1))]}
    model = build_model(CONFIGS["tiny"])
    for name, runs in layouts.items():
        ids, grids = [], []
        for kind, value in runs:
            if kind == "t":
                ids += [5] * value
            else:
                ids += [image_pad] * (value[0] * value[1])
                grids.append(value)
        x = torch.tensor([ids], dtype=torch.long)
        thw = torch.tensor([[1, 2 * gh, 2 * gw] for gh, gw in grids]) if grids else None
        positions, _ = model.get_rope_index(x, (x == image_pad).int(), image_grid_thw=thw)
        reference[f"layout.{name}.ids"] = np.asarray(ids, np.int32)
        reference[f"layout.{name}.grids"] = np.asarray(grids, np.int32).reshape(-1, 2)
        reference[f"layout.{name}.positions"] = positions[:, 0, :].numpy().astype(np.int32)
    save_numpy(reference, os.path.join(OUT, "reference.safetensors"),
               metadata={"generator": f"tools/reference/make_h3_text_encoder_reference.py "
                                      f"(torch {torch.__version__}, seed {SEED})",
                         "image_pad": json.dumps(image_pad)})


if __name__ == "__main__":
    main()
