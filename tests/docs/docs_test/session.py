"""Runs the docs' command blocks as a reader would, in a scratch checkout, and
checks what each promises; then the sample outputs and the quoted figures."""
import json
import os
import signal
import subprocess
import time

from .blocks import read_docs
from .figures import check_figures
from .samples import check_sample
from .scratch import Scratch

BLOCK_TIMEOUT_S = 1800
TAIL_LINES = 15


def tail(text, count=TAIL_LINES):
    lines = text.rstrip("\n").split("\n")
    return "\n".join("    | " + line for line in lines[-count:])


def timing(metric):
    return metric.endswith("_s") or metric == "mfu"


def different_metrics(checkout, first, second):
    """How run `first` differs from run `second` on the steps `first` logged ([] if in nothing
    but timings)."""
    runs = []
    for run in (first, second):
        path = checkout / run / "metrics.jsonl"
        if not path.is_file():
            return [f"same-metrics: {run}/metrics.jsonl does not exist"]
        runs.append({record["step"]: record for record in map(json.loads, path.read_text().split("\n")[:-1])})
    for step, record in sorted(runs[0].items()):
        other = runs[1].get(step)
        if other is None:
            return [f"same-metrics: {second} has no step {step}"]
        for metric in sorted(set(record) | set(other)):
            if not timing(metric) and record.get(metric) != other.get(metric):
                return [f"same-metrics: at step {step}, {first} logs {metric} = {record.get(metric)}, "
                        f"{second} {other.get(metric)}"]
    return []


def output_segments(block):
    """(commands, expected stdout) pairs of a block marked `output`: the `# ` lines right after
    a command are what it prints."""
    segments, commands, expected = [], [], []
    for line in block.text.rstrip("\n").split("\n"):
        if line.startswith("#") and commands:
            expected.append(line[1:].strip())
            continue
        if expected:
            segments.append(("\n".join(commands), "\n".join(expected)))
            commands, expected = [], []
        commands.append(line)
    if commands:
        segments.append(("\n".join(commands), "\n".join(expected)))
    return segments


class Session:
    def __init__(self, args, scratch):
        self.args = args
        self.scratch = scratch
        self.env = scratch.environment()
        self.outputs = {}          # block id -> what it printed
        self.failures = []
        self.count = 0

    def fail(self, where, message):
        self.failures.append(f"{where}: {message}")

    def execute(self, block, script, suffix="", separate=False):
        """Runs `script` in its own process group, which is ended afterwards (a server a block
        started with `&`); returns (exit status, stdout, everything printed in order). Standard
        output and error go to one file unless `separate`."""
        name = f"{block.doc.replace('/', '_')}_{block.line}{suffix}"
        script_path = self.scratch.logs / f"{name}.{'py' if block.lang == 'python' else 'sh'}"
        script_path.write_text(script)
        argv = [self.args.python, str(script_path)] if block.lang == "python" else ["bash", str(script_path)]
        with open(self.scratch.logs / f"{name}.out", "w+") as out, open(self.scratch.logs / f"{name}.err", "w+") as err:
            process = subprocess.Popen(argv, cwd=self.scratch.checkout, env=self.env, stdout=out,
                                       stderr=err if separate else subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                status = process.wait(timeout=BLOCK_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                status = None
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            process.wait()
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
        return status, stdout, stdout + stderr

    def run_block(self, block):
        expected = int(block.marks.get("exit", 0))
        start = time.monotonic()
        if "output" in block.marks:
            printed = ""
            for index, (commands, wanted) in enumerate(output_segments(block)):
                status, stdout, both = self.execute(block, "set -eo pipefail\n" + commands + "\n", f"_{index}", separate=True)
                printed += both
                if status != expected:
                    break
                if wanted and stdout.strip() != wanted:
                    self.fail(block.where, f"`{commands.strip()}` printed\n{tail(stdout)}\n  the doc says\n{tail(wanted)}")
        else:
            script = block.text if block.lang == "python" else "set -eo pipefail\n" + block.text
            status, _, printed = self.execute(block, script)
        seconds = time.monotonic() - start
        print(f"   {block.where}: exit {status} in {seconds:.1f} s", flush=True)
        if status is None:
            self.fail(block.where, f"the block ran past {BLOCK_TIMEOUT_S} s; its last lines:\n{tail(printed)}")
        elif status != expected:
            self.fail(block.where, f"the block exited with {status}, the doc promises {expected}; its last lines:\n"
                                   f"{tail(printed)}")
        if status == expected and "same-metrics" in block.marks:
            self.failures += [f"{block.where}: {difference}" for difference in
                              different_metrics(self.scratch.checkout, *block.marks["same-metrics"].split(","))]
        for name in self.scratch.changed_files():
            self.fail(block.where, f"the block changed {name}, which the checkout holds (restored as committed)")
        if "id" in block.marks:
            self.outputs[block.marks["id"]] = printed

    def runs(self, block):
        if block.skip_reasons:
            return self.args.figure_runs and block.skip_reasons == ["minutes"] and "figure-runs" in block.marks
        return "runs-in" not in block.marks and "excerpt" not in block.marks

    def run(self, docs):
        for doc in docs:
            for block in doc.blocks:
                if block.is_command or block.lang == "python":
                    if self.runs(block):
                        self.count += 1
                        self.run_block(block)
                    else:
                        why = ", ".join(block.skip_reasons) or ("runs in " + block.marks["runs-in"]
                                                                 if "runs-in" in block.marks else "an excerpt")
                        print(f"   {block.where}: not run ({why})", flush=True)
        for doc in docs:
            for block in doc.blocks:
                if "sample-of" in block.marks:
                    source = block.marks["sample-of"]
                    if source in self.outputs:
                        self.failures += check_sample(block, self.outputs[source])
                    else:
                        print(f"   {block.where}: sample of `{source}`, which did not run", flush=True)


def run_session(args, refs):
    docs = read_docs(args.source_dir)
    scratch = Scratch(args.source_dir, args.build_dir, args.python)
    print(f"scratch checkout: {scratch.checkout}", flush=True)
    session = Session(args, scratch)
    session.run(docs)
    failures = session.failures + check_figures(args, docs, scratch.checkout)
    if failures or args.keep:
        print(f"the scratch checkout stays for a look: {scratch.root}")
    else:
        scratch.remove()
    print(f"ran {session.count} blocks")
    return failures
