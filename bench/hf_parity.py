#!/usr/bin/env python3
"""Hugging Face parity: ptrain's model directories and transformers' agree.

Three checks (issue 23, item 3), each recorded with its largest difference:

1. ptrain trains a small model with the Qwen3 tokenizer and writes final/;
   transformers' AutoModelForCausalLM loads final/ and its logits equal the
   logits ptrain computes from the same directory (bench_dump_logits).
2. The tokenizer files and chat template in that final/ give the same text
   and ids through AutoTokenizer.apply_chat_template as through
   `ptrain tokenize --template auto` (with and without the generation prompt).
3. transformers writes randomly initialised Llama (llama3 rope scaling,
   explicit head_dim), Qwen2 (q/k/v bias, tied embeddings), Qwen3 (q/k norm)
   and Mistral (sliding window shorter than the sequence) checkpoints with
   save_pretrained; ptrain loads each with the same logits.

Run after building (scripts/build.sh, or scripts/build-gpu.sh on a GPU
machine with PTRAIN_BUILD_DIR=build-gpu):

    python3 bench/hf_parity.py --device cuda      # writes bench/results_hf_parity.json

Without transformers installed, --ptrain-only runs ptrain's half of checks 1
and 2 (training, logits, tokenizing) as a smoke test and writes no results.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / os.environ.get("PTRAIN_BUILD_DIR", "build")
LOGIT_TOLERANCE = 1e-4  # float32 on both sides; relative to the largest |logit|
CONVERSATIONS = [
    [{"role": "user", "content": "2+3="}, {"role": "assistant", "content": "5"}],
    [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Héllo — wie geht's? 你好"},
        {"role": "assistant", "content": "Gut, danke.\nAnd you?"},
        {"role": "user", "content": "  spaces  and\ttabs "},
        {"role": "assistant", "content": "fine"},
    ],
    [{"role": "user", "content": "Only a question, no answer yet."}],
]


def run(command, **kwargs):
    print("+", " ".join(str(part) for part in command), flush=True)
    return subprocess.run([str(part) for part in command], check=True, text=True, capture_output=True, **kwargs)


def read_safetensors(path):
    dtypes = {"F32": torch.float32, "I64": torch.int64, "BF16": torch.bfloat16}
    data = Path(path).read_bytes()
    (header_size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_size])
    body = data[8 + header_size :]
    tensors = {}
    for name, info in header.items():
        if name != "__metadata__":
            begin, end = info["data_offsets"]
            raw = torch.frombuffer(bytearray(body[begin:end]), dtype=dtypes[info["dtype"]])
            tensors[name] = raw.view(info["shape"])
    return tensors


def ptrain_logits(model_dir, ids, device, work):
    out = Path(work) / "ptrain_logits.safetensors"
    rows = ";".join(",".join(str(i) for i in row) for row in ids)
    run([BUILD / "bin" / "bench_dump_logits", model_dir, rows, out, device])
    return read_safetensors(out)["logits"]


def train_small_model(work, device):
    """A 20-step SFT run on chat data with the Qwen3 tokenizer; returns final/."""
    arith = [json.loads(line) for line in (ROOT / "data/arith/train.jsonl").read_text().splitlines()[:256]]
    chat = Path(work) / "chat.jsonl"
    chat.write_text(
        "".join(
            json.dumps({"messages": [{"role": "user", "content": e["prompt"]}, {"role": "assistant", "content": e["completion"]}]})
            + "\n"
            for e in arith
        )
    )
    config = Path(work) / "sft.toml"
    config.write_text(
        f"""plugin = "sft"
