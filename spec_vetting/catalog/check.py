"""`catalog check` and the catalog summary: every file and record tested, and rows counted against what the runs
say they wrote, so damage and losses are named (file, run, task) instead of silently shrinking the counts."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .damage import (
    CHECKED,
    DamagedFile,
    DamagedRecord,
    damaged_files,
    damaged_records,
    describe,
    quarantined_runs,
    run_ids_of,
    split_readable,
)
from .footers import merged_runs, whole_file_damage
from .listing import latest_run_id, list_runs, table_files
from .read import count_by, count_rows_by, dataset, files_dataset
from .schema import CURRENT_DIR, MONTH_FILE_PREFIX, PICTURES_DIR, PICTURES_SCHEMA, file_schema


@dataclass
class CheckReport:
    """What ``spec-vet catalog check`` found: damaged files and row counts that disagree with the manifests."""

    root: str
    files_checked: int = 0
    damaged: list[DamagedFile] = field(default_factory=list)
    #: (run_id, task) -> (rows the manifest recorded, rows readable in verdicts/)
    count_mismatches: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    #: manifests and the run-order file that cannot be read
    records: list[DamagedRecord] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.damaged and not self.count_mismatches and not self.records

    def lines(self) -> list[str]:
        out = [d.line() for d in self.damaged] + [r.line() for r in self.records]
        for (run_id, task), (want, have) in sorted(self.count_mismatches.items()):
            out.append(f"run {run_id} task {task}: the manifest records {want} verdict rows, {have} are readable "
                       f"({want - have:+d} missing)" if want > have else
                       f"run {run_id} task {task}: the manifest records {want} verdict rows, {have} are in "
                       "verdicts/ (more than recorded)")
        return out


def check_root(root: str | os.PathLike) -> CheckReport:
    """Read every catalog file through and compare the verdict rows per finished run and task with its manifest."""

    report = CheckReport(str(root), records=damaged_records(root))
    run_ids = run_ids_of(root)
    for table in CHECKED:
        new, old = table_files(root, table)
        expected = PICTURES_SCHEMA if table == PICTURES_DIR else file_schema(table)
        for f in new + old:
            report.files_checked += 1
            damage, _ = whole_file_damage(f, expected if f in new else None)
            if damage:
                report.damaged.append(describe(f, table, damage, run_ids))
    readable = count_by(root, "verdicts", ["run_id", "task"])
    for run in list_runs(root):
        if run.get("status") != "finished":
            continue  # an unfinished run's counts describe its done shards only when it ends
        recorded = (run.get("counts") or {}).get("verdicts_by_task") or {}
        for task, by_verdict in recorded.items():
            want = sum(by_verdict.values())
            have = readable.get((run["run_id"], task), 0)
            if want != have:
                report.count_mismatches[(run["run_id"], task)] = (want, have)
    return report


def rows_not_counted(root: str | os.PathLike, damaged: list[DamagedFile]) -> dict[tuple[str, str], int]:
    """(run_id, task) -> verdict rows the manifests recorded that no readable file holds, for the (run, task) pairs
    whose files are damaged."""

    wanted = {(run_id, d.task) for d in damaged if d.table == "verdicts" for run_id in d.runs}
    if not wanted:
        return {}
    readable = count_by(root, "verdicts", ["run_id", "task"])
    out = {}
    for run in list_runs(root):
        recorded = (run.get("counts") or {}).get("verdicts_by_task") or {}
        for task, by_verdict in recorded.items():
            if (run["run_id"], task) in wanted:
                out[(run["run_id"], task)] = max(0, sum(by_verdict.values()) - readable.get((run["run_id"], task), 0))
    return out


#: run statuses whose manifest counts are the run's rows in the catalog (the done shards the attempt compacted)
_COUNTED_STATUSES = ("finished", "failed")


def _manifest_counts(run: dict) -> dict[str, dict[str, int]] | None:
    """{task: {verdict: n}} from a run's manifest when they are its rows in the catalog, else None."""
    counts = run.get("counts") or {}
    by_task = counts.get("verdicts_by_task")
    if run.get("status") not in _COUNTED_STATUSES or not isinstance(by_task, dict):
        return None
    return {str(t): {str(v): int(n) for v, n in c.items()} for t, c in by_task.items()}


