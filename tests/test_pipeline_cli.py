"""`spec-vet run` and `spec-vet catalog` as a user runs them: subprocesses, exit codes, kill -9 and resume.

Most runs here use a `sitecustomize` on PYTHONPATH that swaps the renderer for a constant picture (rendering is
tested elsewhere and costs a second per picture on a busy 2-core machine); the end-to-end test with two worker
processes renders for real.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spec_vetting.catalog.listing import read_manifest
from spec_vetting.catalog.read import read_turns, read_verdicts
from spec_vetting.pipeline.lock import RootLock

REPO = Path(__file__).resolve().parents[1]
SPEC_VET = [sys.executable, "-m", "spec_vetting"]

FAST_RENDER = textwrap.dedent(
    """
    import io
    from PIL import Image
    _buf = io.BytesIO()
    Image.new("RGB", (4, 4), "white").save(_buf, format="PNG")
    _PNG = _buf.getvalue()
    import spec_vetting.inspect.zoom as _zoom
    _zoom._default_renderer = lambda: (lambda *a, **k: _PNG)
    """
)

SCRIPT = [
    '<think>look</think>\n<tool_call>\n{"name": "spectral_visualization_tool", "arguments": '
    '{"wavelength_range": [6500, 6620]}}\n</tool_call>',
    "<think>Broad lines.</think>\n<answer>\\boxed{YES} broad Balmer emission</answer>",
]


#: kill -9 in the middle of a run, from outside the package: with ``--threads`` shards run in the run's own
#: process, so this SIGKILLs it as soon as the Nth shard's done marker is written. Killing right after the marker,
#: in the shard that wrote it, makes the count deterministic (a check in the run loop would race the workers).
KILL_AFTER_ENV = "SPEC_VETTING_TEST_KILL_AFTER_SHARDS"
KILL_AFTER_SHARDS = textwrap.dedent(
    f"""
    import os, signal
    if os.environ.get({KILL_AFTER_ENV!r}):
        import spec_vetting.pipeline.shard as _shard
        _kill_after = int(os.environ[{KILL_AFTER_ENV!r}])
        _write = _shard.write_json_atomic

        def _write_then_maybe_die(path, obj, *a, **k):
            out = _write(path, obj, *a, **k)
            if str(path).endswith(".done") and len(list(path.parent.glob("*.done"))) >= _kill_after:
                os.kill(os.getpid(), signal.SIGKILL)
            return out

        _shard.write_json_atomic = _write_then_maybe_die
    """
)


def _env(tmp_path: Path, fast_render: bool = True, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPEC_VETTING_JOB__")}
    env.pop(KILL_AFTER_ENV, None)
    paths = [str(REPO)]
    site = tmp_path / "_site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text((FAST_RENDER if fast_render else "") + KILL_AFTER_SHARDS)
    paths.insert(0, str(site))
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")])
    env["_TEST_CWD"] = str(tmp_path)
    env.update(extra)
    return env


def _run(args, env, timeout=240, argv=None) -> subprocess.CompletedProcess:
    # run from the test's folder so nothing (Dask scratch space included) lands in the repository
    return subprocess.run((SPEC_VET if argv is None else argv) + [str(a) for a in args], env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=env["_TEST_CWD"])


def _examples(tmp_path: Path, n: int, env) -> Path:
    out = tmp_path / "examples"
    r = _run(["make-examples", out, "--n", n, "--seed", 3], env)
    assert r.returncode == 0, r.stderr
    return out / "candidates.csv"


def _write_job(tmp_path: Path, candidates, out: Path, **fields) -> Path:
    import yaml

    job = {
        "candidates": [str(c) for c in candidates],
        "tasks": ["cv", "wd"],
        "out": str(out),
        "engine": {"name": "scripted", "options": {"replies": SCRIPT}},
        "shard_size": 2,
        "cluster": {"processes": False, "workers": 1, "dashboard": False},
    }
    job.update(fields)
    path = tmp_path / f"job-{out.name}.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def _catalog_rows(root: Path) -> list[dict]:
    drop = {"run_id", "elapsed_s", "started_at", "shard_id"}
    rows = [{k: v for k, v in r.items() if k not in drop} for r in read_verdicts(root).to_pylist()]
    return sorted(rows, key=lambda r: (r["candidate_id"], r["task"]))


def _turn_rows(root: Path) -> list[dict]:
    drop = {"run_id", "latency_s", "shard_id"}
    rows = [{k: v for k, v in r.items() if k not in drop} for r in read_turns(root).to_pylist()]
    return sorted(rows, key=lambda r: (r["candidate_id"], r["task"], r["turn"]))


def test_example_job_prints_and_usage_errors_exit_2(tmp_path):
    env = _env(tmp_path)
    r = _run(["run", "--example"], env)
    assert r.returncode == 0 and "max_inflight_per_endpoint:" in r.stdout
    r = _run(["run", "--task", "cv"], env)
    assert r.returncode == 2 and "--candidates" in r.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("candidates: [x.csv]\nout: cat\nshard_sise: 3\n")
    r = _run(["run", bad], env)
    assert r.returncode == 2 and "bad.yaml" in r.stderr and "shard_sise" in r.stderr


@pytest.mark.slow
def test_kill_9_then_resume_gives_the_uninterrupted_catalog(tmp_path):
    env = _env(tmp_path)
    cands = _examples(tmp_path, 5, env)
    # rows have their own task: keep them all (no tasks restriction)
    ref_job = _write_job(tmp_path, [cands], tmp_path / "ref", tasks=[], run_date="2024-01-02")
    job = _write_job(tmp_path, [cands], tmp_path / "cat", tasks=[], run_date="2024-01-02")
    r = _run(["run", ref_job], env)
    assert r.returncode == 0, r.stderr

    r = _run(["run", job], {**env, KILL_AFTER_ENV: "1"})
    assert r.returncode == -signal.SIGKILL
    [run_dir] = (tmp_path / "cat" / "_runs").glob("2*")
    assert read_manifest(tmp_path / "cat", run_dir.name)["status"] == "running"
    n_done = len(list((run_dir / "shards").glob("*.done")))
    assert 1 <= n_done < 3
    # the killed attempt never compacted: its rows are staged, not in the catalog
    assert read_verdicts(tmp_path / "cat").num_rows == 0
    # `catalog compact` puts the finished shards in (only those), without duplicates
    r = _run(["catalog", "compact", tmp_path / "cat"], env)
    assert r.returncode == 0, r.stderr
    partial = _catalog_rows(tmp_path / "cat")
    assert 0 < len(partial) < 5 and all(row in _catalog_rows(tmp_path / "ref") for row in partial)
    assert len({(row["candidate_id"], row["task"]) for row in partial}) == len(partial)

    r = _run(["run", job], env)  # the same command again
    assert r.returncode == 0, r.stderr
    assert f"resuming run {run_dir.name}" in r.stderr
    assert [p.name for p in (tmp_path / "cat" / "_runs").glob("2*")] == [run_dir.name]
    m = read_manifest(tmp_path / "cat", run_dir.name)
    assert m["status"] == "finished" and len(m["attempts"]) == 2
    got, want = _catalog_rows(tmp_path / "cat"), _catalog_rows(tmp_path / "ref")
    assert len(got) == 5 and got == want
    assert _turn_rows(tmp_path / "cat") == _turn_rows(tmp_path / "ref")
    assert not list((tmp_path / "cat").rglob("_tmp-*"))
    # few files: one per (table, task), whatever the number of shards; no staged parts left
    tasks = {row["task"] for row in got}
    assert len(list((tmp_path / "cat" / "verdicts").rglob("*.parquet"))) == len(tasks)
    assert not (run_dir / "parts").exists()
    assert len(read_verdicts(tmp_path / "cat", columns=["candidate_id"]).column(0)) == 5

    # idempotent: the same command on the finished run does nothing, says so, exit 0
    r = _run(["run", job], env)
    assert r.returncode == 0 and "nothing to do" in r.stderr and run_dir.name in r.stderr
    assert _catalog_rows(tmp_path / "cat") == want

    r = _run(["catalog", "summary", tmp_path / "cat"], env)
    assert r.returncode == 0 and run_dir.name in r.stdout and "(latest)" in r.stdout


def test_second_concurrent_run_is_refused_with_exit_1(tmp_path):
    env = _env(tmp_path)
    csv = tmp_path / "list.csv"
    csv.write_text("candidate_id,path,task\na,missing.fits,cv\n")
    (tmp_path / "cat").mkdir()
    with RootLock(tmp_path / "cat"):
        r = _run(["run", "--candidates", csv, "--out", tmp_path / "cat", "--threads", "--workers", "1"], env)
    assert r.returncode == 1
    assert "another `spec-vet run` is writing this catalog root" in r.stderr and str(os.getpid()) in r.stderr


@pytest.mark.slow
@pytest.mark.real_data
def test_end_to_end_two_worker_processes_examples_and_real_files(tmp_path, real_dir):
    """The rules engine over synthetic examples, real survey files, a corrupt and a missing file; real renders."""
    env = _env(tmp_path, fast_render=False)
    examples = _examples(tmp_path, 3, env)
    corrupt = tmp_path / "corrupt.fits"
    corrupt.write_bytes(b"SIMPLE  =                    T" + b"\0" * 100)
    real = [
        "lamost/spec-55862-B6212_sp06-006.fits",
        "lamost/pylasp_3703110.fits",
        "sdss/spec-0266-51602-0013.fits",
        "desi/coadd-4-80613-thru20210324.fits",
        "lamost/med-58408-TD230151N343645T01_sp01-015.fits",  # MRS: refused by the readers -> ERROR row
    ]
    lst = tmp_path / "real.csv"
    lines = ["candidate_id,path,task"] + [f"real-{i},{real_dir / p},cv" for i, p in enumerate(real)]
    lines += [f"corrupt,{corrupt},cv", f"missing,{tmp_path / 'nope.fits'},wd"]
    lst.write_text("\n".join(lines) + "\n")
    out = tmp_path / "cat"
    r = _run(["run", "--candidates", examples, "--candidates", lst, "--engine", "rules", "--out", out,
              "--workers", "2", "--no-dashboard"], env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "catalog:" in r.stdout
    rows = {r["candidate_id"]: r for r in read_verdicts(out).to_pylist()}
    assert len(rows) == 3 + len(real) + 2
    assert rows["corrupt"]["verdict"] == "ERROR" and rows["missing"]["verdict"] == "ERROR"
    assert "nope.fits" in rows["missing"]["error_message"]
    assert rows["real-4"]["verdict"] == "ERROR"
    for i in range(4):
        assert rows[f"real-{i}"]["verdict"] in ("YES", "NO", "UNDECIDED"), rows[f"real-{i}"]
        assert rows[f"real-{i}"]["engine"] == "rules"
    assert rows["real-0"]["survey"] == "lamost" and rows["real-2"]["plate"] == 266
    assert rows["real-3"]["survey"] == "desi" and rows["real-3"]["targetid"] is not None
    m = read_manifest(out, rows["real-0"]["run_id"])
    assert m["status"] == "finished" and m["counts"]["shards"] >= 2
    assert {i["kind"] for i in m["inputs"]} == {"file"} and all(i["sha256"] for i in m["inputs"])
    s = _run(["catalog", "summary", out, "--json"], env)
    summary = json.loads(s.stdout)
    assert summary["runs"][0]["verdicts"]["cv"]["ERROR"] == 2 and summary["runs"][0]["verdicts"]["wd"] == {"ERROR": 1}


@pytest.mark.slow
def test_dead_endpoint_among_several_moves_inspections_to_the_others(tmp_path):
    sys.path.insert(0, str(Path(__file__).parent))
    from fake_server import FakeOpenAIServer, dead_endpoint

    env = _env(tmp_path)
    csv = _examples(tmp_path, 6, env)
    with FakeOpenAIServer(delay_s=0.01) as a, FakeOpenAIServer(delay_s=0.01) as b:
        dead = dead_endpoint()
        r = _run(["run", "--candidates", csv, "--endpoint", a.base_url, "--endpoint", dead, "--endpoint", b.base_url,
                  "--out", tmp_path / "cat", "--threads", "--workers", "1", "--timeout", "5",
                  # one inspection per endpoint at a time: concurrent inspections must spread over both live ones
                  # (a hash split alone could put all six on one)
                  "--max-inflight-per-endpoint", "1"], env)
        assert r.returncode == 0, r.stderr[-3000:]
        assert a.chat_requests and b.chat_requests
    rows = read_verdicts(tmp_path / "cat").to_pylist()
    assert len(rows) == 6 and {r["verdict"] for r in rows} == {"YES"}
    assert {r["engine"] for r in rows} == {"openai"}
    endpoints = {t["endpoint"] for t in read_turns(tmp_path / "cat").to_pylist() if t["turn"] >= 0}
    assert dead.rstrip("/") not in {e.rstrip("/") for e in endpoints if e}
    shutil.rmtree(tmp_path / "examples")


def test_configuration_errors_exit_2_without_a_traceback(tmp_path, monkeypatch, no_job_env):
    from click.testing import CliRunner

    from spec_vetting.cli.run import run

    monkeypatch.chdir(tmp_path)
    csv = tmp_path / "list.csv"
    csv.write_text("candidate_id,path,task\na,missing.fits,cv\n")
    (tmp_path / "a-file").write_text("x")
    base = ["--candidates", str(csv), "--threads", "--workers", "1", "--no-dashboard"]
    cases = [
        (["--out", "cat", "--self-consistency-k", "3"], "self_consistency_k = 3 needs sampling"),
        (["--out", str(tmp_path / "a-file")], "is a file"),  # click.Path(file_okay=False) refuses it
        (["--out", "cat", "--engine-option", "device"], "expected KEY=VALUE"),
        (["--out", "cat", "--run-date", "2024-13-01"], "run_date"),
    ]
    for extra, message in cases:
        r = CliRunner().invoke(run, base + extra)
        assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output, (extra, r.output)
    assert not (tmp_path / "cat").exists()  # refused before anything is written


def test_progress_bar_dashboard_address_and_summary(tmp_path, monkeypatch, no_job_env):
    from click.testing import CliRunner

    from spec_vetting.cli.run import run

    monkeypatch.chdir(tmp_path)
    csv = tmp_path / "list.csv"
    csv.write_text("candidate_id,path,task\na,missing.fits,cv\nb,gone.fits,cv\n")
    r = CliRunner().invoke(run, ["--candidates", str(csv), "--out", "cat", "--threads", "--workers", "1",
                                 "--dashboard", "--progress"])
    assert r.exit_code == 0, r.output
    assert "Dask dashboard: http" in r.output and "inspections: 100%" in r.output and "2/2" in r.output
    assert "cv              2  ERROR 2" in r.output and "errors: read_error 2" in r.output
    assert "2 inspections in" in r.output and "catalog: " in r.output
