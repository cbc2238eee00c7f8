"""Speed of the rules engine: its own cost per inspection, and whole inspections per second with images.

Usage::

    python benchmarks/bench_rules.py [--n 200] [--n-loop 10]

1. Engine cost without rendering: for synthetic LAMOST-grid spectra (S/N 30, seeds 7000+), every task, the time of
   all the engine's turns of one inspection (measure + decide + texts), i.e. what the engine adds on top of the
   loop and the renderer. Target: at most 10 ms.
2. Inspections per second on one core, images included: ``run_inspection`` with the real renderer (full view plus
   one picture per zoom), one inspection at a time, the process pinned to one CPU where the OS allows it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from spec_vetting.engines.rules.engine import RulesEngine  # noqa: E402
from spec_vetting.inspect.loop import run_inspection  # noqa: E402
from spec_vetting.inspect.tasks import get_task  # noqa: E402
from spec_vetting.synthetic.synthetic import KINDS, make_spectrum  # noqa: E402
from spec_vetting.types import InspectionContext, Sampling  # noqa: E402

TASKS = ("cv", "carbon", "ss", "gm", "wd")


def spectra(n: int):
    return [make_spectrum(KINDS[i % len(KINDS)], seed=7000 + i, snr=30.0) for i in range(n)]


async def engine_only(engine: RulesEngine, sp, task: str) -> int:
    ctx = InspectionContext(candidate_id="bench", task=task, spectrum=sp, redshift=sp.meta.redshift)
    session = engine.session(ctx)
    for turn in range(8):
        reply = await session.complete([], turn=turn, sampling=Sampling())
        if "<tool_call>" not in reply.text:
            return turn + 1
    return 8


def bench_engine(n: int) -> dict:
    engine = RulesEngine()
    sps = spectra(n)
    costs = []

    async def go():
        for sp in sps:
            for task in TASKS:
                t0 = time.perf_counter()
                await engine_only(engine, sp, task)
                costs.append(time.perf_counter() - t0)

    asyncio.run(go())
    costs.sort()
    return {"n": len(costs), "median_ms": 1e3 * statistics.median(costs), "mean_ms": 1e3 * statistics.fmean(costs),
            "p95_ms": 1e3 * costs[int(0.95 * (len(costs) - 1))]}


def bench_loop(n: int) -> dict:
    engine = RulesEngine()
    sps = spectra(n)
    images = 0

    async def go():
        nonlocal images
        for i, sp in enumerate(sps):
            task = TASKS[i % len(TASKS)]
            ctx = InspectionContext(candidate_id=f"b{i}", task=task, spectrum=sp, redshift=sp.meta.redshift)
            r = await run_inspection(ctx, get_task(task), engine)
            assert r.verdict in ("YES", "NO", "UNDECIDED"), (r.error_kind, r.error_message)
            images += 1 + sum(t.image_png is not None for t in r.turns)

    # one warm-up inspection (matplotlib import, font cache) outside the timing
    asyncio.run(run_inspection(InspectionContext("warm", "cv", spectrum=sps[0], redshift=0.0), get_task("cv"),
                               engine))
    t0 = time.perf_counter()
    asyncio.run(go())
    wall = time.perf_counter() - t0
    return {"n": n, "wall_s": wall, "per_s": n / wall, "images": images, "images_per_inspection": images / n}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200, help="spectra for the engine-only timing (x5 tasks)")
    ap.add_argument("--n-loop", type=int, default=10, help="inspections through the loop with images")
    args = ap.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        print("pinned to one CPU")
    e = bench_engine(args.n)
    print(f"engine cost without rendering: median {e['median_ms']:.2f} ms, mean {e['mean_ms']:.2f} ms, "
          f"p95 {e['p95_ms']:.2f} ms per inspection ({e['n']} inspections)")
    lp = bench_loop(args.n_loop)
    print(f"through run_inspection with images: {lp['per_s']:.2f} inspections/s on one core "
          f"({lp['n']} inspections in {lp['wall_s']:.1f} s, {lp['images_per_inspection']:.1f} images each)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
