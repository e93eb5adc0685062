"""ptrain against the real client libraries (transformers, PEFT, TRL) as
oracles: the checks by name, for ctest (tests/clients/run_check.py, label
`clients`) and bench/hf_parity.py. docs/clients.md describes each one.

Importing this package loads no library; a check imports what it needs when it runs.
"""
import importlib
import json
import tarfile
from functools import partial
from pathlib import Path

FAMILIES = ("llama", "qwen2", "qwen3", "mistral")
# The bundled tokenizers (tests/fixtures/tokenizers) that have a chat template.
TEMPLATE_TOKENIZERS = ("qwen3", "gemma3")

# name → (module, function, keyword arguments)
CHECKS = {
    **{f"transformers_loads_final_{f}": ("model_files", "check_transformers_loads_final", {"family": f})
       for f in FAMILIES},
    **{f"ptrain_loads_transformers_{f}": ("model_files", "check_ptrain_loads_transformers", {"family": f})
       for f in FAMILIES},
    **{f"chat_template_{t}": ("chat_templates", "check_chat_template", {"name": t}) for t in TEMPLATE_TOKENIZERS},
    "peft_loads_ptrain_adapter": ("peft_adapters", "check_peft_loads_ptrain_adapter", {}),
    "ptrain_loads_peft_adapter": ("peft_adapters", "check_ptrain_loads_peft_adapter", {}),
    "trl_dpo_losses": ("trl_dpo", "check_dpo_losses", {}),
    "trl_grpo_losses": ("trl_grpo", "check_grpo_losses", {}),
    "trl_kto_losses": ("trl_kto", "check_kto_losses", {}),
    "trl_kto_pairs": ("trl_kto", "check_kto_pairs", {}),
    "transformers_generation": ("generation", "check_transformers_generation", {}),
}


def bundled_tokenizers_with_template():
    """The tokenizers of tests/fixtures/tokenizers whose tokenizer_config.json has a chat template."""
    names = []
    for archive in sorted((Path(__file__).resolve().parents[2] / "fixtures" / "tokenizers").glob("*.tar.xz")):
        with tarfile.open(archive) as tar:
            config = json.load(tar.extractfile("tokenizer_config.json"))
        if config.get("chat_template"):
            names.append(archive.name.removesuffix(".tar.xz"))
    return names


def load_check(name):
    """The function `check(session)` of a check name."""
    if name not in CHECKS:
        raise KeyError(f"no client check named '{name}'; the checks: {', '.join(CHECKS)}")
    module, function, kwargs = CHECKS[name]
    return partial(getattr(importlib.import_module(f"{__name__}.{module}"), function), **kwargs)
