"""`catalog export --format hats`: a HATS catalog written with lsdb/hats that lsdb.read_hats opens with every verdict
column, its units and descriptions, partitioned on the order-29 HEALPix index, and that cross-matches with another
HATS catalog built with lsdb."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from astropy import units as u
from cdshealpix.nested import lonlat_to_healpix
from click.testing import CliRunner
from test_eval_support import verdict_row, write_catalog

from spec_vetting.catalog.schema import file_schema
from spec_vetting.cli import main

TARGETID = 39627866878511337  # > 2**53: exact only as an integer
#: lsdb partitions and compiles its numba kernels in the process: tens of seconds
pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _lsdb_deprecations():
    # lsdb (0.11) calls pandas APIs that pandas 3.1 deprecates; the export itself silences them, these reads do not
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, module="lsdb")
        warnings.filterwarnings("ignore", message=".*(inplace keyword|mode.chained_assignment).*")
        yield


def _lsdb():
    import lsdb

    return lsdb


def _rows():
    rng = np.random.default_rng(3)
    rows = []
    for i in range(40):
        ra, dec = float(rng.uniform(0, 360)), float(np.degrees(np.arcsin(rng.uniform(-1, 1))))
        rows.append(verdict_row(f"c{i:02d}", "cv" if i % 2 else "wd", "YES" if i % 3 else "NO", ra=ra, dec=dec,
                                targetid=TARGETID + i if i % 4 else None))
    rows[5].update(ra=None, dec=None)  # unreadable spectrum: no position
    return rows


def test_hats_export_reads_back_in_lsdb_and_cross_matches(tmp_path):
    lsdb = _lsdb()
    rows = _rows()
    root = write_catalog(tmp_path / "cat", rows)
    out = tmp_path / "verdicts_hats"
    res = CliRunner().invoke(main, ["catalog", "export", str(root), "--format", "hats", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "39 row(s)" in res.output and "1 row(s) without a position" in res.output

    cat = lsdb.read_hats(out)
    want_cols = [f.name for f in file_schema("verdicts") if f.name not in ("image_png", "_healpix_29")]
    assert list(cat.columns) == want_cols
    schema = cat.original_schema
    assert schema.field("ra").metadata[b"unit"] == b"deg"  # lsdb keeps the file schema as original_schema
    for f in file_schema("verdicts"):
        if f.name != "image_png":
            assert schema.field(f.name).metadata[b"description"] == f.metadata[b"description"], f.name
    df = cat.compute(progress_bar=False)
    assert df.index.name == "_healpix_29" and len(df) == 39
    by_id = {r["candidate_id"]: r for r in rows}
    got = {c: int(t) for c, t in zip(df["candidate_id"], df["targetid"], strict=True) if not pd.isna(t)}
    assert got == {c: r["targetid"] for c, r in by_id.items() if r["targetid"] is not None and r["ra"] is not None}
    # the spatial index: cdshealpix's order-29 cell of each row's position
    want_index = {r["candidate_id"]: int(np.ravel(lonlat_to_healpix([r["ra"]] * u.deg, [r["dec"]] * u.deg, 29))[0])
                  for r in rows if r["ra"] is not None}
    assert dict(zip(df["candidate_id"], (int(i) for i in df.index), strict=True)) == want_index

    # a second catalog, built with lsdb: sources 0.5 arcsec from some verdicts, and one far from all
    near = [r for r in rows if r["ra"] is not None][:6]
    dec_shift = 0.5 / 3600.0
    sources = pd.DataFrame({
        "source_id": np.arange(len(near) + 1, dtype=np.int64) + 1000,
        "ra": [r["ra"] for r in near] + [1.0],
        "dec": [min(r["dec"] + dec_shift, 90.0) for r in near] + [-89.0],
    })
    other = lsdb.from_dataframe(sources, catalog_name="sources")
    other.write_catalog(tmp_path / "sources_hats", progress_bar=False)
    matched = cat.crossmatch(lsdb.read_hats(tmp_path / "sources_hats"), radius_arcsec=1.0, n_neighbors=1,
                             suffixes=("", "_src"), suffix_method="overlapping_columns").compute(progress_bar=False)
    pairs = {(c, int(s)) for c, s in zip(matched["candidate_id"], matched["source_id"], strict=True)}
    assert pairs == {(r["candidate_id"], 1000 + i) for i, r in enumerate(near)}


def test_hats_export_refuses_a_folder_that_is_not_a_hats_catalog(tmp_path):
    root = write_catalog(tmp_path / "cat", _rows())
    out = tmp_path / "busy"
    out.mkdir()
    (out / "thesis.tex").write_text("keep me")
    res = CliRunner().invoke(main, ["catalog", "export", str(root), "--format", "hats", "-o", str(out)])
    assert res.exit_code == 2 and "not a HATS catalog" in res.output
    assert (out / "thesis.tex").read_text() == "keep me"
    # an earlier HATS export is replaced
    again = tmp_path / "h"
    for where in ("task = 'cv'", "task = 'wd'"):
        res = CliRunner().invoke(main, ["catalog", "export", str(root), "--format", "hats", "-o", str(again),
                                        "--where", where])
        assert res.exit_code == 0, res.output
    assert set(_lsdb().read_hats(again).compute(progress_bar=False)["task"]) == {"wd"}
