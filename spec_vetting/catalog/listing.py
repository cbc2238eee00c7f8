"""A catalog root's files and runs as they lie on disk: the visible files of a table, the run folders and their
manifests, and which of a night's own files a month file already holds. No file is decoded here beyond a footer."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from .footers import merged_runs
from .schema import CURRENT_DIR, LATEST_FILE, MANIFEST_FILE, MONTH_FILE_PREFIX, PICTURES_DIR, RUNS_DIR

# ---------------------------------------------------------------------------------------------------- tables and runs


def is_visible(p: Path) -> bool:
    return not p.name.startswith(("_", "."))


def table_files(root: str | os.PathLike, table: str) -> tuple[list[str], list[str]]:
    """(compacted files, pre-2.0 hive-layout files) of ``table`` (verdicts, turns, current or pictures) under
    ``root``; ``current`` and ``pictures`` have only the first."""
    folder = Path(root) / table
    if not folder.is_dir():
        return [], []
    if table == CURRENT_DIR:
        return sorted(str(p) for p in folder.glob("*.parquet") if is_visible(p)), []
    new = sorted(str(p) for p in folder.glob("*/*.parquet") if is_visible(p) and "=" not in p.parent.name)
    old = sorted(str(p) for p in folder.glob("run_date=*/task=*/*.parquet") if is_visible(p))
    return (without_merged(new) if table != PICTURES_DIR else new), old


#: a date folder of runs' own files, ``<table>/<YYYY-MM-DD>/``
DAY_FOLDER = re.compile(r"^\d{4}-\d{2}-\d{2}$")


#: a month file, ``<table>/<YYYY-MM>/part-month-<task>-<k>.parquet``
_MONTH_FILE = re.compile(rf"^{MONTH_FILE_PREFIX}(?P<task>.+)-\d+\.parquet$")


def month_holds(folder: Path) -> set[tuple[str, str]]:
    """(run_id, task) of the runs' rows that the month files in ``folder`` (a ``<table>/<YYYY-MM>/`` folder) hold:
    a sound month file of the task lists the run in its footer."""
    out: set[tuple[str, str]] = set()
    for m in folder.glob(f"{MONTH_FILE_PREFIX}*.parquet") if folder.is_dir() else []:
        name = _MONTH_FILE.match(m.name)
        if name:
            out |= {(run_id, name["task"]) for run_id in merged_runs(m) or ()}
    return out


def held_by_month(path: Path, holds: set[tuple[str, str]]) -> tuple[str, str] | None:
    """The (run_id, task) of ``path`` (a run's own file ``part-<run_id>-<task>-<k>.parquet``) when ``holds`` (from
    :func:`month_holds`) says a month file holds its rows, else None."""
    for run_id, task in holds:
        prefix = f"part-{run_id}-{task}-"
        if path.name.startswith(prefix) and path.name[len(prefix):-len(".parquet")].isdigit():
            return run_id, task
    return None


def without_merged(files: list[str]) -> list[str]:
    """``files`` without the runs' own files whose rows a month file already holds.

    The month merge (``pipeline/rollup.py``) switches a run's rows into its month's file by one rename of the new
    month file, whose footer lists the run; from that instant the run's own file is a leftover, removed next (or by
    recovery after a crash). Readers go by the footer, so every row is read once at every instant of the merge."""
    holds: dict[Path, set[tuple[str, str]]] = {}
    out = []
    for f in files:
        p = Path(f)
        if DAY_FOLDER.match(p.parent.name) and p.name.startswith("part-"):
            month = p.parent.parent / p.parent.name[:7]
            if month not in holds:
                holds[month] = month_holds(month)
            if held_by_month(p, holds[month]):
                continue
        out.append(f)
    return out


def runs_dir(root: str | os.PathLike) -> Path:
    return Path(root) / RUNS_DIR


def read_manifest(root: str | os.PathLike, run_id: str) -> dict:
    """The manifest of one run, as a dict (status, job, versions, counts, timings ...)."""
    path = runs_dir(root) / run_id / MANIFEST_FILE
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def list_runs(root: str | os.PathLike) -> list[dict]:
    """Every run recorded under ``root``, oldest first: dicts with run_id, run_date, status, started_at, counts."""
    base = runs_dir(root)
    if not base.is_dir():
        return []
    runs = []
    for d in base.iterdir():
        if not (d / MANIFEST_FILE).is_file():
            continue
        try:
            m = read_manifest(root, d.name)
        except (OSError, ValueError):
            continue  # a manifest being replaced right now, or damaged: not a run we can describe
        runs.append(
            {
                "run_id": m.get("run_id", d.name),
                "run_date": m.get("run_date"),
                "status": m.get("status"),
                "started_at": m.get("started_at"),
                "finished_at": m.get("finished_at"),
                "counts": m.get("counts", {}),
                "engine": (m.get("engine") or {}).get("engine"),
                "model": (m.get("engine") or {}).get("model"),
            }
        )
    runs.sort(key=lambda r: (r.get("started_at") or "", r["run_id"]))
    return runs


def latest_run_id(root: str | os.PathLike) -> str | None:
    """The latest run under ``root`` (the ``_runs/LATEST`` pointer, else the last one started), or None."""
    pointer = runs_dir(root) / LATEST_FILE
    if pointer.is_file():
        run_id = pointer.read_text(encoding="utf-8").strip()
        if run_id and (runs_dir(root) / run_id).is_dir():
            return run_id
    runs = list_runs(root)
    return runs[-1]["run_id"] if runs else None
