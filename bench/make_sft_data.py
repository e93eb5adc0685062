"""Synthetic SFT datasets for the benchmarks ({"prompt", "completion"} JSONL, ASCII).

Lengths are in byte-tokenizer tokens: <bos> + prompt bytes + completion bytes
+ <eos>, so one ASCII character is one token.

  fixed     every example exactly --length tokens (no padding anywhere), so a
            throughput comparison measures compute, not batching policy
  longtail  lengths drawn from a lognormal (median --median, shape --sigma),
            capped at --max-length: many short answers, a few long ones, as
            in instruction data; the padding-waste figure runs on it

    .venv/bin/python bench/make_sft_data.py fixed --length 128 --count 512 -o bench/out/fixed_128.jsonl
"""
import argparse
import json
import math
import random

WORDS = ("the a of to and in is it that for on with as was at by an be this from or have are not "
         "model token batch step loss mean sum grad norm layer head value key query rope").split()


def text(rng, length):
    """Random words, exactly `length` characters."""
    out = ""
    while len(out) < length:
        out += rng.choice(WORDS) + " "
    return out[:length]


def example(rng, total, prompt_share):
    """An example of `total` tokens, bos and eos included."""
    body = max(total - 2, 2)
    prompt = max(1, min(body - 1, round(body * prompt_share)))
    return {"prompt": text(rng, prompt), "completion": text(rng, body - prompt)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["fixed", "longtail"])
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--count", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--prompt-share", type=float, default=0.25, help="share of each example that is prompt")
    parser.add_argument("--length", type=int, default=128, help="fixed: tokens per example")
    parser.add_argument("--median", type=float, default=96, help="longtail: median tokens")
    parser.add_argument("--sigma", type=float, default=0.9, help="longtail: lognormal shape")
    parser.add_argument("--max-length", type=int, default=512, help="longtail: cap")
    args = parser.parse_args()

    rng = random.Random(args.seed)
    with open(args.output, "w") as out:
        for _ in range(args.count):
            if args.kind == "fixed":
                total = args.length
            else:
                total = min(args.max_length, max(8, round(rng.lognormvariate(math.log(args.median), args.sigma))))
            out.write(json.dumps(example(rng, total, args.prompt_share)) + "\n")


if __name__ == "__main__":
    main()
