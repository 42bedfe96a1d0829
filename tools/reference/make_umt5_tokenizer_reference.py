#!/usr/bin/env python3
"""Writes tests/data/umt5/: a tiny SentencePiece unigram model configured like umT5's, the same
model embedded as a `spiece_model` U8 tensor in a tiny safetensors text-encoder file, and the
reference token ids and cleaned texts that tests/models/umt5_tokenizer_test.cpp and
tests/models/umt5_text_clean_test.cpp compare Ferry with.

    python3 -m venv tools/reference/.venv
    tools/reference/.venv/bin/pip install -r tools/reference/requirements.txt
    tools/reference/.venv/bin/python tools/reference/make_umt5_tokenizer_reference.py
    tools/reference/.venv/bin/python tools/reference/make_umt5_tokenizer_reference.py --print-cpp-tables

Files written:
  tokenizer/spiece.model        the unigram model, where a diffusers pipeline keeps it; umT5's
                                trainer settings where they matter for encoding (nmt_nfkc
                                normalisation, byte fallback, dummy prefix, whitespace collapsing,
                                pad 0 / eos 1 / unk 2, no bos); 1200 pieces (the most this small
                                corpus supports is about 1340), trained on the mixed English and
                                Chinese paragraphs below, which contain Wan's default negative
                                prompt (wan.md §D.4), and on sentences generated from their parts.
                                Most of its 263 kB is the nmt_nfkc normalisation table.
  single_file.safetensors       the model bytes as a 1-D U8 tensor `spiece_model` (how ComfyUI's
                                single-file umT5 checkpoints carry their tokenizer) next to one
                                dummy weight
  reference.json                per prompt: the raw text; `wan_clean`, Wan's own cleaning
                                (ftfy.fix_text, html.unescape twice, whitespace); `ferry_clean`,
                                the cleaning Ferry implements (below); `ids`, the ids SentencePiece
                                gives `ferry_clean` with EOS appended and truncated to 512 ids
                                including EOS; `wan_ids`, the same for `wan_clean`; plus the
                                character-level expectations of the text-cleaning test

Ferry's cleaning in place of ftfy.fix_text is ftfy.fix_text(text, fix_encoding=False,
unescape_html=False, normalization=None): every fix that maps characters one by one (C1 controls
read as windows-1252, Latin ligatures, half/full-width forms, curly quotes, line breaks, terminal
escapes, control characters) and none of the heuristic ones (mojibake detection, ftfy's own
repeated HTML unescaping when the text has no '<', NFC). SentencePiece's nmt_nfkc normalisation
runs after the cleaning anyway, so NFC rarely changes an id. Ferry's HTML unescape is
html.unescape restricted to the entity names ferry_entities() selects (numeric references are
all handled); names outside it are left as written.

`--print-cpp-tables` prints the tables core/models/umt5/text_clean.cpp holds (entities, width map),
generated from the same selection, to paste there when the selection changes.

The SentencePiece trainer runs single-threaded with a fixed seed; rerunning rewrites the same bytes
(the script trains twice and checks).
"""

import argparse
import html
import html.entities
import io
import json
import os
import random
import re
import sys
import unicodedata

import ftfy
import numpy as np
import sentencepiece as spm
from ftfy.chardata import LIGATURES, WIDTH_MAP
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.normpath(os.path.join(HERE, "..", "..", "tests", "data", "umt5"))

MAX_LENGTH = 512  # ids per prompt, EOS included (Wan's text_len)
EOS_ID = 1
SEED = 20250305
GENERATED_LINES = 3000
VOCAB_SIZE = 1200

NEGATIVE_PROMPT = (
    "色调艳丽，过曝，静态，细节模糊不清，字幕，风格，作品，画作，画面，静止，整体发灰，最差质量，"
    "低质量，JPEG压缩残留，丑陋的，残缺的，多余的手指，画得不好的手部，画得不好的脸部，畸形的，"
    "毁容的，形态畸形的肢体，手指融合，静止不动的画面，杂乱的背景，三条腿，背景人很多，倒着走"
)

