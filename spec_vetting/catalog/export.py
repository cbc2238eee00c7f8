"""``spec-vet catalog export``: verdict rows (all runs, or the current view) as FITS, VOTable, ECSV, CSV or Parquet.

Units and descriptions come from the schema (:mod:`.schema`); ids stay exact (integers with nulls become masked
integer columns in FITS/VOTable/ECSV, nullable integers in Parquet); ``started_at`` is written as ISO 8601 UTC
text. ``where`` is an SQL condition over the columns (DuckDB syntax, e.g. ``task = 'cv' AND verdict = 'YES'``),
pushed down to the Parquet scan. CSV and Parquet stream batch by batch (memory independent of the row count);
FITS, VOTable and ECSV are built as one astropy table, so their size is bounded by memory (filter with ``where``).
PNG bytes are never exported (pictures are referenced by hash in ``turns``).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CatalogReadError
from .read import dataset
from .schema import CURRENT_DIR, file_schema, text_lengths, with_reader_metadata

FORMATS = ("fits", "votable", "ecsv", "csv", "parquet")
_ASTROPY_FORMAT = {"fits": "fits", "votable": "votable", "ecsv": "ascii.ecsv"}
#: not exported: bytes, and the row's shard (bookkeeping)
DROP = ("image_png",)


def _batches(root, current: bool, where: str | None, run_id: str | None):
    """(schema, iterator of record batches) of the selected rows, in the catalog's types."""
    table = CURRENT_DIR if current else "verdicts"
    data = dataset(root, table)
    if data is None:
        raise CatalogReadError(f"{root}: no {table}/ rows here; pass the --out folder of a `spec-vet run`")
    schema = file_schema(table)
    keep = [f for f in schema if f.name not in DROP]
    out_schema = pa.schema(keep, metadata=schema.metadata)
    names = [f.name for f in keep]
    if not where:
        flt = (pc.field("run_id") == run_id) if run_id else None
        return out_schema, data.to_batches(columns=names, filter=flt, batch_size=1 << 16)
    import duckdb

    con = duckdb.connect()
    con.register("catalog", data)
    cond = f"({where})"
    if run_id:
        cond += " AND run_id = '" + str(run_id).replace("'", "''") + "'"
    cols = ", ".join(f'"{n}"' for n in names)
    try:
        rel = con.sql(f"SELECT {cols} FROM catalog WHERE {cond}")
        reader = rel.to_arrow_reader(1 << 16) if hasattr(rel, "to_arrow_reader") else rel.fetch_record_batch(1 << 16)
    except duckdb.Error as exc:
        raise CatalogReadError(f"--where {where!r}: {exc}") from exc

    def gen():
        for b in reader:
            yield pa.Table.from_batches([b]).cast(out_schema).to_batches()[0] if b.num_rows else b

    return out_schema, gen()


def _astropy_table(schema: pa.Schema, batches):
    from astropy.table import MaskedColumn, Table

    table = pa.Table.from_batches(list(batches), schema=schema)
    md = schema.metadata or {}
    # FITS keywords: at most 8 characters
    out = Table(meta={"CATALOG": md.get(b"spec_vetting.schema", b"").decode(),
                      "SCHEMAV": md.get(b"spec_vetting.schema_version", b"").decode()})
    for f in schema:
        col = table.column(f.name)
        fm = {k.decode(): v.decode() for k, v in (f.metadata or {}).items()}
        mask = np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        t = f.type
        if pa.types.is_timestamp(t):
            text = pc.strftime(col, format="%Y-%m-%dT%H:%M:%S") if len(col) else col.cast(pa.string())
            values = np.array([v or "" for v in text.to_pylist()], dtype=str if len(col) else "U1")
            desc = fm.get("description", "") + " (ISO 8601, UTC)"
            out[f.name] = MaskedColumn(values, mask=mask, description=desc)
            continue
        if pa.types.is_integer(t):
            values = col.fill_null(0).to_numpy().astype(t.to_pandas_dtype())
        elif pa.types.is_floating(t):
            values = col.fill_null(np.nan).to_numpy()
        elif pa.types.is_boolean(t):
            values = col.fill_null(False).to_numpy(zero_copy_only=False)
        else:
            values = np.array([v if v is not None else "" for v in col.cast(pa.string()).to_pylist()], dtype=str)
            if values.dtype.itemsize == 0:
                values = values.astype("U1")
        out[f.name] = MaskedColumn(values, mask=mask, unit=fm.get("unit") or None, description=fm.get("description"))
    return out


def export_catalog(root, out: str | os.PathLike, fmt: str, *, current: bool = False, where: str | None = None,
                   run_id: str | None = None, overwrite: bool = True) -> int:
    """Write the selected verdict rows to ``out`` in ``fmt``; returns the number of rows."""
    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r}: choose one of {', '.join(FORMATS)}")
    out = Path(out)
    schema, batches = _batches(root, current, where, run_id)
    n = 0
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
            for b in pq.ParquetFile(str(tmp)).iter_batches(batch_size=1 << 16):
                w.write_table(pa.Table.from_batches([b]).cast(final), row_group_size=1 << 17)
        tmp.unlink()
        return n
    import warnings

    from astropy.units import UnitsWarning

    table = _astropy_table(schema, batches)
    with warnings.catch_warnings():
        # VOUnit calls Angstrom deprecated (TOPCAT and astropy read it): the catalog's unit stays as documented
        warnings.simplefilter("ignore", UnitsWarning)
        table.write(str(out), format=_ASTROPY_FORMAT[fmt], overwrite=overwrite)
    return len(table)
