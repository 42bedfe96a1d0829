#!/usr/bin/env python3
"""Writes tests/data/h3/tokenizer/: a small byte-level BPE tokenizer configured exactly like Qwen2's
(minimax_h3.md §A.1) and the ids transformers' Qwen2Tokenizer gives for 500+ test strings, which
tests/models/h3_tokenizer_test.cpp compares Ferry with; and core/models/h3/unicode_tables.cpp, the
Unicode data Ferry's pre-tokenizer and NFC use, taken from what the reference itself does.

    tools/reference/.venv/bin/python tools/reference/make_h3_tokenizer_reference.py
    tools/reference/.venv/bin/python tools/reference/make_h3_tokenizer_reference.py \
        --real /path/to/MiniMax-H3/tokenizer     # also writes real_reference.json
    tools/reference/.venv/bin/python tools/reference/make_h3_tokenizer_reference.py --tables

Files written (tests/data/h3/tokenizer/):
  vocab.json, merges.txt,       the synthetic tokenizer as a transformers folder: trained with the
  tokenizer_config.json         `tokenizers` BPE trainer on the multilingual lines below (accents,
                                CJK, emoji, digits, contractions, tabs, newlines) with Qwen2's NFC,
                                Split regex (isolated) and ByteLevel(use_regex=False), all 256 byte
                                symbols in the alphabet, VOCAB_SIZE entries; then Qwen2's 26 added
                                tokens (ids right after the vocabulary, as 151643... in the real one)
                                and H3's config: additional_special_tokens lists <d>, </d>, ... which
                                transformers appends after the added tokens (as 151669...)
  tokenizer.json                the same tokenizer as transformers serialises it (merges as
                                ["a", "b"] pairs; the test rewrites them as "a b" strings), with
                                H3's tokens already among its added_tokens
  reference.json                per case: the text (or its bytes in hex when they are not UTF-8:
                                the reference reads them as bytes.decode("utf-8", "replace")) and
                                the ids Qwen2Tokenizer.from_pretrained(folder) gives with
                                add_special_tokens=False; also the presentation cases (§A.2)
  real_reference.json           (--real) the ids the real Qwen vocabulary gives for the same cases

Unicode (--tables, slow: it asks the reference about each of the 1.1 M code points): the
tokenizers package matches the pre-tokenizer regex with Oniguruma, whose \\p{L}, \\p{N} and \\s
follow Unicode 16.0, while its NFC (the unicode-normalization-alignments crate) is older than
Python 3.11's unicodedata (14.0). So the letter/number/space classes come from probing the
reference's pre-tokenizer code point by code point, and the NFC tables from unicodedata, with the
combining classes and compositions the reference lacks removed (each checked against its NFC).

The trainer is deterministic; rerunning rewrites the same bytes.
"""

import argparse
import json
import os

# The BPE trainer counts pairs on several threads; one keeps its tie-breaking, and so the files,
# the same from run to run.
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
import random
import shutil
import sys
import tempfile
import unicodedata

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
OUT = os.path.join(ROOT, "tests", "data", "h3", "tokenizer")
TABLES = os.path.join(ROOT, "core", "models", "h3", "unicode_tables.cpp")

VOCAB_SIZE = 3000
SEED = 20260415
PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
           r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")

# Qwen2's added tokens (tokenizer_config.json added_tokens_decoder, §A.1): content, special.
QWEN_ADDED = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True),
    ("<|box_end|>", True), ("<|quad_start|>", True), ("<|quad_end|>", True),
    ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True), ("<tool_call>", False),
    ("</tool_call>", False), ("<|fim_prefix|>", False), ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False), ("<|fim_pad|>", False), ("<|repo_name|>", False),
    ("<|file_sep|>", False), ("<tool_response>", False), ("</tool_response>", False),
    ("<think>", False), ("</think>", False),
]
# H3's additional_special_tokens that are in neither the vocabulary nor added_tokens_decoder.
H3_EXTRA = ["<d>", "</d>", "<|cutoff|>", "<|lyrics_start|>", "<|lyrics_end|>",
            "<|caption_start|>", "<|caption_end|>"]