seed = 0
output_dir = "{Path(work) / 'run'}"
[model]
vocab_size = 151936
hidden_size = 64
intermediate_size = 128
num_layers = 2
num_heads = 4
num_kv_heads = 2
max_position_embeddings = 128
tie_word_embeddings = true
[tokenizer]
path = "{BUILD / 'fixtures/tokenizers/qwen3/tokenizer.json'}"
chat_template = "auto"
[data]
train = "{chat}"
max_length = 64
[batch]
global_size = 8
[optim]
lr = 1e-3
[train]
max_steps = 20
log_every = 10
[runtime]
device = "{device}"
"""
    )
    run([BUILD / "bin" / "ptrain", "train", "-c", config, "--overwrite"])
    return Path(work) / "run" / "final"


def ptrain_chat_ids(final, conversation, generation_prompt):
    extra = ["--generation-prompt"] if generation_prompt else []
    stdin = json.dumps({"messages": conversation}) + "\n"
    tokenize = [BUILD / "bin" / "ptrain", "tokenize", "--tokenizer", final / "tokenizer.json", "--template", "auto"]
    ids = json.loads(run(tokenize + extra, input=stdin).stdout)
    text = json.loads(run(tokenize + extra + ["--render"], input=stdin).stdout)
    return text, ids


def relative_difference(a, b):
    return ((a.double() - b.double()).abs().max() / b.double().abs().max().clamp(min=1e-12)).item()


def check(results, name, value, tolerance, detail=""):
    passed = value <= tolerance
    results.append({"name": name, "max_difference": value, "tolerance": tolerance, "passed": passed, "detail": detail})
    print(f"{'ok  ' if passed else 'FAIL'} {name}: {value:.3g} (tolerance {tolerance:g}) {detail}", flush=True)


def sample_ids(vocab_size, rows=2, length=48, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (rows, length), generator=generator).tolist()


def hf_logits(model_dir, ids, device):
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    except TypeError:  # transformers 4 names it torch_dtype
        model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32, attn_implementation="eager")
    model = model.to(device).eval()
    with torch.no_grad():
        return model(torch.tensor(ids, device=device)).logits.float().cpu()


def check_trained_model(results, final, device, work, with_transformers):
    config = json.loads((final / "config.json").read_text())
    ids = sample_ids(config["vocab_size"])
    ours = ptrain_logits(final, ids, device, work)
    if with_transformers:
        theirs = hf_logits(final, ids, device)
        check(results, "ptrain final/ loads in transformers: logits", relative_difference(ours, theirs), LOGIT_TOLERANCE,
              f"({config.get('model_type')}, {list(ours.shape)})")


def apply_chat_template_ids(tokenizer, conversation, generation_prompt):
    encoded = tokenizer.apply_chat_template(conversation, tokenize=True, add_generation_prompt=generation_prompt)
    return list(encoded["input_ids"]) if hasattr(encoded, "keys") else list(encoded)


def check_chat_template(results, final, with_transformers):
    if with_transformers:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(final)
    mismatches, cases = [], 0
    for number, conversation in enumerate(CONVERSATIONS):
        for generation_prompt in (False, True):
            if not generation_prompt and conversation[-1]["role"] != "assistant":
                continue
            text, ids = ptrain_chat_ids(final, conversation, generation_prompt)
            cases += 1
            if not with_transformers:
                continue
            hf_text = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=generation_prompt)
            hf_ids = apply_chat_template_ids(tokenizer, conversation, generation_prompt)
            if text != hf_text or ids != hf_ids:
                mismatches.append({"conversation": number, "generation_prompt": generation_prompt, "ptrain_text": text,
                                   "hf_text": hf_text, "ptrain_ids": ids, "hf_ids": hf_ids})
    if with_transformers:
        check(results, "final/ chat template: apply_chat_template text and ids", float(len(mismatches)), 0.0,
              f"({cases} renderings; mismatches: {json.dumps(mismatches)[:2000]})")


FAMILIES = {
    "llama": dict(
        model_type="llama", head_dim=32, attention_bias=False, tie_word_embeddings=False,
        rope={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 16, "rope_theta": 500000.0}),
    "qwen2": dict(model_type="qwen2", tie_word_embeddings=True, rope={"rope_type": "default", "rope_theta": 1000000.0}),
    "qwen3": dict(model_type="qwen3", head_dim=32, tie_word_embeddings=True,
                  rope={"rope_type": "default", "rope_theta": 1000000.0}),
    "mistral": dict(model_type="mistral", sliding_window=16, tie_word_embeddings=False,
                    rope={"rope_type": "default", "rope_theta": 10000.0}),
}


def write_hf_checkpoint(family, settings, directory):
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    settings = dict(settings)
    rope = settings.pop("rope")
    sizes = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.2)
    if int(transformers.__version__.split(".")[0]) >= 5:
        rope_keys = {"rope_parameters": rope}
    else:
        rope_keys = {"rope_theta": rope["rope_theta"]}
        if rope["rope_type"] != "default":
            rope_keys["rope_scaling"] = {k: v for k, v in rope.items() if k != "rope_theta"}
    config = AutoConfig.for_model(settings.pop("model_type"), **sizes, **settings, **rope_keys)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).float()
    model.save_pretrained(directory)
    return config.vocab_size


def check_hf_checkpoints(results, device, work):
    for family, settings in FAMILIES.items():
        directory = Path(work) / f"hf_{family}"
        vocab_size = write_hf_checkpoint(family, settings, directory)
        ids = sample_ids(vocab_size, length=40, seed=1)  # longer than the sliding window and the llama3 original length
        ours = ptrain_logits(directory, ids, device, work)
        theirs = hf_logits(directory, ids, device)
        check(results, f"transformers {family} checkpoint loads in ptrain: logits", relative_difference(ours, theirs),
              LOGIT_TOLERANCE, f"({list(ours.shape)})")


def versions():
    info = {"torch": torch.__version__, "cuda": torch.version.cuda}
    if torch.cuda.is_available():
        info["device_name"] = torch.cuda.get_device_name(0)
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except ImportError:
        pass
    return info


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--ptrain-only", action="store_true", help="smoke test without transformers; writes no results")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results_hf_parity.json"))
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # both sides in true float32
    torch.backends.cudnn.allow_tf32 = False
    with_transformers = not args.ptrain_only
    results = []
    with tempfile.TemporaryDirectory(prefix="ptrain_hf_parity_") as work:
        final = train_small_model(work, args.device)
        check_trained_model(results, final, args.device, work, with_transformers)
        check_chat_template(results, final, with_transformers)
        if with_transformers:
            check_hf_checkpoints(results, args.device, work)
    if not with_transformers:
        print("ptrain half ran (training, logits, tokenizing); no comparison without transformers")
        return 0
    report = {"device": args.device, **versions(), "command": "python3 bench/hf_parity.py --device " + args.device,
              "checks": results}
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0 if all(r["passed"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
