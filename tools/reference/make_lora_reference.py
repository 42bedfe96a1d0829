#!/usr/bin/env python3
"""Writes tests/data/wan/dit_lora/: LoRA files in every key format of formats_lora_moe.md §4.2 for
the tiny Wan 2.1 T2V DiT of make_dit_reference.py (same seed, same weights), a ComfyUI scaled-fp8
copy of that DiT, and the velocities the official Wan code computes with each LoRA *merged* into
the f32 weights, for the runtime (bypass) LoRA parity test.

    tools/reference/.venv/bin/pip install -r tools/reference/requirements.txt gguf==0.19.0
    tools/reference/.venv/bin/pip install --no-deps -r tools/reference/requirements-nodeps.txt
    tools/reference/.venv/bin/python tools/reference/make_lora_reference.py

LoRA files (values drawn as bf16, then stored in the file's dtype; the merge uses the stored values;
A = down [r, in], B = up [out, r]; "every Linear" = q, k, v, o of both attentions, ffn.0 and ffn.2 of both blocks):
  r1.safetensors         rank 1, format A: `diffusion_model.<official>.lora_down.weight` /
                         `.lora_up.weight` / `.alpha` (alpha 2: scale 2), bf16; every Linear plus
                         text_embedding.0/.2, time_embedding.0/.2, time_projection.1, head.head
  r16.safetensors        rank 16, format B: `diffusion_model.<official>.lora_A.weight` /
                         `.lora_B.weight`, no alpha (scale 1), bf16; every Linear plus
                         time_projection.1 and head.head
  r64.safetensors        rank 64, format C (kohya/musubi): `lora_unet_<official, . → _>.lora_down
                         .weight` / `.lora_up.weight` / `.alpha` (alpha 32: scale 0.5), bf16; every
                         Linear plus text_embedding.2 and time_embedding.0
  diffusers.safetensors  rank 4, format D: `transformer.<diffusers name>.lora_A.weight` /
                         `.lora_B.weight`, no alpha, f16; every Linear plus the embeddings and
                         `proj_out`; `.lora_B.bias` (a bias delta) on blocks.0.attn1.to_q,
                         blocks.1.ffn.net.2 and proj_out
  noprefix.safetensors   rank 4, format E (the Lightning release): `<official>.lora_down.weight` /
                         `.lora_up.weight`, no prefix, no alpha, f32; every Linear plus head.head
  peft.safetensors       rank 4, format F: `base_model.model.<official>.lora_A.default.weight` /
                         `.lora_B.default.weight`, f32, no `.alpha` keys but diffusers' header
                         metadata `lora_adapter_metadata` {"r": 4, "lora_alpha": 8, "alpha_pattern":
                         {"ffn.0": 2}} (scale 2, ffn.0's 0.5)
  diffs.safetensors      LightX2V style: format A pairs (rank 8, alpha 8) on every Linear, plus full
                         deltas: `.diff` on blocks.N.norm3, blocks.N.self_attn.norm_q,
                         blocks.N.cross_attn.norm_k and head.head (→ the `.weight`), `.diff_b` on
                         blocks.N.self_attn.q, blocks.N.norm3, blocks.N.ffn.0 and head.head (→ the
                         `.bias`), `blocks.N.diff_m` (→ blocks.N.modulation), bf16
  k_img.safetensors      a Wan 2.1 I2V LoRA on this T2V model: format A, rank 4, on
                         self_attn.q/o and cross_attn.q of both blocks (applied) and on
                         cross_attn.k_img, cross_attn.v_img, img_emb.proj.1 and
                         `cross_attn.norm_k_img.diff` (no such tensors here: reported unmatched)
Base checkpoint:
  t2v-fp8_scaled.safetensors  ComfyUI's legacy scaled fp8: every 2-D block weight F8_E4M3 with a
                         per-tensor F32 `<name without .weight>.scale_weight` (max |w| / 448; the
                         fp8 value is e4m3(w / scale), round to nearest even), the `scaled_fp8`
                         marker, everything else bf16, names under `model.diffusion_model.`
Reference velocities, `<case>_reference.safetensors` with `x`, `context`, `t.i`, `v.i` as in
make_quant_dit_reference.py (same x, context and timesteps), and manifest.json naming for every
case its base file(s) (relative to tests/data/), its LoRA files and strengths:
  the official forward (make_dit_reference's recipe: CPU autocast bf16) on the merged weights
  W_f32 + Σ strength · (alpha/rank) · (B @ A) (f32 GEMM, the reference's own merge), diffs added
  to the f32 parameter (strength · diff), all held as fp32 parameters that autocast rounds to bf16
  in every Linear, as the quant references do. W_f32 is what the base file means: the bf16 values,
  or the dequantised Q4_K_M / NF4 / fp8 weights.
Self-checks: the bases reproduce the committed base references of wan/dit and wan/dit_quant, and
every case's velocity differs from its base's by a clear margin (the rms of the change over the
rms of v, printed; a missing LoRA could not pass for a present one). Deterministic.
"""

