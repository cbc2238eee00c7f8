"""The writers of `spec-vet catalog` take the root's lock like a run, and `check --repair` repairs what it reports
or says it cannot (issue 34, item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from test_catalog_history import _night

from spec_vetting.cli import main
from spec_vetting.pipeline.lock import RootLock


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cat"
    _night(root, monkeypatch, 0, [0, 1])
    return root


@pytest.mark.parametrize("command", [["compact"], ["check", "--repair"]])
def test_a_catalog_writer_under_a_held_lock_says_so_in_one_line(root, command):
    before = sorted((p, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file() and p.name != "lock")
    with RootLock(root):  # a run writing this root
        res = CliRunner().invoke(main, ["catalog", command[0], str(root), *command[1:]])
    assert res.exit_code == 1, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    assert "another `spec-vet run` is writing" in lines[0] and str(root) in lines[0], lines
    after = sorted((p, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file() and p.name != "lock")
    assert after == before  # nothing written


def test_repair_restores_rows_gone_from_verdicts_that_current_still_holds(root):
    """The loss of issue 34: a merge lost a task's verdict rows after the fold, so current/ still holds them. `check`
    reports them missing; `check --repair` writes them back from current/ (merged into the month file), says so,
    and `check` passes; a plain pyarrow dataset reads every row once."""
    import pyarrow.dataset as ds

    month = root / "verdicts" / "2026-01" / "part-month-cv-0.parquet"
    before = sorted(ds.dataset(root / "verdicts", format="parquet").to_table(
        columns=["candidate_id", "task", "verdict", "run_id"]).to_pylist(), key=str)
    month.unlink()
    assert CliRunner().invoke(main, ["catalog", "check", str(root)]).exit_code == 1
    res = CliRunner().invoke(main, ["catalog", "check", str(root), "--repair"])
    assert res.exit_code == 0, res.output
    assert "2 of its 2 missing verdict row(s) restored from current/" in res.output, res.output
    assert CliRunner().invoke(main, ["catalog", "check", str(root)]).exit_code == 0
    after = sorted(ds.dataset(root / "verdicts", format="parquet").to_table(
        columns=["candidate_id", "task", "verdict", "run_id"]).to_pylist(), key=str)
    assert after == before and month.is_file()  # merged back into a month file


def test_repair_says_what_it_cannot_repair(root):
    """Rows recorded by the manifest but in no file and not in current/ either (no damaged file, no staged parts):
    not "repaired" but exit 1, the run, the task and what to do."""
    [month] = (root / "verdicts" / "2026-01").glob("part-month-cv-*.parquet")
    month.unlink()  # its rows gone without a trace
    (root / "current" / "cv.parquet").unlink()
    res = CliRunner().invoke(main, ["catalog", "check", str(root)])
    assert res.exit_code == 1 and "2 missing" in res.output, res.output
    res = CliRunner().invoke(main, ["catalog", "check", str(root), "--repair"])
    assert res.exit_code == 1, res.output
    assert "not repaired" in res.output and "task cv" in res.output and "--fresh" in res.output, res.output
    assert "repaired;" not in res.output


def test_repair_finishes_an_interrupted_merge_and_says_so(root, monkeypatch):
    """A run's own file left beside the month file that holds its rows (a kill after the switch): `check` passes
    (readers count the rows once), `check --repair` removes the leftover and names it."""
    from spec_vetting.pipeline import rollup

    monkeypatch.setattr(rollup, "_remove_held", lambda *a, **k: 0)  # the merge stops after each switch
    second = _night(root, monkeypatch, 1, [2])
    monkeypatch.undo()
    own = sorted((root / "verdicts" / "2026-01-02").glob("*.parquet"))
    assert [p.name for p in own] == [f"part-{second.run_id}-{t}-0.parquet" for t in ("cv", "wd")]
    assert CliRunner().invoke(main, ["catalog", "check", str(root)]).exit_code == 0
    res = CliRunner().invoke(main, ["catalog", "check", str(root), "--repair"])
    assert res.exit_code == 0, res.output
    assert "repaired:" in res.output and second.run_id in res.output, res.output
    assert not (root / "verdicts" / "2026-01-02").exists()


def test_an_unreadable_manifest_is_named_and_rebuilt_from_the_runs_rows(root, monkeypatch):
    """A garbage manifest.json (issue 34, item 5): `summary` and `runs` name it, `check` exits 1 naming it, and
    `check --repair` rebuilds it from the run's rows (counts per task as the rows say: two NO per task here), saying
    what it could not rebuild; then `check` passes and the run is listed again."""
    import json

    second = _night(root, monkeypatch, 1, [2, 3])
    path = root / "_runs" / second.run_id / "manifest.json"
    path.write_bytes(b"\x00garbage{")
    res = CliRunner().invoke(main, ["catalog", "summary", str(root)])
    assert res.exit_code == 0 and str(path) in res.output and "unreadable manifest" in res.output, res.output
    res = CliRunner().invoke(main, ["catalog", "runs", str(root)])
    assert f"{second.run_id}\tunreadable manifest" in res.output and str(path) in res.output, res.output
    res = CliRunner().invoke(main, ["catalog", "check", str(root)])
    assert res.exit_code == 1 and str(path) in res.output, res.output

    res = CliRunner().invoke(main, ["catalog", "check", str(root), "--repair"])
    assert res.exit_code == 0, res.output
    assert "not rebuilt: job" in res.output and str(path) in res.output, res.output
    m = json.loads(path.read_text())
    assert m["run_date"] == "2026-01-02" and m["status"] == "finished"
    assert m["counts"]["verdicts_by_task"] == {"cv": {"NO": 2}, "wd": {"NO": 2}}  # the scripted engine says NO
    assert (root / "_quarantine" / "_runs" / second.run_id / "manifest.json").read_bytes() == b"\x00garbage{"
    assert CliRunner().invoke(main, ["catalog", "check", str(root)]).exit_code == 0
    res = CliRunner().invoke(main, ["catalog", "runs", str(root)])
    assert f"{second.run_id}\tfinished\t2026-01-02\t4 verdicts" in res.output, res.output


def test_an_unreadable_run_order_file_is_named_and_rebuilt(root, monkeypatch):
    import json

    first_run = json.loads(next((root / "_runs").glob("*/manifest.json")).read_text())
    order = root / "current" / "_run_order.json"
    order.write_text("[1, 2")
    res = CliRunner().invoke(main, ["catalog", "check", str(root)])
    assert res.exit_code == 1 and "unreadable run-order file" in res.output and str(order) in res.output, res.output
    res = CliRunner().invoke(main, ["catalog", "check", str(root), "--repair"])
    assert res.exit_code == 0, res.output
    assert json.loads(order.read_text()) == {first_run["run_id"]: first_run["started_at"]}
