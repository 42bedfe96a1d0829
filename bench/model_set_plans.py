#!/usr/bin/env python3
"""model_set_plans: `ferry-cli plan --json` of whole header-only model sets, as Markdown tables.

Writes each set with `ferry-cli synth --set KIND --out DIR/KIND` (sparse files: real sizes, no
disk), plans it on a described machine at each size, and prints one table per (set, size): per
stage the bytes resident on the GPU, cached in pinned RAM and streamed from disk, the working
memory and the predicted VRAM and RAM peaks, then the whole run's peaks against the RAM an
`auto` preset would leave the OS (it takes 60 % of the available RAM, core/offload/preset.cpp).
A plan that does not fit (exit 3) is reported with ferry-cli's message, verbatim.

  bench/model_set_plans.py --cli build/linux-release/cli/ferry-cli --dir /tmp/sets \
      [--sets i2v-a14b-fp8,...] [--sizes 832x480x81,1280x720x81] [--preset laptop-8gb] \
      [--vram-mib 8192 --ram-mib 16384]

Image-to-video sets are planned with the start image of the size (synth --set writes
start_832x480.png and start_1280x720.png); the request's --width/--height set the area, the
image's aspect and the model's size rule the output size (shown in each table's title).
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

GIB = 1024.0**3
DEFAULT_SETS = "ti2v-5b-q4_k_m,i2v-a14b-fp8,i2v-a14b-q4_k_m,t2v-14b-bf16,t2v-14b-q4_k_m"


def gib(b):
    return f"{b / GIB:.2f}"


def blocks(stage, placement):
    groups = [g for g in stage.get("groups", []) if g["placement"] == placement]
    return f"{len(groups)} / {gib(sum(g['bytes'] for g in groups))}"


def table(plan, ram_limit):
    rows = ["| stage | weights GiB | resident n / GiB | pinned RAM n / GiB | disk n / GiB "
            "| working GiB | VRAM peak GiB | RAM peak GiB |",
            "|---|---|---|---|---|---|---|---|"]
    for s in plan["stages"]:
        if "groups" in s:
            placed = [blocks(s, p) for p in ("resident", "pinned RAM", "disk")]
        else:
            placed = [s.get("detail", "whole"), "-", "-"]
        rows.append(f"| {s['stage']} | {gib(s['weight_bytes'])} | " + " | ".join(placed) +
                    f" | {gib(s['activation_bytes'])} | {gib(s['predicted_vram_peak_bytes'])} | "
                    f"{gib(s['predicted_ram_peak_bytes'])} |")
    ram = plan["predicted_ram_peak_bytes"]
    rows.append(f"\nwhole run: VRAM {gib(plan['predicted_vram_peak_bytes'])} GiB, RAM {gib(ram)} "
                f"GiB; {'within' if ram <= ram_limit else 'OVER'} the {gib(ram_limit)} GiB an "
                f"auto preset takes of this RAM")
    return "\n".join(rows)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cli", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--sets", default=DEFAULT_SETS)
    p.add_argument("--sizes", default="832x480x81,1280x720x81")
    p.add_argument("--preset", default="laptop-8gb")
    p.add_argument("--vram-mib", default="8192")
    p.add_argument("--ram-mib", default="16384")
    a = p.parse_args()
    ram_limit = int(a.ram_mib) * 1024 * 1024 // 10 * 6
    for kind in a.sets.split(","):
        folder = Path(a.dir) / kind
        if not folder.exists():
            subprocess.run([a.cli, "synth", "--set", kind, "--out", str(folder)], check=True,
                           stdout=subprocess.DEVNULL)
        for size in a.sizes.split(","):
            w, h, f = size.split("x")
            cmd = [a.cli, "plan", "--model", str(folder), "--preset", a.preset, "--vram-mib",
                   a.vram_mib, "--ram-mib", a.ram_mib, "--width", w, "--height", h, "--frames", f]
            image = folder / f"start_{w}x{h}.png"
            if image.exists():
                cmd += ["--image", str(image)]
            r = subprocess.run(cmd + ["--json"], capture_output=True, text=True)
            print(f"\n### {kind} at {size}\n\n`{' '.join(cmd)} --json`\n")
            if r.returncode != 0:
                print(f"exit {r.returncode}: {r.stderr.strip()}")
                continue
            plan = json.loads(r.stdout)
            v = plan["video"]
            print(f"model {plan['model']['name']}, video {v['width']}x{v['height']}x{v['frames']}"
                  f", preset {plan['preset']['name']}\n")
            print(table(plan, ram_limit))
    return 0


if __name__ == "__main__":
    sys.exit(main())
