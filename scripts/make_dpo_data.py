#!/usr/bin/env python3
"""Writes the bundled DPO preference dataset: two-digit arithmetic, the right
answer preferred to a plausible wrong one.

    python3 scripts/make_dpo_data.py --count 512 --seed 1 -o data/arith_prefs/train.jsonl

Each line is {"prompt": "37+45=", "chosen": "82", "rejected": "72"}. Prompts
come from the same task as data/arith (scripts/make_arith_data.py); the wrong
answers are the mistakes a learner makes: off by one or two, a dropped or
doubled carry (±10), or swapped digits. -o writes the file whole or not at all
(scripts/jsonl_output.py); without it the lines go to standard output.
"""
import argparse
import random

from jsonl_output import write_jsonl
from make_arith_data import make_example


def plausible_wrong_answer(answer: int, rng: random.Random) -> int:
    candidates = {answer + d for d in (-2, -1, 1, 2, -10, 10)}
    if answer >= 10:
        candidates.add(int(str(answer)[::-1]))
    candidates = sorted(c for c in candidates if c >= 0 and c != answer)
    return rng.choice(candidates)


def make_pair(rng: random.Random) -> dict:
    example = make_example(rng)
    answer = int(example["completion"])
    wrong = plausible_wrong_answer(answer, rng)
    return {"prompt": example["prompt"], "chosen": str(answer), "rejected": str(wrong)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=512)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("-o", "--output", default="-", help="the file to write (default: standard output)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    write_jsonl(args.output, [make_pair(rng) for _ in range(args.count)])


if __name__ == "__main__":
    main()