# The training text: one sentence or short paragraph per line (the trainer's unit).
TRAINING_TEXT = [
    NEGATIVE_PROMPT,
    "A cat walks across a sunny kitchen table, knocking over a cup of coffee. The camera follows "
    "the cat slowly, and the morning light falls through the window onto the wooden floor.",
    "一只橘色的猫在阳光明媚的厨房里走过桌子，打翻了一杯咖啡。镜头缓缓跟随，清晨的光线透过窗户洒在木地板上。",
    "Two astronauts float inside a space station, laughing as a drop of water drifts between "
    "them. Earth turns slowly behind the window, blue and white, with thin clouds over the ocean.",
    "两名宇航员漂浮在空间站里，看着一滴水在他们之间飘动，开心地笑着。窗外的地球缓缓转动，蓝白相间，海面上飘着薄薄的云。",
    "A drone shot over a mountain village at dawn: mist in the valley, red roofs, a river that "
    "shines like silver, birds flying low over the rice fields. Cinematic, 4K, high detail.",
    "黎明时分，无人机掠过山村：山谷里弥漫着薄雾，红色的屋顶，河流像银子一样闪闪发光，鸟儿低飞过稻田。电影感，高清，细节丰富。",
    "Close-up of an old man's hands carving wood in a small workshop; sawdust, warm lamp light, "
    "shallow depth of field, slow motion. The video should look natural, sharp and stable.",
    "特写镜头：一位老人在小作坊里雕刻木头的双手；木屑纷飞，温暖的灯光，浅景深，慢动作。画面自然、清晰、稳定。",
    "A girl in a red dress dances in the rain on a city street at night, neon signs reflected in "
    "the puddles, people with umbrellas walking past. Smooth camera movement, vivid colors.",
    "夜晚的城市街道上，一个穿红裙子的女孩在雨中跳舞，霓虹灯倒映在水坑里，撑伞的行人从她身边走过。镜头运动平稳，色彩鲜明。",
    "Low quality, blurry, static, overexposed, subtitles, watermark, deformed hands, extra "
    "fingers, ugly faces, messy background, three legs, walking backwards, JPEG artifacts.",
    "高质量，细节清晰，自然光照，真实感，动态画面，流畅的运动，专业摄影，广角镜头，航拍，延时摄影。",
    "The quick brown fox jumps over the lazy dog while the children watch from the garden fence "
    "and a small robot counts the apples: one, two, three, four, five, six, seven, eight.",
    "A panda eats bamboo in a green forest; a waterfall falls behind it, and the water sparkles "
    "in the afternoon sun. 熊猫在绿色的森林里吃竹子，身后是一道瀑布，午后的阳光让水面闪闪发光。",
    "Ocean waves crash against black rocks under a stormy sky, with lightning in the distance "
    "and seagulls fighting the wind. 暴风雨下，海浪拍打着黑色的礁石，远处电闪雷鸣，海鸥顶着风飞翔。",
]

# Scene parts that generated_sentences() combines into more training lines, so that the corpus
# supports a vocabulary of a few thousand pieces (the paragraphs alone give well under a thousand).
SUBJECTS = [
    ("a black cat", "一只黑猫"), ("an old fisherman", "一位老渔夫"), ("two children", "两个孩子"),
    ("a white horse", "一匹白马"), ("a young woman", "一位年轻女子"), ("a small robot", "一个小机器人"),
    ("a golden retriever", "一只金毛犬"), ("a street musician", "一位街头音乐家"),
    ("a flock of cranes", "一群仙鹤"), ("a red sports car", "一辆红色跑车"), ("a chef", "一位厨师"),
    ("an astronaut", "一名宇航员"), ("a tiger cub", "一只小老虎"), ("a ballet dancer", "一位芭蕾舞者"),
    ("a steam train", "一列蒸汽火车"), ("a hot air balloon", "一个热气球"), ("a monk", "一位僧人"),
    ("a jellyfish", "一只水母"), ("a snowboarder", "一名滑雪者"), ("a grandmother", "一位老奶奶"),
]
ACTIONS = [
    ("walks slowly through", "慢慢走过"), ("runs across", "奔跑着穿过"), ("dances in", "在其中跳舞于"),
    ("flies above", "飞过"), ("sleeps quietly in", "安静地睡在"), ("looks around", "环顾"),
    ("plays a violin in", "拉着小提琴在"), ("cooks noodles in", "煮着面条在"),
    ("drifts gently over", "轻轻飘过"), ("jumps into", "跳进"), ("waves at the camera in", "向镜头挥手在"),
    ("reads a book in", "读着书在"), ("paints a picture of", "画着一幅画描绘"),
    ("rides a bicycle along", "骑着自行车沿着"), ("climbs up", "爬上"), ("swims through", "游过"),
]
PLACES = [
    ("a bamboo forest", "竹林"), ("a crowded night market", "热闹的夜市"), ("a frozen lake", "结冰的湖面"),
    ("an empty train station", "空荡荡的火车站"), ("a field of sunflowers", "向日葵田"),
    ("the streets of an old town", "古镇的街道"), ("a desert at noon", "正午的沙漠"),
    ("a coral reef", "珊瑚礁"), ("a foggy harbor", "雾气笼罩的港口"), ("a library full of books", "满是书的图书馆"),
    ("a snowy mountain pass", "积雪的山口"), ("a rooftop garden", "屋顶花园"), ("a misty tea plantation", "云雾缭绕的茶园"),
    ("a neon-lit alley", "霓虹闪烁的小巷"), ("a quiet temple courtyard", "寂静的寺庙庭院"), ("a windy beach", "刮着风的海滩"),
]
STYLES = [
    ("cinematic lighting", "电影感光线"), ("soft morning light", "柔和的晨光"), ("golden hour", "黄金时刻"),
    ("handheld camera", "手持镜头"), ("slow motion", "慢动作"), ("aerial view", "航拍视角"),
    ("close-up shot", "特写镜头"), ("wide angle", "广角"), ("film grain", "胶片颗粒"),
    ("watercolor style", "水彩风格"), ("anime style", "动漫风格"), ("documentary style", "纪录片风格"),
    ("high dynamic range", "高动态范围"), ("shallow depth of field", "浅景深"), ("time-lapse", "延时摄影"),
    ("ultra detailed, 4K", "超高清细节，4K"),
]


