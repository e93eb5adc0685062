#!/usr/bin/env bash
# Regenerates docs/config.md from the schemas (`ptrain schema`); a test fails
# when the committed file and the schemas disagree.
set -euo pipefail
cd "$(dirname "$0")/.."
ptrain="${PTRAIN_BUILD_DIR:-build}/bin/ptrain"
plugins=(sft dpo grpo kto)
args=()
for plugin in "${plugins[@]}"; do args+=(--plugin "$plugin"); done
{
  cat <<'HEAD'
# Config reference

A run is one TOML file (see `configs/*.toml`, whose comments explain a working
setup). Every key below is checked when the config loads: an unknown key (with
a did-you-mean), a wrong type, a value out of range or not among the allowed
ones, or two keys that contradict each other is an error naming the file, the
line and the key. Any key can be overridden on the command line with
`--set section.key=value` (the value is read as TOML, or as a string when it
does not parse). A list key takes a TOML array (`loss = ["sigmoid", "sft"]`,
`--set 'module.loss_weights=[1, 0.2]'`), every element checked; a single value
is a one-element list. The resolved config, with every default written out, is saved
as `<output_dir>/config.toml` and trains again as it is.

Relative paths are taken from the working directory. `ptrain validate -c FILE`
checks a config, its plugin, its dataset and its model without training.

This page is generated from the schemas themselves by `scripts/make_config_doc.sh`.

HEAD
  echo "<!-- generated: ptrain schema ${args[*]} -->"
  echo
  "$ptrain" schema "${args[@]}"
} > docs/config.md
echo "wrote docs/config.md"
