"""The figures of issue 8, each next to a baseline measured in the same run.

Every figure function returns rows: {"name", "value", "unit", "baseline",
"ratio"} (ratio = value / baseline), plus, for the table only, "target"
(a text such as ">= 1.2"), "met" (True/False/None) and "note".
"""

import json
import os
import shutil
from pathlib import Path

import runner
from runner import OUT, ROOT, THREADS

# Llama-style shapes, vocabulary 320 (byte tokenizer + headroom, as configs/sft.toml).
TINY = {"vocab_size": 320, "hidden_size": 256, "intermediate_size": 688, "num_layers": 7, "num_heads": 4,
        "num_kv_heads": 2, "max_position_embeddings": 512, "tie_word_embeddings": True}
SMALL = {"vocab_size": 320, "hidden_size": 768, "intermediate_size": 2048, "num_layers": 8, "num_heads": 12,
         "num_kv_heads": 4, "max_position_embeddings": 512, "tie_word_embeddings": True}
BUNDLED = {"vocab_size": 320, "hidden_size": 256, "intermediate_size": 688, "num_layers": 4, "num_heads": 4,
           "num_kv_heads": 2, "max_position_embeddings": 64, "tie_word_embeddings": True}  # configs/sft.toml


def num_params(m):
    h, i, layers = m["hidden_size"], m["intermediate_size"], m["num_layers"]
    head_dim = h // m["num_heads"]
    q, kv = m["num_heads"] * head_dim, m["num_kv_heads"] * head_dim
    per_layer = h * q + 2 * h * kv + q * h + 3 * h * i + 2 * h
    head = 0 if m["tie_word_embeddings"] else m["vocab_size"] * h
    return m["vocab_size"] * h + layers * per_layer + h + head


def training_flops_per_token(m, seq):
    """6·N (Kaplan et al. 2020) plus attention's 12·layers·(heads·head_dim)·T (PaLM, Chowdhery et al. 2022, app. B).

    The attention term counts the full T×T score matrix (PaLM's model-FLOPs convention); the unfused
    attention of LibTorch 1.x skips the causally masked blocks (5/8 of T×T computed at T=512), so
    this counts model FLOPs, not the FLOPs executed.
    """
    attention_width = m["num_heads"] * (m["hidden_size"] // m["num_heads"])
    return 6.0 * num_params(m) + 12.0 * m["num_layers"] * attention_width * seq


def row(name, value, unit, baseline, target=None, met=None, note=""):
    ratio = value / baseline if value is not None and baseline else None
    return {"name": name, "value": value, "unit": unit, "baseline": baseline, "ratio": ratio,
            "target": target, "met": met, "note": note}


def not_available(name, unit, reason, baseline=None, target=None):
    return {**row(name, None, unit, baseline, target), "note": reason}


def feature_missing(error, key):
    """True when ptrain rejected the config because `key` is unknown to this build."""
    return isinstance(error, runner.RunFailed) and key in str(error.stderr) and "unknown" in str(error.stderr).lower()


# --- data -----------------------------------------------------------------

def make_data(name, *args):
    path = OUT / "data" / f"{name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    runner.run_process([runner.PYTHON, str(ROOT / "bench" / "make_sft_data.py"), *args, "-o", str(path)],
                       f"data_{name}")
    return path


# --- 2. the machine: matmul peak ------------------------------------------

def matmul_peak(log_name, env=None):
    """fp32 FLOP/s of 2048x2048 products, best of 10, for both GEMMs in the process (bench_matmul_peak):

    {"flops_per_s" (the faster), "aten_flops_per_s" (at::mm of ptrain's LibTorch, on the system BLAS),
     "ptrain_flops_per_s", "ptrain_gemm" (what ptrain's layers run: oneDNN when the build has it)}.
    """
    stdout, _ = runner.run_bench("bench_matmul_peak", [THREADS, 2048, 10], log_name, env)
    return runner.last_json_line(stdout)


