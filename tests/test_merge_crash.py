"""A run killed at every step of its end (compaction, the fold into current/, the month merge) loses nothing (issue
34, items 1-2).

A real `spec-vet run` (the rules engine, CPU) is stopped at a named step by ``SPEC_VETTING_STOP_AT`` (it stops
itself with SIGSTOP there: :mod:`spec_vetting.catalog.crash_points`), then its whole process group gets SIGKILL,
as an operator's ``kill -9`` would. After the documented recovery (``catalog compact``, the same command again,
the next night's run, or ``catalog check --repair``), the oracle is independent of the catalog code:

- every pair of every run's candidate list is in ``verdicts/`` exactly once, as a plain pyarrow dataset of the folder
  sees it (the files the readers skip, ``_`` names, stay skipped);
- ``spec-vet catalog check`` passes;
- ``current/`` (read with plain pyarrow) holds, for every pair, the row of the latest run that vetted it, the
  earlier answer kept over a later ERROR (the README's rule), worked out here from the rows.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from click.testing import CliRunner
from test_pipeline_cli import SPEC_VET, _env, _examples, _write_job

from spec_vetting.catalog.crash_points import STEPS, STOP_AT_ENV
from spec_vetting.cli import main

TASKS = ("cv", "wd")
#: candidate rows of each night's list (of 9 examples): they overlap, so current/ has to choose
NIGHTS = {"2026-11-01": range(0, 5), "2026-11-02": range(3, 8), "2026-11-03": range(6, 9)}


@pytest.fixture(scope="module")
def first_night(tmp_path_factory):
    """(a root holding the first night, finished and merged; the env; the job files by night)."""
    base = tmp_path_factory.mktemp("crash")
    env = _env(base, fast_render=False)
    examples = _examples(base, 9, env)
    header, *rows = examples.read_text().strip().splitlines()
    cols = header.split(",")
    keep = [i for i, c in enumerate(cols) if c != "task"]  # every candidate for both tasks
    jobs = {}
    for night, picks in NIGHTS.items():
        lst = examples.with_name(f"night-{night}.csv")
        lst.write_text("\n".join(",".join(r.split(",")[i] for i in keep) for r in [header, *[rows[k] for k in picks]])
                       + "\n")
        written = _write_job(base, [lst], base / "cat", run_date=night, engine={"name": "rules"},
                             merge_small_nights=True)
        jobs[night] = written.rename(base / f"job-{night}.yaml")
    r = _spec_vet(["run", jobs["2026-11-01"]], env)
    assert r.returncode == 0, r.stderr
    ids = [ln.split(",")[0] for ln in rows]
    return base / "cat", env, jobs, ids


def _spec_vet(args, env, stop_at: str | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    """`spec-vet ARGS` in its own process group; with ``stop_at``, SIGKILL to the group once it stops there."""
    env = {k: v for k, v in env.items() if k != STOP_AT_ENV} | ({STOP_AT_ENV: stop_at} if stop_at else {})
    proc = subprocess.Popen(SPEC_VET + [str(a) for a in args], env=env, cwd=env["_TEST_CWD"], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    guard = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
    guard.start()
    try:
        if stop_at:
            _, status = os.waitpid(proc.pid, os.WUNTRACED)
            assert os.WIFSTOPPED(status), f"the run ended before reaching {stop_at}: {proc.stderr.read()}"
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            return subprocess.CompletedProcess(proc.args, -signal.SIGKILL, out, err)
        out, err = proc.communicate()
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    finally:
        guard.cancel()


def _runs(root: Path) -> dict[str, dict]:
    """run_date -> manifest, read as plain JSON."""
    out = {}
    for m in (root / "_runs").glob("*/manifest.json"):
        d = json.loads(m.read_text())
        out[d["run_date"]] = d
    return out


def _verdict_rows(root: Path) -> list[dict]:
    data = ds.dataset(root / "verdicts", format="parquet")  # pyarrow's own discovery: `_`/`.` names skipped
    return data.to_table(columns=["run_id", "candidate_id", "task", "verdict"]).to_pylist()


def _expected_current(rows: list[dict], order: list[str]) -> dict[tuple, str]:
    best: dict[tuple, tuple] = {}
    for r in rows:
        rank = (r["verdict"] != "ERROR", order.index(r["run_id"]))
        key = (r["candidate_id"], r["task"])
        if key not in best or rank > best[key][0]:
            best[key] = (rank, r["run_id"])
    return {k: v[1] for k, v in best.items()}


def _assert_nothing_lost(root: Path, ids: list[str], nights: list[str]) -> None:
    runs = _runs(root)
    expected = sorted((runs[n]["run_id"], ids[k], t) for n in nights for k in NIGHTS[n] for t in TASKS)
    rows = _verdict_rows(root)
    got = sorted((r["run_id"], r["candidate_id"], r["task"]) for r in rows)
    assert got == expected  # every pair of every run, once
    res = CliRunner().invoke(main, ["catalog", "check", str(root)])
    assert res.exit_code == 0, res.output
    order = [runs[n]["run_id"] for n in sorted(nights)]
    current = ds.dataset(root / "current", format="parquet").to_table(
        columns=["candidate_id", "task", "run_id"]).to_pylist()
    assert len(current) == len({(r["candidate_id"], r["task"]) for r in current})
    assert {(r["candidate_id"], r["task"]): r["run_id"] for r in current} == _expected_current(rows, order)
    leftovers = [p for p in root.rglob("*") if p.name.startswith(("_tmp-", "_merging-"))]
    assert not leftovers


#: (step, recovery): `catalog compact` after a kill at every step; the same command again where the run had not
#: finished; the next night's run and `catalog check --repair` where it had (the merge)
CASES = ([(s, "compact") for s in STEPS]
         + [("compact:file-written", "rerun"), ("fold:task-written", "rerun")]
         + [(s, "next-night") for s in ("finished", "merge:written", "merge:switched")]
         + [("merge:switched#2", "repair")])


@pytest.mark.parametrize(("step", "recovery"), CASES, ids=[f"{s}-{r}" for s, r in CASES])
def test_a_run_killed_at_any_step_of_its_end_loses_nothing(first_night, tmp_path, step, recovery):
    src, env, jobs, ids = first_night
    root = tmp_path / "cat"
    shutil.copytree(src, root)
    env = {**env, "_TEST_CWD": str(tmp_path)}
    job = tmp_path / "job.yaml"

    def job_for(night):
        job.write_text(jobs[night].read_text().replace(str(src), str(root)))
        return job

    r = _spec_vet(["run", job_for("2026-11-02")], env, stop_at=step)
    assert r.returncode == -signal.SIGKILL
    nights = ["2026-11-01", "2026-11-02"]
    if recovery == "compact":
        res = CliRunner().invoke(main, ["catalog", "compact", str(root)])
        assert res.exit_code == 0, res.output
    elif recovery == "rerun":
        r = _spec_vet(["run", job_for("2026-11-02")], env)
        assert r.returncode == 0 and "resuming run" in r.stderr, r.stderr
    elif recovery == "next-night":
        r = _spec_vet(["run", job_for("2026-11-03")], env)
        assert r.returncode == 0, r.stderr
        nights.append("2026-11-03")
    else:
        res = CliRunner().invoke(main, ["catalog", "check", str(root), "--repair"])
        assert res.exit_code == 0, res.output
    _assert_nothing_lost(root, ids, nights)
    if step.startswith(("merge", "finished", "parts")):  # the run had finished: its rows end in the month files
        own = [p for t in ("verdicts", "turns") for p in (root / t).glob("????-??-??/*.parquet")]
        assert not own
