"""What a reader sees when a run is killed at each named step of its end, before and after recovery (issue 34).

A root holds one finished night (2026-11-01, 5 candidates x 2 tasks, merged into its month's files); the second
night (5 candidates, 2 of them again) is started with ``SPEC_VETTING_STOP_AT=<step>`` and its process group gets
SIGKILL when it stops there. For each step the table gives, before and after ``spec-vet catalog compact``:

- ``spec-vet`` readers: the second run's verdict rows as ``read_verdicts`` returns them (of 10);
- ``pyarrow``: the same counted from a plain ``pyarrow.dataset`` of ``verdicts/`` (``_`` names skipped), with the
  rows it sees twice;
- ``current``: pairs of current/ whose row is the second run's (of 10);
- the manifest's status, and the files the step left that readers skip (``_tmp-``) or that recovery removes.

    .venv/bin/python benchmarks/merge_crash_points.py            # prints the markdown table
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pyarrow.dataset as ds
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from spec_vetting.catalog.crash_points import STEPS, STOP_AT_ENV  # noqa: E402
from spec_vetting.catalog.read import read_current, read_verdicts  # noqa: E402

NIGHTS = {"2026-11-01": range(0, 5), "2026-11-02": range(3, 8)}
CMD = [sys.executable, "-m", "spec_vetting"]


def spec_vet(args, env, stop_at=None):
    env = {k: v for k, v in env.items() if k != STOP_AT_ENV} | ({STOP_AT_ENV: stop_at} if stop_at else {})
    proc = subprocess.Popen(CMD + [str(a) for a in args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, text=True)
    if stop_at:
        _, status = os.waitpid(proc.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status), stop_at
        os.killpg(proc.pid, signal.SIGKILL)
    out, err = proc.communicate()
    return proc.returncode, out, err


def look(root: Path, run_id: str) -> str:
    ours = sum(1 for r in read_verdicts(root, columns=["run_id"]).column("run_id").to_pylist() if r == run_id)
    rows = ds.dataset(root / "verdicts", format="parquet").to_table(
        columns=["run_id", "candidate_id", "task"]).to_pylist()
    keys = Counter((r["run_id"], r["candidate_id"], r["task"]) for r in rows)
    plain = sum(n for k, n in keys.items() if k[0] == run_id)
    twice = sum(n - 1 for n in keys.values() if n > 1)
    cur = sum(1 for r in read_current(root, columns=["run_id"]).column("run_id").to_pylist() if r == run_id)
    status = json.loads((root / "_runs" / run_id / "manifest.json").read_text())["status"]
    skipped = sum(1 for p in root.rglob("*") if p.name.startswith(("_tmp-", "_merging-")))
    own = sum(1 for t in ("verdicts", "turns") for _ in (root / t).glob(f"????-??-??/part-{run_id}-*.parquet"))
    return f"{ours} | {plain}{f' ({twice} twice)' if twice else ''} | {cur} | {status} | {skipped} | {own}"


def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="merge-crash-"))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop(STOP_AT_ENV, None)
    assert spec_vet(["make-examples", base / "ex", "--n", 9, "--seed", 3], env)[0] == 0
    header, *rows = (base / "ex" / "candidates.csv").read_text().strip().splitlines()
    keep = [i for i, c in enumerate(header.split(",")) if c != "task"]
    jobs = {}
    for night, picks in NIGHTS.items():
        lst = base / "ex" / f"night-{night}.csv"
        lst.write_text("\n".join(",".join(r.split(",")[i] for i in keep) for r in [header, *[rows[k] for k in picks]])
                       + "\n")
        jobs[night] = {"candidates": [str(lst)], "tasks": ["cv", "wd"], "out": None, "engine": {"name": "rules"},
                       "shard_size": 2, "run_date": night, "merge_small_nights": True,
                       "cluster": {"processes": False, "workers": 1, "dashboard": False}}
    first = base / "first"
    job = base / "job.yaml"
    job.write_text(yaml.safe_dump({**jobs["2026-11-01"], "out": str(first)}))
    assert spec_vet(["run", job], env)[0] == 0
    print("| killed at | spec-vet readers | pyarrow dataset | current/ | manifest | `_` files | own files "
          "| after `catalog compact`: readers | pyarrow | current/ | manifest | `_` files | own files |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for step in STEPS + ("merge:switched#3",):
        root = base / step.replace(":", "_").replace("#", "_")
        shutil.copytree(first, root)
        job.write_text(yaml.safe_dump({**jobs["2026-11-02"], "out": str(root)}))
        rc, _, err = spec_vet(["run", job], env, stop_at=step)
        assert rc == -signal.SIGKILL, err
        [run_id] = [d.name for d in (root / "_runs").iterdir()
                    if d.is_dir() and json.loads((d / "manifest.json").read_text())["run_date"] == "2026-11-02"]
        before = look(root, run_id)
        rc, _, err = spec_vet(["catalog", "compact", root], env)
        assert rc == 0, err
        print(f"| `{step}` | {before} | {look(root, run_id)} |")
    shutil.rmtree(base)


if __name__ == "__main__":
    main()
