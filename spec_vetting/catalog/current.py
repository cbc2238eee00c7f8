"""The current view, ``ROOT/current/<task>.parquet``: one row per (candidate, task), what we believe now.

The row is the verdict of the latest run (runs ordered by start, as :func:`~.read.list_runs` lists them) whose
shard finished, with every verdict column and its ``run_id`` / ``run_date``; a later ERROR does not replace an
earlier answer (YES, NO or UNDECIDED), but it does show for a pair that never got one. Only compacted rows count,
and only finished shards are ever compacted, so a run that failed part-way contributes what it finished and nothing
else.

:func:`update_current` folds one run into the view (the pipeline calls it at the end of each attempt): it joins
key columns only (candidate id, verdict, run) and streams the rows, so memory follows the number of keys of one
task, not the history. :func:`rebuild_current` builds it from all runs (``spec-vet catalog compact``).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .read import dataset, list_runs, parquet_dataset, scan_batches
from .schema import CURRENT_DIR, file_schema, lengths_in, with_reader_metadata

#: a non-ERROR verdict outranks any ERROR, then the later run wins, then (same run) the new attempt's row
_NOT_ERROR = 1 << 40


def _ranks(root, folding: str | None = None) -> dict[str, int]:
    """Run order by start (seconds); among runs started in the same second the one being folded in is the later."""
    runs = sorted(list_runs(root), key=lambda r: (r.get("started_at") or "", r["run_id"] == folding, r["run_id"]))
    return {r["run_id"]: 2 * (k + 1) for k, r in enumerate(runs)}


def _priority(table: pa.Table, ranks: dict[str, int], bonus: int) -> pa.Array:
    run_ids = table.column("run_id")
    keys = pa.array(list(ranks), pa.string())
    vals = pa.array(list(ranks.values()), pa.int64())
    idx = pc.index_in(run_ids, value_set=keys)
    rank = pc.fill_null(pc.take(vals, idx), 0) if len(keys) else pa.repeat(pa.scalar(0, pa.int64()), len(run_ids))
    not_error = pc.cast(pc.not_equal(table.column("verdict"), "ERROR"), pa.int64())
    return pc.add(pc.add(pc.multiply(not_error, _NOT_ERROR), rank), bonus)


def _write_atomic(path: Path, schema: pa.Schema, batches) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"_tmp-{uuid.uuid4().hex[:8]}-{path.name}")
    n = 0
    with pq.ParquetWriter(tmp, schema, compression="zstd", write_statistics=True) as writer:
        for batch in batches:
            if batch.num_rows:
                writer.write_table(pa.Table.from_batches([batch]).cast(schema), row_group_size=128 * 1024)
                n += batch.num_rows
    os.replace(tmp, path)
    return n


def _merged_batches(verdicts, old, flt, keep):
    """The run's rows of ``keep`` (matching ``flt``), then the old view's rows of every other candidate."""
    yield from scan_batches(verdicts, filter=flt & pc.field("candidate_id").isin(keep))
    if old is not None:
        yield from scan_batches(old, filter=~pc.field("candidate_id").isin(keep))


def update_current(root, run_id: str) -> dict[str, int]:
    """Fold run ``run_id``'s compacted verdicts into ROOT/current/; returns rows per task in the new view."""
    root = Path(root)
    verdicts = dataset(root, "verdicts")
    if verdicts is None:
        return {}
    in_run = pc.field("run_id") == run_id
    tasks = sorted(set(verdicts.to_table(columns=["task"], filter=in_run).column("task").to_pylist()))
    ranks = _ranks(root, run_id)
    schema = file_schema("current")
    out = {}
    for task in tasks:
        flt = in_run & (pc.field("task") == task)
        new_k = verdicts.to_table(columns=["candidate_id", "verdict", "run_id"], filter=flt)
        new_k = pa.table({"candidate_id": new_k.column("candidate_id"), "p_new": _priority(new_k, ranks, 1)})
        path = root / CURRENT_DIR / f"{task}.parquet"
        old = parquet_dataset(str(path), schema=schema) if path.is_file() else None
        if old is not None:
            old_k = old.to_table(columns=["candidate_id", "verdict", "run_id"])
            old_k = pa.table({"candidate_id": old_k.column("candidate_id"), "p_old": _priority(old_k, ranks, 0)})
            joined = new_k.join(old_k, "candidate_id", join_type="left outer", use_threads=False)
            wins = pc.or_(pc.is_null(joined.column("p_old")),
                          pc.greater_equal(joined.column("p_new"), pc.fill_null(joined.column("p_old"), 0)))
            keep = pc.unique(joined.filter(wins).column("candidate_id"))
        else:
            keep = pc.unique(new_k.column("candidate_id"))

        lengths: dict[str, int] = {}
        for f in verdicts.files if hasattr(verdicts, "files") else []:
            lengths_in(pq.read_schema(f), lengths)
        if old is not None:
            lengths_in(pq.read_schema(path), lengths)

        batches = _merged_batches(verdicts, old, flt, keep)
        out[task] = _write_atomic(path, with_reader_metadata(schema, lengths), batches)
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
