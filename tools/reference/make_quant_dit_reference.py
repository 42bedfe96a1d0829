#!/usr/bin/env python3
"""Writes tests/data/wan/dit_quant/: the tiny Wan 2.1 T2V DiT of make_dit_reference.py (same seed,
same weights) quantized as users' files are, and the velocities the official Wan code computes
with the dequantised weights, for tests/models/wan_dit_quant_test.cpp.

    tools/reference/.venv/bin/pip install -r tools/reference/requirements.txt gguf==0.19.0
    tools/reference/.venv/bin/pip install --no-deps -r tools/reference/requirements-nodeps.txt
    tools/reference/.venv/bin/python tools/reference/make_quant_dit_reference.py

Files (formats_lora_moe.md §1.3 for the GGUF type choices, §2 for bitsandbytes):
  t2v-Q8_0.gguf      city96's layout: every 2-D block weight Q8_0; 1-D tensors, modulations and
                     tensors of <= 1024 values F32; the other 2-D weights (text/time embeddings,
                     time projection, head) BF16; patch_embedding.weight 5-D F32; names with the
                     `model.diffusion_model.` prefix sd.cpp writes and no general.architecture
  t2v-Q4_K_M.gguf    the same with llama-quantize's Q4_K_M mix: block weights Q4_K, the self- and
                     cross-attention v and ffn.2 Q6_K, except where a row is not whole 256-value
                     blocks (ffn.2, 128 inputs here), which falls back to F16 as llama.cpp does;
                     official names, general.architecture "wan", alignment 64
  t2v-nf4.safetensors  bitsandbytes NF4 as DiffSynth writes it: every block Linear weight
                     quantized (blocksize 64, double-quantised absmax, quant_state JSON), the rest
                     as in the bf16 checkpoint
  <name>_reference.safetensors  `x`, `context` and for each case i `t.i`, `v.i`: the official
                     forward (make_dit_reference's recipe: CPU autocast bf16) on the weights each
                     file means — the dequantised values (gguf.quants.dequantize; §2.4 for NF4)
                     held as fp32 parameters, which autocast rounds to bf16 in every Linear, as
                     ComfyUI-GGUF does when it dequantises to the bf16 compute dtype.
K-quant blocks come from the encoders of §1.6 recipe 2 (gguf-py has no K quantizer); what the test
checks is that Ferry and the official code agree on whatever blocks the file holds. Deterministic:
a rerun writes the same bytes.
"""

import json
import os

import numpy as np
import torch
from safetensors.numpy import save_file as save_numpy
from safetensors.torch import save_file

import make_dit_reference as ref

import gguf
from gguf import GGMLQuantizationType as Q

OUT = os.path.join(ref.ROOT, "tests", "data", "wan", "dit_quant")
IN_OUT = 16  # the t2v model

NF4_CODE = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
                     -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
                     0.07958029955625534, 0.16093020141124725, 0.24611230194568634,
                     0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                     0.7229568362236023, 1.0], dtype=np.float32)


# ---- K-quant encoders (formats_lora_moe.md §1.6 recipe 2) ----

def f16(x):
    return np.float16(x).astype(np.float32)


def pack_scale_min_k4(sc, mn):
    """The 12 bytes of 8 six-bit (scale, min) pairs, the inverse of get_scale_min_k4."""
    s = np.zeros(12, dtype=np.uint8)
    for j in range(4):
        s[j] = (sc[j] & 63) | ((sc[j + 4] >> 4) << 6)
        s[j + 4] = (mn[j] & 63) | ((mn[j + 4] >> 4) << 6)
        s[j + 8] = (sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4)
    return s


def quantize_q4_k_block(x):
    sub = x.reshape(8, 32)
    mn = np.minimum(0.0, sub.min(axis=1))
    scale = (sub.max(axis=1) - mn) / 15.0
    d = f16(scale.max() / 63.0)
    dmin = f16((-mn).max() / 63.0)
    sc = np.clip(np.rint(scale / d), 0, 63).astype(np.int64) if d > 0 else np.zeros(8, np.int64)
    m = np.clip(np.rint(-mn / dmin), 0, 63).astype(np.int64) if dmin > 0 else np.zeros(8, np.int64)
    q = np.zeros((8, 32), dtype=np.int64)
    for k in range(8):
        step = d * sc[k]
        if step > 0:
            q[k] = np.clip(np.rint((sub[k] + dmin * m[k]) / step), 0, 15)
    qs = np.zeros(128, dtype=np.uint8)
    for c in range(4):
        qs[32 * c:32 * c + 32] = (q[2 * c] | (q[2 * c + 1] << 4)).astype(np.uint8)
    return (np.float16(d).tobytes() + np.float16(dmin).tobytes() +
            pack_scale_min_k4(sc, m).tobytes() + qs.tobytes())


