"""Compaction: the parts of a run's finished shards become a few large files per (table, task).

Shards write one file per (shard, task, table) under ``_runs/<run_id>/parts/`` (crash safety, resume); that is
30,000+ files a night at survey scale and queries follow the file count. At the end of every attempt the runner
calls :func:`compact_run`: the parts of shards that have a done marker (and only those) are streamed into
``ROOT/<table>/<run_date>/part-<run_id>-<task>-<k>.parquet`` (a new file every ``target_bytes``, row groups of
``row_group_rows``), with ``run_date``, ``task`` and ``_healpix_29`` as real columns; PNG bytes found in the parts
(``store_pictures``, or an older root's turns) go once per distinct picture to ``ROOT/pictures/``. Then
:func:`spec_vetting.catalog.current.update_current` folds the run into ``current/``.

Rewriting is idempotent: the output names are a function of (run_id, task, k); a resumed attempt merges the rows
it compacted before (of shards still marked done and not staged again) with the newly staged parts and replaces
the earlier files, so the run ends with exactly one row per pair of its finished shards. The staged parts are
removed once the run is finished.

The parts are read in batches, not one by one: one DuckDB scan of their footers gives the longest text of each
column (the output schema needs it before the first row), then DuckDB scans of a few hundred parts at a time give
their rows in order; the sink still sees them part by part, so the files are what reading each part gave.
:func:`compact_root` (``spec-vet catalog compact ROOT``) rewrites the per-shard hive files of older roots.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..catalog import crash_points
from ..catalog.current import rebuild_current, update_current
from ..catalog.healpix import healpix29_array
from ..catalog.listing import list_runs, read_manifest
from ..catalog.read import parquet_dataset
from ..catalog.schema import (
    PICTURES_DIR,
    PICTURES_SCHEMA,
    TABLES,
    file_schema,
    lengths_in,
    table_schema,
    text_lengths,
    with_reader_metadata,
)
from .store import RunStore, _tmp_name

log = logging.getLogger(__name__)

#: rows per row group (verdicts rows are ~1 kB, turns rows without pictures ~0.5 kB)
ROW_GROUP_ROWS = 128 * 1024
#: a new output file after this many (uncompressed Arrow) bytes; Parquet with zstd is several times smaller
TARGET_BYTES = 2 << 30
#: flush the buffer into a row group at this many buffered bytes even when it has fewer rows (pictures)
BUFFER_BYTES = 128 << 20


def parquet_write_options(schema: pa.Schema) -> dict:
    no_dict = {"image_png"}
    return dict(
        compression="zstd",
        use_dictionary=[n for n in schema.names if n not in no_dict],
        write_statistics=True,
    )


class _Sink:
    """Buffered Parquet output rolling over to a new file every ``target_bytes``; files written atomically."""

    def __init__(self, folder: Path, stem: str, schema: pa.Schema, row_group_rows=None, target_bytes=TARGET_BYTES):
        self.folder, self.stem, self.schema = folder, stem, schema
        # the module's value when not given, read now (not at import) so that a test can make row groups small
        self.row_group_rows, self.target_bytes = row_group_rows or ROW_GROUP_ROWS, target_bytes
        self.buffer: list[pa.Table] = []
        self.buffered_rows = self.buffered_bytes = 0
        self.writer: pq.ParquetWriter | None = None
        self.tmp: Path | None = None
        self.final: Path | None = None
        self.file_bytes = 0
        self.written: list[Path] = []
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        self.buffer.append(table)
        self.buffered_rows += table.num_rows
        self.buffered_bytes += table.nbytes
        if self.buffered_rows >= self.row_group_rows or self.buffered_bytes >= BUFFER_BYTES:
            self._flush()

    def write_parts(self, table: pa.Table, lengths: list[int]) -> None:
        """The rows of consecutive parts (``lengths``: their row counts), buffered as if they came part by part: a
        row group still ends after the part that fills it, with one slice per row group instead of one per part
        (the byte limit is checked on each slice; a slice also ends where the batch's mean row size, doubled,
        says the buffer may reach BUFFER_BYTES, so that near it the slices are single parts again)."""
        row_bytes = 2 * table.nbytes / max(1, table.num_rows)
        start = rows = 0
        for n in lengths:
            rows += n
            if (self.buffered_rows + rows >= self.row_group_rows
                    or self.buffered_bytes + rows * row_bytes >= BUFFER_BYTES):
                self.write(table.slice(start, rows))
                start, rows = start + rows, 0
        if rows:
            self.write(table.slice(start, rows))

    def _flush(self) -> None:
        if not self.buffer:
            return
        table = pa.concat_tables(self.buffer).combine_chunks()
        self.buffer, self.buffered_rows, self.buffered_bytes = [], 0, 0
        if self.writer is None:
            self.final = self.folder / f"{self.stem}-{len(self.written)}.parquet"
            self.folder.mkdir(parents=True, exist_ok=True)
            self.tmp = _tmp_name(self.final)
            self.writer = pq.ParquetWriter(self.tmp, self.schema, **parquet_write_options(self.schema))
        self.writer.write_table(table, row_group_size=self.row_group_rows)
        self.rows += table.num_rows
        self.file_bytes += table.nbytes
        if self.file_bytes >= self.target_bytes:
            self._close_file()

    def _close_file(self) -> None:
        if self.writer is None:
            return
        self.writer.close()
        with open(self.tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(self.tmp, self.final)
        self.written.append(self.final)
        crash_points.reached("compact:file-written")
        self.writer, self.tmp, self.final, self.file_bytes = None, None, None, 0

    def close(self) -> list[Path]:
        self._flush()
        self._close_file()
        return self.written

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.close()
            Path(self.tmp).unlink(missing_ok=True)
            self.writer = None


def _conform(table: pa.Table, schema: pa.Schema, constants: dict[str, str]) -> pa.Table:
    """``table`` with ``schema``'s columns in order: constants filled, missing columns null, types cast."""
    n = table.num_rows
    cols = []
    for f in schema:
        if f.name in constants:
            cols.append(pa.array([constants[f.name]] * n, f.type))
        elif f.name in table.column_names:
            col = table.column(f.name)
            cols.append(col if col.type == f.type else col.cast(f.type))
        else:
            cols.append(pa.nulls(n, f.type))
    return pa.Table.from_arrays(cols, schema=schema)


