"""The GPU-work audit (issue 38): what a bf16-mixed SFT step asks of a GPU, measured on the CPU.

One update step at Qwen2.5-0.5B's shapes (vocabulary 151,936, hidden 896, 14
query / 2 kv heads, tied embeddings; fewer layers and a shorter sequence, so
it fits a CPU), in ptrain and in the eager reference (bench/reference/
sft_step.py: bf16 autocast, SDPA with grouped-query heads, fused AdamW), each
under its own profiler: ptrain's bench_gpu_audit runs its model on the
accelerator route (core/model/kernel_route.h), the ATen ops it runs on CUDA,
under LibTorch's RecordFunction hook; the reference runs under torch.profiler.
Both are read by the same accounting below:

  bf16_matmul_flop_fraction        share of matrix-product and attention FLOPs whose operands
                                   are bfloat16 (target >= 0.99)
  small_gemm_flop_fraction         share of matrix-product FLOPs in products with a side below 256
                                   (target <= 0.02)
  aten_ops_per_step_ratio_vs_eager ptrain's top-level ATen ops per step over eager's (target <= 1.5)
  host_syncs_per_step              ptrain's ops that make the host wait for a GPU: value reads
                                   (item, nonzero, masked_select, ...) and copies to the host,
                                   for 1 and for 8 microbatches (target <= 8 and equal)
  product_flops_ratio_vs_eager     ptrain's matrix-product and attention FLOPs over eager's: work
                                   beyond the model's own products, such as a recomputed loss head
                                   (target <= 1.01; activation checkpointing is off in both)
  logit_passes_ratio_vs_eager      passes over the [tokens, vocabulary] logits outside the products,
                                   ptrain's over eager's: the bytes of the [.., vocabulary] tensors
                                   handed to the innermost ATen ops (what they read, and what an
                                   in-place op, copy or out= argument writes; ops that touch only
                                   the target entries, such as gather, left out) over tokens x
                                   vocabulary x 4. The memory traffic that bounds the loss head on
                                   a GPU (target <= 1.0). A functional op's result is not among its
                                   inputs, so it goes uncounted where an out= argument counts: the
                                   rule leans against ptrain, which writes some results with out=
  activation_bytes_ratio_vs_eager  the same for the decoder's activations (tensors with a token or
                                   sequence dimension, the logits left out), per token: the
                                   elementwise traffic of the layers' forward and backward (target
                                   <= 1.0: no more than eager's, whose elementwise ops run in bf16)

ptrain's own CUDA kernels (ptrain::swiglu_activation and ptrain::rotary, each with its backward:
core/model/swiglu_activation.h, core/model/fused_kernels.h) count as the one kernel each is on a
GPU: one op, whose tensors are its inputs. Where the CPU runs the same function as ATen ops
underneath that event, those are left out.

Two copies are the CPU's, not the GPU's, and are left out of the passes: the
widening of a bf16 product's result to float32 (ATen's CPU product rounds to
bf16; on CUDA, aten::mm.dtype writes float32 itself), and the copy with which
an elementwise op on the CPU writes a result of another dtype back (a CUDA
kernel casts as it stores).

On the CPU every tensor is a host tensor, so the sync count keeps to what
would wait for a GPU: reads in the step's data phase (bench_gpu_audit tags
each op with its phase) read the batch the plugin collates on the host
before it moves; reads inside a fused optimizer kernel are its CPU kernel
reading its step counts (the CUDA kernel reads them on the device); and a
copy made by autograd (ToCopyBackward) goes to its input's device, never
to the host. Those are reported apart, not counted.

    python3 bench/gpu_audit.py [--layers 2] [--seq 512] [--rows 2]

needs bench_gpu_audit built against LibTorch >= 2.5 (the GPU's kernels: SDPA
with grouped-query heads): scripts/build-gpu.sh builds it into build-gpu/
(PTRAIN_AUDIT_BUILD_DIR), and the project's Python (PTRAIN_PYTHON, torch >= 2.5
for the same kernels on the eager side). Writes bench/results_gpu_audit.json;
bench/suite.py runs it as one of its figures.
"""
import argparse
import json
import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import figures
import runner
from gpu_suite import QWEN25_05B
from runner import OUT, ROOT, THREADS

BUILD = Path(os.environ.get("PTRAIN_AUDIT_BUILD_DIR", ROOT / "build-gpu"))
if not BUILD.is_absolute():
    BUILD = ROOT / BUILD
