#!/usr/bin/env bash
# Tokens/s of the bundled SFT job at world size 1 (2 threads) next to world
# size 2 (1 thread each) in the same run, and the share of step time the
# ranks spend waiting in collectives.
#
#   bench/bench_distributed.sh [steps]      (after scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
steps="${1:-60}"
ptrain="${PTRAIN_BUILD_DIR:-build}/bin/ptrain"
out="bench/out/distributed"
mkdir -p "$out"

"$ptrain" train -c configs/sft.toml --overwrite --set train.max_steps="$steps" \
  --set runtime.threads=2 --set checkpoint.every_steps=0 --set output_dir="$out/world1" > "$out/world1.log" 2>&1
"$ptrain" launch --nproc 2 -- train -c configs/sft.toml --overwrite --set train.max_steps="$steps" \
  --set runtime.threads=1 --set checkpoint.every_steps=0 --set output_dir="$out/world2" > "$out/world2.log" 2>&1

"${PTRAIN_PYTHON:-.venv/bin/python}" - "$out" <<'PY'
import json, sys
out = sys.argv[1]
def summary(run):
    lines = [json.loads(l) for l in open(f"{out}/{run}/metrics.jsonl")]
    lines = lines[5:]  # warm-up steps
    tokens = sum(l["tokens"] for l in lines)
    seconds = sum(l["step_s"] for l in lines)
    comm = sum(l.get("comm_s", 0.0) for l in lines)
    return tokens / seconds, comm / seconds, lines[-1]["loss"]
w1, c1, l1 = summary("world1")
w2, c2, l2 = summary("world2")
print(f"{'figure':<46}{'world 2':>12}{'world 1':>12}{'ratio':>8}")
print(f"{'SFT tokens/s (bundled job, 2 cores)':<46}{w2:>12.0f}{w1:>12.0f}{w2 / w1:>8.2f}")
print(f"{'share of step time in collectives':<46}{c2:>12.1%}{c1:>12.1%}")
print(f"{'loss at the last step (same data, same math)':<46}{l2:>12.4f}{l1:>12.4f}")
PY
