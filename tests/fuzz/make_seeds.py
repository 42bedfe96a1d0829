#!/usr/bin/env python3
"""Writes the small synthetic seeds of tests/fuzz/seeds/ that are not plain text: SentencePiece
models (protobuf) shaped like umT5's, small enough that libFuzzer mutates them quickly. The real
umT5 tokenizer (tests/data/umt5/tokenizer/spiece.model) is a seed too. Run from anywhere:
    python3 tests/fuzz/make_seeds.py
"""
import pathlib
import struct

HERE = pathlib.Path(__file__).resolve().parent


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def key(field, wire):
    return varint(field << 3 | wire)


def length(field, payload):
    return key(field, 2) + varint(len(payload)) + payload


def number(field, n):
    return key(field, 0) + varint(n)


def piece(text, score, kind=1):
    body = length(1, text.encode()) + key(2, 5) + struct.pack("<f", score)
    if kind != 1:
        body += number(3, kind)
    return length(1, body)


def model(pieces, byte_fallback=False, charsmap=b"", name="identity", suffix=False):
    out = b"".join(piece(*p) for p in pieces)
    trainer = number(3, 1)  # UNIGRAM
    if byte_fallback:
        trainer += number(35, 1)
    if suffix:
        trainer += number(24, 1)
    trainer += length(46, b"<s>") + length(47, b"</s>") + length(48, b"<pad>")
    out += length(2, trainer)
    normalizer = length(1, name.encode())
    if charsmap:
        normalizer += length(2, charsmap)
    normalizer += number(3, 1) + number(4, 1) + number(5, 1)
    return out + length(3, normalizer)


# umT5 numbers <pad> 0, </s> 1, <unk> 2 (control, control, unknown).
T5_HEAD = [("<pad>", 0.0, 3), ("</s>", 0.0, 3), ("<unk>", 0.0, 2)]
WORDS = ["\u2581", "\u2581a", "\u2581ferry", "\u2581at", "\u2581dawn", "a", "t", "e", "r", "f",
         "y", "d", "w", "n", "\u2581the", "\u2581cat", "\u2581\u732b", "\u732b", "\u00e9", ","]


def words(start=-1.0):
    return [(w, start - i * 0.5, 1) for i, w in enumerate(WORDS)]


def charsmap():
    # A precompiled charsmap: a trie of one unit, then the replacement texts. A trie that maps
    # nothing (one empty double-array unit) with one NUL-terminated replacement.
    trie = struct.pack("<I", 0)
    normalized = b"a\x00"
    return struct.pack("<I", len(trie)) + trie + normalized


def main():
    out = HERE / "seeds" / "spiece_model"
    out.mkdir(parents=True, exist_ok=True)
    (out / "t5_small.model").write_bytes(model(T5_HEAD + words()))
    bytes_ = [("<0x%02X>" % b, 0.0, 6) for b in range(256)]
    (out / "t5_byte_fallback.model").write_bytes(model(T5_HEAD + bytes_ + words(), True))
    (out / "t5_charsmap.model").write_bytes(
        model(T5_HEAD + words(), charsmap=charsmap(), name="nmt_nfkc"))
    (out / "t5_suffix.model").write_bytes(model(T5_HEAD + words(), suffix=True))


if __name__ == "__main__":
    main()
