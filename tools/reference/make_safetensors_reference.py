#!/usr/bin/env python3
"""Writes tests/data/safetensors/reference/: valid files made by the official `safetensors`
package (the Hugging Face reference implementation), and reference.json describing every tensor
as that package reads it back, for tests/io/safetensors_reference_test.cpp.

    python3 -m venv tools/reference/.venv
    tools/reference/.venv/bin/pip install -r tools/reference/requirements.txt
    tools/reference/.venv/bin/python tools/reference/make_safetensors_reference.py
    tools/reference/.venv/bin/python tools/reference/make_safetensors_reference.py --check-bad

Files written:
  single.safetensors           every dtype numpy has (F64 F32 F16 I64 I32 I16 I8 U8 BOOL), a
                               scalar, zero-size tensors, a rank-8 tensor, a unicode name and
                               several __metadata__ entries
  writer_match.safetensors     small tensors the C++ test writes again with Ferry's writer and
                               compares byte for byte (one __metadata__ entry only: the reference
                               stores metadata in a hash map, so the order of several is random)
  model-0000N-of-00002.safetensors + model.safetensors.index.json
                               a sharded set; the shards come from the package, the index (which
                               the package does not write) is written here in the Hugging Face
                               layout {"metadata": {"total_size": N}, "weight_map": {...}}
  reference.json               one line per tensor: file, name, dtype, shape, nbytes and the
                               FNV-1a 64 hash of its bytes; one line per metadata entry

BF16 and F8 are absent: numpy has no such types, so safetensors.numpy cannot write them.

--check-bad loads every file of tests/data/safetensors/bad/ with the official package and
prints which ones it accepts, to show where Ferry is stricter than the reference.
"""

import argparse
import json
import os
import sys

import numpy as np
import safetensors
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.normpath(os.path.join(HERE, "..", "..", "tests", "data", "safetensors"))


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def single_tensors(rng):
    f32_special = np.array([0.0, -0.0, 1.5, np.inf, -np.inf, np.nan, 1e-45], dtype=np.float32)
    return {
        "f64_scalar": np.array(np.pi, dtype=np.float64),
        "f64_vector": rng.standard_normal(5).astype(np.float64),
        "f32_special": f32_special,
        "f32_matrix": rng.standard_normal((3, 5)).astype(np.float32),
        "f16_matrix": rng.standard_normal((4, 3)).astype(np.float16),
        "i64_extremes": np.array([np.iinfo(np.int64).min, -1, 0, 1, np.iinfo(np.int64).max],
                                 dtype=np.int64),
        "i32_grid": np.arange(-6, 6, dtype=np.int32).reshape(3, 4),
        "i16_ramp": np.arange(-300, 300, 150, dtype=np.int16),
        "i8_ramp": np.arange(-128, 128, 37, dtype=np.int8),
        "u8_image": rng.integers(0, 256, size=(2, 3, 4), dtype=np.uint8),
        "bool_mask": np.array([True, False, False, True, True, False, True, False, True]),
        "empty_f32": np.zeros((0,), dtype=np.float32),
        "empty_i64_3x0": np.zeros((3, 0), dtype=np.int64),
        "empty_bool_0x2x0": np.zeros((0, 2, 0), dtype=np.bool_),
        "u8_rank8": np.arange(16, dtype=np.uint8).reshape(1, 2, 1, 2, 1, 2, 1, 2),
        "blocks.0.注意力.weight": rng.standard_normal((2, 2)).astype(np.float32),
    }


SINGLE_METADATA = {"format": "np", "producer": "ferry reference", "unicode": "héllo 世界",
                   "empty": ""}


def writer_match_tensors(rng):
    return {
        "weight": rng.standard_normal((3, 4)).astype(np.float32),
        "bias.ß": rng.standard_normal(4).astype(np.float16),
        "step": np.array(7, dtype=np.int64),
        "mask": np.array([True, False, True]),
        "nothing": np.zeros((0, 3), dtype=np.uint8),
    }


