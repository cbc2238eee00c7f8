"""What reading in killable reader processes costs (issue 34, item 6): a reader's start-up, one read in a reader
against the same read in this process, and a shard of rules-engine inspections with 0 (threads in the worker), 1
and 2 reader processes.

The spectra are the examples of `spec-vet make-examples` (LAMOST, SDSS, DESI; plain and gzip). Reads: each file
read ``--reads`` times in turn, one at a time, in this process (`read_candidate_file`) and through a
one-process :class:`~spec_vetting.io.read_pool.ReaderPool`; the difference per read is the reader's overhead
(pickling the request and the spectrum, two pipe hops, two thread hand-overs). Shard: every example x ``--repeat``
as its own candidate (so each is read), task cv, rules engine, ``run_shard_async`` (one loop, ``concurrency`` 8),
after a warm-up shard that starts the readers.

    .venv/bin/python benchmarks/bench_read_processes.py --reads 20 --repeat 10
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _median_ms(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def bench_reads(cands, reads: int) -> None:
    from spec_vetting.io.candidate import read_candidate_file
    from spec_vetting.io.read_pool import ReaderPool

    pool = ReaderPool(processes=1)
    try:
        t0 = time.perf_counter()
        pool.submit(os.getpid, (), key="start", timeout_s=60).result()
        print(f"reader start-up: {pool.start_times[0] * 1e3:.0f} ms (first call answered after "
              f"{(time.perf_counter() - t0) * 1e3:.0f} ms)")
        starts = []
        for _ in range(5):  # fresh children: each start measured
            p = ReaderPool(processes=1)
            p.submit(os.getpid, (), key="s", timeout_s=60).result()
            starts.append(p.start_times[0])
            p.close()
        print(f"  5 more starts: {', '.join(f'{s * 1e3:.0f}' for s in starts)} ms")
        empty = _median_ms(lambda: pool.submit(int, ("1",), key="e", timeout_s=60).result(), 200)
        print(f"empty call round trip: {empty:.2f} ms")
        print("| file | pixels | in process (ms) | in a reader (ms) | overhead (ms) |")
        print("|---|---:|---:|---:|---:|")
        seen = set()
        for c in cands:
            if c.path in seen:
                continue
            seen.add(c.path)
            args = (c.path, c.target, c.redrock)
            n_pix = len(read_candidate_file(*args))
            here = _median_ms(lambda a=args: read_candidate_file(*a), reads)
            there = _median_ms(lambda a=args: pool.submit(read_candidate_file, a, key=a[0], timeout_s=60).result(),
                               reads)
            print(f"| {Path(c.path).name} | {n_pix} | {here:.2f} | {there:.2f} | {there - here:+.2f} |")
    finally:
        pool.close()


def bench_shard(cands, repeat: int, tmp: Path) -> None:
    from spec_vetting.io.candidate import Candidate
    from spec_vetting.pipeline.plan import WorkItem
    from spec_vetting.pipeline.shard import ShardSpec, run_shard_async
    from spec_vetting.types import Sampling

    many = [Candidate(candidate_id=f"{c.candidate_id}-{k}", path=c.path, target=c.target)
            for k in range(repeat) for c in cands]
    items = [WorkItem(c, "cv") for c in many]
    for processes in (0, 1, 2, 0, 1, 2):
        spec = ShardSpec(root=str(tmp / f"shard-{processes}"), run_id="bench", run_date="2026-01-01",
                         shard_id="s0", items=items, engine_name="rules", engine_options={}, sampling=Sampling(),
                         read_processes=processes)
        asyncio.run(run_shard_async(ShardSpec(**{**spec.__dict__, "items": items[:8], "shard_id": "warm"})))
        c0, w0 = time.process_time(), time.perf_counter()
        out = asyncio.run(run_shard_async(spec))
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        assert out["n"] == len(items) and not out["errors"], out["errors"]
        print(f"shard of {len(items)} rules inspections, read_processes {processes}: {wall:.2f} s wall "
              f"({wall / len(items) * 1e3:.1f} ms each), {cpu:.2f} CPU s in the worker process")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reads", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    from spec_vetting.io.candidates import load_candidates

    tmp = Path(tempfile.mkdtemp(prefix="bench-readers-"))
    subprocess.run([sys.executable, "-m", "spec_vetting", "make-examples", str(tmp / "ex"), "--n", "20", "--seed",
                    "3"], check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    cands = load_candidates(tmp / "ex" / "candidates.csv")
    bench_reads(cands, args.reads)
    bench_shard(cands, args.repeat, tmp)


if __name__ == "__main__":
    main()
