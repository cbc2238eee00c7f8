"""What the commands say is what happened: `catalog compact` says what it rewrote, `inspect` numbers turns as the
catalog does, a task typo in a list names its file and row, and the Gaia columns carry UCDs that astropy reads back.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from spec_vetting.cli import main

pytest.importorskip("lsdb")
#: lsdb and hats (writing and reading the examples' Gaia catalog) call pandas APIs that pandas 3.1 deprecates
pytestmark = [pytest.mark.filterwarnings("ignore:.*(inplace keyword|mode.chained_assignment).*"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning:lsdb")]


def _invoke(argv: list):
    return CliRunner().invoke(main, [str(a) for a in argv])


@pytest.fixture(scope="module")
def gaia_run(tmp_path_factory):
    """(examples folder, catalog root) of a rules run over make-examples files with the examples' Gaia evidence."""
    base = tmp_path_factory.mktemp("truths")
    ex = base / "ex"
    res = _invoke(["make-examples", ex, "--n", "6", "--seed", "5", "--gaia"])
    assert res.exit_code == 0, res.output
    cat = base / "cat"
    res = _invoke(["run", "--candidates", ex / "candidates-gaia.csv", "--task", "cv", "--task", "carbon",
                   "--task", "ss", "--task", "gm", "--task", "wd", "--engine", "rules", "--out", cat, "--threads",
                   "--workers", "1", "--no-progress", "--no-dashboard", "--evidence", f"gaia={ex / 'gaia'}"])
    assert res.exit_code == 0, res.output
    return ex, cat


def _mtimes(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


def test_compact_says_nothing_was_rewritten_when_nothing_was(gaia_run, tmp_path):
    import shutil

    _, cat = gaia_run
    root = tmp_path / "cat"
    shutil.copytree(cat, root)
    before = _mtimes(root / "current")
    res = _invoke(["catalog", "compact", root])
    assert res.exit_code == 0, res.output
    assert "nothing to compact; nothing was rewritten" in res.output and "rebuilt" not in res.output
    assert _mtimes(root / "current") == before
    shutil.rmtree(root / "current")
    res = _invoke(["catalog", "compact", root])
    assert res.exit_code == 0 and "current/ was missing and is rebuilt" in res.output, res.output
    assert any((root / "current").rglob("*.parquet"))


def test_inspect_numbers_turns_as_the_catalog_and_catalog_picture_do(gaia_run, tmp_path):
    """The pictures `inspect --save-images` names turn K are the ones `catalog picture ... K` gives back for the
    same candidate (re-rendered from the spectrum and checked against the run's hash), and the text shows turn K."""
    ex, cat = gaia_run
    with open(ex / "candidates-gaia.csv", newline="", encoding="utf-8") as fh:
        row = next(r for r in csv.DictReader(fh) if not r["target"] and r["task"] == "cv")
    images = tmp_path / "img"
    res = _invoke(["inspect", ex / row["path"], "--task", "cv", "--save-images", images, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    zooms = [t for t in out["turns"] if t.get("image_file")]
    assert zooms and [t["turn"] for t in out["turns"]] == list(range(len(out["turns"])))
    for t in [{"turn": -1, "image_file": out["full_view_file"]}, *zooms]:
        got = tmp_path / f"catalog-{t['turn']}.png"
        res = _invoke(["catalog", "picture", cat, row["candidate_id"], "cv", t["turn"], "-o", got])
        assert res.exit_code == 0, res.output
        assert got.read_bytes() == Path(t["image_file"]).read_bytes(), t
        assert t["turn"] == -1 or Path(t["image_file"]).name.startswith(f"turn{t['turn']:02d}_")
    text = _invoke(["inspect", ex / row["path"], "--task", "cv"]).output
    first = zooms[0]
    assert f"-- turn {first['turn']} (" in text and "-- turn -1" not in text


def test_a_task_typo_in_a_list_row_names_the_file_and_the_row(gaia_run, tmp_path):
    ex, _ = gaia_run
    rows = list(csv.DictReader(open(ex / "candidates.csv", newline="", encoding="utf-8")))
    rows[1]["task"] = "carbn"
    rows[1]["path"] = str(ex / rows[1]["path"])
    rows[0]["path"] = str(ex / rows[0]["path"])
    typo = tmp_path / "typo.csv"
    with open(typo, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, list(rows[0]))
        w.writeheader()
        w.writerows(rows[:2])
    out = tmp_path / "cat"
    res = _invoke(["run", "--candidates", typo, "--engine", "rules", "--out", out, "--threads", "--no-progress"])
    assert res.exit_code == 2, res.output
    line = res.stderr.strip().splitlines()[-1]
    assert str(typo) in line and "row 2" in line and "'carbn'" in line and "task column" in line, line
    flag = _invoke(["run", "--candidates", ex / "candidates.csv", "--task", "carbn", "--engine", "rules", "--out",
                    out, "--threads", "--no-progress"])
    assert flag.exit_code == 2 and "row" not in flag.stderr.strip().splitlines()[-1], flag.stderr
    assert not out.exists()


#: UCD1+ words of the Gaia columns, as the Gaia archive describes its own columns (worked out by hand)
GAIA_UCDS = {
    "gaia_source_id": "meta.id.cross",
    "gaia_parallax": "pos.parallax",
    "gaia_parallax_error": "stat.error;pos.parallax",
    "gaia_pmra": "pos.pm;pos.eq.ra",
    "gaia_pmdec": "pos.pm;pos.eq.dec",
    "gaia_phot_g_mean_mag": "phot.mag;em.opt",
    "gaia_bp_rp": "phot.color;em.opt.B;em.opt.R",
    "gaia_sep_arcsec": "pos.angDistance",
    "gaia_abs_g": "phys.magAbs;em.opt",
}


def test_gaia_columns_carry_ucds_astropy_reads_back(gaia_run, tmp_path):
    from astropy.io.votable import parse_single_table
    from astropy.io.votable.ucd import check_ucd
    from astropy.table import Table

    _, cat = gaia_run
    for fmt, name in (("fits", "v.fits"), ("votable", "v.vot")):
        res = _invoke(["catalog", "export", cat, "--format", fmt, "-o", tmp_path / name, "--current"])
        assert res.exit_code == 0, res.output
    fits = Table.read(tmp_path / "v.fits")
    vot = {f.name: f for f in parse_single_table(str(tmp_path / "v.vot")).fields}
    assert fits["gaia_parallax"].unit == "mas" and any(v is not None for v in fits["gaia_parallax"].tolist())
    for column, ucd in GAIA_UCDS.items():
        assert check_ucd(ucd, check_controlled_vocabulary=True), ucd
        assert fits[column].meta.get("ucd") == ucd, (column, fits[column].meta)
        assert vot[column].ucd == ucd, (column, vot[column].ucd)
