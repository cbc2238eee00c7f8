"""Small nights merged by month: a bounded number of files per (table, task) and month, whatever the nights.

Compaction leaves one file per (table, task) and run; a small night's is mostly Parquet footer (~32 kB of schema,
units and descriptions for a few rows), and a year of them is thousands of files. Once a run has FINISHED (never
before: a resumed run's compaction reads its own files back), :func:`merge_small_run` moves each of its files
smaller than :data:`SMALL_BYTES` into ``ROOT/<table>/<YYYY-MM>/part-month-<task>-<k>.parquet``, the month's file
for that task (a new ``k`` once one passes :data:`MONTH_BYTES`), rewritten with the run's rows appended in row groups
of 128k rows. Only that month's file of that task is rewritten; other months and big nights are never touched.

Each move is: the run's file renamed to a hidden ``_merging-`` name (readers skip ``_`` names), the month file
rewritten with its rows (the footer lists the runs it holds), the hidden file removed. After a crash in between,
:func:`recover` (called before every merge and by ``catalog compact``) removes a hidden file whose run the month
file lists, and renames it back otherwise, so no row is ever lost or counted twice once it has run; until then the
hidden rows are missing from readers of the history (never from current/, folded before).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pyarrow.parquet as pq

from ..catalog.current import write_row_groups_atomic
from ..catalog.read import MERGED_RUNS_KEY, merged_runs, parquet_dataset, scan_batches
from ..catalog.schema import MONTH_FILE_PREFIX, TABLES, file_schema, lengths_in, with_reader_metadata

log = logging.getLogger(__name__)

#: a run's compacted file at most this big is merged into its month's file
SMALL_BYTES = 16 << 20
#: a month's file takes runs until it reaches this size, then the next one starts. Each merge rewrites the month's
#: file, so this bounds a night's merge: 1.9 / 3.9 / 11.1 CPU s into a 16 / 64 / 253 MB file (RESULTS.md,
#: issue 28); at 512 MB a month of 16 MB nights would rewrite ~0.5 GB every night
MONTH_BYTES = 64 << 20
HIDDEN_PREFIX = "_merging-"


def month_files(root, table: str, run_date: str) -> list[Path]:
    """The month files of ``table`` for the month of ``run_date``."""
    folder = Path(root) / table / run_date[:7]
    return sorted(folder.glob(f"{MONTH_FILE_PREFIX}*.parquet")) if folder.is_dir() else []


def merged_into_month(root, run_id: str, run_date: str) -> bool:
    """Whether some of the run's rows were merged into its month's files (their footers say)."""
    return any(run_id in (merged_runs(m) or set()) for t in TABLES for m in month_files(root, t, run_date))


def _task_of(path: Path, run_id: str) -> str:
    return path.stem[len(f"part-{run_id}-"):].rsplit("-", 1)[0]


def _month_target(root: Path, table: str, run_date: str, task: str) -> Path:
    folder = root / table / run_date[:7]
    k = 0
    # a full month file, or a damaged one (left for `catalog check` to set aside): the next one
    while (p := folder / f"{MONTH_FILE_PREFIX}{task}-{k}.parquet").is_file() and (
            p.stat().st_size >= MONTH_BYTES or merged_runs(p) is None):
        k += 1
    return p


def merge_small_run(root, run_id: str, run_date: str) -> dict[str, int]:
    """Move the finished run's small compacted files into their month's files; returns files merged per table."""
    root = Path(root)
    out = {}
    for table in TABLES:
        recover(root, table, run_date[:7])
        date_dir = root / table / run_date
        files = sorted(date_dir.glob(f"part-{run_id}-*.parquet")) if date_dir.is_dir() else []
        by_task: dict[str, list[Path]] = {}
        for p in files:
            by_task.setdefault(_task_of(p, run_id), []).append(p)
        n = 0
        for task, paths in sorted(by_task.items()):
            if len(paths) == 1 and paths[0].stat().st_size <= SMALL_BYTES:
                _merge(root, table, run_date, task, run_id, paths[0])
                n += 1
        if date_dir.is_dir() and not any(date_dir.iterdir()):
            date_dir.rmdir()
        out[table] = n
    return out


def _merge(root: Path, table: str, run_date: str, task: str, run_id: str, path: Path) -> None:
    target = _month_target(root, table, run_date, task)
    target.parent.mkdir(parents=True, exist_ok=True)
    hidden = path.with_name(HIDDEN_PREFIX + path.name)
    os.replace(path, hidden)
    schema = file_schema(table)
    lengths = lengths_in(pq.read_schema(hidden))
    runs = {run_id}
    sources = [str(hidden)]
    if target.is_file():
        lengths_in(pq.read_schema(target), lengths)
        runs |= merged_runs(target) or set()
        sources.insert(0, str(target))
    out_schema = with_reader_metadata(schema, lengths)
    out_schema = out_schema.with_metadata({**(out_schema.metadata or {}),
                                           MERGED_RUNS_KEY: json.dumps(sorted(runs)).encode()})
    data = parquet_dataset(sources, schema=schema)
    write_row_groups_atomic(target, out_schema, scan_batches(data))
    _fsync(target)  # the rows are on disk before their only other copy goes
    hidden.unlink()


def _fsync(path: Path) -> None:
    with open(path, "rb+") as fh:
        os.fsync(fh.fileno())


def recover(root, table: str, month: str | None = None) -> int:
    """Finish or undo merges a crash interrupted (``month``: only that month's date folders); returns how many."""
    root = Path(root)
    pattern = f"{month}-*/{HIDDEN_PREFIX}*.parquet" if month else f"*/{HIDDEN_PREFIX}*.parquet"
    n = 0
    for hidden in sorted((root / table).glob(pattern)) if (root / table).is_dir() else []:
        name = hidden.name[len(HIDDEN_PREFIX):]
        run_date = hidden.parent.name
        held = set()
        for m in month_files(root, table, run_date):
            held |= merged_runs(m) or set()
        in_file = set(pq.read_table(hidden, columns=["run_id"]).column("run_id").to_pylist())
        done = bool(held) and in_file <= held
        if done:
            hidden.unlink()
        else:
            os.replace(hidden, hidden.with_name(name))
        log.warning("%s: an interrupted merge of %s %s", hidden, name, "finished" if done else "undone")
        n += 1
    return n