def _add_healpix(table: pa.Table) -> pa.Table:
    i = table.schema.get_field_index("_healpix_29")
    hp = healpix29_array(table.column("ra"), table.column("dec"))
    return table.set_column(i, table.schema.field(i), hp)


class _Pictures:
    """PNG bytes moved out of turn rows into ROOT/pictures/, once per distinct sha256 within the run."""

    def __init__(self, root: Path, run_id: str, run_date: str):
        self.seen: set[str] = set()
        self.meta = {"run_id": run_id, "run_date": run_date}
        self.sink = _Sink(root / PICTURES_DIR / run_date, f"part-{run_id}", PICTURES_SCHEMA, row_group_rows=1024)

    def take_parts(self, table: pa.Table, counts: list[int]) -> pa.Table:
        """``table`` (the rows of consecutive parts, ``counts`` rows each) without PNG bytes, sha256 filled in; the
        pictures not seen before go to the sink as if part by part (its row groups as when parts came alone)."""
        images = table.column("image_png")
        if images.null_count == len(images):
            return table
        shas = table.column("picture_sha256").to_pylist()
        new_sha, new_png, new_counts = [], [], []
        pngs = iter(enumerate(images.to_pylist()))
        for count in counts:
            before = len(new_sha)
            for k, png in itertools.islice(pngs, count):
                if png is None:
                    continue
                if shas[k] is None:
                    shas[k] = hashlib.sha256(png).hexdigest()
                if shas[k] not in self.seen:
                    self.seen.add(shas[k])
                    new_sha.append(shas[k])
                    new_png.append(png)
            new_counts.append(len(new_sha) - before)
        if new_sha:
            n = len(new_sha)
            self.sink.write_parts(pa.Table.from_arrays(
                [pa.array(new_sha, pa.string()), pa.array(new_png, pa.binary()),
                 pa.array([self.meta["run_date"]] * n, pa.string()), pa.array([self.meta["run_id"]] * n, pa.string())],
                schema=PICTURES_SCHEMA), new_counts)
        i = table.schema.get_field_index("image_png")
        table = table.set_column(i, table.schema.field(i), pa.nulls(table.num_rows, pa.binary()))
        j = table.schema.get_field_index("picture_sha256")
        return table.set_column(j, table.schema.field(j), pa.array(shas, pa.string()))


def _shard_of(path: Path, run_id: str) -> str:
    return path.name[len(f"part-{run_id}-"):-len(".parquet")]


