"""GRPO reward functions in Python for the bundled arithmetic job (docs/grpo.md).

Name one in reward_funcs as python:examples/rewards/arith_rewards.py:FUNCTION.
ptrain calls it once per step with the step's whole batch as keyword
arguments of parallel lists (prompts, completions, completion_tokens,
truncated, and every dataset field, here `answer`), and it returns one
number per completion, as TRL's reward_funcs do.
"""
import re

# A plain decimal, as the built-in closeness reads one (not "+5", "5.", "1e3" or "inf").
_NUMBER = re.compile(r"-?[0-9]{1,15}(\.[0-9]+)?")


def _number(text):
    text = text.strip(" \t\r\n")
    return float(text) if _NUMBER.fullmatch(text) else None


def closeness(prompts, completions, answer, **kwargs):
    """max(0, 1 - |y - a| / 10): the built-in `closeness`, written in Python."""
    scores = []
    for completion, gold in zip(completions, answer):
        guess, target = _number(completion), _number(gold)
        scores.append(0.0 if guess is None or target is None else max(0.0, 1.0 - abs(guess - target) / 10.0))
    return scores


def brevity(prompts, completions, completion_tokens, truncated, **kwargs):
    """1 for an answer of at most 3 tokens that ended by itself, less for longer ones."""
    return [0.0 if cut else min(1.0, 3.0 / tokens) for tokens, cut in zip(completion_tokens, truncated)]