import json
import os
import tempfile

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file

import make_dit_reference as ref
import make_quant_dit_reference as qref

OUT = os.path.join(ref.ROOT, "tests", "data", "wan", "dit_lora")
DATA = os.path.join(ref.ROOT, "tests", "data")
IN_OUT = 16  # the t2v model
FP8_MAX = 448.0
LORA_SEED = ref.SEED + 1616
BASE_FLOOR = 2e-2  # max |v - v_committed| / max |v|: bf16 rounding flips
MIN_CHANGE = 0.04  # rms(v_case - v_base) / rms(v_base), at every timestep

LINEARS = [f"blocks.{i}.{m}" for i in range(ref.LAYERS)
           for m in ("self_attn.q", "self_attn.k", "self_attn.v", "self_attn.o", "cross_attn.q",
                     "cross_attn.k", "cross_attn.v", "cross_attn.o", "ffn.0", "ffn.2")]
EMBEDDINGS = ["text_embedding.0", "text_embedding.2", "time_embedding.0", "time_embedding.2",
              "time_projection.1"]


def bf16_exact(t):
    return t.to(torch.bfloat16).to(torch.float32)


class Lora:
    """A LoRA as written: its file tensors, and what it adds, by official parameter name."""

    def __init__(self):
        self.tensors = {}    # key → torch tensor in its file dtype
        self.low_rank = []   # (official weight name, A f32, B f32, scale)
        self.deltas = []     # (official parameter name, delta f32)
        self.metadata = {"format": "pt"}

    def store(self, key, value, dtype):
        assert key not in self.tensors, key
        stored = value.to(dtype).contiguous()
        self.tensors[key] = stored
        return stored.to(torch.float32)  # what the file means

    def pair(self, gen, shapes, module, rank, gain, down_key, up_key, dtype, scale, target=True):
        """A random A, B for `module` (official name) stored under the given keys."""
        out_f, in_f = shapes[module + ".weight"] if target else shapes[module]
        a = bf16_exact(torch.randn((rank, in_f), generator=gen) / in_f ** 0.5)
        b = bf16_exact(torch.randn((out_f, rank), generator=gen) * gain / rank ** 0.5)
        a = self.store(down_key, a, dtype)
        b = self.store(up_key, b, dtype)
        if target:
            self.low_rank.append((module + ".weight", a, b, scale))

    def delta(self, gen, shape, key, target, magnitude, dtype):
        d = bf16_exact(torch.randn(shape, generator=gen) * magnitude)
        self.deltas.append((target, self.store(key, d, dtype)))

    def scalar(self, key, value, dtype):
        self.store(key, torch.tensor(float(value)), dtype)

    def write(self, name):
        save_file(self.tensors, os.path.join(OUT, name), metadata=self.metadata)


def diffusers_names():
    names = {}
    with open(os.path.join(DATA, "wan", "dit", "diffusers_names.txt")) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                official, diffusers = line.split()
                names[official] = diffusers
    return names


def module_of(param):
    return param[: -len(".weight")]


