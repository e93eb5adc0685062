"""Model directories both ways: transformers loads what ptrain writes, ptrain
loads what transformers writes, each with the same logits."""
import json

import torch

from .harness import sample_ids
from .tiny_models import VOCAB_SIZE, hf_logits, write_checkpoint


def sft_data(path, count=16):
    """Byte-tokenized SFT examples of 40 to 60 tokens: past the sliding window and llama3's original length."""
    lines = [json.dumps({"prompt": f"Question {i}: what is {7 * i} plus {13 + i}?",
                         "completion": f" The answer is {8 * i + 13}."}) for i in range(count)]
    path.write_text("\n".join(lines) + "\n")
    return path


def train_from(session, name, init, **checkpoint):
    """Two SFT steps from `init` (the weights move), final/ written with `checkpoint` settings."""
    config = {
        "model": {"init": str(init)},
        "tokenizer": {"kind": "bytes"},
        "data": {"train": str(sft_data(session.work / "sft.jsonl")), "max_length": 64},
        "batch": {"global_size": 4},
        "optim": {"lr": 1e-2},
        "train": {"max_steps": 2, "log_every": 1},
        "checkpoint": {"every_steps": 0, **checkpoint},
    }
    return session.train(name, config) / "final"


def describe(model_dir):
    config = json.loads((model_dir / "config.json").read_text())
    shards = sorted(p.name for p in model_dir.glob("*.safetensors"))
    index = (model_dir / "model.safetensors.index.json").exists()
    return f"{config.get('dtype', config.get('torch_dtype'))}, {len(shards)} file(s){', index' if index else ''}"


def check_transformers_loads_final(session, family):
    """ptrain trains from a transformers checkpoint and writes final/ in float32 (one file) and in bfloat16
    (shards + index); transformers loads each with ptrain's logits."""
    init = write_checkpoint(family, session.work / "init")
    ids = sample_ids(VOCAB_SIZE)
    initial = hf_logits(init, ids, session.device)
    for name, settings in (("fp32", {"save_dtype": "float32"}),
                           ("bf16_sharded", {"save_dtype": "bfloat16", "max_shard_size": "200KB"})):
        final = train_from(session, name, init, **settings)
        ours = session.ptrain_logits(final, ids)
        theirs = hf_logits(final, ids, session.device)
        session.require_difference(f"{family}: ptrain's training", theirs, initial)
        session.compare_logits(f"{family} final/ {name} ({describe(final)}) in transformers", ours, theirs)


def check_ptrain_loads_transformers(session, family):
    """transformers writes a checkpoint in float32 (one file) and in bfloat16 (shards + index); ptrain loads
    each with transformers' logits."""
    ids = sample_ids(VOCAB_SIZE, seed=1)
    for name, dtype, shard in (("fp32", torch.float32, None), ("bf16_sharded", torch.bfloat16, "200KB")):
        directory = write_checkpoint(family, session.work / f"hf_{name}", dtype, shard)
        ours = session.ptrain_logits(directory, ids)
        theirs = hf_logits(directory, ids, session.device)
        session.compare_logits(f"transformers {family} {name} ({describe(directory)}) in ptrain", ours, theirs)