def generated_sentences(count):
    rng = random.Random(SEED)
    lines = []
    for _ in range(count):
        s, a, p, st = (rng.choice(SUBJECTS), rng.choice(ACTIONS), rng.choice(PLACES),
                       rng.choice(STYLES))
        if rng.random() < 0.5:
            lines.append("%s %s %s, %s." % (s[0].capitalize(), a[0], p[0], st[0]))
        else:
            lines.append("%s%s%s，%s。" % (s[1], a[1], p[1], st[1]))
    return lines


# Entity names (with ';') Ferry's HTML unescape knows besides the whole Latin-1 range, and the
# longer names that begin with a legacy (semicolon-less) name, which Ferry must know so that it
# does not decode their prefix instead: typographic punctuation (windows-1252's extras), spaces
# and joiners, arrows, a few symbols, the Greek alphabet.
EXTRA_ENTITY_NAMES = """
euro sbquo fnof bdquo hellip mldr dagger Dagger ddagger circ permil Scaron lsaquo OElig Zcaron
lsquo OpenCurlyQuote rsquo rsquor CloseCurlyQuote ldquo OpenCurlyDoubleQuote rdquo rdquor
CloseCurlyDoubleQuote bull bullet ndash mdash tilde trade TRADE scaron rsaquo oelig zcaron Yuml
ensp emsp thinsp ThinSpace hairsp zwnj zwj lrm rlm ZeroWidthSpace NoBreak
larr rarr uarr darr harr lArr rArr hearts heartsuit spades clubs diams star starf check
checkmark cross minus prime Prime infin ne le ge sim asymp
Alpha Beta Gamma Delta Epsilon Zeta Eta Theta Iota Kappa Lambda Mu Nu Xi Omicron Pi Rho Sigma
Tau Upsilon Phi Chi Psi Omega alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu
nu xi omicron pi rho sigmaf sigma tau upsilon phi chi psi omega
""".split()


def ferry_entities():
    """{name: value} for html.unescape's table restricted to Ferry's selection (names with and
    without ';', as html.entities.html5 spells them)."""
    html5 = html.entities.html5
    legacy = [k for k in html5 if not k.endswith(";")]
    chosen = {}
    for name, value in html5.items():
        if not name.endswith(";"):
            continue
        bare = name[:-1]
        latin1 = all(ord(c) < 0x100 for c in value)
        extends_legacy = any(bare != l and bare.startswith(l) for l in legacy)
        if latin1 or extends_legacy or bare in EXTRA_ENTITY_NAMES:
            chosen[name] = value
    missing = [n for n in EXTRA_ENTITY_NAMES if n + ";" not in html5]
    assert not missing, missing
    for name in legacy:
        assert name + ";" in chosen, name
        chosen[name] = html5[name]
    return chosen


