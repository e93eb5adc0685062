"""Runs client checks (tests/clients/oracles) by name; ctest runs one per test.

    .venv/bin/python tests/clients/run_check.py NAME... [--build-dir build] [--device cpu]
    .venv/bin/python tests/clients/run_check.py --list
    .venv/bin/python tests/clients/run_check.py --expect NAME...   # ctest's list is the registry's

Hermetic: no network (HF_HUB_OFFLINE), and the libraries' caches live in the
run's scratch directory (one folder per check), deleted at the end unless
--keep or a check failed (its folder stays, for a look).
"""
import argparse
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import oracles  # noqa: E402


def offline_environment(scratch):
    """Before the libraries load: nothing from the network, no cache outside `scratch`."""
    os.environ.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                       "HF_HOME": str(scratch / "hf_home"), "TOKENIZERS_PARALLELISM": "false",
                       "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
                       "HF_DATASETS_DISABLE_PROGRESS_BARS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"})


def run_check(name, session):
    """Runs one check; None, or why it failed."""
    from oracles.harness import CheckFailed

    try:
        oracles.load_check(name)(session)
        session.finish()
    except CheckFailed as failure:
        return str(failure)
    except Exception:  # a library or the check itself broke: the test fails with the traceback
        traceback.print_exc()
        return "the check raised (traceback above)"
    return None


def run_checks(names, build_dir, device, keep=False):
    """Runs each named check in a folder of its own; returns {name: (comparisons, error or None)}."""
    scratch = Path(tempfile.mkdtemp(prefix="ptrain_clients_"))
    offline_environment(scratch)
    import torch
    from oracles.harness import Session

    # ptrain computes in true float32 on a GPU; so does transformers here.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    outcomes = {}
    for name in names:
        work = scratch / name
        work.mkdir()
        session = Session(build_dir, device, work)
        start = time.monotonic()
        print(f"== {name}", flush=True)
        error = run_check(name, session)
        print(f"== {name}: {'passed' if error is None else 'FAILED: ' + error} "
              f"in {time.monotonic() - start:.1f} s", flush=True)
        if error is None and not keep:
            shutil.rmtree(work)
        else:
            print(f"   its files: {work}")
        outcomes[name] = (session.comparisons, error)
    if not keep and all(error is None for _, error in outcomes.values()):
        shutil.rmtree(scratch)
    return outcomes


def registry_agrees(ctest_names):
    """Whether ctest runs exactly the registered checks, and those cover every bundled tokenizer with a
    chat template; prints what differs."""
    missing, unknown = set(oracles.CHECKS) - set(ctest_names), set(ctest_names) - set(oracles.CHECKS)
    for name in sorted(missing):
        print(f"check '{name}' is registered but has no ctest test: add it to tests/clients/CMakeLists.txt")
    for name in sorted(unknown):
        print(f"ctest names check '{name}', which tests/clients/oracles does not register")
    with_template = oracles.bundled_tokenizers_with_template()
    if sorted(with_template) != sorted(oracles.TEMPLATE_TOKENIZERS):
        print(f"the bundled tokenizers with a chat template are {with_template}, the checks cover "
              f"{list(oracles.TEMPLATE_TOKENIZERS)}: update TEMPLATE_TOKENIZERS in tests/clients/oracles")
    return not missing and not unknown and sorted(with_template) == sorted(oracles.TEMPLATE_TOKENIZERS)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="check names (--list shows them)")
    parser.add_argument("--list", action="store_true", help="print the check names and exit")
    parser.add_argument("--expect", action="store_true",
                        help="only check that NAME... are exactly the registered checks (tests/clients/CMakeLists.txt)")
    parser.add_argument("--build-dir", default=os.environ.get("PTRAIN_BUILD_DIR", "build"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directories")
    args = parser.parse_args()
    if args.list:
        print("\n".join(oracles.CHECKS))
        return 0
    if args.expect:
        return 0 if registry_agrees(args.names) else 1
    if not args.names:
        parser.error("name at least one check (--list shows them)")
    outcomes = run_checks(args.names, args.build_dir, args.device, args.keep)
    return 0 if all(error is None for _, error in outcomes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
