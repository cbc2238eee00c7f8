"""The Dask client a run submits its shards to: a LocalCluster sized to the machine, or a running scheduler.

Nothing home-made for distribution: the same shard tasks run on a laptop, on SLURM through dask-jobqueue, or on
Kubernetes, by pointing ``cluster.scheduler_address`` at that cluster's scheduler.
"""

from __future__ import annotations

import logging
import os
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


@contextmanager
def dask_client(cfg: ClusterConfig, n_shards: int):
    """Yields ``(client, n_workers)``; closes what it started."""
    from distributed import Client, LocalCluster

    quiet_dask_logs()
    if cfg.scheduler_address:
        client = Client(cfg.scheduler_address)
        try:
            n = len(client.scheduler_info().get("workers", {})) or 1
            yield client, n
        finally:
            client.close()
        return
    n = cfg.workers or default_workers(n_shards)
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
            yield client, n
        finally:
            client.close()
    finally:
        cluster.close()
