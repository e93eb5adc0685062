#!/usr/bin/env python3
"""Writes the calculator job's data: two-digit products, chat-formatted.

    python3 examples/environments/calculator/make_calculator_data.py --seed 0

data/calculator/sft.jsonl teaches the conversation's shape: for each
product "a*b", half the transcripts call the tool and copy its result,

    user "23*47", assistant "<calc>23*47</calc>", user "1081", assistant "1081"

and half answer at once (the right product, which a tiny model cannot
compute, so after SFT it mostly guesses wrong there). data/calculator/train.jsonl
holds the GRPO prompts {"messages": [{"role": "user", "content": "23*47"}],
"answer": "1081"}: the calculator environment (calculator_environment.cpp)
rewards a right final answer, so GRPO learns to prefer the tool.
"""
import argparse
import json
import random
from pathlib import Path


def product(rng: random.Random) -> tuple:
    a, b = rng.randint(10, 99), rng.randint(10, 99)
    return f"{a}*{b}", str(a * b)


def transcript(rng: random.Random) -> dict:
    question, answer = product(rng)
    messages = [{"role": "user", "content": question}]
    if rng.random() < 0.5:
        messages += [{"role": "assistant", "content": f"<calc>{question}</calc>"},
                     {"role": "user", "content": answer}]
    messages.append({"role": "assistant", "content": answer})
    return {"messages": messages}


def prompt(rng: random.Random) -> dict:
    question, answer = product(rng)
    return {"messages": [{"role": "user", "content": question}], "answer": answer}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sft-count", type=int, default=2000)
    parser.add_argument("--prompt-count", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=Path("data/calculator"))
    args = parser.parse_args()
    rng = random.Random(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "sft.jsonl", "w") as sft:
        for _ in range(args.sft_count):
            sft.write(json.dumps(transcript(rng)) + "\n")
    with open(args.out / "train.jsonl", "w") as train:
        for _ in range(args.prompt_count):
            train.write(json.dumps(prompt(rng)) + "\n")


if __name__ == "__main__":
    main()