def make_loras(shapes):
    gen = torch.Generator().manual_seed(LORA_SEED)
    bf16, f16, f32 = torch.bfloat16, torch.float16, torch.float32
    loras = {}

    lora = Lora()  # format A, rank 1, alpha 2
    for m in LINEARS + EMBEDDINGS + ["head.head"]:
        p = "diffusion_model." + m
        lora.pair(gen, shapes, m, 1, 0.05, p + ".lora_down.weight", p + ".lora_up.weight", bf16,
                  2.0 / 1)
        lora.scalar(p + ".alpha", 2.0, bf16)
    loras["r1"] = lora

    lora = Lora()  # format B, rank 16, no alpha
    for m in LINEARS + ["time_projection.1", "head.head"]:
        p = "diffusion_model." + m
        lora.pair(gen, shapes, m, 16, 0.11, p + ".lora_A.weight", p + ".lora_B.weight", bf16, 1.0)
    loras["r16"] = lora

    lora = Lora()  # format C, rank 64, alpha 32
    for m in LINEARS + ["text_embedding.2", "time_embedding.0"]:
        p = "lora_unet_" + m.replace(".", "_")
        lora.pair(gen, shapes, m, 64, 0.45, p + ".lora_down.weight", p + ".lora_up.weight", bf16,
                  32.0 / 64)
        lora.scalar(p + ".alpha", 32.0, f32)
    loras["r64"] = lora

    names = diffusers_names()
    lora = Lora()  # format D, rank 4, no alpha, f16, bias deltas
    for m in LINEARS + EMBEDDINGS + ["head.head"]:
        p = "transformer." + module_of(names[m + ".weight"])
        lora.pair(gen, shapes, m, 4, 0.09, p + ".lora_A.weight", p + ".lora_B.weight", f16, 1.0)
    for m in ["blocks.0.self_attn.q", "blocks.1.ffn.2", "head.head"]:
        p = "transformer." + module_of(names[m + ".weight"])
        lora.delta(gen, shapes[m + ".bias"], p + ".lora_B.bias", m + ".bias", 0.05, f16)
    loras["diffusers"] = lora

    lora = Lora()  # format E, rank 4, no prefix, no alpha, f32
    for m in LINEARS + ["head.head"]:
        lora.pair(gen, shapes, m, 4, 0.12, m + ".lora_down.weight", m + ".lora_up.weight", f32, 1.0)
    loras["noprefix"] = lora

    lora = Lora()  # format F, rank 4, PEFT metadata for the scale
    for m in LINEARS:
        p = "base_model.model." + m
        scale = (2.0 if m.endswith("ffn.0") else 8.0) / 4
        lora.pair(gen, shapes, m, 4, 0.15, p + ".lora_A.default.weight",
                  p + ".lora_B.default.weight", f32, scale)
    lora.metadata["lora_adapter_metadata"] = json.dumps(
        {"r": 4, "lora_alpha": 8, "alpha_pattern": {"ffn.0": 2}, "rank_pattern": {},
         "use_rslora": False, "target_modules": ["q", "k", "v", "o", "ffn.0", "ffn.2"]})
    loras["peft"] = lora

    lora = Lora()  # LightX2V: format A pairs and full deltas
    for m in LINEARS:
        p = "diffusion_model." + m
        lora.pair(gen, shapes, m, 8, 0.1, p + ".lora_down.weight", p + ".lora_up.weight", bf16,
                  8.0 / 8)
        lora.scalar(p + ".alpha", 8.0, bf16)
    for i in range(ref.LAYERS):
        b = f"blocks.{i}."
        for m, magnitude in (("norm3", 0.1), ("self_attn.norm_q", 0.1),
                             ("cross_attn.norm_k", 0.1)):
            lora.delta(gen, shapes[b + m + ".weight"], "diffusion_model." + b + m + ".diff",
                       b + m + ".weight", magnitude, bf16)
        for m in ("self_attn.q", "norm3", "ffn.0"):
            lora.delta(gen, shapes[b + m + ".bias"], "diffusion_model." + b + m + ".diff_b",
                       b + m + ".bias", 0.025, bf16)
        lora.delta(gen, shapes[b + "modulation"], "diffusion_model." + b + "diff_m",
                   b + "modulation", 0.25 / ref.DIM ** 0.5, bf16)
    lora.delta(gen, shapes["head.head.weight"], "diffusion_model.head.head.diff",
               "head.head.weight", 0.15 / ref.DIM ** 0.5, bf16)
    lora.delta(gen, shapes["head.head.bias"], "diffusion_model.head.head.diff_b",
               "head.head.bias", 0.025, bf16)
    loras["diffs"] = lora

    lora = Lora()  # a Wan 2.1 I2V LoRA: image-branch keys this model lacks
    extra = {"k_img": (ref.DIM, ref.DIM), "v_img": (ref.DIM, ref.DIM)}
    for i in range(ref.LAYERS):
        b = f"blocks.{i}."
        for m in ("self_attn.q", "self_attn.o", "cross_attn.q"):
            p = "diffusion_model." + b + m
            lora.pair(gen, shapes, b + m, 4, 0.9, p + ".lora_down.weight", p + ".lora_up.weight",
                      bf16, 4.0 / 4)
            lora.scalar(p + ".alpha", 4.0, bf16)
        for m, shape in extra.items():
            p = "diffusion_model." + b + "cross_attn." + m
            lora.pair(gen, {m: shape}, m, 4, 0.4, p + ".lora_down.weight",
                      p + ".lora_up.weight", bf16, 1.0, target=False)
            lora.scalar(p + ".alpha", 4.0, bf16)
        lora.store("diffusion_model." + b + "cross_attn.norm_k_img.diff",
                   bf16_exact(torch.randn((ref.DIM,), generator=gen) * 0.2), bf16)
    lora.pair(gen, {"proj": (ref.DIM, 1280)}, "proj", 4, 0.4,
              "diffusion_model.img_emb.proj.1.lora_down.weight",
              "diffusion_model.img_emb.proj.1.lora_up.weight", bf16, 1.0, target=False)
    loras["k_img"] = lora
    return loras


