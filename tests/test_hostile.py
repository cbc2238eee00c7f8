"""A hostile OpenAI-compatible server and hostile inputs driven through `spec-vet run` (subprocesses).

The server is the standard-library test server (tests/fake_server.py) on 127.0.0.1: it answers /health but can
accept chat requests and never answer (each request sleeps, bounded, and stops with the server), fail, drop, or
answer garbage. Every case is bounded in time and checks that every candidate-task pair ends as exactly one row
with a reason (a verdict, an UNDECIDED reason, or an ERROR kind and message).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from fake_server import FakeOpenAIServer, Fault
from test_pipeline_cli import SPEC_VET, _env, _run

from spec_vetting.catalog import read_turns, read_verdicts

TASKS = ["--task", "cv"]


@pytest.fixture(scope="module")
def spectra(tmp_path_factory) -> Path:
    """Four LAMOST files in a folder."""
    from spec_vetting.synthetic.synthetic import make_spectrum
    from spec_vetting.synthetic.writers import write_spectrum

    d = tmp_path_factory.mktemp("hostile") / "spectra"
    for i, kind in enumerate(["cv", "g_star", "wd_da", "m_giant"]):
        write_spectrum(make_spectrum(kind, seed=20 + i), d / f"s{i}.fits", "lamost-lrs-image")
    return d


def _rows(root: Path) -> list[dict]:
    return read_verdicts(root).to_pylist()


def _one_row_with_a_reason_each(root: Path, expected_ids: set[str]) -> list[dict]:
    rows = _rows(root)
    keys = [(r["candidate_id"], r["task"]) for r in rows]
    assert len(keys) == len(set(keys)), "a pair has two rows"
    assert {c for c, _ in keys} == expected_ids
    for r in rows:
        if r["verdict"] == "ERROR":
            assert r["error_kind"] and r["error_message"], r
        elif r["verdict"] == "UNDECIDED":
            assert r["reason"], r
        else:
            assert r["verdict"] in ("YES", "NO") and r["status"], r
    return rows


@pytest.mark.parametrize("fault, said", [
    (Fault.sleep(120), "hung"),  # accepts, never answers (until the server stops)
    # sends its reply a byte at a time: each read returns in time, --timeout bounds the whole request
    (Fault.trickle(seconds_per_byte=0.2), "request deadline"),
], ids=["never-answers", "trickles"])
def test_a_server_that_accepts_and_never_answers_is_bounded(tmp_path, spectra, fault, said):
    env = _env(tmp_path)
    with FakeOpenAIServer() as srv:
        srv.always = fault
        t0 = time.monotonic()
        r = _run(["run", "--candidates", spectra, *TASKS, "--endpoint", srv.base_url, "--out", tmp_path / "cat",
                  "--timeout", "1", "--threads", "--workers", "1", "--no-dashboard"], env, timeout=120)
        wall = time.monotonic() - t0
        n_requests = len(srv.chat_requests)
    assert r.returncode == 0, r.stderr
    assert wall < 60, f"a hung endpoint took {wall:.0f} s"
    rows = _one_row_with_a_reason_each(tmp_path / "cat", {"s0", "s1", "s2", "s3"})
    # never answered: ERROR engine_unavailable (re-run by --incremental), not an answer of any kind
    assert {(x["verdict"], x["error_kind"]) for x in rows} == {("ERROR", "engine_unavailable")}
    assert any(said in x["error_message"] for x in rows), rows
    # two tries per request (the timeout retried once), not four; the hung endpoint is then cooled down
    assert n_requests <= 2 * 4


def test_the_time_budget_bounds_a_slow_server(tmp_path, spectra):
    env = _env(tmp_path)
    with FakeOpenAIServer(delay_s=3.0) as srv:
        r = _run(["run", "--candidates", spectra, *TASKS, "--endpoint", srv.base_url, "--out", tmp_path / "cat",
                  "--timeout", "30", "--time-budget", "2", "--threads", "--workers", "1", "--no-dashboard"], env,
                 timeout=120)
    assert r.returncode == 0, r.stderr
    rows = _one_row_with_a_reason_each(tmp_path / "cat", {"s0", "s1", "s2", "s3"})
    # the model never saw these pairs: not an answer (UNDECIDED) but ERROR, re-run by --incremental
    assert {(x["verdict"], x["error_kind"]) for x in rows} == {("ERROR", "engine_timeout")}
    assert all("time budget" in x["error_message"] and x["n_turns"] == 0 for x in rows)
    with FakeOpenAIServer() as srv:
        r = _run(["run", "--candidates", spectra, *TASKS, "--endpoint", srv.base_url, "--out", tmp_path / "cat",
                  "--incremental", "--threads", "--workers", "1", "--no-dashboard"], env, timeout=120)
        assert r.returncode == 0, r.stderr
        assert srv.chat_requests
    latest = (tmp_path / "cat" / "_runs" / "LATEST").read_text().strip()
    again = [x for x in _rows(tmp_path / "cat") if x["run_id"] == latest]
    assert sorted(x["candidate_id"] for x in again) == ["s0", "s1", "s2", "s3"]
    assert {x["verdict"] for x in again} <= {"YES", "NO"}


def test_faults_of_every_kind_end_as_one_row_each(tmp_path, spectra):
    env = _env(tmp_path)
    with FakeOpenAIServer() as srv:
        srv.push_faults(Fault.status(500), Fault.status(400), Fault.rate_limit("0"), Fault.drop(),
                        Fault.garbage_body(), Fault.garbage_text("lorem ipsum"), Fault.status(503),
                        Fault.garbage_text("<answer>maybe</answer>"))
        r = _run(["run", "--candidates", spectra, *TASKS, "--endpoint", srv.base_url, "--out", tmp_path / "cat",
                  "--timeout", "5", "--threads", "--workers", "1", "--no-dashboard",
                  "--max-inflight-per-endpoint", "1", "--engine-option", "backoff_initial_s=0.01"], env,
                 timeout=120)
    assert r.returncode == 0, r.stderr
    _one_row_with_a_reason_each(tmp_path / "cat", {"s0", "s1", "s2", "s3"})


def test_inflight_cap_is_not_multiplied_by_workers(tmp_path, spectra):
    """--workers 4 --max-inflight-per-endpoint 2: never more than 2 requests at once on the endpoint (4 before)."""
    lock = threading.Lock()
    state = {"now": 0, "max": 0}

    def reply(messages, body):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.3)
        with lock:
            state["now"] -= 1
        return "<answer>\\boxed{NO} nothing</answer>"

    more = tmp_path / "more"
    shutil.copytree(spectra, more)
    for i in range(4):
        shutil.copy(spectra / f"s{i}.fits", more / f"t{i}.fits")
    env = _env(tmp_path)
    with FakeOpenAIServer(reply=reply) as srv:
        r = _run(["run", "--candidates", more, *TASKS, "--endpoint", srv.base_url, "--out", tmp_path / "cat",
                  "--workers", "4", "--max-inflight-per-endpoint", "2", "--shard-size", "2", "--no-dashboard"], env,
                 timeout=300)
    assert r.returncode == 0, r.stderr
    assert "--workers 4 capped to 2" in r.stderr
    _one_row_with_a_reason_each(tmp_path / "cat", {f"s{i}" for i in range(4)} | {f"t{i}" for i in range(4)})
    assert 1 <= state["max"] <= 2, state


def test_workers_are_capped_to_the_work(tmp_path, spectra):
    env = _env(tmp_path)
    one = tmp_path / "one"
    one.mkdir()
    shutil.copy(spectra / "s0.fits", one / "s0.fits")
    t0 = time.monotonic()
    r = _run(["run", "--candidates", one, *TASKS, "--engine", "rules", "--out", tmp_path / "cat", "--workers", "64",
              "--no-dashboard"], env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "--workers 64 capped to 1: only 1 shard(s) to run" in r.stderr
    assert time.monotonic() - t0 < 120
    _one_row_with_a_reason_each(tmp_path / "cat", {"s0"})


def test_hostile_files_in_a_folder_end_as_rows(tmp_path, spectra):
    """A FIFO, a dangling link and a link loop next to good files: rows with the reason, no hang."""
    d = tmp_path / "incoming"
    shutil.copytree(spectra, d)
    os.mkfifo(d / "pipe.fits")
    (d / "dangling.fits").symlink_to(tmp_path / "gone.fits")
    (d / "loop.fits").symlink_to(d / "loop.fits")
    (d / "html.fits").write_text("<html>504 Gateway Timeout</html>")
    env = _env(tmp_path)
    r = _run(["run", "--candidates", d, *TASKS, "--engine", "rules", "--out", tmp_path / "cat", "--threads",
              "--no-dashboard"], env, timeout=180)
    assert r.returncode == 0, r.stderr
    rows = {x["candidate_id"]: x for x in _one_row_with_a_reason_each(
        tmp_path / "cat", {"s0", "s1", "s2", "s3", "pipe", "dangling", "loop", "html"})}
    assert "FIFO" in rows["pipe"]["error_message"]
    assert "dangling symbolic link" in rows["dangling"]["error_message"]
    assert "symbolic link loop" in rows["loop"]["error_message"]
    assert "HTML" in rows["html"]["error_message"]
    assert all(rows[f"s{i}"]["verdict"] != "ERROR" for i in range(4))


def test_a_fifo_in_a_candidate_table_is_an_error_row(tmp_path, spectra):
    os.mkfifo(tmp_path / "pipe.fits")
    lst = tmp_path / "list.csv"
    lst.write_text(f"path\n{spectra / 's0.fits'}\npipe.fits\n")
    env = _env(tmp_path)
    r = _run(["run", "--candidates", lst, *TASKS, "--engine", "rules", "--out", tmp_path / "cat", "--threads",
              "--no-dashboard"], env, timeout=180)
    assert r.returncode == 0, r.stderr
    rows = {x["candidate_id"]: x for x in _one_row_with_a_reason_each(tmp_path / "cat", {"s0", "pipe"})}
    assert rows["pipe"]["verdict"] == "ERROR" and "FIFO" in rows["pipe"]["error_message"]


def test_empty_incoming_folder_is_a_normal_night(tmp_path):
    (tmp_path / "incoming").mkdir()
    r = _run(["run", "--candidates", tmp_path / "incoming", *TASKS, "--out", tmp_path / "cat", "--threads"],
             _env(tmp_path), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "nothing to vet" in r.stdout
    missing = _run(["run", "--candidates", tmp_path / "nope", *TASKS, "--out", tmp_path / "cat", "--threads"],
                   _env(tmp_path), timeout=120)
    assert missing.returncode == 2  # a folder that is not there (unmounted) is still a configuration error


def test_max_error_rate_fails_a_run_of_read_errors(tmp_path, spectra):
    lst = tmp_path / "list.csv"
    lst.write_text("path\n" + "".join(f"unmounted/s{i}.fits\n" for i in range(3)) + f"{spectra / 's0.fits'}\n")
    env = _env(tmp_path)
    args = ["run", "--candidates", lst, *TASKS, "--engine", "rules", "--threads", "--no-dashboard"]
    ok = _run(args + ["--out", tmp_path / "a"], env, timeout=180)
    assert ok.returncode == 0, ok.stderr  # no threshold: ERROR rows are rows
    bad = _run(args + ["--out", tmp_path / "b", "--max-error-rate", "0.5"], env, timeout=180)
    assert bad.returncode == 1, bad.stderr
    assert "3 of 4 verdicts are ERROR (75.0%), above max_error_rate 0.5" in bad.stderr
    log = next((tmp_path / "b" / "_runs").glob("*/run.log")).read_text()
    assert "FAILED run" in log and "SUCCESS" not in log
    assert len(_rows(tmp_path / "b")) == 4


def test_permanent_errors_are_not_retried_unless_the_file_changed(tmp_path, spectra):
    d = tmp_path / "incoming"
    d.mkdir()
    shutil.copy(spectra / "s0.fits", d / "s0.fits")
    import numpy as np
    from astropy.io import fits

    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(
        [fits.Column(name="A", format="E", array=np.arange(3.0))], name="STUFF")]).writeto(d / "odd.fits")
    (d / "cut.fits").write_bytes((spectra / "s1.fits").read_bytes()[:5000])  # read_error: retried
    env = _env(tmp_path)
    args = ["run", "--candidates", d, *TASKS, "--engine", "rules", "--out", tmp_path / "cat", "--threads",
            "--no-dashboard", "--incremental"]
    first = _run(args, env, timeout=180)
    assert first.returncode == 0, first.stderr
    kinds = {r["candidate_id"]: r["error_kind"] for r in _rows(tmp_path / "cat")}
    assert kinds["odd"] == "unsupported_format" and kinds["cut"] == "read_error"
    time.sleep(1.1)
    second = _run(args + ["--fresh"], env, timeout=180)
    assert second.returncode == 0, second.stderr
    assert "2 pair(s) already vetted" in second.stderr  # s0 and the unsupported file; cut.fits is retried
    os.utime(d / "odd.fits")  # the file changed: retried
    third = _run(args + ["--fresh"], env, timeout=180)
    assert "1 pair(s) already vetted" in third.stderr


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signals_end_like_an_interruption(tmp_path, spectra, sig, code):
    env = _env(tmp_path)
    out = tmp_path / "cat"
    with FakeOpenAIServer(delay_s=1.0) as srv:
        args = ["run", "--candidates", str(spectra), *TASKS, "--endpoint", srv.base_url, "--out", str(out),
                "--workers", "2", "--shard-size", "1", "--max-inflight-per-endpoint", "2", "--no-dashboard",
                "--no-progress"]
        p = subprocess.Popen(SPEC_VET + args, env=env, cwd=env["_TEST_CWD"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and len(srv.chat_requests) < 2:
                time.sleep(0.2)
            assert len(srv.chat_requests) >= 2, "the run never reached the server"
            # as a terminal (Ctrl-C: the whole process group) or systemd/timeout (SIGTERM: the process) does
            if sig == signal.SIGINT:
                os.killpg(p.pid, sig)
            else:
                p.send_signal(sig)
            stdout, stderr = p.communicate(timeout=90)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        assert p.returncode == code, stderr
        assert stderr.count("interrupted by") == 1 and "Traceback" not in stderr, stderr
        log = next((out / "_runs").glob("*/run.log")).read_text()
        assert "INTERRUPTED run" in log and signal.Signals(sig).name in log
        manifest = json.loads(next((out / "_runs").glob("*/manifest.json")).read_text())
        assert manifest["status"] == "interrupted"
        assert manifest["attempts"][-1]["interrupted_by"] == signal.Signals(sig).name
        srv.delay_s = 0.0
        r = _run(args, env, timeout=240)  # the same command resumes and finishes it
    assert r.returncode == 0, r.stderr
    assert "resuming run" in r.stderr
    _one_row_with_a_reason_each(out, {"s0", "s1", "s2", "s3"})


def test_replies_are_validated_at_the_edge(tmp_path, spectra):
    """Impossible token counts and an oversized body are ERROR bad_reply naming the endpoint and the field (no
    traceback); an UNDECIDED row's justification is its reason, not a fragment of the reply."""
    env = _env(tmp_path, SPEC_VETTING_LOG="WARNING")
    garbage = "lorem ipsum RAW-TAIL-OF-THE-REPLY"
    with FakeOpenAIServer() as srv:
        srv.push_faults(Fault.usage(prompt_tokens=float("nan")), Fault.usage(completion_tokens=-6000000),
                        Fault.huge(300_000), Fault.garbage_text(garbage))
        r = _run(["run", "--candidates", spectra, *TASKS, "--endpoint", srv.base_url, "--out", tmp_path / "cat",
                  "--threads", "--workers", "1", "--no-dashboard", "--max-inflight-per-endpoint", "1",
                  "--engine-option", "max_reply_bytes=200000"], env, timeout=120)
        assert len(srv.chat_requests) == 4  # none retried: a malformed reply is not transient
        url = srv.base_url
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    rows = _one_row_with_a_reason_each(tmp_path / "cat", {"s0", "s1", "s2", "s3"})
    bad = sorted(x["error_message"] for x in rows if x["error_kind"] == "bad_reply")
    assert len(bad) == 3 and all(url in m for m in bad), bad
    assert any("usage.prompt_tokens" in m and "nan" in m for m in bad), bad
    assert any("usage.completion_tokens" in m and "-6000000" in m for m in bad), bad
    assert any("max_reply_bytes" in m and "200000" in m for m in bad), bad
    [undecided] = [x for x in rows if x["verdict"] == "UNDECIDED"]
    assert undecided["justification"] == undecided["reason"] and "RAW-TAIL" not in undecided["justification"]
    turns = read_turns(tmp_path / "cat").to_pylist()
    assert any(garbage in (t["assistant_text"] or "") for t in turns)  # the raw text stays in turns
    r = _run(["catalog", "summary", tmp_path / "cat"], env)
    assert r.returncode == 0 and "-6000000" not in r.stdout and "-0%" not in r.stdout, r.stdout