TRAINING_TEXT = [
    "A ferry crosses a misty river at dawn; the captain's dog barks, and we'll hear the horn.",
    "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG!",
    "It's a sunny day, isn't it? They're sure we've seen what you'd call a miracle; I'm not.",
    "IT'S LOUD, ISN'T IT? THEY'RE HERE. WE'VE WON. I'M SURE YOU'LL AGREE. HE'D KNOW.",
    "Café, naïve, résumé, façade, jalapeño, Ångström, crème brûlée, déjà vu, Übermensch.",
    "Ça va? Où est la gare? Les élèves étudient à l'école près du château.",
    "Straße, Größe, Mädchen, Bäume, schön, fünf, Grüße aus München und Köln.",
    "Ελληνικά: καλημέρα κόσμε. Русский: привет, мир, ёжик в тумане.",
    "一只橘色的猫在阳光明媚的厨房里走过桌子，打翻了一杯咖啡。镜头缓缓跟随。",
    "黎明时分，无人机掠过山村：山谷里弥漫着薄雾，红色的屋顶，河流像银子一样闪闪发光。",
    "夜晚的城市街道上，一个穿红裙子的女孩在雨中跳舞，霓虹灯倒映在水坑里。",
    "猫が窓辺で眠っている。カメラはゆっくりと近づき、朝の光が差し込む。東京の夜景。",
    "ひらがな、カタカナ、漢字。すしとラーメンが好きです。ありがとうございます！",
    "한국어 문장입니다. 고양이가 창가에서 잠을 잡니다. 서울의 밤거리.",
    "Emoji: 😀 😃 🐱 🚢 🌊 ❤️ 👍🏽 👨‍👩‍👧‍👦 🇫🇷 🇯🇵 ✨🎬🎥",
    "Digits 0123456789, 3.14159, 2026-04-15, 1,000,000 and ١٢٣ ٤٥٦ and ５６７.",
    "Tabs\tand\ttabs,\nnew lines\n\nand\r\nWindows line ends\r\n  indented   spaces   ",
    "def main(argv):\n    return sum(x * 2 for x in range(10))  # code\n",
    "for (int i = 0; i < n; ++i) { total += a[i]; } // C++ loop\n",
    "<d>[English] Hello there, how are you?</d> <d>[中文] 你好，最近怎么样？</d>",
    "Shot 1: wide angle, golden hour. Shot 2: close-up, slow motion. Shot 3: aerial view.",
    "Camera pans left... then right!!! What?! (Really.) [Yes] {No} <Maybe> \"quoted\" 'single'",
    "العربية: مرحبا بالعالم. עברית: שלום עולם. हिन्दी: नमस्ते दुनिया। ไทย: สวัสดีชาวโลก",
    "Tiếng Việt: Xin chào thế giới. Português: ação, coração, São Paulo. Español: año, niño.",
    "Polski: zażółć gęślą jaźń. Čeština: příliš žluťoučký kůň úpěl ďábelské ódy.",
]

SUBJECTS = ["a black cat", "an old fisherman", "two children", "a white horse", "a young woman",
            "一只黑猫", "一位老渔夫", "两个孩子", "猫", "犬", "la jeune fille", "der alte Mann",
            "a robot 🤖", "an astronaut", "the captain's dog", "une élève"]
ACTIONS = ["walks slowly through", "runs across", "dances in", "flies above", "sleeps in",
           "慢慢走过", "奔跑着穿过", "在其中跳舞", "飞过", "traverse", "läuft durch", "歩いている"]
PLACES = ["a bamboo forest", "a crowded night market", "a frozen lake", "an empty station",
          "竹林", "热闹的夜市", "结冰的湖面", "la forêt enneigée", "den Bäumen", "東京の街",
          "a café in Zürich", "São Paulo at 3am"]


