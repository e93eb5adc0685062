"""Writing a dataset file so that a failure never leaves half of one: the lines
go to a temporary file beside it, which replaces the file only once complete
(the bundled generators, scripts/make_*_data.py)."""
import json
import os
import sys
import tempfile
from pathlib import Path


def write_jsonl(path, records):
    """Writes one JSON object per line to `path` (a Path, or "-" for standard output)."""
    if str(path) == "-":
        for record in records:
            sys.stdout.write(json.dumps(record) + "\n")
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as out:
            for record in records:
                out.write(json.dumps(record) + "\n")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)      # what open() would have given the file
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
