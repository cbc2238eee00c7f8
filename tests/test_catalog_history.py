"""A catalog with history: what a night reads does not grow with it.

The fold into current/ reads only the new run's files and the view; ``catalog compact`` with nothing to do opens no
file; the summary counts finished runs from their manifests; reading one run opens only its files. Each is shown by
making the other runs' files unreadable (garbage bytes) and checking the result against an oracle computed from the
files beforehand with plain pyarrow and Python."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from spec_vetting.catalog.check import summarize_catalog
from spec_vetting.catalog.read import read_current, read_run_table, read_verdicts
from spec_vetting.errors import SpectrumReadError
from spec_vetting.pipeline import job_from_dict, rollup, runner
from spec_vetting.pipeline.compact import compact_root

ANSWER = "<think>look</think>\n<answer>\\boxed{NO} nothing</answer>"


@dataclass
class Candidate:
    candidate_id: str
    path: str | None = None
    broken: bool = False

    def load_spectrum(self):
        if self.broken:
            raise SpectrumReadError(self.path, "not a FITS file (bad header)")
        from spec_vetting.synthetic.synthetic import make_spectrum

        return make_spectrum("cv", seed=int(self.candidate_id.split("-")[-1]))


def _night(root: Path, monkeypatch, day: int, ids: list[int], broken=(), incremental=False,
           start: dt.date = dt.date(2026, 1, 1)) -> runner.RunOutcome:
    cands = [Candidate(f"c-{i}", f"/d/c-{i}.fits", broken=i in broken) for i in ids]
    monkeypatch.setattr(runner, "load_all_candidates", lambda sources: cands)
    job = job_from_dict({
        "candidates": ["unused.csv"], "tasks": ["cv", "wd"], "out": str(root),
        "engine": {"name": "scripted", "options": {"replies": [ANSWER]}}, "shard_size": 4,
        "run_date": (start + dt.timedelta(days=day)).isoformat(),
        "cluster": {"processes": False, "workers": 1, "dashboard": False}, "incremental": incremental,
        "merge_small_nights": True,
    })
    out = runner.run_job(job, fresh=True, progress=False, echo=lambda s: None)
    assert out.status == "finished"
    return out


def _all_rows(root: Path) -> list[dict]:
    rows = []
    for f in sorted((root / "verdicts").rglob("*.parquet")):
        rows += pq.read_table(f, columns=["run_id", "candidate_id", "task", "verdict", "error_kind"]).to_pylist()
    return rows


def _expected_current(rows: list[dict], order: list[str]) -> dict[tuple, str]:
    """(candidate, task) -> run_id of the row the view should hold: the latest run's answer, else its ERROR."""
    best: dict[tuple, tuple] = {}
    for r in rows:
        key = (r["candidate_id"], r["task"])
        rank = (r["verdict"] != "ERROR", order.index(r["run_id"]))
        if key not in best or rank > best[key][0]:
            best[key] = (rank, r["run_id"])
    return {k: v[1] for k, v in best.items()}


def _spoil(files) -> None:
    for f in files:
        Path(f).write_bytes(b"not parquet at all")


def _run_files(root: Path, run_id: str) -> list[Path]:
    return [p for t in ("verdicts", "turns") for p in (root / t).rglob(f"part-{run_id}-*.parquet")]


@pytest.fixture
def history(tmp_path, monkeypatch):
    """Three nights whose files stay per run (merging small nights is tested on its own below)."""
    monkeypatch.setattr(rollup, "SMALL_BYTES", -1)
    root = tmp_path / "cat"
    runs = [
        _night(root, monkeypatch, 0, [0, 1, 2, 3], broken={1}),
        _night(root, monkeypatch, 1, [1, 2, 4], broken={2}),  # c-1 answered now; c-2's ERROR keeps night 0's
        _night(root, monkeypatch, 2, [3, 5]),
    ]
    return root, monkeypatch, [r.run_id for r in runs]


