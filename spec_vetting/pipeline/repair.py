"""`spec-vet catalog check ROOT --repair`: damaged catalog files out of the way, rebuilt where their run's parts
still exist, otherwise their pairs left for the next incremental run to vet again.

A damaged file is moved (never deleted) into ``ROOT/_quarantine/`` under its path in the root, and the move is
recorded in ``ROOT/_quarantine/repairs.jsonl``. Then:

- a verdicts/turns file of a run whose staged parts are still under ``_runs/<run_id>/parts/`` (a run that has not
  finished, or whose parts were kept) is compacted again from those parts (only shards with a done marker);
- a ``current/`` file is rebuilt from every run's readable verdicts;
- otherwise the rows are gone: current/ is rebuilt from the readable verdicts, so a pair whose only answer was in
  the damaged file is no longer vetted, and ``spec-vet run --incremental`` inspects it again.

A month file (small nights' rows merged into ``ROOT/<table>/<YYYY-MM>/part-month-<task>-<k>.parquet``) holds rows
of finished runs whose parts are gone, so it is never rebuilt: its rows are lost, and one record per run it held
(from its footer, or told from the month's manifests when the footer is gone) says so, which is what ``catalog
check`` and ``catalog summary`` read to explain the shortfall. The next merge of that month starts a new file.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ..catalog.current import rebuild_current
from ..catalog.damage import QUARANTINE_DIR, REPAIRS_FILE, DamagedFile, check_root, quarantined_runs  # noqa: F401
from ..catalog.read import read_manifest
from ..catalog.schema import PICTURES_DIR
from .compact import compact_run, staged_parts
from .manifest import utcnow
from .store import RunStore


def quarantine(root: Path, damaged: DamagedFile) -> Path:
    """Move one damaged file to ROOT/_quarantine/<its path in root> (a numbered name if that is taken)."""
    src = Path(damaged.path)
    dest = root / QUARANTINE_DIR / src.resolve().relative_to(root.resolve())
    dest.parent.mkdir(parents=True, exist_ok=True)
    k = 1
    while dest.exists():
        dest = dest.with_name(f"{src.stem}.{k}{src.suffix}")
        k += 1
    shutil.move(str(src), dest)
    return dest


def _record(root: Path, entry: dict) -> None:
    path = root / QUARANTINE_DIR / REPAIRS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _rebuild_from_parts(root: Path, run_id: str) -> bool:
    """Compact ``run_id`` again from its staged parts; False when it has none left."""
    try:
        run_date = read_manifest(root, run_id).get("run_date")
    except (OSError, ValueError):
        return False
    if not run_date:
        return False
    parts = staged_parts(root, run_id, run_date, None)
    if not any(parts.values()):
        return False
    store = RunStore(root, run_id, run_date)
    done = set(store.done_markers()) if store.shards_dir.is_dir() else None
    compact_run(root, run_id, run_date, done)
    return True


def _lost_outcome(table: str) -> str:
    if table == "verdicts":
        return "rows lost: their pairs are vetted again by the next `spec-vet run --incremental`"
    if table == "turns":
        return "trajectories lost: the verdict rows stay, without their turns"
    return "quarantined"


def _month_file_lost(root: Path, d: DamagedFile, dest: Path) -> str:
    """Record a quarantined month file's rows as lost, once per run it held; one line for the actions."""
    outcome = _lost_outcome(d.table)
    base = {"at": utcnow(), "path": d.path, "moved_to": str(dest), "table": d.table, "task": d.task,
            "damage": d.reason, "outcome": outcome, "month_file": True}
    for run_id in d.month_runs or (None,):
        _record(root, {**base, "run_id": run_id})
    held = f"{len(d.month_runs)} run(s)" if d.month_runs else "runs that cannot be told"
    return f"{d.path} -> {dest}: {outcome} (a month file: rows of {held}, task {d.task})"


def repair_root(root) -> list[str]:
    """Quarantine every damaged file under ``root`` and rebuild what can be rebuilt; one line per action."""
    root = Path(root)
    report = check_root(root)
    actions: list[str] = []
    rebuilt: set[str] = set()
    for d in report.damaged:
        dest = quarantine(root, d)
        if d.month_runs is not None:
            actions.append(_month_file_lost(root, d, dest))
            continue
        outcome = "quarantined"
        if d.table in ("verdicts", "turns") and d.run_id and d.run_id not in rebuilt:
            if _rebuild_from_parts(root, d.run_id):
                rebuilt.add(d.run_id)
        if d.run_id in rebuilt:
            outcome = "rebuilt from the run's parts"
        elif d.table in ("verdicts", "turns"):
            outcome = _lost_outcome(d.table)
        elif d.table == PICTURES_DIR:
            outcome = "stored pictures lost: they are drawn again from their references and checked by sha256"
        else:
            outcome = "rebuilt from the readable verdicts"
        _record(root, {"at": utcnow(), "path": d.path, "moved_to": str(dest), "table": d.table, "run_id": d.run_id,
                       "task": d.task, "damage": d.reason, "outcome": outcome})
        actions.append(f"{d.path} -> {dest}: {outcome}")
    if report.damaged:
        # current/ from what is readable now: a pair whose only answer was quarantined is no longer vetted
        rebuild_current(root)
        actions.append("current/ rebuilt from the readable verdicts")
    return actions
