#!/usr/bin/env python3
"""Writes the bundled SFT dataset: two-digit arithmetic with answers.

    python3 scripts/make_arith_data.py --count 4000 --seed 0 -o data/arith/train.jsonl
    python3 scripts/make_arith_data.py --count 200 --seed 2 --exclude data/arith/train.jsonl -o data/arith/test.jsonl

Each line is {"prompt": "37+45=", "completion": "82"}; with --answer-field answer
(the GRPO prompts, data/arith_grpo) it is {"prompt": "37+45=", "answer": "82"}.
--max-operand 9 makes the one-digit prompts of the bundled GRPO job
(data/arith_grpo/one_digit.jsonl); --ops restricts the operations; --exclude
leaves out the prompts of another file and repeats none (a held-out set:
data/arith/test.jsonl).
A tiny byte-level model learns the format within a few steps and the sums over
a few hundred, so the loss curve of the bundled job shows both. -o writes the
file whole or not at all (scripts/jsonl_output.py); without it the lines go to
standard output.
"""
import argparse
import json
import random

from jsonl_output import write_jsonl


def make_example(rng: random.Random, answer_field: str = "completion", max_operand: int = 99, ops: str = "+-") -> dict:
    a, b = rng.randint(0, max_operand), rng.randint(0, max_operand)
    # The default (both operations) draws the operation after the operands, as
    # the bundled files were made; a single operation draws nothing more.
    op = ops if len(ops) == 1 else ("+" if rng.random() < 0.5 else "-")
    if op == "+":
        return {"prompt": f"{a}+{b}=", answer_field: str(a + b)}
    a, b = max(a, b), min(a, b)
    return {"prompt": f"{a}-{b}=", answer_field: str(a - b)}


def prompts_of(path) -> set:
    with open(path) as lines:
        return {json.loads(line)["prompt"] for line in lines if line.strip()}


def examples(args):
    rng = random.Random(args.seed)
    excluded = prompts_of(args.exclude) if args.exclude else set()
    made = 0
    for _ in range(100 * args.count + 1000):     # bounded: --exclude may leave too few prompts
        if made == args.count:
            return
        example = make_example(rng, args.answer_field, args.max_operand, args.ops)
        if example["prompt"] not in excluded:
            made += 1
            if args.exclude:
                excluded.add(example["prompt"])     # a held-out set holds each prompt once
            yield example
    raise SystemExit(f"make_arith_data.py: found only {made} of {args.count} prompts outside {args.exclude}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--answer-field", default="completion", help="completion (SFT) or answer (GRPO)")
    parser.add_argument("--max-operand", type=int, default=99,
                        help="operands are drawn from 0..N (99: two digits; smaller: an easier task)")
    parser.add_argument("--ops", default="+-", choices=["+-", "+", "-"], help="the operations to draw from")
    parser.add_argument("--exclude", help="a JSONL file whose prompts are left out (for a held-out set)")
    parser.add_argument("-o", "--output", default="-", help="the file to write (default: standard output)")
    args = parser.parse_args()
    if args.max_operand < 0:
        parser.error("--max-operand must be >= 0")
    write_jsonl(args.output, list(examples(args)))


if __name__ == "__main__":
    main()
