"""The GPU figures of issue 23, each next to a baseline measured in the same run.

On a GPU machine, after scripts/build-gpu.sh, with that machine's PyTorch:

    export LD_LIBRARY_PATH="$(scripts/build-gpu.sh --print-library-path)"
    PTRAIN_BUILD_DIR=build-gpu PTRAIN_PYTHON=python3 python3 bench/gpu_suite.py

writes bench/results_gpu.json (the device, PyTorch and CUDA versions, and
rows {"name", "value", "unit", "baseline", "ratio"}) and bench/out/table_gpu.txt.
`--smoke --device cpu` runs the same code paths at toy sizes on the CPU
(bench/out/results_gpu_smoke.json), which is how this script is checked on
machines without a GPU.

Figures:
  - SFT tokens/s at Qwen2.5-0.5B's shapes (hidden 896, 24 layers, 14 query / 2
    kv heads, vocab 151,936, tied embeddings; random weights, no q/k/v bias),
    sequence length 2048, bf16-mixed, against the PyTorch-eager loop of
    bench/reference/sft_step.py on the same GPU (bf16 autocast,
    F.scaled_dot_product_attention, fused AdamW); target >= 1.0;
  - MFU of both against the bf16 matrix-multiply peak timed in this run
    (6·N + 12·layers·width·T FLOPs a token, figures.training_flops_per_token);
    target >= 40%;
  - the same on long-tailed data, ptrain packing rows against the padded loop;
  - DPO pairs/s (one concatenated forward of both sides against two);
  - GRPO rollout tokens/s with the KV cache and batched device sampling
    against recomputing the prefix (bench_grpo_step);
  - peak GPU memory of the SFT run against params + grads + AdamW state
    (16 bytes a parameter in fp32), read with nvidia-smi for both programs;
  - ptrain's step-phase timers (time/* of metrics.jsonl, docs/monitoring.md)
    at each run's last log step, in the rows' notes and as "ptrain_phases".

Each row stands alone: one that fails is a FAILED row and the rest go on;
every row is printed as it is measured and the results file rewritten (and
copied to each --copy-to path), so a run cut short keeps what it measured.
`--only sft,longtail` picks figures. `--budget-s S` bounds the whole suite
and `--row-timeout-s S` each row: a row still running at its limit has its
processes killed and is FAILED, and one that would start with under 15 s of
the budget left is SKIPPED. Every row has a "status" (ok, FAILED, SKIPPED)
and its "seconds"; the exit status is 1 when any row is not ok, 0 otherwise.
A device facts row (the matmul peak) comes first; without it MFU is "-".
"""
import argparse
import functools
import json
import platform
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

import figures
import runner
from figures import num_params, row, training_flops_per_token
from runner import OUT, ROOT

QWEN25_05B = {"vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864, "num_layers": 24,
              "num_heads": 14, "num_kv_heads": 2, "max_position_embeddings": 32768, "rope_theta": 1000000.0,
              "rms_norm_eps": 1e-6, "tie_word_embeddings": True}
TOY = {"vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_layers": 2, "num_heads": 4,
       "num_kv_heads": 2, "max_position_embeddings": 256, "tie_word_embeddings": True}
BYTES_PER_PARAMETER = 16  # fp32 weight, gradient, AdamW's two moments


class GpuMemoryPeak:
    """The largest GPU memory any process used while the block ran (nvidia-smi, 5 reads a second).

    Counts what the process holds from the driver (allocator cache and CUDA
    context included), the same way for ptrain and for PyTorch."""

    def __init__(self, enabled):
        self.enabled, self.peak_mib, self._stop = enabled, 0, threading.Event()

    def _poll(self):
        while not self._stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", "--query-compute-apps=used_memory",
                                      "--format=csv,noheader,nounits"], capture_output=True, text=True,
                                     timeout=10).stdout
            except (OSError, subprocess.SubprocessError):  # no reading this time; the row still runs
                out = ""
            used = [int(v) for v in out.split() if v.strip().isdigit()]
            self.peak_mib = max([self.peak_mib] + used)
            self._stop.wait(0.2)

    def __enter__(self):
        if self.enabled:
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if self.enabled:
            self._stop.set()
            self._thread.join()

    @property
    def bytes(self):
        return self.peak_mib * 2**20 if self.enabled and self.peak_mib else None