FERRY_ENTITIES = ferry_entities()


def ferry_unescape(text):
    """html.unescape with FERRY_ENTITIES in place of the full HTML5 table (same regex, numeric
    rules and longest-legacy-prefix rule: the logic of CPython's html module)."""
    if "&" not in text:
        return text

    def replace(match):
        s = match.group(1)
        if s[0] == "#":
            return html.unescape("&" + s)  # numeric references: all of them, as Python does
        if s in FERRY_ENTITIES:
            return FERRY_ENTITIES[s]
        for x in range(len(s) - 1, 1, -1):
            if s[:x] in FERRY_ENTITIES:
                return FERRY_ENTITIES[s[:x]] + s[x:]
        return "&" + s

    return html._charref.sub(replace, text)


def whitespace_clean(text):
    text = re.sub(r"\s+", " ", text)
    return text.strip()


def wan_clean(text):
    """Wan's HuggingfaceTokenizer._clean, mode 'whitespace' (wan.md §A.1)."""
    text = ftfy.fix_text(text)
    text = html.unescape(html.unescape(text))
    return whitespace_clean(text.strip())


def ferry_fix_text(text):
    return ftfy.fix_text(text, fix_encoding=False, unescape_html=False, normalization=None)


def ferry_clean(text):
    text = ferry_fix_text(text)
    text = ferry_unescape(ferry_unescape(text))
    return whitespace_clean(text.strip())


def train_model():
    writer = io.BytesIO()
    spm.set_random_generator_seed(SEED)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TRAINING_TEXT + generated_sentences(GENERATED_LINES)),
        model_writer=writer,
        model_type="unigram",
        vocab_size=VOCAB_SIZE,
        character_coverage=1.0,
        normalization_rule_name="nmt_nfkc",
        byte_fallback=True,
        add_dummy_prefix=True,
        remove_extra_whitespaces=True,
        split_digits=False,
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        num_threads=1,
        shuffle_input_sentence=False,
        minloglevel=2,
    )
    return writer.getvalue()


def encode(sp, text):
    """What Wan's tokenizer call gives: the pieces' ids, truncated so that EOS still fits in
    MAX_LENGTH, then EOS."""
    ids = sp.encode(text, out_type=int)
    return ids[: MAX_LENGTH - 1] + [EOS_ID], len(ids)


def one_piece_word(sp):
    """A word that is one piece wherever it stands, to build prompts of an exact length."""
    for word in ["the", "a", "and", "cat", "of"]:
        if len(sp.encode(" ".join([word] * 7))) == 7:
            return word
    raise SystemExit("no one-piece word in the vocabulary")


def prompts(sp):
    word = one_piece_word(sp)
    long_en = " ".join(["A red fox runs through deep snow in a quiet birch forest at sunset,"
                        " its breath steaming in the cold air."] * 45)
    return [
        ("negative_prompt", NEGATIVE_PROMPT),
        ("english", "A cat walks across a sunny kitchen table, knocking over a cup of coffee."),
        ("chinese", "一只橘色的猫在阳光明媚的厨房里走过桌子，打翻了一杯咖啡。"),
        ("mixed", "A panda 熊猫 eats bamboo 竹子 in the forest, cinematic 4K."),
        ("empty", ""),
        ("only_whitespace", " \t\n\u3000 "),
        ("whitespace_runs", "  A  cat\t\twalks\n\nacross\r\na\u00a0table\u2003slowly.\u3000 "),
        ("html_entities", "Tom &amp; Jerry &lt;3 caf&eacute; &quot;fun&quot; &copy; 2024&nbsp;&mdash; "
                          "&#20013;&#x6587; &amp;amp; &amp;lt;b&amp;gt; &notin; &notit; &hearts;"),
        ("html_unknown_entity", "Lily &spadesuit; the &Jscr;ester"),
        ("html_triple_escaped", "fish &amp;amp;amp; chips"),
        ("emoji", "A happy dog 🐶 plays with a ball ⚽ at the beach 🏖️ 🎉"),
        ("full_width", "ＡＢＣ　ｘｙｚ　１２３！？　（ｓｍｉｌｅ）"),
        ("curly_quotes", "“A quiet ‘morning’” — she said, it’s fine…"),
        ("ligatures", "ﬁne ﬂowers oﬀ the ﬃeld"),
        ("control_chars", "a\x00b\x07c\x1b[31mred\x1b[0m d\ufeffe\x0bf"),
        ("c1_controls", "\x93quoted\x94 \x80 5 \x85"),
        ("nfc_decomposed", "cafe\u0301 nai\u0308ve"),
        ("mojibake", "cafÃ© naÃ¯ve â€” Ã¼ber"),
        ("long_english", long_en),
        ("exactly_511_text_ids", " ".join([word] * 511)),
        ("exactly_512_text_ids", " ".join([word] * 512)),
    ]


