"""The catalog as other tools read it: real pictures re-rendered to their hashes, astropy exports, exact ids in
pandas, the compact command on a pre-2.0 root, and the order-29 HEALPix column."""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spec_vetting.catalog.read import read_current, read_turns, read_verdicts
from spec_vetting.pipeline import runner
from spec_vetting.pipeline.config import job_from_dict

ZOOM = ('<think>look</think>\n<tool_call>\n{"name": "spectral_visualization_tool", "arguments": '
        '{"wavelength_range": [6500, 6620]}}\n</tool_call>')
YES = "<think>Broad lines.</think>\n<answer>\\boxed{YES} broad Balmer emission</answer>"


@pytest.fixture(scope="module")
def real_root(tmp_path_factory):
    """One small run with the real renderer over example files of each survey (module-scoped: rendering costs)."""
    from spec_vetting.io.candidates import load_candidates
    from spec_vetting.synthetic.examples import write_examples

    tmp = tmp_path_factory.mktemp("real")
    write_examples(tmp / "ex", n=6, seed=3)
    cands = load_candidates(tmp / "ex" / "candidates.csv")
    by_survey = {}
    for c in cands:
        if c.path and str(c.path).endswith((".fits", ".fits.gz", ".fit")):
            by_survey.setdefault(str(c.path).split("/")[-1][:4], c)
    chosen = list(by_survey.values())[:3]
    import spec_vetting.pipeline.runner as r

    orig = r.load_all_candidates
    r.load_all_candidates = lambda sources: chosen
    try:
        job = job_from_dict({
            "candidates": ["unused.csv"], "tasks": ["cv"], "out": str(tmp / "cat"),
            "engine": {"name": "scripted", "options": {"replies": [ZOOM, YES]}}, "shard_size": 2,
            "cluster": {"processes": False, "workers": 1, "dashboard": False},
        })
        out = runner.run_job(job, progress=False, echo=lambda s: None)
    finally:
        r.load_all_candidates = orig
    assert out.status == "finished"
    return tmp / "cat"


def test_re_rendered_pictures_match_their_hashes(real_root, tmp_path):
    from click.testing import CliRunner

    from spec_vetting.catalog.pictures import turn_picture
    from spec_vetting.cli import main

    turns = read_turns(real_root).to_pylist()
    shown = [t for t in turns if t["picture_sha256"]]
    assert shown and all(t["image_png"] is None for t in turns)
    assert {t["turn"] for t in shown} == {-1, 0}
    for t in shown:
        png, row = turn_picture(real_root, t["candidate_id"], t["task"], t["turn"])
        assert hashlib.sha256(png).hexdigest() == t["picture_sha256"] and png.startswith(b"\x89PNG")
    t = shown[0]
    res = CliRunner().invoke(main, ["catalog", "picture", str(real_root), t["candidate_id"], t["task"],
                                    str(t["turn"]), "-o", str(tmp_path / "x.png")])
    assert res.exit_code == 0, res.output
    assert hashlib.sha256((tmp_path / "x.png").read_bytes()).hexdigest() == t["picture_sha256"]


@pytest.mark.parametrize("fmt,suffix", [("fits", "fits"), ("votable", "xml"), ("ecsv", "ecsv"),
                                        ("csv", "csv"), ("parquet", "parquet")])
def test_exports_open_in_astropy_with_units_and_exact_ids(real_root, tmp_path, fmt, suffix):
    from astropy.table import Table
    from click.testing import CliRunner

    from spec_vetting.cli import main

    out = tmp_path / f"v.{suffix}"
    res = CliRunner().invoke(main, ["catalog", "export", str(real_root), "--format", fmt, "-o", str(out),
                                    "--current", "--where", "verdict = 'YES'"])
    assert res.exit_code == 0, res.output
    want = read_current(real_root).to_pylist()
    import warnings

    from astropy.units import UnitsWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnitsWarning)  # VOUnit deprecates Angstrom; astropy still reads it
        table = Table.read(str(out), format="ascii.csv" if fmt == "csv" else None)
    assert len(table) == len(want) > 0
    assert set(table["candidate_id"]) == {r["candidate_id"] for r in want}
    if fmt != "csv":
        assert str(table["ra"].unit) == "deg"
        assert "Right ascension" in (table["ra"].description or "")
    if fmt in ("fits", "votable", "ecsv"):  # masked integer columns: ids exact, nulls masked
        for col in ("obsid", "targetid", "plate", "mjd", "fiberid", "_healpix_29"):
            got = {str(c): (None if v is None or getattr(v, "mask", False) is True else int(v))
                   for c, v in zip(table["candidate_id"], table[col].tolist(), strict=True)}
            assert got == {r["candidate_id"]: r[col] for r in want}, col


def test_exact_ids_through_pandas(real_root):
    import pandas as pd

    for folder in ("verdicts", "current"):
        df = pd.read_parquet(real_root / folder)  # the README recipe, no options
        want = {r["candidate_id"]: r for r in read_verdicts(real_root).to_pylist()}
        assert str(df["targetid"].dtype) == "Int64" and str(df["obsid"].dtype) == "Int64"
        for cid, tid, obsid in zip(df["candidate_id"], df["targetid"], df["obsid"], strict=True):
            assert (None if pd.isna(tid) else int(tid)) == want[cid]["targetid"]
            assert (None if pd.isna(obsid) else int(obsid)) == want[cid]["obsid"]
    # a file read alone has task and run_date; astropy opens it
    from astropy.table import Table

    f = next((real_root / "verdicts").rglob("*.parquet"))
    assert {"task", "run_date", "_healpix_29"} <= set(Table.read(f).colnames)


