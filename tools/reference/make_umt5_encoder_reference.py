#!/usr/bin/env python3
"""Writes tests/data/umt5/encoder/: a tiny umT5 encoder with random weights in the key layouts
Ferry reads, and the reference outputs tests/models/umt5_encoder_test.cpp compares Ferry with.

    tools/reference/.venv/bin/pip install -r tools/reference/requirements.txt
    tools/reference/.venv/bin/python tools/reference/make_umt5_encoder_reference.py

The model is transformers' UMT5EncoderModel (the architecture of wan.md §A.2: per-layer relative
position bias with 32 buckets and max distance 128, no attention scaling, gated-GELU FFN with the
tanh GELU, T5 RMSNorm with eps 1e-6, no biases) at reduced widths: d_model 64, 4 heads of 16,
d_ff 96, 3 layers, 1280 embedding rows for the 1200-piece tokenizer of tests/data/umt5/tokenizer
(rows past the vocabulary, as umT5's 256 384 rows past its 256 000 pieces). Weights: transformers'
own initialisation under torch.manual_seed(SEED), the relative-position tables scaled by 8 so the
bias matters at this width, then every tensor rounded to bf16 (the official checkpoint's dtype) so
that every layout below holds the same values.

Files written:
  official.safetensors          Wan's own names (models_t5_umt5-xxl-enc-bf16.pth: token_embedding,
                                blocks.N.{norm1,attn.{q,k,v,o},pos_embedding.embedding,norm2,
                                ffn.{gate.0,fc1,fc2}}, norm), bf16
  diffusers/text_encoder/       a diffusers pipeline's text encoder as save_pretrained writes it
                                (model.safetensors with the Hugging Face names, config.json), bf16
  comfy_fp16.safetensors        ComfyUI's single file umt5_xxl_fp16: Hugging Face names, f16, the
                                tokenizer model as the U8 tensor `spiece_model`
  comfy_fp8_scaled.safetensors  ComfyUI's umt5_xxl_fp8_e4m3fn_scaled: the 7 linear weights of every
                                block as F8_E4M3 with a per-tensor F32 `<name>.scale_weight`
                                (weight ≈ stored · scale, scale = max|w| / 448), the `scaled_fp8`
                                marker tensor, everything else f16, plus `spiece_model`
  reference.safetensors         for each prompt P of PROMPTS: `P.ids` (I32, the ids of
                                tests/data/umt5/reference.json), `P.bf16` (F32 [L,64]: the output of
                                the bf16 model — bf16 weights and activations, softmax and RMS
                                statistics in f32, the official recipe of wan.md §1), `P.f32` (the
                                same weights run in f32) and `P.fp8.f32` (the fp8 file's dequantised
                                weights run in f32)

The encoder runs on the real tokens only (wan.md §A.4: with the pad keys masked, the real rows are
the same as in the 512-padded run; the script checks that on one prompt). Deterministic: a rerun
writes the same bytes.
"""

import json
import os
import shutil
import sys

import numpy as np
import torch
from safetensors.numpy import save_file as save_numpy
from safetensors.torch import save_file as save_torch
from transformers import UMT5Config, UMT5EncoderModel

SEED = 20261130
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
UMT5_DATA = os.path.join(ROOT, "tests", "data", "umt5")
OUT = os.path.join(UMT5_DATA, "encoder")
PROMPTS = ["negative_prompt", "english", "chinese", "mixed", "empty", "long_english"]
LAYERS = 3
EMBEDDING_ROWS = 1280
FP8_MAX = 448.0


def tiny_config():
    return UMT5Config(
        vocab_size=EMBEDDING_ROWS, d_model=64, d_kv=16, d_ff=96, num_layers=LAYERS, num_heads=4,
        relative_attention_num_buckets=32, relative_attention_max_distance=128,
        feed_forward_proj="gated-gelu", layer_norm_epsilon=1e-6, dropout_rate=0.0,
        tie_word_embeddings=False, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)


def build_model():
    torch.manual_seed(SEED)
    model = UMT5EncoderModel(tiny_config()).eval()
    with torch.no_grad():
        for block in model.encoder.block:
            block.layer[0].SelfAttention.relative_attention_bias.weight.mul_(8.0)
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    return model


def hf_state(model):
    """The Hugging Face names, as in ComfyUI's single files (shared.weight, encoder.*)."""
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    state.pop("encoder.embed_tokens.weight", None)  # tied to shared.weight
    return state


def official_state(hf):
    out = {"token_embedding.weight": hf["shared.weight"],
           "norm.weight": hf["encoder.final_layer_norm.weight"]}
    for i in range(LAYERS):
        h = f"encoder.block.{i}.layer."
        o = f"blocks.{i}."
        out[o + "norm1.weight"] = hf[h + "0.layer_norm.weight"]
        for n in "qkvo":
            out[o + f"attn.{n}.weight"] = hf[h + f"0.SelfAttention.{n}.weight"]
        out[o + "pos_embedding.embedding.weight"] = \
            hf[h + "0.SelfAttention.relative_attention_bias.weight"]
        out[o + "norm2.weight"] = hf[h + "1.layer_norm.weight"]
        out[o + "ffn.gate.0.weight"] = hf[h + "1.DenseReluDense.wi_0.weight"]
        out[o + "ffn.fc1.weight"] = hf[h + "1.DenseReluDense.wi_1.weight"]
        out[o + "ffn.fc2.weight"] = hf[h + "1.DenseReluDense.wo.weight"]
    return out