def torch_facts(device):
    """Device name, versions and the bf16 matmul peak, from the benchmark's own PyTorch."""
    code = f"""
import json, time, torch
device = torch.device({device!r})
size, dtype = (8192, torch.bfloat16) if device.type == "cuda" else (1024, torch.float32)
a = torch.randn(size, size, device=device, dtype=dtype); b = torch.randn(size, size, device=device, dtype=dtype)
sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
for _ in range(3): a @ b
sync(); start = time.perf_counter()
for _ in range(10): a @ b
sync(); seconds = (time.perf_counter() - start) / 10
print(json.dumps({{"device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                  "torch": torch.__version__, "cuda": torch.version.cuda,
                  "peak_flops_per_s": 2 * size**3 / seconds, "peak_dtype": str(dtype)}}))
"""
    stdout, _, _ = runner.run_process([runner.PYTHON, "-c", code], "gpu_torch_facts")
    return runner.last_json_line(stdout)


def phase_breakdown(name):
    """ptrain's step-phase timers (docs/monitoring.md) at the run's last log step: {phase: seconds per step}."""
    path = OUT / "runs" / name / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    timed = [row for row in rows if "time/forward_s" in row]
    if not timed:
        return {}
    return {key[len("time/"):-len("_s")]: value for key, value in timed[-1].items() if key.startswith("time/")}


def phase_note(phases):
    total = sum(phases.values()) or 1.0
    return "phases per step: " + ", ".join(f"{name} {seconds:.3g} s ({seconds / total:.0%})"
                                           for name, seconds in phases.items() if seconds > 0)


UNKNOWN_FACTS = {"device_name": None, "torch": None, "cuda": None, "peak_flops_per_s": None, "peak_dtype": None}
MIN_ROW_S = 15  # a row that cannot get this many seconds of the budget is skipped rather than started


class Suite:
    """Rows measured one at a time, each standing alone.

    Every row is printed as soon as it is known and the results file (and its
    copies) rewritten, so a run cut short keeps what it measured. A row that
    raises, or whose processes still run at its deadline (--row-timeout-s, or
    what is left of --budget-s), becomes a FAILED row and the next one runs; a
    row with less than MIN_ROW_S of the budget left is SKIPPED."""

    def __init__(self, args, path):
        self.args, self.path, self.facts = args, path, dict(UNKNOWN_FACTS)
        self.rows, self.phases, self.start = [], {}, time.monotonic()
        self.deadline = self.start + args.budget_s if args.budget_s else None

    def row_deadline(self):
        """The row's deadline: --row-timeout-s from now, no later than the budget's end (None: no limit)."""
        limits = [d for d in (self.deadline, self.args.row_timeout_s and time.monotonic() + self.args.row_timeout_s)
                  if d]
        return min(limits) if limits else None

    def measure(self, name, produce):
        """Runs produce() -> [row] under the row's deadline; records its rows or a FAILED/SKIPPED one."""
        left = self.deadline - time.monotonic() if self.deadline else None
        if left is not None and left < MIN_ROW_S:
            return self.record([self.placeholder(name, "SKIPPED", f"{max(left, 0):.0f} s of the budget left")], 0.0)
        print(f"[gpu bench {self.elapsed():.0f}s] {name} ...", flush=True)
        runner.DEADLINE, start = self.row_deadline(), time.monotonic()
        try:
            rows = produce()
        except Exception as error:  # one broken figure must not hide the others
            traceback.print_exc()
            rows = [self.placeholder(name, "FAILED", str(error)[-300:])]
        except BaseException as stop:  # SIGTERM (sys.exit in the handler) or Ctrl-C: keep what was measured
            self.record([self.placeholder(name, "FAILED", f"the suite was stopped ({stop!r})")],
                        time.monotonic() - start)
            raise
        finally:
            runner.DEADLINE = None
        return self.record(rows, time.monotonic() - start)

    @staticmethod
    def placeholder(name, status, why):
        return {"name": name, "value": None, "unit": "", "baseline": None, "ratio": None, "status": status,
                "note": f"{status}: {why}"}

    def record(self, rows, seconds):
        for r in rows:
            r.setdefault("status", "ok")
            r["seconds"] = round(seconds, 1)
            self.rows.append(r)
            print(format_row(r), flush=True)
        self.write()
        return rows

    def elapsed(self):
        return time.monotonic() - self.start

    def unmeasured(self):
        return [r for r in self.rows if r["status"] != "ok"]

    def write(self):
        keys = ("name", "status", "value", "unit", "baseline", "ratio", "seconds", "note")
        result = {"device": self.facts["device_name"], "torch": self.facts["torch"], "cuda": self.facts["cuda"],
                  "date": time.strftime("%Y-%m-%d %H:%M"), "host": platform.node(),
                  "command": " ".join(sys.argv), "suite_s": round(self.elapsed()),
                  "budget_s": self.args.budget_s, "row_timeout_s": self.args.row_timeout_s,
                  "rows": [{k: r.get(k) for k in keys} for r in self.rows], "ptrain_phases": self.phases}
        text = json.dumps(result, indent=2) + "\n"
        for path in [self.path] + [Path(p) for p in self.args.copy_to]:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)


