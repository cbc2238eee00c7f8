"""``spec-vet catalog export --format hats``: the verdict rows as a HATS catalog that ``lsdb.read_hats`` opens.

lsdb partitions the rows on HEALPix (its ``_healpix_29`` index, computed with cdshealpix as the catalog's own
column is) and writes the catalog (a HATS collection, without a margin cache); hats then writes the dataset
metadata files. The units and descriptions of the columns are the catalog schema's: lsdb writes
partitions through pandas, which keeps types but not field metadata, so each partition file is given the schema's
metadata back before hats collects the schema (``dataset/_common_metadata``).

Rows without a position (no ra/dec: the spectrum could not be read) have no HEALPix cell and are left out (counted).
The rows are gathered in memory to be partitioned (lsdb's ``from_dataframe``): well under a gigabyte for a few
hundred thousand verdicts; select with ``--current``, ``--run`` or ``--where`` beyond that.
"""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..errors import CatalogReadError

#: the name of the catalog inside the collection written
CATALOG_NAME = "verdicts"
#: lsdb's spatial index column; the catalog's own column of that name is the same cell
INDEX = "_healpix_29"


@contextlib.contextmanager
def _quiet_lsdb():
    """lsdb calls pandas APIs that pandas 3.1 deprecates (set_index(inplace=...)): not this user's concern."""
    with warnings.catch_warnings():
        try:
            from pandas.errors import Pandas4Warning
        except ImportError:  # pandas before 3.1
            Pandas4Warning = FutureWarning  # noqa: N806
        warnings.simplefilter("ignore", Pandas4Warning)
        yield


def _positioned(table: pa.Table) -> pa.Table:
    ra, dec = (np.asarray(table.column(c).to_numpy(zero_copy_only=False), dtype=np.float64) for c in ("ra", "dec"))
    ok = np.isfinite(ra) & np.isfinite(dec) & (np.abs(dec) <= 90.0)
    return table.filter(pa.array(ok))


def _check_out(out: Path) -> None:
    if out.is_file():
        raise FileExistsError(f"{out} is a file; a HATS catalog is a folder: pass a new folder with -o")
    if out.is_dir() and any(out.iterdir()) and not (out / "collection.properties").is_file():
        raise FileExistsError(f"{out} holds files that are not a HATS catalog; pass a new or empty folder with -o "
                              "(an earlier HATS export there is replaced)")


def _with_field_metadata(catalog_dir: Path, schema: pa.Schema) -> None:
    """Give every partition of one HATS catalog the schema's field metadata, then let hats write the dataset's
    metadata files again from the partitions."""
    import hats
    import pyarrow.parquet as pq

    by_name = {f.name: f for f in schema}
    parts = sorted((catalog_dir / "dataset").glob("Norder=*/Dir=*/*.parquet"))
    if not parts:  # an empty margin cache: lsdb wrote its metadata files from the schema already
        return
    for part in parts:
        table = pq.read_table(part)
        fields = [by_name[f.name].with_type(f.type).with_nullable(f.nullable) if f.name in by_name else f
                  for f in table.schema]
        pq.write_table(table.cast(pa.schema(fields, metadata=table.schema.metadata)), part)
    hats.io.write_parquet_metadata(
        catalog_dir, create_per_partition_stats=(catalog_dir / "per_partition_statistics.parquet").is_file())


def write_hats(out, schema: pa.Schema, batches) -> tuple[int, int]:
    """Write the rows of ``batches`` (of ``schema``) as a HATS collection in the folder ``out``; returns (rows
    written, rows left out for want of a position)."""
    import pandas as pd

    out = Path(out)
    _check_out(out)
    table = pa.Table.from_batches(list(batches), schema)
    placed = _positioned(table)
    left_out = table.num_rows - placed.num_rows
    if not placed.num_rows:
        raise CatalogReadError("no selected row has a position (ra, dec), and a HATS catalog places every row by it; "
                               "nothing written (select rows whose spectrum was read, e.g. --where \"ra IS NOT NULL\")")
    body = placed.drop_columns([INDEX]) if INDEX in placed.column_names else placed
    # lsdb's schema: its index first, then the columns, with the catalog's units and descriptions
    index_field = schema.field(INDEX) if INDEX in schema.names else pa.field(INDEX, pa.int64())
    full = pa.schema([index_field.with_nullable(False), *body.schema], metadata=schema.metadata)
    frame = body.to_pandas(types_mapper=pd.ArrowDtype)
    with _quiet_lsdb():
        import lsdb

        # no margin cache: lsdb builds it through numba code that compiles for ~40 s a process; a verdict catalog
        # is the small side of a cross-match (lsdb needs the margin of the right catalog, e.g. Gaia's)
        catalog = lsdb.from_dataframe(frame, ra_column="ra", dec_column="dec", catalog_name=CATALOG_NAME,
                                      schema=full, margin_threshold=None)
        catalog.write_catalog(out, overwrite=True, progress_bar=False)
    for properties in sorted(out.glob("*/hats.properties")):
        _with_field_metadata(properties.parent, full)
    return placed.num_rows, left_out

