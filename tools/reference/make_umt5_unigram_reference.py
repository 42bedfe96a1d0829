#!/usr/bin/env python3
"""Writes tests/data/umt5/unigram_reference.json: token ids the Python sentencepiece package
gives for a few hundred texts, which tests/models/umt5_unigram_test.cpp compares Ferry's own
SentencePiece unigram implementation (core/models/umt5/unigram_*.cpp) with, id for id.

    tools/reference/.venv/bin/python tools/reference/make_umt5_tokenizer_reference.py  # the model
    tools/reference/.venv/bin/python tools/reference/make_umt5_unigram_reference.py

Models (the `models` list; each is a base model plus bytes appended to its serialized proto,
which protobuf parsing merges into the fields already there, so each variant changes exactly one
setting of the real model without storing its 263 kB again):
  nmt_nfkc                      tests/data/umt5/tokenizer/spiece.model as it is (umT5's settings:
                                nmt_nfkc charsmap, byte fallback, dummy prefix, whitespace rules)
  no_dummy_prefix, keep_extra_whitespaces, unescaped_whitespaces, whitespace_as_suffix,
  no_charsmap, user_defined, unused_and_control, all_whitespace_rules_off
                                the same model with one normalizer/trainer setting changed, or
                                with user-defined, unused or control pieces added
  near_tie                      a 6-piece model written here (no charsmap, no dummy prefix) whose
                                "===" has two segmentations that differ by float rounding only
  small_no_byte_fallback        a 90-piece model trained here on English only, without byte
                                fallback, identity normalisation (its bytes are stored base64):
                                unknown characters and runs of them become one <unk> id

Cases (the `cases` list): the model's name, the text (`text`, or `hex` for bytes that are not
valid UTF-8), `ids` (sp.encode: no EOS, no truncation) and, for texts under 120 characters,
`normalized` (sp.normalize). The texts: characters NFKC changes (compatibility forms, ligatures,
full-width, Hangul jamo, combining sequences, characters whose NFKC holds spaces), seeded random
mixes of scripts, emoji, controls, odd spaces and invalid bytes, whitespace runs, and a few long
texts. Rerunning writes the same file.
"""

import argparse
import base64
import io
import json
import os
import random
import sys
import unicodedata

import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.normpath(os.path.join(HERE, "..", "..", "tests", "data", "umt5"))
BASE_MODEL = "tokenizer/spiece.model"
SEED = 20261130


# ---- protobuf bytes appended to the model ---------------------------------------------------

def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wire):
    return varint((field << 3) | wire)


def length_field(field, payload):
    return key(field, 2) + varint(len(payload)) + payload


def bool_field(field, value):
    return key(field, 0) + varint(1 if value else 0)


def normalizer_spec(*fields):
    return length_field(3, b"".join(fields))


def trainer_spec(*fields):
    return length_field(2, b"".join(fields))


def piece(text, score, type_):
    import struct
    return length_field(1, length_field(1, text.encode()) + key(2, 5) + struct.pack("<f", score)
                        + key(3, 0) + varint(type_))


CONTROL = 3
USER_DEFINED = 4
UNUSED = 5
USER_DEFINED_PIECES = ["<cam>", "ｘｙ", "1920x1080", "▁zq", "a b"]

VARIANTS = [
    ("nmt_nfkc", b""),
    ("no_dummy_prefix", normalizer_spec(bool_field(3, False))),
    ("keep_extra_whitespaces", normalizer_spec(bool_field(4, False))),
    ("unescaped_whitespaces", normalizer_spec(bool_field(5, False))),
    ("whitespace_as_suffix", trainer_spec(bool_field(24, True))),
    ("no_charsmap", normalizer_spec(length_field(2, b""))),
    ("user_defined", b"".join(piece(p, 0.0, USER_DEFINED) for p in USER_DEFINED_PIECES)),
    ("unused_and_control",
     piece("zzq", 0.0, UNUSED) + piece("▁zq", 0.0, UNUSED) + piece("<ctl>", 0.0, CONTROL)),
    ("all_whitespace_rules_off",
     normalizer_spec(bool_field(3, False), bool_field(4, False), bool_field(5, False))),
]


