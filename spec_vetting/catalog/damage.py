"""Damaged catalog files: found by their footer, named in one line, kept out of every read.

A truncated or overwritten Parquet file must stop nothing but itself: the readers (:func:`~.read.dataset`) leave
out every file whose footer cannot be read, and the commands name those files with the damage and what to do
(:data:`REPAIR_HINT`). :func:`check_root` is ``spec-vet catalog check``: every file read through (footer, schema,
every row group), and the rows per run and task compared with what the run manifests recorded.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import one_line
from .footers import footer_damage, merged_runs
from .listing import list_runs, table_files
from .schema import CURRENT_DIR, MANIFEST_FILE, MONTH_FILE_PREFIX, PICTURES_DIR, RUN_ORDER_FILE, RUNS_DIR, TABLES

#: every folder of compacted files a root holds; pictures are a cache of re-renderable PNGs (store_pictures)
CHECKED = (*TABLES, CURRENT_DIR, PICTURES_DIR)

REPAIR_HINT = ("run `spec-vet catalog check {root} --repair`: it moves damaged files into {root}/_quarantine/ and "
               "rebuilds them, or leaves their pairs for the next `spec-vet run --incremental` to vet again")

#: the compacted file name ``part-<run_id>-<task>-<k>.parquet``; run ids hold no '-' after their digest part
_PART_NAME = re.compile(r"^part-(?P<run_id>\d{8}T\d{6}Z-[0-9a-f]+(?:-[0-9a-f]{4})?)-(?P<task>.+)-\d+\.parquet$")
#: a month file of small nights' rows, ``<table>/<YYYY-MM>/part-month-<task>-<k>.parquet`` (pipeline.rollup)
_MONTH_NAME = re.compile(rf"^{MONTH_FILE_PREFIX}(?P<task>.+)-\d+\.parquet$")




@dataclass(frozen=True)
class DamagedFile:
    """One unreadable catalog file: where, which table, what is wrong, and whose rows it held when known."""

    path: str
    table: str
    reason: str
    run_id: str | None = None
    task: str | None = None
    #: a month file's runs (small nights merged into one file per task and month), as far as they can be told
    month_runs: tuple[str, ...] | None = None

    @property
    def runs(self) -> tuple[str, ...]:
        """The runs whose rows the file held (empty when they cannot be told)."""
        return self.month_runs if self.month_runs is not None else ((self.run_id,) if self.run_id else ())

    def line(self) -> str:
        if self.month_runs is not None:
            month = Path(self.path).parent.name
            shown = ", ".join(self.month_runs[:4]) + (f" and {len(self.month_runs) - 4} more"
                                                       if len(self.month_runs) > 4 else "")
            held = (f" (rows of {len(self.month_runs)} run(s) of {month}, task {self.task}: {shown})"
                    if self.month_runs else f" (rows of task {self.task} in {month}; which runs cannot be told)")
        else:
            held = f" (rows of run {self.run_id}, task {self.task})" if self.run_id else ""
        return f"damaged file {self.path}{held}: {self.reason}"


def describe(path: str | os.PathLike, table: str, reason: str, run_ids: list[str] = ()) -> DamagedFile:
    """A :class:`DamagedFile`, with the run and task read from a compacted file's name (``run_ids``: the runs
    under the root, for run ids that do not follow the pipeline's own pattern)."""
    name = Path(path).name
    month = _MONTH_NAME.match(name)
    if month and table != CURRENT_DIR:
        return DamagedFile(str(path), table, reason, None, month["task"], month_file_runs(path, month["task"]))
    for run_id in sorted(run_ids, key=len, reverse=True):
        if name.startswith(f"part-{run_id}-"):
            task = name[len(f"part-{run_id}-"):].removesuffix(".parquet").rsplit("-", 1)[0]
            return DamagedFile(str(path), table, reason, run_id, None if table == PICTURES_DIR else task)
    m = _PART_NAME.match(name)
    if m:
        return DamagedFile(str(path), table, reason, m["run_id"], m["task"])
    if table == CURRENT_DIR:
        return DamagedFile(str(path), table, reason, None, Path(path).stem)
    return DamagedFile(str(path), table, reason)


