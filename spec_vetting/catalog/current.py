"""The current view, ``ROOT/current/<task>.parquet``: one row per (candidate, task), what we believe now.

The row is the verdict of the latest run (runs ordered by start, as :func:`~.read.list_runs` lists them) whose
shard finished, with every verdict column and its ``run_id`` / ``run_date``; a later ERROR does not replace an
earlier answer (YES, NO or UNDECIDED), but it does show for a pair that never got one. Only compacted rows count,
and only finished shards are ever compacted, so a run that failed part-way contributes what it finished and nothing
else.

:func:`update_current` folds one run into the view (the pipeline calls it at the end of each attempt). Its cost
follows the run and the view, never the history: it reads the run's own compacted files (found by name) and the
view's file, joins key columns only (candidate id, verdict, run) and streams the rows into a new file with row
groups of :data:`ROW_GROUP_ROWS` (so a night's few rows join the last row group instead of adding one). The runs'
start times it orders by are kept beside the view (``current/_run_order.json``), so a fold reads the manifests of
runs it has not seen before only. :func:`rebuild_current` builds it from all runs (``spec-vet catalog compact``).
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import crash_points
from .listing import list_runs, read_manifest
from .read import dataset, parquet_dataset, run_table_files, scan_batches
from .schema import CURRENT_DIR, RUN_ORDER_FILE, file_schema, lengths_in, with_reader_metadata

#: a non-ERROR verdict outranks any ERROR, then the later run wins, then (same run) the new attempt's row
_NOT_ERROR = 1 << 40
#: rows per row group of a current/ file (as compacted files): a night's rows are merged into the last one
ROW_GROUP_ROWS = 128 * 1024


def _started(root: Path, run_ids, known: dict[str, str]) -> dict[str, str]:
    """started_at of ``run_ids``: from ``known``, else from the run's manifest ("" when it has none)."""
    out = {}
    for run_id in run_ids:
        if run_id not in known:
            try:
                known[run_id] = read_manifest(root, run_id).get("started_at") or ""
            except (OSError, ValueError):
                known[run_id] = ""
        out[run_id] = known[run_id]
    return out