def merged(base, loras):
    """base (official name → f32 tensor) with each (Lora, strength) merged in f32."""
    out = {k: v.clone() for k, v in base.items()}
    for lora, strength in loras:
        for name, a, b, scale in lora.low_rank:
            out[name] = out[name] + (strength * scale) * (b @ a)
        for name, d in lora.deltas:
            out[name] = out[name] + strength * d.reshape(out[name].shape)
    return out


def inputs():
    gen = torch.Generator().manual_seed(ref.SEED + 1000 + IN_OUT)
    x = torch.randn((IN_OUT, ref.FRAMES, ref.HEIGHT, ref.WIDTH), generator=gen)
    context = ref.bf16_values(torch.randn((ref.CONTEXT_ROWS, ref.TEXT_DIM), generator=gen))
    return x, context


def velocities(model, weights, x, context):
    with torch.no_grad():
        for key, p in model.named_parameters():
            p.copy_(weights[key].reshape(p.shape))
    out = []
    for t in ref.TIMESTEPS:
        v = ref.forward(model, x, ref.token_timesteps(IN_OUT, t), context)
        assert torch.isfinite(v).all()
        out.append(v)
    return out


def write_fp8(path, state):
    """ComfyUI's legacy scaled fp8 (formats_lora_moe.md §3.1 step 2); returns what it means."""
    stored, meant = {}, {}
    for name, value in state.items():
        if qref.is_block_weight(name, tuple(value.shape)):
            scale = (value.abs().max() / FP8_MAX).to(torch.float32)
            q = (value / scale).to(torch.float8_e4m3fn)
            stored["model.diffusion_model." + name] = q
            stored["model.diffusion_model." + name[: -len(".weight")] + ".scale_weight"] = \
                scale.reshape(())
            meant[name] = q.to(torch.float32) * scale
        else:
            stored["model.diffusion_model." + name] = value.to(torch.bfloat16)
            meant[name] = value.to(torch.bfloat16).to(torch.float32)
    stored["scaled_fp8"] = torch.empty(0, dtype=torch.float8_e4m3fn)
    save_file(stored, path, metadata={"format": "pt"})
    return meant


def quant_bases(state):
    """The Q4_K_M and NF4 files of wan/dit_quant, rewritten by their own script into a scratch
    folder (checked byte for byte against the committed ones), and what they mean."""
    bases = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, write, ext in (
                ("t2v-Q4_K_M", lambda p: qref.write_gguf(p, state, "Q4_K_M", "", "wan", 64),
                 ".gguf"),
                ("t2v-nf4", lambda p: qref.write_nf4(p, state), ".safetensors")):
            path = os.path.join(tmp, name + ext)
            meant = write(path)
            committed = os.path.join(DATA, "wan", "dit_quant", name + ext)
            with open(path, "rb") as a, open(committed, "rb") as b:
                assert a.read() == b.read(), f"{name}{ext} differs from the committed file"
            bases["wan/dit_quant/" + name + ext] = {
                k: torch.from_numpy(np.asarray(v, dtype=np.float32)).reshape(state[k].shape)
                for k, v in meant.items()}
    return bases


