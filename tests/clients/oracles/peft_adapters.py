"""LoRA adapters both ways: PEFT loads the adapter ptrain writes, ptrain
starts a run from an adapter PEFT wrote, each with the same logits."""
from safetensors.torch import load_file

from .harness import sample_ids
from .model_files import sft_data
from .tiny_models import VOCAB_SIZE, model_logits, write_checkpoint

RANK, ALPHA = 4, 8.0
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# Llama with its explicit head_dim (q_proj wider than hidden_size), Qwen2 with q/k/v biases.
FAMILIES = ("llama", "qwen2")


def lora_run(session, name, base, steps, lr, **lora):
    """A LoRA SFT run on `base`, every target module; final/ holds the adapter, final/merged/ the model."""
    config = {
        "model": {"init": str(base)},
        "tokenizer": {"kind": "bytes"},
        "data": {"train": str(sft_data(session.work / "sft.jsonl")), "max_length": 64},
        "batch": {"global_size": 4},
        "optim": {"lr": lr, "weight_decay": 0.0},
        "train": {"max_steps": steps, "log_every": 1},
        "checkpoint": {"every_steps": 0},
        "lora": {"rank": RANK, "alpha": ALPHA, "target_modules": TARGETS, "save_merged": True, **lora},
    }
    return session.train(name, config) / "final"


def base_model(init, device):
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(init, dtype=torch.float32, attn_implementation="eager").to(device)


def check_peft_loads_ptrain_adapter(session):
    """ptrain trains an adapter for two steps; PeftModel.from_pretrained(base, final/) gives the logits of the
    model ptrain merged into final/merged/."""
    from peft import PeftModel

    for family in FAMILIES:
        init = write_checkpoint(family, session.work / f"{family}_base")
        final = lora_run(session, f"{family}_lora", init, steps=2, lr=1e-2)
        ids = sample_ids(VOCAB_SIZE)
        base = base_model(init, session.device)
        base_logits = model_logits(base, ids, session.device)
        theirs = model_logits(PeftModel.from_pretrained(base, final).eval(), ids, session.device)
        session.require_difference(f"{family}: ptrain's trained adapter", theirs, base_logits)
        ours = session.ptrain_logits(final / "merged", ids)
        session.compare_logits(f"{family}: PEFT with ptrain's final/ vs ptrain's final/merged/", ours, theirs)


def check_ptrain_loads_peft_adapter(session):
    """PEFT makes and saves an adapter with random A and B (get_peft_model + save_pretrained); a ptrain run
    with lora.init = that directory starts from it: one step at lr 1e-30 moves no float32 weight, so its
    final/ adapter is PEFT's exactly and final/merged/ gives PEFT's logits."""
    from peft import LoraConfig, get_peft_model

    for family in FAMILIES:
        init = write_checkpoint(family, session.work / f"{family}_base")
        config = LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=TARGETS, lora_dropout=0.0,
                            init_lora_weights=False, task_type="CAUSAL_LM")
        ids = sample_ids(VOCAB_SIZE, seed=2)
        base = base_model(init, session.device)
        base_logits = model_logits(base, ids, session.device)
        peft_model = get_peft_model(base, config).eval()
        adapter = session.work / f"{family}_peft_adapter"
        peft_model.save_pretrained(adapter)
        theirs = model_logits(peft_model, ids, session.device)
        session.require_difference(f"{family}: PEFT's adapter", theirs, base_logits)
        final = lora_run(session, f"{family}_from_peft", init, steps=1, lr=1e-30, init=str(adapter))
        ours = session.ptrain_logits(final / "merged", ids)
        session.compare_logits(f"{family}: ptrain run from PEFT's adapter vs PEFT", ours, theirs)
        saved = load_file(final / "adapter_model.safetensors")
        started = load_file(adapter / "adapter_model.safetensors")
        largest = max((saved[name] - started[name]).abs().max().item() for name in started)
        session.compare(f"{family}: ptrain's final/ adapter vs PEFT's (same keys, same values)",
                        largest if saved.keys() == started.keys() else float("inf"), 0.0)
