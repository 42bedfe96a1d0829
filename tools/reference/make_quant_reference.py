#!/usr/bin/env python3
"""Writes tests/data/quant/: blocks of every ggml quant type with the f32 values gguf-py's own
dequantiser (gguf.quants.dequantize, gguf 0.19.0) gives them, and bitsandbytes NF4 / FP4 weights
with the values bitsandbytes' algorithm gives them (formats_lora_moe.md §2.4, §2.6: numpy only;
torch is not needed). tests/backend/quant_blocks_test.cpp compares Ferry's dequantisers with them
bit for bit.

    python3 -m venv build/quant-venv
    build/quant-venv/bin/pip install numpy==1.26.4 gguf==0.19.0
    build/quant-venv/bin/python tools/reference/make_quant_reference.py

ggml files, <TYPE>.bin (F16, BF16, Q4_0 ... Q6_K), little-endian:
  char[8] "FQUANT1\\0"; u32 group_elems, group_bytes, groups, full_groups
  u8  data[groups * group_bytes]                 the input (a group is one block; 32 values for
                                                 F16 / BF16)
  u64 fnv1a[groups]                              FNV-1a 64 of each group's expected f32 values,
                                                 as little-endian bytes
  u32 expected[full_groups * group_elems]        the expected f32 bit patterns of the first
                                                 full_groups groups (the hand-made edge blocks)
The first full_groups groups are hand-made edge blocks (every special half in every scale field:
zeros, -0, subnormals, the largest half, infinities, NaNs; sweeps of every 6-bit / 8-bit scale
code, Q3_K's hmask, the fifth bits of Q5, Q6_K's signed scales), then 1000 blocks of random bytes
whose half scale fields are overwritten by finite random halves (N(0, 0.01); recipe 1 of §1.6).
The random blocks are checked through their hashes, to keep the committed data small (< 2 MB).

bitsandbytes files, <nf4|fp4>_<nested|plain>.bin:
  char[8] "FBNB4v1\\0"; u32 n, blocksize, nested, nested_blocksize; f32 nested_offset
  f32 code[16]; u8 codes[ceil(n / 2)]
  nested: u8 absmax[nb]; f32 nested_absmax[ceil(nb / nested_blocksize)]; f32 nested_code[256]
  plain:  f32 absmax[nb]
  u32 expected[n]
n is odd and not a multiple of the blocksize (a partial last block, a padded last byte); the
nested files have 2 nested blocks, the last partial. The weight has an all-zero block and a block
with a single nonzero value.

The seed is fixed: rerunning rewrites the same files.
"""

import os
import struct

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.normpath(os.path.join(HERE, "..", "..", "tests", "data", "quant"))
RANDOM_BLOCKS = 1000

# name: (type, elems per block, bytes per block, offsets of the half scale fields)
GGML = {
    "Q8_0": (T.Q8_0, 32, 34, [0]),
    "Q4_0": (T.Q4_0, 32, 18, [0]),
    "Q4_1": (T.Q4_1, 32, 20, [0, 2]),
    "Q5_0": (T.Q5_0, 32, 22, [0]),
    "Q5_1": (T.Q5_1, 32, 24, [0, 2]),
    "Q2_K": (T.Q2_K, 256, 84, [80, 82]),
    "Q3_K": (T.Q3_K, 256, 110, [108]),
    "Q4_K": (T.Q4_K, 256, 144, [0, 2]),
    "Q5_K": (T.Q5_K, 256, 176, [0, 2]),
    "Q6_K": (T.Q6_K, 256, 210, [208]),
}

ONE = 0x3C00
# Zeros, smallest and largest subnormals, smallest normal, largest finite, ±1, a typical scale.
FINITE_HALVES = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x7BFF, 0xFBFF, ONE,
                 0xBC00, 0x2E66]
# Infinities and NaNs (quiet, with a payload, signalling): real files have none, but the
# dequantiser must still give ggml's bits. One such field at a time: with two NaN operands, which
# payload an x86 add keeps depends on the operand order the compiler picks.
NONFINITE_HALVES = [0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7C01]