def check_base(v, reference_path):
    """The base velocities against the committed ones: equal up to the bf16 floor (another
    machine's GEMM may sum in another order: the committed ones came from elsewhere)."""
    with safe_open(reference_path, framework="pt") as f:
        for i, got in enumerate(v):
            want = f.get_tensor(f"v.{i}")
            rel = float((got - want).abs().max() / want.abs().max())
            print(f"  base {os.path.basename(reference_path)} v.{i}: max diff {rel:.2e} of max|v|")
            assert rel < BASE_FLOOR, f"{reference_path} v.{i}: max diff {rel:.3e} of max|v|"


def check_reads_back(lora, name):
    with safe_open(os.path.join(OUT, name), framework="pt") as f:
        assert set(f.keys()) == set(lora.tensors), name
        for k in f.keys():
            assert torch.equal(f.get_tensor(k), lora.tensors[k]), k


def main():
    os.makedirs(OUT, exist_ok=True)
    model = ref.build(IN_OUT)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    shapes = {k: tuple(v.shape) for k, v in state.items()}
    x, context = inputs()

    loras = make_loras(shapes)
    for name, lora in loras.items():
        lora.write(name + ".safetensors")
        check_reads_back(lora, name + ".safetensors")

    bf16_base = "wan/dit/t2v.safetensors.index.json"
    bases = {bf16_base: {k: ref.bf16_values(v) for k, v in state.items()}}
    bases.update(quant_bases(state))
    fp8_base = "wan/dit_lora/t2v-fp8_scaled.safetensors"
    bases[fp8_base] = write_fp8(os.path.join(DATA, fp8_base), state)

    base_v = {}
    for base, weights in bases.items():
        base_v[base] = velocities(model, weights, x, context)
    check_base(base_v[bf16_base], os.path.join(DATA, "wan", "dit", "t2v_reference.safetensors"))
    for name in ("t2v-Q4_K_M", "t2v-nf4"):
        check_base(base_v[f"wan/dit_quant/{name}" + (".gguf" if "Q4" in name else ".safetensors")],
                   os.path.join(DATA, "wan", "dit_quant", f"{name}_reference.safetensors"))

    cases = [(name, bf16_base, [(name, 1.0)]) for name in loras]
    cases += [("r16_q4_k_m", "wan/dit_quant/t2v-Q4_K_M.gguf", [("r16", 1.0)]),
              ("r16_nf4", "wan/dit_quant/t2v-nf4.safetensors", [("r16", 1.0)]),
              ("r16_fp8", fp8_base, [("r16", 1.0)]),
              ("two", bf16_base, [("r16", 0.7), ("r64", -0.5)])]
    manifest = {"cases": []}
    for case, base, applied in cases:
        weights = merged(bases[base], [(loras[n], s) for n, s in applied])
        vs = velocities(model, weights, x, context)
        tensors = {"x": x.contiguous(), "context": context.contiguous()}
        changes = []
        for i, (t, v) in enumerate(zip(ref.TIMESTEPS, vs)):
            tensors[f"t.{i}"] = ref.token_timesteps(IN_OUT, t).contiguous()
            tensors[f"v.{i}"] = v.contiguous()
            b = base_v[base][i]
            changes.append(float((v - b).pow(2).mean().sqrt() / b.pow(2).mean().sqrt()))
        print(f"{case:12s} on {os.path.basename(base):28s} change of v (rms rel) at t = "
              + ", ".join(f"{t}: {c:.3f}" for t, c in zip(ref.TIMESTEPS, changes)))
        assert min(changes) > MIN_CHANGE, f"{case}: the LoRA barely changes v ({changes})"
        save_file(tensors, os.path.join(OUT, f"{case}_reference.safetensors"),
                  metadata={"timesteps": ",".join(str(t) for t in ref.TIMESTEPS)})
        manifest["cases"].append({
            "case": case, "reference": f"wan/dit_lora/{case}_reference.safetensors",
            "base": [base],
            "loras": [{"file": f"wan/dit_lora/{n}.safetensors", "strength": s} for n, s in applied],
            "applied_terms": sum(len(loras[n].low_rank) + len(loras[n].deltas) for n, _ in applied),
        })
    # The k_img file's terms this model has no tensor for (down or delta keys, one per term).
    manifest["unmatched"] = {"wan/dit_lora/k_img.safetensors": sorted(
        k for k in loras["k_img"].tensors
        if any(part in k for part in ("k_img", "v_img", "img_emb"))
        and k.endswith((".lora_down.weight", ".diff")))}
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