RESULTS = ROOT / "bench" / "results_gpu_audit.json"
TARGETS = {"bf16_matmul_flop_fraction": ">= 0.99", "small_gemm_flop_fraction": "<= 0.02",
           "aten_ops_per_step_ratio_vs_eager": "<= 1.5",
           "host_syncs_per_step": "<= 8, the same for 1 and 8 microbatches",
           "product_flops_ratio_vs_eager": "<= 1.01", "logit_passes_ratio_vs_eager": "<= 1.0",
           "activation_bytes_ratio_vs_eager": "<= 1.0"}

# Matrix products as ATen records them (composites such as linear and matmul reach one of these).
PRODUCTS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_addmm_activation"}
# Fused attention kernels, forward and backward (what SDPA dispatches to on the CPU and on CUDA).
ATTENTION_FORWARD = {"aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_flash_attention",
                     "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention",
                     "aten::_flash_attention_forward", "aten::_efficient_attention_forward"}
ATTENTION_BACKWARD = {name + "_backward" for name in ATTENTION_FORWARD} | {"aten::_flash_attention_backward",
                                                                           "aten::_efficient_attention_backward"}
# Ops whose result size or value the host must wait for on a GPU.
VALUE_READS = {"aten::_local_scalar_dense", "aten::item", "aten::nonzero", "aten::masked_select", "aten::unique",
               "aten::_unique", "aten::_unique2", "aten::unique_dim", "aten::unique_consecutive", "aten::equal",
               "aten::is_nonzero", "aten::allclose"}
COPIES = {"aten::to", "aten::_to_copy", "aten::copy_"}
CPU_ONLY_READERS = {"aten::_fused_adamw_", "aten::_fused_adam_", "aten::_fused_sgd_"}
HOST_SIDE_PHASES = {"data"}
SMALL_SIDE = 256
# Ops that read no tensor data (views, metadata, allocation; a conversion's data moves in its copy_,
# and a conversion without one had nothing to do).
NO_TRAFFIC = {"aten::to", "aten::_to_copy",
              "aten::view", "aten::reshape", "aten::_reshape_alias", "aten::t", "aten::transpose", "aten::permute",
              "aten::expand", "aten::unsqueeze", "aten::squeeze", "aten::narrow", "aten::slice", "aten::select",
              "aten::as_strided", "aten::detach", "aten::alias", "aten::_unsafe_view", "aten::empty",
              "aten::empty_like", "aten::empty_strided", "aten::resize_", "aten::set_", "aten::lift_fresh",
              "aten::split", "aten::chunk", "aten::unbind", "aten::view_as", "aten::expand_as", "aten::flatten",
              "aten::real", "aten::resolve_conj", "aten::resolve_neg", "aten::result_type"}
# Ops that touch a row's target entries only, not the whole row.
INDEXED = {"aten::gather", "aten::scatter", "aten::scatter_", "aten::scatter_add", "aten::scatter_add_",
           "aten::index_select", "aten::index", "aten::index_put_", "aten::nll_loss_forward",
           "aten::nll_loss2d_forward"}
# Ops whose copy_ child is the copy itself, not a cast written back.
COPYING = COPIES | {"aten::clone", "aten::contiguous", "aten::_copy_from", "aten::_copy_from_and_resize"}
# ptrain's own kernels: one CUDA kernel each, recorded as one event (see the docstring).
OWN_KERNEL = "ptrain::"
KERNEL_PREFIXES = ("aten::", OWN_KERNEL)
ELEMENT_BYTES = {"float": 4, "c10::BFloat16": 2, "c10::Half": 2, "double": 8, "long int": 8, "int": 4, "bool": 1}


def is_bf16(dtype):
    return "bfloat16" in dtype.lower()


def with_parents(events):
    """Each event with its parent: the innermost event of the same thread whose interval holds it."""
    by_thread = defaultdict(list)
    for event in events:
        by_thread[event["thread"]].append(event)
    for thread_events in by_thread.values():
        thread_events.sort(key=lambda e: (e["start_ns"], -e["end_ns"]))
        stack = []
        for event in thread_events:
            while stack and stack[-1]["end_ns"] <= event["start_ns"]:
                stack.pop()
            event["parent"] = stack[-1] if stack else None
            stack.append(event)
    return events