def format_row(r):
    def number(value, spec):
        return "-" if value is None else format(value, spec)
    return (f"{r['name']:<86} {number(r['value'], '.4g'):>10} {number(r['baseline'], '.4g'):>10} "
            f"{number(r.get('ratio'), '.2f'):>6} {r['unit']} {r.get('note', '')}")


def sft_run(args, name, model, data, length, batch, device, reference=True):
    """ptrain (and, unless reference is False, the PyTorch loop) on one config; each with its GPU memory peak.

    A failed reference leaves `theirs` None rather than losing ptrain's figure."""
    runtime = {"device": device, "precision": "bf16-mixed" if device == "cuda" else "fp32"}
    config = runner.sft_config(name, model, data, length, batch["global_size"], batch.get("micro_size", 1),
                               args.warmup + args.steps, runtime=runtime)
    if "micro_tokens" in batch:
        config["batch"] = {k: v for k, v in batch.items() if k != "padded_micro_size"}
    with GpuMemoryPeak(device == "cuda") as memory:
        ours = runner.run_ptrain(name, config, args.warmup)
    ours["gpu_peak_bytes"] = memory.bytes
    theirs = None
    if reference:
        padded = runner.sft_config(name + "_pytorch", model, data, length, batch["global_size"],
                                   batch.get("micro_size", 1), args.warmup + args.steps, runtime=runtime)
        if "micro_tokens" in batch:  # the loop pads: the same examples per step, micro_size of the plan's size
            padded["batch"] = {"global_size": batch["global_size"], "micro_size": batch["padded_micro_size"]}
        try:
            with GpuMemoryPeak(device == "cuda") as memory:
                theirs = runner.run_reference(name + "_pytorch", padded, args.warmup, args.steps,
                                              extra_args=["--device", device])
            theirs["gpu_peak_bytes"] = memory.bytes
        except Exception:
            traceback.print_exc()
    return ours, theirs


def shapes(args, length=2048):
    """(model, sequence length, label): Qwen2.5-0.5B's shapes, or the toy ones with --smoke."""
    return (QWEN25_05B, length, "Qwen2.5-0.5B shapes") if not args.smoke else (TOY, 128, "toy")