def near_tie_model():
    """A hand-written model where "===" has two segmentations whose scores differ only by float
    rounding: "=" + "==" sums, rounded to float, to less than the exact "==" + "=" sum, so
    SentencePiece (which compares the exact sum in double against the float it stored) picks
    "==" + "="; a float comparison would keep "=" + "=="."""
    near = -(1.0 + 3.0 * 2.0 ** -23)
    return (piece("<pad>", 0.0, 3) + piece("</s>", 0.0, 3) + piece("<unk>", 0.0, 2)
            + piece("=", -1.0, 1) + piece("==", near, 1) + piece("a", -0.5, 1)
            + trainer_spec(key(3, 0) + varint(1)) + normalizer_spec(bool_field(3, False)))


def train_small_model():
    text = [
        "A cat walks across a sunny kitchen table, knocking over a cup of coffee.",
        "The camera follows the cat slowly, and the morning light falls through the window.",
        "Two astronauts float inside a space station, laughing as a drop of water drifts by.",
        "A drone shot over a mountain village at dawn: mist in the valley, red roofs.",
        "Close-up of an old man's hands carving wood in a small workshop; sawdust, warm light.",
    ] * 20
    writer = io.BytesIO()
    spm.set_random_generator_seed(SEED)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(text),
        model_writer=writer,
        model_type="unigram",
        vocab_size=90,
        character_coverage=1.0,
        normalization_rule_name="identity",
        byte_fallback=False,
        pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
        num_threads=1,
        shuffle_input_sentence=False,
        minloglevel=2,
    )
    return writer.getvalue()


# ---- texts ------------------------------------------------------------------------------------

SPACES = [" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u2003", "\u3000", "\u200b", "\u2028",
          "\u202f", "\u205f", "\u1680", "\x0b", "\x0c"]

POOLS = {
    "ascii": [chr(c) for c in range(0x21, 0x7F)],
    "latin": [chr(c) for c in range(0xA1, 0x250)],
    "combining": [chr(c) for c in range(0x300, 0x370)],
    "greek_cyrillic": [chr(c) for c in list(range(0x370, 0x3FF)) + list(range(0x400, 0x4FF))],
    "cjk": [chr(c) for c in range(0x4E00, 0x4E00 + 600)] + list("的一是在不了有和人这中大为上个国我以要他"),
    "kana_hangul": [chr(c) for c in list(range(0x3041, 0x30FF)) + list(range(0xAC00, 0xAC00 + 300))
                    + list(range(0x1100, 0x1160)) + list(range(0x1161, 0x11A8))],
    "fullwidth": [chr(c) for c in range(0xFF01, 0xFFEF)],
    "compat": [chr(c) for c in list(range(0x2150, 0x2190)) + list(range(0x2460, 0x24FF))
               + list(range(0x3200, 0x3400)) + list(range(0xFB00, 0xFB50))
               + list(range(0xFE10, 0xFE70)) + list(range(0x1D400, 0x1D500))],
    "emoji": [chr(c) for c in list(range(0x1F300, 0x1F650)) + list(range(0x1F900, 0x1F9FF))]
             + ["\u200d", "\ufe0f", "\ufe0e", "\U0001F3FB", "\U0001F1EF\U0001F1F5"],
    "controls": [chr(c) for c in list(range(0x00, 0x20)) + list(range(0x7F, 0xA0))
                 + [0x200c, 0x200d, 0x200e, 0x200f, 0x2060, 0xfeff, 0xfff9, 0xfffc]],
    "rare": [chr(c) for c in [0xE000, 0xF8FF, 0xFFFD, 0xFFFE, 0xFFFF, 0x10FFFD, 0x30000, 0x2A6D6,
                              0x0378, 0x0E01, 0x0E33, 0x0627, 0x0644, 0x05D0, 0x0915, 0x093F]],
    "spaces": SPACES,
}


def nfkc_changed():
    """Every character below U+30000 that NFKC changes (one list, sorted)."""
    return [chr(c) for c in range(0x30000)
            if not 0xD800 <= c < 0xE000 and unicodedata.normalize("NFKC", chr(c)) != chr(c)]


