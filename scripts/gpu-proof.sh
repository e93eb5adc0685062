#!/usr/bin/env bash
# The GPU proof in one command, for a bare GPU machine (PyTorch with CUDA, a
# compiler, CMake, ninja, nvcc; the checkout with .gpu-deps/ from
# scripts/gpu-deps.sh), within 9 minutes:
#
#   scripts/gpu-proof.sh all [--device cuda|cpu] [--quick]
#   scripts/gpu-proof.sh PHASE... [--device cuda|cpu] [--quick]
#
# Phases (`all` runs every one; test runs beside train, nccl and parity,
# and bench runs last, alone on the machine):
#   build   scripts/build-gpu.sh: what the phases below run first (every
#           target when phases run alone)
#   test    (under `all`: the tests' build, then) the ctest suite but the
#           clients label; runtime.device = "auto" resolves to the GPU
#   train   configs/sft.toml, then configs/dpo.toml and configs/grpo.toml from
#           its model, in fp32 and bf16-mixed, compared with the figures the
#           README and docs report (bench/proof_figures.py)
#   nccl    a one-rank `ptrain launch` run whose process group is NCCL's
#   parity  bench/hf_parity.py: transformers (and PEFT, TRL where this
#           Python has them) against ptrain on the device
#   bench   bench/gpu_suite.py: bench/results_gpu.json
#
# Each phase has a hard time budget (seconds; PTRAIN_PROOF_<PHASE>_S
# overrides it, PTRAIN_PROOF_TOTAL_S the whole); a failing or late phase is
# recorded and the next one still runs. $OUT (default ./gpu-proof) receives
# at most five files: results_gpu_proof.json (every phase's exit status and
# seconds, ctest's counts, the training figures), summary.txt (the table
# printed last), logs.tgz (every log), results_gpu.json (the bench) and
# results_hf_parity.json. --device cpu hides the GPUs and runs every phase on
# the CPU (the bench with --smoke); --quick shortens the training runs to a
# tenth (their figures are then not compared). Work files go to
# build-gpu/proof/. Environment: PYTHON (as for scripts/build-gpu.sh),
# PTRAIN_JOBS, PTRAIN_PROOF_CTEST_ARGS (extra ctest arguments, e.g. -L device),
# PTRAIN_PROOF_PARITY_ARGS (extra bench/hf_parity.py arguments, e.g. --only 'chat_template_*').
set -uo pipefail
command_line="$0 $*"
out="$(mkdir -p "${OUT:-$(dirname "$0")/../gpu-proof}" && cd "${OUT:-$(dirname "$0")/../gpu-proof}" && pwd)"
cd "$(dirname "$0")/.."
checkout="$PWD"
self="$checkout/scripts/gpu-proof.sh"
export PTRAIN_BUILD_DIR="${PTRAIN_BUILD_DIR:-build-gpu}"
work="$checkout/$PTRAIN_BUILD_DIR/proof"
logs="$work/logs"
device=cuda quick=0 phases=() run_only="" all_lanes="${PTRAIN_PROOF_ALL:-0}"
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device="$2"; shift ;;
    --device=*) device="${1#*=}" ;;
    --quick) quick=1 ;;
    --run) run_only="$2"; shift ;;  # one phase, as run_recorded starts it under its budget
    all | build | test | train | nccl | parity | bench) phases+=("$1") ;;
    *) echo "gpu-proof: unknown argument '$1' (all, build, test, train, nccl, parity, bench, --device, --quick)" >&2; exit 2 ;;
  esac
  shift
done
[ ${#phases[@]} -gt 0 ] || [ -n "$run_only" ] ||
  { echo "usage: scripts/gpu-proof.sh all|PHASE... [--device cuda|cpu] [--quick]" >&2; exit 2; }
case "$device" in cuda) ;; cpu) export CUDA_VISIBLE_DEVICES= ;; *) echo "gpu-proof: --device is cuda or cpu" >&2; exit 2 ;; esac

