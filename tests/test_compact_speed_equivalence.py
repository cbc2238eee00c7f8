"""Compaction reads the parts in large batches (DuckDB scans); what it writes is what reading the parts one by one
gives: the same rows in the same order, columns, types, schema metadata (pandas, astropy's ``table::len::``),
file names, row groups and pictures. The reference here is the straightforward per-part algorithm."""

from __future__ import annotations

import datetime as dt
import hashlib
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spec_vetting.catalog.healpix import healpix29_array
from spec_vetting.catalog.rows import empty_row, rows_to_table
from spec_vetting.catalog.schema import PICTURES_SCHEMA, file_schema, text_lengths, with_reader_metadata
from spec_vetting.pipeline import compact
from spec_vetting.pipeline.store import RunStore, write_parquet_atomic

RUN, DATE = "20240301T000000Z-speed1", "2024-03-01"
ROW_GROUP = 16


def _png(k: int) -> bytes:
    return b"\x89PNG" + bytes([k % 7]) * (k % 7 + 1)


def _parts(store: RunStore, shard: int, task: str, legacy: bool = False) -> None:
    """One shard's parts of ``task``: 2-6 candidates, texts of varying length (some non-ASCII), ra/dec sometimes
    null, pictures repeated across parts, some with their sha256 and some without."""
    sid = f"s{shard:02d}"
    n = 2 + (shard * 7 + len(task)) % 5
    verdicts, turns = [], []
    for i in range(n):
        k = shard * 10 + i
        verdicts.append({**empty_row("verdicts"), "run_id": RUN, "candidate_id": f"{task}-{sid}-{i}",
                         "verdict": ("YES", "NO", "UNDECIDED")[k % 3], "shard_id": sid, "n_turns": 2,
                         "justification": "é" * (k % 13) or None, "ra": None if k % 9 == 0 else (k * 37.1) % 360,
                         "dec": None if k % 9 == 0 else (k * 11.3) % 180 - 90, "targetid": 39627866878511337 + k,
                         "started_at": dt.datetime(2024, 3, 1, 1, 2, 3, k * 1000, tzinfo=dt.UTC),
                         "p_yes": k / 100})
        for turn in (-1, 0):
            png = _png(k + turn) if k % 4 else None
            turns.append({**empty_row("turns"), "run_id": RUN, "candidate_id": f"{task}-{sid}-{i}", "turn": turn,
                          "shard_id": sid, "image_png": png, "assistant_text": "x" * (k % 17) or None,
                          "picture_sha256": hashlib.sha256(png).hexdigest() if png and k % 3 == 0 else None})
    for table, rows in (("verdicts", verdicts), ("turns", turns)):
        path = store.partition(table, task) / store.part_name(sid)
        if legacy:  # written before the footers carried the text lengths
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(rows_to_table(rows, table), path)
        else:
            write_parquet_atomic(path, rows_to_table(rows, table))


def _stage(root, shards: range, done: set[int], legacy: set[int]) -> RunStore:
    store = RunStore(root, RUN, DATE)
    store.shards_dir.mkdir(parents=True, exist_ok=True)
    for s in shards:
        for task in ("cv", "wd"):
            _parts(store, s, task, legacy=s in legacy)
        if s in done:
            store.marker(f"s{s:02d}").write_text(json.dumps({"shard_id": f"s{s:02d}"}))
    return store


