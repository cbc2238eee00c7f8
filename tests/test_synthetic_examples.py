"""`spec-vet make-examples`: a labelled set across layouts and tasks whose candidate list loads and reads."""

from __future__ import annotations

import csv
from collections import Counter

import pytest
from click.testing import CliRunner

from spec_vetting.cli import main
from spec_vetting.io.candidates import load_candidates
from spec_vetting.synthetic.examples import plan_examples


def test_plan_mixes_positives_confusers_layouts_and_tasks():
    plan = plan_examples(40, seed=0)
    assert plan == plan_examples(40, seed=0)
    by_task = Counter((p["task"], p["label"]) for p in plan)
    assert all(by_task[(t, lab)] == 4 for t in ("cv", "carbon", "ss", "gm", "wd") for lab in ("YES", "NO"))
    assert {p["layout"] for p in plan} == {
        "lamost-lrs-dr1-image", "lamost-lrs-image", "lamost-lrs-coadd-table", "sdss-spec-lite", "desi-coadd",
    }  # fmt: skip
    for task in ("cv", "gm"):  # each task meets more than one layout
        assert len({p["layout"] for p in plan if p["task"] == task}) > 1


@pytest.mark.slow
def test_make_examples_writes_a_loadable_labelled_set(tmp_path):
    out = tmp_path / "ex"
    result = CliRunner().invoke(main, ["make-examples", str(out), "--n", "15", "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert "wrote 15 candidates" in result.output
    with open(out / "candidates.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["candidate_id", "path", "target", "task", "label"]
    assert len(rows) == 15 and len({r["candidate_id"] for r in rows}) == 15
    assert {r["label"] for r in rows} == {"YES", "NO"}
    assert all(not r["path"].startswith("/") for r in rows)
    cands = load_candidates(out / "candidates.csv")
    variants = {c.load_spectrum().meta.variant for c in cands}
    assert variants == {"lamost-lrs-dr1-image", "lamost-lrs-image", "lamost-lrs-coadd-table", "sdss-spec-lite",
                        "desi-coadd"}  # fmt: skip
    # listing the folder instead of the csv names the same candidates
    assert {c.candidate_id for c in load_candidates(out)} == {r["candidate_id"] for r in rows}
    specvi = load_candidates(out / "specvi-synthetic.parquet")
    assert len(specvi) == 10 and {c.task for c in specvi} == {"cv", "carbon", "ss", "gm", "wd"}
    # the same seed gives the same files; a rerun on the same folder replaces the set (make demo twice)
    before = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    again = CliRunner().invoke(main, ["make-examples", str(out), "--n", "15", "--seed", "3"])
    assert again.exit_code == 0, again.output
    assert sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file()) == before
    other = tmp_path / "ex2"
    assert CliRunner().invoke(main, ["make-examples", str(other), "--n", "15", "--seed", "3"]).exit_code == 0
    assert (other / "candidates.csv").read_text() == (out / "candidates.csv").read_text()
    first_lamost = next(r["path"] for r in rows if r["path"].endswith(".fits") and r["path"].startswith("lamost"))
    assert (other / first_lamost).read_bytes() == (out / first_lamost).read_bytes()


def test_a_folder_with_a_foreign_candidate_list_is_refused_and_left_alone(tmp_path):
    """make-examples replaces its own earlier set; a user's list (and the spectra it names) is never deleted."""
    (tmp_path / "lamost").mkdir()
    mine = tmp_path / "lamost" / "my-spectrum.fits"
    mine.write_bytes(b"precious")
    (tmp_path / "candidates.csv").write_text("candidate_id,path,target,task,label\nm,lamost/my-spectrum.fits,,cv,YES\n")
    r = CliRunner().invoke(main, ["make-examples", str(tmp_path), "--n", "1"])
    assert r.exit_code == 2 and "not written by make-examples" in r.output
    assert mine.read_bytes() == b"precious" and (tmp_path / "candidates.csv").exists()


def test_an_unwritable_folder_is_an_error_not_a_traceback(tmp_path):
    (tmp_path / "a-file").write_text("x")
    r = CliRunner().invoke(main, ["make-examples", str(tmp_path / "a-file" / "out"), "--n", "1"])
    assert r.exit_code == 2 and "cannot create the folder" in r.output and "a-file is a file" in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)
