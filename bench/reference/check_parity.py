"""Checks that bench/reference/sft_step.py computes the same model and loss as ptrain.

Trains a model briefly with ptrain, then runs `ptrain train` from it for one
step with lr = 1e-30 (no weight moves) on a dataset of exactly one global
batch of mixed lengths (so the step-1 loss covers every example, padding
included, in any order), loads the model ptrain writes into the reference
model and compares the two losses. Run after building:

    .venv/bin/python bench/reference/check_parity.py
"""
import json
import subprocess
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import runner  # noqa: E402
from reference import sft_step  # noqa: E402


def main():
    from figures import TINY  # the benchmark's tiny shape

    out = runner.OUT / "parity"
    out.mkdir(parents=True, exist_ok=True)
    data = out / "batch.jsonl"
    subprocess.run([runner.PYTHON, str(runner.ROOT / "bench" / "make_sft_data.py"), "longtail", "--count", "8",
                    "--max-length", "128", "-o", str(data)], check=True)
    # Stage 1 trains a little, so the weights are far from a near-uniform
    # initial model; stage 2 starts from them and only evaluates: lr must be
    # > 0, and at 1e-30 the step changes no fp32 weight.
    trained = runner.sft_config("parity_train", TINY, data, 128, 8, 8, 20, optim={"lr": 3e-3})
    evaluate = runner.sft_config("parity", {"init": str(out / "parity_train" / "final")}, data, 128, 8, 8, 1,
                                 optim={"lr": 1e-30})
    for name, config in (("parity_train", trained), ("parity", evaluate)):
        config["output_dir"] = str(out / name)
        runner.write_config(out / f"{name}.toml", config)
        runner.run_process([str(runner.BUILD / "bin" / "ptrain"), "train", "-c", str(out / f"{name}.toml"),
                            "--overwrite"], name)
    ptrain_loss = json.loads((out / "parity" / "metrics.jsonl").read_text().splitlines()[0])["loss"]

    model = sft_step.CausalLm({"rope_theta": 10000.0, "rms_norm_eps": 1e-6, **TINY})
    final = load_file(out / "parity" / "final" / "model.safetensors")
    weights = {name.removeprefix("model."): t for name, t in final.items()}
    model.load_state_dict(weights, strict=True)
    with open(data) as f:
        pairs = [sft_step.tokenize(json.loads(line), 128) for line in f]
    input_ids, labels, _ = sft_step.collate(pairs)
    with torch.no_grad():
        logits = model(input_ids)
        reference_loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1)).item()
    print(json.dumps({"ptrain_loss": ptrain_loss, "reference_loss": reference_loss,
                      "abs_diff": abs(ptrain_loss - reference_loss)}))
    return 0 if abs(ptrain_loss - reference_loss) < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