def environment_without_coretype():
    """This environment without OPENBLAS_CORETYPE (OpenBLAS then picks its kernels for the CPU itself),
    or None when the environment does not set it."""
    if not os.environ.get("OPENBLAS_CORETYPE"):
        return None
    return {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}


def best(peaks, key):
    """The best of the matmul_peak() results taken at the start and at the end of the suite."""
    return max(p[key] for p in peaks)


def openblas_kernels_row(peaks):
    """at::mm's peak with OpenBLAS's own choice of kernels, when the environment chose them instead.

    OpenBLAS reads OPENBLAS_CORETYPE when it loads. This project's machines set
    it to Haswell (AVX2 kernels) although the CPU runs AVX-512, and every
    process of the suite inherits that: it sets what ptrain's LibTorch runs
    at::mm on (ptrain's layers run on oneDNN, which picks its own kernels, and
    the PyTorch-eager baseline from PyPI runs MKL). This row says what at::mm
    does with the kernels OpenBLAS would pick itself.
    """
    own_choice = environment_without_coretype()
    if own_choice is None:
        return []
    own_peak = matmul_peak("matmul_peak_openblas_choice", own_choice)["aten_flops_per_s"]
    return [row(f"fp32 at::mm peak: OpenBLAS's own kernels vs OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']} "
                "(this environment)", own_peak / 1e9, "GFLOP/s", best(peaks, "aten_flops_per_s") / 1e9,
                note="information: every process of the suite runs with the environment's setting")]


def matmul_peak_rows(peaks):
    """peaks: matmul_peak() results, at the start and at the end of the suite; the best of each GEMM is kept."""
    ours, aten = best(peaks, "ptrain_flops_per_s"), best(peaks, "aten_flops_per_s")
    return [row(f"fp32 matmul peak (2048x2048, {THREADS} threads): ptrain's GEMM ({peaks[0]['ptrain_gemm']}) "
                "vs at::mm (system BLAS)", ours / 1e9, "GFLOP/s", aten / 1e9,
                note=f"the MFU denominator is the faster of the two: {max(ours, aten) / 1e9:.0f} GFLOP/s "
                     "(best of 10 timings, at the start and at the end of the suite)")]


# --- 1. vs PyTorch eager, and 2. MFU -------------------------------------

SFT_SIZES = {
    # name: (model, tokens per example, global batch, micro batch, warm-up steps, measured steps, rounds)
    # Six rounds for tiny (5 s a run): three runs of the same pair a minute apart
    # gave ratios of 0.70, 1.00 and 1.07 with two rounds each on this VM.
    "tiny": (TINY, 128, 8, 8, 2, 6, 6),
    "small": (SMALL, 512, 2, 2, 1, 2, 2),
}


def paired(run_a, run_b, rounds):
    """Runs two measurements in A B B A ... order; returns each side's mean over rounds.

    The machine is shared (CI and other builds), so its load drifts over
    minutes; in the mirrored order a linear drift adds the same to both
    sides' means (a best-round rule would not cancel it: A's last run would
    win whenever the load falls). Rates are averaged, peak RSS is the largest.
    """
    runs = ([], [])
    for r in range(rounds):
        for side in ((0, 1) if r % 2 == 0 else (1, 0)):
            runs[side].append((run_a, run_b)[side]())
    rates = ("tokens_per_s", "units_per_s", "step_s")
    return tuple({**results[0], **{k: sum(x[k] for x in results) / len(results) for k in rates if k in results[0]},
                  "peak_rss_mb": max(x["peak_rss_mb"] for x in results)} for results in runs)


