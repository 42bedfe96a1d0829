#!/usr/bin/env python3
"""Writes tests/data/lora/bad/: LoRA files that Ferry must refuse, one broken rule each, listed in
manifest.json with the error code, a fragment of the expected message and the key it must name
(tests/models/lora_file_test.cpp opens each with open_lora). The rules are those of
core/models/lora/lora_file.h (formats_lora_moe.md §4): safetensors only (a pickle or a GGUF is
refused by its content), a valid header, every down with its up and one rank, a scalar finite
alpha/scale, F32/F16/BF16 matrices, no LoHa/LoKr/DoRA/lora_mid, at least one LoRA tensor.
Deterministic. Needs numpy only:

    python3 tools/reference/make_lora_bad_corpus.py
"""

import argparse
import json
import os
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "..", "..", "tests", "data", "lora", "bad")

KINDS = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.int32): "I32",
         np.dtype(np.uint8): "U8"}


class BF16:
    """bf16 values as their uint16 bits (numpy has no bf16)."""

    def __init__(self, values):
        bits = np.asarray(values, np.float32).view(np.uint32)
        self.array = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def safetensors_bytes(tensors, metadata=None):
    """A safetensors file (formats_lora_moe.md §2.6). `tensors`: name → numpy array or BF16."""
    header = {"__metadata__": dict({"format": "pt"}, **(metadata or {}))}
    data = b""
    for name, value in tensors.items():
        if isinstance(value, BF16):
            array, kind = value.array, "BF16"
        else:
            array, kind = value, KINDS[value.dtype]
        raw = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": kind, "shape": list(array.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def cases(rng):
    """(file, bytes, message fragment, key it names or "", why)."""
    out = []
    m = "diffusion_model.blocks.0.self_attn.q"

    def pair(module=m, rank=4, down=".lora_down.weight", up=".lora_up.weight"):
        return {module + down: BF16(rng.standard_normal((rank, 16)) * 0.1),
                module + up: BF16(rng.standard_normal((16, rank)) * 0.1)}

    def add(name, tensors, message, key, why, metadata=None):
        out.append((name, safetensors_bytes(tensors, metadata), message, key, why))

    good = dict(pair(), **{m + ".alpha": np.array(4.0, np.float32)})
    whole = safetensors_bytes(good)
    out.append(("truncated.safetensors", whole[:-2], "(truncated?)", m + ".alpha",
                "the last 2 bytes cut off"))
    out.append(("pickle_zip.safetensors", b"PK\x03\x04" + bytes(60), "PyTorch pickle file", "",
                "torch.save's zip archive under a .safetensors name"))
    out.append(("pickle_stream.safetensors", b"\x80\x02}q\x00." + bytes(58),
                "PyTorch pickle file", "", "a bare pickle stream (PROTO 2)"))
    out.append(("gguf_lora.gguf", b"GGUF" + struct.pack("<IQQ", 3, 0, 0), "is a GGUF file", "",
                "a valid, empty GGUF: LoRAs are read from safetensors only"))
    add("down_without_up.safetensors", {m + ".lora_down.weight": pair()[m + ".lora_down.weight"]},
        "without its up", m + ".lora_down.weight", "a down and no up")
    add("up_without_down.safetensors", {m + ".lora_B.weight": pair()[m + ".lora_up.weight"]},
        "without its down", m + ".lora_B.weight", "an up and no down")
    t = pair()
    t[m + ".lora_up.weight"] = BF16(rng.standard_normal((16, 5)))
    add("rank_mismatch.safetensors", t, "has rank 5", m + ".lora_up.weight",
        "up [16, 5] against down [4, 16]")
    add("alpha_vector.safetensors", dict(pair(), **{m + ".alpha": np.ones(2, np.float32)}),
        "is not one finite value", m + ".alpha", "an alpha of two values")
    add("alpha_nan.safetensors", dict(pair(), **{m + ".alpha": np.array(np.nan, np.float32)}),
        "is not one finite value", m + ".alpha", "a NaN alpha")
    add("scale_u8.safetensors", dict(pair(), **{m + ".scale": np.array(1, np.uint8)}),
        "is not one finite value", m + ".scale", "a U8 scale")
    t = pair()
    t[m + ".lora_down.weight"] = np.zeros((4, 16), np.int32)
    add("down_i32.safetensors", t, "is I32: LoRA tensors are F32, F16 or BF16",
        m + ".lora_down.weight", "an integer down")
    t = pair()
    t[m + ".lora_down.weight"] = BF16(np.zeros(16))
    add("down_1d.safetensors", t, "is not a matrix", m + ".lora_down.weight", "a 1-D down")
    add("rank_0.safetensors", {m + ".lora_down.weight": np.zeros((0, 16), np.float32),
                               m + ".lora_up.weight": np.zeros((16, 0), np.float32)},
        "is empty", m + ".lora_down.weight", "rank 0")
    t = dict(pair(), **pair(rank=4, down=".lora_A.weight", up=".lora_B.weight"))
    add("two_downs.safetensors", t, "are both the down (A) of module", m + ".lora_A.weight",
        "lora_down and lora_A for one module")
    k = "lycoris_blocks_0_self_attn_q"
    add("loha.safetensors", {k + ".hada_w1_a": BF16(np.zeros((16, 4))),
                             k + ".hada_w1_b": BF16(np.zeros((4, 16))),
                             k + ".alpha": np.array(4.0, np.float32)},
        "LoHa", k + ".hada_w1_a", "a LyCORIS LoHa")
    add("lokr.safetensors", {k + ".lokr_w1": BF16(np.zeros((4, 4))),
                             k + ".lokr_w2": BF16(np.zeros((4, 4)))},
        "LoKr", k + ".lokr_w1", "a LyCORIS LoKr")
    add("dora.safetensors", dict(pair(), **{m + ".dora_scale": BF16(np.ones((1, 16)))}),
        "DoRA", m + ".dora_scale", "a DoRA magnitude vector")
    add("lora_mid.safetensors", dict(pair(), **{m + ".lora_mid.weight": BF16(np.zeros((4, 4)))}),
        "lora_mid", m + ".lora_mid.weight", "a Tucker middle factor")
    add("no_lora_tensors.safetensors",
        {"blocks.0.self_attn.q.weight": BF16(np.zeros((16, 16))),
         "blocks.0.self_attn.q.bias": BF16(np.zeros(16))},
        "holds no LoRA tensor", "blocks.0.self_attn.q.weight", "a checkpoint, not a LoRA")
    add("peft_metadata_not_json.safetensors",
        pair("transformer.blocks.0.attn1.to_q", 4, ".lora_A.weight", ".lora_B.weight"),
        "is not a JSON object", "__metadata__.lora_adapter_metadata", "PEFT metadata cut short",
        metadata={"lora_adapter_metadata": '{"r": 4, "lora_alpha"'})
    add("peft_alpha_string.safetensors",
        pair("transformer.blocks.0.attn1.to_q", 4, ".lora_A.weight", ".lora_B.weight"),
        "lora_alpha that is not a finite number", "__metadata__.lora_adapter_metadata",
        "lora_alpha as a string", metadata={"lora_adapter_metadata": '{"r": 4, "lora_alpha": "8"}'})
    add("diff_u8.safetensors", {"diffusion_model.head.head.diff": np.zeros((4, 4), np.uint8)},
        "is U8: LoRA tensors are F32, F16 or BF16", "diffusion_model.head.head.diff",
        "a full delta stored as bytes")
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for old in os.listdir(args.out):
        if old != "manifest.json":
            os.remove(os.path.join(args.out, old))
    lines = []
    for name, data, message, key, why in cases(np.random.default_rng(1616)):
        assert message.isascii() and '"' not in message and "\\" not in message, message
        with open(os.path.join(args.out, name), "wb") as f:
            f.write(data)
        lines.append(json.dumps({"file": name, "code": "kBadModelFile", "message": message,
                                 "key": key, "why": why}))
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        f.write('{"cases": [\n  ' + ",\n  ".join(lines) + "\n]}\n")
    print(len(lines), "bad files")


if __name__ == "__main__":
    main()
