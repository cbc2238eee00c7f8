"""Sorting a stream of Arrow batches with bounded memory: DuckDB's external sort, spilling to a temporary folder.

pyarrow sorts only what is in memory; a review queue of a million-row night (every row, when a server was down)
must not need a million rows in memory. DuckDB consumes the batches as they come, keeps at most ``memory_limit``
and spills the rest to disk, and gives the sorted rows back as a stream.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

from .duck import SORT_MEMORY_LIMIT, arrow_batches, spilling_connection

#: rows per batch handed back
BATCH_ROWS = 1 << 16


def sorted_batches(schema: pa.Schema, batches: Iterable[pa.RecordBatch], order_by: list[str], *,
                   limit: int | None = None, memory_limit: str = SORT_MEMORY_LIMIT,
                   batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """The rows of ``batches`` (each with ``schema``) sorted by the columns ``order_by`` (ascending; text by code
    point, as Python sorts), the first ``limit`` only when given. Batches are consumed lazily, once."""
    for name in order_by:
        if name not in schema.names:
            raise ValueError(f"cannot sort by {name!r}: the rows have no such column ({', '.join(schema.names)})")
    source = pa.RecordBatchReader.from_batches(schema, iter(batches))
    keys = ", ".join(f'"{name}" ASC NULLS LAST' for name in order_by)
    sql = f"SELECT * FROM source ORDER BY {keys}" + (f" LIMIT {int(limit)}" if limit is not None else "")
    with spilling_connection(memory_limit, prefix="spec-vet-sort-") as con:
        con.register("source", source)
        for batch in arrow_batches(con.sql(sql), batch_rows):
            if batch.num_rows:
                yield batch.cast(schema) if batch.schema != schema else batch
