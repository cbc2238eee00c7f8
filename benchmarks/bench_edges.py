"""Issue 24's edges, measured: memory of one oversized reply, and what the readers' footer check costs.

1. Peak RSS of this process while the OpenAI engine asks the standard-library fake server for one reply of
   ``--reply-mb`` MB: with the default cap (4 MiB, refused as ``bad_reply`` as it is read) and with the cap lifted
   above the reply (what happened before: the whole body in memory, then parsed). Each case runs in a fresh
   subprocess so one's peak does not hide the other's.
2. The footer check that keeps damaged files out of every read: ``dataset(root, "verdicts")`` on a root of
   ``--files`` small compacted files, first call (footers read) and later calls (cached by size and mtime).

    .venv/bin/python benchmarks/bench_edges.py --reply-mb 100 --files 200
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

ONE_REPLY = r"""
import asyncio, json, resource, sys
sys.path.insert(0, {tests!r})
from fake_server import FakeOpenAIServer, Fault
from spec_vetting.engines.http.engine import OpenAIEngine
from spec_vetting.errors import EngineError

async def main(url, cap):
    eng = OpenAIEngine(url, model="m", max_retries=0, health_interval_s=0, timeout_s=120,
                       **({{"max_reply_bytes": cap}} if cap else {{}}))
    await eng.start()
    try:
        await eng._post_with_retries(eng.endpoints[0], {{"messages": []}}, {{}}, what="bench")
        outcome = "read whole"
    except EngineError as exc:
        outcome = exc.kind
    finally:
        await eng.close()
    return outcome

before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with FakeOpenAIServer() as srv:
    srv.push_faults(Fault.huge({n}))
    outcome = asyncio.run(main(srv.base_url, {cap}))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"outcome": outcome, "peak_mb": peak / 1024, "before_mb": before / 1024}}))
"""


def one_reply(n_bytes: int, cap: int | None) -> dict:
    code = ONE_REPLY.format(tests=str(REPO / "tests"), n=n_bytes, cap=cap)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["wall_s"] = round(time.perf_counter() - t0, 2)
    return res


def footer_cost(n_files: int) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from spec_vetting.catalog.read import dataset, parquet_dataset
    from spec_vetting.catalog.schema import file_schema

    schema = file_schema("verdicts")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "verdicts" / "2024-01-01"
        folder.mkdir(parents=True)
        empty = schema.empty_table()
        for k in range(n_files):
            pq.write_table(pa.Table.from_batches([], schema=empty.schema), folder / f"part-r{k:04d}-cv-0.parquet")
        files = [str(p) for p in sorted(folder.glob("*.parquet"))]
        t0 = time.perf_counter()
        for _ in range(10):
            parquet_dataset(files, schema=schema)  # what dataset() did before: no footer read
        unchecked = (time.perf_counter() - t0) / 10
        t0 = time.perf_counter()
        dataset(tmp, "verdicts")
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(10):
            dataset(tmp, "verdicts")
        later = (time.perf_counter() - t0) / 10
    return {"files": n_files, "unchecked_ms": round(1e3 * unchecked, 1), "first_call_ms": round(1e3 * first, 1),
            "later_call_ms": round(1e3 * later, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reply-mb", type=int, default=100)
    ap.add_argument("--files", type=int, default=200)
    args = ap.parse_args()
    n = args.reply_mb * 1_000_000
    print(json.dumps({"reply_bytes": n, "default_cap": one_reply(n, None),
                      "cap_lifted": one_reply(n, n + 1_000_000)}))
    print(json.dumps({"footer_check": footer_cost(args.files)}))


if __name__ == "__main__":
    main()
