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

from ..catalog.check import check_root  # noqa: F401
from ..catalog.current import rebuild_current
from ..catalog.damage import (  # noqa: F401
    QUARANTINE_DIR,
    REPAIRS_FILE,
    DamagedFile,
    DamagedRecord,
    damaged_records,
    quarantined_runs,
)
from ..catalog.listing import read_manifest
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


#: what a manifest rebuilt from the run's rows cannot hold again
_NOT_REBUILT = ("job", "plan_digest", "inputs", "code", "dependencies", "tasks", "attempts", "timings", "tokens")


def manifest_from_rows(root: Path, run_id: str) -> tuple[dict, int]:
    """A manifest for ``run_id`` from its verdict rows (every readable verdict file, filtered by run_id): date,
    engine, start, counts per task, verdict and error kind; (manifest, rows found). What rows do not say is listed
    under ``rebuilt.not_rebuilt``. Status: finished when it has rows and no staged parts are left (parts are
    removed when a run finishes), otherwise interrupted (it cannot be resumed: its plan digest is gone)."""
    import pyarrow.compute as pc

    from ..catalog.read import dataset
    from ..catalog.schema import MANIFEST_SCHEMA

    data = dataset(root, "verdicts")
    cols = ["run_date", "task", "verdict", "error_kind", "engine", "engine_version", "model", "started_at"]
    rows = (data.to_table(columns=cols, filter=pc.field("run_id") == run_id).to_pylist() if data is not None else [])

    def most(key):
        values = [r[key] for r in rows if r[key] is not None]
        return max(set(values), key=values.count) if values else None

    by_task: dict[str, dict[str, int]] = {}
    errors: dict[str, int] = {}
    for r in rows:
        c = by_task.setdefault(r["task"], {})
        c[r["verdict"]] = c.get(r["verdict"], 0) + 1
        if r["verdict"] == "ERROR":
            errors[r["error_kind"] or "error"] = errors.get(r["error_kind"] or "error", 0) + 1
    starts = [r["started_at"] for r in rows if r["started_at"] is not None]
    store_parts = RunStore(root, run_id, most("run_date") or "").parts_dir
    status = "finished" if rows and not store_parts.is_dir() else "interrupted"
    manifest = {
        "run_id": run_id, "run_date": most("run_date"), "status": status, "schema": MANIFEST_SCHEMA,
        "started_at": min(starts).isoformat() if starts else None, "finished_at": None,
        "engine": {"engine": most("engine"), "engine_version": most("engine_version"), "model": most("model")},
        "counts": {"verdicts_by_task": by_task, "errors_by_kind": errors, "verdicts": len(rows)},
        "rebuilt": {"at": utcnow(), "from": "the run's verdict rows (catalog check --repair)",
                    "not_rebuilt": list(_NOT_REBUILT)},
    }
    return manifest, len(rows)


def _repair_record(root: Path, record: DamagedRecord) -> str:
    """Set an unreadable manifest or run-order file aside and write what can be told again; one line."""
    from ..catalog.current import rebuild_run_order
    from .store import write_json_atomic

    dest = quarantine(root, DamagedFile(record.path, "_runs", record.reason))
    entry = {"at": utcnow(), "path": record.path, "moved_to": str(dest), "table": "_runs", "run_id": record.run_id,
             "damage": record.reason}
    if record.run_id is None:
        rebuild_run_order(root)
        _record(root, {**entry, "outcome": "rebuilt from the runs' manifests"})
        return f"{record.path} -> {dest}: rebuilt from the runs' manifests"
    manifest, n = manifest_from_rows(root, record.run_id)
    write_json_atomic(Path(record.path), manifest)
    outcome = (f"rebuilt from the run's {n} verdict row(s) (status {manifest['status']}); not rebuilt: "
               f"{', '.join(_NOT_REBUILT)}, so the run cannot be resumed or told from its inputs")
    _record(root, {**entry, "outcome": outcome})
    return f"{record.path} -> {dest}: {outcome}"


def repair_root(root) -> list[str]:
    """Quarantine every damaged file under ``root`` and rebuild what can be rebuilt; one line per action."""
    root = Path(root)
    actions = [_repair_record(root, r) for r in damaged_records(root)]
    report = check_root(root)
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


def restore_from_current(root, run_id: str, task: str) -> int:
    """Verdict rows of ``run_id`` and ``task`` that ``current/`` still holds and no verdict file does (rows gone
    without a trace, as a month merge before issue 34 could lose them after current/ was folded), written back as
    the run's own file ``verdicts/<run_date>/part-<run_id>-<task>-<k>.parquet`` (merged into the month's files by
    the next recovery). Their turns are not in current/ and stay lost. Returns the rows restored."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from ..catalog.current import hidden_name, write_row_groups
    from ..catalog.read import dataset, parquet_dataset
    from ..catalog.schema import CURRENT_DIR, file_schema, lengths_in, with_reader_metadata

    root = Path(root)
    try:
        run_date = read_manifest(root, run_id).get("run_date")
    except (OSError, ValueError):
        return 0
    view = root / CURRENT_DIR / f"{task}.parquet"
    if not run_date or not view.is_file():
        return 0
    schema = file_schema("verdicts")
    ours = parquet_dataset(str(view), schema=schema).to_table(
        filter=(pc.field("run_id") == run_id) & (pc.field("task") == task))
    data = dataset(root, "verdicts")
    have = (data.to_table(columns=["candidate_id"], filter=(pc.field("run_id") == run_id)
                          & (pc.field("task") == task)).column("candidate_id") if data is not None else None)
    missing = ours if have is None else ours.filter(pc.invert(pc.is_in(ours.column("candidate_id"), have)))
    if not missing.num_rows:
        return 0
    folder = root / "verdicts" / run_date
    k = 0
    while (target := folder / f"part-{run_id}-{task}-{k}.parquet").exists():
        k += 1
    tmp = hidden_name(target)
    write_row_groups(tmp, with_reader_metadata(schema, lengths_in(pq.read_schema(view))), missing.to_batches())
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, target)
    _record(root, {"at": utcnow(), "path": str(target), "table": "verdicts", "run_id": run_id, "task": task,
                   "outcome": f"restored {missing.num_rows} verdict row(s) from current/ (their turns are lost)"})
    return missing.num_rows