def test_a_night_reads_only_its_run_and_the_view(history):
    root, monkeypatch, runs = history
    before = _all_rows(root)
    out = _night(root, monkeypatch, 3, [0, 6], broken={6})
    expected = _expected_current(before + [r for r in _all_rows(root) if r["run_id"] == out.run_id],
                                 runs + [out.run_id])
    got = {(r["candidate_id"], r["task"]): r["run_id"] for r in read_current(root).to_pylist()}
    assert got == expected

    # the earlier nights' files unreadable: the next night still folds, and the view is what it should be
    rows_now = _all_rows(root)
    for run_id in runs:
        _spoil(_run_files(root, run_id))
    out5 = _night(root, monkeypatch, 4, [2, 3])
    rows_now += _all_rows_of(root, out5.run_id)
    got = {(r["candidate_id"], r["task"]): r["run_id"] for r in read_current(root).to_pylist()}
    assert got == _expected_current(rows_now, runs + [out.run_id, out5.run_id])


def _all_rows_of(root: Path, run_id: str) -> list[dict]:
    rows = []
    for f in sorted((root / "verdicts").rglob(f"part-{run_id}-*.parquet")):
        rows += pq.read_table(f, columns=["run_id", "candidate_id", "task", "verdict", "error_kind"]).to_pylist()
    return rows


def test_current_keeps_one_row_group_per_task_however_many_nights(history):
    root, _monkeypatch, _runs = history
    for f in sorted((root / "current").glob("*.parquet")):
        assert pq.ParquetFile(f).metadata.num_row_groups == 1, f


def test_compact_with_nothing_to_do_opens_no_file(history):
    root, _monkeypatch, runs = history
    files = sorted(p for t in ("verdicts", "turns", "current") for p in (root / t).rglob("*.parquet"))
    _spoil(files)
    stamps = [p.stat().st_mtime_ns for p in files]
    assert compact_root(root)["compacted"] == []
    assert [p.stat().st_mtime_ns for p in files] == stamps


def test_summary_counts_finished_runs_from_their_manifests(history):
    root, monkeypatch, runs = history
    rows = _all_rows(root)
    oracle: dict[str, dict[str, dict[str, int]]] = {}
    errors: dict[str, dict[str, int]] = {}
    for r in rows:
        by = oracle.setdefault(r["run_id"], {}).setdefault(r["task"], {})
        by[r["verdict"]] = by.get(r["verdict"], 0) + 1
        if r["verdict"] == "ERROR":
            e = errors.setdefault(r["run_id"], {})
            e[r["error_kind"]] = e.get(r["error_kind"], 0) + 1
    summary = summarize_catalog(root)
    assert {r["run_id"]: r["verdicts"] for r in summary["runs"]} == oracle
    assert {r["run_id"]: r["errors_by_kind"] for r in summary["runs"] if r["errors_by_kind"]} == errors
    assert summary["n_rows"] == len(rows)

    # the finished runs' rows are not read for the counts (only the damage check looks at their files' frames)
    from spec_vetting.catalog import check

    opened = []
    real = check.files_dataset
    monkeypatch.setattr(check, "files_dataset", lambda r, files: opened.extend(files) or real(r, files))
    # a run whose manifest is gone: counted from its files
    manifest = root / "_runs" / runs[2] / "manifest.json"
    manifest.unlink()
    again = summarize_catalog(root)
    finished = {str(p) for run_id in runs[:2] for p in _run_files(root, run_id)}
    assert opened and not finished & set(opened)
    assert {r["run_id"]: r["verdicts"] for r in again["runs"]} == oracle
    assert {r["run_id"]: r["status"] for r in again["runs"]}[runs[2]] == "unknown"
    assert again["n_rows"] == len(rows)


