"""What the docs may name, read from the code itself: config keys (`ptrain
schema`), ptrain's subcommands and flags (`--help`), a script's flags (its
`--help`), the build's targets and the checkout's paths."""
import functools
import glob
import re
import subprocess
from pathlib import Path

FLAG = re.compile(r"(?<![\w-])(--?[a-zA-Z][\w-]*)")
SCHEMA_ROW = re.compile(r"^\| `([\w.]+)` \|")


def run_text(argv, cwd=None, timeout=120):
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    return result.stdout + result.stderr


def expand_braces(pattern):
    """`a_{h,cpp}` -> [`a_h`, `a_cpp`] (one level per pair, as the shell does)."""
    match = re.search(r"\{([^{}]*,[^{}]*)\}", pattern)
    if not match:
        return [pattern]
    return [expanded for option in match.group(1).split(",")
            for expanded in expand_braces(pattern[:match.start()] + option + pattern[match.end():])]


class References:
    def __init__(self, source_dir, build_dir, python):
        self.source = Path(source_dir)
        self.build = Path(build_dir)
        self.python = python
        self.ptrain = str(self.build / "bin" / "ptrain")

    @functools.cached_property
    def config_keys(self):
        """{'section.key'} of the core and of every bundled plugin's [module] (top-level keys bare)."""
        text = run_text([self.ptrain, "schema", "--plugin", "sft", "--plugin", "dpo", "--plugin", "grpo"])
        keys, section = set(), ""
        for line in text.split("\n"):
            if line.startswith("## "):
                heading = line[3:].strip()
                section = "" if heading == "top level" else heading.strip("[]")
            elif SCHEMA_ROW.match(line):
                key = SCHEMA_ROW.match(line).group(1)
                keys.add(f"{section}.{key}" if section else key)
        if not keys:
            raise RuntimeError(f"`{self.ptrain} schema` listed no keys:\n{text}")
        return keys

    @functools.cached_property
    def sections(self):
        return {key.split(".")[0] for key in self.config_keys if "." in key}

    @functools.cached_property
    def subcommands(self):
        text = run_text([self.ptrain, "--help"])
        block = text.split("commands:")[1].split("\n\n")[0]
        return {line.split()[0] for line in block.split("\n") if line.strip()}

    @functools.lru_cache(maxsize=None)
    def ptrain_flags(self, subcommand):
        return set(FLAG.findall(run_text([self.ptrain, subcommand, "--help"])))

    @functools.lru_cache(maxsize=None)
    def script_flags(self, script):
        """The flags a Python script's --help lists (argparse)."""
        return set(FLAG.findall(run_text([self.python, str(self.source / script), "--help"], cwd=self.source)))

    @functools.cached_property
    def targets(self):
        text = run_text(["cmake", "--build", str(self.build), "--target", "help"])
        names = set()
        for line in text.split("\n"):
            if line.startswith("... "):
                names.add(line[4:].split()[0])
            elif ": " in line and not line.startswith(" "):      # Ninja: "name: phony"
                names.add(line.split(":")[0])
        return names

    @functools.cached_property
    def top_level(self):
        """The checkout's top-level names a doc path can start with."""
        return {path.name for path in self.source.iterdir()
                if not path.name.startswith(".") and path.name not in ("build", "runs")}

    def path_exists(self, path):
        """A checkout path, possibly with globs or {a,b}: does every expansion match something?"""
        path = path.rstrip("/")
        return all(glob.glob(str(self.source / option)) for option in expand_braces(path))

    def is_generated(self, path):
        """A path a tool writes rather than the checkout holds: in a git-ignored folder, or named
        by a script of bench/ or scripts/ (a results file)."""
        ignored = subprocess.run(["git", "-C", str(self.source), "check-ignore", "-q", "--no-index", path],
                                 capture_output=True)
        if ignored.returncode == 0:
            return True
        name = Path(path).name
        return any(name in script.read_text(encoding="utf-8", errors="replace")
                   for folder in ("bench", "scripts") for script in (self.source / folder).rglob("*")
                   if script.suffix in (".py", ".sh"))

    def build_product_target(self, path):
        """The target a build/ path names (build/bin/X, build/.../libX.so), or None for other build/ paths."""
        name = Path(path).name
        if path.startswith("build/bin/"):
            return name
        match = re.fullmatch(r"lib(\w+)\.so", name)
        return match.group(1) if match else None
