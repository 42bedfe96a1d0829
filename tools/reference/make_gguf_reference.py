#!/usr/bin/env python3
"""Writes the GGUF reference files in tests/data/gguf/ with the `gguf` package's own writer, and
reference.json with what its GGUFReader reads back from them (formats_lora_moe.md §1.6).

tests/io/gguf_reference_test.cpp checks that Ferry's reader sees the same tensors (name, ggml
type, shape, absolute offset, bytes, FNV-1a of the bytes) and key/values. Deterministic (fixed
seeds). Needs numpy and gguf==0.19.0 only (no torch):

    python3 -m venv build/gguf-venv && build/gguf-venv/bin/pip install gguf==0.19.0 numpy
    build/gguf-venv/bin/python tools/reference/make_gguf_reference.py
"""

import argparse
import json
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T, GGUFValueType as V

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "..", "..", "tests", "data", "gguf")

# Byte offset of each half-precision scale inside a block (formats_lora_moe.md §1.2), overwritten
# with finite values so random blocks never carry Inf/NaN scales.
HALF_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}


def raw_blocks(rng, qtype, rows, cols):
    """Random blocks of `qtype` for a [rows, cols] weight, as the byte array gguf-py expects."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    n_blocks = rows * cols // block
    data = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    for at in HALF_FIELDS[qtype]:
        halves = (rng.standard_normal(n_blocks) * 0.01).astype(np.float16)
        data[:, at:at + 2] = halves.view(np.uint8).reshape(n_blocks, 2)
    return data.reshape(rows, cols // block * size)


NESTED = [[1, 2], [3], [4, 5, 6]]


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in bytes(data):
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def wan_like(rng, prefix="", arch=True, alignment=None):
    """Tensors of a tiny Wan DiT shaped as city96's files are (§1.3, §1.4), one of each type."""
    tensors = []  # (name, array, raw_dtype or None)
    d = 32
    tensors.append(("patch_embedding.weight", rng.standard_normal((d, 4, 1, 2, 2)).astype(np.float32), None))
    tensors.append(("patch_embedding.bias", rng.standard_normal(d).astype(np.float32), None))
    tensors.append(("blocks.0.modulation", rng.standard_normal((1, 6, d)).astype(np.float32), None))
    tensors.append(("blocks.0.self_attn.q.weight",
                    gguf.quants.quantize(rng.standard_normal((d, 64)).astype(np.float32), T.Q8_0), T.Q8_0))
    for i, qtype in enumerate([T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1]):
        tensors.append((f"blocks.0.legacy.{i}.weight",
                        gguf.quants.quantize(rng.standard_normal((3, 64)).astype(np.float32), qtype), qtype))
    tensors.append(("blocks.0.self_attn.v.weight", raw_blocks(rng, T.Q6_K, 4, 256), T.Q6_K))
    tensors.append(("blocks.0.ffn.0.weight", raw_blocks(rng, T.Q4_K, 4, 512), T.Q4_K))
    tensors.append(("blocks.0.ffn.2.weight", raw_blocks(rng, T.Q5_K, 2, 256), T.Q5_K))
    tensors.append(("blocks.0.cross_attn.q.weight", raw_blocks(rng, T.Q3_K, 2, 256), T.Q3_K))
    tensors.append(("blocks.0.cross_attn.k.weight", raw_blocks(rng, T.Q2_K, 2, 256), T.Q2_K))
    tensors.append(("text_embedding.0.weight", rng.standard_normal((d, 16)).astype(np.float16), None))
    tensors.append(("head.head.weight",
                    gguf.quants.quantize(rng.standard_normal((16, d)).astype(np.float32), T.BF16), T.BF16))

    writer = gguf.GGUFWriter(path=None, arch="wan")
    if not arch:
        # sd.cpp-converted files have no general.architecture (§1.4).
        del writer.kv_data[0]["general.architecture"]
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    if alignment is not None:
        writer.add_custom_alignment(alignment)
    writer.add_array("ferry.test.ints", [1, -2, 3, 2**31 - 1])
    writer.add_array("ferry.test.strings", ["a", "", "ünïcode"])
    writer.add_array("ferry.test.floats", [0.5, -1.25, 3.0e-8])
    writer.add_array("ferry.test.nested", NESTED)
    writer.add_key_value("ferry.test.u8", 200, V.UINT8)
    writer.add_key_value("ferry.test.i8", -100, V.INT8)
    writer.add_key_value("ferry.test.u16", 60000, V.UINT16)
    writer.add_key_value("ferry.test.i16", -30000, V.INT16)
    writer.add_key_value("ferry.test.i32", -2000000000, V.INT32)
    writer.add_key_value("ferry.test.u64", 2**40 + 3, V.UINT64)
    writer.add_key_value("ferry.test.i64", -(2**40) - 3, V.INT64)
    writer.add_key_value("ferry.test.f32", 0.1, V.FLOAT32)
    writer.add_key_value("ferry.test.f64", 0.1, V.FLOAT64)
    writer.add_key_value("ferry.test.bool", True, V.BOOL)
    for name, array, raw in tensors:
        writer.add_tensor(prefix + name, array, raw_dtype=raw)
    return writer