def quantize_q6_k_block(x):
    sub = x.reshape(16, 16)
    absmax = np.abs(sub).max(axis=1)
    scale = absmax / 31.0
    d = f16(np.abs(scale).max() / 127.0)
    sc = np.clip(np.rint(scale / d), -128, 127).astype(np.int64) if d > 0 else np.zeros(16, np.int64)
    q = np.zeros(256, dtype=np.int64)
    for k in range(16):
        step = d * sc[k]
        if step != 0:
            q[16 * k:16 * k + 16] = np.clip(np.rint(sub[k] / step), -32, 31)
    u = (q + 32).astype(np.int64)
    ql = np.zeros(128, dtype=np.uint8)
    qh = np.zeros(64, dtype=np.uint8)
    for h in range(2):
        base = 128 * h
        for l in range(32):
            q1, q2, q3, q4 = (u[base + l], u[base + l + 32], u[base + l + 64], u[base + l + 96])
            ql[64 * h + l] = (q1 & 15) | ((q3 & 15) << 4)
            ql[64 * h + l + 32] = (q2 & 15) | ((q4 & 15) << 4)
            qh[32 * h + l] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6)
    return ql.tobytes() + qh.tobytes() + sc.astype(np.int8).tobytes() + np.float16(d).tobytes()


def quantize_rows(w, qtype):
    """Bytes [rows, row_bytes] of `w` [rows, cols] in `qtype`."""
    if qtype in (Q.Q8_0, Q.BF16, Q.F16):
        if qtype == Q.F16:
            return w.astype(np.float16).view(np.uint8).reshape(w.shape[0], -1)
        return gguf.quants.quantize(w, qtype)
    encode = {Q.Q4_K: quantize_q4_k_block, Q.Q6_K: quantize_q6_k_block}[qtype]
    rows = []
    for r in w:
        rows.append(b"".join(encode(r[i:i + 256]) for i in range(0, r.size, 256)))
    return np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(w.shape[0], -1)


def dequantize_rows(raw, qtype, shape):
    if qtype == Q.F16:
        return raw.view(np.float16).astype(np.float32).reshape(shape)
    return gguf.quants.dequantize(raw, qtype).astype(np.float32).reshape(shape)


# ---- type choice (§1.3) ----

def is_block_weight(name, shape):
    return name.startswith("blocks.") and name.endswith("weight") and len(shape) == 2


def gguf_type(name, shape, mix):
    numel = int(np.prod(shape))
    if name == "patch_embedding.weight" or len(shape) == 1 or numel <= 1024 or ".modulation" in name:
        return Q.F32
    if not is_block_weight(name, shape):
        return Q.BF16
    if mix == "Q8_0":
        return Q.Q8_0
    wanted = Q.Q6_K if name.endswith((".v.weight", "ffn.2.weight")) else Q.Q4_K
    return wanted if shape[-1] % 256 == 0 else Q.F16


def write_gguf(path, state, mix, prefix, arch, alignment):
    """Writes the file; returns {name: the f32 values it means}."""
    writer = gguf.GGUFWriter(path, arch=arch or "wan")
    if arch is None:
        # sd.cpp-converted files carry no general.architecture (§1.4).
        writer.kv_data[0].pop("general.architecture")
    if alignment != 32:
        writer.add_custom_alignment(alignment)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    meant = {}
    for name, value in state.items():
        w = value.float().numpy()
        shape = tuple(w.shape)
        qtype = gguf_type(name, shape, mix)
        if qtype == Q.F32:
            writer.add_tensor(prefix + name, w.astype(np.float32))
            meant[name] = w.astype(np.float32)
            continue
        rows = w.reshape(-1, shape[-1])
        raw = quantize_rows(rows, qtype)
        writer.add_tensor(prefix + name, raw, raw_dtype=qtype)
        meant[name] = dequantize_rows(raw, qtype, shape)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return meant


# ---- bitsandbytes NF4 (§2.6) ----

def blockwise(x, code, blocksize):
    """(codes, absmax) of bitsandbytes' blockwise quantizer over the flattened x."""
    n = x.size
    blocks = (n + blocksize - 1) // blocksize
    codes = np.zeros(n, dtype=np.int64)
    absmax = np.zeros(blocks, dtype=np.float32)
    order = np.argsort(code)
    sorted_code = code[order]
    bounds = (sorted_code[1:] + sorted_code[:-1]) / 2
    for b in range(blocks):
        part = x[b * blocksize:(b + 1) * blocksize]
        a = np.float32(np.abs(part).max())
        absmax[b] = a
        scaled = np.clip(part * np.float32(1.0 / max(a, np.float32(1e-38))), -1, 1)
        idx = np.searchsorted(bounds, scaled, side="left")
        codes[b * blocksize:(b + 1) * blocksize] = order[idx]
    return codes, absmax


