"""The catalog at survey scale: files, bytes, run cost and query times of one night, extrapolated.

N candidates x T tasks through the pipeline's `run_job` (what `spec-vet run` calls; threads LocalCluster, one
worker, shards of 100 pairs) with a scripted engine (one zoom, then an answer whose verdict and p_yes vary per pair
as a model's would, 1 % failed requests: :func:`varied_reply`), pictures replaced by a constant PNG (rendering is
benchmarked in bench_render.py; pictures are stored by reference, so the catalog's bytes do not depend on them),
spectra in memory (inline candidates with ra/dec and labels). Then, each in a fresh process (wall time and the
process's own peak RSS, VmHWM): `spec-vet catalog summary`, `eval --json`, `review-queue` (and at threshold 1.0,
which queues nearly every row), `report`, `export verl` (and `export sft` up to 50k candidates), `catalog export
--current` as Parquet and FITS, the incremental start (which of the next night's pairs are vetted: N + 10 % new
candidates), and three DuckDB queries over the compacted files (count by task; YES rows of one task with ra/dec;
one candidate's turns), plus the same count over current/.

    PYTHONPATH=. python benchmarks/bench_catalog.py [--n 4000] [--tasks 5] [--scale-to 0] [--root DIR] [--json F]
    PYTHONPATH=. python benchmarks/bench_catalog.py --full --scale-to 0 --root DIR  # 200k x 5: ~50 min, 2 cores
    PYTHONPATH=. python benchmarks/bench_catalog.py --measure DIR/cat --n 200000   # the readers again, on a kept root

``--scale-to M`` also copies the night's files to M candidates (new ids, same layout) and measures the readers
there, a cheap stand-in for a big night. Extrapolation to 1M x 5 per night: bytes and CPU linear in rows; files per
run are 2 x tasks (+ current/, one per task) whatever the row count; query times scaled linearly by rows from the
measured ones (conservative: DuckDB's scans are sub-linear at these sizes because the fixed cost per file
dominates).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pipeline import install_fast_render  # noqa: E402

SCRIPT = [
    '<think>zoom</think>\n<tool_call>\n{"name": "spectral_visualization_tool", "arguments": '
    '{"wavelength_range": [6500, 6620]}}\n</tool_call>',
    "<think>ok</think>\n<answer>\\boxed{YES} broad lines, a typical justification of a few words</answer>",
]


def varied_reply(messages, ctx, turn):
    """SCRIPT's two turns, with a verdict and p_yes that vary per (candidate, task) as a model's would: 85 % sure
    (p_yes < 0.1 or > 0.9), 14 % in between (the review queue), 1 % a failed request (an ERROR row)."""
    import zlib

    from spec_vetting.errors import EngineError
    from spec_vetting.types import EngineReply, Usage

    h = zlib.crc32(f"{ctx.candidate_id}/{ctx.task}".encode()) / 2**32
    if turn == 0:
        if h < 0.01:
            raise EngineError("benchmark: a request that failed", kind="server_error")
        return SCRIPT[0]
    p = h * 0.1 if h < 0.5 else 0.9 + (h - 0.5) * 0.2 if h < 0.93 else 0.2 + (h - 0.93) / 0.07 * 0.6
    text = SCRIPT[1] if p >= 0.5 else SCRIPT[1].replace("YES", "NO")
    return EngineReply(text=text, usage=Usage(prompt_tokens=None, completion_tokens=len(text) // 4), p_yes=p,
                       endpoint="scripted")


def _varied_script_class():
    from spec_vetting.engines.scripted import ScriptedEngine

    class VariedScript(ScriptedEngine):
        """The scripted engine with :func:`varied_reply`; the same identity as ``scripted`` with SCRIPT."""

        def __init__(self):
            super().__init__(varied_reply, p_yes_source="logprobs")

    return VariedScript


def __getattr__(name):  # the job names the engine "bench_catalog:VariedScript"; built when first asked for
    if name == "VariedScript":
        return _varied_script_class()
    raise AttributeError(name)


def _candidates(n: int, start: int = 0):
    import numpy as np

    from spec_vetting.io.candidate import Candidate, InlineSpectrum
    from spec_vetting.synthetic.synthetic import make_spectrum

    base = make_spectrum("cv", seed=1)
    inline = InlineSpectrum(wavelength=base.wavelength, flux=base.flux, redshift=0.0)
    rng = np.random.default_rng(start)
    ra, dec = rng.uniform(0, 360, n), np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
    return [Candidate(candidate_id=f"b-{start + i:07d}", ra=float(ra[i]), dec=float(dec[i]),
                      label="YES" if i % 3 == 0 else "NO", inline=inline) for i in range(n)]


def _job(root: Path, tasks: list[str], **kw):
    from spec_vetting.pipeline import job_from_dict

    return job_from_dict({"candidates": ["inline"], "tasks": tasks, "out": str(root),
                          "engine": {"name": "bench_catalog:VariedScript"},
                          "cluster": {"processes": False, "workers": 1, "dashboard": False}, **kw})


def _measured(code: str, env: dict) -> dict:
    """Run ``code`` (Python) in a fresh process; its wall time and peak RSS (MB), plus what it prints as JSON; a
    failure is recorded as {"error": ...} and the other measurements go on.

    The peak is the process's own VmHWM (/proc/self/status): ``getrusage``'s ru_maxrss carries the parent's peak
    over fork and exec, so every child of the benchmark (which holds the night's candidates) read as big as it."""
    wrapper = (
        "import json, time\n_t0 = time.perf_counter()\n_out = {}\n" + code +
        "\n_hwm = [ln for ln in open('/proc/self/status') if ln.startswith('VmHWM:')][0].split()[1]\n"
        "_out.update(wall_s=round(time.perf_counter() - _t0, 3), rss_mb=round(int(_hwm) / 1024, 1))\n"
        "print(json.dumps(_out))\n"
    )
    try:
        r = subprocess.run([sys.executable, "-c", wrapper], env=env, capture_output=True, text=True, timeout=3600)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after 3600 s"}
    if r.returncode != 0:
        print(r.stderr[-3000:], file=sys.stderr)
        return {"error": r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"}
    return json.loads(r.stdout.strip().splitlines()[-1])


def _cli(args: list[str], env: dict) -> str:
    return ("import sys\nfrom spec_vetting.cli import main\nsys.argv = ['spec-vet'] + " + repr(args) + "\n"
            "import contextlib, io\n_buf = io.StringIO()\n"
            "with contextlib.redirect_stdout(_buf):\n"
            "    try:\n        main()\n    except SystemExit as e:\n        assert not e.code, e.code\n")


def _files_and_bytes(root: Path) -> dict:
    out = {}
    for table in ("verdicts", "turns", "current", "pictures"):
        files = [p for p in (root / table).rglob("*.parquet")] if (root / table).is_dir() else []
        out[table] = {"files": len(files), "bytes": sum(p.stat().st_size for p in files)}
    run_files = [p for p in (root / "_runs").rglob("*") if p.is_file()]
    out["_runs"] = {"files": len(run_files), "bytes": sum(p.stat().st_size for p in run_files)}
    return out


def replicate(src: Path, dst: Path, reps: int) -> None:
    """``src``'s compacted files copied ``reps`` times into one file per (table, task) under ``dst``, candidate
    ids suffixed ``-r<k>`` (what a night of reps x the candidates would hold); the run records too."""
    import shutil

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    shutil.copytree(src / "_runs", dst / "_runs")
    for table in ("verdicts", "turns", "current"):
        for f in sorted((src / table).rglob("*.parquet")):
            t = pq.read_table(f)
            out = dst / f.relative_to(src)
            out.parent.mkdir(parents=True, exist_ok=True)
            i = t.schema.get_field_index("candidate_id")
            with pq.ParquetWriter(out, t.schema, compression="zstd") as w:
                for k in range(reps):
                    ids = pc.binary_join_element_wise(t.column("candidate_id"), f"-r{k}", "")
                    w.write_table(t.set_column(i, t.schema.field(i), ids), row_group_size=128 * 1024)


def measure(root: Path, tasks: list[str], n: int, env: dict, tmp: Path, suffix=None) -> dict:
    """summary, eval, review-queue, export, incremental start and DuckDB queries on ``root``, each in a fresh
    process."""
    res = {}
    r = str(root)
    res["summary"] = _measured(_cli(["catalog", "summary", r], []), env)
    res["eval"] = _measured(_cli(["eval", r, "--json"], []), env)
    res["review_queue"] = _measured(_cli(["review-queue", r], []), env)
    res["review_queue_all_uncertain"] = _measured(_cli(["review-queue", r, "--threshold", "1.0"], []), env)
    res["report"] = _measured(_cli(["report", r, "-o", str(tmp / "report")], []), env)
    res["export_verl"] = _measured(_cli(["export", "verl", r, "-o", str(tmp / "rl.parquet")], []), env)
    if suffix is None and n <= 50_000:  # one SFT record and two PNG files per confirmed inspection
        res["export_sft"] = _measured(_cli(["export", "sft", r, "-o", str(tmp / "sft"), "--allow-non-model-traces"],
                                           []), env)
    res["export_current_parquet"] = _measured(
        _cli(["catalog", "export", r, "--current", "--format", "parquet", "-o", str(tmp / "cur.parquet")], []), env)
    res["export_current_fits"] = _measured(
        _cli(["catalog", "export", r, "--current", "--format", "fits", "-o", str(tmp / "cur.fits")], []), env)
    # the next night: these candidates plus 10 % new ones
    ids = f"[f'b-{{i:07d}}' for i in range({int(n * 1.1)})]"
    if suffix is not None:  # the scaled root: candidate ids b-<i>-r<k>
        base = int(os.environ.get("_BENCH_BASE_N", "0")) or n
        ids = (f"[f'b-{{i:07d}}-r{{k}}' for k in range({n // base}) for i in range({base})]"
               f" + [f'new-{{i}}' for i in range({n // 10})]")
    res["incremental_start"] = _measured(
        "from spec_vetting.pipeline.incremental import already_vetted\nfrom pathlib import Path\n"
        "from spec_vetting.inspect.tasks import get_task\n"
        f"tasks = {tasks!r}\nv = {{t: get_task(t).version for t in tasks}}\n"
        f"wanted = {{(c, t, v[t]) for c in {ids} for t in tasks}}\n"
        "from spec_vetting.engines import create_engine\n"
        f"ident = create_engine('scripted', replies={SCRIPT!r}).identity()\n"
        f"done = already_vetted(Path({r!r}), ident, None, wanted)\n_out['vetted'] = len(done)\n", env)
    one = f"b-{n // 2:07d}" if suffix is None else "b-0000001-r1"
    res["duckdb"] = _measured(
        "import duckdb\ncon = duckdb.connect()\n"
        f"v = {r!r} + '/verdicts/*/*.parquet'\nt = {r!r} + '/turns/*/*.parquet'\n"
        f"c = {r!r} + '/current/*.parquet'\n"
        "def q(sql):\n"
        "    t0 = time.perf_counter(); n = len(con.sql(sql).fetchall()); return round(time.perf_counter() - t0, 4), n\n"
        "_out['count_by_task_s'], _ = q(f\"SELECT task, count(*) FROM read_parquet('{v}') GROUP BY task\")\n"
        "_out['yes_one_task_radec_s'], _out['yes_rows'] = q(f\"SELECT candidate_id, ra, dec FROM read_parquet('{v}') "
        f"WHERE task = '{tasks[0]}' AND verdict = 'YES'\")\n"
        "_out['one_candidate_turns_s'], _out['turn_rows'] = "
        f"q(f\"SELECT * FROM read_parquet('{{t}}') WHERE candidate_id = '{one}'\")\n"
        "_out['current_count_by_task_s'], _ = "
        "q(f\"SELECT task, verdict, count(*) FROM read_parquet('{c}') GROUP BY ALL\")\n",
        env)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4000, help="candidates per night (x tasks = inspections)")
    ap.add_argument("--tasks", type=int, default=5)
    ap.add_argument("--shard-size", type=int, default=100)
    ap.add_argument("--full", action="store_true", help="200k candidates x 5 tasks")
    ap.add_argument("--scale-to", type=int, default=200_000,
                    help="also replicate the night's files to this many candidates (x tasks rows; new candidate "
                         "ids) and measure the readers and queries there; 0: skip")
    ap.add_argument("--root", help="keep the catalog here (default: a temporary folder)")
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument("--measure", metavar="CATALOG",
                    help="only measure the readers on this catalog root (a --root's cat/ or scaled/ folder), with "
                         "--n its candidates and --tasks its tasks")
    args = ap.parse_args()
    if args.full:
        args.n = 200_000

    tmp = Path(args.root) if args.root else Path(tempfile.mkdtemp(prefix="bench-catalog-"))
    tmp.mkdir(parents=True, exist_ok=True)
    install_fast_render(tmp)  # constant pictures here and in the query subprocesses (bench_pipeline's)
    env = dict(os.environ)

    from spec_vetting.inspect.tasks import builtin_tasks
    from spec_vetting.pipeline import runner

    tasks = [t.key for t in builtin_tasks()][: args.tasks]
    if args.measure:
        cat = Path(args.measure)
        scaled = cat.name == "scaled"
        if scaled:
            env["_BENCH_BASE_N"] = os.environ.get("_BENCH_BASE_N", "4000")
        res = {"root": str(cat), "layout": _files_and_bytes(cat),
               "measured": measure(cat, tasks, args.n, env, tmp, suffix=(lambda i, k: f"-r{k}") if scaled else None),
               "baseline_process": _measured("import spec_vetting.cli, pyarrow.dataset, duckdb\n", env)}
        print(json.dumps(res, indent=2))
        if args.json:
            Path(args.json).write_text(json.dumps(res, indent=2) + "\n")
        return
    root = tmp / "cat"
    cands = _candidates(args.n)
    runner.load_all_candidates = lambda sources: cands
    n_insp = args.n * len(tasks)
    os.environ["_BENCH_BASE_N"] = env["_BENCH_BASE_N"] = str(args.n)
    c0, w0 = time.process_time(), time.perf_counter()
    out = runner.run_job(_job(root, tasks, shard_size=args.shard_size), progress=False, echo=lambda s: None)
    run_wall, run_cpu = time.perf_counter() - w0, time.process_time() - c0
    assert out.status == "finished" and out.summary["n_verdicts"] == n_insp, out.summary
    n_shards = -(-n_insp // args.shard_size)
    layout = _files_and_bytes(root)
    res = {
        "n_candidates": args.n, "tasks": len(tasks), "inspections": n_insp, "shards": n_shards,
        "run_wall_s": round(run_wall, 2), "run_cpu_ms_per_inspection": round(run_cpu / n_insp * 1e3, 3),
        "run_wall_ms_per_inspection": round(run_wall / n_insp * 1e3, 3),
        "compaction_wall_s": out.summary["compaction"]["wall_s"],
        "layout": layout,
        "catalog_files_per_run": layout["verdicts"]["files"] + layout["turns"]["files"],
        "bytes_per_inspection": {t: round(layout[t]["bytes"] / n_insp, 1) for t in ("verdicts", "turns", "current")},
    }
    if args.json:  # the run's numbers are kept even if a measurement below fails
        Path(args.json).write_text(json.dumps(res, indent=2) + "\n")
    res["measured"] = measure(root, tasks, args.n, env, tmp)
    res["baseline_process"] = _measured("import spec_vetting.cli, pyarrow.dataset, duckdb\n", env)
    if args.scale_to and args.scale_to > args.n:
        big = tmp / "scaled"
        reps = -(-args.scale_to // args.n)
        t0 = time.perf_counter()
        replicate(root, big, reps)
        res["scaled"] = {"n_candidates": args.n * reps, "rows": n_insp * reps,
                         "build_s": round(time.perf_counter() - t0, 1), "layout": _files_and_bytes(big)}
        res["scaled"]["measured"] = measure(big, tasks, args.n * reps, env, tmp, suffix=lambda i, k: f"-r{k}")
    scale = 1_000_000 * 5 / n_insp
    res["extrapolated_1M_x_5"] = {
        "files_per_run": res["catalog_files_per_run"],
        "verdicts_GB": round(layout["verdicts"]["bytes"] * scale / 1e9, 2),
        "turns_GB": round(layout["turns"]["bytes"] * scale / 1e9, 2),
        "run_cpu_h": round(run_cpu * scale / 3600, 2),
    }
    if "scaled" in res:  # query times at the scaled size, linearly to 5M rows (an upper bound)
        f = 1_000_000 * 5 / res["scaled"]["rows"]
        m = res["scaled"]["measured"]
        res["extrapolated_1M_x_5"]["queries_s_linear_from_scaled"] = {
            k: round(v * f, 3) for k, v in m["duckdb"].items() if k.endswith("_s") and k != "wall_s"}
    print(json.dumps(res, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
