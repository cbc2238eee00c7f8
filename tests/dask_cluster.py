"""A real Dask cluster for tests and benchmarks: ``dask scheduler`` and ``dask worker`` processes on 127.0.0.1.

    c = Cluster(tmp_path)            # the scheduler; c.file is its scheduler file, c.address its address
    c.add_worker()                   # a worker with its nanny (kill -9 its worker process: the nanny restarts it)
    c.wait_workers(client, 3)
    c.close()                        # every process it started, killed by its own session

Leases of Dask semaphores held by a killed worker come back after :data:`LEASE_TIMEOUT` (set on every process).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: leases of a killed worker come back after this; short so that tests are, long enough that a worker starved of
#: CPU on a loaded machine still refreshes its leases in time (every fifth of it)
LEASE_TIMEOUT = "8s"


def _env(tree: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPEC_VETTING_JOB__", "DASK_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")])
    env["DASK_DISTRIBUTED__SCHEDULER__LOCKS__LEASE_TIMEOUT"] = LEASE_TIMEOUT
    env["DASK_DISTRIBUTED__SCHEDULER__LOCKS__LEASE_VALIDATION_INTERVAL"] = "1s"
    return env


class Cluster:
    """A scheduler and its workers as separate processes, every one of them ended at exit."""

    def __init__(self, tmp_path: Path, tree: Path = REPO):
        """``tree``: the source tree whose ``spec_vetting`` the workers import (this repository by default)."""
        self.tmp = tmp_path
        self.env = _env(tree)
        self.file = tmp_path / "scheduler.json"
        self.procs: list[subprocess.Popen] = []
        self._start("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                    "--scheduler-file", str(self.file))
        self._wait(lambda: self.file.is_file(), "the scheduler file")
        self.address = json.loads(self.file.read_text())["address"]

    def _start(self, *args) -> subprocess.Popen:
        log = open(self.tmp / f"dask-{len(self.procs)}.log", "w")  # noqa: SIM115 - closed with the process
        p = subprocess.Popen([sys.executable, "-m", "dask", *args], env=self.env, cwd=self.tmp, stdout=log,
                             stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(p)
        return p

    def add_worker(self, *extra) -> None:
        self._start("worker", "--scheduler-file", str(self.file), "--nthreads", "2", "--host", "127.0.0.1",
                    "--no-dashboard", "--memory-limit", "0", *extra)

    @staticmethod
    def _wait(ok, what: str, timeout: float = 90.0) -> None:
        end = time.monotonic() + timeout
        while not ok():
            if time.monotonic() > end:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.1)

    def wait_workers(self, client, n: int) -> None:
        self._wait(lambda: len(client.nthreads()) >= n, f"{n} workers")

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)  # its own session: the worker and its nanny, nothing else
        for p in self.procs:
            p.wait(timeout=30)