def nfkc_cases(rng):
    changed = nfkc_changed()
    rng.shuffle(changed)
    cases = []
    # 90 strings of 12 such characters, each between letters so that composition has neighbours
    for k in range(90):
        chars = changed[k * 12:(k + 1) * 12]
        cases.append("".join(rng.choice("aeiouAEIOU ") + c for c in chars))
    # sequences that compose or decompose across characters
    cases += [
        "e\u0301 a\u0300 o\u0308 n\u0303 A\u030a c\u0327 \u0041\u030a\u0301",
        "\u1100\u1161\u11a8 \u1112\u1161\u11ab\u1100\u1173\u11af \u110b\u1175",
        "\u1100\u1161 \u1100\u1161\u11a8\u11a8 \u1161\u1100",
        "\uac00\u11a8 \uac00\u0301",
        "\u00a8a \u00b4b \u02dac \u1fedd \u0385e",
        "\u2474\u2475 \u2488 \u249c \u3200 \u321d \u33a1 \u3392 \u33ff",
        "\ufdfa \ufdfb \ufb2c \ufb4f \ufe7f\ufe70",
        "\u2160\u2161\u2162 \u2170\u2171 \u00bd\u00bc\u2153 x\u00b2 H\u2082O",
        "\ufb01\ufb02 \ufb00\ufb03\ufb04 \u0132\u0133 \u01c4\u01c6 \u1e9b\u0323",
        "\u212b \u2126 \u212a \u2103 \u2109 \u2122 \u2116 \u33c7",
        "\u0958\u0959 \u0929 \u0931 \u0934",
        "\uff76\uff9e \uff8a\uff9f \uff73\uff9e \u30ab\u3099 \u30cf\u309a",
        "\u03d2\u0301 \u03d3 \u03d4 \u1e9b",
    ]
    return cases


def random_mix(rng, length):
    names = list(POOLS)
    weights = [10, 3, 2, 2, 6, 3, 3, 3, 2, 1, 1, 4]
    out = []
    for _ in range(length):
        pool = POOLS[rng.choices(names, weights)[0]]
        out.append(rng.choice(pool))
    return "".join(out)


def whitespace_cases(rng):
    cases = ["", " ", "   ", "\t\n", "\u3000", "\u3000a\u3000", "a", " a", "a ", " a ",
             "a  b", "a \u3000 b", "a\u00a0\u00a0b", "  leading and trailing  ",
             "\u200ba\u200b", "\u200b", "\u200b \u200b", "a\u200b b", "a \u200bb",
             "\u00a8", " \u00a8 ", "\u00a8\u00a8", "a\u00a8 b", "\u2474", " \u2474 ",
             "\ufe4d\ufe4d", "\u2002\u2002x\u2002\u2002"]
    for _ in range(25):
        parts = []
        for _ in range(rng.randint(1, 8)):
            parts.append("".join(rng.choice(SPACES) for _ in range(rng.randint(0, 4))))
            parts.append(rng.choice(["cat", "a", "the", "猫", "ｘ", "é", "\u00a8", "⑴", "x", ""]))
        cases.append("".join(parts))
    return cases


def long_cases(rng):
    return [
        " ".join(["A red fox runs through deep snow in a quiet birch forest at sunset,"
                  " 狐狸在雪中奔跑。"] * 25),
        random_mix(rng, 1500),
        ("\u3000 \t" * 40) + "word " * 200 + ("\u00a0" * 30),
    ]


def invalid_utf8_cases():
    return [b"ab\xffc", b"\xc3", b"\xe4\xb8", b"a\xe4\xb8\xadb\xe4\xb8", b"\xf0\x9f\x90",
            b"\xed\xa0\x80x", b"\xc0\xaf \xe0\x80\xaf", b"\xf4\x90\x80\x80", b"\x80\x80 a",
            b"  \xff  \xfe  ", b"\xef\xbf\xbd\xff", b"\xf8\x88\x80\x80\x80"]


def variant_texts(rng):
    texts = ["A cat  walks\tacross   a table.", "  ＡＢＣ　ｘｙ　１２３  ", " <cam> slow motion <cam>",
             "1920x1080 4K", "a b c", "a  b", "ｘｙｘｙ xy", "\u00a8 \u2474 \ufb01", "猫 cat",
             "\u200b  \u200b", " ", "slow", " slow ", "▁slow", " zq zq", "▁zq", "a\u3000\u3000b",
             "emoji 🐶 🎉 ⚽", "zzq <ctl> zzqzzq", "<ctl>",
             "ﬁne ﬂowers", "\ttab\nnewline\r\n", "x" * 30, "é é"]
    texts += [random_mix(rng, rng.randint(5, 25)) for _ in range(8)]
    return texts


