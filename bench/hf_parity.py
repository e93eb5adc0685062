"""Hugging Face parity on any device: the client checks of tests/clients
(ptrain next to transformers, PEFT and TRL; docs/clients.md), which ctest runs
on the CPU under the label `clients`, run here on one device with their
results written to bench/results_hf_parity.json.

Run after building (scripts/build.sh, or scripts/build-gpu.sh on a GPU
machine with PTRAIN_BUILD_DIR=build-gpu):

    .venv/bin/python bench/hf_parity.py                          # every check; CUDA when there is a GPU
    python3 bench/hf_parity.py --device cuda --skip 'trl_*'      # a machine without TRL
    .venv/bin/python bench/hf_parity.py --only 'chat_template_*'

`tests/clients/run_check.py --list` names the checks.
"""
import argparse
import fnmatch
import json
import os
import sys
from importlib import metadata
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "clients"))
import oracles  # noqa: E402
from run_check import run_checks  # noqa: E402


def versions():
    info = {"torch": torch.__version__, "cuda": torch.version.cuda}
    if torch.cuda.is_available():
        info["device_name"] = torch.cuda.get_device_name(0)
    for package in ("transformers", "peft", "trl"):
        try:
            info[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            info[package] = None
    return info


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--skip", action="append", default=[], metavar="PATTERN",
                        help="leave out the checks whose names match (fnmatch); repeatable")
    parser.add_argument("--only", action="append", default=[], metavar="PATTERN",
                        help="run only the checks whose names match (fnmatch); repeatable")
    parser.add_argument("--build-dir", default=os.environ.get("PTRAIN_BUILD_DIR", str(ROOT / "build")))
    parser.add_argument("--out", default=str(ROOT / "bench" / "results_hf_parity.json"))
    args = parser.parse_args()

    def matches(name, patterns):
        return any(fnmatch.fnmatch(name, pattern) for pattern in patterns)

    names = [name for name in oracles.CHECKS
             if (not args.only or matches(name, args.only)) and not matches(name, args.skip)]
    if not names:
        parser.error("no check left to run (tests/clients/run_check.py --list names them)")
    outcomes = run_checks(names, args.build_dir, args.device)
    checks = [{"check": name, "passed": error is None, "error": error,
               "comparisons": [comparison.as_json() for comparison in comparisons]}
              for name, (comparisons, error) in outcomes.items()]
    report = {"device": args.device, **versions(), "command": " ".join(["bench/hf_parity.py", *sys.argv[1:]]),
              "skipped": [name for name in oracles.CHECKS if name not in names], "checks": checks}
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    failed = [check["check"] for check in checks if not check["passed"]]
    print(f"wrote {args.out}: {len(checks) - len(failed)} of {len(checks)} checks passed"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
