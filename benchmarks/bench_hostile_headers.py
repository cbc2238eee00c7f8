"""A night's list with rows on hostile FITS headers (issue 34, item 6): wall time, peak memory of the run's
processes, and one ERROR row per hostile row.

The issue's case: 10,000 rows, 999 of them on one 2880-byte file whose header says BITPIX = 70 nines, NAXIS =
99999999, NAXIS1 = -5 (before: 24 s and 0.94 GB per read, a worker at 12.4 GB after 10 minutes). The good rows
name the example spectra (`spec-vet make-examples`), many rows per file, task cv, rules engine (CPU).

    .venv/bin/python benchmarks/bench_hostile_headers.py --rows 10000 --hostile 999
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.dataset as ds
import yaml

REPO = Path(__file__).resolve().parents[1]
CARDS = ["SIMPLE  =                    T", "BITPIX  = " + "9" * 70, "NAXIS   =             99999999",
         "NAXIS1  =                   -5"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--hostile", type=int, default=999)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="hostile-"))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "spec_vetting"]
    subprocess.run(cmd + ["make-examples", str(base / "ex"), "--n", "20", "--seed", "3"], env=env, check=True,
                   capture_output=True)
    (base / "ex" / "hostile.fits").write_bytes(
        b"".join(c.ljust(80).encode() for c in [*CARDS, "END"]).ljust(2880, b" "))
    header, *examples = (base / "ex" / "candidates.csv").read_text().strip().splitlines()
    paths = [ln.split(",")[1] for ln in examples]
    rows = ["candidate_id,path,target,task,label"]
    for k in range(args.rows - args.hostile):
        rows.append(f"good-{k},{paths[k % len(paths)]},,cv,")
    rows += [f"bad-{k},hostile.fits,,cv," for k in range(args.hostile)]
    (base / "ex" / "night.csv").write_text("\n".join(rows) + "\n")
    job = base / "job.yaml"
    job.write_text(yaml.safe_dump({
        "candidates": [str(base / "ex" / "night.csv")], "tasks": ["cv"], "out": str(base / "cat"),
        "engine": {"name": "rules"}, "cluster": {"workers": args.workers, "dashboard": False}}))
    t0 = time.monotonic()
    r = subprocess.run(cmd + ["run", str(job)], env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    assert r.returncode == 0, r.stderr[-2000:]
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e3
    got = ds.dataset(base / "cat" / "verdicts", format="parquet").to_table(
        columns=["candidate_id", "verdict", "error_kind"]).to_pylist()
    bad = [x for x in got if x["candidate_id"].startswith("bad-")]
    assert len(bad) == args.hostile and all(x["verdict"] == "ERROR" for x in bad)
    print(f"{args.rows} rows ({args.hostile} on the hostile header), {args.workers} workers: {wall:.1f} s wall, "
          f"peak RSS of the largest process {peak:.0f} MB, {len(got)} rows, {len(bad)} ERROR rows on the hostile file "
          f"({sorted({x['error_kind'] for x in bad})})")


if __name__ == "__main__":
    main()