def test_exact_ids_through_polars_and_duckdb(tmp_path):
    """The README's polars and DuckDB recipes give every id back exactly (int64 with nulls, no float), on an
    older root compacted by `spec-vet catalog compact` (its files lack columns added since, e.g. recovered_verdict:
    measuring their text lengths once failed with ArrowInvalid)."""
    import duckdb
    import polars as pl
    from test_eval_support import verdict_row, write_catalog

    from spec_vetting.pipeline.compact import compact_root

    big = 39627866878511337  # a DESI TARGETID: float64 would make it ...336
    rows = [verdict_row("desi", "cv", "YES", targetid=big, obsid=None, fiberid=None, survey="desi"),
            verdict_row("lamost", "cv", "NO", targetid=None, obsid=2**62 + 1),
            verdict_row("nopos", "cv", "NO", targetid=big + 2, ra=None, dec=None)]
    root = write_catalog(tmp_path / "cat", rows)
    compact_root(root)
    ids = ("obsid", "targetid", "fiberid", "_healpix_29")
    want = {r["candidate_id"]: {c: r[c] for c in ids} for r in read_current(root).to_pylist()}
    assert want["desi"]["targetid"] == big and want["lamost"]["obsid"] == 2**62 + 1
    assert want["nopos"]["_healpix_29"] is None and want["desi"]["_healpix_29"] is not None
    df = pl.scan_parquet(f"{root}/current/*.parquet").collect()
    assert all(df.schema[c] == pl.Int64 for c in ids)
    assert {r["candidate_id"]: {c: r[c] for c in ids} for r in df.iter_rows(named=True)} == want
    got = duckdb.sql(f"SELECT candidate_id, {', '.join(ids)} FROM '{root}/current/*.parquet'").fetchall()
    assert {r[0]: dict(zip(ids, r[1:], strict=True)) for r in got} == want
    night = pl.scan_parquet(f"{root}/verdicts/*/*.parquet").filter(pl.col("task") == "cv").collect()
    assert sorted(night["targetid"].drop_nulls().to_list()) == [big, big + 2]


def test_healpix_29_matches_cdshealpix_and_nulls_without_position():
    import numpy as np
    from astropy import units as u
    from cdshealpix.nested import lonlat_to_healpix

    from spec_vetting.catalog.healpix import ang2pix_nest, healpix29_array

    ra = pa.array([10.5, None, 359.9, 200.0], pa.float64())
    dec = pa.array([-30.25, 5.0, 89.9, float("nan")], pa.float64())
    got = healpix29_array(ra, dec).to_pylist()
    assert got[1] is None and got[3] is None
    assert got[0] == int(np.ravel(lonlat_to_healpix([10.5] * u.deg, [-30.25] * u.deg, 29))[0])
    # the nside-64 column is the same cell, 23 orders coarser
    assert got[0] >> (2 * (29 - 6)) == int(ang2pix_nest(64, np.array([10.5]), np.array([-30.25]))[0])


def test_compact_rewrites_a_pre_2_root_and_counts_only_finished_shards(tmp_path):
    """A root in the old layout (hive folders, one file per shard, no task/run_date columns)."""
    import json

    from click.testing import CliRunner

    from spec_vetting.catalog.rows import empty_row, rows_to_table
    from spec_vetting.cli import main

    root = tmp_path / "old"
    run = "20240101T000000Z-abcdef"
    (root / "_runs" / run / "shards").mkdir(parents=True)
    (root / "_runs" / run / "manifest.json").write_text(json.dumps(
        {"run_id": run, "run_date": "2024-01-01", "status": "failed", "started_at": "2024-01-01T00:00:00"}))
    for shard, done in (("s0", True), ("s1", False)):
        if done:
            (root / "_runs" / run / "shards" / f"{shard}.done").write_text("{}")
        for task in ("cv", "wd"):
            rows = [{**empty_row("verdicts"), "run_id": run, "candidate_id": f"{shard}-{i}", "verdict": "NO",
                     "shard_id": shard, "targetid": 39627866878511337} for i in range(3)]
            folder = root / "verdicts" / "run_date=2024-01-01" / f"task={task}"
            folder.mkdir(parents=True, exist_ok=True)
            pq.write_table(rows_to_table(rows, "verdicts"), folder / f"part-{run}-{shard}.parquet")
    assert read_verdicts(root).num_rows == 12  # the readers read the old layout too
    res = CliRunner().invoke(main, ["catalog", "compact", str(root)])
    assert res.exit_code == 0, res.output
    t = read_verdicts(root)
    assert t.num_rows == 6 and set(t.column("shard_id").to_pylist()) == {"s0"}  # the unfinished shard is dropped
    assert not list((root / "verdicts").glob("run_date=*"))
    assert sorted(p.name for p in (root / "verdicts" / "2024-01-01").iterdir()) == [
        f"part-{run}-cv-0.parquet", f"part-{run}-wd-0.parquet"]
    assert read_current(root).num_rows == 6
    before = sorted(p.stat().st_mtime_ns for p in (root / "verdicts").rglob("*.parquet"))
    res = CliRunner().invoke(main, ["catalog", "compact", str(root)])
    assert res.exit_code == 0 and "nothing to compact" in res.output
    assert sorted(p.stat().st_mtime_ns for p in (root / "verdicts").rglob("*.parquet")) == before