def sft_vs_pytorch(size, data):
    model, length, global_size, micro_size, warmup, steps, rounds = SFT_SIZES[size]
    config = runner.sft_config(f"sft_{size}", model, data, length, global_size, micro_size, warmup + steps)
    ours, theirs = paired(lambda: runner.run_ptrain(f"sft_{size}", config, warmup),
                          lambda: runner.run_reference(f"sft_{size}_pytorch", config, warmup, steps), rounds)
    millions = num_params(model) / 1e6
    target = 1.2 if size == "tiny" else 1.0
    ratio = ours["tokens_per_s"] / theirs["tokens_per_s"]
    return [row(f"SFT tokens/s {size} ({millions:.1f}M, seq {length}, batch {global_size}): ptrain vs PyTorch eager",
                ours["tokens_per_s"], "tokens/s", theirs["tokens_per_s"], f">= {target}", ratio >= target)], ours, theirs


def sft_bf16_mixed(data):
    """The small SFT job under runtime.precision = "bf16-mixed": against ptrain in fp32, and against the
    PyTorch-eager loop under CPU autocast to bfloat16, each pair timed in alternation in the same run.

    On a CPU with AVX512-BF16 or AMX both programs reach oneDNN's bf16 kernels.
    """
    model, length, global_size, micro_size, warmup, steps, rounds = SFT_SIZES["small"]
    fp32 = runner.sft_config("sft_small_fp32", model, data, length, global_size, micro_size, warmup + steps)
    bf16 = runner.sft_config("sft_small_bf16", model, data, length, global_size, micro_size, warmup + steps,
                             runtime={"precision": "bf16-mixed"})
    ours_bf16, ours_fp32 = paired(lambda: runner.run_ptrain("sft_small_bf16", bf16, warmup),
                                  lambda: runner.run_ptrain("sft_small_fp32", fp32, warmup), rounds)
    again_bf16, theirs = paired(lambda: runner.run_ptrain("sft_small_bf16", bf16, warmup),
                                lambda: runner.run_reference("sft_small_bf16_pytorch", bf16, warmup, steps), rounds)
    speedup = ours_bf16["tokens_per_s"] / ours_fp32["tokens_per_s"]
    return [row("SFT tokens/s small, bf16-mixed vs fp32 (ptrain)", ours_bf16["tokens_per_s"], "tokens/s",
                ours_fp32["tokens_per_s"], ">= 1.4", speedup >= 1.4),
            row("SFT tokens/s small, bf16-mixed: ptrain vs PyTorch eager under CPU autocast bf16",
                again_bf16["tokens_per_s"], "tokens/s", theirs["tokens_per_s"])]


# The kernels an AVX2 CPU gets, forced on any x86-64 CPU: oneDNN, ATen's
# vectorized kernels and OpenBLAS each capped at AVX2.
AVX2_ONLY = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "OPENBLAS_CORETYPE": "Haswell"}


def sft_bf16_mixed_avx2(data):
    """The small SFT job under bf16-mixed against fp32, both on the kernels of a CPU without AVX-512
    (AVX2_ONLY), timed in alternation in the same run. oneDNN has no bf16 matmul there, so the products
    take the widened route of core/model/gemm.h: bfloat16 operands multiplied by the fp32 GEMM."""
    model, length, global_size, micro_size, warmup, steps, rounds = SFT_SIZES["small"]
    fp32 = runner.sft_config("sft_small_fp32_avx2", model, data, length, global_size, micro_size, warmup + steps)
    bf16 = runner.sft_config("sft_small_bf16_avx2", model, data, length, global_size, micro_size, warmup + steps,
                             runtime={"precision": "bf16-mixed"})
    env = {**os.environ, **AVX2_ONLY}
    ours_bf16, ours_fp32 = paired(lambda: runner.run_ptrain("sft_small_bf16_avx2", bf16, warmup, env),
                                  lambda: runner.run_ptrain("sft_small_fp32_avx2", fp32, warmup, env), rounds)
    if "widened" not in ours_bf16["log"]:
        raise RuntimeError("the bf16 run's [train] line does not name the widened route: " + ours_bf16["log"][:400])
    return [row("SFT tokens/s small, AVX2 kernels: bf16-mixed (widened route) vs fp32", ours_bf16["tokens_per_s"],
                "tokens/s", ours_fp32["tokens_per_s"], note="ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=avx2, "
                "OPENBLAS_CORETYPE=Haswell: a CPU without AVX-512")]