def _unaccounted_files(root, counted: dict[str, str]) -> list[str]:
    """Verdict files not of a run counted from its manifest (``counted``: run id -> run_date), by name only."""
    by_date: dict[str, list[str]] = {}
    for run_id, run_date in counted.items():
        by_date.setdefault(str(run_date), []).append(f"part-{run_id}-")
    new, old = table_files(root, "verdicts")
    out = []
    for f in new:
        name = Path(f).name
        if name.startswith(MONTH_FILE_PREFIX):
            runs = merged_runs(f)
            if runs is None or not runs <= set(counted):  # its footer names its runs: opened if one is not counted
                out.append(f)
        elif not name.startswith(tuple(by_date.get(Path(f).parent.name, ()))):
            out.append(f)
    return out + old


def summarize_catalog(root: str | os.PathLike) -> dict:
    """Runs, verdict counts by run, task and verdict, and errors by kind. A run the pipeline finished (or that
    failed after compacting what it finished) is counted from its manifest, without opening its files; only the
    rows of other runs (running, interrupted, older roots, or without a manifest) are counted from the files."""

    runs = list_runs(root)
    damaged = damaged_files(root)
    # a run with a damaged verdict file, or one set aside by `catalog check --repair`, is counted from what can be
    # read, not from its manifest (a damaged file whose run cannot be told: every run so)
    hit = ({r for d in damaged if d.table == "verdicts" for r in d.runs or (None,)}
           | {r for r, _t in quarantined_runs(root)})
    counts: dict[str, dict[str, dict[str, int]]] = {}
    errors: dict[str, dict[str, int]] = {}
    counted: dict[str, str] = {}
    for r in runs:
        by_task = _manifest_counts(r)
        if by_task is not None and r.get("run_date") and r["run_id"] not in hit and None not in hit:
            counts[r["run_id"]] = by_task
            by_kind = (r.get("counts") or {}).get("errors_by_kind") or {}
            errors[r["run_id"]] = {str(k): int(n) for k, n in by_kind.items()}
            counted[r["run_id"]] = r["run_date"]
    rest = split_readable(_unaccounted_files(root, counted), "verdicts")[0]
    groups: dict[tuple, int] = {}
    if rest:
        new, old = table_files(root, "verdicts")
        data = dataset(root, "verdicts") if set(rest) >= set(new) | set(old) else files_dataset(root, rest)
        groups = count_rows_by(data, ["run_id", "task", "verdict", "error_kind"])
    for (run_id, task, verdict, error_kind), n in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        if run_id in counted:  # a counted run's rows in a file named otherwise (a legacy copy): counted once
            continue
        by_task = counts.setdefault(run_id, {}).setdefault(task, {})
        by_task[verdict] = by_task.get(verdict, 0) + n
        if verdict == "ERROR":
            e = errors.setdefault(run_id, {})
            kind = error_kind or "error"
            e[kind] = e.get(kind, 0) + n
    n_rows = sum(n for by_task in counts.values() for c in by_task.values() for n in c.values())
    known = {r["run_id"] for r in runs}
    # rows of a run whose manifest is gone still count
    runs += [{"run_id": rid, "status": "unknown"} for rid in sorted(counts) if rid not in known]
    current = count_by(root, CURRENT_DIR, ["task", "verdict"])
    missing = rows_not_counted(root, damaged)
    return {
        "damaged_files": [{"path": d.path, "table": d.table, "reason": d.reason, "run_id": d.run_id, "task": d.task,
                           "runs": list(d.runs),
                           "rows_not_counted": sum(missing.get((r, d.task), 0) for r in d.runs)
                           if d.table == "verdicts" and d.runs else None}
                          for d in damaged],
        "root": str(root),
        "latest_run_id": latest_run_id(root),
        "runs": [
            {**r, "verdicts": counts.get(r["run_id"], {}), "errors_by_kind": errors.get(r["run_id"], {})} for r in runs
        ],
        "n_rows": n_rows,
        "current": {
            t: {v: n for (tt, v), n in sorted(current.items()) if tt == t} for t in sorted({k[0] for k in current})
        },
    }
