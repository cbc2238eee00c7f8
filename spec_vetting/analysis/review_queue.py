"""The review queue of one run, read from the catalog a batch at a time and sorted out of memory.

:mod:`.confidence` defines which verdicts need a person (:func:`~.confidence.review_flags`)
and in which order; this module applies that to a run of any size: the verdict rows are scanned in batches of
the columns asked for, each batch flagged with pyarrow compute, and the rows kept are sorted by DuckDB
(:mod:`spec_vetting.catalog.sorted_stream`), which spills to disk beyond its memory limit. Memory follows the batch
size and the sort's limit, not the number of rows (a night when a server was down queues every row).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from ..catalog.labels import canonical_task
from ..catalog.read import count_by, dataset, resolve_run_id, scan_batches
from ..catalog.sorted_stream import sorted_batches
from ..errors import CatalogReadError
from .confidence import (
    _LISTED_ORDER,
    DEFAULT_REVIEW_THRESHOLD,
    NOT_QUEUED,
    REVIEW_COLUMNS,
    review_flags,
    review_urgency,
)

#: rows per scanned batch
SCAN_ROWS = 1 << 16

#: columns added to each row: its reasons (";"-separated, listing order), its urgency and confidence (sort keys)
REASONS, URGENCY, CONFIDENCE = "review_reasons", "review_urgency", "review_confidence"

#: queue order: most urgent reason, then least confident, then task and candidate id
QUEUE_ORDER = [URGENCY, CONFIDENCE, "task", "candidate_id"]


@dataclass
class Scan:
    """What a scan saw: the verdict rows of the run it read (``total``), how many need review (``queued``) and
    how many it handed on (``kept``)."""

    run_id: str
    total: int = 0
    queued: int = 0
    kept: int = 0


def reason_text(flags: dict) -> pa.Array:
    """Each row's reasons as one ";"-separated text, in listing order ("" when it has none)."""
    parts = [pc.if_else(flags[reason], f"{reason};", "") for reason in _LISTED_ORDER]
    joined = pc.binary_join_element_wise(*parts, "")
    return pc.utf8_rtrim(joined, characters=";")


def flagged(batch: pa.RecordBatch, threshold: float) -> pa.RecordBatch:
    """``batch`` with the review columns REASONS, URGENCY, CONFIDENCE appended."""
    flags = review_flags(batch, threshold=threshold)
    urgency, confidence = review_urgency(batch, flags)
    arrays = [*batch.columns, reason_text(flags), urgency, confidence]
    return pa.RecordBatch.from_arrays(arrays, names=[*batch.schema.names, REASONS, URGENCY, CONFIDENCE])


def scan_run(root, run_id: str | None, columns: list[str], *, threshold: float = DEFAULT_REVIEW_THRESHOLD,
             only_queued: bool = True, tasks: list[str] | None = None) -> tuple[Scan, pa.Schema, Iterator]:
    """(scan counts, schema, batches): the run's verdict rows, ``columns`` plus candidate_id, task and the review
    columns, only the queued ones when ``only_queued``, only ``tasks`` when given. Batches are read lazily; the
    counts are complete once they are consumed."""
    run_id = resolve_run_id(root, run_id)
    data = dataset(root, "verdicts")
    wanted = list(dict.fromkeys(["candidate_id", "task", *columns]))
    read = list(dict.fromkeys([*wanted, *(c for c in REVIEW_COLUMNS if c in data.schema.names)]))
    flt = pc.field("run_id") == run_id
    if tasks:
        tasks = sorted({canonical_task(t) for t in tasks})
        flt = flt & pc.field("task").isin(pa.array(tasks, pa.string()))
        if data.count_rows(filter=flt) == 0:
            present = sorted(k[0] for k in count_by(root, "verdicts", ["task"], filter=pc.field("run_id") == run_id))
            raise CatalogReadError(f"{root}: run {run_id} has no verdicts of task {', '.join(tasks)}; its tasks: "
                                   f"{', '.join(present)}")
    scan = Scan(run_id=run_id)
    empty = pa.RecordBatch.from_pylist([], schema=pa.schema([data.schema.field(c) for c in read]))
    full = flagged(empty, threshold).schema
    schema = pa.schema([full.field(c) for c in [*wanted, REASONS, URGENCY, CONFIDENCE]])

    def batches():
        for batch in scan_batches(data, columns=read, filter=flt, batch_size=SCAN_ROWS):
            if not batch.num_rows:
                continue
            scan.total += batch.num_rows
            batch = flagged(batch, threshold)
            in_queue = pc.not_equal(batch.column(URGENCY), NOT_QUEUED)
            scan.queued += pc.sum(in_queue).as_py() or 0
            if only_queued:
                batch = batch.filter(in_queue)
            scan.kept += batch.num_rows
            if batch.num_rows:
                yield batch.select(schema.names)

    return scan, schema, batches()


def queue(root, run_id: str | None, columns: list[str], *, threshold: float = DEFAULT_REVIEW_THRESHOLD,
          only_queued: bool = True, tasks: list[str] | None = None, limit: int | None = None
          ) -> tuple[Scan, Iterator[pa.RecordBatch]]:
    """The run's rows in queue order (most urgent first; rows needing no review last when ``only_queued`` is
    False), the first ``limit`` when given, as sorted batches; the scan counts are complete once the first batch
    is out (the sort reads every row before it gives one)."""
    scan, schema, batches = scan_run(root, run_id, columns, threshold=threshold, only_queued=only_queued,
                                     tasks=tasks)
    return scan, sorted_batches(schema, batches, QUEUE_ORDER, limit=limit)