def fnv1a64(values):
    """FNV-1a 64 over each row's bytes (rows of a uint8 array), vectorised over the rows."""
    data = np.ascontiguousarray(values).view(np.uint8).reshape(values.shape[0], -1)
    h = np.full(data.shape[0], 0xCBF29CE484222325, dtype=np.uint64)
    prime = np.uint64(0x100000001B3)
    for column in range(data.shape[1]):
        h ^= data[:, column].astype(np.uint64)
        h *= prime
    return h


def put_half(block, offset, bits):
    block[offset:offset + 2] = np.frombuffer(struct.pack("<H", bits), dtype=np.uint8)


def ramp(n, mul=37, add=11):
    return ((np.arange(n) * mul + add) % 256).astype(np.uint8)


def pack_scale_min_k4(sc, mn):
    """Inverse of ggml's get_scale_min_k4: eight 6-bit scales and mins into 12 bytes."""
    s = np.zeros(12, dtype=np.uint8)
    for j in range(4):
        s[j] = sc[j] | ((sc[j + 4] >> 4) << 6)
        s[j + 4] = mn[j] | ((mn[j + 4] >> 4) << 6)
        s[j + 8] = (sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4)
    return s


def pack_q3_scales(codes):
    """Sixteen 6-bit Q3_K scale codes into 12 bytes (the layout of §1.2)."""
    s = np.zeros(12, dtype=np.uint8)
    for i in range(16):
        lo4, hi2 = codes[i] & 15, codes[i] >> 4
        if i < 8:
            s[i] |= lo4
        else:
            s[i - 8] |= lo4 << 4
        s[8 + (i & 3)] |= hi2 << (2 * (i >> 2))
    return s


def edge_blocks(name, size, fields):
    blocks = []

    def block(body=None):
        b = ramp(size) if body is None else body.copy()
        for f in fields:
            put_half(b, f, ONE)
        return b

    # Every special half in each scale field alone, the others 1.0, over a ramp of codes.
    for f in fields:
        for bits in FINITE_HALVES + NONFINITE_HALVES:
            b = block()
            put_half(b, f, bits)
            blocks.append(b)
    # Every finite special in all the fields at once, over all-zero and all-one code bytes.
    for body in (np.zeros(size, np.uint8), np.full(size, 0xFF, np.uint8)):
        for bits in FINITE_HALVES:
            b = body.copy()
            for f in fields:
                put_half(b, f, bits)
            blocks.append(b)

    if name in ("Q5_0", "Q5_1"):
        qh_at = 2 if name == "Q5_0" else 4
        for qh in (0x00000000, 0xFFFFFFFF, 0xAAAAAAAA, 0x55555555, 0x0000FFFF, 0xFFFF0000):
            b = block()
            b[qh_at:qh_at + 4] = np.frombuffer(struct.pack("<I", qh), dtype=np.uint8)
            blocks.append(b)
    if name in ("Q4_K", "Q5_K"):
        # Eight blocks: sub-block k of block i has scale (8i + k) % 64 and min (63 - 8i - k) % 64.
        for i in range(8):
            sc = np.array([(8 * i + k) % 64 for k in range(8)], dtype=np.uint8)
            mn = np.array([(63 - 8 * i - k) % 64 for k in range(8)], dtype=np.uint8)
            b = block()
            put_half(b, 0, 0x2E66)
            put_half(b, 2, 0x2A00)
            b[4:16] = pack_scale_min_k4(sc, mn)
            if name == "Q5_K":
                b[16:48] = [0x00, 0xFF, 0xAA, 0x55][i % 4]
            blocks.append(b)
    if name == "Q3_K":
        # Four blocks: sub-block s of block i has scale code (16i + s) % 64; hmask patterns.
        for i, hmask in enumerate((0x00, 0xFF, 0xAA, 0x55)):
            b = block()
            b[0:32] = hmask
            b[96:108] = pack_q3_scales([(16 * i + s) % 64 for s in range(16)])
            blocks.append(b)
    if name == "Q2_K":
        for i in range(16):  # every scale byte
            b = block()
            b[0:16] = np.arange(16 * i, 16 * i + 16, dtype=np.uint8)
            blocks.append(b)
    if name == "Q6_K":
        for i in range(16):  # every signed scale, -128 .. 127
            b = block()
            b[192:208] = np.arange(16 * i, 16 * i + 16, dtype=np.uint8)
            blocks.append(b)
        for qh in (0x00, 0xFF, 0xAA, 0x55):
            b = block()
            b[128:192] = qh
            blocks.append(b)
    return np.stack(blocks)