def mfu(size, ours, theirs, peak_flops):
    model, length = SFT_SIZES[size][:2]
    flops_per_token = training_flops_per_token(model, length - 1)
    achieved, eager = ours["tokens_per_s"] * flops_per_token, theirs["tokens_per_s"] * flops_per_token
    target = ">= 0.45" if size == "small" else None
    return [row(f"MFU {size}: achieved FLOP/s vs matmul peak", achieved / 1e9, "GFLOP/s", peak_flops / 1e9, target,
                achieved / peak_flops >= 0.45 if target else None, f"PyTorch eager: {eager / peak_flops:.1%} of peak")]


# --- 3. accumulation overhead ---------------------------------------------

def accumulation(data):
    """Tiny model, microbatch 4: accumulation 8 (global 32) vs 1 (global 4).

    Measured by bench_accumulation, which alternates the two settings step by
    step inside one process with the core's update step: two launcher runs a
    minute apart would compare two different loads of this shared machine.
    """
    config = runner.sft_config("accumulation", TINY, data, 128, 32, 4, 1)
    path = OUT / "configs" / "accumulation.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    runner.write_config(path, config)
    stdout, _ = runner.run_bench("bench_accumulation", [path, 4], "accumulation")
    result = runner.last_json_line(stdout)
    eight, one = result["tokens_per_s_accum_8"], result["tokens_per_s_accum_1"]
    return [row("SFT tokens/s tiny, micro 4: accumulation 8 vs 1", eight, "tokens/s", one, ">= 0.97",
                eight / one >= 0.97, "update step in one process, the two settings interleaved (bench_accumulation)")]


# --- 4. padding waste -----------------------------------------------------

def padding(data):
    """Tiny model on the long-tailed set: micro_size 4 (padded) vs packing in micro_tokens 2048."""
    common = (TINY, data, 512, 16)
    padded = runner.run_ptrain("padding_padded", runner.sft_config("padding_padded", *common, 4, 3), 1)
    waste_padded = 1.0 - padded["tokens"] / padded["padded_tokens"]
    name = "padding waste (long-tailed lengths, cap 512): packed vs padded"
    speed_name = "SFT tokens/s tiny, long-tailed data: packed vs padded"
    packed_config = runner.sft_config("padding_packed", *common, None, 3, batch={"micro_tokens": 2048, "packing": True})
    del packed_config["batch"]["micro_size"]
    try:
        packed = runner.run_ptrain("padding_packed", packed_config, 1)
    except runner.RunFailed as error:
        if not feature_missing(error, "packing"):
            raise
        reason = "n/a (packing not in this build)"
        return [not_available(name, "% padding", reason, 100 * waste_padded, "< 5%"),
                not_available(speed_name, "tokens/s", reason, padded["tokens_per_s"])]
    waste_packed = 1.0 - packed["tokens"] / packed["padded_tokens"]
    return [row(name, 100 * waste_packed, "% padding", 100 * waste_padded, "< 5%", waste_packed < 0.05),
            row(speed_name, packed["tokens_per_s"], "tokens/s", padded["tokens_per_s"])]


# --- 5. memory -------------------------------------------------------------

def memory_per_update(small_ours, small_theirs):
    state_mb = num_params(SMALL) * 4 * 4 / 2**20  # fp32 params, grads, AdamW m and v
    return [row("peak RSS small: ptrain process vs params+grads+AdamW state", small_ours["peak_rss_mb"], "MB",
                state_mb, note=f"PyTorch eager process: {small_theirs['peak_rss_mb']:.0f} MB")]


