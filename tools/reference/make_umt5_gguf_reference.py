#!/usr/bin/env python3
"""Writes the tiny umT5 encoder of make_umt5_encoder_reference.py (same seed, same weights) as
city96's umt5-xxl-encoder GGUFs are made — llama.cpp's T5 encoder names and metadata, the
SentencePiece tokenizer in tokenizer.ggml.* keys — and the encoder outputs of transformers'
UMT5EncoderModel run in f32 on the weights the file means, for tests/models/umt5_encoder_test.cpp.

    tools/reference/.venv/bin/pip install -r tools/reference/requirements.txt gguf==0.19.0
    tools/reference/.venv/bin/python tools/reference/make_umt5_gguf_reference.py

Files (formats_lora_moe.md §1.5):
  tests/data/umt5/encoder/umt5-Q8_0.gguf
      general.architecture "t5encoder"; token_embd and every block Linear Q8_0, norms and the
      relative-position tables F32; tokenizer.ggml.model "t5", tokens, scores, token_type,
      add_space_prefix, remove_extra_whitespaces, precompiled_charsmap (u8 array), eos 1, pad 0,
      unknown 2, taken from tests/data/umt5/tokenizer/spiece.model
  tests/data/umt5/encoder/gguf_reference.safetensors
      for each prompt P: `P.ids` (the ids of reference.json) and `P.q8_0.f32` (F32 [L, 64])
Deterministic: a rerun writes the same bytes.
"""

import os

import numpy as np
import torch
from safetensors.numpy import save_file as save_numpy
from sentencepiece import sentencepiece_model_pb2

import gguf
from gguf import GGMLQuantizationType as Q

import make_umt5_encoder_reference as ref

GGUF_PATH = os.path.join(ref.OUT, "umt5-Q8_0.gguf")


def gguf_names(hf):
    """llama.cpp's T5 encoder name for each Hugging Face name."""
    out = {"shared.weight": "token_embd.weight",
           "encoder.final_layer_norm.weight": "enc.output_norm.weight"}
    for i in range(ref.LAYERS):
        h = f"encoder.block.{i}.layer."
        g = f"enc.blk.{i}."
        out[h + "0.layer_norm.weight"] = g + "attn_norm.weight"
        for n in "qkvo":
            out[h + f"0.SelfAttention.{n}.weight"] = g + f"attn_{n}.weight"
        out[h + "0.SelfAttention.relative_attention_bias.weight"] = g + "attn_rel_b.weight"
        out[h + "1.layer_norm.weight"] = g + "ffn_norm.weight"
        out[h + "1.DenseReluDense.wi_0.weight"] = g + "ffn_gate.weight"
        out[h + "1.DenseReluDense.wi_1.weight"] = g + "ffn_up.weight"
        out[h + "1.DenseReluDense.wo.weight"] = g + "ffn_down.weight"
    assert set(out) == set(hf), set(hf) ^ set(out)
    return out


def add_tokenizer(writer):
    proto = sentencepiece_model_pb2.ModelProto()
    with open(os.path.join(ref.UMT5_DATA, "tokenizer", "spiece.model"), "rb") as f:
        proto.ParseFromString(f.read())
    writer.add_tokenizer_model("t5")
    writer.add_token_list([p.piece.encode("utf-8") for p in proto.pieces])
    writer.add_token_scores([p.score for p in proto.pieces])
    writer.add_token_types([int(p.type) for p in proto.pieces])
    writer.add_add_space_prefix(proto.normalizer_spec.add_dummy_prefix)
    writer.add_remove_extra_whitespaces(proto.normalizer_spec.remove_extra_whitespaces)
    writer.add_precompiled_charsmap(proto.normalizer_spec.precompiled_charsmap)
    writer.add_eos_token_id(1)
    writer.add_pad_token_id(0)
    writer.add_unk_token_id(2)


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    import json
    with open(os.path.join(ref.UMT5_DATA, "reference.json"), encoding="utf-8") as f:
        prompts = {p["name"]: p for p in json.load(f)["prompts"]}

    model = ref.build_model()
    hf = ref.hf_state(model)
    names = gguf_names(hf)
    writer = gguf.GGUFWriter(GGUF_PATH, arch="t5encoder")
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    add_tokenizer(writer)
    meant = {}
    for name in sorted(hf, key=lambda n: names[n]):
        w = hf[name].float().numpy()
        if w.ndim == 2 and "relative_attention_bias" not in name:
            raw = gguf.quants.quantize(w, Q.Q8_0)
            writer.add_tensor(names[name], raw, raw_dtype=Q.Q8_0)
            meant[name] = gguf.quants.dequantize(raw, Q.Q8_0).astype(np.float32).reshape(w.shape)
        else:
            writer.add_tensor(names[name], w.astype(np.float32))
            meant[name] = w.astype(np.float32)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    q8 = ref.build_model()
    q8.load_state_dict({**{k: torch.from_numpy(v) for k, v in meant.items()},
                        "encoder.embed_tokens.weight": torch.from_numpy(meant["shared.weight"])})
    reference = {}
    for name in ref.PROMPTS:
        ids = prompts[name]["ids"]
        reference[f"{name}.ids"] = np.asarray(ids, dtype=np.int32)
        reference[f"{name}.q8_0.f32"] = ref.encode(q8, ids).numpy()
    save_numpy(reference, os.path.join(ref.OUT, "gguf_reference.safetensors"),
               metadata={"generator": f"tools/reference/make_umt5_gguf_reference.py "
                                      f"(torch {torch.__version__}, seed {ref.SEED})"})
    print(f"wrote {GGUF_PATH} ({os.path.getsize(GGUF_PATH)} bytes)")


if __name__ == "__main__":
    main()