def fix_char_cases():
    """Every character Ferry's ftfy subset changes, one per case, between two letters."""
    chars = set(range(0x80, 0xA0)) | set(LIGATURES) | set(WIDTH_MAP)
    chars |= {0x2BC} | set(range(0x2018, 0x2020))
    chars |= {0x2028, 0x2029, 0x85, 0x0D}
    chars |= set(range(0x00, 0x09)) | {0x0B} | set(range(0x0E, 0x20)) | {0x7F}
    chars |= set(range(0x206A, 0x2070)) | {0xFEFF} | set(range(0xFFF9, 0xFFFD))
    cases = []
    for c in sorted(chars):
        text = "a" + chr(c) + "b"
        out = ferry_fix_text(text)
        if out != text:
            cases.append({"in": text, "out": out})
    # a few sequences: escapes, CR LF, fixes that feed one another
    for text in ["x\x1b[1;31my", "x\x1b[mz", "x\x1b[12", "\r\n", "\x1b\x00[31mz", "\x93\x94"]:
        cases.append({"in": text, "out": ferry_fix_text(text)})
    return cases


def html_cases():
    cases = []
    for name in sorted(FERRY_ENTITIES):
        for text in ["&" + name, "x&" + name + "y"]:
            assert ferry_unescape(text) == html.unescape(text), text
            cases.append({"in": text, "out": html.unescape(text)})
    for text in [
        "&#0;", "&#13;", "&#128;", "&#x81;", "&#x9f;", "&#1;", "&#x0b;", "&#127;", "&#xFDD0;",
        "&#xfffe;", "&#x1FFFF;", "&#x10FFFF;", "&#x110000;", "&#xD800;", "&#55296;",
        "&#99999999999999999999999;", "&#65", "&#x41", "&#X41;", "&#x;", "&#;", "&#a;", "&#xg;",
        "&#20013;", "&#x1F600;", "&", "&&amp;", "&amp", "&amp;amp;", "&ampx", "&AMP;", "&notit;",
        "&notin", "&notin;", "&copysr", "&lt;&gt;", "& amp;", "&\tamp;", "&;", "&中文;",
        "&" + "a" * 40 + ";", "&" + "b" * 31 + "amp;", "&nbsp;&nbsp", "&Eacute;&eacute;&EACUTE;",
    ]:
        assert ferry_unescape(text) == html.unescape(text), text
        cases.append({"in": text, "out": html.unescape(text)})
    unsupported = []
    for text in ["&Jscr;", "&spadesuit;", "&HilbertSpace;", "&checkmark", "&rarrw;"]:
        python = html.unescape(text)
        ferry = ferry_unescape(text)
        assert ferry != python or not text.endswith(";"), text
        unsupported.append({"in": text, "python": python, "ferry": ferry})
    return cases, unsupported


def compact_json(value):
    """JSON with one line per top-level key and per list element (ASCII, \\u escapes)."""
    def one(v):
        return json.dumps(v, ensure_ascii=True, separators=(",", ":"))
    lines = []
    for key, v in value.items():
        if isinstance(v, list) and v and isinstance(v[0], dict):
            items = ",\n  ".join(one(x) for x in v)
            lines.append("%s: [\n  %s\n ]" % (one(key), items))
        else:
            lines.append("%s: %s" % (one(key), one(v)))
    return "{\n " + ",\n ".join(lines) + "\n}\n"