def log_prob_memory():
    peaks = {}
    for mode in ("hidden", "target", "full"):
        stdout, _ = runner.run_bench("bench_log_prob_memory", [mode, 32000, 8, 512, THREADS], f"log_prob_{mode}")
        peaks[mode] = runner.last_json_line(stdout)["peak_rss_mb"]
    return [row("log-prob extra memory (vocab 32000, 4096 tokens): ptrain vs full log_softmax",
                peaks["target"] - peaks["hidden"], "MB", peaks["full"] - peaks["hidden"],
                note=f"peak RSS above the model-without-head run ({peaks['hidden']:.0f} MB)")]


def activation_checkpointing(data, small_ours):
    model, length, global_size, micro_size, warmup, steps, _ = SFT_SIZES["small"]
    config = runner.sft_config("sft_small_ckpt", {**model, "activation_checkpointing": True}, data, length,
                               global_size, micro_size, warmup + steps)
    rss_name = "activation checkpointing small: peak RSS on vs off"
    speed_name = "activation checkpointing small: tokens/s on vs off"
    try:
        ckpt = runner.run_ptrain("sft_small_ckpt", config, warmup)
    except runner.RunFailed as error:
        if not feature_missing(error, "activation_checkpointing"):
            raise
        reason = "n/a (activation checkpointing not in this build)"
        return [not_available(rss_name, "MB", reason, small_ours["peak_rss_mb"]),
                not_available(speed_name, "tokens/s", reason, small_ours["tokens_per_s"])]
    return [row(rss_name, ckpt["peak_rss_mb"], "MB", small_ours["peak_rss_mb"]),
            row(speed_name, ckpt["tokens_per_s"], "tokens/s", small_ours["tokens_per_s"])]


# --- LoRA (issue 26) --------------------------------------------------------

LORA = {"rank": 16, "alpha": 32.0}  # on all seven projections of every layer


def lora(data):
    """LoRA SFT at the small size against full fine-tuning of the same model, timed in alternation.

    Only the adapters take gradients and AdamW state, so the memory saved is the base weights'
    gradients and optimizer state (3 × 4 bytes a parameter); the forward and backward through the
    activations stay, so tokens/s gains only the weight-gradient products.
    """
    model, length, global_size, micro_size, warmup, steps, rounds = SFT_SIZES["small"]
    full = runner.sft_config("sft_small_full", model, data, length, global_size, micro_size, warmup + steps)
    adapters = runner.sft_config("sft_small_lora", model, data, length, global_size, micro_size, warmup + steps,
                                 lora=LORA)
    ours_lora, ours_full = paired(lambda: runner.run_ptrain("sft_small_lora", adapters, warmup),
                                  lambda: runner.run_ptrain("sft_small_full", full, warmup), rounds)
    state_mb = num_params(model) * 3 * 4 / 2**20
    return [row("LoRA SFT small (rank 16, all projections): tokens/s vs full fine-tuning", ours_lora["tokens_per_s"],
                "tokens/s", ours_full["tokens_per_s"]),
            row("LoRA SFT small: peak RSS vs full fine-tuning", ours_lora["peak_rss_mb"], "MB",
                ours_full["peak_rss_mb"], note=f"base gradients + AdamW state of full fine-tuning: {state_mb:.0f} MB")]


def small_model_dir(data):
    """A model directory of the small size (one full fine-tuning step's final/) for runs that need model.init."""
    name = "small_base"
    config = runner.sft_config(name, SMALL, data, 512, 2, 2, 1)
    path = OUT / "configs" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    runner.write_config(path, config)
    runner.run_process([str(runner.BUILD / "bin" / "ptrain"), "train", "-c", str(path), "--overwrite"], name)
    return Path(config["output_dir"]) / "final"