start_time=$(date +%s)
total_budget="${PTRAIN_PROOF_TOTAL_S:-540}"
elapsed() { echo $(($(date +%s) - start_time)); }
jobs="${PTRAIN_JOBS:-$(nproc)}"
python="$(scripts/build-gpu.sh --print-python)" || exit 1
# That machine's Python has PyTorch and transformers (no .venv: nothing
# outside the machine is reachable there); the tests and benches use it.
export PYTHON="$python" PTRAIN_PYTHON="$python" PTRAIN_BENCH_PYTHON="$python" PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH="$(scripts/build-gpu.sh --print-library-path)"
bin="$checkout/$PTRAIN_BUILD_DIR/bin"
# The tests labelled clients need TRL and PEFT (the checkout's .venv); the
# parity phase runs their checks on the device with what this Python has.
# Those labelled docs run the README's install commands, which need a package
# registry the GPU machines lack.
# ${PTRAIN_PROOF_CTEST_ARGS} is a list of ctest arguments.
# shellcheck disable=SC2206
ctest_selection=(--label-exclude 'clients|docs' ${PTRAIN_PROOF_CTEST_ARGS:-})

budget_of() {  # <phase>: its seconds, from PTRAIN_PROOF_<PHASE>_S or the default
  local default variable="PTRAIN_PROOF_${1^^}_S"
  case "$1" in build) default=150 ;; test) default=240 ;; train) default=150 ;; nccl) default=25 ;;
    parity) default=60 ;; bench) default=$((total_budget - $(elapsed) - 5)) ;; esac
  echo "${!variable:-$default}"
}

# ---- the phases (each runs as `scripts/gpu-proof.sh --run PHASE`, under timeout) ----

train_job() {  # <precision> <job>: one bundled config on the device into $work/runs/<precision>/<job>
  local precision="$1" job="$2" steps=() init=()
  local dir="$work/runs/$precision/$job"
  if [ "$quick" = 1 ]; then
    case "$job" in sft) steps=(--set train.max_steps=30) ;; dpo) steps=(--set train.max_steps=12) ;;
      grpo) steps=(--set train.max_steps=10) ;; esac
  fi
  [ "$job" = sft ] || init=(--set "model.init=\"$work/runs/$precision/sft/final\"")
  echo "== $job, $precision, $device"
  "$bin/ptrain" train -c "configs/$job.toml" --overwrite --set "output_dir=\"$dir\"" --set "runtime.device=\"$device\"" \
    --set "runtime.precision=\"$precision\"" "${init[@]}" "${steps[@]}"
}

# What train, nccl, parity and bench run: built first, so that they run even
# when the tests' build is cut short.
proof_targets=(ptrain ptrain_plugin_sft ptrain_plugin_dpo ptrain_plugin_grpo ptrain_dump_logits ptrain_loss_oracle
  bench_sft_step bench_grpo_step bench_accumulation bench_log_prob_memory bench_matmul_peak)

