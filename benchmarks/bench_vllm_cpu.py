"""The real vLLM CPU server on the tiny Qwen2.5-VL: start time, per-turn latency, prefix-cache hits.

    make vllm-venv
    .venv/bin/python benchmarks/bench_vllm_cpu.py --sequential 5 --concurrent 4

Starts the server the way the real_server tests do (tests/vllm_server.py), then runs the trained trajectory
(zoom on H-alpha, then YES) through the HTTP engine and the real inspection loop: ``--sequential`` inspections one
after another, then ``--concurrent`` at once. Prints one JSON object: seconds to the first healthy ``/health``,
per-turn latency (median and max, by turn), cached / prompt tokens by turn, and every verdict. The tiny model's
numbers measure the server's and the client's overhead on 2 CPU cores, not a real model's speed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

import tiny_qwen  # noqa: E402
from vllm_server import VLLMServer, venv_problem  # noqa: E402

from spec_vetting.engines.http.engine import OpenAIEngine  # noqa: E402
from spec_vetting.inspect.loop import run_inspection  # noqa: E402
from spec_vetting.inspect.tasks import get_task  # noqa: E402
from spec_vetting.types import Sampling  # noqa: E402


async def inspections(url: str, n_sequential: int, n_concurrent: int):
    engine = OpenAIEngine([url], timeout_s=120)
    await engine.start()
    sampling = Sampling(max_tokens=120, logprobs=True, top_logprobs=20)
    task, render = get_task("cv"), tiny_qwen.spectrum_renderer()

    def one(cid):
        return run_inspection(tiny_qwen.inspection_context(cid), task, engine, sampling=sampling, renderer=render)

    try:
        seq = [await one(f"seq-{i}") for i in range(n_sequential)]
        t0 = time.monotonic()
        conc = await asyncio.gather(*(one(f"conc-{i}") for i in range(n_concurrent)))
        return seq, conc, time.monotonic() - t0
    finally:
        await engine.close()


def by_turn(results, attr):
    turns: dict[int, list] = {}
    for r in results:
        for t in r.turns:
            turns.setdefault(t.index, []).append(attr(t))
    return turns


def summary(results) -> dict:
    lat = by_turn(results, lambda t: t.latency_s)
    cached = by_turn(results, lambda t: f"{t.usage.cached_tokens}/{t.usage.prompt_tokens}")
    return {
        "verdicts": [f"{r.verdict}/{r.status}" for r in results],
        "p_yes": [round(r.p_yes, 4) if r.p_yes is not None else None for r in results],
        "latency_s_by_turn": {k: {"median": round(statistics.median(v), 3), "max": round(max(v), 3)}
                              for k, v in lat.items()},
        "cached_of_prompt_tokens_by_turn": {k: " ".join(v) for k, v in cached.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sequential", type=int, default=5)
    ap.add_argument("--concurrent", type=int, default=4)
    ap.add_argument("--cache", type=Path, default=REPO / ".pytest_cache" / "d" / "spec_vetting_tiny_qwen",
                    help="where the tiny model folders are cached (shared with the tests by default)")
    args = ap.parse_args()
    problem = venv_problem()
    if problem:
        sys.exit(problem)
    args.cache.mkdir(parents=True, exist_ok=True)
    with tiny_qwen.torch_threads(1):
        model = tiny_qwen.trained_model_folder(args.cache)
    with tempfile.TemporaryDirectory() as tmp:
        server = VLLMServer(model, Path(tmp) / "server.log")
        with server:
            seq, conc, conc_wall = asyncio.run(inspections(server.base_url, args.sequential, args.concurrent))
    print(json.dumps({
        "server_start_to_healthy_s": round(server.start_s, 1),
        "sequential": summary(seq),
        "concurrent": {**summary(conc), "wall_s": round(conc_wall, 3)},
    }, indent=1).replace('",\n   "', '", "'))


if __name__ == "__main__":
    main()