def lora_dpo_reference(data):
    """LoRA DPO at the small size: the reference as the policy's own base weights with the adapters off
    (reference_model = model.init) against the same weights loaded again from a copy of the directory,
    the second model a full fine-tuning DPO run must hold."""
    base = small_model_dir(data)
    copy = base.parent / "final_copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(base, copy)
    pairs = preference_pairs(data)

    def run(reference, name):
        config = runner.sft_config(name, {"init": str(base)}, pairs, 512, 2, 2, 3, plugin="dpo", lora=LORA,
                                   module={"loss": ["sigmoid"], "beta": 0.1, "precompute_reference": False,
                                           "reference_model": str(reference)})
        return lambda: runner.run_ptrain(name, config, 1)

    shared, copied = paired(run(base, "dpo_small_lora_shared"), run(copy, "dpo_small_lora_copy"), 1)
    weights_mb = num_params(SMALL) * 4 / 2**20
    return [row("LoRA DPO small: peak RSS, adapters-off reference vs a second model copy", shared["peak_rss_mb"],
                "MB", copied["peak_rss_mb"], note=f"one copy of the fp32 weights: {weights_mb:.0f} MB")]


# --- 6. DPO and GRPO -------------------------------------------------------

def preference_pairs(sft_data):
    """Pairs with long-tailed lengths from an SFT set: example i's prompt, its completion as chosen and
    example i+1's completion as rejected, so the two sides of a pair differ in length too."""
    path = OUT / "data" / f"{sft_data.stem}_pairs.jsonl"
    examples = [json.loads(line) for line in sft_data.read_text().splitlines() if line.strip()]
    with path.open("w") as out:
        for i, example in enumerate(examples):
            rejected = examples[(i + 1) % len(examples)]["completion"]
            out.write(json.dumps({"prompt": example["prompt"], "chosen": example["completion"],
                                  "rejected": rejected}) + "\n")
    return path


def dpo(longtail):
    """configs/dpo.toml's run, model from configs/sft.toml's sizes: one forward of 2B rows vs two of B;
    then long-tailed pairs (cap 512) packed into rows vs padded, micro_size 4 grouped by length."""
    def run(concatenated):
        name = "dpo_concatenated" if concatenated else "dpo_separate"
        config = runner.sft_config(name, BUNDLED, ROOT / "data" / "arith_prefs" / "train.jsonl", 32, 32, 16, 6,
                                   plugin="dpo", optim={"lr": 1e-3, "weight_decay": 0.0},
                                   module={"loss": ["sigmoid"], "beta": 0.1, "loss_agg": "pair",
                                           "precompute_reference": False, "concatenated": concatenated})
        return lambda: runner.run_ptrain(name, config, 1)

    concatenated, separate = paired(run(True), run(False), 2)
    rows = [row("DPO pairs/s (dpo.toml shape): concatenated vs separate forwards", concatenated["units_per_s"],
                "pairs/s", separate["units_per_s"])]

    pairs = preference_pairs(longtail)

    def run_long(packed):
        name = "dpo_longtail_packed" if packed else "dpo_longtail_padded"
        config = runner.sft_config(name, TINY, pairs, 512, 16, 4, 3, plugin="dpo",
                                   module={"loss": ["sigmoid"], "beta": 0.1, "precompute_reference": False})
        if packed:
            config["batch"] = {"global_size": 16, "micro_tokens": 4096, "packing": True}
        return lambda: runner.run_ptrain(name, config, 1)

    name = "DPO pairs/s tiny, long-tailed pairs: packed vs padded"
    try:
        packed, padded = paired(run_long(True), run_long(False), 1)
    except runner.RunFailed as error:
        if not (feature_missing(error, "packing") or "does not pack" in str(error.stderr)):
            raise
        return rows + [not_available(name, "pairs/s", "n/a (DPO packing not in this build)")]

    def waste(totals):
        return 100 * (1.0 - totals["tokens"] / totals["padded_tokens"])
    return rows + [row(name, packed["units_per_s"], "pairs/s", padded["units_per_s"],
                       note=f"padding {waste(packed):.1f}% packed vs {waste(padded):.1f}% padded "
                            "(micro_tokens 4096 vs micro_size 4 grouped by length)")]


