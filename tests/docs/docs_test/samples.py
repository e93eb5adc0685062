"""A sample output (a plain block marked `sample-of=ID`) against what block ID
printed. The sample is read in chunks separated by `...` lines; each chunk must
be a run of consecutive lines of the output, in order, so a line the sample
leaves out inside a chunk (or one it invents) is a failure. What changes from
run to run is compared by its shape only: clock times, durations, rates,
thread counts and hashes; `…` in a sample line stands for anything."""
import re

VARYING = [
    (re.compile(r"\b\d\d:\d\d:\d\d\.\d{3}\b"), "<clock>"),
    (re.compile(r"\b[0-9a-f]{64}\b"), "<sha256>"),
    (re.compile(r"\b[0-9a-f]{16}\.bin\b"), "<hash>.bin"),
    (re.compile(r"\b\d+(\.\d+)? MB/s"), "<rate>"),
    (re.compile(r"tok/s \d+"), "tok/s <rate>"),
    (re.compile(r"\b(\d+h)?(\d+m)?\d+(\.\d+)?s\b"), "<time>"),
    (re.compile(r"\b\d+(\.\d+)? s\b"), "<time>"),
    (re.compile(r"\b\d+ threads\b"), "<n> threads"),
]


LOG_PREFIX = re.compile(r"^<clock> r\d+ \w+ +")


def normalise(line):
    """The line with what varies replaced by its shape, and without the log prefix (clock, rank,
    level), which a sample may leave out."""
    for pattern, shape in VARYING:
        line = pattern.sub(shape, line)
    return LOG_PREFIX.sub("", line.rstrip())


def line_pattern(sample_line):
    parts = normalise(sample_line).split("…")
    return re.compile(".*".join(re.escape(part) for part in parts))


def chunks(block):
    found, current = [], []
    for index, line in enumerate(block.text.rstrip("\n").split("\n")):
        if line.strip() in ("...", "…"):
            if current:
                found.append(current)
            current = []
        else:
            current.append((block.text_line(index), line))
    if current:
        found.append(current)
    return found


def find_chunk(chunk, printed, start):
    """The index after the first run of printed[start:] the chunk matches, or None."""
    patterns = [line_pattern(line) for _, line in chunk]
    for first in range(start, len(printed) - len(patterns) + 1):
        if all(pattern.fullmatch(printed[first + offset]) for offset, pattern in enumerate(patterns)):
            return first + len(patterns)
    return None


def closest(chunk, printed, start):
    """(doc line, sample line, printed line) of the chunk's first line that does not match where
    the chunk's first line matches best, for the failure message."""
    first_pattern = line_pattern(chunk[0][1])
    for first in range(start, len(printed)):
        if first_pattern.fullmatch(printed[first]):
            for offset, (line_number, line) in enumerate(chunk):
                actual = printed[first + offset] if first + offset < len(printed) else "(the output ended)"
                if not line_pattern(line).fullmatch(actual):
                    return line_number, line, actual
    return chunk[0][0], chunk[0][1], None


def check_sample(block, output):
    printed = [normalise(line) for line in output.split("\n")]
    position = 0
    for chunk in chunks(block):
        end = find_chunk(chunk, printed, position)
        if end is None:
            line_number, line, actual = closest(chunk, printed, position)
            if actual is None:
                return [f"{block.doc}:{line_number}: the sample line `{line.strip()}` is not in what "
                        f"`{block.marks['sample-of']}` printed"]
            return [f"{block.doc}:{line_number}: the sample says\n    | {line.strip()}\n  where "
                    f"`{block.marks['sample-of']}` printed\n    | {actual.strip()}"]
        position = end
    return []