def random_blocks(rng, size, fields):
    blocks = rng.integers(0, 256, size=(RANDOM_BLOCKS, size), dtype=np.uint8)
    for f in fields:
        halves = (rng.normal(0.0, 0.01, RANDOM_BLOCKS)).astype(np.float16)
        blocks[:, f:f + 2] = halves.view(np.uint8).reshape(RANDOM_BLOCKS, 2)
    return blocks


def write_groups(name, group_elems, group_bytes, data, expected, full_groups):
    expected = np.ascontiguousarray(expected, dtype=np.float32).reshape(-1, group_elems)
    assert data.shape == (expected.shape[0], group_bytes)
    with open(os.path.join(OUT, name + ".bin"), "wb") as out:
        out.write(b"FQUANT1\0")
        out.write(struct.pack("<4I", group_elems, group_bytes, data.shape[0], full_groups))
        out.write(data.tobytes())
        out.write(fnv1a64(expected).astype("<u8").tobytes())
        out.write(expected[:full_groups].view("<u4").tobytes())


def write_ggml(rng, name):
    qtype, elems, size, fields = GGML[name]
    edges = edge_blocks(name, size, fields)
    data = np.concatenate([edges, random_blocks(rng, size, fields)])
    with np.errstate(all="ignore"):
        expected = quants.dequantize(data, qtype).reshape(-1, elems)
    write_groups(name, elems, size, data, expected, edges.shape[0])


def write_float(rng, name):
    """F16 / BF16 through gguf-py (F16: numpy astype; BF16: a shift)."""
    specials = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00, 0x7C00,
                0xFC00, 0x7E00, 0xFE01, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0x0080, 0x007F]
    edges = np.array(specials + [0] * (32 - len(specials) % 32), dtype=np.uint16)
    values = rng.integers(0, 65536, size=32 * RANDOM_BLOCKS, dtype=np.uint16)
    if name == "F16":
        # numpy widens a signalling f16 NaN to a signalling f32 NaN, where ggml's widening (F16C,
        # or its portable multiply) quiets it: the two oracles disagree, so no signalling NaN.
        signalling = ((values & 0x7C00) == 0x7C00) & ((values & 0x03FF) != 0) & \
            ((values & 0x0200) == 0)
        values[signalling] |= 0x0200
    codes = np.concatenate([edges, values])
    qtype = T.F16 if name == "F16" else T.BF16
    data = codes.view(np.uint8).reshape(-1, 64)
    if name == "F16":
        expected = codes.view(np.float16).astype(np.float32)
    else:
        expected = quants.dequantize(codes.view(np.uint8), qtype)
    write_groups(name, 32, 64, data, expected, edges.size // 32)


# ---- bitsandbytes ----

NF4 = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
                -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
                0.07958029955625534, 0.16093020141124725, 0.24611230194568634,
                0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                0.7229568362236023, 1.0], dtype=np.float32)
FP4 = (np.array([0, 0.0625, 8, 12, 4, 6, 2, 3, -0.0, -0.0625, -8, -12, -4, -6, -2, -3],
                dtype=np.float32) / np.float32(12)).astype(np.float32)


def dynamic_map():
    """bitsandbytes' create_dynamic_map(signed=True): 256 sorted values in [-1, 1]."""
    data = []
    for i in range(7):
        items = 2 ** i + 1
        bounds = np.linspace(0.1, 1, items, dtype=np.float32)
        means = (bounds[:-1] + bounds[1:]) / 2.0
        data += list((10.0 ** (-6 + i)) * means)
        data += list(-(10.0 ** (-6 + i)) * means)
    data += [0.0, 1.0]
    return np.array(sorted(data), dtype=np.float32)