def grpo():
    """bench_grpo_step twice, each figure's best: one run times each side once, back to back."""
    runs = [runner.last_json_line(runner.run_bench("bench_grpo_step", [1, THREADS], f"grpo_step_{i}")[0])
            for i in range(2)]
    result = {key: (min if key.startswith("update_s") else max)(run[key] for run in runs) for key in runs[0]}
    return [row("GRPO rollout tokens/s (64 seqs, 24 new): KV cache vs recompute", result["rollout_tokens_per_s_kv_cache"],
                "tokens/s", result["rollout_tokens_per_s_recompute"]),
            row("GRPO update s, accum 8: generate once per step vs per microbatch", result["update_s_once_per_step"],
                "s (lower is better)", result["update_s_per_microbatch"])]


def state_memory_mib(log):
    """rank 0's "[memory] ... holds parameters P MiB, gradients G MiB ..., optimizer state O MiB" line."""
    import re
    match = re.search(r"holds parameters ([0-9.]+) MiB, gradients ([0-9.]+) MiB .*optimizer state ([0-9.]+) MiB", log)
    if not match:
        raise ValueError("no [memory] line in log_rank0.txt")
    return [float(value) for value in match.groups()]


def layer_parameters(model):
    """Parameters of one decoder layer of a `model` config dict (no biases, no q/k norms)."""
    hidden, head_dim = model["hidden_size"], model["hidden_size"] // model["num_heads"]
    attention = 2 * hidden * hidden + 2 * hidden * model["num_kv_heads"] * head_dim
    return attention + 3 * hidden * model["intermediate_size"] + 2 * hidden


def sharding():
    """distributed.sharding on the small model: per-rank MiB of parameters + gradients + optimizer state
    for each mode at world sizes 1, 2, 4 (rank 0's, as the run logs it), and tokens/s at world size 2
    against "none", THREADS threads shared by the ranks."""
    threads = max(1, THREADS // 2)

    def config(name, mode, world, steps):
        return runner.sft_config(name, SMALL, ROOT / "data" / "arith" / "train.jsonl", 64, 8, 2, steps,
                                 distributed={"sharding": mode},
                                 runtime={"threads": max(1, THREADS // world)})

    rows = []
    memory = {}
    modes = ("none", "optimizer", "full")
    for world in (1, 2, 4):
        for mode in modes:
            name = f"sharding_{mode}_w{world}"
            result = runner.run_ptrain(name, config(name, mode, world, 2), 1, nproc=world)
            memory[mode, world] = sum(state_memory_mib(result["log"]))
        # The target for full: 1/N of none plus one layer's float32 weights and gradients.
        full_target = memory["none", world] / world + 2 * 4 * layer_parameters(SMALL) / 2**20
        for mode in modes[1:]:
            target = full_target if mode == "full" else None
            met = memory[mode, world] <= full_target if mode == "full" else None
            rows.append(row(f"params+grads+AdamW state per rank, small, world {world}: {mode} vs none sharding",
                            memory[mode, world], "MiB", memory["none", world], target=target, met=met,
                            note="held between steps; under full one layer (and the next, prefetched) is gathered "
                                 "whole in forward and backward, and one layer at a time while a checkpoint or "
                                 "final/ is written" if mode == "full"
                            else ""))
    speed = {}
    for mode in modes:
        name = f"sharding_speed_{mode}"
        speed[mode] = runner.run_ptrain(name, config(name, mode, 2, 8), 2, nproc=2)["tokens_per_s"]
    for mode in modes[1:]:
        rows.append(row(f"SFT tokens/s small, world 2 ({threads} thread each): {mode} vs none sharding",
                        speed[mode], "tokens/s", speed["none"]))
    return rows
