"""The reader's checkout: a copy of the source files in a scratch folder, with
`build` and `.venv` linked to the real ones, a home of its own (for `~/...`),
and `ptrain`, `python3` and `python` on the PATH as the build's and the
.venv's."""
import os
import shutil
import subprocess
import tempfile
from pathlib import Path


def checkout_files(source):
    """Tracked files and untracked ones git does not ignore; every file outside build/, runs/ and
    dot-folders when the source is no git checkout."""
    listed = subprocess.run(["git", "-C", str(source), "ls-files", "-co", "--exclude-standard", "-z"],
                            capture_output=True)
    if listed.returncode == 0:
        return [name for name in listed.stdout.decode().split("\0") if name and (source / name).is_file()]
    skip = {"build", "runs", "__pycache__"}
    return [str(path.relative_to(source)) for path in source.rglob("*")
            if path.is_file() and not any(part in skip or part.startswith(".") for part in path.relative_to(source).parts)]


class Scratch:
    def __init__(self, source, build, python, root=None):
        self.root = Path(root or tempfile.mkdtemp(prefix=f"ptrain_test_{os.getpid()}_docs_"))
        self.checkout = self.root / "checkout"
        self.home = self.root / "home"
        self.bin = self.root / "bin"
        self.logs = self.root / "logs"
        self.source = source
        for folder in (self.checkout, self.home, self.bin, self.logs):
            folder.mkdir(parents=True, exist_ok=True)
        self.files = checkout_files(source)
        for name in self.files:
            target = self.checkout / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, target)
        (self.checkout / "build").symlink_to(build)
        venv = Path(python).parent.parent
        if (venv / "pyvenv.cfg").is_file():
            (self.checkout / ".venv").symlink_to(venv)
        for name, target in (("ptrain", build / "bin" / "ptrain"), ("python3", python), ("python", python)):
            (self.bin / name).symlink_to(target)
        self.stamps = self.file_stamps()

    def file_stamps(self):
        return {name: stamp((self.checkout / name).stat()) for name in self.files if (self.checkout / name).exists()}

    def changed_files(self):
        """Checkout files a block changed or removed (their content, not their time); each is put
        back as committed, so that the blocks after it read the checkout."""
        changed = []
        now = self.file_stamps()
        for name, stamp in self.stamps.items():
            if now.get(name) == stamp:
                continue
            copy = self.checkout / name
            if not copy.exists() or copy.read_bytes() != (self.source / name).read_bytes():
                changed.append(name)
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(self.source / name, copy)
        self.stamps = self.file_stamps()
        return changed

    def environment(self):
        env = dict(os.environ)
        env.update({
            "HOME": str(self.home),
            "PATH": f"{self.bin}:{env.get('PATH', '/usr/bin:/bin')}",
            # LibTorch's idle OpenMP threads spin otherwise, which makes runs crawl on busy cores
            # (README, "What you should see").
            "OMP_WAIT_POLICY": "PASSIVE",
            # Nothing from the network: a block that needs it says so (skip=network).
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HOME": str(self.root / "hf_home"),
        })
        for name in ("PTRAIN_PLUGIN_PATH", "PTRAIN_BUILD_DIR", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
            env.pop(name, None)
        return env

    def remove(self):
        shutil.rmtree(self.root, ignore_errors=True)


def stamp(stat):
    return stat.st_size, stat.st_mtime_ns
