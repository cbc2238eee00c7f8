"""Sorting a stream of Arrow batches with bounded memory: DuckDB's external sort, spilling to a temporary folder.

pyarrow sorts only what is in memory; a review queue of a million-row night (every row, when a server was down)
must not need a million rows in memory. DuckDB consumes the batches as they come, keeps at most ``memory_limit``
and spills the rest to disk, and gives the sorted rows back as a stream.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator

import pyarrow as pa

#: DuckDB's working memory for one sort; beyond it the sort spills to disk
SORT_MEMORY_LIMIT = "256MB"

#: rows per batch handed back
BATCH_ROWS = 1 << 16


def sorted_batches(schema: pa.Schema, batches: Iterable[pa.RecordBatch], order_by: list[str], *,
                   limit: int | None = None, memory_limit: str = SORT_MEMORY_LIMIT,
                   batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """The rows of ``batches`` (each with ``schema``) sorted by the columns ``order_by`` (ascending; text by code
    point, as Python sorts), the first ``limit`` only when given. Batches are consumed lazily, once."""
    import duckdb

    for name in order_by:
        if name not in schema.names:
            raise ValueError(f"cannot sort by {name!r}: the rows have no such column ({', '.join(schema.names)})")
    source = pa.RecordBatchReader.from_batches(schema, iter(batches))
    keys = ", ".join(f'"{name}" ASC NULLS LAST' for name in order_by)
    sql = f"SELECT * FROM source ORDER BY {keys}" + (f" LIMIT {int(limit)}" if limit is not None else "")
    with tempfile.TemporaryDirectory(prefix="spec-vet-sort-") as spill:
        con = duckdb.connect(config={"memory_limit": memory_limit, "temp_directory": spill,
                                     "preserve_insertion_order": False, "threads": 1})
        try:
            # binary collation: byte order of UTF-8 is code-point order, which is Python's str order
            con.execute("SET default_collation = ''")
            con.register("source", source)
            rel = con.sql(sql)
            reader = rel.to_arrow_reader(batch_rows) if hasattr(rel, "to_arrow_reader") else \
                rel.fetch_record_batch(batch_rows)
            for batch in reader:
                if batch.num_rows:
                    yield batch.cast(schema) if batch.schema != schema else batch
        finally:
            con.close()
