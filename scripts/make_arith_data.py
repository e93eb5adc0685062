#!/usr/bin/env python3
"""Writes the bundled SFT dataset: two-digit arithmetic with answers.

    python3 scripts/make_arith_data.py --count 4000 --seed 0 > data/arith/train.jsonl

Each line is {"prompt": "37+45=", "completion": "82"}; with --answer-field answer
(the GRPO prompts, data/arith_grpo) it is {"prompt": "37+45=", "answer": "82"}.
--max-operand 9 makes the one-digit prompts of the bundled GRPO job
(data/arith_grpo/one_digit.jsonl); --ops restricts the operations. A tiny byte-level model
learns the format within a few steps and the sums over a few hundred, so the
loss curve of the bundled job shows both.
"""
import argparse
import json
import random


def make_example(rng: random.Random, answer_field: str, max_operand: int = 99, ops: str = "+-") -> dict:
    a, b = rng.randint(0, max_operand), rng.randint(0, max_operand)
    # The default (both operations) draws the operation after the operands, as
    # the bundled files were made; a single operation draws nothing more.
    op = ops if len(ops) == 1 else ("+" if rng.random() < 0.5 else "-")
    if op == "+":
        return {"prompt": f"{a}+{b}=", answer_field: str(a + b)}
    a, b = max(a, b), min(a, b)
    return {"prompt": f"{a}-{b}=", answer_field: str(a - b)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--answer-field", default="completion", help="completion (SFT) or answer (GRPO)")
    parser.add_argument("--max-operand", type=int, default=99,
                        help="operands are drawn from 0..N (99: two digits; smaller: an easier task)")
    parser.add_argument("--ops", default="+-", choices=["+-", "+", "-"], help="the operations to draw from")
    args = parser.parse_args()
    if args.max_operand < 0:
        parser.error("--max-operand must be >= 0")
    rng = random.Random(args.seed)
    for _ in range(args.count):
        print(json.dumps(make_example(rng, args.answer_field, args.max_operand, args.ops)))


if __name__ == "__main__":
    main()
