#!/usr/bin/env bash
# The browser test: trains two small SFT runs (one evaluated on held-out
# data) and a DPO run, writes one report comparing them, and checks it in
# headless Debian Chromium (check_report.py, through the playwright of the
# project's Python environment).
#   report_in_chromium.sh PTRAIN_EXE SOURCE_DIR OUT_DIR PYTHON
set -euo pipefail
ptrain=$1 source_dir=$2 out_dir=$3 python=$4
here="$(cd "$(dirname "$0")" && pwd)"
[ -x /usr/bin/chromium ] || { echo "report_in_chromium: /usr/bin/chromium is missing (run scripts/install-deps.sh --test)"; exit 1; }
"$python" -c "import playwright" 2>/dev/null ||
  { echo "report_in_chromium: $python has no playwright (the project's Python environment, .venv)"; exit 1; }

rm -rf "$out_dir"
mkdir -p "$out_dir"
model='[model]
vocab_size = 259
hidden_size = 32
intermediate_size = 64
num_layers = 1
num_heads = 2
num_kv_heads = 1
max_position_embeddings = 48
[runtime]
threads = 1'
train() {  # name plugin data lr steps [extra TOML]
  cat >"$out_dir/$1.toml" <<TOML
plugin = "$2"
seed = 3
output_dir = "$out_dir/$1"
[data]
train = "$source_dir/data/$3/train.jsonl"
max_length = 32
[batch]
global_size = 8
[optim]
lr = $4
[train]
max_steps = $5
log_every = 10
$model
${6:-}
TOML
  "$ptrain" train -c "$out_dir/$1.toml" >"$out_dir/$1.log" 2>&1 || { cat "$out_dir/$1.log"; exit 1; }
}
# The first run also evaluates on held-out lines: its eval/loss shares the loss chart.
tail -n 40 "$source_dir/data/arith/train.jsonl" >"$out_dir/held_out.jsonl"
train sft_lr3e-3 sft arith 3e-3 30 "[eval]
data = \"$out_dir/held_out.jsonl\"
every_steps = 5"
train sft_lr1e-3 sft arith 1e-3 20
train dpo dpo arith_prefs 1e-3 10 '[module]
precompute_reference = true'
grep -q "dpo: reference log-probs (this rank's pairs): 512/512" "$out_dir/dpo.log" ||
  { cat "$out_dir/dpo.log"; echo "report_in_chromium: no progress line for the DPO reference precompute"; exit 1; }

"$ptrain" report "$out_dir/sft_lr3e-3" "$out_dir/sft_lr1e-3" "$out_dir/dpo" -o "$out_dir/report.html"
"$python" "$here/check_report.py" "$out_dir/report.html" "$out_dir/report.png" \
  "$out_dir/sft_lr3e-3" "$out_dir/sft_lr1e-3" "$out_dir/dpo"