def write_reference(out):
    model = train_model()
    again = train_model()
    if model != again:
        sys.exit("SentencePiece training is not deterministic here: two runs differ")
    sp = spm.SentencePieceProcessor(model_proto=model)
    assert sp.pad_id() == 0 and sp.eos_id() == 1 and sp.unk_id() == 2 and sp.bos_id() == -1

    os.makedirs(out, exist_ok=True)
    os.makedirs(os.path.join(out, "tokenizer"), exist_ok=True)
    with open(os.path.join(out, "tokenizer", "spiece.model"), "wb") as f:
        f.write(model)
    save_file(
        {
            "spiece_model": np.frombuffer(model, dtype=np.uint8).copy(),
            "encoder.final_layer_norm.weight": np.ones(8, dtype=np.float32),
        },
        os.path.join(out, "single_file.safetensors"),
    )

    records = []
    for name, raw in prompts(sp):
        wan = wan_clean(raw)
        ferry = ferry_clean(raw)
        ids, count = encode(sp, ferry)
        wan_ids, _ = encode(sp, wan)
        records.append({
            "name": name,
            "raw": raw,
            "wan_clean": wan,
            "ferry_clean": ferry,
            "text_ids": count,
            "ids": ids,
            "wan_ids": wan_ids,
            "pieces": sp.encode(ferry, out_type=str)[:40],
        })
    by_name = {r["name"]: r for r in records}
    assert by_name["long_english"]["text_ids"] > 600
    assert by_name["exactly_511_text_ids"]["text_ids"] == 511
    assert by_name["exactly_512_text_ids"]["text_ids"] == 512
    assert by_name["negative_prompt"]["ids"] == by_name["negative_prompt"]["wan_ids"]
    # the emoji are not in the vocabulary: they must reach byte fallback
    assert any(p.startswith("<0x") for p in sp.encode(by_name["emoji"]["ferry_clean"], out_type=str))

    html_ok, html_unsupported = html_cases()
    reference = {
        "generator": "tools/reference/make_umt5_tokenizer_reference.py",
        "sentencepiece": spm.__version__,
        "ftfy": ftfy.__version__,
        "model": "tokenizer/spiece.model",
        "checkpoint": "single_file.safetensors",
        "vocab_size": sp.get_piece_size(),
        "max_length": MAX_LENGTH,
        "eos_id": EOS_ID,
        "prompts": records,
        "html": html_ok,
        "html_unsupported": html_unsupported,
        "fix_text": fix_char_cases(),
        "whitespace": [c for c in range(0x110000) if chr(c).isspace()],
    }
    with open(os.path.join(out, "reference.json"), "w", encoding="utf-8") as f:
        f.write(compact_json(reference))
    for file in ["tokenizer/spiece.model", "single_file.safetensors", "reference.json"]:
        print("%-32s %7d bytes" % (file, os.path.getsize(os.path.join(out, file))))
    for r in records:
        same = "same ids as Wan" if r["ids"] == r["wan_ids"] else "ids DIFFER from Wan's"
        text = "same text" if r["ferry_clean"] == r["wan_clean"] else "text differs"
        print("%-22s %4d ids, %s, %s" % (r["name"], len(r["ids"]), text, same))


def cpp_string(value):
    return '"' + "".join("\\x%02x" % b for b in value.encode("utf-8")) + '"'


def print_cpp_tables():
    html5 = html.entities.html5
    names = sorted({n.rstrip(";") for n in FERRY_ENTITIES}, key=lambda n: n.encode())
    print("// Generated by tools/reference/make_umt5_tokenizer_reference.py --print-cpp-tables.")
    print("constexpr Entity kEntities[] = {")
    for n in names:
        legacy = "true" if n in html5 else "false"
        value = FERRY_ENTITIES[n + ";"]
        if all(0x20 <= ord(c) < 0x7F and c not in '"\\' for c in value):
            literal = '"' + value + '"'
        else:
            literal = cpp_string(value)
        print('    {"%s", %s, %s},' % (n, literal, legacy))
    print("};")
    print()
    first, last = 0xFF5F, 0xFFEF
    print("// ftfy's WIDTH_MAP above U+FF5E (U+FF01..U+FF5E is ASCII + 0xFEE0; U+FFE3 -> \" \\u0304\").")
    print("constexpr std::uint16_t kWidthMap[0x%X - 0x%X] = {" % (last, first))
    row = []
    for c in range(first, last):
        v = WIDTH_MAP.get(c, "")
        row.append("0x%04X" % (ord(v) if len(v) == 1 else 0))
        if len(row) == 8:
            print("    " + ", ".join(row) + ",")
            row = []
    if row:
        print("    " + ", ".join(row) + ",")
    print("};")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=OUT)
    parser.add_argument("--print-cpp-tables", action="store_true")
    args = parser.parse_args()
    if args.print_cpp_tables:
        print_cpp_tables()
    else:
        write_reference(os.path.normpath(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
