"""A year of small nights: does a night cost more as the catalog's history grows?

Makes the history with real runs, one per night: the pipeline's ``run_job`` (what ``spec-vet run`` calls) with the
rules engine and the real renderer, on a threads LocalCluster (one worker, so every CPU second is this process's),
over a tiny candidate list per night (``--per-night`` new candidates, all with the same few example files, plus one
candidate vetted again every night, so the fold into current/ replaces rows as well as adding them), tasks cv and wd,
each night with its own run_date. Per night: CPU seconds (user+sys of this process) and wall time of the whole run,
and the wall time of its compaction + fold. At each checkpoint: files and bytes under the root, current/ row groups,
and the CPU of the fold alone (the latest run folded again: it is idempotent), of ``catalog compact`` with nothing
to do, of ``catalog summary`` and of reading the latest run (evaluation's ``read_run_table``).

    PYTHONPATH=. python benchmarks/bench_history.py [--nights 60] [--checkpoints 5 30 60] [--root DIR] [--json F]

The night cost at a checkpoint is the median of the nights around it (checkpoint-2 .. checkpoint+2), since the
machine is shared. Run the same command with PYTHONPATH pointing at an older tree to compare.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measure(fn):
    c0, w0 = cpu_s(), time.perf_counter()
    out = fn()
    return out, round(cpu_s() - c0, 3), round(time.perf_counter() - w0, 3)


def example_files(folder: Path) -> list[str]:
    from spec_vetting.synthetic.examples import write_examples

    rows = write_examples(folder, n=8, seed=3)
    # files that need nothing but their path (DESI coadds need a target id)
    return [str(folder / r["path"]) for r in rows if not r.get("target") and r["path"].endswith((".fits", ".gz"))]


def night_list(folder: Path, night: int, per_night: int, files: list[str]) -> Path:
    path = folder / f"night-{night:04d}.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["candidate_id", "path"])
        w.writerow(["again-0", files[0]])  # vetted every night: its current row is replaced
        for j in range(per_night):
            w.writerow([f"n{night:04d}-{j}", files[(night + j) % len(files)]])
    return path


def tree(root: Path) -> dict:
    import pyarrow.parquet as pq

    files = [p for p in root.rglob("*.parquet") if "_runs" not in p.parts]
    current = sorted((root / "current").glob("*.parquet"))
    return {
        "files": len(files),
        "bytes": sum(p.stat().st_size for p in files),
        "current_row_groups": {p.stem: pq.ParquetFile(p).metadata.num_row_groups for p in current},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nights", type=int, default=60)
    ap.add_argument("--per-night", type=int, default=2)
    ap.add_argument("--checkpoints", type=int, nargs="+", default=[5, 30, 60])
    ap.add_argument("--root", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    from spec_vetting.catalog.check import summarize_catalog
    from spec_vetting.catalog.current import update_current
    from spec_vetting.catalog.listing import latest_run_id
    from spec_vetting.catalog.read import read_run_table
    from spec_vetting.pipeline import job_from_dict, runner
    from spec_vetting.pipeline.compact import compact_root

    work = args.root or Path(tempfile.mkdtemp(prefix="bench-history-"))
    work.mkdir(parents=True, exist_ok=True)
    files = example_files(work / "examples")
    root = work / "cat"
    nights: list[dict] = []
    checks: list[dict] = []
    for night in range(1, args.nights + 1):
        job = job_from_dict({
            "candidates": [str(night_list(work, night, args.per_night, files))], "tasks": ["cv", "wd"],
            "out": str(root), "engine": {"name": "rules"},
            "run_date": (dt.date(2026, 1, 1) + dt.timedelta(days=night)).isoformat(),
            "cluster": {"processes": False, "workers": 1, "dashboard": False},
        })
        out, cpu, wall = measure(lambda job=job: runner.run_job(job, progress=False, echo=lambda s: None))
        assert out.status == "finished", out.failures
        nights.append({"night": night, "cpu_s": cpu, "wall_s": wall,
                       "fold_wall_s": out.summary["compaction"]["wall_s"], "rows": out.summary["n_verdicts"]})
        print(json.dumps(nights[-1]), flush=True)
        if night in args.checkpoints:
            _, compact_cpu, _ = measure(lambda: compact_root(root))
            _, summary_cpu, _ = measure(lambda: summarize_catalog(root))
            _, read_cpu, _ = measure(lambda: read_run_table(root, latest_run_id(root)))
            # the fold alone, again (it is idempotent): the part of a night that used to grow with the history
            folds = [measure(lambda r=out: update_current(root, r.run_id))[1] for _ in range(3)]
            checks.append({"night": night, **tree(root), "fold_cpu_s": statistics.median(folds),
                           "compact_noop_cpu_s": compact_cpu, "summary_cpu_s": summary_cpu,
                           "read_latest_run_cpu_s": read_cpu})
            print(json.dumps(checks[-1]), flush=True)

    def around(k: int, key: str) -> float | None:
        vals = [n[key] for n in nights if abs(n["night"] - k) <= 2]
        return round(statistics.median(vals), 3) if vals else None

    table = [{"night": c["night"], "night_cpu_s": around(c["night"], "cpu_s"),
              "fold_wall_s": around(c["night"], "fold_wall_s"), **c} for c in checks]
    first = table[0]["night_cpu_s"]
    print("\n| night | night CPU s (median of 5) | compaction+fold wall s | fold CPU s | files | MB | current row "
          "groups | compact (nothing to do) CPU s | summary CPU s | read latest run CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for t in table:
        rg = max(t["current_row_groups"].values()) if t["current_row_groups"] else 0
        print(f"| {t['night']} | {t['night_cpu_s']} ({t['night_cpu_s'] / first:.2f}x) | {t['fold_wall_s']} | "
              f"{t['fold_cpu_s']} | "
              f"{t['files']} | {t['bytes'] / 1e6:.2f} | {rg} | {t['compact_noop_cpu_s']} | {t['summary_cpu_s']} | "
              f"{t['read_latest_run_cpu_s']} |")
    if args.json:
        args.json.write_text(json.dumps({"nights": nights, "checkpoints": table, "pid": os.getpid()}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