def dynamic_map():
    """bitsandbytes' signed dynamic 8-bit map (create_dynamic_map(signed=True, max_exponent_bits=7,
    total_bits=8)), restated."""
    data = []
    max_exponent_bits, total_bits = 7, 8
    non_sign_bits = total_bits - 1
    for i in range(max_exponent_bits):
        fraction_items = 2 ** (i + non_sign_bits - max_exponent_bits) + 1
        boundaries = np.linspace(0.1, 1, fraction_items, dtype=np.float32)
        means = (boundaries[:-1] + boundaries[1:]) / 2.0
        data += ((10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
        data += (-(10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
    data.append(0)
    data.append(1.0)
    assert len(data) == 2 ** total_bits
    return np.sort(np.array(data, dtype=np.float32))


def nf4_state(w):
    """The DiffSynth keys of one quantized Linear weight [out, in] and the f32 values they mean."""
    out_f, in_f = w.shape
    flat = w.reshape(-1).astype(np.float32)
    codes, absmax = blockwise(flat, NF4_CODE, 64)
    packed = ((codes[0::2] << 4) | codes[1::2]).astype(np.uint8).reshape(-1, 1)
    offset = np.float32(absmax.mean())
    nested = dynamic_map()
    ncodes, nabsmax = blockwise(absmax - offset, nested, 256)
    scale = nested[ncodes] * np.repeat(nabsmax, 256)[:absmax.size] + offset
    meant = (NF4_CODE[codes] * np.repeat(scale.astype(np.float32), 64)[:flat.size]).astype(np.float32)
    state = {"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [out_f, in_f],
             "nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": float(offset)}
    blob = np.frombuffer(json.dumps(state).encode(), dtype=np.uint8).copy()
    keys = {"": packed, ".absmax": ncodes.astype(np.uint8), ".quant_map": NF4_CODE.copy(),
            ".nested_absmax": nabsmax, ".nested_quant_map": nested,
            ".quant_state.bitsandbytes__nf4": blob}
    return keys, meant.reshape(out_f, in_f)


def write_nf4(path, state):
    tensors, meant = {}, {}
    for name, value in state.items():
        w = value.float().numpy()
        if is_block_weight(name, w.shape):
            keys, values = nf4_state(w)
            for suffix, t in keys.items():
                tensors[name + suffix] = t
            meant[name] = values
        else:
            tensors[name] = value.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
            meant[name] = value.float().numpy()
    # BF16 tensors through safetensors.torch (numpy has no bf16); the rest as numpy.
    torch_tensors = {}
    for k, t in tensors.items():
        if t.dtype == np.uint16:
            torch_tensors[k] = torch.from_numpy(t.view(np.int16)).view(torch.bfloat16)
        else:
            torch_tensors[k] = torch.from_numpy(np.ascontiguousarray(t))
    save_file(torch_tensors, path, metadata={"format": "pt"})
    return meant


def reference(name, model, meant):
    with torch.no_grad():
        for key, p in model.named_parameters():
            p.copy_(torch.from_numpy(meant[key]).reshape(p.shape))
    gen = torch.Generator().manual_seed(ref.SEED + 1000 + IN_OUT)
    x = torch.randn((IN_OUT, ref.FRAMES, ref.HEIGHT, ref.WIDTH), generator=gen)
    context = ref.bf16_values(torch.randn((ref.CONTEXT_ROWS, ref.TEXT_DIM), generator=gen))
    tensors = {"x": x.contiguous(), "context": context.contiguous()}
    for i, t in enumerate(ref.TIMESTEPS):
        ts = ref.token_timesteps(IN_OUT, t)
        v = ref.forward(model, x, ts, context)
        assert torch.isfinite(v).all()
        tensors[f"t.{i}"] = ts.contiguous()
        tensors[f"v.{i}"] = v.contiguous()
        print(f"{name} t={t}: |v| max {v.abs().max():.4f} rms {v.pow(2).mean().sqrt():.4f}")
    save_file(tensors, os.path.join(OUT, f"{name}_reference.safetensors"),
              metadata={"timesteps": ",".join(str(t) for t in ref.TIMESTEPS)})


def main():
    os.makedirs(OUT, exist_ok=True)
    model = ref.build(IN_OUT)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    files = {
        "t2v-Q8_0": lambda p: write_gguf(p + ".gguf", state, "Q8_0", "model.diffusion_model.",
                                         None, 32),
        "t2v-Q4_K_M": lambda p: write_gguf(p + ".gguf", state, "Q4_K_M", "", "wan", 64),
        "t2v-nf4": lambda p: write_nf4(p + ".safetensors", state),
    }
    for name, write in files.items():
        meant = write(os.path.join(OUT, name))
        reference(name, model, meant)


if __name__ == "__main__":
    main()