def generated_lines(rng, n):
    lines = []
    for _ in range(n):
        s = f"{rng.choice(SUBJECTS)} {rng.choice(ACTIONS)} {rng.choice(PLACES)}"
        if rng.random() < 0.3:
            s += f", {rng.randint(0, 9999)} times"
        if rng.random() < 0.2:
            s = s.upper()
        if rng.random() < 0.2:
            s += rng.choice([" 😀", "!\n", "\t", "  ", " ...", "？", "。", "'s", "'LL"])
        lines.append(s)
    # Made-up words over several alphabets, so that the vocabulary reaches VOCAB_SIZE (the
    # sentences alone run out of pairs to merge near 1,900 entries).
    alphabet = ("abcdefghijklmnopqrstuvwxyzéèàüößçñåøæ" "абвгдеёжзиклмнопрстуфхцчшщыэюя"
                "αβγδεζηθικλμνξοπρστυφχψω" "あいうえおかきくけこさしすせそたちつてとなにぬねの"
                "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年")
    for _ in range(3000):
        words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(2, 7)))
                 for _ in range(rng.randint(3, 9))]
        lines.append(" ".join(words) + rng.choice(["", ".", "!", " 12", "\n"]))
    return lines


def qwen2_pipeline(tok):
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()


def train():
    rng = random.Random(SEED)
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    qwen2_pipeline(tok)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=1, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    tok.train_from_iterator(TRAINING_TEXT * 5 + generated_lines(rng, 4000), trainer)
    return tok


def write_folder(tok, folder):
    """The trained model as transformers' vocab.json + merges.txt + tokenizer_config.json."""
    model = json.loads(tok.to_str())["model"]
    vocab = model["vocab"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    n = len(vocab)
    assert sorted(vocab.values()) == list(range(n))
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("#version: 0.2\n")
        for m in merges:
            f.write(m + "\n")
    added = {}
    for i, (content, special) in enumerate(QWEN_ADDED):
        added[str(n + i)] = {"content": content, "lstrip": False, "normalized": False,
                             "rstrip": False, "single_word": False, "special": special}
    config = {
        "add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": added,
        "additional_special_tokens": [c for c, s in QWEN_ADDED[1:14]] + H3_EXTRA,
        "bos_token": None, "clean_up_tokenization_spaces": False, "eos_token": "<|im_end|>",
        "errors": "replace", "model_max_length": 262144, "pad_token": "<|endoftext|>",
        "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer", "unk_token": None,
    }
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=2)


# ----------------------------------------------------------------------------------------------
# Test strings.

