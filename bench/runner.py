"""Running the benchmarks' processes: ptrain jobs from generated configs, the
PyTorch reference, the C++ bench binaries; each with its own peak RSS.

Every measurement runs in a fresh process, so one figure's memory or thread
pool state never leaks into the next one's, and os.wait4 gives each process's
own peak RSS (getrusage of that child alone).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "clients"))
from oracles.toml_config import toml_text  # noqa: E402  (the client checks write their configs alike)

BUILD = Path(os.environ.get("PTRAIN_BUILD_DIR", ROOT / "build"))
if not BUILD.is_absolute():
    BUILD = ROOT / BUILD
OUT = ROOT / "bench" / "out"
# The project's Python environment (scripts/python-env.sh), never the python3
# first on the PATH; on a GPU machine, that machine's PyTorch (PTRAIN_PYTHON).
PYTHON = os.environ.get("PTRAIN_PYTHON", str(ROOT / ".venv" / "bin" / "python"))
THREADS = int(os.environ.get("PTRAIN_BENCH_THREADS", "2"))
# time.monotonic() after which run_process stops the process it waits on
# (None: no limit); bench/gpu_suite.py sets it for each of its rows.
DEADLINE = None


class RunFailed(RuntimeError):
    """A process exited non-zero; carries the tail of its stderr."""

    def __init__(self, command, status, stderr):
        tail = stderr.strip().splitlines()[-3:]
        super().__init__(f"{Path(command[0]).name} exited with {status}: " + " | ".join(tail))
        self.stderr = stderr


class RunTimedOut(RunFailed):
    """A process still ran at runner.DEADLINE and was stopped (with the processes it started)."""

    def __init__(self, command, seconds, stderr):
        RuntimeError.__init__(self, f"{Path(command[0]).name} stopped after {seconds:.0f} s: the row's time ran out")
        self.stderr = stderr


def stop_group(process):
    """Kills process and everything it started (its own session: ptrain launch's ranks, a Python's workers)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def wait_within_deadline(process):
    """os.wait4 of process; at DEADLINE its process group is killed. Returns (status, usage, timed_out)."""
    timer, timed_out = None, False
    if DEADLINE is not None:
        def expire():
            nonlocal timed_out
            timed_out = True
            stop_group(process)
        timer = threading.Timer(max(0.0, DEADLINE - time.monotonic()), expire)
        timer.daemon = True
        timer.start()
    try:
        _, status, usage = os.wait4(process.pid, 0)  # this child's rusage only
    except BaseException:  # interrupted (SIGTERM, Ctrl-C): leave no process behind
        stop_group(process)
        process.wait()
        raise
    finally:
        if timer:
            timer.cancel()
    return status, usage, timed_out and os.WIFSIGNALED(status)  # not a process that ended on its own just then


def run_process(command, log_name, env=None):
    """Runs command (in env, or this process's environment); returns (stdout, peak_rss_mb, wall_s).

    Output also kept in bench/out/logs/. Raises RunFailed on a non-zero exit,
    RunTimedOut when it still ran at DEADLINE."""
    logs = OUT / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with open(logs / f"{log_name}.out", "w+") as out, open(logs / f"{log_name}.err", "w+") as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, cwd=ROOT, env=env, start_new_session=True)
        status, usage, timed_out = wait_within_deadline(process)
        process.returncode = os.waitstatus_to_exitcode(status)
        wall_s = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if timed_out:
        raise RunTimedOut(command, wall_s, stderr or stdout)
    if process.returncode != 0:
        raise RunFailed(command, process.returncode, stderr or stdout)
    return stdout, usage.ru_maxrss / 1024.0, wall_s  # Linux: ru_maxrss in KiB


def last_json_line(stdout):
    """The last line of stdout that is a JSON object (the benches' result line)."""
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON result line in output")


def write_config(path, config):
    """config: {key: value | {key: value}} → a TOML file (tables after top-level keys)."""
    Path(path).write_text(toml_text(config))


