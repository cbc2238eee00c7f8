"""Small nights merged by month: a bounded number of files per (table, task) and month, whatever the nights.

Compaction leaves one file per (table, task) and run; a small night's is mostly Parquet footer (~32 kB of schema,
units and descriptions for a few rows), and a year of them is thousands of files. Once a run has FINISHED (never
before: a resumed run's compaction reads its own files back), :func:`merge_small_run` moves each of its files
smaller than :data:`SMALL_BYTES` into ``ROOT/<table>/<YYYY-MM>/part-month-<task>-<k>.parquet``, the month's file
for that task (a new ``k`` once one passes :data:`MONTH_BYTES`), rewritten with the run's rows appended in row groups
of 128k rows. Only that month's file of that task is rewritten; other months and big nights are never touched.

One move, and why no instant of it loses or doubles a row (``notes/catalog.md``, "The month merge"):

1. the new month file (the old one's rows and the run's, its footer listing the runs it holds, the run included) is
   written beside the old one under a hidden ``_tmp-`` name and fsynced; readers see the old month file and the
   run's own file, as before;
2. one ``os.replace`` puts it in the old one's place (the switch). From that instant a sound month file of the task
   lists the run, and readers leave the run's own file out (:func:`~spec_vetting.catalog.listing.without_merged`);
3. the run's own file is removed, once the month file is seen to hold as many of the run's rows as it.

:func:`recover_root` (before every run's first write, by ``catalog compact`` and by ``catalog check --repair``)
finishes whatever a crash left: it removes hidden ``_tmp-`` files (never the only copy of a row: until the switch the
old files are whole), removes a run's own file that a month file holds (step 3, checked the same way), puts back
the ``_merging-`` files of the earlier protocol unless the month file of their own task holds their rows, and
merges the small files of finished runs that a crash stopped before or during their merge.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..catalog import crash_points
from ..catalog.current import hidden_name, write_row_groups
from ..catalog.footers import MERGED_RUNS_KEY, merged_runs
from ..catalog.listing import DAY_FOLDER, held_by_month, month_holds, read_manifest, runs_dir
from ..catalog.read import parquet_dataset, scan_batches
from ..catalog.schema import MONTH_FILE_PREFIX, PICTURES_DIR, TABLES, file_schema, lengths_in, with_reader_metadata

log = logging.getLogger(__name__)

#: a run's compacted file at most this big is merged into its month's file
SMALL_BYTES = 16 << 20
#: a month's file takes runs until it reaches this size, then the next one starts. Each merge rewrites the month's
#: file, so this bounds a night's merge: 1.9 / 3.9 / 11.1 CPU s into a 16 / 64 / 253 MB file (RESULTS.md,
#: issue 28); at 512 MB a month of 16 MB nights would rewrite ~0.5 GB every night
MONTH_BYTES = 64 << 20
#: the earlier protocol's name for a run's file while it was merged (hidden from readers): recovered, never written
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
        date_dir = root / table / run_date
        files = sorted(date_dir.glob(f"part-{run_id}-*.parquet")) if date_dir.is_dir() else []
        by_task: dict[str, list[Path]] = {}
        for p in files:
            by_task.setdefault(_task_of(p, run_id), []).append(p)
        n = 0
        holds = month_holds(root / table / run_date[:7])
        for task, paths in sorted(by_task.items()):
            if all(held_by_month(p, holds) for p in paths):
                n += _remove_held(root, table, run_date, task, run_id, paths)  # switched before a crash
            elif len(paths) == 1 and paths[0].stat().st_size <= SMALL_BYTES:
                _merge(root, table, run_date, task, run_id, paths[0])
                n += 1
        _remove_if_empty(date_dir)
        out[table] = n
    crash_points.reached("merge:done")
    return out


def _merge(root: Path, table: str, run_date: str, task: str, run_id: str, path: Path) -> None:
    target = _month_target(root, table, run_date, task)
    schema = file_schema(table)
    lengths = lengths_in(pq.read_schema(path))
    runs = {run_id}
    sources = [str(path)]
    if target.is_file():
        lengths_in(pq.read_schema(target), lengths)
        runs |= merged_runs(target) or set()
        sources.insert(0, str(target))
    out_schema = with_reader_metadata(schema, lengths)
    out_schema = out_schema.with_metadata({**(out_schema.metadata or {}),
                                           MERGED_RUNS_KEY: json.dumps(sorted(runs)).encode()})
    # 1. the new month file beside the old one, hidden, its bytes on disk before it can replace anything
    tmp = hidden_name(target)
    try:
        write_row_groups(tmp, out_schema, scan_batches(parquet_dataset(sources, schema=schema)))
        _fsync(tmp)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    crash_points.reached("merge:written")
    # 2. the switch: from here the month file lists the run and readers leave its own file out
    os.replace(tmp, target)
    _fsync_dir(target.parent)
    crash_points.reached("merge:switched")
    # 3. the run's own file, now a leftover
    _remove_held(root, table, run_date, task, run_id, [path])


def _rows_held(root: Path, table: str, run_date: str, task: str, run_id: str) -> int:
    """Rows of ``run_id`` in the month files of ``task`` that list the run (read from their run_id column)."""
    n = 0
    for m in month_files(root, table, run_date):
        if m.name.startswith(f"{MONTH_FILE_PREFIX}{task}-") and run_id in (merged_runs(m) or set()):
            col = pq.read_table(m, columns=["run_id"]).column("run_id")
            n += pc.sum(pc.equal(col, run_id)).as_py() or 0
    return n


def _remove_held(root: Path, table: str, run_date: str, task: str, run_id: str, paths: list[Path]) -> int:
    """Remove a run's own files of ``task`` whose rows a month file holds, after counting them there; files whose
    rows the month files do not all hold are kept (and said), whatever their footers list. Returns files removed."""
    own = sum(pq.ParquetFile(p).metadata.num_rows for p in paths)
    held = _rows_held(root, table, run_date, task, run_id)
    if held < own:
        log.error("%s: the month files of task %s list run %s but hold %d of its %d rows: its own files are kept",
                  root / table / run_date[:7], task, run_id, held, own)
        return 0
    for p in paths:
        p.unlink()
    _fsync_dir(paths[0].parent)
    crash_points.reached("merge:removed")
    return len(paths)


def _fsync(path: Path) -> None:
    with open(path, "rb+") as fh:
        os.fsync(fh.fileno())


def _fsync_dir(folder: Path) -> None:
    """A rename or removal in ``folder`` on disk (a power cut after it cannot bring the old name back)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_if_empty(folder: Path) -> None:
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()


