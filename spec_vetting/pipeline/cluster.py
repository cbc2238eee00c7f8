"""The Dask client a run submits its shards to: a LocalCluster sized to the machine, or a running scheduler.

Nothing home-made for distribution: the same shard tasks run on a laptop, on SLURM through dask-jobqueue, or on
Kubernetes, by pointing ``cluster.scheduler_address`` at that cluster's scheduler.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from contextlib import contextmanager

from .config import ClusterConfig


def default_workers(n_shards: int) -> int:
    return max(1, min(os.cpu_count() or 1, n_shards))


def quiet_dask_logs() -> None:
    """Dask logs every worker start and stop at INFO; keep its warnings and errors only, unless the user asked for
    verbose logs with SPEC_VETTING_LOG=DEBUG or INFO."""
    if os.environ.get("SPEC_VETTING_LOG", "").upper() in ("DEBUG", "INFO"):
        return
    for name in ("distributed", "distributed.scheduler", "distributed.nanny", "distributed.core",
                 "distributed.http.proxy", "distributed.worker"):
        logging.getLogger(name).setLevel(logging.ERROR)


def plan_workers(cfg: ClusterConfig, n_shards: int, engine_cap: int | None) -> tuple[int, str | None]:
    """(LocalCluster worker processes, a note saying why fewer than asked, or None).

    Never more workers than shards to run (64 processes starting for 2 pairs took minutes), and, for an engine
    with a per-endpoint in-flight cap (HTTP), never more worker processes than that cap: each process holds its
    own engine with at least one slot per endpoint, so more processes than the cap would exceed it.
    """
    asked = cfg.workers
    n = asked or default_workers(n_shards)
    reasons = []
    if n > n_shards:
        n = max(1, n_shards)
        reasons.append(f"only {n_shards} shard(s) to run")
    if engine_cap is not None and cfg.processes and n > engine_cap:
        n = engine_cap
        reasons.append(f"max_inflight_per_endpoint {engine_cap} allows {engine_cap} worker process(es), one "
                       "in-flight slot each")
    note = None
    if asked and n < asked:
        note = f"--workers {asked} capped to {n}: " + "; ".join(reasons)
    return n, note


@contextmanager
def _children_ignore_sigint():
    """Worker processes started inside inherit "ignore SIGINT": Ctrl-C reaches the whole foreground process group,
    and each worker used to print its own KeyboardInterrupt traceback (six of them). The run's own process handles
    the interruption and closes the cluster, which stops the workers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def dask_client(cfg: ClusterConfig, n_shards: int, engine_cap: int | None = None):
    """Yields ``(client, n_workers, workers_to_use, note)``; closes what it started.

    ``workers_to_use`` is None (any worker), or, on a running cluster with more workers than ``engine_cap``, the
    addresses the shards are pinned to so the in-flight cap holds over the whole cluster.
    """
    from distributed import Client, LocalCluster

    quiet_dask_logs()
    if cfg.scheduler_address:
        client = Client(cfg.scheduler_address)
        try:
            addrs = sorted(client.scheduler_info().get("workers", {}))
            n = len(addrs) or 1
            use, note = None, None
            if engine_cap is not None and n > engine_cap:
                use = addrs[:engine_cap]
                note = (f"the cluster has {n} workers; shards run on {engine_cap} of them so that "
                        f"max_inflight_per_endpoint {engine_cap} holds (one engine per worker)")
                n = engine_cap
            yield client, n, use, note
        finally:
            client.close()
        return
    n, note = plan_workers(cfg, n_shards, engine_cap)
    with _children_ignore_sigint():
        cluster = LocalCluster(
            n_workers=n,
            threads_per_worker=cfg.threads_per_worker,
            processes=cfg.processes,
            memory_limit=cfg.memory_limit or "auto",
            dashboard_address=":0",  # a free port: never collides with another cluster on 8787
            silence_logs=logging.ERROR,
        )
    try:
        client = Client(cluster)
        try:
            yield client, n, None, note
        finally:
            client.close()
    finally:
        cluster.close()