def sft_config(name, model, data, max_length, global_size, micro_size, steps, **overrides):
    """A ptrain SFT config for a throughput run: constant lr, no checkpoints, THREADS threads.

    overrides: {"section": {key: value}} merged into the config (e.g. batch packing).
    """
    config = {
        "plugin": "sft",
        "seed": 0,
        "output_dir": str(OUT / "runs" / name),
        "model": dict(model),
        "tokenizer": {"kind": "bytes"},
        "data": {"train": str(data), "max_length": max_length},
        "batch": {"global_size": global_size, "micro_size": micro_size},
        "optim": {"name": "adamw", "lr": 1e-4, "weight_decay": 0.01, "clip_grad_norm": 1.0},
        "schedule": {"name": "constant", "warmup_steps": 0},
        "train": {"max_steps": steps, "log_every": 1},
        "checkpoint": {"every_steps": 0},
        "runtime": {"threads": THREADS},
    }
    for section, values in overrides.items():
        if isinstance(values, dict):
            config.setdefault(section, {}).update(values)
        else:
            config[section] = values
    return config


def run_ptrain(name, config, warmup, env=None, nproc=1):
    """Trains config with build/bin/ptrain (on nproc ranks: ptrain launch); returns the measured steps' totals.

    Steps up to `warmup` are left out (allocator growth, first-touch pages,
    tokenization). Rates are those of the fastest measured step: on a
    shared machine other processes only ever slow a step down, so the best
    step is the closest to what the code can do (timeit's reasoning).
    Returns {tokens, padded_tokens, units (sums over the measured steps),
    step_s, tokens_per_s, units_per_s (of the best step), peak_rss_mb (of the
    launcher with nproc > 1), log (rank 0's log_rank0.txt)}.
    """
    path = OUT / "configs" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_config(path, config)
    output_dir = Path(config["output_dir"])
    ptrain = [str(BUILD / "bin" / "ptrain")]
    launch = ["launch", "--nproc", str(nproc), "--"] if nproc > 1 else []
    stdout, peak_rss_mb, _ = run_process(ptrain + launch + ["train", "-c", str(path), "--overwrite"],
                                         name, env)
    rows = [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    measured = [row for row in rows if row["step"] > warmup]
    if not measured:
        raise RuntimeError(f"{name}: no step after the {warmup} warm-up steps in metrics.jsonl")
    total = {key: sum(row.get(key, 0.0) for row in measured) for key in ("tokens", "padded_tokens", "units")}
    log = (output_dir / "log_rank0.txt").read_text() if (output_dir / "log_rank0.txt").exists() else ""
    # The run directory's checkpoint and final model are not needed (and large).
    for heavy in ("checkpoints", "final", "token_cache"):
        shutil.rmtree(output_dir / heavy, ignore_errors=True)
    return {
        "tokens": total["tokens"],
        "padded_tokens": total["padded_tokens"],
        "units": total["units"],
        "step_s": min(row["step_s"] for row in measured),
        "tokens_per_s": max(row["tokens"] / row["step_s"] for row in measured),
        "units_per_s": max(row["units"] / row["step_s"] for row in measured),
        "peak_rss_mb": peak_rss_mb,
        "log": log,
    }


def run_reference(name, config, warmup, steps, env=None, extra_args=()):
    """The PyTorch-eager loop (bench/reference/sft_step.py) on the same config (in env, or this environment)."""
    path = OUT / "configs" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_config(path, config)
    command = [PYTHON, str(ROOT / "bench" / "reference" / "sft_step.py"), "-c", str(path),
               "--warmup", str(warmup), "--steps", str(steps), *extra_args]
    stdout, peak_rss_mb, _ = run_process(command, name, env)
    result = last_json_line(stdout)
    result["peak_rss_mb"] = peak_rss_mb
    return result


def compared_libraries():
    """"ptrain on LibTorch X, PyTorch eager on PyTorch Y (its BLAS)": what the suite's baselines compare."""
    ptrain = subprocess.run([str(BUILD / "bin" / "ptrain"), "--version"], capture_output=True, text=True).stdout
    libtorch = ptrain[ptrain.find("LibTorch"):].rstrip(")\n") if "LibTorch" in ptrain else "LibTorch (unknown)"
    code = "import torch; print(torch.__version__, 'on', 'MKL' if torch.backends.mkl.is_available() else 'its BLAS')"
    pytorch = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True).stdout.strip() or "(no torch)"
    return f"ptrain on {libtorch}, PyTorch eager on PyTorch {pytorch} ({PYTHON})"


def run_bench(binary, args, log_name, env=None):
    """A C++ bench binary from build/bin; returns (last JSON line or stdout, peak RSS MB)."""
    stdout, peak_rss_mb, _ = run_process([str(BUILD / "bin" / binary)] + [str(a) for a in args], log_name, env)
    return stdout, peak_rss_mb
