"""What the TRL checks share: a real TRL trainer over a tiny model, and ptrain's
loss code through tests/clients/loss_oracle.cpp.

The trainers are built the way a user builds them (a config object, a model
directory, a dataset, a tokenizer), so that TRL itself maps its config to the
attributes its loss code reads; the checks then call that loss code on their
own log-probs in place of a model's.
"""
import json

import torch

TINY_VOCAB = 32


def tiny_model_dir(work):
    """A 1-layer Llama of vocab TINY_VOCAB, saved once: TRL builds its reference model from the directory."""
    from transformers import LlamaConfig, LlamaForCausalLM

    directory = work / "tiny_llama"
    if not directory.exists():
        torch.manual_seed(0)
        config = LlamaConfig(vocab_size=TINY_VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                             num_attention_heads=2, num_key_value_heads=1)
        LlamaForCausalLM(config).save_pretrained(directory)
    return str(directory)


def tiny_tokenizer():
    """Whitespace-separated words t0 … t29, <pad> and <eos>: enough for TRL to tokenize a dataset."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"t{i}": i for i in range(TINY_VOCAB - 2)}
    vocab.update({"<pad>": TINY_VOCAB - 2, "<eos>": TINY_VOCAB - 1})
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="t0"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", eos_token="<eos>")


def trainer_arguments(work):
    """TrainingArguments every TRL config here shares: CPU, no reporting, output in the scratch directory."""
    return dict(output_dir=str(work / "trl_output"), report_to=[], use_cpu=True, save_strategy="no",
                logging_strategy="no", disable_tqdm=True)


def ptrain_losses(session, request):
    """The plugin's loss code on `request` (loss_oracle.cpp's format); its JSON response."""
    stdout = session.run([session.executable("ptrain_loss_oracle")], stdin=json.dumps(request))
    return json.loads(stdout)


def relative_error(ours, theirs):
    """max |ours − theirs| / max(|theirs|, 1e-3), over lists or numbers, in float64."""
    ours = torch.as_tensor(ours, dtype=torch.float64)
    theirs = torch.as_tensor(theirs, dtype=torch.float64)
    return ((ours - theirs).abs() / theirs.abs().clamp(min=1e-3)).max().item()