def t5_like(rng):
    """A llama.cpp-style T5 encoder file with its tokenizer in the metadata (§1.5)."""
    writer = gguf.GGUFWriter(path=None, arch="t5encoder")
    writer.add_tokenizer_model("t5")
    tokens = ["<pad>", "</s>", "<unk>", "▁a", "▁ferry", "s", "[PAD6]", "[PAD7]"]
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0, 0.0, 0.0, -3.5, -7.25, -4.0, 0.0, 0.0])
    writer.add_token_types([3, 3, 2, 1, 1, 1, 5, 5])
    writer.add_precompiled_charsmap(bytes(range(16)))
    writer.add_eos_token_id(1)
    writer.add_pad_token_id(0)
    writer.add_unk_token_id(2)
    writer.add_tensor("token_embd.weight",
                      gguf.quants.quantize(rng.standard_normal((8, 32)).astype(np.float32), T.Q8_0),
                      raw_dtype=T.Q8_0)
    writer.add_tensor("enc.blk.0.attn_norm.weight", np.ones(32, dtype=np.float32))
    writer.add_tensor("enc.blk.0.attn_rel_b.weight", rng.standard_normal((4, 32)).astype(np.float16))
    # ComfyUI's reshape trick (§1.4): the tensor is stored flat, the KV gives its torch shape.
    writer.add_tensor("enc.blk.0.attn_q.weight", rng.standard_normal(64).astype(np.float32))
    writer.add_array("comfy.gguf.orig_shape.enc.blk.0.attn_q.weight", [2, 4, 8])
    return writer


def write(writer, path):
    writer.write_header_to_file(path=path)
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def value_json(field):
    """A KV as GGUFReader reports it: its type ids and its value."""
    types = [int(t) for t in field.types]
    if field.types[0] == V.ARRAY and len(field.types) > 2:
        # gguf-py's reader flattens nested arrays (its FIXME): keep what was written, checked
        # against the flattened values it reads.
        assert field.contents() == [x for row in NESTED for x in row], field.contents()
        return types, NESTED
    value = field.contents()
    if isinstance(value, float):
        value = float(value)
    return types, value


def describe(path, name):
    reader = gguf.GGUFReader(path)
    out = {"file": name, "alignment": int(reader.alignment), "data_offset": int(reader.data_offset),
           "tensors": [], "kvs": []}
    for t in reader.tensors:
        raw = np.asarray(t.data).tobytes()
        assert len(raw) == int(t.n_bytes), t.name
        out["tensors"].append({
            "name": t.name, "ggml_type": int(t.tensor_type),
            "shape": [int(x) for x in reversed(t.shape.tolist())],
            "offset": int(t.data_offset), "bytes": int(t.n_bytes), "fnv1a64": str(fnv1a64(raw))})
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue  # the reader's pseudo-fields (version, counts)
        types, value = value_json(field)
        out["kvs"].append({"key": key, "types": types, "value": value})
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    files = [
        ("wan_like_align64.gguf", lambda rng: wan_like(rng, alignment=64)),
        ("wan_like_prefixed_no_arch.gguf",
         lambda rng: wan_like(rng, prefix="model.diffusion_model.", arch=False)),
        ("t5_like_tokenizer.gguf", t5_like),
    ]
    reference = {"gguf_version": gguf.__version__ if hasattr(gguf, "__version__") else "0.19.0",
                 "files": []}
    for seed, (name, make) in enumerate(files):
        path = os.path.join(args.out, name)
        write(make(np.random.default_rng(1000 + seed)), path)
        reference["files"].append(describe(path, name))
    with open(os.path.join(args.out, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(reference, f, indent=1, ensure_ascii=False)
        f.write("\n")
    for entry in reference["files"]:
        print(entry["file"], len(entry["tensors"]), "tensors", len(entry["kvs"]), "kvs",
              os.path.getsize(os.path.join(args.out, entry["file"])), "bytes")


if __name__ == "__main__":
    main()
