"""Tiny random checkpoints of the four families ptrain reads (docs/models.md),
written by transformers itself with save_pretrained."""
import torch

# What each family adds to the common sizes below: llama3 rope scaling and an
# explicit head_dim (head_dim · heads ≠ hidden_size), Qwen2's q/k/v bias and
# tied embeddings, Qwen3's q/k norms, Mistral's sliding window (shorter than
# the 40 positions the checks compare).
FAMILIES = {
    "llama": dict(model_type="llama", head_dim=32, attention_bias=False, tie_word_embeddings=False,
                  rope={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                        "original_max_position_embeddings": 16, "rope_theta": 500000.0}),
    "qwen2": dict(model_type="qwen2", tie_word_embeddings=True, rope={"rope_type": "default", "rope_theta": 1000000.0}),
    "qwen3": dict(model_type="qwen3", head_dim=32, tie_word_embeddings=True,
                  rope={"rope_type": "default", "rope_theta": 1000000.0}),
    "mistral": dict(model_type="mistral", sliding_window=16, tie_word_embeddings=False,
                    rope={"rope_type": "default", "rope_theta": 10000.0}),
}
VOCAB_SIZE = 512  # ≥ 259: ptrain's byte tokenizer trains these models


def family_config(family):
    """A transformers config of `family` at the tiny sizes."""
    from transformers import AutoConfig

    settings = dict(FAMILIES[family])
    rope = settings.pop("rope")
    sizes = dict(vocab_size=VOCAB_SIZE, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.2)
    return AutoConfig.for_model(settings.pop("model_type"), **sizes, **settings, rope_parameters=rope)


def random_model(config, seed=0):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config).float().eval()


def write_checkpoint(family, directory, dtype=torch.float32, max_shard_size=None):
    """save_pretrained of a random `family` model; sharded with an index when max_shard_size is given."""
    model = random_model(family_config(family)).to(dtype)
    kwargs = {"max_shard_size": max_shard_size} if max_shard_size else {}
    model.save_pretrained(directory, **kwargs)
    return directory


def hf_logits(model_dir, ids, device):
    """transformers' float32 logits of a model directory (eager attention). [rows, T, vocab]"""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    return model_logits(model.to(device).eval(), ids, device)


def model_logits(model, ids, device):
    with torch.no_grad():
        return model(torch.tensor(ids, device=device)).logits.float().cpu()
