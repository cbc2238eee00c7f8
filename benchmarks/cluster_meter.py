"""CPU seconds and peak memory of a benchmark's client and its Dask workers, measured around one block of work."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


def _proc_stats(pids: list[int]) -> dict[int, tuple[float, int]]:
    import psutil

    out = {}
    for pid in pids:
        try:
            p = psutil.Process(pid)
            t = p.cpu_times()
            out[pid] = (t.user + t.system, p.memory_info().rss)
        except psutil.Error:
            continue
    return out


@contextmanager
def metered(client) -> Iterator[dict]:
    """``with metered(client) as m: ...``; afterwards ``m`` holds wall_s, cpu_s_client, cpu_s_workers,
    peak_rss_mb_client and peak_rss_mb_worker_max (resident memory sampled every 50 ms)."""
    pids = [os.getpid(), *client.run(os.getpid).values()]
    peak = dict.fromkeys(pids, 0)
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            for pid, (_, rss) in _proc_stats(pids).items():
                peak[pid] = max(peak[pid], rss)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    cpu0 = {pid: c for pid, (c, _) in _proc_stats(pids).items()}
    sampler.start()
    t0 = time.perf_counter()
    out: dict = {}
    try:
        yield out
    finally:
        wall = time.perf_counter() - t0
        stop.set()
        sampler.join()
        cpu1 = {pid: c for pid, (c, _) in _proc_stats(pids).items()}
        cpu = {pid: cpu1.get(pid, 0.0) - cpu0.get(pid, 0.0) for pid in pids}
        out.update(wall_s=round(wall, 2), cpu_s_client=round(cpu[pids[0]], 2),
                   cpu_s_workers=round(sum(cpu[p] for p in pids[1:]), 2),
                   peak_rss_mb_client=round(peak[pids[0]] / 2**20),
                   peak_rss_mb_worker_max=round(max(peak[p] for p in pids[1:]) / 2**20))
