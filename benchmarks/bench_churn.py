"""Worker churn on a real external Dask cluster: is the in-flight cap held, and does the run finish by itself?

``dask scheduler`` + ``dask worker`` processes on 127.0.0.1 (tests/dask_cluster.py), two fake servers
(tests/fake_server.py) answering each request after ``--delay`` s and counting the requests they serve at once, a
run of 20 example candidates x 2 tasks through the HTTP engine (real files, real rendering) with
``max_inflight_per_endpoint`` ``--cap``, shards of 2 pairs. Two scenarios:

- ``kill``: 3 workers (more than the cap); once the servers are busy, kill -9 the worker process of a worker holding
  shards (its nanny starts a new one under a new address) and add a fourth worker;
- ``grow``: 2 workers; a third joins once the servers are busy.

Reported: whether the run finished within ``--timeout`` s, its wall time, rows and ERROR rows, and the most requests
each server served at once (the cap measured at the server). The workers import the ``spec_vetting`` this process
imports, so pointing PYTHONPATH at an older tree measures that tree.

    PYTHONPATH=. python benchmarks/bench_churn.py [--scenario kill grow] [--cap 2] [--delay 0.4] [--timeout 180]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


def candidates(folder: Path) -> Path:
    from spec_vetting.synthetic.examples import write_examples

    rows = write_examples(folder, n=20, seed=3)
    path = folder / "no-task.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["candidate_id", "path", "target"])
        w.writerows([r["candidate_id"], str(folder / r["path"]), r.get("target") or ""] for r in rows)
    return path


def wait(ok, timeout: float = 90.0) -> bool:
    end = time.monotonic() + timeout
    while not ok():
        if time.monotonic() > end:
            return False
        time.sleep(0.1)
    return True


def scenario(name: str, work: Path, cands: Path, cap: int, delay: float, timeout: float) -> dict:
    from dask_cluster import Cluster
    from distributed import Client
    from fake_server import FakeOpenAIServer

    import spec_vetting
    from spec_vetting.catalog.read import read_verdicts
    from spec_vetting.pipeline import job_from_dict, runner

    tmp = work / name
    tmp.mkdir(parents=True)
    cluster = Cluster(tmp, tree=Path(spec_vetting.__file__).resolve().parents[1])
    try:
        for _ in range(3 if name == "kill" else 2):
            cluster.add_worker()
        with FakeOpenAIServer(delay_s=delay) as a, FakeOpenAIServer(delay_s=delay) as b, \
                Client(cluster.address, timeout=60) as client:
            cluster.wait_workers(client, 3 if name == "kill" else 2)
            job = job_from_dict({
                "candidates": [str(cands)], "tasks": ["cv", "wd"], "out": str(tmp / "cat"),
                "engine": {"name": "openai", "endpoints": [a.base_url, b.base_url]},
                "max_inflight_per_endpoint": cap, "shard_size": 2,
                "cluster": {"scheduler_file": str(cluster.file), "dashboard": False},
            })
            box: dict = {}

            def go(job=job, box=box):
                try:
                    box["outcome"] = runner.run_job(job, progress=False, echo=lambda s: None)
                except BaseException as exc:  # noqa: BLE001 - reported
                    box["error"] = repr(exc)

            t0 = time.perf_counter()
            thread = threading.Thread(target=go, daemon=True)
            thread.start()
            wait(lambda: len(a.chat_requests) + len(b.chat_requests) >= 6)
            if name == "kill":
                wait(lambda: any(client.processing().values()))
                victim = next((w for w, t in client.processing().items() if t), None)
                if victim is not None:
                    os.kill(client.run(os.getpid, workers=[victim])[victim], signal.SIGKILL)
            cluster.add_worker()
            thread.join(timeout=timeout)
            wall = time.perf_counter() - t0
            result = {"scenario": name, "finished_by_itself": not thread.is_alive(), "wall_s": round(wall, 1),
                      "max_in_flight": [a.max_in_flight, b.max_in_flight], "cap": cap}
            if thread.is_alive():
                result["stuck"] = {w: len(t) for w, t in client.processing().items()}
                result["unrunnable"] = client.run_on_scheduler(
                    lambda dask_scheduler: len(dask_scheduler.unrunnable))
                return result
            out = box.get("outcome")
            result["status"] = out.status if out else box.get("error")
            if out is not None:
                rows = read_verdicts(out.root, columns=["candidate_id", "task", "verdict"]).to_pylist()
                result["rows"] = len(rows)
                result["distinct_pairs"] = len({(r["candidate_id"], r["task"]) for r in rows})
                result["error_rows"] = sum(r["verdict"] == "ERROR" for r in rows)
            return result
    finally:
        cluster.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", nargs="+", default=["kill", "grow"], choices=["kill", "grow"])
    ap.add_argument("--cap", type=int, default=2)
    ap.add_argument("--delay", type=float, default=0.4)
    ap.add_argument("--timeout", type=float, default=180.0)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-churn-"))
    cands = candidates(work / "examples")
    for name in args.scenario:
        print(json.dumps(scenario(name, work, cands, args.cap, args.delay, args.timeout)), flush=True)
    os._exit(0)  # a run left stuck (an older tree) keeps a thread waiting on a closed client


if __name__ == "__main__":
    main()
