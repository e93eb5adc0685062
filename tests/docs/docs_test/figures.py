"""The figures the docs quote from seeded runs (tests/docs/figures.toml),
recomputed from the runs of the docs session and compared with the text.

Each `[[quote]]` gives a doc and its text as it stands there, with every
figure written as `{EXPRESSION:FORMAT}`. An expression reads the session's
run directories (`[runs]`: name = folder; `[groups]`: name = [runs]):

    mean(RUN, "METRIC", FIRST, LAST)   METRIC averaged over steps FIRST..LAST
    at(RUN, "METRIC", STEP)            METRIC at STEP
    lo(X), hi(X)                       the least and greatest of X over a group
    evaluated("FILE", "REWARD")        REWARD's mean in FILE, what `ptrain eval -o FILE` wrote
    empty_answers("FILE")              how many of FILE's completions are empty

A figure whose runs the session did not make (a block it skipped) is taken
from tests/docs/figures.json, which `--write-figures` rewrites from a session
that made them all (`--figure-runs`); where the session made the runs, the file must
agree with them too. A quote the doc no longer holds, or holds with other
figures, fails naming the doc line."""
import json
import re
import string
import tomllib
from pathlib import Path

NUMBER = r"([-+]?[0-9][0-9,]*(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?)"


class MissingRun(Exception):
    pass


class Runs:
    """Metrics of the session's run directories, read when first needed."""

    def __init__(self, checkout, folders):
        self.checkout = checkout
        self.folders = folders
        self.cache = {}

    def steps(self, run):
        if run not in self.cache:
            path = self.checkout / self.folders[run] / "metrics.jsonl"
            if not path.is_file():
                raise MissingRun(f"{self.folders[run]}/metrics.jsonl")
            records = [json.loads(line) for line in path.read_text().split("\n") if line.strip()]
            self.cache[run] = {record["step"]: record for record in records}
        return self.cache[run]

    def evaluation(self, path):
        file = self.checkout / path
        if not file.is_file():
            raise MissingRun(path)
        return json.loads(file.read_text())

    def evaluated(self, path, reward):
        return self.evaluation(path)["means"][reward]

    def empty_answers(self, path):
        return sum(1 for completion in self.evaluation(path)["completions"] if completion["completion"] == "")

    def value(self, run, metric, step):
        record = self.steps(run).get(step)
        if record is None or metric not in record:
            raise KeyError(f"{self.folders[run]}/metrics.jsonl has no `{metric}` at step {step}")
        return record[metric]


def functions(runs, groups):
    def each(run, compute):
        return [compute(member) for member in groups[run]] if run in groups else compute(run)

    def mean(run, metric, first, last):
        return each(run, lambda one: sum(runs.value(one, metric, step) for step in range(first, last + 1))
                    / (last - first + 1))

    def at(run, metric, step):
        return each(run, lambda one: runs.value(one, metric, step))

    names = {name: name for name in list(runs.folders) + list(groups)}
    return {**names, "mean": mean, "at": at, "lo": min, "hi": max, "evaluated": runs.evaluated,
            "empty_answers": runs.empty_answers}


def fields(text):
    return [(literal, field, spec) for literal, field, spec, _ in string.Formatter().parse(text)]


def quote_pattern(text):
    """A regex of the quote with each figure a captured number; blanks match any run of blanks."""
    pattern = ""
    for literal, field, _ in fields(text):
        pattern += r"\s+".join(re.escape(part) for part in re.split(r"\s+", literal))
        if field is not None:
            pattern += NUMBER
    return re.compile(pattern)