def test_reading_one_run_opens_only_its_files(history):
    root, _monkeypatch, runs = history
    want = sorted((r["candidate_id"], r["task"], r["verdict"]) for r in _all_rows(root) if r["run_id"] == runs[1])
    for run_id in (runs[0], runs[2]):
        _spoil(_run_files(root, run_id))
    run_id, table = read_run_table(root, runs[1], columns=["verdict"])
    assert run_id == runs[1]
    got = sorted(zip(table.column("candidate_id").to_pylist(), table.column("task").to_pylist(),
                     table.column("verdict").to_pylist(), strict=True))
    assert got == want
    assert json.loads((root / "_runs" / runs[1] / "manifest.json").read_text())["status"] == "finished"


def test_an_incremental_night_reads_the_view_not_the_history(history):
    root, monkeypatch, runs = history
    for run_id in runs:
        _spoil(p for p in _run_files(root, run_id) if "verdicts" in p.parts)
    # c-0..c-5 were answered on some night (c-1 after an ERROR, c-2 despite a later one): only c-7 is new
    out = _night(root, monkeypatch, 5, [0, 1, 2, 3, 4, 5, 7], incremental=True)
    assert out.summary["skipped_incremental"] == 12
    assert sorted(_all_rows_of(root, out.run_id), key=lambda r: r["task"]) == [
        {"run_id": out.run_id, "candidate_id": "c-7", "task": t, "verdict": "NO", "error_kind": None}
        for t in ("cv", "wd")]


def _keys(root: Path) -> list[tuple]:
    t = read_verdicts(root, columns=["run_id", "candidate_id", "task"])
    return sorted(zip(*(t.column(c).to_pylist() for c in ("run_id", "candidate_id", "task")), strict=True))


def test_small_nights_merge_into_one_file_per_task_and_month(tmp_path, monkeypatch):
    root = tmp_path / "cat"
    nights = [([0, 1], 0), ([1, 2], 1), ([3], 2), ([0, 4], 31)]  # three in January, one in February
    outs = [_night(root, monkeypatch, day, ids) for ids, day in nights]
    expected = sorted((o.run_id, f"c-{i}", t) for o, (ids, _d) in zip(outs, nights, strict=True)
                      for i in ids for t in ("cv", "wd"))
    for table in ("verdicts", "turns"):
        names = sorted(str(p.relative_to(root / table)) for p in (root / table).rglob("*.parquet"))
        assert names == [f"{m}/part-month-{t}-0.parquet" for m in ("2026-01", "2026-02") for t in ("cv", "wd")]
    assert _keys(root) == expected  # every row once
    jan = pq.read_table(root / "verdicts" / "2026-01" / "part-month-cv-0.parquet")
    assert pq.ParquetFile(root / "verdicts" / "2026-01" / "part-month-cv-0.parquet").metadata.num_row_groups == 1
    assert sorted(set(jan.column("run_id").to_pylist())) == sorted(o.run_id for o in outs[:3])
    # one run still reads as itself, the summary counts as before, current/ holds the latest of each pair
    _, one = read_run_table(root, outs[1].run_id, columns=["verdict"])
    assert sorted(zip(one.column("candidate_id").to_pylist(), one.column("task").to_pylist(), strict=True)) == [
        (f"c-{i}", t) for i in (1, 2) for t in ("cv", "wd")]
    assert summarize_catalog(root)["n_rows"] == len(expected)
    # the runs in the order they ran (run ids of one second do not sort by start): the last one wins
    latest = {(f"c-{i}", t): o.run_id for o, (ids, _d) in zip(outs, nights, strict=True) for i in ids
              for t in ("cv", "wd")}
    assert {(r["candidate_id"], r["task"]): r["run_id"] for r in read_current(root).to_pylist()} == latest
    shutil.rmtree(root / "current")  # rebuilt from the month files by `catalog compact`
    compact_root(root)
    assert {(r["candidate_id"], r["task"]): r["run_id"] for r in read_current(root).to_pylist()} == latest