def blockwise_absmax(x, blocksize):
    nb = -(-x.size // blocksize)
    padded = np.zeros(nb * blocksize, dtype=np.float32)
    padded[:x.size] = np.abs(x)
    return padded.reshape(nb, blocksize).max(axis=1)


def quantize_4bit(x, code, blocksize):
    """§2.6 steps 1-4: codes (u8, two per byte, high nibble first) and f32 absmax."""
    absmax = blockwise_absmax(x, blocksize)
    inv = (np.float32(1) / np.maximum(absmax, np.float32(1e-38))).astype(np.float32)
    scaled = np.clip(x * np.repeat(inv, blocksize)[:x.size], -1, 1).astype(np.float32)
    order = np.argsort(code, kind="stable")
    sorted_code = code[order]
    bounds = (sorted_code[:-1] + sorted_code[1:]) / np.float32(2)
    idx = np.searchsorted(bounds, scaled, side="left")
    codes = order[idx].astype(np.uint8)
    if codes.size % 2:
        codes = np.append(codes, np.uint8(0))
    return (codes[0::2] << 4) | codes[1::2], absmax


def quantize_nested(absmax, nested_blocksize):
    """§2.6 step 5: absmax - mean, blockwise through the dynamic map."""
    offset = np.float32(absmax.mean(dtype=np.float32))
    centred = (absmax - offset).astype(np.float32)
    nested_absmax = blockwise_absmax(centred, nested_blocksize)
    scaled = centred / np.repeat(nested_absmax, nested_blocksize)[:centred.size]
    dmap = dynamic_map()
    codes = np.abs(scaled[:, None] - dmap[None, :]).argmin(axis=1).astype(np.uint8)
    return codes, nested_absmax.astype(np.float32), dmap, offset


def write_bnb4(rng, kind, nested):
    blocksize, nested_blocksize = 64, 256
    n = blocksize * 260 + 33  # 261 blocks, the last partial; odd: a padded last byte
    x = rng.normal(0.0, 0.02, n).astype(np.float32)
    x[blocksize * 3:blocksize * 4] = 0  # an all-zero block
    x[blocksize * 5:blocksize * 6] = 0
    x[blocksize * 5 + 7] = -0.5  # a block with one nonzero value
    code = NF4 if kind == "nf4" else FP4
    packed, absmax = quantize_4bit(x, code, blocksize)
    idx = np.empty(packed.size * 2, dtype=np.uint8)
    idx[0::2], idx[1::2] = packed >> 4, packed & 15
    idx = idx[:n]
    blocks = np.arange(n) // blocksize
    if nested:
        absmax_codes, nested_absmax, dmap, offset = quantize_nested(absmax, nested_blocksize)
        scale = (dmap[absmax_codes] * nested_absmax[np.arange(absmax.size) // nested_blocksize]
                 ).astype(np.float32) + offset
    else:
        offset = np.float32(0)
        scale = absmax
    expected = (code[idx] * scale.astype(np.float32)[blocks]).astype(np.float32)
    name = f"{kind}_{'nested' if nested else 'plain'}.bin"
    with open(os.path.join(OUT, name), "wb") as out:
        out.write(b"FBNB4v1\0")
        out.write(struct.pack("<4If", n, blocksize, int(nested), nested_blocksize, offset))
        out.write(code.astype("<f4").tobytes())
        out.write(packed.tobytes())
        if nested:
            out.write(absmax_codes.tobytes())
            out.write(nested_absmax.astype("<f4").tobytes())
            out.write(dmap.astype("<f4").tobytes())
        else:
            out.write(absmax.astype("<f4").tobytes())
        out.write(expected.view("<u4").tobytes())


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20240615)
    for name in GGML:
        write_ggml(rng, name)
    for name in ("F16", "BF16"):
        write_float(rng, name)
    for kind in ("nf4", "fp4"):
        for nested in (True, False):
            write_bnb4(rng, kind, nested)
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"wrote {OUT}: {total} bytes")


if __name__ == "__main__":
    main()
