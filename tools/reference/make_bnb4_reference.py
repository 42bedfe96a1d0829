#!/usr/bin/env python3
"""Writes bitsandbytes 4-bit state dicts to tests/data/bnb4/ by the numpy restatement of
bitsandbytes' default-backend quantize_4bit (formats_lora_moe.md §2.6; no torch, no bnb), with
reference.json listing each weight's quant state as the JSON blob says it.

Good files: nf4 and fp4, nested (DiffSynth's default) and plain; tests/io/bnb4_test.cpp checks
that TensorFile groups each `<p>.weight` into a kBnb4 [out, in] weight with this state. Bad files
(bad/*.safetensors, listed in bad/manifest.json with the expected error) break one rule each.
Deterministic. Needs numpy only:

    build/gguf-venv/bin/python tools/reference/make_bnb4_reference.py
"""

import argparse
import json
import os
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "..", "..", "tests", "data", "bnb4")

NF4 = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
                -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
                0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
                0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0], np.float32)
FP4 = (np.array([0, 0.0625, 8, 12, 4, 6, 2, 3, -0.0, -0.0625, -8, -12, -4, -6, -2, -3],
                np.float32) / 12).astype(np.float32)


def dynamic_map():
    """bitsandbytes' signed dynamic 8-bit map (create_dynamic_map(signed=True), 256 values)."""
    max_exponent_bits, total_bits = 7, 8
    data = []
    non_sign_bits = total_bits - 1
    additional_items = 2 ** (non_sign_bits - max_exponent_bits) - 1
    for i in range(max_exponent_bits):
        fraction_items = int(2 ** (i + non_sign_bits - max_exponent_bits) + 1)
        boundaries = np.linspace(0.1, 1, fraction_items, dtype=np.float32)
        means = (boundaries[:-1] + boundaries[1:]) / 2.0
        data += ((10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
        data += (-(10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
    if additional_items > 0:
        boundaries = np.linspace(0.1, 1, additional_items + 1, dtype=np.float32)
        means = (boundaries[:-1] + boundaries[1:]) / 2.0
        data += ((10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
        data += (-(10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
    data.append(0)
    data.append(1.0)
    assert len(data) == 2 ** total_bits
    gap = 256 - len(data)
    for _ in range(gap):
        data.append(0)
    data.sort()
    return np.array(data, np.float32)


def blockwise(x, code, blocksize):
    """Codes of x (flat f32) against the sorted `code`, per block of `blocksize` (§2.6 1-3)."""
    n = x.size
    nb = -(-n // blocksize)
    padded = np.zeros(nb * blocksize, np.float32)
    padded[:n] = x
    blocks = padded.reshape(nb, blocksize)
    absmax = np.abs(blocks).max(axis=1).astype(np.float32)
    scaled = np.clip(blocks * (np.float32(1) / np.maximum(absmax, np.float32(1e-38)))[:, None], -1, 1)
    order = np.argsort(code, kind="stable")
    sorted_code = code[order]
    bounds = (sorted_code[:-1] + sorted_code[1:]) / 2
    idx = np.searchsorted(bounds, scaled.reshape(-1), side="left")
    return order[idx][:n].astype(np.uint8), absmax


def quantize_4bit(w, quant_type, blocksize=64, nested=True):
    code = NF4 if quant_type == "nf4" else FP4
    codes, absmax = blockwise(w.reshape(-1).astype(np.float32), code, blocksize)
    if codes.size % 2:
        codes = np.append(codes, np.uint8(0))
    packed = ((codes[0::2] << 4) | codes[1::2]).astype(np.uint8).reshape(-1, 1)
    state = {"quant_type": quant_type, "blocksize": blocksize, "dtype": "bfloat16",
             "shape": list(w.shape)}
    tensors = {"weight": packed, "weight.quant_map": code}
    if nested:
        offset = np.float32(absmax.mean())
        dmap = dynamic_map()
        qabs, nested_absmax = blockwise(absmax - offset, dmap, 256)
        tensors["weight.absmax"] = qabs
        tensors["weight.nested_absmax"] = nested_absmax
        tensors["weight.nested_quant_map"] = dmap
        state.update({"nested_blocksize": 256, "nested_dtype": "float32",
                      "nested_offset": float(offset)})
    else:
        tensors["weight.absmax"] = absmax
    return tensors, state


def state_bytes(state):
    return np.frombuffer(json.dumps(state).encode("utf-8"), np.uint8).copy()


def safetensors_bytes(tensors):
    """A safetensors file (§2.6): no library needed. `tensors`: name → numpy array, in order."""
    kinds = {np.dtype(np.uint8): "U8", np.dtype(np.float32): "F32", np.dtype(np.uint16): "BF16"}
    header = {"__metadata__": {"format": "pt"}}
    data = b""
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": kinds[array.dtype], "shape": list(array.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def layer(prefix, w, quant_type, nested, blocksize=64, bias=True):
    parts, state = quantize_4bit(w, quant_type, blocksize, nested)
    out = {}
    for key, array in parts.items():
        out[f"{prefix}.{key}"] = array
    out[f"{prefix}.weight.quant_state.bitsandbytes__{quant_type}"] = state_bytes(state)
    if bias:
        out[f"{prefix}.bias"] = np.zeros(w.shape[0], np.uint16)  # bf16 zeros
    return out, state


def good_files(rng):
    w1 = (rng.standard_normal((96, 640)) * 0.02).astype(np.float32)
    w2 = (rng.standard_normal((8, 128)) * 0.02).astype(np.float32)
    files = {}
    for quant_type in ("nf4", "fp4"):
        for nested in (True, False):
            tensors = {}
            states = {}
            for prefix, w in (("blocks.0.self_attn.q", w1), ("head.head", w2)):
                t, s = layer(prefix, w, quant_type, nested)
                tensors.update(t)
                states[prefix + ".weight"] = s
            tensors["blocks.0.norm3.weight"] = np.ones(640, np.float32)  # an unquantized tensor
            name = f"{quant_type}_{'nested' if nested else 'plain'}.safetensors"
            files[name] = (tensors, states)
    return files


def bad_cases(rng):
    """(file, tensors, code, message fragment, why): one broken rule each."""
    w = (rng.standard_normal((4, 128)) * 0.02).astype(np.float32)
    base, state = layer("l", w, "nf4", True, bias=False)
    cases = []

    def variant(name, code, message, why, drop=(), replace=None, state_update=None, raw_state=None):
        t = {k: v for k, v in base.items() if k not in drop}
        if state_update is not None or raw_state is not None:
            s = dict(state)
            if state_update:
                s.update(state_update)
                s = {k: v for k, v in s.items() if v is not None}
            blob = raw_state if raw_state is not None else json.dumps(s).encode("utf-8")
            t["l.weight.quant_state.bitsandbytes__nf4"] = np.frombuffer(blob, np.uint8).copy()
        for k, v in (replace or {}).items():
            t[k] = v
        cases.append((name, t, code, message, why))

    Q = "l.weight.quant_state.bitsandbytes__nf4"
    variant("missing_absmax.safetensors", "kBadModelFile", "'l.weight.absmax' is missing",
            "no absmax side tensor", drop=("l.weight.absmax",))
    variant("missing_quant_map.safetensors", "kBadModelFile", "'l.weight.quant_map' is missing",
            "no quant_map", drop=("l.weight.quant_map",))
    variant("missing_nested_absmax.safetensors", "kBadModelFile",
            "'l.weight.nested_absmax' is missing", "nested state without nested_absmax",
            drop=("l.weight.nested_absmax",))
    variant("missing_weight.safetensors", "kBadModelFile", "the weight does not",
            "a quant state without its weight", drop=("l.weight",))
    variant("absmax_f32_when_nested.safetensors", "kBadModelFile", "expected U8 [8]",
            "nested state with an F32 absmax", replace={"l.weight.absmax": np.zeros(8, np.float32)})
    variant("absmax_wrong_count.safetensors", "kBadModelFile", "expected U8 [8]",
            "absmax with one block too few", replace={"l.weight.absmax": np.zeros(7, np.uint8)})
    variant("quant_map_15.safetensors", "kBadModelFile", "expected F32 [16]",
            "a 15-entry code book", replace={"l.weight.quant_map": np.zeros(15, np.float32)})
    variant("nested_map_128.safetensors", "kBadModelFile", "expected F32 [256]",
            "a 128-entry nested map", replace={"l.weight.nested_quant_map": np.zeros(128, np.float32)})
    variant("weight_too_short.safetensors", "kBadModelFile", "holds 255 bytes but [4, 128]",
            "packed codes one byte short", replace={"l.weight": np.zeros((255, 1), np.uint8)})
    variant("suffix_mismatch.safetensors", "kBadModelFile", "says fp4 but its key ends in __nf4",
            "JSON quant_type disagrees with the key", state_update={"quant_type": "fp4"})
    variant("quant_type_unknown.safetensors", "kBadModelFile", "not nf4 or fp4",
            "quant_type int4", state_update={"quant_type": "int4"})
    variant("blocksize_not_power_of_two.safetensors", "kBadModelFile", "no blocksize",
            "blocksize 48", state_update={"blocksize": 48})
    variant("blocksize_string.safetensors", "kBadModelFile", "no blocksize",
            "blocksize as a string", state_update={"blocksize": "64"})
    variant("dtype_unknown.safetensors", "kBadModelFile", "no dtype among",
            "dtype float8", state_update={"dtype": "float8"})
    variant("shape_3d.safetensors", "kBadModelFile", "no shape [out, in]",
            "a 3-D shape", state_update={"shape": [1, 4, 128]})
    variant("shape_negative.safetensors", "kBadModelFile", "not a positive size",
            "a negative dimension", state_update={"shape": [-4, 128]})
    variant("nested_without_offset.safetensors", "kBadModelFile", "no finite nested_offset",
            "nested fields without nested_offset", state_update={"nested_offset": None})
    variant("json_invalid.safetensors", "kBadModelFile", "is not valid JSON",
            "truncated JSON", raw_state=json.dumps(state).encode()[:-5])
    variant("json_array.safetensors", "kBadModelFile", "is not a JSON object",
            "a JSON array", raw_state=b"[1, 2]")
    variant("state_not_u8.safetensors", "kBadModelFile", "not U8 JSON",
            "the quant state stored as F32",
            replace={Q: np.zeros(4, np.float32)})
    big = dict(state)
    big["padding"] = "x" * (64 * 1024)
    variant("state_over_64k.safetensors", "kBadModelFile", "not U8 JSON of at most 65536",
            "a 64 KiB+ quant state", raw_state=json.dumps(big).encode())
    # A valid state Ferry cannot hold: kUnsupported. (Blocks that straddle rows, as in the H3
    # audio VAE's 32-wide Linears, are read: the weight stays one flat row.)
    w_odd = (rng.standard_normal((3, 95)) * 0.02).astype(np.float32)
    t, _ = layer("l", w_odd, "nf4", False, bias=False)
    cases.append(("odd_value_count.safetensors", t, "kUnsupported", "an odd number of values",
                  "3 x 95 = 285 values: 4-bit codes pack in pairs"))
    return cases


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args()
    bad_dir = os.path.join(args.out, "bad")
    os.makedirs(bad_dir, exist_ok=True)
    rng = np.random.default_rng(2024)
    reference = {"files": []}
    for name, (tensors, states) in good_files(rng).items():
        with open(os.path.join(args.out, name), "wb") as f:
            f.write(safetensors_bytes(tensors))
        reference["files"].append({"file": name, "tensors": len(tensors), "weights": states})
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump(reference, f, indent=1)
        f.write("\n")

    cases = bad_cases(rng)
    for old in os.listdir(bad_dir):
        if old.endswith(".safetensors"):
            os.remove(os.path.join(bad_dir, old))
    lines = []
    for name, tensors, code, message, why in cases:
        assert message.isascii() and '"' not in message and "\\" not in message, message
        with open(os.path.join(bad_dir, name), "wb") as f:
            f.write(safetensors_bytes(tensors))
        lines.append(json.dumps({"file": name, "code": code, "message": message, "why": why}))
    with open(os.path.join(bad_dir, "manifest.json"), "w") as f:
        f.write('{"cases": [\n  ' + ",\n  ".join(lines) + "\n]}\n")
    print(len(reference["files"]), "good files,", len(cases), "bad files")


if __name__ == "__main__":
    main()
