"""The docs test: README.md and docs/*.md against the code and its runs.

    .venv/bin/python tests/docs/run_docs_test.py static  --build-dir build
    .venv/bin/python tests/docs/run_docs_test.py session --build-dir build [--figure-runs] [--write-figures] [--update-docs] [--keep]

`static` checks, without running anything but `ptrain --help`/`schema` and
scripts' --help: every block parses, and every config key, flag, build target,
checkout path and link the docs name exists. `session` runs the command blocks
in a scratch copy of the checkout in the order a reader meets them (README.md,
then docs/*.md by name), checks what each promises (exit status, printed
output, sample output, files it must leave as committed), then every figure
the docs quote against the runs (tests/docs/figures.toml). Blocks marked
`skip=minutes figure-runs` run only with --figure-runs; --write-figures then
records the figures in tests/docs/figures.json. ctest runs both (label
`docs`); the marks a block may carry: tests/docs/docs_test/blocks.py.
"""
import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_test.blocks import DocError, read_docs  # noqa: E402
from docs_test.references import References  # noqa: E402
from docs_test.static_checks import StaticChecks  # noqa: E402

SOURCE_DIR = Path(__file__).resolve().parents[2]


def report(failures, what):
    for failure in failures:
        print(f"FAILED {failure}")
    print(f"{what}: {'passed' if not failures else f'{len(failures)} failure(s)'}")
    return 1 if failures else 0


def static(args, refs):
    docs = read_docs(args.source_dir)
    return report(StaticChecks(refs, docs).run(), "docs static checks")


def session(args, refs):
    from docs_test.session import run_session
    return report(run_session(args, refs), "docs session")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["static", "session"])
    parser.add_argument("--source-dir", type=Path, default=SOURCE_DIR)
    parser.add_argument("--build-dir", type=Path, default=SOURCE_DIR / "build")
    parser.add_argument("--python", default=sys.executable, help="the Python of the blocks (the project's .venv)")
    parser.add_argument("--figure-runs", action="store_true",
                        help="also run the blocks marked skip=minutes and figure-runs (whose runs give quoted figures)")
    parser.add_argument("--write-figures", action="store_true",
                        help="write the figures of this session to tests/docs/figures.json")
    parser.add_argument("--update-docs", action="store_true",
                        help="rewrite the figures the docs quote (tests/docs/figures.toml) to this session's values")
    parser.add_argument("--keep", action="store_true", help="keep the scratch checkout")
    args = parser.parse_args()
    args.source_dir = args.source_dir.resolve()
    args.build_dir = args.build_dir.resolve()
    refs = References(args.source_dir, args.build_dir, args.python)
    try:
        return static(args, refs) if args.mode == "static" else session(args, refs)
    except DocError as error:
        return report([str(error)], f"docs {args.mode}")


if __name__ == "__main__":
    sys.exit(main())
