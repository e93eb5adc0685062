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
import gpu_audit
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
    failures = []

    def attempt(name, produce):
        print(f"[bench] {name} ...", flush=True)
        t0 = time.perf_counter()
        try:
            result = produce()
        except Exception as error:  # one broken figure must not hide the others
            traceback.print_exc()
            failures.append(failed(name, error))
            return None
        print(f"[bench] {name}: {time.perf_counter() - t0:.0f} s", flush=True)
        return result

    fixed_128 = figures.make_data("fixed_128", "fixed", "--length", "128", "--count", "512")
    fixed_512 = figures.make_data("fixed_512", "fixed", "--length", "512", "--count", "64")
    longtail = figures.make_data("longtail_512", "longtail", "--max-length", "512", "--count", "512")

    # The peak is timed at the start and at the end and the larger one kept:
    # a peak timed while other processes load the cores would flatter MFU.
    peaks = [attempt("matmul peak", lambda: figures.matmul_peak("matmul_peak_start"))]
    vs_pytorch, measured = [], {}
    for size, data in (("tiny", fixed_128), ("small", fixed_512)):
        result = attempt(f"SFT {size} vs PyTorch", lambda: figures.sft_vs_pytorch(size, data))
        if result:
            vs_pytorch += result[0]
            measured[size] = result[1:]
    vs_pytorch += attempt("SFT small bf16-mixed", lambda: figures.sft_bf16_mixed(fixed_512)) or []
    vs_pytorch += attempt("SFT small bf16-mixed, AVX2", lambda: figures.sft_bf16_mixed_avx2(fixed_512)) or []
    rest = []
    rest += attempt("accumulation", lambda: figures.accumulation(fixed_128)) or []
    rest += attempt("padding", lambda: figures.padding(longtail)) or []
    if "small" in measured:
        rest += figures.memory_per_update(*measured["small"])
    rest += attempt("log-prob memory", figures.log_prob_memory) or []
    if "small" in measured:
        small_ptrain = measured["small"][0]
        rest += attempt("activation checkpointing",
                        lambda: figures.activation_checkpointing(fixed_512, small_ptrain)) or []
    rest += attempt("LoRA", lambda: figures.lora(fixed_512)) or []
    rest += attempt("LoRA DPO reference", lambda: figures.lora_dpo_reference(fixed_512)) or []
    rest += attempt("DPO", lambda: figures.dpo(longtail)) or []
    rest += attempt("GRPO", figures.grpo) or []
    rest += attempt("sharding", figures.sharding) or []
    # What a GPU would be asked to do, on this CPU (bench/gpu_audit.py; needs
    # bench_gpu_audit from a LibTorch >= 2.5 build: PTRAIN_AUDIT_BUILD_DIR).
    rest += attempt("GPU-work audit", gpu_audit.suite_rows) or []
    peaks.append(attempt("matmul peak", lambda: figures.matmul_peak("matmul_peak_end")))
    peaks = [p for p in peaks if p]
    machine = figures.matmul_peak_rows(peaks) if peaks else []
    if peaks:
        machine += attempt("matmul peak, OpenBLAS's own kernels", lambda: figures.openblas_kernels_row(peaks)) or []
    for size in measured if peaks else ():
        machine += figures.mfu(size, *measured[size], figures.best(peaks, "flops_per_s"))
    rows = vs_pytorch + machine + rest + failures

    elapsed = time.perf_counter() - start
    header = [f"ptrain benchmarks, {time.strftime('%Y-%m-%d %H:%M')}, {platform.node()} ({os.cpu_count()} cores): "
              f"{THREADS} threads per process, suite {elapsed / 60:.1f} min, "
              f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}",
              f"load average (1 min) at start {load_at_start:.1f}, at end {os.getloadavg()[0]:.1f}: "
              "other processes on the machine share these cores",
              runner.compared_libraries(),
              "ratio = value / baseline; memory and seconds: lower is better"]
    if max(load_at_start, os.getloadavg()[0]) > os.cpu_count():
        header.insert(2, "WARNING: more runnable processes than cores during the suite: rates are unreliable, rerun")
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
