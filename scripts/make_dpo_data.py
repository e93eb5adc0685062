#!/usr/bin/env python3
"""Writes the bundled DPO preference dataset: two-digit arithmetic, the right
answer preferred to a plausible wrong one.

    python3 scripts/make_dpo_data.py --count 512 --seed 1 > data/arith_prefs/train.jsonl

Each line is {"prompt": "37+45=", "chosen": "82", "rejected": "72"}. Prompts
come from the same task as data/arith (scripts/make_arith_data.py); the wrong
answers are the mistakes a learner makes: off by one or two, a dropped or
doubled carry (±10), or swapped digits.
"""
import argparse
import json
import random

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
    args = parser.parse_args()
    rng = random.Random(args.seed)
    for _ in range(args.count):
        print(json.dumps(make_pair(rng)))


if __name__ == "__main__":
    main()