run_phase() {
  case "$1" in
    # -k 0: one file that fails to compile leaves the rest of the suite to build and run.
    build)
      scripts/build-gpu.sh --target "${proof_targets[@]}" -- -k 0 || return
      [ "$all_lanes" = 1 ] || scripts/build-gpu.sh -- -k 0 ;;
    test)
      local deadline=$(($(date +%s) + $(budget_of test) - 15))
      # Under `all` the tests build here, beside the training runs (two cores left to those).
      if [ "$all_lanes" = 1 ]; then
        PTRAIN_JOBS=$((jobs > 4 ? jobs - 2 : jobs)) scripts/build-gpu.sh -- -k 0 ||
          echo "gpu-proof: the build failed; ctest runs what was built"
      fi
      echo "ctest: $("$python" -c 'import torch; print("CUDA" if torch.cuda.is_available() else "no GPU:")') runtime.device = \"auto\""
      # The checks of the model's CUDA kernels first (core/model/*.cu and the
      # fused RMSNorm it calls): only a GPU runs them there, and the whole
      # suite may not fit the phase's budget. Then the rest, each test once.
      local own_kernels='^fused |SwiGLU|swiglu|fused bf16 MLP' status=0
      ctest_run() {
        ctest --test-dir "$PTRAIN_BUILD_DIR" -j "$((jobs * 3 / 4 > 0 ? jobs * 3 / 4 : 1))" --timeout 120 \
          --stop-time "$(date -d "@$deadline" +%H:%M:%S)" --output-on-failure "${ctest_selection[@]}" "$@"
      }
      ctest_run -R "$own_kernels" || status=$?
      ctest_run -E "$own_kernels" || status=$?
      return $status ;;
    train)
      local status=0 precision job
      for precision in fp32 bf16-mixed; do
        for job in sft dpo grpo; do train_job "$precision" "$job" || status=1; done
      done
      "$python" bench/proof_figures.py "$work/runs" --json "$work/figures.json" || [ "$quick" = 1 ] || status=1
      return $status ;;
    nccl)
      # PTRAIN_TEST_PROCESS_GROUP: one rank still builds its process group,
      # NCCL's on a GPU (Gloo's on the CPU); NCCL's own log shows it ran.
      NCCL_DEBUG=INFO PTRAIN_TEST_PROCESS_GROUP=1 "$bin/ptrain" launch --nproc 1 -- train -c configs/sft.toml \
        --overwrite --set "output_dir=\"$work/runs/nccl\"" --set "runtime.device=\"$device\"" --set train.max_steps=40 \
        2>&1 | tee "$work/nccl.txt"
      [ "${PIPESTATUS[0]}" = 0 ] || return 1
      [ "$device" = cpu ] || grep -q "NCCL INFO" "$work/nccl.txt" || { echo "gpu-proof: NCCL printed nothing" >&2; return 1; } ;;
    parity)
      # The checks of a package this Python lacks are left out, by name in the
      # log and in results_hf_parity.json ("skipped"); TRL's take no device and run in CI.
      local skip=() package pattern
      for package in trl:'trl_*' peft:'*peft*'; do
        pattern="${package#*:}" package="${package%%:*}"
        "$python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$package') is None)" ||
          { echo "parity: no $package in $python: leaving out $pattern"; skip+=(--skip "$pattern"); }
      done
      # shellcheck disable=SC2086  # a list of hf_parity.py arguments
      "$python" bench/hf_parity.py --device "$device" "${skip[@]}" ${PTRAIN_PROOF_PARITY_ARGS:-} &&
        cp bench/results_hf_parity.json "$out/" ;;
    bench)
      if [ "$device" = cpu ]; then
        (cd bench && "$python" gpu_suite.py --smoke --device cpu) && cp bench/out/results_gpu_smoke.json "$out/"
      else
        # shellcheck disable=SC2086
        (cd bench && "$python" gpu_suite.py ${PTRAIN_PROOF_BENCH_ARGS:---warmup 1 --steps 3}) && cp bench/results_gpu.json "$out/"
      fi ;;
  esac
}
if [ -n "$run_only" ]; then
  run_phase "$run_only"
  exit
fi

# ---- the record ----

ctest_counts() {  # from the test log: passed failed total
  local log="$logs/test.log" total
  total=$(ctest --test-dir "$PTRAIN_BUILD_DIR" -N "${ctest_selection[@]}" 2>/dev/null | sed -n 's/^Total Tests: //p')
  echo "$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed ' "$log")" \
    "$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*(\*\*\*|Failed|Not Run|Timeout|Exception)' "$log")" "${total:-0}"
}

record() {  # <phase> <exit> <seconds> <budget>: one line of $work/phases.jsonl
  local extra=""
  if [ "$1" = test ]; then
    read -r passed failed total < <(ctest_counts)
    local failed_names
    failed_names=$(sed -nE 's/^[[:space:]]*[0-9]+ - (.*) \((.*)\)$/\1 (\2)/p' "$logs/test.log" | head -40 |
      "$python" -c 'import json,sys; print(json.dumps([l.rstrip("\n") for l in sys.stdin]))')
    extra=", \"passed\": $passed, \"failed\": $failed, \"not_run\": $((total - passed - failed)), \"total\": $total, \"failed_tests\": $failed_names"
  fi
  if [ "$1" = train ] && [ ! -f "$work/figures.json" ]; then
    # The phase stopped before its comparison (over budget): compare what it ran.
    "$python" bench/proof_figures.py "$work/runs" --json "$work/figures.json" >>"$logs/train.log" 2>&1
  fi
  if [ "$1" = train ] && [ -f "$work/figures.json" ]; then
    # One line: phases.jsonl holds a phase a line.
    extra=", \"figures\": $("$python" -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))))' "$work/figures.json")"
  fi
  echo "{\"name\": \"$1\", \"exit\": $2, \"seconds\": $3, \"budget_s\": $4$extra}" >>"$work/phases.jsonl"
}

