"""`spec-vet make-examples`: a labelled set across layouts and tasks whose candidate list loads and reads."""

from __future__ import annotations

import csv
from collections import Counter

import pytest
from click.testing import CliRunner

from spec_vetting.cli import main
from spec_vetting.cli.examples import plan_examples
from spec_vetting.io.candidates import load_candidates


def test_plan_mixes_positives_confusers_layouts_and_tasks():
    plan = plan_examples(40, seed=0)
    assert plan == plan_examples(40, seed=0)
    by_task = Counter((p["task"], p["label"]) for p in plan)
    assert all(by_task[(t, lab)] == 4 for t in ("cv", "carbon", "ss", "gm", "wd") for lab in ("YES", "NO"))
    assert {p["layout"] for p in plan} == {
        "lamost-dr1-image", "lamost-image", "lamost-coadd-table", "sdss-spec-lite", "desi-coadd",
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
