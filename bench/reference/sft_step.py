"""The PyTorch-eager baseline of the SFT update benchmark.

A plain PyTorch training loop, written the way a Python trainer would write
it, for the same run as a ptrain config file: the same Llama-style model
(core/model/causal_lm.cpp: RMSNorm, rotate-half RoPE, SwiGLU, grouped-query
attention, tied embeddings), the same JSONL data tokenized with the byte
tokenizer, the same batch, AdamW with the same settings and gradient clipping.
The loss is the standard mean cross-entropy over completion tokens (labels
-100 elsewhere), accumulated over microbatches the usual way (loss / number of
microbatches).

    .venv/bin/python bench/reference/sft_step.py -c run.toml --warmup 2 --steps 5
    python3 bench/reference/sft_step.py -c run.toml --device cuda   # a GPU machine's PyTorch

On a GPU it is the loop a PyTorch user would write there: bf16 autocast,
F.scaled_dot_product_attention with grouped-query heads, fused AdamW.

    python3 bench/reference/sft_step.py -c run.toml --warmup 1 --steps 1 --fused-adamw --profile events.json

runs the last step under torch.profiler and writes its ops (bench/gpu_audit.py:
the eager side of the GPU-work audit; --fused-adamw is the GPU's optimizer
on the CPU).

Prints one JSON object: tokens/s and seconds of the fastest measured update
(other processes on a shared machine only ever slow a step down), and on a
GPU the peak memory PyTorch allocated. A "token" is a non-padding input
position, as in ptrain's metrics.
"""
import argparse
import json
import math
import time
import tomllib

import torch
import torch.nn.functional as F
from torch import nn

BOS, EOS, PAD = 256, 257, 258
# Grouped-query SDPA exists from PyTorch 2.5 (the project's .venv has 2.11);
# an older PyTorch runs the explicit attention, as ptrain's own unfused path does.
SDPA_GQA = tuple(int(part) for part in torch.__version__.split(".")[:2]) >= (2, 5)