def edge_cases():
    c = []
    # Every alternative of the regex, and their borders.
    c += ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Re", "'rE", "'VE",
          "'M", "'LL", "'Ll", "'D", "it's", "IT'S", "we'll", "WE'LL", "they're", "I'm", "he'd",
          "you've", "don't", "'x", "'", "''", "'''s", "'ſ", "'ſx", "x'ſ", "'sx", "'s'", "'ss",
          "’s", "l'école", "rock'n'roll", "'12", "' s", "'\ns"]
    c += ["hello", " hello", "  hello", "   hello", "\thello", "\nhello", "\r\nhello", "\u3000hello",
          "\u00a0hello", "!hello", "!!hello", "1hello", "hello1", "a1b2c3", "_hello", "-hello"]
    c += ["1", "12", "123", "1234567890", " 1", "  12", "3.14", "1,000", "١٢٣", "５６７", "Ⅻ",
          "½", "²³", "x²", "①②"]
    c += ["!", " !", "  !", "!!!", " !!!", "...", " ...\n", "!\n\n", "!\r\n", ")\n\n\n", "#!\r\r",
          "—", " —", "“quoted”", " «»", "@#$%^&*()", " <>", "\\", " \\n"]
    c += ["\n", "\n\n", "\r\n", "\r", "\r\r\n\n", " \n", "  \n", " \n ", "\n ", "\n  x", " \n\n x",
          "\t\n", "\t", "\t\t", " \t", "\t ", "a\tb", "a \tb", "a\t b", "\u3000", "\u3000\u3000a",
          "\u2028", "a\u2029b", "\x0b\x0c", "\x85", "\x1c\x1d\x1e\x1f", "\x00", "a\x00b", "\x7f"]
    c += [" ", "  ", "   ", "a ", "a  ", "a   ", " a", "a  b", "a   b", "a    b", "a \u00a0b",
          "hello world ", "hello world  ", "trailing\n", "trailing \n", "trailing\t"]
    c += ["", "a", "A", "é", "ß", "ẞ", "ﬁ", "Å", "Å", "K", "ǅ", "ǈ"]
    # NFC-changing inputs: combining sequences that compose, reorder, or do not compose.
    c += ["e\u0301", "cafe\u0301", "Cafe\u0301 au lait", "A\u030a", "a\u0308\u0301",
          "a\u0301\u0316", "a\u0316\u0301", "\u1100\u1161", "\u1100\u1161\u11a8", "\uac00\u11a8",
          "\u0041\u030a\u0301", "o\u0302\u0323", "o\u0323\u0302", "\u212b", "\u2126", "\u0344",
          "\u0958", "\u00e9\u0301", "\u0301", "\u0301a", " \u0301", "x\u0301\u0301\u0301",
          "\u0915\u093c", "\u05d0\u05b7", "\u1e9b\u0323", "\u0b47\u0b3e", "\u09c7\u09be",
          "\u0CC6\u0CC2", "\U00011099\U000110ba", "\u30ab\u3099", "\u304b\u3099\u3099",
          "n\u0303o", "Ame\u0301lie\u0300", "\u1fb3\u0301"]
    # Scripts and symbols.
    c += ["一只猫", "一只 猫", "猫が好き", "カタカナ", "한국어", "Привет", "Ελλάδα", "مرحبا",
          "שלום", "नमस्ते", "สวัสดี", "Tiếng Việt", "日本語のテキスト、句読点。", "中文，标点！",
          "😀", "😀😀", " 😀", "a😀b", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "❤️", "✨🎬", "\U0010ffff",
          "\ufffd", "\ufeff", "\ufeffabc", "\u200b", "a\u200db", "\U0001d400", "𝔘𝔫𝔦", "ℌ",
          "\U00010d40", "\U00011f50", "\u1c89", "\ua7cb", "\u0898a", "\u07fd", "x\u0334\u0301"]
    # Added and special tokens: alone, glued, repeated, nested, partial.
    c += ["<d>", "</d>", "<d></d>", "a<d>b", "a <d> b", "a cat <d> walking", "<d>[English] Hi!</d>",
          "<d>[English] Hello there, how are you?</d>", "<d>[中文] 你好</d>", "x<|endoftext|>y",
          "<|im_start|>user\nhi<|im_end|>\n", "<|vision_start|><|image_pad|><|vision_end|>",
          "<|image_pad|><|image_pad|>", "<|cutoff|>", "<|lyrics_start|>la la<|lyrics_end|>",
          "<|caption_start|>A cat.<|caption_end|>", "<think>ok</think>", "<tool_call>{}</tool_call>",
          "<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>", "<d", "d>", "<|", "|>", "<<d>>",
          "<d><d><d>", "</d></d>", "<|endoftext|", "<|endoftext|>>", " <d> ", "\n<d>\n",
          "<D>", "< d>", "<|IM_START|>", "<Picture 1>: ", "<Picture 2>: ", "<Audio 1>: ",
          "<Video 1>: ", "<0.2 seconds>", "<think>", "é<d>é", "e<d>\u0301"]
    return c


def generated_cases(rng, n):
    parts = (SUBJECTS + ACTIONS + PLACES +
             ["'s", "'LL", " ", "  ", "\n", "\r\n", "\t", "!", "?", "...", "😀", "123", "4", "é",
              "e\u0301", "<d>", "</d>", "[English]", "，", "。", "\u3000", "<|image_pad|>", "x", "'",
              "ſ", "Ω", "ﬀ", "２", "\u00a0"])
    out = []
    for _ in range(n):
        k = rng.randint(1, 8)
        out.append("".join(rng.choice(parts) + rng.choice(["", "", " ", "  "]) for _ in range(k)))
    return out


