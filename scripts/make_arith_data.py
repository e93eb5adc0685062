#!/usr/bin/env python3
"""Writes the bundled SFT dataset: two-digit arithmetic with answers.

    python3 scripts/make_arith_data.py --count 4000 --seed 0 > data/arith/train.jsonl

Each line is {"prompt": "37+45=", "completion": "82"}; with --answer-field answer
(the GRPO prompts, data/arith_grpo) it is {"prompt": "37+45=", "answer": "82"}. A tiny byte-level model
learns the format within a few steps and the sums over a few hundred, so the
loss curve of the bundled job shows both.
"""
import argparse
import json
import random


def make_example(rng: random.Random, answer_field: str) -> dict:
    a, b = rng.randint(0, 99), rng.randint(0, 99)
    if rng.random() < 0.5:
        return {"prompt": f"{a}+{b}=", answer_field: str(a + b)}
    a, b = max(a, b), min(a, b)
    return {"prompt": f"{a}-{b}=", answer_field: str(a - b)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--answer-field", default="completion", help="completion (SFT) or answer (GRPO)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    for _ in range(args.count):
        print(json.dumps(make_example(rng, args.answer_field)))


if __name__ == "__main__":
    main()