def shard_tensors(rng):
    return [
        {
            "embed.weight": rng.standard_normal((4, 3)).astype(np.float32),
            "blocks.0.attn.q": rng.standard_normal((3, 3)).astype(np.float16),
        },
        {
            "blocks.1.attn.q": rng.standard_normal((3, 3)).astype(np.float16),
            "head.bias": rng.standard_normal(4).astype(np.float32),
            "head.step": np.array(42, dtype=np.int64),
        },
    ]


def describe(path, lines):
    """Appends reference.json lines for `path`, as the official package reads it back."""
    name = os.path.basename(path)
    arrays = load_file(path)
    with safe_open(path, framework="numpy") as f:
        for key, value in sorted((f.metadata() or {}).items()):
            lines.append({"file": name, "metadata_key": key, "metadata_value": value})
        for tensor in sorted(f.keys()):
            view = f.get_slice(tensor)
            data = np.ascontiguousarray(arrays[tensor]).tobytes()
            lines.append({"file": name, "name": tensor, "dtype": view.get_dtype(),
                          "shape": list(view.get_shape()), "nbytes": len(data),
                          "fnv1a64": "%016x" % fnv1a64(data)})


def write_reference(out):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20240611)
    lines = []

    single = os.path.join(out, "single.safetensors")
    save_file(single_tensors(rng), single, metadata=SINGLE_METADATA)
    describe(single, lines)

    match = os.path.join(out, "writer_match.safetensors")
    save_file(writer_match_tensors(rng), match, metadata={"format": "np"})
    describe(match, lines)

    weight_map = {}
    total = 0
    shards = shard_tensors(rng)
    for i, tensors in enumerate(shards):
        shard = "model-%05d-of-%05d.safetensors" % (i + 1, len(shards))
        path = os.path.join(out, shard)
        save_file(tensors, path, metadata={"format": "np"})
        describe(path, lines)
        for tensor, array in tensors.items():
            weight_map[tensor] = shard
            total += array.nbytes
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(out, "model.safetensors.index.json"), "w", encoding="utf-8",
              newline="\n") as f:
        json.dump(index, f, indent=2)
        f.write("\n")

    for line in lines:
        for value in line.values():
            # tests/io/safetensors_reference_test.cpp reads only \" and \\ escapes.
            assert not isinstance(value, str) or all(c >= " " for c in value), value
    with open(os.path.join(out, "reference.json"), "w", encoding="utf-8", newline="\n") as f:
        f.write('{"safetensors": "%s", "numpy": "%s", "entries": [\n' %
                (safetensors.__version__, np.__version__))
        f.write(",\n".join("  " + json.dumps(line, ensure_ascii=False) for line in lines))
        f.write("\n]}\n")
    print("wrote %d tensors to %s (safetensors %s, numpy %s)" %
          (sum("name" in line for line in lines), out, safetensors.__version__, np.__version__))


def check_bad(folder):
    """Loads each bad file with the official package; prints the ones it accepts."""
    with open(os.path.join(folder, "manifest.json"), encoding="ascii") as f:
        cases = json.load(f)["cases"]
    accepted = 0
    for case in cases:
        path = os.path.join(folder, case["file"])
        try:
            tensors = load_file(path)
            with safe_open(path, framework="numpy") as f:
                f.metadata()
        except Exception as e:  # the package raises several types
            verdict = "refused (%s)" % type(e).__name__
        else:
            verdict = "ACCEPTED, %d tensors" % len(tensors)
            accepted += 1
        print("%-42s %s" % (case["file"], verdict))
    print("the reference package accepts %d of %d files that Ferry refuses" %
          (accepted, len(cases)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(DATA, "reference"))
    parser.add_argument("--check-bad", action="store_true",
                        help="report which files of the bad corpus the reference accepts")
    args = parser.parse_args()
    if args.check_bad:
        check_bad(os.path.join(DATA, "bad"))
    else:
        write_reference(os.path.normpath(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
