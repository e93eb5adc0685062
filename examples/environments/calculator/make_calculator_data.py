#!/usr/bin/env python3
"""Writes the calculator job's data: products of one-digit numbers, chat-formatted.

    python3 examples/environments/calculator/make_calculator_data.py --seed 0

data/calculator/sft.jsonl teaches the conversation's shape: for each
product "a*b", half the transcripts call the tool and copy its result,

    user "7*8", assistant "<calc>7*8</calc>", user "56", assistant "56"

and half answer at once with a guess: the product of two other one-digit
numbers, as a model that cannot multiply would answer (so after SFT the
direct answers are mostly wrong and the tool calls mostly right). data/calculator/train.jsonl
holds the GRPO prompts {"messages": [{"role": "user", "content": "7*8"}],
"answer": "56"}: the calculator environment (calculator_environment.cpp)
rewards a right final answer, so GRPO learns to prefer the tool.
"""
import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from jsonl_output import write_jsonl  # noqa: E402  (each file whole or not at all)


def product(rng: random.Random) -> tuple:
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    return f"{a}*{b}", str(a * b)


def transcript(rng: random.Random) -> dict:
    question, answer = product(rng)
    messages = [{"role": "user", "content": question}]
    if rng.random() < 0.5:
        messages += [{"role": "assistant", "content": f"<calc>{question}</calc>"},
                     {"role": "user", "content": answer}]
    else:
        answer = product(rng)[1]  # a guess
    messages.append({"role": "assistant", "content": answer})
    return {"messages": messages}


def prompt(rng: random.Random) -> dict:
    question, answer = product(rng)
    return {"messages": [{"role": "user", "content": question}], "answer": answer}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sft-count", type=int, default=2000)
    parser.add_argument("--prompt-count", type=int, default=500)
    parser.add_argument("--out", type=Path, default=Path("data/calculator"))
    args = parser.parse_args()
    rng = random.Random(args.seed)
    write_jsonl(args.out / "sft.jsonl", [transcript(rng) for _ in range(args.sft_count)])
    write_jsonl(args.out / "train.jsonl", [prompt(rng) for _ in range(args.prompt_count)])


if __name__ == "__main__":
    main()
