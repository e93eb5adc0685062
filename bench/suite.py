#!/usr/bin/python3
"""Runs every figure of the benchmark suite (issue 8) and writes the table.

Called by bench/run_all.sh after it builds the binaries; expects build/bin/
(or $PTRAIN_BUILD_DIR/bin) to hold ptrain, its plugins and the bench_* tools.
Writes bench/out/table.txt and bench/results.json.
"""
import json
import os
import platform
import sys
import time
import traceback

import figures
import runner
from runner import OUT, ROOT, THREADS


def fmt(value, unit):
    if value is None:
        return "-"
    if unit.startswith("s"):
        return f"{value:.3f}"
    return f"{value:.1f}" if abs(value) < 100 else f"{value:,.0f}"


def format_table(rows, header):
    lines = header + [""]
    width = max(len(r["name"]) for r in rows)
    lines.append(f"{'figure':<{width}}  {'value':>10}  {'baseline':>10}  {'ratio':>6}  {'unit':<19}  target")
    lines.append("-" * (width + 70))
    for r in rows:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        target = ""
        if r.get("target"):
            verdict = {True: "met", False: "NOT met", None: "n/a"}[r.get("met")]
            target = f"{r['target']} ({verdict})"
        lines.append(f"{r['name']:<{width}}  {fmt(r['value'], r['unit']):>10}  {fmt(r['baseline'], r['unit']):>10}"
                     f"  {ratio:>6}  {r['unit']:<19}  {target}")
        if r.get("note"):
            lines.append(f"{'':<4}{r['note']}")
    return "\n".join(lines) + "\n"


def failed(name, error):
    """A figure that could not be measured: shown in the table, never silently dropped."""
    return {"name": name, "value": None, "unit": "", "baseline": None, "ratio": None, "target": None,
            "met": None, "note": f"FAILED: {error}"}


def main():
    start = time.perf_counter()
    load_at_start = os.getloadavg()[0]
    rows = []

    def attempt(name, produce):
        print(f"[bench] {name} ...", flush=True)
        t0 = time.perf_counter()
        try:
            result = produce()
        except Exception as error:  # one broken figure must not hide the others
            traceback.print_exc()
            rows.append(failed(name, error))
            return None
        print(f"[bench] {name}: {time.perf_counter() - t0:.0f} s", flush=True)
        return result

    fixed_128 = figures.make_data("fixed_128", "fixed", "--length", "128", "--count", "512")
    fixed_512 = figures.make_data("fixed_512", "fixed", "--length", "512", "--count", "64")
    longtail = figures.make_data("longtail_512", "longtail", "--max-length", "512", "--count", "512")

    peak = attempt("matmul peak", figures.matmul_peak)
    peak_flops = peak[0] if peak else float("nan")
    sft_rows, small = [], None
    for size, data in (("tiny", fixed_128), ("small", fixed_512)):
        result = attempt(f"SFT {size} vs PyTorch", lambda: figures.sft_vs_pytorch(size, data, peak_flops))
        if result:
            sft_rows += result[0]
            if size == "small":
                small = result[1:]
    rows += [r for r in sft_rows if r["name"].startswith("SFT")]
    if peak:
        rows += peak[1]
    rows += [r for r in sft_rows if r["name"].startswith("MFU")]
    rows += attempt("accumulation", lambda: figures.accumulation(fixed_128)) or []
    rows += attempt("padding", lambda: figures.padding(longtail)) or []
    if small:
        rows += figures.memory_per_update(*small)
    rows += attempt("log-prob memory", figures.log_prob_memory) or []
    if small:
        rows += attempt("activation checkpointing", lambda: figures.activation_checkpointing(fixed_512, small[0])) or []
    rows += attempt("DPO", figures.dpo) or []
    rows += attempt("GRPO", figures.grpo) or []

    elapsed = time.perf_counter() - start
    header = [f"ptrain benchmarks, {time.strftime('%Y-%m-%d %H:%M')}, {platform.node()} ({os.cpu_count()} cores): "
              f"{THREADS} threads per process, suite {elapsed / 60:.1f} min",
              f"load average (1 min) at start {load_at_start:.1f}, at end {os.getloadavg()[0]:.1f}: "
              "other processes on the machine share these cores",
              "ratio = value / baseline; memory and seconds: lower is better"]
    table = format_table(rows, header)
    print(table)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "table.txt").write_text(table)
    keys = ("name", "value", "unit", "baseline", "ratio")
    (ROOT / "bench" / "results.json").write_text(json.dumps([{k: r[k] for k in keys} for r in rows], indent=2) + "\n")
    print(f"[bench] wrote {OUT / 'table.txt'} and {ROOT / 'bench' / 'results.json'}")
    return 1 if any(r["note"].startswith("FAILED") for r in rows if r.get("note")) else 0


if __name__ == "__main__":
    sys.exit(main())