def staged_parts(root: Path, run_id: str, run_date: str, done) -> dict[str, dict[str, list[Path]]]:
    """table -> task -> part files of finished shards (``done``: shard ids, None = every part): the run's staging
    folder and, for an older root, its per-shard files in the hive folders."""
    store = RunStore(root, run_id, run_date)
    out: dict[str, dict[str, list[Path]]] = {t: defaultdict(list) for t in TABLES}
    prefix = f"part-{run_id}-"
    for table in TABLES:
        for base in (store.date_dir(table), root / table / f"run_date={run_date}"):
            if not base.is_dir():
                continue
            for p in sorted(base.glob(f"task=*/{prefix}*.parquet")):
                if done is None or _shard_of(p, run_id) in done:
                    out[table][p.parent.name[len("task="):]].append(p)
    return out


def compact_run(root, run_id: str, run_date: str, done=None, *, target_bytes: int = TARGET_BYTES) -> dict:
    """Compact the finished shards' parts of one run into ROOT/<table>/<run_date>/part-<run_id>-<task>-<k>.parquet.

    Returns {"files": {table: n}, "rows": {table: n}}. Older outputs of this run that are not rewritten (tasks or
    file numbers no longer present) are removed; pre-2.0 hive files of the run are removed once rewritten.
    """
    import duckdb

    from .rollup import merged_into_month

    root = Path(root)
    if merged_into_month(root, run_id, run_date):
        # only a finished run is merged, and a finished run is never resumed: its rows are where they belong, and
        # compacting leftover parts again would put them in the catalog twice
        log.warning("run %s finished and its rows were merged into %s's files: not compacted again", run_id,
                    run_date[:7])
        return {"files": {t: 0 for t in TABLES}, "rows": {t: 0 for t in TABLES}, "merged": True}
    parts = staged_parts(root, run_id, run_date, done)
    with duckdb.connect() as con:  # one connection: opening one costs tens of ms
        return _compact(con, root, run_id, run_date, done, parts, target_bytes)


def _compact(con, root: Path, run_id: str, run_date: str, done, parts, target_bytes: int) -> dict:
    pictures = _Pictures(root, run_id, run_date)
    written: dict[str, list[Path]] = {t: [] for t in TABLES}
    rows = {t: 0 for t in TABLES}
    for table in TABLES:
        schema = file_schema(table)
        # rows this run compacted before (an earlier attempt) of finished shards that are not staged again
        date_dir = root / table / run_date
        earlier = sorted(date_dir.glob(f"part-{run_id}-*.parquet")) if date_dir.is_dir() else []
        earlier_ds = parquet_dataset([str(p) for p in earlier], schema=schema) if earlier else None
        tasks = set(parts[table])
        if earlier_ds is not None:
            tasks |= set(pc.unique(earlier_ds.to_table(columns=["task"], filter=pc.field("run_id") == run_id)
                                   .column("task")).to_pylist())
        for task in sorted(tasks):
            files = parts[table].get(task, [])
            restaged = pa.array(sorted({_shard_of(p, run_id) for p in files}), pa.string())
            footers = _Footers(con, files)
            lengths = _column_lengths(table, task, run_date, earlier, files, footers)
            out_schema = with_reader_metadata(schema, lengths)
            sink = _Sink(root / table / run_date, f"part-{run_id}-{task}", out_schema, target_bytes=target_bytes)
            try:
                if earlier_ds is not None:
                    flt = (pc.field("run_id") == run_id) & (pc.field("task") == task)
                    flt = flt & ~pc.field("shard_id").isin(restaged)
                    if done is not None:
                        flt = flt & pc.field("shard_id").isin(pa.array(sorted(done), pa.string()))
                    # not catalog.read.scan_batches: that reopens a file per row group, and the sink may have
                    # replaced an earlier file of the same name meanwhile (the rollover-on-resume test caught it).
                    # The dataset scan, as before, holds its files open ahead of the sink; a run with more earlier
                    # files per task than its fragment read-ahead (4) and a rollover could still meet this
                    for batch in earlier_ds.to_batches(filter=flt, batch_size=1 << 16):
                        sink.write(pa.Table.from_batches([batch]).cast(out_schema))
                constants = {"run_date": run_date, "task": task}
                # conformed, indexed and stripped of PNG bytes per batch of parts, not per part (the cost was the
                # Python around each small part); written into the sink as if part by part
                for batch, counts in _part_batches(con, files, footers):
                    t = _conform(batch, out_schema, constants)
                    if table == "verdicts":
                        sink.write_parts(_add_healpix(t), counts)
                    else:
                        sink.write_parts(pictures.take_parts(t, counts), counts)
                written[table] += sink.close()
                rows[table] += sink.rows
            except BaseException:
                sink.abort()
                raise
    written_pictures = pictures.sink.close()
    keep = {p.resolve() for files in written.values() for p in files} | {p.resolve() for p in written_pictures}
    _remove_stale_outputs(root, run_id, run_date, keep)
    return {"files": {t: len(v) for t, v in written.items()} | {"pictures": len(written_pictures)}, "rows": rows}


