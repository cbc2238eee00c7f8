"""Start a Dask cluster of CPU workers through dask-jobqueue and keep it alive while spec-vet runs.

Workers decode FITS and render pictures; the GPUs sit behind the SGLang endpoints, not in Dask.
Writes the scheduler address to --address-file for `spec-vet run --scheduler`. Needs `pip install dask-jobqueue`
(not a dependency of spec-vetting: only SLURM sites need it).
"""

from __future__ import annotations

import argparse
import signal
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=4, help="number of SLURM jobs of workers")
    parser.add_argument("--cores", type=int, default=8, help="cores per job")
    parser.add_argument("--memory", default="32GB", help="memory per job")
    parser.add_argument("--queue", default="cpu", help="SLURM partition for the workers")
    parser.add_argument("--walltime", default="12:00:00")
    parser.add_argument("--address-file", required=True, type=Path)
    args = parser.parse_args()

    from dask_jobqueue import SLURMCluster  # imported here so --help works without it

    # one process per job with several threads: rendering holds the GIL less than decoding, and each process
    # keeps its own matplotlib state
    cluster = SLURMCluster(
        cores=args.cores,
        processes=max(1, args.cores // 4),
        memory=args.memory,
        queue=args.queue,
        walltime=args.walltime,
    )
    cluster.scale(jobs=args.jobs)
    args.address_file.write_text(cluster.scheduler_address + "\n")
    print(f"dask scheduler {cluster.scheduler_address}, dashboard {cluster.dashboard_link}", flush=True)

    stop = False

    def on_signal(*_):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while not stop:
        time.sleep(1)
    cluster.close()
    args.address_file.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