# ------------------------------------------------------------------------------------------------------- recovery


def recover_root(root) -> list[str]:
    """Finish or undo what a crash left of merges and writes under ``root`` (the caller holds the root's lock, so
    nothing is being written now); returns one line per thing done (also logged)."""
    root = Path(root)
    done: list[str] = []
    for table in TABLES:
        folder = root / table
        if not folder.is_dir():
            continue
        # hidden files being written when the process died: never the only copy of a row (see the module's doc)
        for tmp in sorted(folder.glob("*/_tmp-*")):
            tmp.unlink(missing_ok=True)
            done.append(f"{tmp}: an unfinished write removed")
        for hidden in sorted(folder.glob(f"*/{HIDDEN_PREFIX}*.parquet")):
            done.append(_recover_hidden(root, table, hidden))
    for tmp in [*(root / "current").glob("_tmp-*"), *(root / PICTURES_DIR).glob("*/_tmp-*")]:
        tmp.unlink(missing_ok=True)
        done.append(f"{tmp}: an unfinished write removed")
    for run_id, run_date in _unmerged_finished_runs(root):
        merged = merge_small_run(root, run_id, run_date)
        if any(merged.values()):
            done.append(f"run {run_id}: its merge into {run_date[:7]}'s files finished")
    for line in done:
        log.warning("recovery: %s", line)
    return done


def _recover_hidden(root: Path, table: str, hidden: Path) -> str:
    """A ``_merging-`` file of the earlier protocol: removed when the month file of its own task holds its rows,
    else renamed back (its rows readable again, merged by a later recovery)."""
    visible = hidden.with_name(hidden.name[len(HIDDEN_PREFIX):])
    run_date = hidden.parent.name
    held = held_by_month(visible, month_holds(root / table / run_date[:7]))
    if held is not None:
        run_id, task = held
        if _rows_held(root, table, run_date, task, run_id) >= pq.ParquetFile(hidden).metadata.num_rows:
            hidden.unlink()
            return f"{hidden}: an interrupted merge finished (its rows are in the month file)"
    os.replace(hidden, visible)
    return f"{hidden}: an interrupted merge undone (renamed back to {visible.name})"


def _unmerged_finished_runs(root: Path) -> list[tuple[str, str]]:
    """(run_id, run_date) of finished runs whose job merges small nights and that still have an own file small
    enough to merge (a crash stopped them before or during their merge). Found by listing the date folders and the
    runs' folder; only those runs' manifests are read."""
    base = runs_dir(root)
    run_ids = sorted((d.name for d in base.iterdir() if d.is_dir()), key=len, reverse=True) if base.is_dir() else []
    found: set[tuple[str, str]] = set()
    for table in TABLES:
        folder = root / table
        for day in sorted(folder.iterdir()) if folder.is_dir() else []:
            if not DAY_FOLDER.match(day.name):
                continue
            for f in day.glob("part-*.parquet"):
                if f.stat().st_size > SMALL_BYTES:
                    continue
                run_id = next((r for r in run_ids if f.name.startswith(f"part-{r}-")), None)
                if run_id is not None:
                    found.add((run_id, day.name))
    out = []
    for run_id, run_date in sorted(found):
        try:
            m = read_manifest(root, run_id)
        except (OSError, ValueError):
            continue
        if (m.get("status") == "finished" and m.get("run_date") == run_date
                and (m.get("job") or {}).get("merge_small_nights", True)):
            out.append((run_id, run_date))
    return out
