"""Runs on a real external Dask cluster (``dask scheduler`` + ``dask worker`` processes on 127.0.0.1) whose workers
come and go mid-run: the in-flight cap per endpoint, counted by the servers themselves, is never exceeded, the run
finishes by itself with exactly one row per pair, and a cluster left without workers fails the run with a message
naming the cause instead of waiting forever."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from dask_cluster import Cluster
from fake_server import FakeOpenAIServer

from spec_vetting.catalog.read import read_current, read_verdicts
from spec_vetting.pipeline import job_from_dict, runner

CAP = 2

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def candidates(tmp_path_factory):
    import csv

    from spec_vetting.synthetic.examples import write_examples

    out = tmp_path_factory.mktemp("examples")
    rows = write_examples(out, n=20, seed=3)
    path = out / "no-task.csv"  # every candidate gets both tasks of the run: 40 pairs
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["candidate_id", "path", "target"])
        w.writerows([r["candidate_id"], str(out / r["path"]), r.get("target") or ""] for r in rows)
    assert len(rows) == 20
    return path


def _job(tmp_path, candidates, cluster_file, endpoints, **cluster):
    return job_from_dict({
        "candidates": [str(candidates)],
        "tasks": ["cv", "wd"],
        "out": str(tmp_path / "cat"),
        "engine": {"name": "openai", "endpoints": endpoints},
        "max_inflight_per_endpoint": CAP,
        "shard_size": 2,
        "cluster": {"scheduler_file": str(cluster_file), "dashboard": False, **cluster},
    })


def _run_in_thread(job):
    box: dict = {}

    def go():
        try:
            box["outcome"] = runner.run_job(job, progress=False, echo=lambda s: box.setdefault("echo", []).append(s))
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t, box


def test_kill_9_a_worker_holding_shards_and_add_one_mid_run(tmp_path, cluster, candidates):
    from distributed import Client

    for _ in range(3):  # more workers than the cap per endpoint: the case that was pinned to two of them
        cluster.add_worker()
    with FakeOpenAIServer(delay_s=0.4) as a, FakeOpenAIServer(delay_s=0.4) as b, \
            Client(cluster.address, timeout=60) as client:
        cluster.wait_workers(client, 3)
        job = _job(tmp_path, candidates, cluster.file, [a.base_url, b.base_url])
        n_pairs = 40
        thread, box = _run_in_thread(job)

        # a worker that holds shards, once the servers are busy
        Cluster._wait(lambda: len(a.chat_requests) + len(b.chat_requests) >= 6, "the first requests")
        Cluster._wait(lambda: any(client.processing().values()), "a worker holding shards")
        victim = next(w for w, tasks in client.processing().items() if tasks)
        pid = client.run(os.getpid, workers=[victim])[victim]
        os.kill(pid, signal.SIGKILL)  # its nanny starts a new worker process under a new address
        cluster.add_worker()  # and the cluster grows mid-run

        thread.join(timeout=240)
        assert not thread.is_alive(), "the run did not finish by itself"
        assert "error" not in box, box.get("error")
        outcome = box["outcome"]
        assert outcome.status == "finished", outcome.failures
        assert victim not in client.nthreads()  # the killed worker really went away
        most = (a.max_in_flight, b.max_in_flight)

    assert max(most) <= CAP, f"in flight at the servers {most}, cap {CAP}"
    assert max(most) == CAP  # the cap was reached, so the test measured something
    rows = read_verdicts(outcome.root, columns=["candidate_id", "task", "verdict", "error_kind"]).to_pylist()
    keys = [(r["candidate_id"], r["task"]) for r in rows]
    assert len(keys) == n_pairs and len(set(keys)) == n_pairs
    assert [r for r in rows if r["verdict"] == "ERROR"] == []
    assert read_current(outcome.root).num_rows == n_pairs


def test_a_cluster_without_workers_fails_the_run_naming_the_cause(tmp_path, cluster, candidates):
    with FakeOpenAIServer() as a:
        job = _job(tmp_path, candidates, cluster.file, [a.base_url], no_worker_timeout_s=2)
        t0 = time.monotonic()
        outcome = runner.run_job(job, progress=False, echo=lambda s: None)
    assert outcome.status == "failed"
    assert time.monotonic() - t0 < 60
    assert len(outcome.failures) == 20  # every shard, each with the cause
    assert all("has had no worker for 2 s" in f and "start workers" in f for f in outcome.failures)