def _column_lengths(table: str, task: str, run_date: str, earlier: list[Path], files: list[Path],
                   footers: _Footers) -> dict[str, int]:
    """The longest text of each column (astropy's Table.read needs it in the schema, so it is known before the
    first row is written): from the footers, and from the data of an older root's parts that have none."""
    lengths: dict[str, int] = {}
    for p in earlier:
        lengths_in(pq.read_schema(p), lengths)
    for k, v in footers.lengths.items():
        lengths[k] = max(lengths.get(k, 1), v)
    text_cols = [f.name for f in table_schema(table) if f.name != "image_png" and
                 (pa.types.is_string(f.type) or pa.types.is_binary(f.type))]
    for path in files:
        if path not in footers.versions:  # an older root's part, which may lack columns added since
            present = set(pq.read_schema(path).names)
            text_lengths(pq.read_table(path, columns=[c for c in text_cols if c in present]), lengths)
    lengths.update(run_date=len(run_date), task=max(1, len(task)))
    return lengths


#: a part's footer key naming the schema version it was written with: parts of one version have one set of columns
_VERSION = "spec_vetting.schema_version"
#: parts read by one scan: bounded in number and in bytes on disk (PNG bytes do not compress), to bound memory and
#: how far past BUFFER_BYTES a row group can grow (the byte limit is checked per slice of a scan)
SCAN_FILES = 512
SCAN_BYTES = 32 << 20


class _Footers:
    """What the parts' footers say (the schema metadata pyarrow wrote), read in one DuckDB scan of the footers:
    ``versions`` (path -> schema version, of parts that carry lengths) and ``lengths``, the longest text of each
    column over them (:func:`spec_vetting.pipeline.store.write_parquet_atomic` puts it there)."""

    def __init__(self, con, files: list[Path]):
        self.versions: dict[Path, str | None] = {}
        self.lengths: dict[str, int] = {}
        if not files:
            return
        by_name = {str(p): p for p in files}
        con.execute("CREATE OR REPLACE TEMP TABLE kv AS SELECT file_name, decode(key) AS k, decode(value) AS v "
                    "FROM parquet_kv_metadata(?) WHERE starts_with(decode(key), 'table::len::') OR decode(key) = ?",
                    [list(by_name), _VERSION])
        with_lengths = con.execute("SELECT file_name, max(v) FILTER (k = ?) FROM kv GROUP BY file_name "
                                   "HAVING count(*) FILTER (k != ?) > 0", [_VERSION, _VERSION]).fetchall()
        self.versions = {by_name[name]: version for name, version in with_lengths}
        longest = con.execute("SELECT k[13:], max(CAST(v AS BIGINT)) FROM kv WHERE k != ? GROUP BY k",
                              [_VERSION]).fetchall()
        self.lengths = {k: max(1, int(v)) for k, v in longest}


def _part_batches(con, files: list[Path], footers: _Footers):
    """The parts' rows, in the order of ``files``, as a few large tables, each with its parts' row counts.

    Consecutive parts written with one schema version are scanned together (DuckDB reads many small Parquet files
    several times faster than pyarrow reads them one by one); a part without a version or lengths (an older root's)
    is read alone, with its own columns."""
    group: list[Path] = []
    group_bytes = 0
    for path in files:
        version = footers.versions.get(path)
        if group and (version != footers.versions[group[0]] or len(group) >= SCAN_FILES or group_bytes >= SCAN_BYTES):
            yield _scan(con, group)
            group, group_bytes = [], 0
        if version is None:
            t = pq.read_table(path)
            yield t, [t.num_rows]
        else:
            group.append(path)
            group_bytes += path.stat().st_size
    if group:
        yield _scan(con, group)


def _scan(con, files: list[Path]) -> tuple[pa.Table, list[int]]:
    """``files`` (all with the same columns) read in one DuckDB scan; its rows keep the order of the files (DuckDB
    preserves insertion order) and of the rows in each file (a part's rows start where file_row_number is 0)."""
    rel = con.sql("SELECT * FROM read_parquet($files, hive_partitioning = false, file_row_number = true)",
                  params={"files": [str(p) for p in files]})
    table = rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.fetch_arrow_table()
    row_number = table.column("file_row_number")
    starts = pc.indices_nonzero(pc.equal(row_number, 0)).to_pylist() + [table.num_rows]
    table = table.drop_columns(["file_row_number"])
    return table, [b - a for a, b in zip(starts[:-1], starts[1:], strict=True)]