def long_prompt():
    shots = []
    for i in range(1, 7):
        shots.append(
            f"Shot {i}: {SUBJECTS[i]} {ACTIONS[i]} {PLACES[i]}. The camera slowly pushes in, "
            f"soft morning light, {i * 12} fps feel. <d>[English] Line {i}, isn't it lovely?</d> "
            f"<d>[中文] 第{i}句台词，真美啊！</d>\n")
    return "".join(shots) + "Ambient sound: waves, gulls, a distant ferry horn.\t\n"


INVALID_UTF8 = [
    b"\xff", b"abc\xffdef", b"\xc3", b"\xc3\x28", b"\xe2\x82", b"\xe2\x82\x28", b"\xf0\x9f\x98",
    b"\xf0\x9f\x98 x", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\x80\x80", b"\xfe\xfe",
    b"caf\xe9", b"\xe0\x80\x80", b"\xf8\x88\x80\x80\x80", b"<d>\xff</d>", b"\xef\xbb\xbfhi",
]


def all_cases(rng):
    cases = []
    for text in edge_cases():
        cases.append({"text": text})
    for text in generated_cases(rng, 340):
        cases.append({"text": text})
    cases.append({"name": "long_multi_shot", "text": long_prompt()})
    cases.append({"name": "training_lines", "text": "\n".join(TRAINING_TEXT)})
    for raw in INVALID_UTF8:
        cases.append({"hex": raw.hex()})
    return cases


def case_text(case):
    if "hex" in case:
        return bytes.fromhex(case["hex"]).decode("utf-8", "replace")
    return case["text"]


def ids_for(tokenizer, cases):
    return [tokenizer(case_text(c), add_special_tokens=False).input_ids for c in cases]


PRESENTATION_CASES = [
    {"task": "t2va", "prompt": "A ferry crosses the river. <d>[English] Hello!</d>", "frames": []},
    {"task": "i2va", "prompt": "The cat jumps.", "frames": [[480, 832]]},
    {"task": "fl2va", "prompt": "Day turns to night, 夜が来る。", "frames": [[544, 960], [544, 960]]},
    {"task": "fl2va", "prompt": "x", "frames": [[64, 96], [1000, 700]]},
    {"task": "i2va", "prompt": "tall", "frames": [[10, 1900]]},
]


def smart_resize(h, w, factor=32, min_pixels=65536, max_pixels=16777216):
    import math
    # transformers' Qwen2-VL smart_resize (image_processing_qwen2_vl.py), which this venv cannot
    # import without torchvision.
    assert max(h, w) / min(h, w) <= 200
    hb = round(h / factor) * factor
    wb = round(w / factor) * factor
    if hb * wb > max_pixels:
        beta = math.sqrt((h * w) / max_pixels)
        hb = max(factor, math.floor(h / beta / factor) * factor)
        wb = max(factor, math.floor(w / beta / factor) * factor)
    elif hb * wb < min_pixels:
        beta = math.sqrt(min_pixels / (h * w))
        hb = math.ceil(h * beta / factor) * factor
        wb = math.ceil(w * beta / factor) * factor
    return hb, wb


