"""Pipeline benchmarks: overhead per inspection, and throughput against slow OpenAI-compatible servers.

1. Overhead: an engine that answers at once (scripted: one zoom, then the answer), rendering replaced by a constant
   PNG, spectra already in memory (inline candidates). CPU ms per inspection of the shard path (loop, rows,
   Parquet, markers) and of a whole `run_job` on a threads LocalCluster (Dask, manifest, progress included).
   Target: <= 5 ms per inspection.
2. Throughput: E fake servers (tests/fake_server.py) answering each request after D seconds, a cap of C in-flight
   inspections per endpoint over the cluster, 2 requests per inspection. The concurrency-limited rate is
   E*C / (2*D); achieved = inspections / (last end - first start) from the catalog's own timestamps. 1 and 2
   worker processes. Target: >= 90 % of the limit.

    .venv/bin/python benchmarks/bench_pipeline.py [--n 300] [--throughput-n 160] [--delay 0.25] [--json]
        [--tasks 5 --warm-prefix both]   # 5 tasks per candidate, with and without the warm-prefix order
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

FAST_RENDER = """
import io
from PIL import Image
_b = io.BytesIO()
Image.new("RGB", (4, 4), "white").save(_b, format="PNG")
import spec_vetting.inspect.zoom as _z
_z._default_renderer = lambda: (lambda *a, **k: _b.getvalue())
"""

SCRIPT = [
    '<think>zoom</think>\n<tool_call>\n{"name": "spectral_visualization_tool", "arguments": '
    '{"wavelength_range": [6500, 6620]}}\n</tool_call>',
    "<think>ok</think>\n<answer>\\boxed{YES} broad lines</answer>",
]


def install_fast_render(tmp: Path) -> None:
    """Constant pictures here and in every worker process (they import sitecustomize from PYTHONPATH)."""
    site = tmp / "_site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(FAST_RENDER)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(site), str(REPO), os.environ.get("PYTHONPATH", "")])
    exec(FAST_RENDER, {})


TASKS = ("cv", "carbon", "ss", "gm", "wd")


def _candidates(n: int, own_task: str | None = "cv"):
    from spec_vetting.io.candidate import Candidate, InlineSpectrum
    from spec_vetting.synthetic.synthetic import make_spectrum

    base = make_spectrum("cv", seed=1)
    return [
        Candidate(candidate_id=f"b-{i}", task=own_task, ra=10.0 + i * 1e-3, dec=5.0,
                  inline=InlineSpectrum(wavelength=base.wavelength, flux=base.flux, redshift=0.0))
        for i in range(n)
    ]


def bench_overhead(n: int, tmp: Path) -> dict:
    from spec_vetting.pipeline import job_from_dict, runner
    from spec_vetting.pipeline.plan import WorkItem
    from spec_vetting.pipeline.shard import ShardSpec, run_shard_async
    from spec_vetting.types import Sampling

    cands = _candidates(n)
    spec = ShardSpec(root=str(tmp / "shard"), run_id="bench", run_date="2024-01-01", shard_id="s0",
                     items=[WorkItem(c, "cv") for c in cands], engine_name="scripted",
                     engine_options={"replies": SCRIPT}, sampling=Sampling(), concurrency=32)
    asyncio.run(run_shard_async(ShardSpec(**{**spec.__dict__, "items": spec.items[:5], "shard_id": "warm"})))
    c0, w0 = time.process_time(), time.perf_counter()
    asyncio.run(run_shard_async(spec))
    shard_cpu_ms = (time.process_time() - c0) / n * 1e3
    shard_wall_ms = (time.perf_counter() - w0) / n * 1e3

    runner.load_all_candidates = lambda sources: cands
    job = job_from_dict({"candidates": ["inline"], "out": str(tmp / "job"), "engine": {"name": "scripted",
                         "options": {"replies": SCRIPT}}, "shard_size": 100,
                         "cluster": {"processes": False, "workers": 1, "dashboard": False}})
    c0, w0 = time.process_time(), time.perf_counter()
    out = runner.run_job(job, progress=False, echo=lambda s: None)
    assert out.summary["n_verdicts"] == n
    return {
        "n": n,
        "shard_cpu_ms_per_inspection": round(shard_cpu_ms, 3),
        "shard_wall_ms_per_inspection": round(shard_wall_ms, 3),
        "run_job_cpu_ms_per_inspection": round((time.process_time() - c0) / n * 1e3, 3),
        "run_job_wall_s": round(time.perf_counter() - w0, 2),
    }


def bench_throughput(n: int, delay: float, endpoints: int, inflight: int, workers: int, tmp: Path,
                     shard_size: int | None = None, tasks: int = 1, warm_prefix: bool = True) -> dict:
    from fake_server import FakeOpenAIServer

    from spec_vetting.catalog.listing import read_manifest
    from spec_vetting.catalog.read import read_verdicts
    from spec_vetting.pipeline import job_from_dict, runner

    # n pairs: n candidates with a task of their own, or n / tasks candidates asked every one of `tasks` tasks
    cands = _candidates(n) if tasks == 1 else _candidates(n // tasks, own_task=None)
    n = len(cands) * tasks
    runner.load_all_candidates = lambda sources: cands
    servers = [FakeOpenAIServer(delay_s=delay) for _ in range(endpoints)]
    for s in servers:
        s.__enter__()
    try:
        root = tmp / f"tp-{workers}-{shard_size}-{tasks}-{warm_prefix}"
        job = job_from_dict({
            "candidates": ["inline"], "out": str(root), "tasks": list(TASKS[:tasks]) if tasks > 1 else [],
            "engine": {"endpoints": [s.base_url for s in servers], "timeout_s": 30,
                       "options": {"warm_prefix_first": warm_prefix}},
            "max_inflight_per_endpoint": inflight, "shard_size": shard_size,
            "cluster": {"processes": True, "workers": workers, "dashboard": False},
        })
        w0 = time.perf_counter()
        out = runner.run_job(job, progress=False, echo=lambda s: None)
        wall = time.perf_counter() - w0
    finally:
        for s in servers:
            s.__exit__(None, None, None)
    rows = read_verdicts(root, out.run_id, columns=["verdict", "started_at", "elapsed_s"]).to_pylist()
    assert len(rows) == n and all(r["verdict"] == "YES" for r in rows), {r["verdict"] for r in rows}
    start = min(r["started_at"].timestamp() for r in rows)
    end = max(r["started_at"].timestamp() + r["elapsed_s"] for r in rows)
    limit = endpoints * inflight / (2 * delay)
    achieved = n / (end - start)
    # the engine pins each candidate to an endpoint by hash: the busiest endpoint's share bounds the rate
    from collections import Counter

    from spec_vetting.catalog.read import read_turns

    turns = [t for t in read_turns(root, out.run_id, columns=["turn", "endpoint", "latency_s"]).to_pylist()
             if t["turn"] >= 0]
    first_turns = [t["endpoint"] for t in turns if t["turn"] == 0]
    # a turn's latency as the client saw it (server delay + HTTP + encoding on this machine): it bounds the rate too
    mean_latency = sum(t["latency_s"] for t in turns) / len(turns)
    latency_limit = endpoints * inflight / (2 * mean_latency)
    max_share = max(Counter(first_turns).values()) / len(first_turns)
    routed_limit = inflight / (2 * delay * max_share)
    return {
        "workers": workers, "n": n, "tasks": tasks, "warm_prefix_first": warm_prefix,
        "endpoints": endpoints, "inflight_per_endpoint": inflight, "delay_s": delay,
        "shards": read_manifest(root, out.run_id)["counts"]["shards"],
        "limit_per_s": round(limit, 2), "achieved_per_s": round(achieved, 2),
        "fraction_of_limit": round(achieved / limit, 3),
        "busiest_endpoint_share": round(max_share, 3), "limit_given_routing_per_s": round(routed_limit, 2),
        "fraction_of_routed_limit": round(achieved / routed_limit, 3),
        "wall_s_including_cluster_start": round(wall, 2),
        "run_s": round(end - start, 2),
        "mean_turn_latency_s": round(mean_latency, 3),
        "limit_given_latency_per_s": round(latency_limit, 2),
        "fraction_of_latency_limit": round(achieved / latency_limit, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--throughput-n", type=int, default=160)
    ap.add_argument("--delay", type=float, default=0.25)
    ap.add_argument("--endpoints", type=int, default=2)
    ap.add_argument("--inflight", type=int, default=4)
    ap.add_argument("--shard-size", type=int, default=None, help="fixed shard size (default: the run's automatic one)")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts to measure")
    ap.add_argument("--tasks", type=int, default=1, choices=range(1, 6),
                    help="tasks per candidate in the throughput runs (the pairs stay --throughput-n)")
    ap.add_argument("--warm-prefix", choices=("on", "off", "both"), default="on",
                    help="the HTTP engine's warm_prefix_first (a candidate's other tasks after its first reply)")
    ap.add_argument("--skip-overhead", action="store_true")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        install_fast_render(tmp)
        if not args.skip_overhead:
            results["overhead"] = bench_overhead(args.n, tmp)
        if not args.skip_throughput:
            warm = {"on": [True], "off": [False], "both": [False, True]}[args.warm_prefix]
            results["throughput"] = [
                bench_throughput(args.throughput_n, args.delay, args.endpoints, args.inflight, w, tmp, args.shard_size,
                                 tasks=args.tasks, warm_prefix=on)
                for w in args.workers for on in warm
            ]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    o = results.get("overhead")
    if o:
        print(f"overhead: {o['shard_cpu_ms_per_inspection']} CPU ms/inspection in a shard "
              f"({o['run_job_cpu_ms_per_inspection']} with Dask and run bookkeeping), n={o['n']}, target <= 5")
    for t in results.get("throughput", []):
        print(f"throughput, {t['workers']} worker(s), {t['tasks']} task(s) per candidate, warm_prefix_first "
              f"{t['warm_prefix_first']}: {t['achieved_per_s']}/s of a {t['limit_per_s']}/s limit "
              f"({t['fraction_of_limit']:.0%}; {t['endpoints']} endpoints x {t['inflight_per_endpoint']} in flight, "
              f"{t['delay_s']} s per turn, n={t['n']} in {t['shards']} shards; "
              f"wall {t['wall_s_including_cluster_start']} s with start-up); "
              f"busiest endpoint got {t['busiest_endpoint_share']:.0%} of the candidates, so the limit given the "
              f"sticky routing is {t['limit_given_routing_per_s']}/s: {t['fraction_of_routed_limit']:.0%} of it; "
              f"turns took {t['mean_turn_latency_s']} s on average as the client saw them, so the limit given that "
              f"latency is {t['limit_given_latency_per_s']}/s: {t['fraction_of_latency_limit']:.0%} of it")


if __name__ == "__main__":
    main()