def has_ancestor(event, names=None, prefix=None):
    parent = event["parent"]
    while parent is not None:
        if (names is not None and parent["name"] in names) or (prefix and parent["name"].startswith(prefix)):
            return True
        parent = parent["parent"]
    return False


def in_autograd_node(event):
    parent = event["parent"]
    while parent is not None:
        if "Backward" in parent["name"] or parent["name"].startswith("autograd::"):
            return True
        parent = parent["parent"]
    return False


def sync_kind(event):
    """What the op makes a GPU's host wait for ("item", "to to cpu"), or None."""
    name = event["name"]
    if name in VALUE_READS and not has_ancestor(event, VALUE_READS | COPIES | CPU_ONLY_READERS):
        return name
    if (name in COPIES and "cpu" in event.get("devices", []) and not has_ancestor(event, VALUE_READS | COPIES)
            and not in_autograd_node(event)):
        return name + " to cpu"
    return None


def product_shape(event):
    """(batch, m, k, n) of a product's two matrix operands."""
    shapes = event["shapes"]
    a, b = (shapes[1], shapes[2]) if event["name"] in {"aten::addmm", "aten::baddbmm",
                                                        "aten::_addmm_activation"} else (shapes[0], shapes[1])
    batch = a[0] if len(a) == 3 else 1
    return batch, a[-2], a[-1], b[-1]


def product_dtypes(event):
    dtypes = event["dtypes"]
    return dtypes[1:3] if event["name"] in {"aten::addmm", "aten::baddbmm", "aten::_addmm_activation"} else dtypes[:2]


def attention_flops(event):
    """Dense-equivalent FLOPs of a fused attention kernel: 4·B·H·T·S·d forward, twice that backward.

    (Causal masking halves what the kernels compute; both programs are counted the same way.)"""
    shapes = event["shapes"]
    if event["name"] in ATTENTION_BACKWARD:
        q, k = shapes[1], shapes[2]  # (grad_out, query, key, ...)
        factor = 8
    else:
        q, k = shapes[0], shapes[1]
        factor = 4
    if len(q) == 4:
        batch, heads, t, d = q
        s = k[2]
    else:  # variable-length layout [total, heads, d]: every sequence at most the total
        batch, (t, heads, d), s = 1, q, k[0]
    return factor * batch * heads * t * s * d


def selected_tensor_bytes(event, selects):
    """Bytes of the op's input tensors (2-D or more) whose shape `selects` accepts."""
    total = 0
    for shape, dtype in zip(event["shapes"], event["dtypes"]):
        if (dtype in ELEMENT_BYTES and isinstance(shape, list) and len(shape) >= 2
                and all(isinstance(d, int) for d in shape) and selects(shape)):
            count = 1
            for d in shape:
                count *= d
            total += count * ELEMENT_BYTES[dtype]
    return total


def cpu_only_copies(events, widened_products):
    """The ids of the events (with their descendants) that only the CPU runs; see the docstring.

    widened_products: the program widens bf16 products' results only to stand in for CUDA's
    float32-writing ones (ptrain's model::mm), not as a step of its own (eager's logits.float())."""
    skipped = set()
    by_parent = defaultdict(list)
    for event in events:
        by_parent[(event["thread"], id(event["parent"]))].append(event)
    for siblings in by_parent.values():
        siblings.sort(key=lambda e: e["start_ns"])
        for before, after in zip(siblings, siblings[1:]):
            if (widened_products and before["name"] in PRODUCTS and all(is_bf16(d) for d in product_dtypes(before))
                    and after["name"] == "aten::to" and is_bf16(after["dtypes"][0])):
                skipped.add(id(after))  # the widened product
    for event in events:
        parent = event["parent"]
        if event["name"] == "aten::copy_" and parent is not None and parent["name"].startswith("aten::") \
                and parent["name"] not in COPYING:
            skipped.add(id(event))  # a cast written back
    for event in events:  # descendants of the skipped ones
        ancestor = event["parent"]
        while ancestor is not None and id(event) not in skipped:
            if id(ancestor) in skipped:
                skipped.add(id(event))
            ancestor = ancestor["parent"]
    return skipped


def own_kernel_internals(events):
    """The ids of the events under one of ptrain's own kernels: the CPU's stand-in for its CUDA kernel."""
    return {id(event) for event in events if has_ancestor(event, prefix=OWN_KERNEL)}


