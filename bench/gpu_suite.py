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
    (16 bytes a parameter in fp32), read with nvidia-smi for both programs.
"""
import argparse
import json
import platform
import subprocess
import sys
import threading
import time
import traceback

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
            out = subprocess.run(["nvidia-smi", "--query-compute-apps=used_memory", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True).stdout
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
        return self.peak_mib * 2**20 if self.enabled else None


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


def sft_pair(name, model, data, length, batch, steps, warmup, device, overrides=None, reference=True):
    """ptrain and (optionally) the PyTorch loop on one config; each with its GPU memory peak."""
    runtime = {"device": device, "precision": "bf16-mixed" if device == "cuda" else "fp32"}
    config = runner.sft_config(name, model, data, length, batch["global_size"], batch.get("micro_size", 1),
                               warmup + steps, runtime=runtime, **(overrides or {}))
    if "micro_tokens" in batch:
        config["batch"] = {k: v for k, v in batch.items() if k != "padded_micro_size"}
    with GpuMemoryPeak(device == "cuda") as memory:
        ours = runner.run_ptrain(name, config, warmup)
    ours["gpu_peak_bytes"] = memory.bytes
    theirs = None
    if reference:
        padded = runner.sft_config(name + "_pytorch", model, data, length, batch["global_size"],
                                   batch.get("micro_size", 1), warmup + steps, runtime=runtime)
        if "micro_tokens" in batch:  # the loop pads: the same examples per step, micro_size of the plan's size
            padded["batch"] = {"global_size": batch["global_size"], "micro_size": batch["padded_micro_size"]}
        with GpuMemoryPeak(device == "cuda") as memory:
            theirs = runner.run_reference(name + "_pytorch", padded, warmup, steps,
                                          extra_args=["--device", device])
        theirs["gpu_peak_bytes"] = memory.bytes
    return ours, theirs


def sft_figures(args, facts, data, longtail):
    model, length = (QWEN25_05B, 2048) if not args.smoke else (TOY, 128)
    batch = {"global_size": 16, "micro_size": 4} if not args.smoke else {"global_size": 4, "micro_size": 2}
    ours, theirs = sft_pair("gpu_sft", model, data, length, batch, args.steps, args.warmup, args.device)
    millions = num_params(model) / 1e6
    label = "Qwen2.5-0.5B shapes" if not args.smoke else "toy"
    rows = [row(f"SFT tokens/s {label} ({millions:.0f}M, seq {length}): ptrain vs PyTorch eager",
                ours["tokens_per_s"], "tokens/s", theirs["tokens_per_s"], ">= 1.0",
                ours["tokens_per_s"] >= theirs["tokens_per_s"])]
    flops = training_flops_per_token(model, length - 1)
    peak = facts["peak_flops_per_s"]
    rows.append(row(f"MFU {label}: ptrain vs PyTorch eager ({facts['peak_dtype']} peak "
                    f"{peak / 1e12:.0f} TFLOP/s)", ours["tokens_per_s"] * flops / peak, "fraction of peak",
                    theirs["tokens_per_s"] * flops / peak, ">= 0.40", ours["tokens_per_s"] * flops / peak >= 0.40))
    if ours["gpu_peak_bytes"]:
        state = BYTES_PER_PARAMETER * num_params(model)
        rows.append(row("peak GPU memory, SFT: ptrain vs PyTorch eager", ours["gpu_peak_bytes"] / 2**30, "GiB",
                        theirs["gpu_peak_bytes"] / 2**30,
                        note=f"params + grads + AdamW state alone: {state / 2**30:.1f} GiB"))

    packed_batch = ({"global_size": 16, "micro_tokens": 4 * length, "packing": True, "padded_micro_size": 4}
                    if not args.smoke else
                    {"global_size": 4, "micro_tokens": 2 * length, "packing": True, "padded_micro_size": 2})
    ours, theirs = sft_pair("gpu_sft_longtail", model, longtail, length, packed_batch, args.steps, args.warmup,
                            args.device)
    rows.append(row(f"SFT tokens/s {label}, long-tailed data: ptrain packed vs PyTorch eager padded",
                    ours["tokens_per_s"], "tokens/s", theirs["tokens_per_s"],
                    note=f"MFU {ours['tokens_per_s'] * flops / peak:.1%} vs "
                         f"{theirs['tokens_per_s'] * flops / peak:.1%} (at seq {length}'s attention cost)"))
    return rows


def dpo_figure(args, longtail):
    model, length = (QWEN25_05B, 1024) if not args.smoke else (TOY, 128)
    pairs = figures.preference_pairs(longtail)
    runs = {}
    for concatenated in (True, False):
        name = f"gpu_dpo_{'concatenated' if concatenated else 'separate'}"
        config = runner.sft_config(name, model, pairs, length, 8, 4, args.warmup + args.steps, plugin="dpo",
                                   runtime={"device": args.device,
                                            "precision": "bf16-mixed" if args.device == "cuda" else "fp32"},
                                   module={"loss": ["sigmoid"], "beta": 0.1, "loss_agg": "pair",
                                           "precompute_reference": False, "concatenated": concatenated})
        runs[concatenated] = runner.run_ptrain(name, config, args.warmup)
    return [row("DPO pairs/s: one forward of both sides vs two", runs[True]["units_per_s"], "pairs/s",
                runs[False]["units_per_s"])]


def grpo_figure(args):
    stdout, _ = runner.run_bench("bench_grpo_step", [2, runner.THREADS, args.device], "gpu_grpo_step")
    result = runner.last_json_line(stdout)
    return [row("GRPO rollout tokens/s (64 seqs, 24 new): KV cache + device sampling vs recompute",
                result["rollout_tokens_per_s_kv_cache"], "tokens/s", result["rollout_tokens_per_s_recompute"])]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (the figures) or cpu (with --smoke)")
    parser.add_argument("--smoke", action="store_true", help="toy sizes: checks the script, measures nothing")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()

    start = time.perf_counter()
    facts = torch_facts(args.device)
    length = 2048 if not args.smoke else 128
    data = figures.make_data(f"gpu_fixed_{length}", "fixed", "--length", str(length), "--count",
                             str(16 * (args.warmup + args.steps)))
    longtail = figures.make_data(f"gpu_longtail_{length}", "longtail", "--max-length", str(length),
                                 "--median", str(length // 8), "--count", str(16 * (args.warmup + args.steps)))
    rows, failures = [], []
    for name, produce in (("SFT", lambda: sft_figures(args, facts, data, longtail)),
                          ("DPO", lambda: dpo_figure(args, longtail)), ("GRPO", lambda: grpo_figure(args))):
        print(f"[gpu bench] {name} ...", flush=True)
        try:
            rows += produce()
        except Exception as error:  # one broken figure must not hide the others
            traceback.print_exc()
            failures.append({"name": name, "value": None, "unit": "", "baseline": None, "ratio": None,
                             "note": f"FAILED: {error}"})
    keys = ("name", "value", "unit", "baseline", "ratio")
    result = {"device": facts["device_name"], "torch": facts["torch"], "cuda": facts["cuda"],
              "date": time.strftime("%Y-%m-%d %H:%M"), "host": platform.node(),
              "command": " ".join(sys.argv), "suite_s": round(time.perf_counter() - start),
              "rows": [{k: r[k] for k in keys} for r in rows + failures]}
    path = ROOT / "bench" / "results_gpu.json" if not args.smoke else OUT / "results_gpu_smoke.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    def number(value, spec):
        return "-" if value is None else format(value, spec)
    for r in rows + failures:
        print(f"{r['name']:<86} {number(r['value'], '.4g'):>10} {number(r['baseline'], '.4g'):>10} "
              f"{number(r.get('ratio'), '.2f'):>6} {r['unit']} {r.get('note', '')}")
    print(f"[gpu bench] wrote {path}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
