"""Walking some verdicts of a run, with their turns, in (task, candidate_id) order and a slice at a time.

The review page and the training export need whole rows (texts, turns, pictures) of many verdicts: loading them
all is the run's size in memory, and filtering the catalog once per slice reads the whole run once per slice.
Instead DuckDB joins the verdict and turn rows with the wanted keys and sorts them (out of memory beyond its
limit), and the two sorted streams are walked side by side: one pass over each table, memory one slice. DuckDB
reads the Parquet files itself: through a registered pyarrow dataset its join and sort of a million verdict rows
ran out of its 256 MB (the Arrow scan's buffers count against it and do not spill); its own reader took 5.5 s.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pyarrow as pa

from .read import RunData, _group_turns, table_files
from .schema import PARTITION_SCHEMA, file_schema
from .sorted_stream import SORT_MEMORY_LIMIT

KEY = ("task", "candidate_id")

#: rows fetched from DuckDB at a time: each becomes a Python dict (a verdict row is ~3 kB of objects), so small
WALK_BATCH_ROWS = 2048

_DUCKDB_TYPES = {"string": "VARCHAR", "int64": "BIGINT", "int32": "INTEGER", "double": "DOUBLE", "bool": "BOOLEAN",
                 "binary": "BLOB", "timestamp[ms, tz=UTC]": "TIMESTAMPTZ"}


def _quoted(values) -> str:
    return "[" + ", ".join("'" + str(v).replace("'", "''") + "'" for v in values) + "]"


def table_view(con, root, table: str, name: str) -> bool:
    """A DuckDB view ``name`` over ``table``'s files under ``root`` with :func:`file_schema`'s columns (what
    :func:`spec_vetting.catalog.read.dataset` gives): compacted files and an older root's hive folders, columns
    missing from older files as nulls. False when the table has no file."""
    new, old = table_files(root, table)
    parts = []
    if new:
        parts.append(f"SELECT * FROM read_parquet({_quoted(new)}, union_by_name = true)")
    if old:
        # partition values are text (a task named "1" stays "1"), as in the pyarrow dataset
        types = ", ".join(f"'{f.name}': VARCHAR" for f in PARTITION_SCHEMA)
        parts.append(f"SELECT * FROM read_parquet({_quoted(old)}, union_by_name = true, hive_partitioning = true, "
                     f"hive_types = {{{types}}})")
    if not parts:
        return False
    union = " UNION ALL BY NAME ".join(f"({p})" for p in parts)
    present = {row[0] for row in con.sql(f"DESCRIBE {union}").fetchall()}
    columns = [f'"{f.name}"' if f.name in present else f'CAST(NULL AS {_DUCKDB_TYPES[str(f.type)]}) AS "{f.name}"'
               for f in file_schema(table)]
    con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT {', '.join(columns)} FROM ({union})")
    return True


def _sorted_rows(stack: ExitStack, db, root, table: str, run_id: str, keys: pa.Table, order_by: list[str],
                 replace: list[str]) -> Iterator[dict]:
    """Rows of ``table`` of ``run_id`` whose (candidate_id, task) is in ``keys``, sorted by ``order_by``, with the
    columns ``replace`` taken from ``keys`` instead; one dict at a time. ``db``: the DuckDB database, whose memory
    limit the streams share (each gets a cursor of its own)."""
    con = db.cursor()
    stack.callback(con.close)
    if not table_view(con, root, table, "src"):
        return iter(())
    con.execute("SET default_collation = ''")  # byte order of UTF-8: Python's str order
    con.register("keys", keys.select(["candidate_id", "task", *replace]))
    star = "s.*" + (f" REPLACE ({', '.join(f'k.{c} AS {c}' for c in replace)})" if replace else "")
    sql = (f"SELECT {star} FROM src s JOIN keys k ON s.candidate_id = k.candidate_id AND s.task = k.task "
           f"WHERE s.run_id = $run ORDER BY {', '.join(f's.{c}' for c in order_by)}")
    rel = con.sql(sql, params={"run": str(run_id)})
    reader = (rel.to_arrow_reader(WALK_BATCH_ROWS) if hasattr(rel, "to_arrow_reader")
              else rel.fetch_record_batch(WALK_BATCH_ROWS))

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
    import duckdb

    keys = keys.combine_chunks()
    if not keys.select(list(KEY)).equals(keys.select(list(KEY)).sort_by([(k, "ascending") for k in KEY])):
        raise ValueError("keys must be sorted by (task, candidate_id)")
    with ExitStack() as stack:
        spill = stack.enter_context(tempfile.TemporaryDirectory(prefix="spec-vet-walk-"))
        db = duckdb.connect(config={"memory_limit": SORT_MEMORY_LIMIT, "temp_directory": spill,
                                    "preserve_insertion_order": False, "threads": 1})
        stack.callback(db.close)
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
