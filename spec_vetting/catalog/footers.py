"""A catalog file's Parquet frame and footer: whether it is whole (read in two small reads, cached by size and
modification time), and the runs a month file's footer says it holds. The lowest piece of the catalog's reading:
the listing, the damage checks and the readers all stand on it."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import one_line

# (size, mtime_ns) -> damage (None: sound), per path: a footer is read once per file version
_footer_cache: dict[str, tuple[tuple[int, int], str | None]] = {}
#: path -> ((inode, size, mtime_ns), runs): a month file's footer is read once per version of the file
_merged_cache: dict[str, tuple[tuple[int, int, int], frozenset[str] | None]] = {}

_MAGIC = b"PAR1"


def footer_damage(path: str | os.PathLike) -> str | None:
    """Why ``path`` is not a whole Parquet file (one line), or None when its frame is sound. Cached by size and
    modification time, so the readers pay two small reads per file version."""
    path = str(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        return one_line(exc)
    stamp = (st.st_size, st.st_mtime_ns)
    hit = _footer_cache.get(path)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    damage = _frame_damage(path, st.st_size)
    _footer_cache[path] = (stamp, damage)
    return damage


def _frame_damage(path: str, size: int) -> str | None:
    """The Parquet frame, read in two small reads: ``PAR1`` at both ends and a footer length that fits the file.
    A truncated or overwritten file fails it; a footer damaged inside is found by :func:`whole_file_damage`
    (``catalog check``). Parsing every footer instead cost 1.6 ms a file on each command's first read."""
    if size == 0:
        return "the file is empty (0 bytes)"
    if size < 12:
        return f"too short for a Parquet file ({size} bytes)"
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
            fh.seek(size - 8)
            tail = fh.read(8)
    except OSError as exc:
        return one_line(exc)
    if head != _MAGIC or tail[4:] != _MAGIC:
        return (f"not a whole Parquet file: the 'PAR1' mark is missing at its {'start' if head != _MAGIC else 'end'} "
                f"(truncated or overwritten?); the file is {size} bytes")
    footer = int.from_bytes(tail[:4], "little")
    if footer <= 0 or footer > size - 12:
        return f"not a whole Parquet file: its footer length {footer} does not fit its {size} bytes"
    return None


def whole_file_damage(path: str | os.PathLike, expected: pa.Schema | None = None) -> tuple[str | None, int | None]:
    """(why ``path`` cannot be read through, rows it holds): footer, the columns of ``expected``, every row group
    decoded. The rows are None when the file is damaged."""
    damage = footer_damage(path)
    if damage:
        return damage, None
    damage, rows = _read_through(path, expected)
    if damage:  # from now on this process's readers leave it out too (the frame check could not tell)
        st = os.stat(path)
        _footer_cache[str(path)] = ((st.st_size, st.st_mtime_ns), damage)
    return damage, rows


def _read_through(path, expected: pa.Schema | None) -> tuple[str | None, int | None]:
    try:
        f = pq.ParquetFile(str(path))
        if expected is not None:
            missing = [n for n in expected.names if n not in f.schema_arrow.names]
            if missing:
                return f"columns missing from the file: {', '.join(missing[:8])}", None
        rows = 0
        for k in range(f.num_row_groups):
            rows += f.read_row_group(k).num_rows
        if rows != f.metadata.num_rows:
            return f"the footer says {f.metadata.num_rows} rows, the row groups hold {rows}", None
        return None, rows
    except (OSError, pa.ArrowException) as exc:
        return f"the footer or a row group cannot be decoded ({one_line(exc)})", None


#: footer key of a month file: JSON list of the run ids whose rows it holds
MERGED_RUNS_KEY = b"spec_vetting.merged_runs"


def merged_runs(path) -> set[str] | None:
    """The runs whose rows a month file holds, from its footer; None when the footer cannot be read (a damaged
    file: :mod:`.damage` names it, the readers leave it out)."""
    import pyarrow.parquet as pq

    try:
        st = os.stat(path)
    except OSError:
        return None
    stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
    hit = _merged_cache.get(str(path))
    if hit is not None and hit[0] == stamp:
        return None if hit[1] is None else set(hit[1])
    runs: frozenset[str] | None = None
    if footer_damage(path) is None:
        try:
            meta = pq.read_schema(path).metadata or {}
            runs = frozenset(json.loads(meta.get(MERGED_RUNS_KEY, b"[]")))
        except (OSError, ValueError, pa.ArrowException):
            runs = None
    _merged_cache[str(path)] = (stamp, runs)
    return None if runs is None else set(runs)
