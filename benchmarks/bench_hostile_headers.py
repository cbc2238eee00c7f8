"""A night's list with rows on hostile FITS headers (issue 34, item 6): wall time, peak memory of the run's
processes, and one ERROR row per hostile row.

The issue's case: 10,000 rows, 999 of them on one 2880-byte file whose header says BITPIX = 70 nines, NAXIS =
99999999, NAXIS1 = -5 (before: 24 s and 0.94 GB per read, a worker at 12.4 GB after 10 minutes). The good rows
name the example spectra (`spec-vet make-examples`), many rows per file, task cv, rules engine (CPU).
``--blocking N`` adds N rows on a regular file whose open blocks in the kernel (a write lease held by this script,
tests/read_blockers.py), ``--bomb N`` N rows on a gzip bomb (1.6 GB of zeros in 1.6 MB); ``--read-processes 0``
reads in the workers themselves (the thread path) for comparison.

Peak memory: the largest RSS of any process of the run (RUSAGE_CHILDREN: the run, its Dask workers and their
reader processes, each waited for by its parent), and each process's own peak (VmHWM) sampled every 0.1 s from
/proc, by role (run, worker, reader).

    .venv/bin/python benchmarks/bench_hostile_headers.py --rows 10000 --hostile 999
    .venv/bin/python benchmarks/bench_hostile_headers.py --rows 2000 --hostile 999 --blocking 100 --bomb 100
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow.dataset as ds
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from read_blockers import leased, write_gzip_bomb  # noqa: E402

CARDS = ["SIMPLE  =                    T", "BITPIX  = " + "9" * 70, "NAXIS   =             99999999",
         "NAXIS1  =                   -5"]


def _role(pid: str) -> str | None:
    cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    if b"read_child" in cmd:
        return "reader"
    if b"spawn_main" in cmd:  # a Dask worker process (multiprocessing's resource tracker is not one)
        return "worker"
    if b"spec_vetting" in cmd:
        return "run"
    return None


def sample_peaks(marker: str, stop: threading.Event, peaks: dict) -> None:
    """Each live process whose environment carries ``marker``: its peak RSS (VmHWM, MB) into peaks[role][pid]."""
    while not stop.is_set():
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                if marker.encode() not in (proc / "environ").read_bytes():
                    continue
                role = _role(proc.name)
                hwm = next(int(ln.split()[1]) for ln in (proc / "status").read_text().splitlines()
                           if ln.startswith("VmHWM"))
            except (OSError, StopIteration):
                continue
            if role:
                by_pid = peaks.setdefault(role, {})
                by_pid[proc.name] = max(by_pid.get(proc.name, 0), hwm / 1e3)
        stop.wait(0.1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--hostile", type=int, default=999)
    ap.add_argument("--blocking", type=int, default=0, help="rows on a file whose open blocks (a held lease)")
    ap.add_argument("--bomb", type=int, default=0, help="rows on a gzip bomb")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--read-timeout", type=float, default=5.0)
    ap.add_argument("--read-processes", type=int, default=None, help="default: the job's default")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="hostile-"))
    marker = f"bench-hostile-{os.getpid()}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "BENCH_MARKER": marker}
    cmd = [sys.executable, "-m", "spec_vetting"]
    subprocess.run(cmd + ["make-examples", str(base / "ex"), "--n", "20", "--seed", "3"], env=env, check=True,
                   capture_output=True)
    (base / "ex" / "hostile.fits").write_bytes(
        b"".join(c.ljust(80).encode() for c in [*CARDS, "END"]).ljust(2880, b" "))
    write_gzip_bomb(base / "ex" / "bomb.fits.gz")
    header, *examples = (base / "ex" / "candidates.csv").read_text().strip().splitlines()
    paths = [",".join(ln.split(",")[1:3]) for ln in examples]  # path and target
    rows = ["candidate_id,path,target,task,label"]
    n_bad = {"bad": (args.hostile, "hostile.fits"), "blocked": (args.blocking, "leased.fits"),
             "bomb": (args.bomb, "bomb.fits.gz")}
    for k in range(args.rows - sum(n for n, _ in n_bad.values())):
        rows.append(f"good-{k},{paths[k % len(paths)]},cv,")
    for prefix, (n, name) in n_bad.items():
        rows += [f"{prefix}-{k},{name},,cv," for k in range(n)]
    (base / "ex" / "night.csv").write_text("\n".join(rows) + "\n")
    budgets = {"read_timeout_s": args.read_timeout}
    if args.read_processes is not None:
        budgets["read_processes"] = args.read_processes
    job = base / "job.yaml"
    job.write_text(yaml.safe_dump({
        "candidates": [str(base / "ex" / "night.csv")], "tasks": ["cv"], "out": str(base / "cat"),
        "engine": {"name": "rules"}, "budgets": budgets,
        "cluster": {"workers": args.workers, "dashboard": False}}))
    peaks: dict = {}
    stop = threading.Event()
    sampler = threading.Thread(target=sample_peaks, args=(marker, stop, peaks), daemon=True)
    sampler.start()
    with leased(base / "ex" / "leased.fits") if args.blocking else contextlib.nullcontext():
        t0 = time.monotonic()
        r = subprocess.run(cmd + ["run", str(job)], env=env, capture_output=True, text=True)
        wall = time.monotonic() - t0
    stop.set()
    sampler.join()
    assert r.returncode == 0, r.stderr[-2000:]
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e3
    got = ds.dataset(base / "cat" / "verdicts", format="parquet").to_table(
        columns=["candidate_id", "verdict", "error_kind"]).to_pylist()
    readers = "default" if args.read_processes is None else args.read_processes
    print(f"{args.rows} rows ({args.hostile} hostile header, {args.blocking} blocking, {args.bomb} gzip bomb), "
          f"{args.workers} workers, read_processes {readers}"
          f": {wall:.1f} s wall, peak RSS of the largest process {peak:.0f} MB, {len(got)} rows")
    for role, by_pid in sorted(peaks.items()):
        print(f"  {role}: {len(by_pid)} processes, peak RSS (VmHWM) each: "
              f"{', '.join(f'{v:.0f}' for v in sorted(by_pid.values(), reverse=True)[:8])} MB")
    for prefix, (n, _) in n_bad.items():
        bad = [x for x in got if x["candidate_id"].startswith(f"{prefix}-")]
        assert len(bad) == n and all(x["verdict"] == "ERROR" for x in bad), prefix
        if n:
            print(f"  {prefix}: {n} ERROR rows ({sorted({x['error_kind'] for x in bad})})")
    good = [x for x in got if x["candidate_id"].startswith("good-")]
    print(f"  good: {len(good)} rows, {sum(x['verdict'] == 'ERROR' for x in good)} ERROR")


if __name__ == "__main__":
    main()