def presentation(tokenizer, case):
    """§A.2, as diffusers' encoders.py builds it: segments tokenized separately."""
    vs, pad, ve = (tokenizer.convert_tokens_to_ids(t)
                   for t in ("<|vision_start|>", "<|image_pad|>", "<|vision_end|>"))
    ids, tags = [], []
    for k, (h, w) in enumerate(case["frames"], start=1):
        label = tokenizer(f"<Picture {k}>: ", add_special_tokens=False).input_ids
        ids += label
        tags += [1] * len(label)
        hh, ww = smart_resize(h, w)
        n = (hh // 16) * (ww // 16) // 4
        block = [vs] + [pad] * n + [ve]
        ids += block
        tags += [0] * len(block)
    text = tokenizer(case["prompt"], add_special_tokens=False).input_ids
    return ids + text, tags + [1] * len(text)


def load_reference(folder):
    from transformers import Qwen2Tokenizer
    return Qwen2Tokenizer.from_pretrained(folder)


def write_reference(out):
    os.makedirs(out, exist_ok=True)
    tok = train()
    write_folder(tok, out)
    # transformers prefers a tokenizer.json it finds: the reference must be the vocab.json path.
    if os.path.exists(os.path.join(out, "tokenizer.json")):
        os.remove(os.path.join(out, "tokenizer.json"))
    ref = load_reference(out)
    # tokenizer.json as transformers holds it (H3's tokens included), read back by tokenizers.
    ref.backend_tokenizer.save(os.path.join(out, "tokenizer.json"))
    again = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    rng = random.Random(SEED + 1)
    cases = all_cases(rng)
    ids = ids_for(ref, cases)
    for c, i in zip(cases, ids):
        assert again.encode(case_text(c), add_special_tokens=False).ids == i, c
        c["ids"] = i
    pres = []
    for p in PRESENTATION_CASES:
        i, t = presentation(ref, p)
        pres.append(dict(p, ids=i, tags=t))
    doc = {
        "source": "transformers Qwen2Tokenizer.from_pretrained(tests/data/h3/tokenizer), "
                  "add_special_tokens=False; make_h3_tokenizer_reference.py",
        "vocab_entries": len(json.loads(tok.to_str())["model"]["vocab"]),
        "tokenizer_size": len(ref),
        "cases": cases,
        "presentations": pres,
    }
    with open(os.path.join(out, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=0)
    return cases


def write_real_reference(real_folder, out):
    ref = load_reference(real_folder)
    cases = all_cases(random.Random(SEED + 1))
    ids = ids_for(ref, cases)
    pres = []
    for p in PRESENTATION_CASES:
        i, t = presentation(ref, p)
        pres.append(dict(p, ids=i, tags=t))
    doc = {
        "source": "transformers Qwen2Tokenizer.from_pretrained(MiniMax-AI/MiniMax-H3 @ 8d8824ef "
                  "tokenizer/: vocab.json, merges.txt, tokenizer_config.json), "
                  "add_special_tokens=False",
        "tokenizer_size": len(ref),
        "cases": [{"ids": i} for i in ids],
        "presentations": pres,
    }
    with open(os.path.join(out, "real_reference.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))


# ----------------------------------------------------------------------------------------------
# Unicode tables.

def probe_classes():
    """Letter / number / whitespace as the reference's Oniguruma regex sees each code point."""
    split = pre_tokenizers.Split(Regex(PATTERN), behavior="isolated", invert=False)

    def pieces(s):
        return [p for p, _ in split.pre_tokenize_str(s)]

    classes = {}
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF or cp in (0x0A, 0x0D, 0x20):
            continue
        ch = chr(cp)
        if pieces("a" + ch) == ["a" + ch]:
            classes[cp] = "L"
        elif len(pieces(ch + ch)) == 2:
            classes[cp] = "N"
        elif pieces(ch + "!") == [ch, "!"]:
            classes[cp] = "S"
    for cp in (0x0A, 0x0D, 0x20):
        classes[cp] = "S"
    # The contraction alternative is case-insensitive: which letters does it take for s, t, m, d?
    folds = sorted(cp for cp, k in classes.items() if k == "L" and cp > 0x7F
                   and pieces("'" + chr(cp) + "x") == ["'" + chr(cp), "x"])
    return classes, folds


def ranges(cps):
    out = []
    for cp in sorted(cps):
        if out and out[-1][1] + 1 == cp:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return out


def reference_nfc_tables():
    nfc = normalizers.NFC()
    ccc = {}
    for cp in range(0x110000):
        k = unicodedata.combining(chr(cp))
        if k:
            ccc[cp] = k
    # Combining classes the reference's (older) NFC lacks: such a mark neither moves before a
    # class-1 mark nor lets a class-230 mark move before it.
    for cp in list(ccc):
        ch = chr(cp)
        moves = nfc.normalize_str(ch + "\u0334") == "\u0334" + ch if ccc[cp] > 1 else \
            nfc.normalize_str("\u0301" + ch) == ch + "\u0301"
        if not moves:
            del ccc[cp]
    # Decompositions the reference lacks (characters newer than its tables) are left out too.
    nfd = normalizers.NFD()
    decomp = {}
    for cp in range(0x110000):
        d = unicodedata.decomposition(chr(cp))
        if d and not d.startswith("<") and nfd.normalize_str(chr(cp)) != chr(cp):
            decomp[cp] = [int(x, 16) for x in d.split()]
    compose = {}
    for cp, d in decomp.items():
        if len(d) == 2 and unicodedata.normalize("NFC", chr(cp)) == chr(cp) and \
                unicodedata.combining(chr(cp)) == 0 and ccc.get(d[0], 0) == 0:
            if nfc.normalize_str(chr(d[0]) + chr(d[1])) == chr(cp):
                compose[(d[0], d[1])] = cp
    return ccc, decomp, compose


def python_nfc(s, ccc, decomp, compose):
    """The algorithm core/models/h3/unicode_text.cpp runs, on the tables it is given."""
    SB, LB, VB, TB, LC, VC, TC = 0xAC00, 0x1100, 0x1161, 0x11A7, 19, 21, 28
    out = []

    def dec(cp):
        if SB <= cp < SB + LC * VC * TC:
            i = cp - SB
            out.append(LB + i // (VC * TC))
            out.append(VB + (i % (VC * TC)) // TC)
            if i % TC:
                out.append(TB + i % TC)
        elif cp in decomp:
            for d in decomp[cp]:
                dec(d)
        else:
            out.append(cp)

    for ch in s:
        dec(ord(ch))
    i = 0
    while i < len(out):
        if ccc.get(out[i], 0) == 0:
            i += 1
            continue
        j = i
        while j < len(out) and ccc.get(out[j], 0) != 0:
            j += 1
        out[i:j] = sorted(out[i:j], key=lambda c: ccc[c])
        i = j

    def comp(a, b):
        if LB <= a < LB + LC and VB <= b < VB + VC:
            return SB + ((a - LB) * VC + (b - VB)) * TC
        if SB <= a < SB + LC * VC * TC and (a - SB) % TC == 0 and TB < b < TB + TC:
            return a + (b - TB)
        return compose.get((a, b))

    if not out:
        return ""
    res = [out[0]]
    starter = 0 if ccc.get(out[0], 0) == 0 else None
    last = 0 if starter == 0 else 256
    for cp in out[1:]:
        k = ccc.get(cp, 0)
        c = comp(res[starter], cp) if starter is not None else None
        if c is not None and (last < k or last == 0):
            res[starter] = c
            continue
        if k == 0:
            starter = len(res)
        last = k
        res.append(cp)
    return "".join(map(chr, res))


def check_nfc(ccc, decomp, compose):
    nfc = normalizers.NFC()
    bad = 0
    marks = ["\u0316", "\u0301", "\u0334", "\u05b0"]
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        for s in (ch, ch + marks[0], ch + marks[1], ch + marks[2], marks[1] + ch, "a" + ch + marks[0],
                  "e" + marks[1] + ch, "\u1100" + ch, ch + "\u1161", "\uac00" + ch, ch + "\u11a8"):
            if python_nfc(s, ccc, decomp, compose) != nfc.normalize_str(s):
                bad += 1
                print(f"NFC mismatch U+{cp:04X} {s!r}", file=sys.stderr)
                break
    for (a, b) in compose:
        s = chr(a) + chr(b) + "\u0301\u0316"
        if python_nfc(s, ccc, decomp, compose) != nfc.normalize_str(s):
            bad += 1
    return bad


def write_tables(path):
    classes, folds = probe_classes()
    ccc, decomp, compose = reference_nfc_tables()
    bad = check_nfc(ccc, decomp, compose)
    if bad:
        sys.exit(f"{bad} NFC mismatches between the tables and the reference")
    lrange = ranges(cp for cp, k in classes.items() if k == "L")
    nrange = ranges(cp for cp, k in classes.items() if k == "N")
    spaces = sorted(cp for cp, k in classes.items() if k == "S")
    cccr = []
    for cp in sorted(ccc):
        if cccr and cccr[-1][1] + 1 == cp and cccr[-1][2] == ccc[cp]:
            cccr[-1][1] = cp
        else:
            cccr.append([cp, cp, ccc[cp]])
    lines = [
        "// Generated by tools/reference/make_h3_tokenizer_reference.py --tables: do not edit.",
        "// Letter, number and whitespace classes as the reference's pre-tokenizer regex",
        "// (Oniguruma, Unicode 16.0) sees them, probed code point by code point; NFC data from",
        f"// Python {sys.version.split()[0]}'s unicodedata (Unicode {unicodedata.unidata_version}), "
        "less the combining classes",
        "// and compositions the reference's NFC (tokenizers "
        f"{__import__('tokenizers').__version__}) does not have.",
        '#include "core/models/h3/unicode_tables.h"',
        "",
        "namespace ferry::models::h3::unicode {",
        "",
    ]

    def emit(name, typ, rows, per_line):
        lines.append(f"const {typ} {name}[] = {{")
        for i in range(0, len(rows), per_line):
            lines.append("    " + " ".join(rows[i:i + per_line]))
        lines.append("};")
        lines.append(f"const std::size_t {name}Count = sizeof({name}) / sizeof({name}[0]);")
        lines.append("")

    emit("kLetterRanges", "CodeRange", [f"{{0x{a:X}, 0x{b:X}}}," for a, b in lrange], 4)
    emit("kNumberRanges", "CodeRange", [f"{{0x{a:X}, 0x{b:X}}}," for a, b in nrange], 4)
    emit("kWhiteSpace", "char32_t", [f"0x{a:X}," for a in spaces], 8)
    emit("kCombiningClasses", "ClassRange", [f"{{0x{a:X}, 0x{b:X}, {k}}}," for a, b, k in cccr], 3)
    emit("kDecompositions", "Decomposition",
         [f"{{0x{cp:X}, 0x{d[0]:X}, 0x{(d[1] if len(d) > 1 else 0):X}}},"
          for cp, d in sorted(decomp.items())], 3)
    emit("kCompositions", "Composition",
         [f"{{0x{a:X}, 0x{b:X}, 0x{c:X}}}," for (a, b), c in sorted(compose.items())], 3)
    lines.append(f"const char32_t kContractionFoldsToS = 0x{folds[0]:X};" if folds == [0x17F]
                 else sys.exit(f"unexpected contraction folds {folds}"))
    lines.append("")
    lines.append("}  // namespace ferry::models::h3::unicode")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{path}: {len(lrange)} letter ranges, {len(nrange)} number ranges, {len(spaces)} "
          f"spaces, {len(cccr)} class ranges, {len(decomp)} decompositions, {len(compose)} "
          f"compositions")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--real", help="a folder with the real vocab.json, merges.txt, tokenizer_config.json")
    p.add_argument("--tables", action="store_true", help="(re)write core/models/h3/unicode_tables.cpp")
    args = p.parse_args()
    if args.tables:
        write_tables(TABLES)
        return
    # Train twice: the files must not depend on the run.
    with tempfile.TemporaryDirectory() as tmp:
        write_reference(tmp)
        write_reference(OUT)
        for name in ("vocab.json", "merges.txt", "tokenizer.json", "reference.json"):
            with open(os.path.join(tmp, name), "rb") as a, open(os.path.join(OUT, name), "rb") as b:
                if a.read() != b.read():
                    sys.exit(f"{name} differs between two runs")
    if args.real:
        write_real_reference(args.real, OUT)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