def fp8_linear_names():
    names = []
    for i in range(LAYERS):
        h = f"encoder.block.{i}.layer."
        names += [h + f"0.SelfAttention.{n}" for n in "qkvo"]
        names += [h + f"1.DenseReluDense.{n}" for n in ("wi_0", "wi_1", "wo")]
    return names


def fp8_state(hf):
    """(file tensors, dequantised f32 state)."""
    stored, dequantised = {}, {}
    linear = set(fp8_linear_names())
    for name, value in hf.items():
        base = name[: -len(".weight")] if name.endswith(".weight") else None
        if base in linear:
            scale = (value.abs().max() / FP8_MAX).to(torch.float32)
            q = (value / scale).to(torch.float8_e4m3fn)
            stored[name] = q
            stored[base + ".scale_weight"] = scale.reshape(())
            dequantised[name] = q.to(torch.float32) * scale
        else:
            stored[name] = value.to(torch.float16)
            dequantised[name] = value.to(torch.float16).to(torch.float32)
    stored["scaled_fp8"] = torch.empty(0, dtype=torch.float8_e4m3fn)
    return stored, dequantised


def spiece_tensor():
    with open(os.path.join(UMT5_DATA, "tokenizer", "spiece.model"), "rb") as f:
        return torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).clone()


def encode(model, ids):
    with torch.no_grad():
        x = torch.tensor([ids], dtype=torch.long)
        return model(input_ids=x, attention_mask=torch.ones_like(x)).last_hidden_state[0]


def main():
    torch.set_num_threads(1)  # one summation order: reruns give the same bytes
    torch.use_deterministic_algorithms(True)
    with open(os.path.join(UMT5_DATA, "reference.json"), encoding="utf-8") as f:
        prompts = {p["name"]: p for p in json.load(f)["prompts"]}

    model = build_model()
    hf = hf_state(model)
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(os.path.join(OUT, "diffusers"))

    bf16 = {k: v.to(torch.bfloat16).contiguous() for k, v in hf.items()}
    save_torch({k: v.to(torch.bfloat16).contiguous() for k, v in official_state(hf).items()},
               os.path.join(OUT, "official.safetensors"))
    model.to(torch.bfloat16).save_pretrained(os.path.join(OUT, "diffusers", "text_encoder"),
                                             safe_serialization=True)
    model.to(torch.float32)
    fp16 = {k: v.to(torch.float16).contiguous() for k, v in hf.items()}
    fp16["spiece_model"] = spiece_tensor()
    save_torch(fp16, os.path.join(OUT, "comfy_fp16.safetensors"))
    stored, dequantised = fp8_state(hf)
    stored["spiece_model"] = spiece_tensor()
    save_torch(stored, os.path.join(OUT, "comfy_fp8_scaled.safetensors"))
    del bf16

    model_bf16 = build_model().to(torch.bfloat16)
    model_fp8 = build_model()
    model_fp8.load_state_dict({**dequantised, "encoder.embed_tokens.weight":
                               dequantised["shared.weight"]})

    reference = {}
    for name in PROMPTS:
        ids = prompts[name]["ids"]
        reference[f"{name}.ids"] = np.asarray(ids, dtype=np.int32)
        reference[f"{name}.bf16"] = encode(model_bf16, ids).to(torch.float32).numpy()
        reference[f"{name}.f32"] = encode(model, ids).numpy()
        reference[f"{name}.fp8.f32"] = encode(model_fp8, ids).numpy()

    # §A.4: the real rows of a 512-padded run with the pads masked equal the unpadded run's.
    ids = prompts["english"]["ids"]
    padded = torch.zeros((1, 512), dtype=torch.long)
    padded[0, : len(ids)] = torch.tensor(ids)
    mask = torch.zeros_like(padded)
    mask[0, : len(ids)] = 1
    with torch.no_grad():
        full = model(input_ids=padded, attention_mask=mask).last_hidden_state[0, : len(ids)]
    gap = (full - torch.from_numpy(reference["english.f32"])).abs().max().item()
    if gap > 1e-5:
        sys.exit(f"padded and unpadded runs differ by {gap}")

    save_numpy(reference, os.path.join(OUT, "reference.safetensors"),
               # One key: safetensors writes a map's keys in no fixed order.
               metadata={"generator": f"tools/reference/make_umt5_encoder_reference.py "
                                      f"(torch {torch.__version__}, seed {SEED})"})
    for name in PROMPTS:
        d = np.abs(reference[f"{name}.bf16"] - reference[f"{name}.f32"])
        print(f"{name:16s} L={len(prompts[name]['ids']):3d}  bf16 vs f32: max {d.max():.4f}  "
              f"rms {np.sqrt((d ** 2).mean()):.5f}  |y| max "
              f"{np.abs(reference[f'{name}.f32']).max():.2f}")


if __name__ == "__main__":
    main()