def _reference(root, table: str, task: str, done: set[str], seen: set[str], pictures: list,
               flush_every_part: bool = False) -> tuple[pa.Table, list]:
    """The old algorithm: each finished shard's part read alone, run_date/task/_healpix_29 added, PNG bytes moved
    out (first sight of a sha256 keeps the picture); and the row groups its sink made (a group ends after the part
    that fills it, cut into ROW_GROUP-row groups)."""
    files = sorted(p for p in (root / "_runs" / RUN / "parts" / table / f"task={task}").glob("*.parquet")
                   if p.stem[len(f"part-{RUN}-"):] in done)
    parts = [pq.read_table(p) for p in files]
    t = pa.concat_tables(parts)
    lengths = text_lengths(t.drop_columns([c for c in ("image_png",) if c in t.column_names]))
    lengths.update(run_date=len(DATE), task=len(task))
    schema = with_reader_metadata(file_schema(table), lengths)
    cols = {n: t.column(n) for n in t.column_names}
    cols.update(run_date=pa.array([DATE] * t.num_rows), task=pa.array([task] * t.num_rows))
    if table == "verdicts":
        cols["_healpix_29"] = healpix29_array(t.column("ra"), t.column("dec"))
    else:
        shas = []
        for png, sha in zip(t.column("image_png").to_pylist(), t.column("picture_sha256").to_pylist(), strict=True):
            sha = sha or (hashlib.sha256(png).hexdigest() if png else None)
            if png and sha not in seen:
                seen.add(sha)
                pictures.append({"picture_sha256": sha, "image_png": png, "run_date": DATE, "run_id": RUN})
            shas.append(sha)
        cols.update(image_png=pa.nulls(t.num_rows, pa.binary()), picture_sha256=pa.array(shas, pa.string()))
    expected = pa.table([cols[f.name].cast(f.type) for f in schema], schema=schema)
    groups, buffered = [], 0
    for part in parts:
        buffered += part.num_rows
        if buffered >= ROW_GROUP or (flush_every_part and buffered):
            groups += [ROW_GROUP] * (buffered // ROW_GROUP) + ([buffered % ROW_GROUP] if buffered % ROW_GROUP else [])
            buffered = 0
    groups += [buffered] if buffered else []
    return expected, groups


@pytest.fixture
def small_batches(monkeypatch):
    """Row groups of ROW_GROUP rows and scans of 5 parts: every boundary (row groups, scans, an older part read
    alone between two scans) falls inside the small run."""
    monkeypatch.setattr(compact, "ROW_GROUP_ROWS", ROW_GROUP)
    monkeypatch.setattr(compact, "SCAN_FILES", 5)


@pytest.mark.parametrize("limit", ["rows", "bytes"])
def test_batched_compaction_writes_what_the_per_part_algorithm_writes(tmp_path, small_batches, monkeypatch, limit):
    """``bytes``: a buffer limit of one byte, reached by every part, flushes a row group after each part."""
    if limit == "bytes":
        monkeypatch.setattr(compact, "BUFFER_BYTES", 1)
    done = set(range(23)) - {4, 17}
    _stage(tmp_path, range(23), done, legacy={6, 12})
    stats = compact.compact_run(tmp_path, RUN, DATE, {f"s{s:02d}" for s in done})
    seen, pictures = set(), []
    for table in ("verdicts", "turns"):
        for task in ("cv", "wd"):
            expected, groups = _reference(tmp_path, table, task, {f"s{s:02d}" for s in done}, seen, pictures,
                                          flush_every_part=limit == "bytes")
            [path] = sorted((tmp_path / table / DATE).glob(f"part-{RUN}-{task}-*.parquet"))
            assert path.name == f"part-{RUN}-{task}-0.parquet"
            got = pq.read_table(path)
            assert got.schema.equals(expected.schema, check_metadata=True)
            assert got.equals(expected), (table, task)
            md = pq.read_metadata(path)
            assert [md.row_group(i).num_rows for i in range(md.num_row_groups)] == groups
            assert stats["rows"][table] >= expected.num_rows
    [pic_file] = (tmp_path / "pictures" / DATE).glob("*.parquet")
    assert pq.read_table(pic_file).equals(pa.Table.from_pylist(pictures, schema=PICTURES_SCHEMA))
    # astropy reads the longest (non-ASCII) text whole: the lengths in the schema are in characters
    from astropy.table import Table

    t = Table.read(tmp_path / "verdicts" / DATE / f"part-{RUN}-cv-0.parquet")
    assert max(len(str(v)) for v in t["justification"]) == 12


def test_batched_compaction_resumes_and_rolls_over_files_like_before(tmp_path, small_batches):
    """A second attempt: earlier rows merged with the newly staged parts (one row per candidate), and a small
    target_bytes makes several files per task whose rows, in order, are the reference's."""
    _stage(tmp_path, range(8), set(range(8)), legacy=set())
    compact.compact_run(tmp_path, RUN, DATE, {f"s{s:02d}" for s in range(8)})
    # the resumed attempt stages shards 3 (again) and 8-15; the earlier parts of 0-7 are gone except for 3
    store = _stage(tmp_path, range(8, 16), set(range(8, 16)), legacy={9})
    for table in ("verdicts", "turns"):
        for task in ("cv", "wd"):
            for s in (0, 1, 2, 4, 5, 6, 7):
                (store.partition(table, task) / store.part_name(f"s{s:02d}")).unlink()
    done = {f"s{s:02d}" for s in range(16)}
    compact.compact_run(tmp_path, RUN, DATE, done, target_bytes=2000)
    for task in ("cv", "wd"):
        files = sorted((tmp_path / "verdicts" / DATE).glob(f"part-{RUN}-{task}-*.parquet"),
                       key=lambda p: int(p.stem.rsplit("-", 1)[1]))
        assert len(files) > 1
        got = pa.concat_tables([pq.read_table(p) for p in files])
        ids = got.column("candidate_id").to_pylist()
        assert len(ids) == len(set(ids)) and {i.split("-")[1] for i in ids} == done
        staged = sorted(store.partition("verdicts", task).glob("*.parquet"))
        new_ids = [i for p in staged for i in pq.read_table(p, columns=["candidate_id"]).column(0).to_pylist()]
        assert ids[-len(new_ids):] == new_ids  # the staged parts, in order, after the earlier rows