def _remove_stale_outputs(root: Path, run_id: str, run_date: str, keep: set[Path]) -> None:
    """Remove this run's compacted files that were not just written (resolved paths in ``keep``), and its per-shard
    files of an older root's hive layout."""
    for table in (*TABLES, PICTURES_DIR):
        folder = root / table / run_date
        for p in folder.glob(f"part-{run_id}-*.parquet") if folder.is_dir() else []:
            if p.resolve() not in keep:
                p.unlink(missing_ok=True)
    # an older root's per-shard files of this run: rewritten, or of unfinished shards (never counted)
    for table in TABLES:
        legacy = root / table / f"run_date={run_date}"
        for p in sorted(legacy.glob(f"task=*/part-{run_id}-*.parquet")) if legacy.is_dir() else []:
            p.unlink(missing_ok=True)
            _remove_empty_dirs(p.parent, stop=root / table)


def _remove_empty_dirs(folder: Path, stop: Path) -> None:
    while folder != stop and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


def compact_and_update(root, run_id: str, run_date: str, done) -> dict:
    """What the runner calls at the end of every attempt: compact the finished shards, fold the run into
    current/. The staged parts stay until the manifest says finished (then :meth:`RunStore.remove_parts`)."""
    stats = compact_run(root, run_id, run_date, done)
    update_current(root, run_id, run_date)
    return stats


def compact_root(root) -> dict:
    """``spec-vet catalog compact ROOT``: every run with per-shard files (an older root's hive folders, or a run
    that stopped before its compaction) is compacted, only finished shards counting, and folded into current/.

    It costs what there is to compact: a finished run whose staging folder is gone (every run the pipeline
    finished) is passed over on its manifest and one look for that folder, without listing or opening any of its
    files; current/ is only rebuilt when it is missing while the catalog has verdicts (an older root). Runs that
    are compacted already are left as they are; running it twice changes nothing."""
    from ..catalog.listing import table_files
    from .rollup import recover_root

    root = Path(root)
    recovered = recover_root(root)  # what a crash left of a merge or a write (listings; no file opened when none)
    done_runs = []
    for run in list_runs(root):
        run_id = run["run_id"]
        try:
            m = read_manifest(root, run_id)
        except (OSError, ValueError):
            continue
        run_date = m.get("run_date") or run.get("run_date")
        store = RunStore(root, run_id, run_date)
        if m.get("status") == "finished" and not store.parts_dir.is_dir() and not _has_hive_files(root, run_date):
            continue  # compacted when it finished, its parts removed: nothing here to do
        parts = staged_parts(root, run_id, run_date, None)
        if not any(parts[t] for t in TABLES):
            continue
        done = set(store.done_markers()) if store.shards_dir.is_dir() else None
        stats = compact_run(root, run_id, run_date, done)
        if m.get("status") == "finished":
            store.remove_parts()
        done_runs.append({"run_id": run_id, "run_date": run_date, **stats})
    # hive files of runs without a manifest: compacted as they are (no markers to check)
    for table in TABLES:
        for date_dir in sorted((root / table).glob("run_date=*")) if (root / table).is_dir() else []:
            run_date = date_dir.name[len("run_date="):]
            run_ids = {p.name[len("part-"):].rsplit("-", 1)[0] for p in date_dir.glob("task=*/part-*.parquet")}
            for run_id in sorted(run_ids):
                if any(r["run_id"] == run_id for r in done_runs):
                    continue
                stats = compact_run(root, run_id, run_date, None)
                done_runs.append({"run_id": run_id, "run_date": run_date, **stats})
    has_current = bool(table_files(root, "current")[0])
    current = None
    if not has_current and any(table_files(root, "verdicts")):
        rebuild_current(root)
        current = "rebuilt"
    else:
        # the runs just compacted, in start order (a fold weighs each row by its run's start, so an older run
        # folded now still loses to the newer ones already in the view)
        for r in done_runs:
            update_current(root, r["run_id"], r["run_date"])
        current = "updated" if done_runs else None
    if done_runs:  # a finished run compacted again (a crash before its parts were removed): merged now
        recovered += recover_root(root)
    # current: what happened to current/ ("rebuilt" when it was missing, "updated" with the runs compacted, None)
    return {"root": str(root), "compacted": done_runs, "current": current, "recovered": recovered}


def _has_hive_files(root: Path, run_date: str | None) -> bool:
    """Whether a pre-2.0 root's per-shard folders exist for ``run_date`` (one look per table, no listing)."""
    return bool(run_date) and any((root / t / f"run_date={run_date}").is_dir() for t in TABLES)
