"""The Dask client a run submits its shards to: a LocalCluster sized to the machine, or a running scheduler.

Nothing home-made for distribution: the same shard tasks run on a laptop, on SLURM through dask-jobqueue, or on
Kubernetes, by pointing ``cluster.scheduler_address`` (or ``cluster.scheduler_file``, the JSON file
``dask scheduler --scheduler-file`` and dask-jobqueue write) at that cluster's scheduler.

Dask's own configuration stays in force: the printed dashboard link follows ``distributed.dashboard.link``, a
LocalCluster's dashboard address ``distributed.scheduler.dashboard.address`` (``DASK_DISTRIBUTED__SCHEDULER__
DASHBOARD__ADDRESS``; LocalCluster itself only takes it as an argument, so spec-vet reads that key beside Dask's
other ``distributed.scheduler.dashboard`` keys; unset: ``:0``, a free port, so runs side by side never collide on
8787), and Dask's logging follows ``logging`` / ``DASK_LOGGING__DISTRIBUTED``. Records of the ``spec_vetting`` logger on
workers in other processes are forwarded to this process with ``Client.forward_logging``.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from contextlib import contextmanager

from distributed.diagnostics.plugin import WorkerPlugin

from .config import ClusterConfig

log = logging.getLogger(__name__)

#: the package's logger: the one level SPEC_VETTING_LOG sets, and the one forwarded from workers
PACKAGE_LOGGER = "spec_vetting"
#: Dask config key of a LocalCluster's dashboard address (read by spec-vet, beside Dask's dashboard keys)
DASHBOARD_ADDRESS_KEY = "distributed.scheduler.dashboard.address"


def default_workers(n_shards: int) -> int:
    return max(1, min(os.cpu_count() or 1, n_shards))


def dashboard_address(enabled: bool = True) -> str | None:
    """The LocalCluster dashboard address: Dask's config when set there, else ``:0``; None when disabled."""
    if not enabled:
        return None
    import dask

    value = dask.config.get(DASHBOARD_ADDRESS_KEY, None)
    return ":0" if value in (None, "") else str(value)


def dask_logging_configured(environ=None) -> bool:
    """The user set Dask's own logging (``DASK_LOGGING__...``): then spec-vet leaves Dask's log levels alone."""
    return any(k.startswith("DASK_LOGGING__") for k in (os.environ if environ is None else environ))


def quiet_dask_logs() -> None:
    """Dask logs every worker start and stop at INFO; keep its warnings and errors only, unless Dask's own logging
    config asks for more (``DASK_LOGGING__DISTRIBUTED=info``). SPEC_VETTING_LOG never changes Dask's loggers."""
    if dask_logging_configured():
        return
    for name in ("distributed", "distributed.scheduler", "distributed.nanny", "distributed.core",
                 "distributed.http.proxy", "distributed.worker"):
        logging.getLogger(name).setLevel(logging.ERROR)


def plan_workers(cfg: ClusterConfig, n_shards: int, engine_cap: int | None) -> tuple[int, str | None]:
    """(LocalCluster worker processes, a note saying why fewer than asked, or None).

    Never more workers than shards to run (64 processes starting for 2 pairs took minutes), and, for an engine
    with a per-endpoint in-flight cap (HTTP), never more worker processes than that cap: the run's semaphores
    (:mod:`.slots`) would keep the others waiting for a slot.
    """
    asked = cfg.workers
    n = asked or default_workers(n_shards)
    reasons = []
    if n > n_shards:
        n = max(1, n_shards)
        reasons.append(f"only {n_shards} shard(s) to run")
    if engine_cap is not None and cfg.processes and n > engine_cap:
        n = engine_cap
        reasons.append(f"max_inflight_per_endpoint {engine_cap} keeps at most {engine_cap} worker process(es) "
                       "busy")
    note = None
    if asked and n < asked:
        note = f"--workers {asked} capped to {n}: " + "; ".join(reasons)
    return n, note