write_results() {  # results_gpu_proof.json, summary.txt and logs.tgz, from what has run so far
  "$python" - "$work/phases.jsonl" "$out" "$device" "$(elapsed)" "$command_line" <<'PY'
import json, platform, sys, time
from pathlib import Path
phases_path, out, device, total_s, command = sys.argv[1:]
phases = [json.loads(l) for l in Path(phases_path).read_text().splitlines() if l.strip()]
facts = {"device": "cpu", "torch": None, "cuda": None}
try:
    import torch
    facts = {"device": torch.cuda.get_device_name(0) if device == "cuda" and torch.cuda.is_available() else "cpu",
             "torch": torch.__version__, "cuda": torch.version.cuda}
except Exception as error:  # the record must be written whatever broke
    facts["error"] = str(error)
result = dict(facts, date=time.strftime("%Y-%m-%d %H:%M"), host=platform.node(), command=command,
              total_s=int(total_s), phases=phases)
Path(out, "results_gpu_proof.json").write_text(json.dumps(result, indent=1) + "\n")
lines = [f"{'phase':7} {'exit':>4} {'s':>5} {'budget':>6}  notes"]
for p in phases:
    note = ""
    if p["name"] == "test" and "total" in p:
        note = f"{p['passed']} passed, {p['failed']} failed, {p['not_run']} not run of {p['total']}"
    if p["name"] == "train" and "figures" in p:
        ok = sum(f["ok"] for f in p["figures"])
        note = f"{ok} of {len(p['figures'])} figures in the documented range"
    if p["exit"] == 124:
        note = ("over budget; " + note).rstrip("; ")
    lines.append(f"{p['name']:7} {p['exit']:>4} {p['seconds']:>5} {p['budget_s']:>6}  {note}")
lines.append(f"total {total_s} s on {facts['device']}, torch {facts['torch']}, CUDA {facts['cuda']}")
Path(out, "summary.txt").write_text("\n".join(lines) + "\n")
PY
  (cd "$work" && tar czf "$out/logs.tgz" logs $(find runs -name metrics.jsonl 2>/dev/null)) || true
}

run_recorded() {  # <phase>: runs it under its budget, logs to $logs/<phase>.log, records it
  local phase="$1" budget phase_start status
  budget=$(budget_of "$phase")
  if [ "$budget" -lt 5 ]; then budget=5; fi
  phase_start=$(date +%s)
  timeout --kill-after=10 "$budget" "$self" --run "$phase" --device "$device" $([ "$quick" = 1 ] && echo --quick) \
    >"$logs/$phase.log" 2>&1
  status=$?
  if [ "$phase" = test ]; then cp "$PTRAIN_BUILD_DIR/Testing/Temporary/LastTest.log" "$logs/ctest_LastTest.log" 2>/dev/null; fi
  record "$phase" "$status" $(($(date +%s) - phase_start)) "$budget"
  echo "[gpu-proof $(elapsed)s] $phase: exit $status in $(($(date +%s) - phase_start)) s (budget $budget s)"
}

# ---- the run ----

rm -rf "$logs" "$work/phases.jsonl" "$work/figures.json"
mkdir -p "$logs"
{
  nvidia-smi 2>&1 || echo "nvidia-smi: none"
  echo "nproc $(nproc); $("${CXX:-g++}" --version | head -1); $(cmake --version | head -1); ninja $(ninja --version)"
  "$python" -c 'import sys, torch; print(sys.executable, sys.version.split()[0], "torch", torch.__version__, "CUDA", torch.version.cuda, "GPU", torch.cuda.is_available())'
} >"$logs/env.txt" 2>&1
if [ "${phases[*]}" = all ]; then
  export PTRAIN_PROOF_ALL=1
  run_recorded build
  write_results
  # The suite beside the correctness runs (both only need the device to
  # compute right); the bench afterwards, alone, for its timings.
  run_recorded test &
  test_lane=$!
  for phase in train nccl parity; do
    run_recorded "$phase"
    write_results
  done
  wait "$test_lane"
  run_recorded bench
else
  for phase in "${phases[@]}"; do
    [ "$phase" != all ] || { echo "gpu-proof: 'all' runs alone" >&2; exit 2; }
    run_recorded "$phase"
    write_results
  done
fi
write_results
echo "[gpu-proof] $out: $(cd "$out" && ls | tr '\n' ' ')"
cat "$out/summary.txt"
