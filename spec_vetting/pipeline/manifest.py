"""Provenance of a run: code and dependency versions, inputs with checksums, and the run log.

The manifest is rewritten (atomically) while the run is in progress and frozen once it finishes; the log only
grows, with one START line per attempt and one SUCCESS or FAILED line at its end, as batch operators expect.
"""

from __future__ import annotations

import datetime as dt
import glob
import hashlib
import importlib.metadata
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from .. import __version__

#: distributions whose versions change results or their files
DEPENDENCIES = (
    "numpy", "astropy", "fitsio", "pyarrow", "matplotlib", "pillow", "pydantic", "dask", "distributed", "httpx",
    "pyyaml", "torch", "transformers", "tokenizers",
)


def utcnow() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def dependency_versions() -> dict[str, str | None]:
    out = {}
    for name in DEPENDENCIES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_commit() -> str | None:
    """The commit of the source tree this package runs from, when it is a git checkout (editable install)."""
    here = Path(__file__).resolve().parents[2]
    if not (here / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def code_info() -> dict[str, Any]:
    return {
        "spec_vetting": __version__,
        "git_commit": git_commit(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "host": socket.gethostname(),
    }


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def describe_input(source: str) -> dict[str, Any]:
    """A candidate source with a checksum: the file's sha256, or for a folder/glob a sha256 of its listing
    (relative name, size, mtime), which changes when any file is added, removed or rewritten."""
    p = Path(source)
    if p.is_file():
        return {"source": source, "kind": "file", "bytes": p.stat().st_size, "sha256": _sha256_file(p)}
    if p.is_dir():
        files = sorted(q for q in p.rglob("*") if q.is_file())
        base = p
    else:
        files = sorted(Path(q) for q in glob.glob(source, recursive=True) if os.path.isfile(q))
        base = None
    h = hashlib.sha256()
    total = 0
    for q in files:
        st = q.stat()
        total += st.st_size
        name = str(q.relative_to(base)) if base else str(q)
        h.update(f"{name}\t{st.st_size}\t{st.st_mtime_ns}\n".encode())
    return {
        "source": source,
        "kind": "folder" if p.is_dir() else "glob",
        "n_files": len(files),
        "bytes": total,
        "listing_sha256": h.hexdigest(),
    }


class RunLog:
    """Append-only text log of a run: ``<UTC time> <LEVEL> <message>`` lines."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, level: str, message: str) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(f"{utcnow()} {level} {message}\n")
            fh.flush()