@pytest.mark.parametrize("fail_at", ["write", "remove"])
def test_a_merge_failing_part_way_loses_nothing_and_recovery_finishes_it(tmp_path, monkeypatch, fail_at):
    """The merge stops with an error before the switch (the new month file being written) or after it (the run's own
    file not yet removed): every row is read once at that instant already, and `catalog compact` finishes the merge.
    (A kill at every step, by a real process, is tests/test_merge_crash.py.)"""
    root = tmp_path / "cat"
    first = _night(root, monkeypatch, 0, [0, 1])

    def boom(*a, **k):
        raise OSError("disk went away")

    monkeypatch.setattr(rollup, "write_row_groups" if fail_at == "write" else "_remove_held", boom)
    second = _night(root, monkeypatch, 1, [2])  # finished: the merge failing is logged, not the run's failure
    monkeypatch.undo()
    expected = sorted([(first.run_id, f"c-{i}", t) for i in (0, 1) for t in ("cv", "wd")]
                      + [(second.run_id, "c-2", t) for t in ("cv", "wd")])
    own = sorted(p.name for p in (root / "verdicts" / "2026-01-02").glob("*.parquet"))
    assert own == [f"part-{second.run_id}-{t}-0.parquet" for t in ("cv", "wd")]  # stopped at the first task
    switched = rollup.merged_runs(root / "verdicts" / "2026-01" / "part-month-cv-0.parquet")
    assert (second.run_id in switched) == (fail_at == "remove")
    assert not list(root.rglob("_tmp-*"))
    assert _keys(root) == expected  # the run's own file, or (switched) the month file: each row once
    recovered = compact_root(root)["recovered"]
    assert any(second.run_id in line for line in recovered), recovered
    assert not (root / "verdicts" / "2026-01-02").exists() and not (root / "turns" / "2026-01-02").exists()
    assert _keys(root) == expected
    assert compact_root(root)["recovered"] == []  # nothing left to do


def test_a_merge_the_earlier_protocol_left_hidden_is_put_back_not_deleted(tmp_path, monkeypatch):
    """The earlier merge hid a run's file as `_merging-...` while it rewrote the month file; its recovery removed the
    hidden file whenever any month file of the table (another task's) listed the run, and its rows were gone (issue
    34). Now only the month file of the file's own task counts, and the file is put back and merged."""
    root = tmp_path / "cat"
    first = _night(root, monkeypatch, 0, [0, 1])
    monkeypatch.setattr(rollup, "SMALL_BYTES", -1)  # the second night keeps its own files
    second = _night(root, monkeypatch, 1, [2])
    monkeypatch.undo()
    day = root / "verdicts" / "2026-01-02"
    rollup._merge(root, "verdicts", "2026-01-02", "cv", second.run_id, day / f"part-{second.run_id}-cv-0.parquet")
    wd = day / f"part-{second.run_id}-wd-0.parquet"
    wd.rename(day / f"_merging-{wd.name}")  # where the earlier protocol's crash left it
    expected = sorted([(first.run_id, f"c-{i}", t) for i in (0, 1) for t in ("cv", "wd")]
                      + [(second.run_id, "c-2", t) for t in ("cv", "wd")])
    assert _keys(root) == [k for k in expected if k != (second.run_id, "c-2", "wd")]  # hidden from readers
    compact_root(root)
    assert not list(root.rglob("_merging-*")) and not day.exists()
    assert _keys(root) == expected
    assert second.run_id in pq.read_schema(root / "verdicts" / "2026-01" / "part-month-wd-0.parquet").metadata[
        rollup.MERGED_RUNS_KEY].decode()


