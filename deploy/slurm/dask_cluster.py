"""Start a Dask cluster of CPU workers through dask-jobqueue and keep it alive while spec-vet runs.

Workers decode FITS and render pictures; the GPUs sit behind the SGLang endpoints, not in Dask.
The scheduler writes Dask's own scheduler file (--scheduler-file, JSON with its address), which
`spec-vet run --scheduler-file FILE` (or Dask's `Client(scheduler_file=FILE)`) connects with.
The site's dask-jobqueue defaults (`~/.config/dask/jobqueue.yaml`, `/etc/dask/jobqueue.yaml`, `DASK_JOBQUEUE__SLURM__*`)
stay in force: only the options given here override them. Needs `pip install dask-jobqueue` (not a dependency of
spec-vetting: only SLURM sites need it).
"""

from __future__ import annotations

import argparse
import signal
import time
from pathlib import Path


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=4, help="number of SLURM jobs of workers (4)")
    p.add_argument("--cores", type=int, help="cores per job (default: the site's jobqueue.slurm.cores)")
    p.add_argument("--memory", help="memory per job, e.g. 32GB (default: the site's jobqueue.slurm.memory)")
    p.add_argument("--queue", help="SLURM partition for the workers (default: the site's jobqueue.slurm.queue)")
    p.add_argument("--walltime", help="walltime per job (default: the site's jobqueue.slurm.walltime)")
    p.add_argument("--scheduler-file", required=True, type=Path, help="Dask scheduler file to write")
    return p


def cluster_kwargs(args: argparse.Namespace, site_scheduler_options: dict | None = None) -> dict:
    """SLURMCluster keyword arguments: only what was given, so jobqueue.yaml supplies the rest.

    ``scheduler_options`` replaces the site's ``jobqueue.slurm.scheduler-options`` as a whole, so those are passed
    on with the scheduler file added.
    """
    kwargs = {k: v for k, v in (("cores", args.cores), ("memory", args.memory), ("queue", args.queue),
                                 ("walltime", args.walltime)) if v is not None}
    if args.cores is not None:
        # one process per 4 cores with several threads: rendering holds the GIL less than decoding, and each
        # process keeps its own matplotlib state
        kwargs["processes"] = max(1, args.cores // 4)
    kwargs["scheduler_options"] = {**(site_scheduler_options or {}), "scheduler_file": str(args.scheduler_file)}
    return kwargs


def main() -> None:
    args = parser().parse_args()

    import dask
    from dask_jobqueue import SLURMCluster  # imported here so --help works without it

    site = dask.config.get("jobqueue.slurm.scheduler-options", None) or {}
    cluster = SLURMCluster(**cluster_kwargs(args, site))
    cluster.scale(jobs=args.jobs)
    print(f"dask scheduler {cluster.scheduler_address} (scheduler file {args.scheduler_file}), "
          f"dashboard {cluster.dashboard_link}", flush=True)

    stop = False

    def on_signal(*_):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while not stop:
        time.sleep(1)
    cluster.close()
    args.scheduler_file.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
