"""`ptrain generate` against transformers: the same greedy completions as
transformers' own generate(), and each completion token's log-probability
as transformers' log-softmax gives it."""
import json

import torch

from .model_files import train_from
from .tiny_models import write_checkpoint

# float32 logits on both sides; an absolute bound on log-probabilities of magnitude ~6
LOGPROB_TOLERANCE = 1e-4
PROMPTS = ["Question 3: what is 21 plus 16?", "Question 9: what is 63 plus 22?", "Hello"]
MAX_NEW_TOKENS = 24


def ptrain_generate(session, model_dir, prompts_file, temperature):
    """ptrain's completions, one dict a line (docs/generation.md#output)."""
    device = "auto" if session.device.startswith("cuda") else "cpu"
    out = session.run([session.executable("ptrain"), "generate", "-m", model_dir, "--prompts", prompts_file,
                       "--format", "jsonl", "--logprobs", "--temperature", temperature, "--seed", 3,
                       "--max-new-tokens", MAX_NEW_TOKENS, "--device", device])
    return [json.loads(line) for line in out.splitlines()]


def their_logprobs(model, line, device):
    ids = line["prompt_ids"] + line["completion_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([ids[:-1]], device=device)).logits.float()[0].cpu()
    start = len(line["prompt_ids"]) - 1
    rows = torch.log_softmax(logits[start:start + len(line["completion_ids"])].double(), dim=-1)
    return rows.gather(1, torch.tensor(line["completion_ids"]).unsqueeze(1)).squeeze(1)


def their_greedy(model, line, device):
    with torch.no_grad():
        out = model.generate(torch.tensor([line["prompt_ids"]], device=device), do_sample=False,
                             max_new_tokens=MAX_NEW_TOKENS, eos_token_id=257, pad_token_id=258)
    return out[0, len(line["prompt_ids"]):].tolist()


def check_transformers_generation(session):
    """A 2-step SFT run's final/ (Qwen2 sizes, byte tokenizer): ptrain's greedy completions are transformers'
    greedy generate(), and ptrain's logprobs of greedy and sampled completions are transformers'."""
    from transformers import AutoModelForCausalLM

    final = train_from(session, "generation", write_checkpoint("qwen2", session.work / "init"))
    prompts_file = session.work / "prompts.jsonl"
    prompts_file.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS))
    model = AutoModelForCausalLM.from_pretrained(final, dtype=torch.float32, attn_implementation="eager")
    model = model.to(session.device).eval()
    for temperature in (0, 1):
        for k, line in enumerate(ptrain_generate(session, final, prompts_file, temperature)):
            ours = torch.tensor(line["logprobs"], dtype=torch.float64)
            difference = (ours - their_logprobs(model, line, session.device)).abs().max().item()
            session.compare(f"temperature {temperature}, prompt {k}: logprobs", difference, LOGPROB_TOLERANCE,
                            f"{len(ours)} tokens, stop {line['stop_reason']}")
            if temperature == 0:
                theirs = their_greedy(model, line, session.device)
                mismatches = sum(a != b for a, b in zip(line["completion_ids"], theirs))
                mismatches += abs(len(theirs) - len(line["completion_ids"]))
                session.compare(f"greedy, prompt {k}: tokens unlike transformers' generate()", mismatches, 0,
                                f"ours {line['completion_ids'][:8]}…, theirs {theirs[:8]}…")
