"""Checks that need no run: every block parses, and every config key, ptrain
flag, script flag, build target, checkout path and link the docs name exists.
Each failure is one line, `doc:line: what is wrong`."""
import difflib
import os
import re
import subprocess
import tomllib
from pathlib import Path

from .blocks import read_doc, unlabelled_commands
from .commands import block_commands, command_lines

FILE_SUFFIXES = {"json", "jsonl", "safetensors", "toml", "txt", "md", "cpp", "h", "py", "sh", "so", "bin", "html", "yaml"}
DOTTED_KEY = re.compile(r"^([a-z_]+)\.([a-z_0-9]+)$")
SECTION_KEY = re.compile(r"^\[([a-z_]+)\] ([a-z_0-9]+)$")
PTRAIN = re.compile(r"(^|/)ptrain$")
PYTHON = re.compile(r"(^|/)python3?(\.\d+)?$")
NOT_A_CHECKOUT_PATH = re.compile(r"[<>$~]|://")
OUTPUT_FLAGS = {"-o", "--output", "--out", "--prefix", "-B"}


class StaticChecks:
    def __init__(self, references, docs):
        self.refs = references
        self.docs = docs
        self.failures = []
        top = "|".join(sorted(re.escape(name) for name in references.top_level if "." not in name))
        self.prose_path = re.compile(rf"(?<![\w./~-])((?:{top})/[\w./*{{}},+-]*[\w*}}/])")

    def fail(self, where, message):
        self.failures.append(f"{where}: {message}")

    def run(self):
        ids = {block.marks["id"] for doc in self.docs for block in doc.blocks if "id" in block.marks}
        for doc in self.docs:
            self.failures += unlabelled_commands(doc)
            for block in doc.blocks:
                self.check_block(block, ids)
            for item in doc.prose:
                self.check_prose(item)
            self.check_links(doc)
        return self.failures

    # -- names ------------------------------------------------------------------------------------
    def check_key(self, where, key):
        if key in self.refs.config_keys:
            return
        if key.startswith("module.") and not any(k.startswith("module.") for k in self.refs.config_keys):
            return
        close = difflib.get_close_matches(key, self.refs.config_keys, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else ""
        self.fail(where, f"no config key `{key}`{hint}")

    def is_checkout_path(self, token):
        token = token.removeprefix("./")
        if NOT_A_CHECKOUT_PATH.search(token) or token.startswith("/"):
            return False
        first = token.split("/")[0]
        return first in self.refs.top_level and ("/" in token or "." in first) or first == "build" and "/" in token

    def check_path(self, where, token):
        token = token.removeprefix("./")
        if token.startswith("build/"):
            target = self.refs.build_product_target(token)
            if target and target not in self.refs.targets:
                self.fail(where, f"`{token}`: the build has no target `{target}`")
            return
        if token.startswith("ptrain/"):          # an include path of the SDK or the harness
            if not any(self.refs.path_exists(f"{base}/{token}") for base in ("sdk/include", "testing/include")):
                self.fail(where, f"`{token}`: no such header under sdk/include or testing/include")
            return
        if not self.refs.path_exists(token) and not self.refs.is_generated(token):
            self.fail(where, f"`{token}` does not exist in the checkout")

    # -- commands ---------------------------------------------------------------------------------
    def check_ptrain(self, where, argv):
        if len(argv) < 2 or argv[1] in ("--help", "-h", "--version"):
            return
        subcommand, rest = argv[1], argv[2:]
        if subcommand not in self.refs.subcommands:
            self.fail(where, f"ptrain has no command `{subcommand}` (it has {', '.join(sorted(self.refs.subcommands))})")
            return
        if subcommand == "launch" and "--" in rest:
            worker = rest[rest.index("--") + 1:]
            rest = rest[:rest.index("--")]
            if worker and worker[0] in self.refs.subcommands:
                self.check_ptrain(where, ["ptrain"] + worker)
        flags = self.refs.ptrain_flags(subcommand)
        for position, word in enumerate(rest):
            if not word.startswith("-") or re.match(r"^-\d", word):
                continue
            name = word.split("=")[0]
            if name not in flags:
                self.fail(where, f"`ptrain {subcommand}` has no flag `{name}` (ptrain {subcommand} --help)")
            value = word.partition("=")[2] or (rest[position + 1] if position + 1 < len(rest) else "")
            if name == "--set":
                self.check_key(where, value.split("=")[0])
            elif name in ("-c", "--config") and self.is_checkout_path(value):
                self.check_path(where, value)

    def check_python(self, where, argv):
        script = next((word for word in argv[1:] if not word.startswith("-")), None)
        if script is None or not self.is_checkout_path(script):
            return
        self.check_path(where, script)
        path = self.refs.source / script
        if not path.is_file() or "argparse" not in path.read_text(encoding="utf-8"):
            return
        flags = self.refs.script_flags(script)
        for word in argv[argv.index(script) + 1:]:
            if word.startswith("-") and not re.match(r"^-\d", word) and word.split("=")[0] not in flags:
                self.fail(where, f"`{script}` has no flag `{word.split('=')[0]}` ({script} --help)")

    def check_command(self, where, command):
        argv = command.argv
        if PTRAIN.search(argv[0]):
            self.check_ptrain(where, argv)
        elif PYTHON.search(argv[0]):
            self.check_python(where, argv)
        skip_next = False
        for position, word in enumerate(argv):
            if skip_next:
                skip_next = False
                continue
            if word in OUTPUT_FLAGS:
                skip_next = True
            elif word == "--target" and position + 1 < len(argv):
                for target in argv[position + 1:]:
                    if target.startswith("-"):
                        break
                    if target not in self.refs.targets:
                        self.fail(where, f"the build has no target `{target}`")
            elif self.is_checkout_path(word):
                self.check_path(where, word)
        for word in command.inputs:
            if self.is_checkout_path(word):
                self.check_path(where, word)

    # -- blocks -----------------------------------------------------------------------------------
    def check_block(self, block, ids):
        if "sample-of" in block.marks and block.marks["sample-of"] not in ids:
            self.fail(block.where, f"sample-of={block.marks['sample-of']}: no block has that id")
        if block.is_command:
            self.check_shell(block)
        elif block.lang == "python":
            if "excerpt" in block.marks:
                self.check_excerpt(block)
            else:
                try:
                    compile(block.text, block.where, "exec")
                except SyntaxError as error:
                    self.fail(block.where, f"Python syntax: {error}")
        elif block.lang == "toml":
            self.check_toml(block)
        elif "excerpt" in block.marks:
            self.check_excerpt(block)

    def check_shell(self, block):
        result = subprocess.run(["bash", "-n"], input=block.text, capture_output=True, text=True)
        if result.returncode != 0:
            self.fail(block.where, f"shell syntax: {result.stderr.strip()}")
            return
        if int(block.marks.get("exit", 0)) != 0:
            return                   # a block that shows an error may name what does not exist
        for command in block_commands(block.text):
            self.check_command(f"{block.doc}:{block.text_line(command.line_index)}", command)
        if "runs-in" in block.marks:
            self.check_runs_in(block)

    def check_runs_in(self, block):
        other = next((doc for doc in self.docs if doc.path == block.marks["runs-in"]), None)
        if other is None:
            self.fail(block.where, f"runs-in={block.marks['runs-in']}: no such doc")
            return
        run_lines = {line for candidate in other.blocks if candidate.is_command and not candidate.skip_reasons
                     and "runs-in" not in candidate.marks for line in command_lines(candidate.text)}
        for line in command_lines(block.text):
            if line not in run_lines:
                self.fail(block.where, f"runs-in={other.path}: `{line}` is in no block {other.path} runs")

    def check_toml(self, block):
        try:
            table = tomllib.loads(block.text)
        except tomllib.TOMLDecodeError as error:
            self.fail(block.where, f"TOML: {error}")
            return
        for name, value in table.items():
            if isinstance(value, dict):
                for key in value:
                    self.check_key(block.where, f"{name}.{key}")
            else:
                self.check_key(block.where, name)

    def check_excerpt(self, block):
        """The block's lines stand in the file in this order; `...` lines and the comments an excerpt
        adds (whole lines, or at a line's end) aside."""
        path = block.marks["excerpt"]
        source = self.refs.source / path
        if not source.is_file():
            self.fail(block.where, f"excerpt={path}: no such file")
            return
        remaining = [code_of(line) for line in source.read_text(encoding="utf-8").split("\n")]
        position = 0
        for index, line in enumerate(block.text.split("\n")):
            wanted = code_of(line)
            if not wanted or "..." in wanted or wanted.startswith(("// ", "# ")):
                continue
            try:
                position = remaining.index(wanted, position) + 1
            except ValueError:
                self.fail(f"{block.doc}:{block.text_line(index)}",
                          f"not in {path} (after the lines above it): `{line.strip()}`")
                return

    # -- prose ------------------------------------------------------------------------------------
    def check_prose(self, item):
        where = f"{item.doc}:{item.line}"
        if not item.is_code:
            for match in self.prose_path.finditer(item.text):
                self.check_path(where, match.group(1).rstrip("."))
            return
        text = item.text.strip()
        key = DOTTED_KEY.match(text)
        section_key = SECTION_KEY.match(text)
        if key and key.group(2) not in FILE_SUFFIXES:
            self.check_prose_key(where, text)
        elif section_key and section_key.group(1) in self.refs.sections | {"module"}:
            self.check_key(where, f"{section_key.group(1)}.{section_key.group(2)}")
        elif text.startswith("--set ") and DOTTED_KEY.match(text[6:].split("=")[0].strip("'\"")):
            self.check_prose_key(where, text[6:].split("=")[0].strip("'\""))
        elif re.match(r"^(\S*/)?ptrain ", text) and text.split()[1] in self.refs.subcommands | {"--help", "--version"}:
            try:
                for command in block_commands(text):
                    self.check_command(where, command)
            except ValueError:
                pass
        elif " " not in text and self.is_checkout_path(text) and self.names_a_file(text):
            self.check_path(where, text)

    def check_prose_key(self, where, key):
        if key.split(".")[0] in self.refs.sections | {"module"}:
            self.check_key(where, key)

    def names_a_file(self, text):
        """A span such as `core/nonfinite` is a name (a metric), not a path, unless it exists or reads
        like one (a file name with a suffix, or a folder with a trailing /)."""
        return "." in text.split("/")[-1] or text.endswith("/") or self.refs.path_exists(text)

    def check_links(self, doc):
        for line, target in doc.links:
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            relative = os.path.normpath(Path(doc.path).parent / path) if path else doc.path
            where = f"{doc.path}:{line}"
            if not (doc.root / relative).exists():
                self.fail(where, f"link to `{target}`: {relative} does not exist")
            elif anchor and relative.endswith(".md"):
                linked = next((d for d in self.docs if d.path == relative), None) or read_doc(doc.root, relative)
                if anchor not in {slug(text) for _, text in linked.headings}:
                    self.fail(where, f"link to `{target}`: {relative} has no heading `#{anchor}`")


def code_of(line):
    """A source line without its indentation and its end-of-line comment."""
    return re.sub(r"\s+(#|//) .*$", "", line.strip())


def slug(heading):
    """GitHub's anchor for a heading."""
    text = heading.replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