def month_file_runs(path: str | os.PathLike, task: str) -> tuple[str, ...]:
    """The runs whose rows a damaged month file (``ROOT/<table>/<YYYY-MM>/part-month-<task>-<k>.parquet``) held:
    the list in its footer when that still reads; otherwise the finished runs of that month with rows of ``task``
    whose own compacted file is gone and that no sound month file of the task names (a run is merged only once it
    has finished, and merging removes its own file)."""
    path = Path(path)
    if footer_damage(path) is None:
        listed = merged_runs(path)
        if listed is not None:
            return tuple(sorted(listed))
    folder, table_dir = path.parent, path.parent.parent
    elsewhere: set[str] = set()
    for sibling in folder.glob(f"{MONTH_FILE_PREFIX}{task}-*.parquet"):
        if sibling != path and footer_damage(sibling) is None:
            elsewhere |= merged_runs(sibling) or set()
    out = []
    for run in list_runs(table_dir.parent):
        run_id, run_date = run["run_id"], str(run.get("run_date") or "")
        if (run.get("status") != "finished" or not run_date.startswith(folder.name) or run_id in elsewhere
                or task not in ((run.get("counts") or {}).get("verdicts_by_task") or {})):
            continue
        own = table_dir / run_date
        if own.is_dir() and any(own.glob(f"part-{run_id}-{task}-*.parquet")):
            continue
        out.append(run_id)
    return tuple(sorted(out))


def split_readable(files: list[str], table: str, run_ids: list[str] = ()) -> tuple[list[str], list[DamagedFile]]:
    """(files whose footer reads, the others as :class:`DamagedFile`)."""
    good, bad = [], []
    for f in files:
        damage = footer_damage(f)
        if damage is None:
            good.append(f)
        else:
            bad.append(describe(f, table, damage, run_ids))
    return good, bad


def run_ids_of(root) -> list[str]:
    return [r["run_id"] for r in list_runs(root)]


def damaged_files(root: str | os.PathLike) -> list[DamagedFile]:
    """Every catalog file under ``root`` whose footer cannot be read (verdicts, turns, current)."""
    out: list[DamagedFile] = []
    run_ids = None
    for table in CHECKED:
        new, old = table_files(root, table)
        if any(footer_damage(f) for f in new + old):
            run_ids = run_ids_of(root) if run_ids is None else run_ids
            out += split_readable(new + old, table, run_ids)[1]
    return out


def damage_report(root: str | os.PathLike, damaged: list[DamagedFile] | None = None) -> list[str]:
    """One line per damaged file, then what to do; empty when nothing is damaged."""
    damaged = damaged_files(root) if damaged is None else damaged
    if not damaged:
        return []
    return [d.line() for d in damaged] + [
        f"{len(damaged)} damaged file(s) left out; {REPAIR_HINT.format(root=root)}"]


@dataclass(frozen=True)
class DamagedRecord:
    """A run manifest or the current view's run-order file that cannot be read."""

    path: str
    reason: str
    #: the run whose manifest it is; None for ``current/_run_order.json``
    run_id: str | None = None

    def line(self) -> str:
        if self.run_id is None:
            return (f"unreadable run-order file {self.path}: {self.reason}; the next fold reads the runs' manifests "
                    "instead")
        return (f"unreadable manifest {self.path} (run {self.run_id}): {self.reason}; the run is missing from "
                "`catalog runs` and its rows are counted from its files")


def damaged_records(root: str | os.PathLike) -> list[DamagedRecord]:
    """Every run manifest (``_runs/<run_id>/manifest.json``) and ``current/_run_order.json`` under ``root`` that
    cannot be read as the JSON object it should be."""
    out = []
    runs = Path(root) / RUNS_DIR
    for d in sorted(runs.iterdir()) if runs.is_dir() else []:
        path = d / MANIFEST_FILE
        if path.is_file():
            reason = _json_object_damage(path, ("run_id", "status"))
            if reason:
                out.append(DamagedRecord(str(path), reason, d.name))
    order = Path(root) / CURRENT_DIR / RUN_ORDER_FILE
    if order.is_file():
        reason = _json_object_damage(order, ())
        if reason:
            out.append(DamagedRecord(str(order), reason))
    return out


def _json_object_damage(path: Path, keys: tuple[str, ...]) -> str | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        return one_line(exc)
    except ValueError as exc:
        return f"not JSON ({' '.join(str(exc).split())}; {path.stat().st_size} bytes)"
    if not isinstance(data, dict):
        return f"not a JSON object (a {type(data).__name__})"
    missing = [k for k in keys if k not in data]
    return f"no {', '.join(missing)} in it" if missing else None


#: where `spec-vet catalog check --repair` moves damaged files, and its record of what it did
QUARANTINE_DIR = "_quarantine"
REPAIRS_FILE = "repairs.jsonl"


def quarantined_runs(root) -> set[tuple[str, str]]:
    """(run_id, task) whose verdict file was quarantined and not rebuilt (their counts fall short on purpose)."""
    path = Path(root) / QUARANTINE_DIR / REPAIRS_FILE
    out = set()
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("table") == "verdicts" and e.get("run_id") and "lost" in str(e.get("outcome")):
                out.add((e["run_id"], e.get("task")))
    return out
