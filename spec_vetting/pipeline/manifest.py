"""Provenance of a run: the manifest (job, code and dependency versions, engine and model identity, prompts, inputs
with checksums, counts, timings) and the run log.

The manifest is rewritten (atomically) while the run is in progress and frozen once it finishes:
:func:`start_manifest` builds it when an attempt starts (a resumed run keeps its first start, its attempts and its
inputs), :func:`finish_manifest` records the attempt's outcome. It is read back by
:func:`spec_vetting.catalog.listing.read_manifest`. The log only grows, with one START line per attempt and one SUCCESS
or FAILED line at its end, as batch operators expect.
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
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .. import __version__
from ..catalog.schema import MANIFEST_SCHEMA

if TYPE_CHECKING:
    from .config import JobConfig
    from .plan import Plan

#: a manifest's ``status``: "running" while an attempt works (or after a kill: resumable), then "finished",
#: "failed" (shards failed; the same command resumes) or "interrupted" (SIGINT/SIGTERM; resumable)
RunStatus = Literal["running", "finished", "failed", "interrupted"]

#: failure messages kept in a failed run's manifest (the log has them all)
MAX_FAILURES_RECORDED = 50

#: distributions whose versions change results or their files
DEPENDENCIES = (
    "numpy", "astropy", "fitsio", "pyarrow", "matplotlib", "pillow", "pydantic", "dask", "distributed", "httpx",
    "pyyaml", "torch", "transformers", "tokenizers",
)


def utcnow() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")  # runs of one second stay in order


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


def plan_counts(
    plan: Plan, *, n_candidates: int, n_pairs: int, n_shards: int, shard_size: int, skipped_incremental: int
) -> dict[str, Any]:
    """The manifest's ``counts`` as an attempt starts: what was listed, planned, skipped and sharded."""
    return {
        "candidates": n_candidates,
        "pairs_planned": len(plan.items),
        "pairs_by_task": plan.counts_by_task(),
        "skipped_task_not_selected": plan.skipped_task_not_selected,
        "skipped_incremental": skipped_incremental,
        "pairs": n_pairs,
        "shards": n_shards,
        "shard_size": shard_size,
    }


def start_manifest(
    previous: dict | None,
    *,
    run_id: str,
    run_date: str,
    digest: str,
    job: JobConfig,
    identity,
    tasks: Mapping[str, Any],
    renderer_version: str,
    counts: dict[str, Any],
    pending_shards: int,
) -> dict[str, Any]:
    """The manifest of a run whose attempt starts now, status ``running``.

    ``previous`` is the manifest of the run being resumed (None for a new run): its first ``started_at``, its
    attempts and its inputs' checksums are kept, and this attempt is appended. ``identity`` is the engine's
    :class:`EngineIdentity`; ``tasks`` maps each task key to its :class:`~spec_vetting.inspect.tasks.Task`.
    """
    previous = previous or {}
    attempts = list(previous.get("attempts", []))
    attempts.append({"started_at": utcnow(), "pid": os.getpid(), "pending_shards": pending_shards})
    status: RunStatus = "running"
    return {
        "run_id": run_id,
        "run_date": run_date,
        "status": status,
        "schema": MANIFEST_SCHEMA,
        "plan_digest": digest,
        "started_at": previous.get("started_at") or utcnow(),
        "finished_at": None,
        "attempts": attempts,
        "job": job.model_dump(mode="json"),
        "code": code_info(),
        "dependencies": dependency_versions(),
        "engine": {
            "engine": identity.engine,
            "engine_version": identity.engine_version,
            "model": identity.model,
            "model_info": identity.model_info,
        },
        # the prompt text itself, so a run can be exported or audited after its tasks file changed
        "tasks": {
            key: {"class_name": task.class_name, "prompt_version": task.version, "prompt": task.prompt}
            for key, task in tasks.items()
        },
        "renderer_version": renderer_version,
        "inputs": previous.get("inputs") or [describe_input(s) for s in job.candidates],
        "counts": counts,
    }


def finish_manifest(
    manifest: dict[str, Any], summary: dict[str, Any], *, wall_s: float, inspections: int, failures: list[str]
) -> None:
    """Record the end of the current attempt in ``manifest`` (in place): the verdict and error counts and tokens of
    ``summary`` (the run's done shards), the attempt's wall time and inspections, and the status: ``failed`` with
    the first failures when there are any, else ``finished`` with the timings."""
    manifest["counts"]["verdicts_by_task"] = summary["verdicts_by_task"]
    manifest["counts"]["errors_by_kind"] = summary["errors_by_kind"]
    manifest["counts"]["verdicts"] = summary["n_verdicts"]
    manifest["tokens"] = summary["tokens"]
    attempts = manifest["attempts"]
    attempts[-1].update(finished_at=utcnow(), wall_s=round(wall_s, 3), inspections=inspections)
    status: RunStatus = "failed" if failures else "finished"
    manifest["status"] = status
    if failures:
        manifest["failures"] = failures[:MAX_FAILURES_RECORDED]
        return
    manifest["finished_at"] = utcnow()
    manifest["timings"] = {
        "wall_s_last_attempt": round(wall_s, 3),
        "wall_s_all_attempts": round(sum(a.get("wall_s", 0.0) for a in attempts), 3),
        "inspection_s": summary["inspection_s"],
    }