class Figures:
    def __init__(self, source_dir, checkout):
        spec_path = source_dir / "tests" / "docs" / "figures.toml"
        self.values_path = source_dir / "tests" / "docs" / "figures.json"
        self.spec = tomllib.loads(spec_path.read_text())
        self.recorded = json.loads(self.values_path.read_text()) if self.values_path.is_file() else {}
        self.runs = Runs(checkout, self.spec["runs"])
        self.namespace = functions(self.runs, self.spec.get("groups", {}))
        self.computed = {}
        self.missing = {}
        self.errors = {}

    def value(self, expression):
        """The session's value of the expression, else the recorded one, else None."""
        if expression not in self.computed and expression not in self.missing:
            try:
                self.computed[expression] = eval(expression, {"__builtins__": {}}, self.namespace)
            except MissingRun as missing:
                self.missing[expression] = str(missing)
            except Exception as error:   # a metric or step the run lacks, a misspelt name
                self.errors[expression] = f"{type(error).__name__}: {error}"
        if expression in self.errors:
            return None
        return self.computed.get(expression, self.recorded.get(expression))

    def check_quote(self, quote, doc_text, source_dir):
        doc, text = quote["doc"], quote["text"]
        failures = []
        matches = list(quote_pattern(text).finditer(doc_text))
        if len(matches) != 1:
            what = "no longer holds" if not matches else f"holds {len(matches)} times"
            return [f"{doc}: tests/docs/figures.toml quotes `{text}`, which the doc {what}"]
        match = matches[0]
        line = doc_text.count("\n", 0, match.start()) + 1
        figure_fields = [(field, spec) for _, field, spec in fields(text) if field is not None]
        for (expression, spec), quoted in zip(figure_fields, match.groups()):
            value = self.value(expression)
            if expression in self.errors:
                failures.append(f"{doc}:{line}: `{expression}`: {self.errors[expression]}")
                continue
            if value is None:
                failures.append(f"{doc}:{line}: `{expression}` needs {self.missing[expression]}, which this "
                                f"session did not make, and tests/docs/figures.json has no value for it")
                continue
            wanted = format(value, spec)
            if quoted != wanted:
                source = "the runs give" if expression in self.computed else "tests/docs/figures.json has"
                failures.append(f"{doc}:{line}: quotes {quoted} for {expression}; {source} {wanted}")
            recorded = self.recorded.get(expression)
            if expression in self.computed and (recorded is None or format(recorded, spec) != wanted):
                failures.append(f"{doc}:{line}: tests/docs/figures.json has "
                                f"{'no value' if recorded is None else format(recorded, spec)} for {expression}, "
                                f"the runs give {wanted} (run the session with --figure-runs --write-figures)")
        return failures

    def check(self, source_dir):
        failures = []
        for quote in self.spec["quote"]:
            doc_text = (source_dir / quote["doc"]).read_text(encoding="utf-8")
            failures += self.check_quote(quote, doc_text, source_dir)
        return failures

    def update_docs(self, source_dir):
        """Rewrites each quote's figures in its doc to the values at hand (--update-docs)."""
        for quote in self.spec["quote"]:
            path = source_dir / quote["doc"]
            text = path.read_text(encoding="utf-8")
            matches = list(quote_pattern(quote["text"]).finditer(text))
            expressions = [field for _, field, _ in fields(quote["text"]) if field is not None]
            values = [self.value(expression) for expression in expressions]
            if len(matches) != 1 or any(value is None for value in values):
                continue
            specs = [spec for _, field, spec in fields(quote["text"]) if field is not None]
            for index in reversed(range(len(expressions))):
                start, end = matches[0].span(index + 1)
                text = text[:start] + format(values[index], specs[index]) + text[end:]
            path.write_text(text, encoding="utf-8")

    def write(self):
        values = dict(self.recorded)
        values.update(self.computed)
        self.values_path.write_text(json.dumps(dict(sorted(values.items())), indent=1) + "\n")
        print(f"wrote {self.values_path} ({len(self.computed)} figures from this session)")


def check_figures(args, docs, checkout):
    figures = Figures(args.source_dir, checkout)
    for quote in figures.spec["quote"]:
        for _, field, _ in fields(quote["text"]):
            if field is not None:
                figures.value(field)
    if args.write_figures:
        if figures.missing:
            return [f"--write-figures: the session did not make {sorted(set(figures.missing.values()))}"]
        figures.write()
        figures.recorded = dict(figures.computed)
    if args.update_docs:
        figures.update_docs(args.source_dir)
    return figures.check(args.source_dir)
