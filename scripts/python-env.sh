#!/usr/bin/env bash
# Creates the project's Python environment, .venv (git-ignored), from
# requirements.txt with Debian's /usr/bin/python3, or brings it up to date
# after requirements.txt changed; when it is current this takes a moment (a
# stamp holds the hash of the requirements it was made from). About 5 GB
# (PyTorch with its CUDA libraries), downloaded from PyPI the first time.
#
#   scripts/python-env.sh          then: .venv/bin/python
#
# scripts/test.sh runs it; the tests and benchmarks run their Python from it
# (CMake's PTRAIN_PYTHON, the benchmarks' PTRAIN_PYTHON), never the python3
# first on the PATH. Needs python3-venv (scripts/install-deps.sh --test).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
stamp="$venv/ptrain-requirements.sha256"
wanted="$(sha256sum requirements.txt | cut -d' ' -f1)"
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$wanted" ]; then
  echo "[python-env] $venv is up to date with requirements.txt"
  exit 0
fi
if [ ! -x "$venv/bin/python" ]; then
  # A broken environment (e.g. made by another system's Python) is remade.
  [ ! -e "$venv" ] || [ -f "$venv/pyvenv.cfg" ] ||
    { echo "[python-env] $venv exists but is no virtual environment; move it away" >&2; exit 1; }
  echo "[python-env] creating $venv with /usr/bin/python3"
  /usr/bin/python3 -m venv --clear "$venv"
fi
echo "[python-env] installing requirements.txt into $venv"
rm -f "$stamp"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r requirements.txt
"$venv/bin/python" -m pip check --disable-pip-version-check
echo "$wanted" >"$stamp"
echo "[python-env] $venv is up to date with requirements.txt"