class LogLevelPlugin(WorkerPlugin):
    """Sets the ``spec_vetting`` logger's level on every worker, present and future, to the client's.

    A worker's loggers keep Python's default (WARNING) otherwise, so DEBUG and INFO records would never reach the
    forwarding handler (see ``Client.forward_logging``).
    """

    name = "spec-vetting-log-level"

    def __init__(self, level: int):
        self.level = level
        self.client_pid = os.getpid()
        self._previous: int | None = None

    def setup(self, worker) -> None:
        if os.getpid() == self.client_pid:  # a worker thread of the client's own process: its loggers are ours
            return
        logger = logging.getLogger(PACKAGE_LOGGER)
        self._previous = logger.level
        logger.setLevel(self.level)

    def teardown(self, worker) -> None:
        if self._previous is not None:
            logging.getLogger(PACKAGE_LOGGER).setLevel(self._previous)


class ShardFailuresReportedOnce(logging.Filter):
    """Drops distributed's "Compute Failed" record (key, task, exception and a traceback excerpt) for a spec-vetting
    shard: the run reports each failed shard itself, with its cause, in run.log and on stderr; a full disk would
    otherwise print a traceback per shard. Other tasks' failures are left as Dask logs them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("Compute Failed"):
            return True
        args = record.args if isinstance(record.args, tuple) else ()
        return not (args and str(args[0]).startswith("shard-"))


class QuietShardFailuresPlugin(WorkerPlugin):
    """Puts :class:`ShardFailuresReportedOnce` on the ``distributed.worker`` logger of every worker, present and
    future (a worker thread of this process included: its records reach this process's handlers)."""

    name = "spec-vetting-quiet-shard-failures"

    def setup(self, worker) -> None:
        logger = logging.getLogger("distributed.worker")
        if not any(isinstance(f, ShardFailuresReportedOnce) for f in logger.filters):
            logger.addFilter(ShardFailuresReportedOnce())


def forward_worker_logs(client, level: int | None = None) -> int | None:
    """Forward the workers' ``spec_vetting`` records at ``level`` (default: this process's effective level).

    Not when a worker runs in this very process (threads of a LocalCluster started here): its records already
    reach this process's handlers, and a forwarding handler there would hand them back again. Returns the level
    forwarded, None when nothing is.
    """
    if os.getpid() in set((client.run(os.getpid) or {}).values()):
        return None
    if level is None:
        level = logging.getLogger(PACKAGE_LOGGER).getEffectiveLevel()
    client.register_plugin(LogLevelPlugin(level), name=LogLevelPlugin.name)
    client.forward_logging(PACKAGE_LOGGER, level=level)
    return level


def _connect(cfg: ClusterConfig):
    from distributed import Client

    if cfg.scheduler_file:
        return Client(scheduler_file=cfg.scheduler_file)
    return Client(cfg.scheduler_address)


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
    """Yields ``(client, n_workers, note)``; closes what it started.

    Shards may run on any worker of a running cluster: the in-flight cap is held by the run's Dask semaphores
    (:mod:`.slots`), not by the choice of workers, so workers may join, leave or be replaced mid-run.
    """
    from distributed import Client, LocalCluster

    quiet_dask_logs()
    if cfg.remote:
        client = _connect(cfg)
        try:
            client.register_plugin(QuietShardFailuresPlugin(), name=QuietShardFailuresPlugin.name)
            forward_worker_logs(client)
            n = len(client.nthreads()) or 1
            log.info("Dask scheduler %s: %d workers", client.scheduler.address, n)
            yield client, n, None
        finally:
            client.close()
        return
    n, note = plan_workers(cfg, n_shards, engine_cap)
    address = dashboard_address(cfg.dashboard is not False)
    with _children_ignore_sigint():
        cluster = LocalCluster(
            n_workers=n,
            threads_per_worker=cfg.threads_per_worker,
            processes=cfg.processes,
            memory_limit=cfg.memory_limit or "auto",
            dashboard_address=address,
            silence_logs=False if dask_logging_configured() else logging.ERROR,
        )
    try:
        client = Client(cluster)
        try:
            client.register_plugin(QuietShardFailuresPlugin(), name=QuietShardFailuresPlugin.name)
            if cfg.processes:  # threads share this process's loggers: nothing to forward
                forward_worker_logs(client)
            log.info("Dask LocalCluster: %d worker %s x %d threads, dashboard %s", n,
                     "processes" if cfg.processes else "threads", cfg.threads_per_worker, address or "off")
            yield client, n, note
        finally:
            client.close()
    finally:
        cluster.close()