def test_a_month_file_without_its_footer_is_repaired_and_its_runs_vetted_again(tmp_path, monkeypatch):
    """A month file truncated past its footer (the list of its runs gone): `catalog check` names the runs whose rows
    it held from the month's manifests, `--repair` sets it aside and records each run as short, the counts follow,
    and the next incremental night vets the lost pairs again into a new month file."""
    from spec_vetting.catalog.check import check_root
    from spec_vetting.catalog.damage import quarantined_runs
    from spec_vetting.pipeline.repair import repair_root

    root = tmp_path / "cat"
    jan = [_night(root, monkeypatch, 0, [0, 1]), _night(root, monkeypatch, 1, [2])]
    feb = _night(root, monkeypatch, 31, [3])  # another month: untouched by January's damage
    bad = root / "verdicts" / "2026-01" / "part-month-cv-0.parquet"
    bad.write_bytes(bad.read_bytes()[:100])

    report = check_root(root)
    [d] = report.damaged
    assert d.path == str(bad) and d.task == "cv" and d.runs == tuple(sorted(o.run_id for o in jan))
    assert all(o.run_id in d.line() for o in jan) and "2026-01" in d.line()
    assert report.count_mismatches == {(jan[0].run_id, "cv"): (2, 0), (jan[1].run_id, "cv"): (1, 0)}
    summary = summarize_catalog(root)
    assert {r["run_id"]: r["verdicts"] for r in summary["runs"]} == {
        jan[0].run_id: {"wd": {"NO": 2}}, jan[1].run_id: {"wd": {"NO": 1}},
        feb.run_id: {"cv": {"NO": 1}, "wd": {"NO": 1}}}
    [reported] = summary["damaged_files"]
    assert reported["runs"] == list(d.runs) and reported["rows_not_counted"] == 3

    actions = repair_root(root)
    assert any(str(bad) in a and "2 run(s)" in a for a in actions), actions
    assert (root / "_quarantine" / bad.relative_to(root)).is_file() and not bad.exists()
    assert quarantined_runs(root) == {(jan[0].run_id, "cv"), (jan[1].run_id, "cv")}
    after = check_root(root)
    assert not after.damaged and set(after.count_mismatches) == quarantined_runs(root)  # explained by the record
    assert {(r["candidate_id"], r["task"]) for r in read_current(root).to_pylist()} == {
        (f"c-{i}", t) for i in range(4) for t in ("cv", "wd")} - {("c-0", "cv"), ("c-1", "cv"), ("c-2", "cv")}

    again = _night(root, monkeypatch, 2, [0, 1, 2], incremental=True)
    assert again.summary["n_verdicts"] == 3  # only the lost cv pairs
    assert sorted(pq.read_table(bad, columns=["candidate_id"]).column(0).to_pylist()) == ["c-0", "c-1", "c-2"]
    assert not check_root(root).damaged
    assert {(r["candidate_id"], r["task"]) for r in read_current(root).to_pylist()} == {
        (f"c-{i}", t) for i in range(4) for t in ("cv", "wd")}


def test_a_full_month_file_is_left_and_the_next_one_started(tmp_path, monkeypatch):
    """A month file past MONTH_BYTES takes no more runs (a night's merge rewrites only the file it joins): the next
    night starts part-month-<task>-1; every row is read once and `catalog check` agrees with the manifests."""
    from spec_vetting.catalog.check import check_root

    monkeypatch.setattr(rollup, "MONTH_BYTES", 1)  # any file is full: one run per month file
    root = tmp_path / "cat"
    outs = [_night(root, monkeypatch, day, [day, day + 10]) for day in range(3)]
    for table in ("verdicts", "turns"):
        names = sorted(p.name for p in (root / table / "2026-01").glob("*.parquet"))
        assert names == sorted(f"part-month-{t}-{k}.parquet" for t in ("cv", "wd") for k in range(3)), names
    assert _keys(root) == sorted((o.run_id, f"c-{i}", t) for o, d in zip(outs, range(3), strict=True)
                                 for i in (d, d + 10) for t in ("cv", "wd"))
    report = check_root(root)
    assert report.ok, report.lines()
