#!/usr/bin/env python3
"""Writes the bundled KTO dataset: two-digit arithmetic with unpaired answers,
each marked desirable (right) or undesirable (a plausible wrong one).

    python3 scripts/make_kto_data.py --count 512 --seed 2 -o data/arith_kto/train.jsonl

Each line is {"prompt": "37+45=", "completion": "82", "label": true} or, with
a wrong answer, "label": false (TRL's unpaired preference format). Lines
alternate between the two labels, each with a prompt of its own, so the two
counts are equal and KTO's default weights balance them. Prompts come from
the same task as data/arith (scripts/make_arith_data.py), wrong answers from
the DPO data's generator (scripts/make_dpo_data.py). -o writes the file whole
or not at all (scripts/jsonl_output.py); without it the lines go to standard
output.
"""
import argparse
import random

from jsonl_output import write_jsonl
from make_arith_data import make_example
from make_dpo_data import plausible_wrong_answer


def make_line(rng: random.Random, desirable: bool) -> dict:
    example = make_example(rng, "completion")
    answer = int(example["completion"])
    completion = answer if desirable else plausible_wrong_answer(answer, rng)
    return {"prompt": example["prompt"], "completion": str(completion), "label": desirable}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=512)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("-o", "--output", default="-", help="the file to write (default: standard output)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    write_jsonl(args.output, [make_line(rng, desirable=i % 2 == 0) for i in range(args.count)])


if __name__ == "__main__":
    main()
