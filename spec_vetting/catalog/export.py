"""``spec-vet catalog export``: verdict rows (all runs, or the current view) as FITS, VOTable, ECSV, CSV, Parquet or a
HATS catalog for lsdb (:mod:`.hats_export`).

Units and descriptions come from the schema (:mod:`.schema`); ids stay exact (integers with nulls become masked
integer columns in FITS/VOTable/ECSV, nullable integers in Parquet); ``started_at`` is written as ISO 8601 UTC
text. ``where`` is an SQL condition over the columns (DuckDB syntax, e.g. ``task = 'cv' AND verdict = 'YES'``),
pushed down to the Parquet scan. Every format streams batch by batch, so memory does not grow with the row
count; FITS, VOTable and ECSV are what astropy writes from the whole table (:mod:`.astropy_stream`; FITS text is
ASCII, other characters as backslash escapes). FITS and VOTable read the selected rows twice (their headers give
the row count and the longest texts). PNG bytes are never exported (pictures are referenced by hash in ``turns``).
What VO readers see beyond units and descriptions (UCDs, integer nulls, the time column) is in :mod:`.vo`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CatalogReadError
from .astropy_stream import write_ecsv, write_fits, write_votable
from .duck import arrow_batches
from .read import dataset, parquet_dataset, scan_batches
from .schema import CURRENT_DIR, file_schema, text_lengths, with_reader_metadata

FORMATS = ("fits", "votable", "ecsv", "csv", "parquet", "hats")
_STREAMED = {"fits": write_fits, "votable": write_votable, "ecsv": write_ecsv}
#: rows per batch read (and the most per chunk handed to astropy)
BATCH_ROWS = 1 << 16
#: not exported: bytes, and the row's shard (bookkeeping)
DROP = ("image_png",)


def _batches(root, current: bool, where: str | None, run_id: str | None, batch_rows: int = BATCH_ROWS,
             columns: list[str] | None = None):
    """(schema, iterator of record batches) of the selected rows, in the catalog's types; ``columns``: only those
    (the filter may still use any column)."""
    table = CURRENT_DIR if current else "verdicts"
    data = dataset(root, table)
    if data is None:
        raise CatalogReadError(f"{root}: no {table}/ rows here; pass the --out folder of a `spec-vet run`")
    schema = file_schema(table)
    keep = [f for f in schema if f.name not in DROP and (columns is None or f.name in columns)]
    out_schema = pa.schema(keep, metadata=schema.metadata)
    names = [f.name for f in keep]
    if not where:
        flt = (pc.field("run_id") == run_id) if run_id else None
        return out_schema, scan_batches(data, columns=names, filter=flt, batch_size=batch_rows)
    import duckdb

    con = duckdb.connect()
    con.register("catalog", data)
    cond = f"({where})"
    if run_id:
        cond += " AND run_id = '" + str(run_id).replace("'", "''") + "'"
    cols = ", ".join(f'"{n}"' for n in names)
    try:
        reader = arrow_batches(con.sql(f"SELECT {cols} FROM catalog WHERE {cond}"), batch_rows)
    except duckdb.Error as exc:
        raise CatalogReadError(f"--where {where!r}: {exc}") from exc

    def gen():
        for b in reader:
            yield pa.Table.from_batches([b]).cast(out_schema).to_batches()[0] if b.num_rows else b

    return out_schema, gen()


def export_catalog(root, out: str | os.PathLike, fmt: str, *, current: bool = False, where: str | None = None,
                   run_id: str | None = None, overwrite: bool = True, batch_rows: int = BATCH_ROWS,
                   notice: Callable[[str], None] | None = None) -> int:
    """Write the selected verdict rows to ``out`` in ``fmt`` (a folder for hats); returns the number of rows
    written. ``batch_rows``: rows read at a time (memory is a few batches whatever the row count; hats gathers the
    rows). ``notice`` is told what the user should know (rows a format cannot hold)."""
    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r}: choose one of {', '.join(FORMATS)}")
    out = Path(out)
    schema, batches = _batches(root, current, where, run_id, batch_rows)
    n = 0
    if fmt == "hats":
        from .hats_export import write_hats

        n, left_out = write_hats(out, schema, batches)
        if left_out and notice:
            notice(f"{left_out} row(s) without a position (ra/dec) left out: a HATS catalog places every row")
        return n
    if fmt == "csv":
        import pyarrow.csv as pcsv

        with pcsv.CSVWriter(str(out), schema) as w:
            for b in batches:
                w.write_batch(b)
                n += b.num_rows
        return n
    if fmt == "parquet":
        import pyarrow.parquet as pq

        # the text lengths astropy needs are known only at the end: a second pass streams the file once more
        tmp = out.with_name(f"_tmp-{out.name}")
        lengths: dict[str, int] = {}
        with pq.ParquetWriter(str(tmp), schema, compression="zstd") as w:
            for b in batches:
                text_lengths(b, lengths)
                w.write_table(pa.Table.from_batches([b]).cast(schema))
                n += b.num_rows
        final = with_reader_metadata(schema, lengths)
        with pq.ParquetWriter(str(out), final, compression="zstd") as w:
            for b in scan_batches(parquet_dataset(str(tmp))):
                w.write_table(pa.Table.from_batches([b]).cast(final), row_group_size=1 << 17)
        tmp.unlink()
        return n
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} exists; pass overwrite=True to replace it")

    opened = [batches]

    def scan(columns=None):
        # the scan opened above serves the full pass; FITS and VOTable first measure the text columns (row count,
        # longest texts for their headers) in a scan of their own
        if columns is None and opened:
            return opened.pop()
        return _batches(root, current, where, run_id, batch_rows, columns)[1]

    return _STREAMED[fmt](out, schema, scan)