def small_model_texts(rng):
    return ["A cat walks across a table.", "猫猫猫 cat 猫", "The camera ÇÅ follows ÿ the cat",
            "ÀÁÂ ÃÄ", "日本語のテキスト", "  spaces   everywhere  ", "🐶🐱 cat 🐭",
            "a\u0301b\u0301", "xyz qqq zzz", "Zebra Quiz Jazz"] + \
           [random_mix(rng, rng.randint(5, 30)) for _ in range(12)]


# ---- writing ----------------------------------------------------------------------------------

def case(model, sp, text):
    record = {"model": model}
    if isinstance(text, bytes):
        record["hex"] = text.hex()
    else:
        record["text"] = text
    record["ids"] = sp.encode(text, out_type=int)
    if not isinstance(text, bytes) and len(text) < 120:
        record["normalized"] = sp.normalize(text)
    return record


def write(out_path):
    rng = random.Random(SEED)
    with open(os.path.join(DATA, BASE_MODEL), "rb") as f:
        base = f.read()
    small = train_small_model()
    if small != train_small_model():
        sys.exit("SentencePiece training is not deterministic here: two runs differ")

    models = []
    processors = {}
    for name, suffix in VARIANTS:
        models.append({"name": name, "base": BASE_MODEL, "suffix_hex": suffix.hex()})
        processors[name] = spm.SentencePieceProcessor(model_proto=base + suffix)
    tie = near_tie_model()
    models.append({"name": "near_tie", "base64": base64.b64encode(tie).decode(), "suffix_hex": ""})
    processors["near_tie"] = spm.SentencePieceProcessor(model_proto=tie)
    models.append({"name": "small_no_byte_fallback",
                   "base64": base64.b64encode(small).decode(), "suffix_hex": ""})
    processors["small_no_byte_fallback"] = spm.SentencePieceProcessor(model_proto=small)

    cases = []
    sp = processors["nmt_nfkc"]
    for text in nfkc_cases(rng):
        cases.append(case("nmt_nfkc", sp, text))
    for _ in range(120):
        cases.append(case("nmt_nfkc", sp, random_mix(rng, rng.randint(1, 40))))
    for text in whitespace_cases(rng) + long_cases(rng) + invalid_utf8_cases():
        cases.append(case("nmt_nfkc", sp, text))
    for name, _ in VARIANTS[1:]:
        for text in variant_texts(rng) + whitespace_cases(rng)[:27]:
            cases.append(case(name, processors[name], text))
    for text in small_model_texts(rng) + whitespace_cases(rng)[:27]:
        cases.append(case("small_no_byte_fallback", processors["small_no_byte_fallback"], text))

    for text in ["===", "==", "=====", "a===a", "= ===", "======", "=a==="]:
        cases.append(case("near_tie", processors["near_tie"], text))

    # the cases must reach the paths they are for
    assert cases[-7]["ids"] == [4, 3], cases[-7]
    pieces = [processors["user_defined"].id_to_piece(i)
              for c in cases if c["model"] == "user_defined" for i in c["ids"]]
    assert "<cam>" in pieces and "ｘｙ" in pieces, pieces
    unused = [i for c in cases if c["model"] == "unused_and_control" for i in c["ids"]]
    assert not {1200, 1201, 1202} & set(unused)
    unk = processors["small_no_byte_fallback"].unk_id()
    assert any(c["model"] == "small_no_byte_fallback" and unk in c["ids"] for c in cases)

    reference = {
        "generator": "tools/reference/make_umt5_unigram_reference.py",
        "sentencepiece": spm.__version__,
        "models": models,
        "cases": cases,
    }
    lines = ",\n  ".join(json.dumps(c, ensure_ascii=False, separators=(",", ":")) for c in cases)
    head = json.dumps({k: v for k, v in reference.items() if k != "cases"}, ensure_ascii=False,
                      separators=(",", ":"), indent=None)
    with open(out_path, "w", encoding="utf-8") as f:
        f.write(head[:-1] + ',\n "cases": [\n  ' + lines + "\n ]\n}\n")
    print("%s: %d cases, %d bytes" % (out_path, len(cases), os.path.getsize(out_path)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(DATA, "unigram_reference.json"))
    args = parser.parse_args()
    write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
