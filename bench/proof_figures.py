#!/usr/bin/env python3
"""The bundled jobs' final figures against the ones the README and docs report.

scripts/gpu-proof.sh trains configs/sft.toml, then configs/dpo.toml and
configs/grpo.toml from its model, in each precision, into RUNS/<precision>/<job>/;
this reads their metrics.jsonl, averages each figure over the window the
docs average it over, and prints the comparison:

    python3 bench/proof_figures.py RUNS --json OUT.json

A figure is "ok" when it lies within the documented range widened by a
tolerance: another device's kernels round differently, and the curves of
changed code end in the same range, not at the same digits (docs/grpo.md).
A run that stopped before the window's last step is reported, not compared.
Standard library only: it runs under any Python.
"""
import argparse
import json
import sys
from pathlib import Path

# The figures the docs quote, as the docs test last measured them on the CPU
# (tests/docs/figures.json, written with the docs by its --write-figures).
DOC_FIGURES = Path(__file__).resolve().parent.parent / "tests" / "docs" / "figures.json"

# (job, metric, first step, last step, the figures.json entries of the
# documented low and high, tolerance, where documented)
EXPECTED = [
    ("sft", "loss", 281, 300, 'mean(sft, "loss", 281, 300)', None, 0.04, "README"),
    ("sft", "token_accuracy", 281, 300, 'mean(sft, "token_accuracy", 281, 300)', None, 0.03, "README"),
    ("dpo", "loss", 101, 120, 'mean(dpo, "loss", 101, 120)', None, 0.02, "docs/dpo.md"),
    ("dpo", "rewards/accuracy", 101, 120, 'mean(dpo, "rewards/accuracy", 101, 120)', None, 0.06, "docs/dpo.md"),
    ("dpo", "rewards/margins", 101, 120, 'mean(dpo, "rewards/margins", 101, 120)', None, 0.06, "docs/dpo.md"),
    ("grpo", "reward", 91, 100, 'lo(mean(grpo, "reward", 91, 100))', 'hi(mean(grpo, "reward", 91, 100))', 0.06,
     "docs/grpo.md, seeds 0-2"),
    ("grpo", "rewards/accuracy/mean", 91, 100, 'lo(mean(grpo, "rewards/accuracy/mean", 91, 100))',
     'hi(mean(grpo, "rewards/accuracy/mean", 91, 100))', 0.05, "docs/grpo.md, seeds 0-2"),
]


def documented_range(figures, low_key, high_key):
    """The documented [low, high] of a figure, rounded as the docs print it."""
    low = round(figures[low_key], 4)
    return low, round(figures[high_key], 4) if high_key else low


def read_metrics(run_dir):
    """Step number -> that step's metrics, from run_dir/metrics.jsonl ({} when missing)."""
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return {}
    steps = {}
    for line in path.read_text().splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            if "step" in row:
                steps[int(row["step"])] = row
    return steps


def compare(runs_dir, figures, precision, job, metric, first, last, low_key, high_key, tolerance, source):
    low, high = documented_range(figures, low_key, high_key)
    source = f"{source}: {metric} {low:g}" + ("" if low == high else f"-{high:g}") + f" over steps {first}-{last}"
    steps = read_metrics(runs_dir / precision / job)
    row = {"job": job, "precision": precision, "metric": metric, "steps": f"{first}-{last}",
           "documented": [low, high], "accepted": [round(low - tolerance, 4), round(high + tolerance, 4)],
           "source": source, "measured": None, "ok": False}
    values = [steps[s][metric] for s in range(first, last + 1) if s in steps and metric in steps[s]]
    if len(values) != last - first + 1:
        row["note"] = f"no run reached step {last}" if not steps else f"the run ended at step {max(steps)}"
        return row
    row["measured"] = round(sum(values) / len(values), 4)
    row["ok"] = low - tolerance <= row["measured"] <= high + tolerance
    return row


def table(rows):
    lines = [f"{'job':5} {'precision':10} {'metric':22} {'steps':8} {'documented':13} {'measured':9} verdict"]
    for r in rows:
        low, high = r["documented"]
        documented = f"{low:g}" if low == high else f"{low:g}-{high:g}"
        measured = "-" if r["measured"] is None else f"{r['measured']:.4f}"
        verdict = "ok" if r["ok"] else r.get("note", f"outside {r['accepted'][0]:g}-{r['accepted'][1]:g}")
        lines.append(f"{r['job']:5} {r['precision']:10} {r['metric']:22} {r['steps']:8} {documented:13} {measured:9} {verdict}")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, help="directory with <precision>/<job>/metrics.jsonl")
    parser.add_argument("--precisions", default="fp32,bf16-mixed")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    figures = json.loads(DOC_FIGURES.read_text())
    rows = [compare(args.runs, figures, precision, *expected)
            for precision in args.precisions.split(",") for expected in EXPECTED]
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