@functools.cache
def dataset(kind, length, count):
    """bench/make_sft_data.py's fixed-length or long-tailed set, made once, when a row first needs it."""
    if kind == "fixed":
        return figures.make_data(f"gpu_fixed_{length}", "fixed", "--length", str(length), "--count", str(count))
    return figures.make_data(f"gpu_longtail_{length}", "longtail", "--max-length", str(length),
                             "--median", str(length // 8), "--count", str(count))


def examples(args):
    return 16 * (args.warmup + args.steps)


def mfu(tokens_per_s, flops_per_token, facts):
    """Fraction of the run's measured matmul peak, or None when the peak could not be measured."""
    peak = facts["peak_flops_per_s"]
    return tokens_per_s * flops_per_token / peak if peak and tokens_per_s is not None else None


def percent(value):
    return "-" if value is None else f"{value:.1%}"


def sft_rows(suite):
    args, facts = suite.args, suite.facts
    model, length, label = shapes(args)
    data = dataset("fixed", length, examples(args))
    batch = {"global_size": 16, "micro_size": 4} if not args.smoke else {"global_size": 4, "micro_size": 2}
    ours, theirs = sft_run(args, "gpu_sft", model, data, length, batch, args.device)
    suite.phases["sft"] = phase_breakdown("gpu_sft")
    millions = num_params(model) / 1e6
    baseline = theirs["tokens_per_s"] if theirs else None
    missing = "" if theirs else "PyTorch loop FAILED (see the log); "
    rows = [row(f"SFT tokens/s {label} ({millions:.0f}M, seq {length}): ptrain vs PyTorch eager",
                ours["tokens_per_s"], "tokens/s", baseline, ">= 1.0", baseline and ours["tokens_per_s"] >= baseline,
                note=missing + phase_note(suite.phases["sft"]))]
    flops = training_flops_per_token(model, length - 1)
    ours_mfu = mfu(ours["tokens_per_s"], flops, facts)
    peak = facts["peak_flops_per_s"]
    peak_label = f"{facts['peak_dtype']} peak {peak / 1e12:.0f} TFLOP/s" if peak else "no measured peak"
    rows.append(row(f"MFU {label}: ptrain vs PyTorch eager ({peak_label})", ours_mfu, "fraction of peak",
                    mfu(baseline, flops, facts), ">= 0.40", ours_mfu is not None and ours_mfu >= 0.40))
    if ours["gpu_peak_bytes"]:
        state = BYTES_PER_PARAMETER * num_params(model)
        rows.append(row("peak GPU memory, SFT: ptrain vs PyTorch eager", ours["gpu_peak_bytes"] / 2**30, "GiB",
                        theirs["gpu_peak_bytes"] / 2**30 if theirs and theirs["gpu_peak_bytes"] else None,
                        note=f"params + grads + AdamW state alone: {state / 2**30:.1f} GiB"))
    return rows


def longtail_rows(suite):
    args, facts = suite.args, suite.facts
    model, length, label = shapes(args)
    longtail = dataset("longtail", length, examples(args))
    packed_batch = ({"global_size": 16, "micro_tokens": 4 * length, "packing": True, "padded_micro_size": 4}
                    if not args.smoke else
                    {"global_size": 4, "micro_tokens": 2 * length, "packing": True, "padded_micro_size": 2})
    ours, theirs = sft_run(args, "gpu_sft_longtail", model, longtail, length, packed_batch, args.device)
    suite.phases["sft_packed"] = phase_breakdown("gpu_sft_longtail")
    flops = training_flops_per_token(model, length - 1)
    baseline = theirs["tokens_per_s"] if theirs else None
    theirs_note = f" vs {percent(mfu(baseline, flops, facts))}" if baseline else " (PyTorch loop FAILED)"
    return [row(f"SFT tokens/s {label}, long-tailed data: ptrain packed vs PyTorch eager padded",
                ours["tokens_per_s"], "tokens/s", baseline, ">= 1.5", baseline and ours["tokens_per_s"] >= 1.5 * baseline,
                note=f"MFU {percent(mfu(ours['tokens_per_s'], flops, facts))}{theirs_note}"
                     f" (at seq {length}'s attention cost); " + phase_note(suite.phases["sft_packed"]))]


def dpo_rows(suite):
    args = suite.args
    model, length, _ = shapes(args, 1024)
    pairs = figures.preference_pairs(dataset("longtail", shapes(args)[1], examples(args)))
    runs = {}
    for concatenated in (True, False):
        name = f"gpu_dpo_{'concatenated' if concatenated else 'separate'}"
        config = runner.sft_config(name, model, pairs, length, 8, 4, args.warmup + args.steps, plugin="dpo",
                                   runtime={"device": args.device,
                                            "precision": "bf16-mixed" if args.device == "cuda" else "fp32"},
                                   module={"loss": ["sigmoid"], "beta": 0.1, "loss_agg": "pair",
                                           "precompute_reference": False, "concatenated": concatenated})
        runs[concatenated] = runner.run_ptrain(name, config, args.warmup)
    suite.phases["dpo"] = phase_breakdown("gpu_dpo_concatenated")
    return [row("DPO pairs/s: one forward of both sides vs two", runs[True]["units_per_s"], "pairs/s",
                runs[False]["units_per_s"], note=phase_note(suite.phases["dpo"]))]


def grpo_rows(suite):
    args = suite.args
    repeats = 2 if not args.smoke else 1
    stdout, _ = runner.run_bench("bench_grpo_step", [repeats, runner.THREADS, args.device], "gpu_grpo_step")
    result = runner.last_json_line(stdout)
    return [row("GRPO rollout tokens/s (64 seqs, 24 new): KV cache + device sampling vs recompute",
                result["rollout_tokens_per_s_kv_cache"], "tokens/s", result["rollout_tokens_per_s_recompute"])]


FIGURES = {"sft": ("SFT", sft_rows), "longtail": ("SFT long-tailed", longtail_rows), "dpo": ("DPO", dpo_rows),
           "grpo": ("GRPO", grpo_rows)}


def device_facts(suite):
    """The device facts as the suite's first row: without them the other rows still run (MFU then has no peak)."""
    def measure():
        suite.facts = torch_facts(suite.args.device)
        peak = suite.facts["peak_flops_per_s"]
        return [row(f"matmul peak, {suite.facts['peak_dtype']} on {suite.facts['device_name']}",
                    peak / 1e12, "TFLOP/s", None, note=f"torch {suite.facts['torch']}, CUDA {suite.facts['cuda']}")]
    suite.measure("device facts", measure)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (the figures) or cpu (with --smoke)")
    parser.add_argument("--smoke", action="store_true", help="toy sizes: checks the script, measures nothing")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--only", default=",".join(FIGURES),
                        help=f"comma-separated figures to run, in this order ({', '.join(FIGURES)})")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="seconds for the whole suite: rows still running at its end are stopped (FAILED), "
                             f"rows with under {MIN_ROW_S} s left are SKIPPED")
    parser.add_argument("--row-timeout-s", type=float, default=None,
                        help="seconds one row may run before its processes are stopped (FAILED)")
    parser.add_argument("--copy-to", action="append", default=[], metavar="PATH",
                        help="also write the results file here, after every row (repeatable)")
    args = parser.parse_args()
    unknown = [key for key in args.only.split(",") if key.strip() not in FIGURES]
    if unknown:
        parser.error(f"--only: unknown figure(s) {', '.join(unknown)} (known: {', '.join(FIGURES)})")
    return args


def main():
    args = parse_args()
    # timeout(1) and the proof script stop the suite with SIGTERM: leave as Ctrl-C
    # would, through Suite.measure (the row in progress recorded, its processes killed).
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    path = ROOT / "bench" / "results_gpu.json" if not args.smoke else OUT / "results_gpu_smoke.json"
    suite = Suite(args, path)
    device_facts(suite)
    for key in args.only.split(","):
        name, produce = FIGURES[key.strip()]
        suite.measure(name, lambda: produce(suite))
    print(f"[gpu bench {suite.elapsed():.0f}s] wrote {path}" + "".join(f" and {p}" for p in args.copy_to))
    for r in suite.rows:
        print(format_row(r))
    unmeasured = suite.unmeasured()
    if unmeasured:
        print(f"[gpu bench] {len(unmeasured)} of {len(suite.rows)} rows not measured: "
              + "; ".join(f"{r['name']} ({r['status']})" for r in unmeasured))
    return 1 if unmeasured else 0


if __name__ == "__main__":
    sys.exit(main())