def _read_run_order(root: Path) -> dict[str, str]:
    try:
        data = json.loads((root / CURRENT_DIR / RUN_ORDER_FILE).read_text(encoding="utf-8"))
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_run_order(root: Path, order: dict[str, str]) -> None:
    path = root / CURRENT_DIR / RUN_ORDER_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"_tmp-{uuid.uuid4().hex[:8]}-{path.name}")
    tmp.write_text(json.dumps(order, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def rebuild_run_order(root) -> dict[str, str]:
    """``current/_run_order.json`` again from the manifests of the runs whose rows the view holds."""
    root = Path(root)
    data = dataset(root, CURRENT_DIR)
    present = set(pc.unique(data.to_table(columns=["run_id"]).column("run_id")).to_pylist()) if data else set()
    order = _started(root, sorted(r for r in present if r is not None), {})
    _write_run_order(root, order)
    return order


def _ranks(started: dict[str, str], folding: str) -> dict[str, int]:
    """Run order by start (seconds); among runs started in the same second the one being folded in is the later."""
    runs = sorted(started, key=lambda r: (started[r], r == folding, r))
    return {r: 2 * (k + 1) for k, r in enumerate(runs)}


def _priority(table: pa.Table, ranks: dict[str, int], bonus: int) -> pa.Array:
    run_ids = table.column("run_id")
    keys = pa.array(list(ranks), pa.string())
    vals = pa.array(list(ranks.values()), pa.int64())
    idx = pc.index_in(run_ids, value_set=keys)
    rank = pc.fill_null(pc.take(vals, idx), 0) if len(keys) else pa.repeat(pa.scalar(0, pa.int64()), len(run_ids))
    not_error = pc.cast(pc.not_equal(table.column("verdict"), "ERROR"), pa.int64())
    return pc.add(pc.add(pc.multiply(not_error, _NOT_ERROR), rank), bonus)


def write_row_groups_atomic(path: Path, schema: pa.Schema, batches) -> int:
    """``batches`` into ``path`` (atomically), in row groups of ROW_GROUP_ROWS whatever the batches' sizes."""
    tmp = hidden_name(path)
    n = write_row_groups(tmp, schema, batches)
    os.replace(tmp, path)
    return n


def hidden_name(path: Path) -> Path:
    """A new name beside ``path`` that readers skip (``_`` first): where a file is written before its rename."""
    return path.with_name(f"_tmp-{uuid.uuid4().hex[:8]}-{path.name}")


def write_row_groups(tmp: Path, schema: pa.Schema, batches) -> int:
    """``batches`` into the new file ``tmp``, in row groups of ROW_GROUP_ROWS whatever the batches' sizes."""
    tmp.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    buffer: list[pa.RecordBatch] = []
    buffered = 0
    with pq.ParquetWriter(tmp, schema, compression="zstd", write_statistics=True) as writer:
        for batch in batches:
            if not batch.num_rows:
                continue
            buffer.append(batch)
            buffered += batch.num_rows
            if buffered >= ROW_GROUP_ROWS:
                table = pa.Table.from_batches(buffer).cast(schema)
                writer.write_table(table.slice(0, ROW_GROUP_ROWS), row_group_size=ROW_GROUP_ROWS)
                rest = table.slice(ROW_GROUP_ROWS)
                buffer, buffered = rest.to_batches(), rest.num_rows
                n += ROW_GROUP_ROWS
        if buffered:
            writer.write_table(pa.Table.from_batches(buffer).cast(schema), row_group_size=ROW_GROUP_ROWS)
            n += buffered
    return n


def _merged_batches(verdicts, old, flt, keep):
    """The run's rows of ``keep`` (matching ``flt``), then the old view's rows of every other candidate."""
    yield from scan_batches(verdicts, filter=flt & pc.field("candidate_id").isin(keep))
    if old is not None:
        yield from scan_batches(old, filter=~pc.field("candidate_id").isin(keep))


def _run_verdicts(root: Path, run_id: str, run_date: str | None):
    """(dataset of the run's verdict rows, their files): its compacted files when there are any, else every
    verdict file (a pre-2.0 root's hive files, filtered by run_id)."""
    # a run is folded before its small files are merged into its month's; a merged one (a rebuild) is read from those
    files = (run_table_files(root, "verdicts", run_id, run_date, months=False)
             or run_table_files(root, "verdicts", run_id, run_date))
    if files:
        return parquet_dataset(files, schema=file_schema("verdicts")), files
    data = dataset(root, "verdicts")
    return data, (data.files if data is not None and hasattr(data, "files") else [])


def update_current(root, run_id: str, run_date: str | None = None) -> dict[str, int]:
    """Fold run ``run_id``'s compacted verdicts into ROOT/current/; returns rows per task in the new view.
    ``run_date`` (else read from the run's manifest) says where its compacted files are."""
    root = Path(root)
    verdicts, files = _run_verdicts(root, run_id, run_date)
    if verdicts is None:
        return {}
    in_run = pc.field("run_id") == run_id
    tasks = sorted(set(verdicts.to_table(columns=["task"], filter=in_run).column("task").to_pylist()))
    run_lengths: dict[str, int] = {}
    for f in files:
        lengths_in(pq.read_schema(f), run_lengths)
    known = _read_run_order(root)
    schema = file_schema("current")
    out = {}
    for task in tasks:
        flt = in_run & (pc.field("task") == task)
        new_k = verdicts.to_table(columns=["candidate_id", "verdict", "run_id"], filter=flt)
        path = root / CURRENT_DIR / f"{task}.parquet"
        old = parquet_dataset(str(path), schema=schema) if path.is_file() else None
        old_k = old.to_table(columns=["candidate_id", "verdict", "run_id"]) if old is not None else None
        present = {run_id} | (set(pc.unique(old_k.column("run_id")).to_pylist()) if old_k is not None else set())
        ranks = _ranks(_started(root, sorted(r for r in present if r is not None), known), run_id)
        new_k = pa.table({"candidate_id": new_k.column("candidate_id"), "p_new": _priority(new_k, ranks, 1)})
        if old_k is not None:
            old_k = pa.table({"candidate_id": old_k.column("candidate_id"), "p_old": _priority(old_k, ranks, 0)})
            joined = new_k.join(old_k, "candidate_id", join_type="left outer", use_threads=False)
            wins = pc.or_(pc.is_null(joined.column("p_old")),
                          pc.greater_equal(joined.column("p_new"), pc.fill_null(joined.column("p_old"), 0)))
            keep = pc.unique(joined.filter(wins).column("candidate_id"))
        else:
            keep = pc.unique(new_k.column("candidate_id"))

        lengths = dict(run_lengths)
        if old is not None:
            lengths_in(pq.read_schema(path), lengths)

        batches = _merged_batches(verdicts, old, flt, keep)
        out[task] = write_row_groups_atomic(path, with_reader_metadata(schema, lengths), batches)
        crash_points.reached("fold:task-written")
    if tasks:
        _write_run_order(root, known)
    return out


def rebuild_current(root) -> dict[str, int]:
    """ROOT/current/ from every run's compacted verdicts, oldest run first."""
    root = Path(root)
    folder = root / CURRENT_DIR
    if folder.is_dir():
        for p in folder.glob("*.parquet"):
            p.unlink()
    verdicts = dataset(root, "verdicts")
    if verdicts is None:
        return {}
    present = set(pc.unique(verdicts.to_table(columns=["run_id"]).column("run_id")).to_pylist())
    order = [r["run_id"] for r in list_runs(root) if r["run_id"] in present]
    order += sorted(present - set(order))
    out: dict[str, int] = {}
    for run_id in order:
        out.update(update_current(root, run_id))
    return out
