"""Walking some verdicts of a run, with their turns, in (task, candidate_id) order and a slice at a time.

The review page and the training export need whole rows (texts, turns, pictures) of many verdicts: loading them
all is the run's size in memory, and filtering the catalog once per slice reads the whole run once per slice.
Instead DuckDB joins the verdict and turn rows with the wanted keys and sorts them (out of memory beyond its
limit), and the two sorted streams are walked side by side: one pass over each table, memory one slice. DuckDB
reads the Parquet files itself (:func:`spec_vetting.catalog.duck.table_view`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pyarrow as pa

from .duck import arrow_batches, spilling_connection, table_view
from .read import _group_turns
from .run_data import RunData

KEY = ("task", "candidate_id")

#: rows fetched from DuckDB at a time: each becomes a Python dict (a verdict row is ~3 kB of objects), so small
WALK_BATCH_ROWS = 2048

def _sorted_rows(stack: ExitStack, db, root, table: str, run_id: str, keys: pa.Table, order_by: list[str],
                 replace: list[str]) -> Iterator[dict]:
    """Rows of ``table`` of ``run_id`` whose (candidate_id, task) is in ``keys``, sorted by ``order_by``, with the
    columns ``replace`` taken from ``keys`` instead; one dict at a time. ``db``: the DuckDB database, whose memory
    limit the streams share (each gets a cursor of its own)."""
    con = db.cursor()
    stack.callback(con.close)
    if not table_view(con, root, table, "src"):
        return iter(())
    con.execute("SET default_collation = ''")  # a cursor's own setting: byte order of UTF-8, Python's str order
    con.register("keys", keys.select(["candidate_id", "task", *replace]))
    star = "s.*" + (f" REPLACE ({', '.join(f'k.{c} AS {c}' for c in replace)})" if replace else "")
    sql = (f"SELECT {star} FROM src s JOIN keys k ON s.candidate_id = k.candidate_id AND s.task = k.task "
           f"WHERE s.run_id = $run ORDER BY {', '.join(f's.{c}' for c in order_by)}")
    rel = con.sql(sql, params={"run": str(run_id)})
    reader = arrow_batches(rel, WALK_BATCH_ROWS)

    def rows():
        for batch in reader:
            yield from batch.to_pylist()

    return rows()


def walk_run(root, run_id: str, keys: pa.Table, slice_rows: int, *, with_turns: bool = True,
             replace: tuple[str, ...] = ()) -> Iterator[tuple[list[tuple[str, str]], RunData]]:
    """(the slice's keys, its RunData) for consecutive slices of ``slice_rows`` keys: ``keys`` is an Arrow table
    with candidate_id and task (and the columns ``replace``, which replace the verdict rows' own, e.g. a label),
    sorted by (task, candidate_id). A slice's RunData holds the verdict rows the run has of its keys, in key order,
    and their turn rows (``image_png`` as stored: fill pictures with :func:`.pictures.fill_pictures`)."""
    if slice_rows < 1:
        raise ValueError(f"slice_rows must be at least 1, got {slice_rows}")
    keys = keys.combine_chunks()
    if not keys.select(list(KEY)).equals(keys.select(list(KEY)).sort_by([(k, "ascending") for k in KEY])):
        raise ValueError("keys must be sorted by (task, candidate_id)")
    with ExitStack() as stack:
        db = stack.enter_context(spilling_connection(prefix="spec-vet-walk-"))
        verdicts = _Cursor(_sorted_rows(stack, db, root, "verdicts", run_id, keys, list(KEY), list(replace)))
        turns = _Cursor(_sorted_rows(stack, db, root, "turns", run_id, keys, [*KEY, "turn"], []) if with_turns
                        else iter(()))
        for start in range(0, keys.num_rows, slice_rows):
            part = keys.slice(start, slice_rows)
            chunk = list(zip(part.column("task").to_pylist(), part.column("candidate_id").to_pylist(), strict=True))
            last = chunk[-1]
            rows = verdicts.take_through(last)
            data = RunData(root=str(Path(root)), run_id=str(run_id), verdicts=rows)
            if with_turns:
                data.turns = _group_turns(turns.take_through(last))
            yield [(c, t) for t, c in chunk], data


class _Cursor:
    """A sorted stream of rows, read up to a key at a time."""

    def __init__(self, rows: Iterator[dict]):
        self.rows = rows
        self.pending: dict | None = next(self.rows, None)

    def take_through(self, last: tuple[str, str]) -> list[dict]:
        out = []
        while self.pending is not None and (self.pending["task"], self.pending["candidate_id"]) <= last:
            out.append(self.pending)
            self.pending = next(self.rows, None)
        return out


def walk_data(data: RunData, keys: pa.Table, slice_rows: int, *, replace: tuple[str, ...] = ()
              ) -> Iterator[tuple[list[tuple[str, str]], RunData]]:
    """:func:`walk_run` over a run already in memory (same slices, same rows)."""
    if slice_rows < 1:
        raise ValueError(f"slice_rows must be at least 1, got {slice_rows}")
    by_key = {(str(v["candidate_id"]), v["task"]): v for v in data.verdicts}
    rows = keys.to_pylist()
    for start in range(0, len(rows), slice_rows):
        chunk = rows[start:start + slice_rows]
        pairs = [(str(r["candidate_id"]), r["task"]) for r in chunk]
        verdicts = [{**by_key[p], **{c: r[c] for c in replace}} for p, r in zip(pairs, chunk, strict=True)
                    if p in by_key]
        yield pairs, RunData(root=data.root, run_id=data.run_id, verdicts=verdicts, turns=data.turns)
