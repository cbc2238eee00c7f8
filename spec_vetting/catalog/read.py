"""Reading a catalog root: verdict and turn rows (Arrow tables), run records, and one run as plain Python records.

The layout is :mod:`spec_vetting.catalog.schema`'s (ROOT/verdicts/run_date=.../task=.../*.parquet and
ROOT/turns/..., hive partitioned; ROOT/_runs/<run_id>/manifest.json). :func:`read_verdicts` and :func:`read_turns`
return Arrow tables with the partition columns added back; :func:`read_run` gives the review page and export one
run as dicts (:class:`RunData`), :func:`read_run_table` gives evaluation one run as an Arrow table.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from ..errors import CatalogReadError
from .damage import split_readable
from .listing import is_visible, latest_run_id, list_runs, read_manifest, table_files, without_merged
from .schema import (
    CURRENT_DIR,
    MONTH_FILE_PREFIX,
    PARTITION_SCHEMA,
    file_schema,
)

# ---------------------------------------------------------------------------------------------------- tables and runs


def readable_files(root: str | os.PathLike, table: str) -> tuple[list[str], list[str]]:
    """:func:`table_files` without the files whose Parquet footer cannot be read (see :mod:`.damage`)."""
    new, old = table_files(root, table)
    return split_readable(new, table)[0], split_readable(old, table)[0]


def run_table_files(root: str | os.PathLike, table: str, run_id: str, run_date: str | None = None, *,
                    months: bool = True) -> list[str]:
    """The compacted files of one run in ``table`` (``ROOT/<table>/<run_date>/part-<run_id>-*.parquet``), and with
    ``months`` the files of its month that small nights are merged into, found by name without opening any file;
    ``run_date`` defaults to the run's manifest's. Other runs' rows may be in them (a month file; a run id that
    another one extends, ``X`` and ``X-ab12``): filter the rows by run_id."""
    folder = Path(root) / table
    if run_date is None:
        try:
            run_date = read_manifest(root, run_id).get("run_date")
        except (OSError, ValueError):
            run_date = None
    pattern = f"part-{run_id}-*.parquet"
    found = list((folder / run_date).glob(pattern) if run_date else folder.glob(f"*/{pattern}"))
    if months and run_date:
        found += (folder / str(run_date)[:7]).glob(f"{MONTH_FILE_PREFIX}*.parquet")
    files = sorted(str(p) for p in found if is_visible(p) and "=" not in p.parent.name)
    # a damaged file is named by the commands and left out, as elsewhere; a run's file a month file holds, too
    return split_readable(without_merged(files), table)[0]


def parquet_dataset(source, **options) -> ds.Dataset:
    """``ds.dataset(source, format="parquet", **options)`` that streams: no pre-buffering of column chunks
    (pyarrow keeps a file's pre-buffered ranges until the file is done, so memory grew with a compacted file's
    size: 0.7 GB scanning 400k verdict rows, 1.2 GB at 800k)."""
    fmt = ds.ParquetFileFormat(default_fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=False))
    return ds.dataset(source, format=fmt, **options)


def scan_batches(data: ds.Dataset, *, columns=None, filter=None, batch_size: int = 1 << 16):
    """The batches of ``data.to_batches(columns=, filter=)``, one Parquet row group at a time. A scan of the whole
    dataset decodes row groups ahead of a slow consumer (a writer) until the file is done, whatever its read-ahead
    settings: 440 MB held while writing out an 800k-row file, against 50 MB a row group at a time."""
    for fragment in data.get_fragments(filter=filter):
        for row_group in fragment.split_by_row_group(filter, schema=data.schema):
            yield from row_group.to_batches(schema=data.schema, columns=columns, filter=filter,
                                            batch_size=batch_size)


def dataset(root: str | os.PathLike, table: str) -> ds.Dataset | None:
    """``table`` (verdicts, turns or current) under ``root`` as one Arrow dataset with :func:`file_schema`'s columns,
    whatever the layout (compacted files, or a pre-2.0 root's hive folders, or both); None when there is none.
    Files whose Parquet footer cannot be read are left out (:func:`~.damage.damaged_files` names them; the commands
    report them), so one damaged file hides its own rows only."""
    schema = file_schema(table)
    new, old = readable_files(root, table)
    parts = []
    if new:
        parts.append(parquet_dataset(new, schema=schema))
    if old:
        parts.append(parquet_dataset(old, schema=schema, partition_base_dir=str(Path(root) / table),
                                partitioning=ds.partitioning(PARTITION_SCHEMA, flavor="hive")))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else ds.dataset(parts)


_dataset = dataset


def run_dataset(root: str | os.PathLike, table: str, run_id: str) -> ds.Dataset | None:
    """The rows of one run (filter them by run_id) as a dataset of its own compacted files only, found by name, so
    that reading one run never opens the other runs' files; every file of ``table`` when the run has none (a
    pre-2.0 root's hive files, a run whose manifest is gone)."""
    files = run_table_files(root, table, run_id) if table != CURRENT_DIR else []
    if files:
        return parquet_dataset(files, schema=file_schema(table))
    return dataset(root, table)


def _read(root, table: str, run_id: str | None, extra_filter=None, columns=None) -> pa.Table:
    data = dataset(root, table) if run_id is None else run_dataset(root, table, run_id)
    if data is None:
        empty = file_schema(table).empty_table()
        return empty.select(columns) if columns else empty
    flt = None
    if run_id is not None:
        flt = pc.field("run_id") == run_id
    if extra_filter is not None:
        flt = extra_filter if flt is None else flt & extra_filter
    return data.to_table(filter=flt, columns=columns)


def read_verdicts(root: str | os.PathLike, run_id: str | None = None, columns: list[str] | None = None) -> pa.Table:
    """Verdict rows under ``root``: every run when ``run_id`` is None, else that run only (use
    :func:`latest_run_id` for the latest). Includes ``run_date`` and ``task``. Only rows of finished shards are in
    the catalog (a running run's shards are staged under ``_runs/`` until it compacts them)."""
    return _read(root, "verdicts", run_id, columns=columns)


def read_current(root: str | os.PathLike, columns: list[str] | None = None, filter=None) -> pa.Table:
    """The current view: one row per (candidate, task), the latest verdict of a finished shard, with its run_id."""
    return _read(root, CURRENT_DIR, None, extra_filter=filter, columns=columns)


def read_turns(
    root: str | os.PathLike,
    run_id: str | None = None,
    candidate_ids: list[str] | None = None,
    columns: list[str] | None = None,
) -> pa.Table:
    """Turn rows under ``root`` (every run when ``run_id`` is None), optionally only for some candidates."""
    flt = None
    if candidate_ids is not None:
        flt = pc.field("candidate_id").isin(pa.array(list(candidate_ids), pa.string()))
    return _read(root, "turns", run_id, extra_filter=flt, columns=columns)


def count_by(root: str | os.PathLike, table: str, keys: list[str], filter=None) -> dict[tuple, int]:
    """Row counts by ``keys``, streamed batch by batch: memory follows the number of groups, not of rows."""
    return count_rows_by(dataset(root, table), keys, filter)


def count_rows_by(data: ds.Dataset | None, keys: list[str], filter=None) -> dict[tuple, int]:
    """:func:`count_by` over a dataset."""
    out: dict[tuple, int] = {}
    if data is None:
        return out
    for batch in scan_batches(data, columns=keys, filter=filter, batch_size=1 << 17):
        if batch.num_rows == 0:
            continue
        grouped = pa.Table.from_batches([batch]).group_by(keys, use_threads=False).aggregate([([], "count_all")])
        cols = [grouped.column(k).to_pylist() for k in keys]
        for key, n in zip(zip(*cols, strict=True), grouped.column("count_all").to_pylist(), strict=True):
            out[key] = out.get(key, 0) + n
    return out


def latest_run_with_rows(root: str | os.PathLike) -> tuple[str | None, list[str]]:
    """(the latest run that has verdict rows, the later runs passed over because they have none), runs in start
    order with the ``_runs/LATEST`` run last. An incremental night that skipped every pair records a run without
    rows; the commands that default to the latest run take the one before it. (None, [...]) when no recorded run
    has rows."""
    order = [r["run_id"] for r in list_runs(root)]
    pointer = latest_run_id(root)
    if pointer in order:
        order.remove(pointer)
        order.append(pointer)
    with_rows = {key[0] for key, n in count_by(root, "verdicts", ["run_id"]).items() if n}
    passed_over = []
    for run_id in reversed(order):
        if run_id in with_rows:
            return run_id, passed_over
        passed_over.append(run_id)
    return None, passed_over


def files_dataset(root, files: list[str]) -> ds.Dataset:
    """Some of ``root``'s verdict files (compacted or hive) as one dataset with the full file schema."""
    root = Path(root)
    base = root / "verdicts"
    new = [f for f in files if "=" not in Path(f).parent.name]
    old = [f for f in files if "=" in Path(f).parent.name]
    schema = file_schema("verdicts")
    parts = []
    if new:
        parts.append(parquet_dataset(new, schema=schema))
    if old:
        parts.append(parquet_dataset(old, schema=schema, partition_base_dir=str(base),
                                     partitioning=ds.partitioning(PARTITION_SCHEMA, flavor="hive")))
    return parts[0] if len(parts) == 1 else ds.dataset(parts)


# ------------------------------------------------------------------------------------------------ one run as records


def resolve_run_id(root, run_id: str | None = None) -> str:
    """``run_id`` when the catalog under ``root`` has verdict rows of it; None: the latest run (the ``_runs/LATEST``
    pointer, else the newest run in the rows). A :class:`CatalogReadError` saying what to do otherwise."""
    root = Path(root)
    if not (root / "verdicts").is_dir():
        raise CatalogReadError(
            f"{root}: no verdicts/ folder here; pass the --out folder of a `spec-vet run` (the catalog root)"
        )
    if run_id is None:
        run_id, _ = latest_run_with_rows(root)
    if run_id is None:  # no run manifest: take the newest run present in the rows
        table = read_verdicts(root, columns=["run_id", "run_date"])
        if table.num_rows == 0:
            raise CatalogReadError(f"{root}: the catalog holds no run yet; run `spec-vet run` first")
        run_id = _latest(table)
    data = run_dataset(root, "verdicts", str(run_id))
    if data is None or data.count_rows(filter=pc.field("run_id") == str(run_id)) == 0:
        raise CatalogReadError(
            f"{root}: run {run_id!r} has no verdict rows; list the runs with `spec-vet catalog runs {root}`"
        )
    return str(run_id)


def read_run_table(root, run_id: str | None = None, columns: list[str] | None = None) -> tuple[str, pa.Table]:
    """(run id, verdict rows as an Arrow table) of ``run_id``, or of the latest run under ``root`` when None;
    ``columns``: only these verdict columns (plus run_id, candidate_id, task). Memory follows the columns, not a
    Python dict per row (evaluation reads this)."""
    run_id = resolve_run_id(root, run_id)
    if columns is not None:
        columns = list(dict.fromkeys(["run_id", "candidate_id", "task", *columns]))
    return run_id, read_verdicts(root, run_id=run_id, columns=columns)


def records(table: pa.Table) -> list[dict[str, Any]]:
    """``table.to_pylist()`` with each distinct text value one shared Python object (a run's verdict, task, engine
    and model columns repeat): about half the memory of plain ``to_pylist`` at a million rows."""
    cols = {}
    for name in table.column_names:
        col = table.column(name)
        if pa.types.is_string(col.type) and col.num_chunks <= 1 and len(col):
            enc = pc.dictionary_encode(col.combine_chunks() if col.num_chunks else col)
            values = enc.dictionary.to_pylist()
            idx = enc.indices.to_pylist()
            cols[name] = [None if i is None else values[i] for i in idx]
        else:
            cols[name] = col.to_pylist()
    names = list(cols)
    return [dict(zip(names, row, strict=True)) for row in zip(*(cols[n] for n in names), strict=True)] if names else []


def run_manifest(root, run_id: str) -> dict:
    """ROOT/_runs/<run_id>/manifest.json as written by the pipeline; {} when it is absent or unreadable."""
    try:
        return read_manifest(root, str(run_id))
    except (OSError, ValueError):
        return {}


def run_tasks_file(root, run_id: str) -> str | None:
    """The ``--tasks-file`` the run was started with (as recorded; may be relative to where it was started)."""
    job = run_manifest(root, run_id).get("job") or {}
    value = job.get("tasks_file") if isinstance(job, dict) else None
    return str(value) if value else None


def _latest(table: pa.Table) -> str:
    """The run with the newest run_date; run ids break ties (they sort by start time in the pipeline's naming)."""
    return max(zip(table.column("run_date").to_pylist(), table.column("run_id").to_pylist(), strict=True))[1]


def read_turns_by_pair(root: Path, run_id: str) -> dict[tuple[str, str], list[dict[str, Any]]]:
    try:
        table = read_turns(root, run_id=run_id)
    except FileNotFoundError:
        return {}
    return _group_turns(table.to_pylist())


def _group_turns(rows: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Turn rows by (candidate_id, task), each list sorted by turn number."""
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault((str(row["candidate_id"]), str(row["task"])), []).append(row)
    for rows in out.values():
        rows.sort(key=lambda r: r.get("turn") if r.get("turn") is not None else 0)
    return out
