"""Compaction alone: a run's staged parts compacted again and again, without the run around it.

The parts are staged once by a real `run_job` (bench_catalog's candidates, job and scripted engine; the runner's
compaction is replaced by a copy of the root, so the parts survive the run's end), kept under ``--root`` to be
reused by later calls. Each repetition copies the staged root to a fresh folder and times
:func:`spec_vetting.pipeline.compact.compact_run` on it (the runner also folds the run into current/; that is
not timed here).

    PYTHONPATH=$PWD /work/venvs/merged/bin/python benchmarks/bench_compact.py [--n 4000] [--tasks 5] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_catalog import _candidates, _job  # noqa: E402
from bench_pipeline import install_fast_render  # noqa: E402


def stage(staged: Path, n: int, n_tasks: int, shard_size: int) -> dict:
    """A run of ``n`` x ``n_tasks`` inspections whose root (parts, markers, manifest) is copied to ``staged`` at
    the moment the runner would compact it; returns the compaction's arguments."""
    from spec_vetting.inspect.tasks import builtin_tasks
    from spec_vetting.pipeline import runner

    work = staged.with_name(staged.name + "-run")
    shutil.rmtree(work, ignore_errors=True)
    install_fast_render(staged.parent)
    tasks = [t.key for t in builtin_tasks()][:n_tasks]
    cands = _candidates(n)
    runner.load_all_candidates = lambda sources: cands
    args = {}

    def snapshot(root, run_id, run_date, done):
        shutil.copytree(root, staged)
        args.update(run_id=run_id, run_date=run_date, done=sorted(done))
        return {"files": {}, "rows": {}}

    runner.compact_and_update = snapshot
    runner.run_job(_job(work / "cat", tasks, shard_size=shard_size), progress=False, echo=lambda s: None)
    shutil.rmtree(work, ignore_errors=True)
    (staged / "_bench_args.json").write_text(json.dumps(args))
    return args


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4000, help="candidates (x tasks = inspections)")
    ap.add_argument("--tasks", type=int, default=5)
    ap.add_argument("--shard-size", type=int, default=100)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--root", help="keep the staged run here and reuse it (default: a temporary folder)")
    args = ap.parse_args()

    from spec_vetting.pipeline.compact import compact_run

    base = Path(args.root) if args.root else Path(tempfile.mkdtemp(prefix="bench-compact-"))
    base.mkdir(parents=True, exist_ok=True)
    staged = base / f"staged-{args.n}x{args.tasks}-{args.shard_size}"
    if (staged / "_bench_args.json").is_file():
        run = json.loads((staged / "_bench_args.json").read_text())
    else:
        t0 = time.perf_counter()
        run = stage(staged, args.n, args.tasks, args.shard_size)
        print(f"staged in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    n_parts = sum(1 for _ in (staged / "_runs" / run["run_id"] / "parts").rglob("*.parquet"))
    walls = []
    for k in range(args.reps):
        root = base / f"rep-{k}"
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(staged, root)
        t0 = time.perf_counter()
        stats = compact_run(root, run["run_id"], run["run_date"], set(run["done"]))
        walls.append(round(time.perf_counter() - t0, 3))
        shutil.rmtree(root)
    print(json.dumps({"inspections": args.n * args.tasks, "part_files": n_parts, "compaction_wall_s": walls,
                      "best_s": min(walls), "per_part_ms": round(min(walls) / n_parts * 1e3, 3),
                      "rows": stats["rows"], "files": stats["files"]}, indent=2))


if __name__ == "__main__":
    main()
