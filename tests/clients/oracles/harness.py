"""What every client check shares: ptrain's executables, a scratch directory,
and the comparisons a check records.

A check is a function `check(session)`: it makes its inputs, runs ptrain
(its executables, never a Python re-implementation) and the client library on
them, and records each comparison with `session.compare`. The session fails
the check at the end if any comparison is over its tolerance.
"""
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file

from .toml_config import toml_text

ROOT = Path(__file__).resolve().parents[3]
# float32 on both sides; relative to the largest |logit| (docs/clients.md)
LOGIT_TOLERANCE = 1e-4


class CheckFailed(AssertionError):
    pass


@dataclass
class Comparison:
    name: str
    difference: float
    tolerance: float
    detail: str = ""

    @property
    def passed(self):
        return self.difference <= self.tolerance

    def as_json(self):
        return {"name": self.name, "max_difference": self.difference, "tolerance": self.tolerance,
                "passed": self.passed, "detail": self.detail}


def relative_difference(ours, theirs):
    """max |ours − theirs| / max |theirs|, in float64."""
    ours, theirs = ours.double(), theirs.double()
    return ((ours - theirs).abs().max() / theirs.abs().max().clamp(min=1e-30)).item()


class Session:
    """One check's run: where ptrain is built, the device, a scratch directory."""

    def __init__(self, build_dir, device, work_dir):
        self.build_dir = Path(build_dir).resolve()
        self.device = device
        self.work = Path(work_dir)
        self.comparisons = []

    def executable(self, name):
        path = self.build_dir / "bin" / name
        if not path.exists():
            raise CheckFailed(f"{path} does not exist: build it first (scripts/build.sh --target {name})")
        return path

    def run(self, command, stdin=None):
        """Runs a command; its stdout, or CheckFailed with its stderr."""
        done = self.run_status(command, stdin)
        if done.returncode != 0:
            raise CheckFailed(f"{Path(str(command[0])).name} exited with {done.returncode}:\n{done.stderr[-4000:]}")
        return done.stdout

    def run_status(self, command, stdin=None):
        """Runs a command; its subprocess.CompletedProcess, whatever its exit status."""
        command = [str(part) for part in command]
        start = time.monotonic()
        done = subprocess.run(command, input=stdin, text=True, capture_output=True)
        shown = " ".join(part if len(part) < 200 else part[:200] + "…" for part in command)
        print(f"+ {shown}  ({time.monotonic() - start:.1f} s)", flush=True)
        return done

    def train(self, name, config):
        """`ptrain train` on config (a dict of TOML sections) in work/<name>; returns the run directory."""
        run_dir = self.work / name
        config = {"plugin": "sft", "seed": 0, "output_dir": str(run_dir), **config}
        config.setdefault("runtime", {}).setdefault("device", self.device)
        path = self.work / f"{name}.toml"
        path.write_text(toml_text(config))
        self.run([self.executable("ptrain"), "train", "-c", path, "--overwrite"])
        return run_dir

    def ptrain_logits(self, model_dir, ids):
        """The float32 logits ptrain computes from a model directory (ptrain_dump_logits). [rows, T, vocab]"""
        out = self.work / "ptrain_logits.safetensors"
        rows = ";".join(",".join(str(i) for i in row) for row in ids)
        self.run([self.executable("ptrain_dump_logits"), model_dir, rows, out, self.device])
        return load_file(out)["logits"]

    def compare(self, name, difference, tolerance, detail=""):
        comparison = Comparison(name, float(difference), tolerance, detail)
        self.comparisons.append(comparison)
        status = "ok  " if comparison.passed else "FAIL"
        print(f"{status} {name}: {comparison.difference:.3g} (tolerance {tolerance:g}) {detail}", flush=True)
        return comparison

    def compare_logits(self, name, ours, theirs):
        self.compare(name, relative_difference(ours, theirs), LOGIT_TOLERANCE, f"{list(ours.shape)}")

    @staticmethod
    def require_difference(what, a, b, least=1e-3):
        """Fails the check unless a and b differ: equal logits compared with a model that does not change them
        would prove nothing."""
        difference = relative_difference(a, b)
        if difference < least:
            raise CheckFailed(f"{what} does not change the logits (relative difference {difference:.3g} < "
                              f"{least:g}): the comparison would prove nothing")

    def finish(self):
        failed = [c.name for c in self.comparisons if not c.passed]
        if not self.comparisons:
            raise CheckFailed("the check compared nothing")
        if failed:
            raise CheckFailed(f"{len(failed)} of {len(self.comparisons)} comparisons failed: " + "; ".join(failed))


def sample_ids(vocab_size, rows=2, length=40, seed=0):
    """Random token ids; 40 positions pass the families' sliding window (16) and llama3's original length (16)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (rows, length), generator=generator).tolist()