def kernel_bytes(events, selects, skipped):
    """Bytes of the tensors `selects` accepts handed to the innermost ATen ops (and ptrain's own kernels)
    that take any, outside products, attention, the optimizer's fused kernels and the `skipped` ids
    (cpu_only_copies, own_kernel_internals): an op whose children touch none of them (a reduction
    filling its [rows] result) counts itself.
    → (total, by op)"""
    parents = {id(e["parent"]) for e in events if e["parent"] is not None and e["name"].startswith("aten::")
               and e["name"] not in NO_TRAFFIC and id(e) not in skipped and selected_tensor_bytes(e, selects)}
    by_op, total = Counter(), 0
    for event in events:
        name = event["name"]
        if (not name.startswith(KERNEL_PREFIXES) or id(event) in parents or id(event) in skipped or name in NO_TRAFFIC
                or name in INDEXED or name in PRODUCTS or name.startswith(("aten::_foreach", "aten::_fused_"))
                or has_ancestor(event, PRODUCTS | ATTENTION_FORWARD | ATTENTION_BACKWARD)):
            continue
        read = selected_tensor_bytes(event, selects)
        if read:
            by_op[name] += read
            total += read
    return total, by_op


def account(profile, vocab, rows, widened_products=False):
    """The audit's figures of one profiled step of `rows` rows."""
    events = with_parents([e for e in profile["events"] if e.get("end_ns", 0) >= e["start_ns"]])
    tokens = profile["tokens"]
    cpu_only = cpu_only_copies(events, widened_products) | own_kernel_internals(events)
    logit_traffic, logit_by_op = kernel_bytes(events, lambda shape: shape[-1] == vocab, cpu_only)
    activation_traffic, activation_by_op = kernel_bytes(
        events, lambda shape: shape[-1] != vocab and (tokens in shape or tokens // rows in shape), cpu_only)
    top_level = Counter()
    product_flops = attention_total = bf16_flops = small_flops = 0
    small_shapes = Counter()
    syncs, host_side = Counter(), Counter()
    for event in events:
        name = event["name"]
        if name.startswith(KERNEL_PREFIXES) and not has_ancestor(event, prefix=KERNEL_PREFIXES):
            top_level[name] += 1
        if name in PRODUCTS and not has_ancestor(event, PRODUCTS | ATTENTION_FORWARD | ATTENTION_BACKWARD):
            batch, m, k, n = product_shape(event)
            flops = 2 * batch * m * k * n
            product_flops += flops
            if all(is_bf16(d) for d in product_dtypes(event)):
                bf16_flops += flops
            if min(m, k, n) < SMALL_SIDE:
                small_flops += flops
                small_shapes[f"{name} {batch}x[{m},{k}]x[{k},{n}]"] += flops
        elif name in ATTENTION_FORWARD | ATTENTION_BACKWARD and not has_ancestor(event, ATTENTION_FORWARD | ATTENTION_BACKWARD):
            flops = attention_flops(event)
            attention_total += flops
            if is_bf16(event["dtypes"][1] if name in ATTENTION_BACKWARD else event["dtypes"][0]):
                bf16_flops += flops
        kind = sync_kind(event)
        if kind is not None:
            (host_side if event.get("phase") in HOST_SIDE_PHASES else syncs)[kind] += 1
    total = product_flops + attention_total
    return {
        "microbatches": profile["microbatches"],
        "tokens": profile["tokens"],
        "torch": profile["torch"],
        "aten_ops_per_step": sum(top_level.values()),
        "product_flops": product_flops,
        "attention_flops": attention_total,
        "bf16_matmul_flop_fraction": bf16_flops / total if total else None,
        "small_gemm_flop_fraction": small_flops / product_flops if product_flops else None,
        "host_syncs_per_step": sum(syncs.values()),
        "host_syncs": dict(syncs),
        "logit_passes": logit_traffic / (tokens * vocab * 4),
        "logit_bytes_by_op": dict(logit_by_op.most_common(8)),
        "activation_bytes_per_token": activation_traffic / tokens,
        "activation_bytes_by_op": dict(activation_by_op.most_common(8)),
        "host_side_reads_in_data_phase": dict(host_side),
        "largest_small_products": dict(small_shapes.most_common(5)),
        "most_frequent_ops": dict(top_level.most_common(12)),
    }


def torch_at_least(version, major, minor):
    parts = [int(p) for p in version.split("+")[0].split(".")[:2]]
    return tuple(parts) >= (major, minor)


def run_ptrain_step(name, config):
    """bench_gpu_audit on `config`: the profile of its second step."""
    config_path = OUT / "configs" / f"{name}.toml"
    config_path.parent.mkdir(parents=True, exist_ok=True)
    runner.write_config(config_path, config)
    events_path = OUT / f"{name}_events.json"
    binary = BUILD / "bin" / "bench_gpu_audit"
    if not binary.exists():
        raise RuntimeError(f"{binary} is missing: build it against LibTorch >= 2.5 (scripts/build-gpu.sh "
                           "--target bench_gpu_audit, or set PTRAIN_AUDIT_BUILD_DIR)")
    runner.run_process([str(binary), str(config_path), str(events_path), "1", "accelerator"], name)
    profile = json.loads(events_path.read_text())
    if not torch_at_least(profile["torch"], 2, 5):
        raise RuntimeError(f"{binary} is built against LibTorch {profile['torch']}: the audit needs >= 2.5, "
                           "whose SDPA takes grouped-query heads as CUDA does")
    return profile


def run_eager_step(name, config):
    config_path = OUT / "configs" / f"{name}.toml"
    runner.write_config(config_path, config)
    events_path = OUT / f"{name}_events.json"
    runner.run_process([runner.PYTHON, str(ROOT / "bench" / "reference" / "sft_step.py"), "-c", str(config_path),
                        "--warmup", "1", "--steps", "1", "--fused-adamw", "--profile", str(events_path)], name)
    return json.loads(events_path.read_text())


def audit(layers=2, seq=512, rows=2, sync_seq=128):
    start = time.perf_counter()
    model = {**QWEN25_05B, "num_layers": layers, "max_position_embeddings": max(seq, sync_seq)}
    data = figures.make_data(f"audit_fixed_{seq}", "fixed", "--length", str(seq), "--count", str(8 * 4))
    short = figures.make_data(f"audit_fixed_{sync_seq}", "fixed", "--length", str(sync_seq), "--count", str(8 * 4))
    runtime = {"device": "cpu", "precision": "bf16-mixed", "threads": THREADS}

    def config(name, path, length, global_size, micro_size):
        return runner.sft_config(name, model, path, length, global_size, micro_size, 2, runtime=runtime)

    vocab = model["vocab_size"]
    ours = account(run_ptrain_step("audit_ptrain", config("audit_ptrain", data, seq, rows, rows)), vocab,
                   rows, widened_products=True)
    theirs = account(run_eager_step("audit_eager", config("audit_eager", data, seq, rows, rows)), vocab,
                     rows)
    syncs = {}
    for micro in (8, 1):  # 1 and 8 microbatches of the same 8 rows
        profile = run_ptrain_step(f"audit_syncs_micro{micro}", config(f"audit_syncs_micro{micro}", short, sync_seq, 8,
                                                                        micro))
        syncs[profile["microbatches"]] = account(profile, vocab, 8)["host_syncs"]
    sync_counts = {str(k): sum(v.values()) for k, v in sorted(syncs.items())}
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "torch": ours["torch"],
        "threads": THREADS,
        "shape": {**model, "seq": seq, "rows_per_step": rows, "precision": "bf16-mixed"},
        "bf16_matmul_flop_fraction": ours["bf16_matmul_flop_fraction"],
        "small_gemm_flop_fraction": ours["small_gemm_flop_fraction"],
        "aten_ops_per_step_ratio_vs_eager": ours["aten_ops_per_step"] / theirs["aten_ops_per_step"],
        "host_syncs_per_step": max(int(v) for v in sync_counts.values()),
        "host_syncs_by_microbatches": sync_counts,
        "host_syncs_detail": {str(k): v for k, v in sorted(syncs.items())},
        "product_flops_ratio_vs_eager": ((ours["product_flops"] + ours["attention_flops"]) /
                                         (theirs["product_flops"] + theirs["attention_flops"])),
        "logit_passes_ratio_vs_eager": ours["logit_passes"] / theirs["logit_passes"],
        "activation_bytes_ratio_vs_eager": ours["activation_bytes_per_token"] / theirs["activation_bytes_per_token"],
        "targets": TARGETS,
        "ptrain": ours,
        "eager": theirs,
        "audit_s": round(time.perf_counter() - start),
    }
    counts = list(sync_counts.values())
    result["met"] = {
        "bf16_matmul_flop_fraction": result["bf16_matmul_flop_fraction"] >= 0.99,
        "small_gemm_flop_fraction": result["small_gemm_flop_fraction"] <= 0.02,
        "aten_ops_per_step_ratio_vs_eager": result["aten_ops_per_step_ratio_vs_eager"] <= 1.5,
        "host_syncs_per_step": result["host_syncs_per_step"] <= 8 and len(set(counts)) == 1,
        "product_flops_ratio_vs_eager": result["product_flops_ratio_vs_eager"] <= 1.01,
        "logit_passes_ratio_vs_eager": result["logit_passes_ratio_vs_eager"] <= 1.0,
        "activation_bytes_ratio_vs_eager": result["activation_bytes_ratio_vs_eager"] <= 1.0,
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    return result


def suite_rows(result=None):
    """The audit as rows of bench/suite.py's table (running it when no result is given)."""
    result = result or audit()
    ours, theirs = result["ptrain"], result["eager"]
    met = result["met"]
    return [
        figures.row("GPU-work audit: bf16 share of product and attention FLOPs (ptrain vs eager)",
                    result["bf16_matmul_flop_fraction"], "fraction", theirs["bf16_matmul_flop_fraction"],
                    TARGETS["bf16_matmul_flop_fraction"], met["bf16_matmul_flop_fraction"]),
        figures.row("GPU-work audit: FLOPs in products with a side < 256 (ptrain vs eager)",
                    result["small_gemm_flop_fraction"], "fraction", theirs["small_gemm_flop_fraction"],
                    TARGETS["small_gemm_flop_fraction"], met["small_gemm_flop_fraction"]),
        figures.row("GPU-work audit: top-level ATen ops per step (ptrain vs eager)", ours["aten_ops_per_step"],
                    "ops", theirs["aten_ops_per_step"], TARGETS["aten_ops_per_step_ratio_vs_eager"],
                    met["aten_ops_per_step_ratio_vs_eager"]),
        figures.row("GPU-work audit: host syncs per step, 8 vs 1 microbatches (ptrain)",
                    result["host_syncs_by_microbatches"].get("8"), "syncs",
                    result["host_syncs_by_microbatches"].get("1"), TARGETS["host_syncs_per_step"],
                    met["host_syncs_per_step"],
                    note=f"eager: {theirs['host_syncs_per_step']} per step; LibTorch {result['torch']}"),
        figures.row("GPU-work audit: product and attention FLOPs per step (ptrain vs eager)",
                    ours["product_flops"] + ours["attention_flops"], "FLOP",
                    theirs["product_flops"] + theirs["attention_flops"], TARGETS["product_flops_ratio_vs_eager"],
                    met["product_flops_ratio_vs_eager"]),
        figures.row("GPU-work audit: float32 passes over the logits outside products (ptrain vs eager)",
                    ours["logit_passes"], "passes", theirs["logit_passes"],
                    TARGETS["logit_passes_ratio_vs_eager"], met["logit_passes_ratio_vs_eager"]),
        figures.row("GPU-work audit: activation bytes per token outside products (ptrain vs eager)",
                    ours["activation_bytes_per_token"], "bytes/token", theirs["activation_bytes_per_token"],
                    TARGETS["activation_bytes_ratio_vs_eager"], met["activation_bytes_ratio_vs_eager"]),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=2, help="decoder layers (the 0.5B model has 24)")
    parser.add_argument("--seq", type=int, default=512, help="tokens per row")
    parser.add_argument("--rows", type=int, default=2, help="rows in the profiled step (one microbatch)")
    args = parser.parse_args()
    result = audit(args.layers, args.seq, args.rows)
    for key in TARGETS:
        print(f"{key:<36} {json.dumps(result[key]):>24}  target {TARGETS[key]}: "
              f"{'met' if result['met'][key] else 'NOT met'}")
    print(f"host syncs by microbatches: {result['host_syncs_detail']}")
    print(f"ptrain: {result['ptrain']['aten_ops_per_step']} ops, eager: {result['eager']['aten_ops_per_step']}; "
          f"wrote {RESULTS}")
    return 0 if all(result["met"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
