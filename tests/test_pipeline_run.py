"""The pipeline in-process (Dask LocalCluster with threads): rows, ERROR rows, resume, lock, incremental.

Candidates are small stand-ins with ``load_spectrum`` (synthetic spectra, or a failure), so these tests do not
depend on the candidate-list reader; the scripted engine answers without a model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from spec_vetting.catalog.listing import latest_run_id, list_runs, read_manifest
from spec_vetting.catalog.read import read_turns, read_verdicts
from spec_vetting.errors import ConfigError, RunLockedError, SpectrumReadError
from spec_vetting.inspect.tasks import get_task
from spec_vetting.pipeline import job_from_dict, rollup, runner
from spec_vetting.pipeline.lock import RootLock
from spec_vetting.pipeline.store import RunStore

ANSWER_YES = "<think>Broad Balmer emission.</think>\n<answer>\\boxed{YES} broad H alpha</answer>"
ZOOM = (
    '<think>look</think>\n<tool_call>\n{"name": "spectral_visualization_tool", "arguments": '
    '{"wavelength_range": [6500, 6620], "label": "Halpha"}}\n</tool_call>'
)


@dataclass
class FakeCandidate:
    candidate_id: str
    path: str | None = None
    target: int | None = None
    task: str | None = None
    label: str | None = None
    ra: float | None = None
    dec: float | None = None
    inline: object = None
    prompt: str | None = None
    kind: str = "cv"
    broken: str | None = None  # "missing" | "corrupt"

    def load_spectrum(self):
        if self.broken == "missing":
            raise SpectrumReadError(self.path, "file not found", hint="check the path in the candidate list")
        if self.broken == "corrupt":
            raise SpectrumReadError(self.path, "not a FITS file (bad header)")
        from spec_vetting.synthetic.synthetic import make_spectrum

        return make_spectrum(self.kind, seed=int(self.candidate_id.split("-")[-1]))


def _cands(n=6, broken=None):
    out = [FakeCandidate(f"c-{i}", path=f"/data/c-{i}.fits", label="YES" if i % 2 else "NO") for i in range(n)]
    for i, how in (broken or {}).items():
        out[i].broken = how
    return out


def _job(tmp_path, **kw):
    data = {
        "candidates": ["unused.csv"],
        "tasks": ["cv", "wd"],
        "out": str(tmp_path / "cat"),
        "engine": {"name": "scripted", "options": {"replies": [ZOOM, ANSWER_YES]}},
        "shard_size": 4,
        "cluster": {"processes": False, "workers": 1, "dashboard": False},
    }
    data.update(kw)
    return job_from_dict(data)


def _tiny_png() -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (4, 4), "white").save(buf, format="PNG")
    return buf.getvalue()


TINY_PNG = _tiny_png()


@pytest.fixture(autouse=True)
def fast_render(monkeypatch):
    """Rendering is tested by the render and loop tests; here a constant picture keeps the pipeline tests fast."""
    from spec_vetting.inspect import zoom

    monkeypatch.setattr(zoom, "_default_renderer", lambda: (lambda *a, **k: TINY_PNG))


@pytest.fixture(autouse=True)
def _runs_keep_their_own_files(monkeypatch):
    """These tests check each run's own compacted files, and simulate crashes by reopening a finished run (a run
    killed mid-way never reaches what a finished run does last: merging its small files into the month's, which
    tests/test_catalog_history.py tests)."""
    monkeypatch.setattr(rollup, "SMALL_BYTES", -1)


@pytest.fixture
def fake_candidates(monkeypatch):
    holder = {"cands": _cands()}
    monkeypatch.setattr(runner, "load_all_candidates", lambda sources: holder["cands"])
    return holder


def _rows(root, run_id=None):
    t = read_verdicts(root, run_id)
    return sorted(t.to_pylist(), key=lambda r: (r["candidate_id"], r["task"]))


def _strip_timing(rows):
    drop = {"elapsed_s", "started_at"}
    return [{k: v for k, v in r.items() if k not in drop} for r in rows]


def test_run_writes_one_row_per_pair_and_the_traces(tmp_path, fake_candidates):
    fake_candidates["cands"] = _cands(6, broken={1: "missing", 4: "corrupt"})
    job = _job(tmp_path)
    out = runner.run_job(job, progress=False, echo=lambda s: None)
    assert out.status == "finished"
    rows = _rows(job.out)
    assert len(rows) == 12 and len({(r["candidate_id"], r["task"]) for r in rows}) == 12
    by = {(r["candidate_id"], r["task"]): r for r in rows}
    assert by[("c-0", "cv")]["verdict"] == "YES" and by[("c-0", "cv")]["status"] == "well_formed"
    assert by[("c-0", "cv")]["n_tool_calls"] == 1 and json.loads(by[("c-0", "cv")]["zoom_windows"]) == [[6500, 6620]]
    assert by[("c-0", "cv")]["survey"] == "lamost" and by[("c-0", "cv")]["obsid"] is not None
    assert by[("c-0", "cv")]["healpix"] is not None and by[("c-0", "cv")]["engine"] == "scripted"
    assert by[("c-0", "cv")]["run_date"] == out.run_date and by[("c-0", "cv")]["label"] == "NO"
    for cid in ("c-1", "c-4"):
        for task in ("cv", "wd"):
            r = by[(cid, task)]
            assert r["verdict"] == "ERROR" and r["error_kind"] == "read_error"
            assert f"/data/{cid}.fits" in r["error_message"]
            assert r["prompt_version"] and r["engine"] == "scripted"
    assert out.summary["errors_by_kind"] == {"read_error": 4}
    assert out.summary["verdicts_by_task"]["cv"] == {"ERROR": 2, "YES": 4}
    # turns: a turn -1 row with the full view, then the assistant turns with the zoom image on turn 0
    turns = read_turns(job.out, out.run_id, candidate_ids=["c-0"]).to_pylist()
    cv = sorted((t for t in turns if t["task"] == "cv"), key=lambda t: t["turn"])
    assert [t["turn"] for t in cv] == [-1, 0, 1]
    # pictures by reference: hash, title, renderer version (the bytes only with store_pictures)
    assert cv[0]["image_png"] is None and len(cv[0]["picture_sha256"]) == 64 and cv[0]["assistant_text"] is None
    assert cv[0]["picture_title"] == "Spectrum" and cv[0]["renderer_version"] and cv[0]["zoom_min"] is None
    assert json.loads(cv[1]["tool_call"])["arguments"]["wavelength_range"] == [6500, 6620]
    assert cv[1]["picture_sha256"] is not None and cv[1]["zoom_min"] == 6500.0
    assert cv[2]["picture_sha256"] is None
    assert "boxed{YES}" in cv[2]["assistant_text"]
    # provenance
    m = read_manifest(job.out, out.run_id)
    assert m["status"] == "finished" and m["counts"]["pairs"] == 12 and m["counts"]["shards"] == 3
    assert m["engine"]["engine"] == "scripted" and m["dependencies"]["pyarrow"]
    assert m["tasks"]["cv"]["prompt_version"] == get_task("cv").version
    assert m["tasks"]["cv"]["prompt"] == get_task("cv").prompt  # the text itself, for audits and exports
    log = (RunStore(job.out, out.run_id, out.run_date).log_path).read_text()
    assert " START run " in log and " SUCCESS run " in log
    assert latest_run_id(job.out) == out.run_id and list_runs(job.out)[0]["status"] == "finished"


def test_resume_after_a_crash_finishes_only_what_is_missing(tmp_path, fake_candidates):
    job = _job(tmp_path)
    first = runner.run_job(job, progress=False, echo=lambda s: None)
    reference = _strip_timing(_rows(job.out))
    # simulate a run killed after its first shard: the other shards' files and markers never got written,
    # and a temporary file was left half-written
    store = RunStore(job.out, first.run_id, first.run_date)
    markers = sorted(store.shards_dir.glob("*.done"))
    assert len(markers) == 3
    for marker in markers[1:]:
        marker.unlink()
        for p in (tmp_path / "cat").rglob(f"part-{first.run_id}-{marker.stem}.parquet"):
            p.unlink()
    tmp = store.partition("verdicts", "cv") / f"_tmp-dead-part-{first.run_id}-x.parquet"
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_bytes(b"half")
    m = read_manifest(job.out, first.run_id)
    m["status"] = "running"
    (store.manifest_path).write_text(json.dumps(m))
    before = (store.shards_dir / markers[0].name).read_text()

    messages = []
    again = runner.run_job(job, progress=False, echo=messages.append)
    assert again.run_id == first.run_id and again.resumed
    assert any("resuming run" in s and "1 of 3" in s for s in messages)
    assert again.summary["inspections_this_attempt"] == 8
    assert (store.shards_dir / markers[0].name).read_text() == before  # done shard not rerun
    assert not tmp.exists()
    assert _strip_timing(_rows(job.out)) == reference
    assert len(read_manifest(job.out, first.run_id)["attempts"]) == 2


def test_a_rerun_of_a_done_shard_replaces_its_rows(tmp_path, fake_candidates):
    job = _job(tmp_path)
    first = runner.run_job(job, progress=False, echo=lambda s: None)
    store = RunStore(job.out, first.run_id, first.run_date)
    # a crash after the part files were renamed but before the marker: the shard runs again
    next(store.shards_dir.glob("*.done")).unlink()
    m = read_manifest(job.out, first.run_id)
    m["status"] = "failed"
    store.manifest_path.write_text(json.dumps(m))
    runner.run_job(job, progress=False, echo=lambda s: None)
    assert len(_rows(job.out)) == 12


def test_how_files_are_read_is_not_part_of_the_run_identity(tmp_path, fake_candidates):
    """Reader processes and their memory change no result: the same command with other values is the same run
    (nothing to do), while a budget that changes results (the token budget) starts another."""
    job = _job(tmp_path)
    a = runner.run_job(job, progress=False, echo=lambda s: None)
    budgets = job.budgets.model_copy(update={"read_processes": 0, "read_memory_mb": 2048})
    same = runner.run_job(job.model_copy(update={"budgets": budgets}), progress=False, echo=lambda s: None)
    assert same.status == "nothing_to_do" and same.run_id == a.run_id
    other = job.budgets.model_copy(update={"token_budget": 1000})
    b = runner.run_job(job.model_copy(update={"budgets": other}), progress=False, echo=lambda s: None)
    assert b.run_id != a.run_id


def test_finished_run_then_same_command_does_nothing_and_fresh_starts_a_new_run(tmp_path, fake_candidates):
    job = _job(tmp_path)
    a = runner.run_job(job, progress=False, echo=lambda s: None)
    messages = []
    same = runner.run_job(job, progress=False, echo=messages.append)
    assert same.status == "nothing_to_do" and same.run_id == a.run_id
    assert any("nothing to do" in m and a.run_id in m for m in messages)
    assert len(_rows(job.out)) == 12 and len(list((tmp_path / "cat" / "_runs").glob("2*"))) == 1
    b = runner.run_job(job, fresh=True, progress=False, echo=lambda s: None)
    assert b.run_id != a.run_id and not b.resumed and b.status == "finished"
    assert len(_rows(job.out)) == 24 and len(_rows(job.out, b.run_id)) == 12
    assert latest_run_id(job.out) == b.run_id


def test_incremental_skips_pairs_already_vetted(tmp_path, fake_candidates):
    fake_candidates["cands"] = _cands(4, broken={3: "corrupt"})
    job = _job(tmp_path, incremental=True)
    a = runner.run_job(job, progress=False, echo=lambda s: None)
    assert a.summary["n_verdicts"] == 8
    fake_candidates["cands"] = _cands(6, broken={3: "corrupt"})  # two new candidates tonight
    b = runner.run_job(job, progress=False, echo=lambda s: None)
    got = {(r["candidate_id"], r["task"]) for r in _rows(job.out, b.run_id)}
    # new candidates, plus the ERROR pairs of last night retried
    assert got == {(c, t) for c in ("c-3", "c-4", "c-5") for t in ("cv", "wd")}
    assert read_manifest(job.out, b.run_id)["counts"]["skipped_incremental"] == 6


def test_explicit_run_id_and_date(tmp_path, fake_candidates):
    job = _job(tmp_path, run_id="nightly-1", run_date="2024-03-05")
    out = runner.run_job(job, progress=False, echo=lambda s: None)
    assert out.run_id == "nightly-1"
    assert list((tmp_path / "cat" / "verdicts" / "2024-03-05").glob("part-nightly-1-cv-0.parquet"))
    with pytest.raises(ConfigError, match="already exists"):
        runner.run_job(job, progress=False, echo=lambda s: None)


def test_a_second_run_on_the_same_root_is_refused(tmp_path, fake_candidates):
    job = _job(tmp_path)
    (tmp_path / "cat").mkdir()
    with RootLock(tmp_path / "cat"):
        with pytest.raises(RunLockedError, match="another `spec-vet run`"):
            runner.run_job(job, progress=False, echo=lambda s: None)
    runner.run_job(job, progress=False, echo=lambda s: None)  # free again once released


def test_row_tasks_run_only_when_selected(tmp_path, fake_candidates):
    cands = _cands(3)
    cands[0].task = "cc"  # alias of carbon: not among the run's tasks -> skipped
    cands[1].task = "cv"
    fake_candidates["cands"] = cands
    notes = []
    out = runner.run_job(_job(tmp_path), progress=False, echo=notes.append)
    got = {(r["candidate_id"], r["task"]) for r in _rows(tmp_path / "cat", out.run_id)}
    assert got == {("c-1", "cv"), ("c-2", "cv"), ("c-2", "wd")}
    assert any("outside --task" in n for n in notes)


def test_engine_failures_become_error_rows(tmp_path, fake_candidates):
    job = _job(tmp_path, engine={"name": "scripted", "options": {"replies": []}})
    out = runner.run_job(job, progress=False, echo=lambda s: None)
    rows = _rows(job.out)
    assert out.status == "finished" and len(rows) == 12
    assert {r["verdict"] for r in rows} == {"ERROR"} and {r["error_kind"] for r in rows} == {"script_exhausted"}


def test_a_shard_that_cannot_run_fails_the_run_and_resume_finishes_it(tmp_path, fake_candidates, monkeypatch):
    from spec_vetting.pipeline import shard as shard_mod

    real = shard_mod._write_shard
    calls = {"n": 0}

    def flaky(spec, store, results, elapsed):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk full")
        return real(spec, store, results, elapsed)

    monkeypatch.setattr(shard_mod, "_write_shard", flaky)
    job = _job(tmp_path)
    out = runner.run_job(job, progress=False, echo=lambda s: None)
    assert out.status == "failed" and "disk full" in out.failures[0]
    assert read_manifest(job.out, out.run_id)["status"] == "failed"
    log = RunStore(job.out, out.run_id, out.run_date).log_path.read_text()
    assert "FAILED run" in log
    again = runner.run_job(job, progress=False, echo=lambda s: None)
    assert again.run_id == out.run_id and again.status == "finished" and len(_rows(job.out)) == 12


def test_duplicate_pairs_and_missing_tasks_are_configuration_errors(tmp_path, fake_candidates):
    fake_candidates["cands"] = _cands(2) + _cands(1)
    with pytest.raises(ConfigError, match="more than once"):
        runner.run_job(_job(tmp_path), progress=False, echo=lambda s: None)
    fake_candidates["cands"] = _cands(2)
    with pytest.raises(ConfigError, match="no task"):
        runner.run_job(_job(tmp_path, tasks=[]), progress=False, echo=lambda s: None)
    with pytest.raises(ConfigError, match="unknown task"):
        runner.run_job(_job(tmp_path, tasks=["nope"]), progress=False, echo=lambda s: None)


def _mark_unfinished(job, out, drop_markers: int = 0):
    """Make a finished run look like one that died: status running, the last ``drop_markers`` markers gone."""
    store = RunStore(job.out, out.run_id, out.run_date)
    for marker in sorted(store.shards_dir.glob("*.done"))[len(list(store.shards_dir.glob("*.done"))) - drop_markers:]:
        marker.unlink()
    m = read_manifest(job.out, out.run_id)
    m["status"] = "running"
    store.manifest_path.write_text(json.dumps(m))
    return store


def test_fresh_starts_a_new_run_and_leaves_the_unfinished_one(tmp_path, fake_candidates):
    job = _job(tmp_path)
    a = runner.run_job(job, progress=False, echo=lambda s: None)
    _mark_unfinished(job, a, drop_markers=1)
    b = runner.run_job(job, fresh=True, progress=False, echo=lambda s: None)
    assert b.run_id != a.run_id and not b.resumed and b.summary["inspections_this_attempt"] == 12
    assert read_manifest(job.out, a.run_id)["status"] == "running"
    assert len(_rows(job.out, b.run_id)) == 12
    # without --fresh the unfinished one is still the one resumed
    c = runner.run_job(job, progress=False, echo=lambda s: None)
    assert c.run_id == a.run_id and c.resumed and c.summary["inspections_this_attempt"] == 4
    log = RunStore(job.out, a.run_id, a.run_date).log_path.read_text()
    assert " RESUME run " in log and log.count(" SUCCESS run ") == 2
    m = read_manifest(job.out, a.run_id)
    assert m["timings"]["wall_s_all_attempts"] >= m["timings"]["wall_s_last_attempt"] > 0
    with pytest.raises(ConfigError, match="already exists"):
        runner.run_job(_job(tmp_path, run_id=a.run_id), fresh=True, progress=False, echo=lambda s: None)


def test_incremental_revets_with_another_model_or_prompt_version(tmp_path, fake_candidates):
    fake_candidates["cands"] = _cands(2)
    job = _job(tmp_path, incremental=True)
    runner.run_job(job, progress=False, echo=lambda s: None)
    again = runner.run_job(job, progress=False, echo=lambda s: None)  # the same command: nothing to do
    assert again.status == "nothing_to_do" and again.summary["n_verdicts"] == 0
    other_model = _job(tmp_path, incremental=True,
                       engine={"name": "scripted", "options": {"replies": [ANSWER_YES], "model": "other"}})
    out = runner.run_job(other_model, progress=False, echo=lambda s: None)
    assert out.summary["n_verdicts"] == 4
    tasks_file = tmp_path / "tasks.yaml"
    tasks_file.write_text(
        "tasks:\n  - key: cv\n    class_name: cataclysmic variable\n"
        "    prompt: Is this a cataclysmic variable? Answer YES or NO.\n"
    )
    new_prompt = _job(tmp_path, incremental=True, tasks_file=str(tasks_file))
    out = runner.run_job(new_prompt, progress=False, echo=lambda s: None)
    got = {(r["candidate_id"], r["task"]) for r in _rows(job.out, out.run_id)}
    assert got == {("c-0", "cv"), ("c-1", "cv")}  # only the task whose prompt changed


def test_incremental_resume_keeps_its_first_selection(tmp_path, fake_candidates):
    """Runs written between a crash and the resume must not change which pairs (so which shards) the run has:
    otherwise a done shard and a re-cut one could both hold a pair."""
    fake_candidates["cands"] = _cands(2)
    job = _job(tmp_path, incremental=True)
    runner.run_job(job, progress=False, echo=lambda s: None)  # c-0, c-1 vetted
    fake_candidates["cands"] = _cands(6)
    night = runner.run_job(job, progress=False, echo=lambda s: None)  # c-2..c-5 in 2 shards
    assert night.summary["n_verdicts"] == 8
    store = _mark_unfinished(job, night, drop_markers=1)  # died after the part files of shard 2, before its marker
    # in between, another job vets c-4 (a pair of the unfinished shard) on the same root
    fake_candidates["cands"] = _cands(5)[4:]
    runner.run_job(_job(tmp_path, shard_size=3), progress=False, echo=lambda s: None)
    fake_candidates["cands"] = _cands(6)
    again = runner.run_job(job, progress=False, echo=lambda s: None)
    assert again.run_id == night.run_id and again.summary["inspections_this_attempt"] == 4
    rows = _rows(job.out, night.run_id)
    assert len(rows) == 8 and {(r["candidate_id"], r["task"]) for r in rows} == {
        (f"c-{i}", t) for i in range(2, 6) for t in ("cv", "wd")}
    assert store.read_incremental_skips() == {(f"c-{i}", t) for i in range(2) for t in ("cv", "wd")}


def _files(root, table):
    return sorted(p.relative_to(root / table).as_posix() for p in (root / table).rglob("*.parquet"))


def test_runs_end_compacted_with_task_and_run_date_columns(tmp_path, fake_candidates):
    import pyarrow.parquet as pq

    out = runner.run_job(_job(tmp_path, shard_size=2, run_date="2024-05-06"), progress=False, echo=lambda s: None)
    root = tmp_path / "cat"
    # 6 shards, but one file per (table, task): the file count does not follow the shard count
    assert _files(root, "verdicts") == [f"2024-05-06/part-{out.run_id}-{t}-0.parquet" for t in ("cv", "wd")]
    assert len(_files(root, "turns")) == 2 and _files(root, "current") == ["cv.parquet", "wd.parquet"]
    assert not (root / "_runs" / out.run_id / "parts").exists()
    one = pq.read_table(root / "verdicts" / _files(root, "verdicts")[0])  # a file read alone keeps task and date
    assert set(one.column("task").to_pylist()) == {"cv"} and set(one.column("run_date").to_pylist()) == {"2024-05-06"}
    assert "_healpix_29" in one.column_names and out.summary["compaction"]["rows"]["verdicts"] == 12


def test_current_view_over_three_incremental_nights(tmp_path, fake_candidates):
    from spec_vetting.catalog.read import read_current

    job = _job(tmp_path, incremental=True)
    fake_candidates["cands"] = _cands(4, broken={3: "corrupt"})
    n1 = runner.run_job(job, progress=False, echo=lambda s: None)
    fake_candidates["cands"] = _cands(6, broken={5: "corrupt"})  # c-3 readable now, c-4 and c-5 new
    n2 = runner.run_job(job, progress=False, echo=lambda s: None)
    fake_candidates["cands"] = _cands(8, broken={5: "corrupt"})  # c-5 still broken, c-6 and c-7 new
    n3 = runner.run_job(job, progress=False, echo=lambda s: None)
    assert len({n1.run_id, n2.run_id, n3.run_id}) == 3
    cur = {(r["candidate_id"], r["task"]): r for r in read_current(tmp_path / "cat").to_pylist()}
    assert len(cur) == read_current(tmp_path / "cat").num_rows == 16  # one row per (candidate, task)
    for t in ("cv", "wd"):
        assert {cur[(f"c-{i}", t)]["run_id"] for i in (0, 1, 2)} == {n1.run_id}  # vetted once, kept
        assert cur[("c-3", t)]["run_id"] == n2.run_id and cur[("c-3", t)]["verdict"] == "YES"  # ERROR retried
        assert cur[("c-4", t)]["run_id"] == n2.run_id
        assert cur[("c-5", t)]["run_id"] == n3.run_id and cur[("c-5", t)]["verdict"] == "ERROR"
        assert {cur[(f"c-{i}", t)]["run_id"] for i in (6, 7)} == {n3.run_id}
    # the history keeps every run's rows; the current view is what we believe now
    assert len(_rows(job.out)) == 8 + 6 + 6


def test_store_pictures_keeps_each_picture_once(tmp_path, fake_candidates):
    import pyarrow.parquet as pq

    fake_candidates["cands"] = _cands(2)
    runner.run_job(_job(tmp_path, store_pictures=True), progress=False, echo=lambda s: None)
    pics = pq.read_table(next((tmp_path / "cat" / "pictures").rglob("*.parquet")))
    # the constant test picture: one row, however many turns and tasks showed it
    assert pics.num_rows == 1 and pics.column("image_png")[0].as_py() == TINY_PNG
    from spec_vetting.catalog.run_data import read_run

    data = read_run(tmp_path / "cat")
    assert data.initial_image("c-0", "cv") == TINY_PNG


@pytest.mark.parametrize("dashboard", [None, True])
def test_the_dashboard_link_is_shown_only_while_the_cluster_lives_unless_asked_for(
        tmp_path, fake_candidates, capsys, dashboard):
    """Default: the link sits beside the progress bar while the run lasts and is gone from the final bar (a line
    printed for good is dead once the run ends); --dashboard prints it as a line."""
    fake_candidates["cands"] = _cands(2)
    job = _job(tmp_path, cluster={"processes": False, "workers": 1, "dashboard": dashboard})
    messages = []
    out = runner.run_job(job, progress=True, echo=messages.append)
    assert out.status == "finished"
    bar = capsys.readouterr().err.replace("\r", "\n").splitlines()
    shown = [ln for ln in bar if "dashboard http" in ln]
    if dashboard is None:
        assert not any("Dask dashboard" in m for m in messages)
        assert shown and "dashboard" not in [ln for ln in bar if ln.strip()][-1]
    else:
        assert any(m.startswith("Dask dashboard: http") for m in messages) and not shown


def test_each_picture_is_drawn_once_per_candidate_across_its_tasks(tmp_path, fake_candidates, monkeypatch):
    from spec_vetting.inspect import zoom

    drawn = []

    def counting(wavelength, flux, wavelength_range=None, title="Spectrum"):
        drawn.append((round(float(wavelength[0]), 6), wavelength_range))
        return TINY_PNG

    monkeypatch.setattr(zoom, "_default_renderer", lambda: counting)
    # one shard: the tool is shared within a shard (a worker's candidate may also be in another shard)
    out = runner.run_job(_job(tmp_path, tasks=["cv", "wd", "carbon"], shard_size=100), progress=False,
                         echo=lambda s: None)
    rows = _rows(out.root, out.run_id)
    assert len(rows) == 18 and {r["verdict"] for r in rows} == {"YES"}
    turns = [t for t in read_turns(out.root, out.run_id).to_pylist() if t["zoom_min"] is not None]
    assert len(turns) == 18  # every inspection zoomed once
    # 6 candidates x (full view + the one window), though 3 tasks each looked at both
    assert len(drawn) == 12 and len(set(drawn)) == 12
    assert sum(1 for _, w in drawn if w is None) == 6


def test_a_full_disk_never_leaves_the_manifest_running(tmp_path, fake_candidates, monkeypatch):
    """The disk fills after the shards (issue 34, item 7): the compaction fails, the manifest's rewrite and run.log
    fail too; the manifest still ends `failed` (its status overwritten in place), valid JSON, and the reason counts
    the shards that wrote their verdicts."""
    import errno
    import json

    from spec_vetting.pipeline.manifest import RunLog

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    real_write = runner.write_json_atomic

    def write_unless_ending(path, obj):
        if obj.get("status") != "running":
            full()
        return real_write(path, obj)

    from spec_vetting.pipeline import execute

    monkeypatch.setattr(execute, "compact_and_update", full)
    for module in (runner, execute):
        monkeypatch.setattr(module, "write_json_atomic", write_unless_ending)
    real_log = RunLog.write
    monkeypatch.setattr(RunLog, "write", lambda self, level, text: full() if "FAILED" in text else
                        real_log(self, level, text))
    job = _job(tmp_path)
    out = runner.run_job(job, progress=False, echo=lambda s: None)
    assert out.status == "catalog_update_failed"
    path = RunStore(job.out, out.run_id, out.run_date).manifest_path
    m = json.loads(path.read_text())
    assert m["status"] == "failed"
    n = m["counts"]["shards"]
    assert f"{n} of {n} shard(s) wrote their verdicts" in out.failures[0] and "No space left" in out.failures[0]


def test_a_full_disk_in_every_shard_says_so_once(tmp_path, fake_candidates, monkeypatch, caplog):
    """Every shard fails alike (issue 34, item 7): one stderr line for the cause, every shard in run.log, and no
    "Compute Failed" traceback excerpt from Dask per shard (the run reports its shards itself)."""
    import errno
    import logging

    from spec_vetting.pipeline import shard as shard_module

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shard_module, "_write_shard", full)
    said: list[str] = []
    caplog.set_level(logging.ERROR, logger="distributed.worker")
    out = runner.run_job(_job(tmp_path), progress=False, echo=said.append)
    assert out.status == "failed" and len(out.failures) >= 2  # several shards, all failed the same way
    assert [s for s in said if s.startswith("shard failed:")] == [f"shard failed: {out.failures[0]}"]
    assert not [r for r in caplog.records if "Compute Failed" in r.getMessage()]
    log_text = RunStore(tmp_path / "cat", out.run_id, out.run_date).log_path.read_text()
    assert log_text.count("shard failed:") == len(out.failures)


def test_dask_failures_of_other_tasks_are_still_logged():
    import logging

    from spec_vetting.pipeline.cluster import ShardFailuresReportedOnce

    def record(key):  # distributed.worker's own call: logger.error("Compute Failed\nKey: %s\n...", key, ...)
        return logging.LogRecord("distributed.worker", logging.ERROR, __file__, 1,
                                 "Compute Failed\nKey:       %s\nState:     %s\n", (key, "executing"), None)

    keep = ShardFailuresReportedOnce().filter
    assert not keep(record("shard-20261206T055332Z-22d762-s00001-3014b3be0d"))
    assert keep(record("finalize-hlgfinalizecompute-0a1b"))
    assert keep(logging.LogRecord("distributed.worker", logging.ERROR, __file__, 1, "other %s", ("shard-x",), None))