class RmsNorm(nn.Module):
    def __init__(self, size, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.heads, self.kv_heads = m["num_heads"], m["num_kv_heads"]
        self.head_dim = m["hidden_size"] // self.heads
        h = m["hidden_size"]
        self.q_proj = nn.Linear(h, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if SDPA_GQA:  # PyTorch ≥ 2.5: flash / memory-efficient kernels, no copies of k and v
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            repeat = self.heads // self.kv_heads  # transformers' repeat_kv
            k = k.repeat_interleave(repeat, dim=1)
            v = v.repeat_interleave(repeat, dim=1)
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim) + mask
            out = torch.softmax(scores, dim=-1) @ v
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


class Mlp(nn.Module):
    def __init__(self, m):
        super().__init__()
        h, i = m["hidden_size"], m["intermediate_size"]
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.input_layernorm = RmsNorm(m["hidden_size"], m["rms_norm_eps"])
        self.self_attn = Attention(m)
        self.post_attention_layernorm = RmsNorm(m["hidden_size"], m["rms_norm_eps"])
        self.mlp = Mlp(m)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class CausalLm(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.embed_tokens = nn.Embedding(m["vocab_size"], m["hidden_size"])
        self.layers = nn.ModuleList(Layer(m) for _ in range(m["num_layers"]))
        self.norm = RmsNorm(m["hidden_size"], m["rms_norm_eps"])
        head_dim = m["hidden_size"] // m["num_heads"]
        inv_freq = 1.0 / m["rope_theta"] ** (torch.arange(0, head_dim, 2).float() / head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        for name, p in self.named_parameters():  # ptrain's init_random
            if p.dim() >= 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, input_ids):
        t, device = input_ids.shape[1], input_ids.device
        freqs = torch.outer(torch.arange(t, device=device).float(), self.inv_freq)
        angles = torch.cat((freqs, freqs), dim=-1)
        cos, sin = angles.cos(), angles.sin()
        mask = None if SDPA_GQA else torch.full((t, t), float("-inf"), device=device).triu(1)
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return F.linear(self.norm(x), self.embed_tokens.weight)  # tied lm_head


def tokenize(example, max_length):
    """<bos> prompt completion <eos>, cut to max_length; labels on completion + eos."""
    prompt = list(example["prompt"].encode())
    completion = list(example["completion"].encode()) + [EOS]
    tokens = ([BOS] + prompt + completion)[:max_length]
    trained = ([False] * (1 + len(prompt)) + [True] * len(completion))[:max_length]
    return tokens[:-1], [tok if keep else -100 for tok, keep in zip(tokens[1:], trained[1:])]


def collate(pairs):
    t = max(len(inputs) for inputs, _ in pairs)
    input_ids = torch.full((len(pairs), t), PAD, dtype=torch.long)
    labels = torch.full((len(pairs), t), -100, dtype=torch.long)
    for row, (inputs, targets) in enumerate(pairs):
        input_ids[row, : len(inputs)] = torch.tensor(inputs)
        labels[row, : len(targets)] = torch.tensor(targets)
    return input_ids, labels, sum(len(inputs) for inputs, _ in pairs)


def step_profiler(path):
    """torch.profiler over the CPU ops of one step (with input shapes and dtypes), started; None without a path."""
    if path is None:
        return None
    profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True)
    profiler.__enter__()
    return profiler


def write_profile(profiler, path, microbatches, tokens):
    """The step's ops in bench_gpu_audit's fields (bench/gpu_audit.py reads both the same way)."""
    profiler.__exit__(None, None, None)
    events = [{"name": e.name(), "thread": e.start_thread_id(), "start_ns": e.start_ns(), "end_ns": e.end_ns(),
               "shapes": e.shapes(), "dtypes": e.dtypes(), "devices": []}
              for e in profiler.profiler.kineto_results.events()]
    with open(path, "w") as f:
        json.dump({"events": events, "microbatches": microbatches, "tokens": tokens, "torch": torch.__version__,
                   "threads": torch.get_num_threads()}, f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-c", "--config", required=True, help="the ptrain config of the same run")
    parser.add_argument("--warmup", type=int, default=2, help="updates before timing")
    parser.add_argument("--steps", type=int, default=5, help="timed updates")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--fused-adamw", action="store_true", help="fused AdamW on the CPU too (as on a GPU)")
    parser.add_argument("--profile", help="write the last step's ops, as torch.profiler saw them, to this JSON file")
    args = parser.parse_args()
    device = torch.device(args.device)
    with open(args.config, "rb") as f:
        run = tomllib.load(f)
    model_cfg = {"rope_theta": 10000.0, "rms_norm_eps": 1e-6, **run["model"]}
    assert model_cfg.get("tie_word_embeddings", True), "the reference implements tied embeddings only"
    if run.get("runtime", {}).get("threads", 0) > 0:
        torch.set_num_threads(run["runtime"]["threads"])
    torch.manual_seed(run.get("seed", 0))

    max_length = run["data"]["max_length"]
    with open(run["data"]["train"]) as f:
        examples = [tokenize(json.loads(line), max_length) for line in f if line.strip()]
    global_size, micro_size = run["batch"]["global_size"], run["batch"]["micro_size"]
    steps = args.warmup + args.steps
    assert len(examples) >= global_size * steps, "dataset too small for the requested steps"
    # Batches collated up front, as ptrain tokenizes (and caches) before training.
    batches = []
    for step in range(steps):
        chunk = examples[step * global_size : (step + 1) * global_size]
        collated = [collate(chunk[i : i + micro_size]) for i in range(0, global_size, micro_size)]
        batches.append([(ids.to(device), labels.to(device), n) for ids, labels, n in collated])

    model = CausalLm(model_cfg).to(device)
    optim = run["optim"]
    decayed = [p for p in model.parameters() if p.dim() >= 2]
    others = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decayed, "weight_decay": optim["weight_decay"]}, {"params": others, "weight_decay": 0.0}],
        lr=optim["lr"], betas=(optim.get("beta1", 0.9), optim.get("beta2", 0.999)), eps=optim.get("eps", 1e-8),
        **({"fused": True} if device.type == "cuda" or args.fused_adamw else {}))

    bf16 = run.get("runtime", {}).get("precision", "fp32") == "bf16-mixed"
    def synchronize():
        if device.type == "cuda":
            torch.cuda.synchronize()

    rates, step_times = [], []
    for step, microbatches in enumerate(batches):
        profiler = step_profiler(args.profile if step == len(batches) - 1 else None)
        synchronize()
        start, tokens = time.perf_counter(), 0
        optimizer.zero_grad(set_to_none=True)
        for input_ids, labels, num_tokens in microbatches:
            # runtime.precision = "bf16-mixed": autocast, the way a PyTorch
            # trainer asks for bf16 (fp32 weights, bf16 matmuls).
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                logits = model(input_ids)
            loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)
            (loss / len(microbatches)).backward()
            tokens += num_tokens
        torch.nn.utils.clip_grad_norm_(model.parameters(), optim["clip_grad_norm"])
        optimizer.step()
        synchronize()
        if profiler is not None:
            write_profile(profiler, args.profile, len(microbatches), tokens)
        if step >= args.warmup:
            step_times.append(time.perf_counter() - start)
            rates.append(tokens / step_times[-1])
    # The fastest step, as bench/runner.py reads ptrain's metrics.jsonl.
    result = {"tokens_per_s": max(rates), "step_s": min(step_times),
              "params": sum(p.numel() for p in model.parameters()), "threads": torch.get_num_threads(),
              "device": str(device), "sdpa": SDPA_GQA}
    if device.type == "cuda":
        result["peak_memory_bytes"] = torch.cuda.max_memory_allocated(device)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
