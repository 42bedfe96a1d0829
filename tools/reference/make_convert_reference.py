#!/usr/bin/env python3
"""Writes tests/data/convert/: the codes that ml_dtypes (the float8/bfloat16 implementation
PyTorch's conventions and JAX share) and numpy (float16) give for a few thousand float32 values,
for tests/tensor/convert_test.cpp to compare with Ferry's encoders code for code.

    python3 -m venv tools/reference/.venv
    tools/reference/.venv/bin/pip install -r tools/reference/requirements.txt
    tools/reference/.venv/bin/python tools/reference/make_convert_reference.py

Files written (text, one record a line, hexadecimal, '#' lines are comments):
  encode.txt     f32_bits bf16 f16 e4m3fn e5m2: the float32 input and the code each type's
                 cast (numpy `astype`) gives it
  f8_decode.txt  code e4m3fn_as_f32_bits e5m2_as_f32_bits: every 8-bit code read back as float32

The inputs: specials (signed zeros, infinities, quiet and signalling NaNs with payloads, f32
extremes), every e4m3fn and e5m2 value and a sample of bf16 and f16 values, the tie point between
each pair of neighbours in those sets (also the one past the largest finite value) with the float32
just below, at and above it, both signs, and random floats: bit patterns over every exponent and
log-uniform magnitudes across the narrow formats' ranges. The seed is fixed: rerunning rewrites
the same files.
"""

import os
import sys

import ml_dtypes
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.normpath(os.path.join(HERE, "..", "..", "tests", "data", "convert"))
SEED = 20240611

# name, numpy dtype, code width in bits
FORMATS = [
    ("bf16", ml_dtypes.bfloat16, 16),
    ("f16", np.float16, 16),
    ("e4m3fn", ml_dtypes.float8_e4m3fn, 8),
    ("e5m2", ml_dtypes.float8_e5m2, 8),
]


def code_type(bits):
    return np.uint16 if bits == 16 else np.uint8


def f32_of_bits(bits):
    return np.array(bits, dtype=np.uint32).view(np.float32)


def bits_of_f32(values):
    return np.asarray(values, dtype=np.float32).view(np.uint32)


def positive_finite_values(dtype, width, codes):
    """float64 values of the given positive codes that are finite, sorted by code."""
    as_codes = np.array(codes, dtype=code_type(width))
    with np.errstate(invalid="ignore"):
        values = as_codes.view(dtype).astype(np.float64)
    return values[np.isfinite(values)]


def sample_codes(width, rng):
    if width == 8:
        return list(range(0x80))
    # bf16, f16: the subnormal/normal boundary, the top of the range and a random sample.
    codes = set(range(0, 12)) | set(range(0x7F7F - 12, 0x7F80)) | set(range(0x7BFF - 12, 0x7C00))
    codes |= {0x0080 + d for d in range(-6, 6)} | {0x0400 + d for d in range(-6, 6)}
    codes |= set(int(c) for c in rng.integers(0, 0x7F80, size=100))
    return sorted(c for c in codes if 0 <= c < 0x8000)


def tie_inputs(dtype, width, rng):
    """Float32 bit patterns at and beside the midpoints between neighbouring values."""
    values = positive_finite_values(dtype, width, sample_codes(width, rng))
    values = np.unique(values)
    out = []
    # Neighbours in the sample are neighbours in the format only for consecutive codes; for the
    # sampled 16-bit formats use each value and the next representable value above it instead.
    all_codes = np.arange(1 << (width - 1), dtype=np.int64)
    all_values = positive_finite_values(dtype, width, all_codes)
    largest = all_values[-1]
    ulp_at_top = all_values[-1] - all_values[-2]
    for v in values:
        i = np.searchsorted(all_values, v)
        upper = all_values[i + 1] if i + 1 < len(all_values) else largest + ulp_at_top
        mid = (v + upper) / 2.0
        mid32 = np.float32(mid)
        if float(mid32) != mid:
            sys.exit(f"midpoint {mid!r} is not a float32")
        for x in (np.nextafter(mid32, np.float32(0)), mid32,
                  np.nextafter(mid32, np.float32(np.inf)), np.float32(v)):
            out.append(int(bits_of_f32(x)))
    return out


def special_inputs():
    specials = [
        0x00000000, 0x7F800000, 0x7FC00000, 0x7F800001, 0x7FBFFFFF, 0x7FC12345, 0x7FFFFFFF,
        0x7FA00000, 0x7F7FFFFF, 0x00800000, 0x007FFFFF, 0x00000001, 0x3F800000, 0x33800000,
        0x33000000, 0x33000001, 0x387FC000, 0x38800000, 0x477FE000, 0x477FEFFF, 0x477FF000,
        0x43E00000, 0x43E00001, 0x43E7FFFF, 0x43E80000, 0x43E80001, 0x43EFFFFF, 0x43F00000,
        0x47600000, 0x476FFFFF, 0x47700000, 0x47800000, 0x3B000000, 0x3A800000, 0x37800000,
        0x37000000, 0x36800000,
    ]
    return specials + [b | 0x80000000 for b in specials]


def random_inputs(rng):
    raw = [int(b) for b in rng.integers(0, 1 << 32, size=1000, dtype=np.uint64)]
    exponents = rng.uniform(-30.0, 20.0, size=500)
    signs = rng.choice([-1.0, 1.0], size=500)
    magnitudes = (signs * np.exp2(exponents)).astype(np.float32)
    return raw + [int(b) for b in bits_of_f32(magnitudes)]


def main():
    rng = np.random.default_rng(SEED)
    inputs = special_inputs()
    for _, dtype, width in FORMATS:
        ties = tie_inputs(dtype, width, rng)
        inputs += ties + [b | 0x80000000 for b in ties]
    inputs += random_inputs(rng)
    seen = set()
    unique = []
    for b in inputs:
        if b not in seen:
            seen.add(b)
            unique.append(b)

    x = f32_of_bits(unique)
    columns = []
    with np.errstate(all="ignore"):
        for _, dtype, width in FORMATS:
            columns.append(x.astype(dtype).view(code_type(width)))

    os.makedirs(OUT, exist_ok=True)
    header = (f"# Written by tools/reference/make_convert_reference.py (ml_dtypes "
              f"{ml_dtypes.__version__}, numpy {np.__version__}); do not edit.\n")
    with open(os.path.join(OUT, "encode.txt"), "w", newline="\n") as f:
        f.write(header)
        f.write("# f32_bits bf16 f16 e4m3fn e5m2 (bf16, e4m3fn, e5m2: ml_dtypes; f16: numpy)\n")
        for i, b in enumerate(unique):
            f.write(f"{b:08x} {columns[0][i]:04x} {columns[1][i]:04x} "
                    f"{columns[2][i]:02x} {columns[3][i]:02x}\n")

    codes = np.arange(256, dtype=np.uint8)
    e4m3 = bits_of_f32(codes.view(ml_dtypes.float8_e4m3fn).astype(np.float32))
    e5m2 = bits_of_f32(codes.view(ml_dtypes.float8_e5m2).astype(np.float32))
    with open(os.path.join(OUT, "f8_decode.txt"), "w", newline="\n") as f:
        f.write(header)
        f.write("# code e4m3fn_as_f32_bits e5m2_as_f32_bits\n")
        for c in range(256):
            f.write(f"{c:02x} {e4m3[c]:08x} {e5m2[c]:08x}\n")
    print(f"{len(unique)} inputs -> {OUT}")


if __name__ == "__main__":
    main()
