"""Client CPU per inspection through the HTTP engine, split into read, render, encode, request and rows.

A night's client work, end to end, as the shard runs it: real example files (``spec-vet make-examples``) read by the
survey readers, every picture drawn by the renderer and PNG-encoded, each turn a real ``POST /chat/completions``
over 127.0.0.1 to a scripted OpenAI-compatible server (tests/fake_server.py) that zooms ``--zooms`` times and then
answers (``--zooms 4``: 5 pictures per inspection, the full view and four windows), and the verdict and turn rows
written to Parquet. The server runs in its own process: its CPU is read from /proc and reported apart, never
counted as the client's.

Figures (CPU ms per inspection of the client process, user + sys, all its threads):

* ``total``: the shard from engine start to the marker file;
* ``read``: the survey reader (FITS decoding), in the read thread;
* ``render``: drawing the pictures (layout, matplotlib, Agg), PNG encoding excluded;
* ``encode``: PNG encoding of the pictures and the base64 data URLs of the request bodies;
* ``request``: building each request body, the HTTP exchange (JSON serialisation included) and parsing the reply,
  data URLs excluded;
* ``rows``: verdict and turn rows, Parquet files and the shard marker;
* ``other``: the rest (the loop, the zoom tool, asyncio, thread hand-offs).

The split comes from per-thread CPU clocks around each piece, which is exact for the synchronous pieces at any
concurrency; the request piece awaits the network, so it is exact only when one inspection runs at a time: the
split is measured with ``--concurrency 1`` and the total also with ``--total-concurrency`` (8) for comparison.

    .venv/bin/python benchmarks/bench_client_cpu.py [--n 40] [--zooms 4] [--tasks 1] [--repeat 3] [--tree DIR]
        [--json]

``--tasks 5`` runs every candidate for the five example tasks (a night that asks all five questions of each
spectrum); the figure is still per inspection. Each task zooms into windows moved by a few Å of its own
(:func:`task_shift`), so a candidate's tasks share the full view and, for two of them, their zooms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))
if "--tree" in sys.argv:  # measure another checkout's spec_vetting (e.g. the commit before a change) with this script
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--tree") + 1]).resolve()))

#: rest-frame windows the scripted model zooms into, in order: 50 Å at Hα, 300 Å around it, 100 Å at Hβ, 1500 Å
ZOOM_WINDOWS = ([6540, 6590], [6400, 6700], [4800, 4900], [3900, 5400])
#: the coverage a candidate needs for every zoom to draw a picture (the example QSO at z 1.4 does not have it);
#: each task moves the windows by up to 28 Å (:func:`task_shift`)
NEEDED_COVERAGE = (3900.0, 6730.0)
EXAMPLE_TASKS = ("cv", "carbon", "ss", "gm", "wd")


# --- the scripted server (its own process) -------------------------------------------------------------------------


def task_shift(messages: list[dict]) -> int:
    """Å to move the zoom windows by for this task (0-4 x 7 Å, from its prompt), so that a candidate's tasks zoom
    near each other's windows, as different questions would: of the five example tasks cv, carbon and ss get
    windows of their own, gm and wd the same ones (28 Å), so 17 pictures are drawn for a candidate's 5 inspections."""
    user = next((m for m in messages if m.get("role") == "user"), None)
    parts = user.get("content") if user else None
    text = "".join(p.get("text", "") for p in parts if isinstance(p, dict)) if isinstance(parts, list) else ""
    return 7 * (zlib.crc32(text.encode()) % 5)


def scripted_reply(zooms: int):
    """A Spec-o3-shaped trajectory: ``zooms`` zoom calls, then an answer; usage like a real server's."""

    def reply(messages: list[dict], body: dict) -> dict:
        n_assistant = sum(1 for m in messages if m.get("role") == "assistant")
        n_images = sum(1 for m in messages if isinstance(m.get("content"), list)
                       for p in m["content"] if p.get("type") == "image_url")
        if n_assistant < zooms:
            shift = task_shift(messages)
            window = [edge + shift for edge in ZOOM_WINDOWS[n_assistant % len(ZOOM_WINDOWS)]]
            text = (f"<think>Look closer at {window}.</think>\n<tool_call>\n"
                    '{"name": "spectral_visualization_tool", "arguments": {"label": "zoom", '
                    f'"wavelength_range": [{window[0]}, {window[1]}]}}}}\n</tool_call>')
        else:
            text = "<think>Seen enough.</think>\n<answer>\\boxed{YES} Broad Balmer emission.</answer>"
        prompt = 600 + 300 * n_images + 60 * n_assistant  # plausible token counts, well inside the budget
        completion = max(1, len(text) // 4)
        return {"id": f"chatcmpl-{time.time_ns()}", "object": "chat.completion", "created": int(time.time()),
                "model": "scripted-spec-o3",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion,
                          "prompt_tokens_details": {"cached_tokens": prompt - 400}}}

    return reply


def serve(zooms: int) -> None:
    """Run the scripted server; print its base URL, then on each ``stats`` line of stdin one JSON line: chat
    requests and their body bytes since the last ``stats`` (the recorded requests are dropped to keep memory flat)."""
    from fake_server import FakeOpenAIServer

    with FakeOpenAIServer(reply=scripted_reply(zooms), model="scripted-spec-o3") as srv:
        print(srv.base_url, flush=True)
        for line in sys.stdin:
            if line.strip() != "stats":
                continue
            with srv._lock:
                chats = [r for r in srv.requests if r.path.endswith("/chat/completions")]
                srv.requests.clear()
            size = sum(int(r.headers.get("Content-Length") or 0) for r in chats)
            print(json.dumps({"chat_requests": len(chats), "body_bytes": size}), flush=True)


class ServerProcess:
    def __init__(self, zooms: int):
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", "--zooms", str(zooms)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            raise RuntimeError(f"the scripted server did not start (said {self.base_url!r})")

    def cpu_s(self) -> float:
        """User + system CPU seconds of the server process so far (Linux /proc)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stats(self) -> dict:
        self.proc.stdin.write("stats\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


# --- the client: the shard, with per-thread CPU clocks around its pieces ---------------------------------------------


class Split:
    """CPU seconds per piece, summed over threads; re-entrant pieces are counted at the outermost call only."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()
        self._active = threading.local()

    def add(self, piece: str, seconds: float) -> None:
        with self._lock:
            self.seconds[piece] += seconds
            self.calls[piece] += 1

    def wrap_sync(self, piece: str, fn):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            if getattr(self._active, piece, False):
                return fn(*args, **kwargs)
            setattr(self._active, piece, True)
            t0 = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.add(piece, time.thread_time() - t0)
                setattr(self._active, piece, False)

        return timed

    def wrap_async(self, piece: str, fn):
        @functools.wraps(fn)
        async def timed(*args, **kwargs):
            t0 = time.thread_time()  # the loop thread's clock: exact while one inspection runs at a time
            try:
                return await fn(*args, **kwargs)
            finally:
                self.add(piece, time.thread_time() - t0)

        return timed

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()


@contextlib.contextmanager
def instrumented(split: Split):
    """Per-piece clocks around the reader, the renderer, the PNG writer, the data URLs, the HTTP turn and rows."""
    import spec_vetting.engines.http.engine as http_engine
    import spec_vetting.engines.http.wire as wire
    import spec_vetting.io.reader as reader
    import spec_vetting.pipeline.shard as shard
    import spec_vetting.render as render
    import spec_vetting.render.picture as picture

    patches = [
        (reader, "read_spectrum", split.wrap_sync("read", reader.read_spectrum)),
        (render, "render_spectrum", split.wrap_sync("picture", render.render_spectrum)),
        (picture, "png_rows", split.wrap_sync("png", picture.png_rows)),
        (picture, "encode_rows", split.wrap_sync("png", picture.encode_rows)),
        (wire.ImageEncoder, "__call__", split.wrap_sync("data_url", wire.ImageEncoder.__call__)),
        (http_engine._OpenAISession, "complete", split.wrap_async("turn", http_engine._OpenAISession.complete)),
        (shard, "_write_shard", split.wrap_sync("rows", shard._write_shard)),
    ]
    saved = [(obj, name, getattr(obj, name)) for obj, name, _ in patches]
    for obj, name, new in patches:
        setattr(obj, name, new)
    try:
        yield
    finally:
        for obj, name, old in saved:
            setattr(obj, name, old)


def example_items(folder: Path, n: int, tasks: int):
    """Work items over the example candidates whose rest frame covers every zoom window."""
    from spec_vetting.io.candidates import load_candidates
    from spec_vetting.pipeline.plan import WorkItem
    from spec_vetting.synthetic.examples import write_examples

    write_examples(folder, n=n, seed=1)
    items = []
    for cand in load_candidates(folder / "candidates.csv"):
        spec = cand.load_spectrum()
        z = spec.meta.redshift or 0.0
        rest = spec.wavelength / (1.0 + z)
        if rest.min() > NEEDED_COVERAGE[0] or rest.max() < NEEDED_COVERAGE[1]:
            continue
        own = cand.task or EXAMPLE_TASKS[0]
        chosen = [own] + [t for t in EXAMPLE_TASKS if t != own][: tasks - 1]
        items.extend(WorkItem(cand, t) for t in chosen)
    return items


def shard_spec(root: Path, shard_id: str, items, endpoint: str, concurrency: int):
    from spec_vetting.pipeline.shard import ShardSpec
    from spec_vetting.types import Sampling

    return ShardSpec(root=str(root), run_id="bench", run_date="2026-01-01", shard_id=shard_id, items=items,
                     engine_name="openai", engine_options={"endpoints": [endpoint], "timeout_s": 60},
                     sampling=Sampling(), concurrency=concurrency)


def measure(items, server: ServerProcess, root: Path, concurrency: int, label: str, split: Split | None) -> dict:
    from spec_vetting.pipeline.shard import run_shard_async

    server.stats()  # start counting requests here
    if split is not None:
        split.reset()
    server_c0 = server.cpu_s()
    c0, w0 = time.process_time(), time.perf_counter()
    summary = asyncio.run(run_shard_async(shard_spec(root, label, items, server.base_url, concurrency)))
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    server_cpu = server.cpu_s() - server_c0
    traffic = server.stats()
    n = summary["n"]
    verdicts = summary["verdicts"]
    yes = sum(c.get("YES", 0) for c in verdicts.values())
    if yes != n:
        raise RuntimeError(f"expected every inspection to answer YES, got {verdicts} ({summary['errors']})")
    out = {"n": n, "concurrency": concurrency, "requests_per_inspection": traffic["chat_requests"] / n,
           "request_kb_per_inspection": traffic["body_bytes"] / n / 1e3,
           "total_ms": cpu / n * 1e3, "wall_ms": wall / n * 1e3, "server_ms": server_cpu / n * 1e3}
    if split is not None:
        s = {k: v / n * 1e3 for k, v in split.seconds.items()}
        out.update({
            "read_ms": s.get("read", 0.0),
            "render_ms": s.get("picture", 0.0) - s.get("png", 0.0),
            "encode_ms": s.get("png", 0.0) + s.get("data_url", 0.0),
            "request_ms": s.get("turn", 0.0) - s.get("data_url", 0.0),
            "rows_ms": s.get("rows", 0.0),
            "pictures_per_inspection": split.calls.get("picture", 0) / n,
            "png_ms": s.get("png", 0.0), "data_url_ms": s.get("data_url", 0.0),
        })
        out["other_ms"] = out["total_ms"] - sum(out[k] for k in ("read_ms", "render_ms", "encode_ms", "request_ms",
                                                                  "rows_ms"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=40, help="example candidates to write (those covering the zooms run)")
    ap.add_argument("--zooms", type=int, default=4, help="zoom turns per inspection (pictures = zooms + 1)")
    ap.add_argument("--tasks", type=int, default=1, choices=range(1, 6), help="tasks asked of each candidate")
    ap.add_argument("--repeat", type=int, default=3, help="measured shards per setting (median reported)")
    ap.add_argument("--concurrency", type=int, default=1, help="inspections in flight in the split measurement")
    ap.add_argument("--total-concurrency", type=int, default=8, help="inspections in flight in the total-only one")
    ap.add_argument("--tree", help="a checkout whose spec_vetting to measure instead of this one's")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.serve:
        serve(args.zooms)
        return 0

    os.environ.setdefault("SPEC_VETTING_API_KEY", "")
    import spec_vetting

    print(f"spec_vetting from {Path(spec_vetting.__file__).parent}", file=sys.stderr)
    split = Split()
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        items = example_items(tmp / "examples", args.n, args.tasks)
        server = ServerProcess(args.zooms)
        try:
            measure(items[:6], server, tmp / "warm", args.total_concurrency, "warm", None)  # imports, figures
            runs = {"split": [], "total": []}
            for r in range(args.repeat):
                with instrumented(split):
                    runs["split"].append(measure(items, server, tmp / f"s{r}", args.concurrency, f"s{r}", split))
                runs["total"].append(measure(items, server, tmp / f"t{r}", args.total_concurrency, f"t{r}", None))
        finally:
            server.close()
    for key, rs in runs.items():
        results[key] = {k: (statistics.median(r[k] for r in rs) if isinstance(rs[0][k], float) else rs[0][k])
                        for k in rs[0]}
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    s, t = results["split"], results["total"]
    print(f"{s['n']} inspections x {args.repeat}, {s['pictures_per_inspection']:.1f} pictures and "
          f"{s['requests_per_inspection']:.1f} requests ({s['request_kb_per_inspection']:.0f} kB of request bodies) "
          f"per inspection, {args.tasks} task(s) per candidate; CPU ms per inspection, median of {args.repeat}:")
    cols = ("total", "read", "render", "encode", "request", "rows", "other")
    print(f"{'in flight':>9} " + " ".join(f"{c:>8}" for c in cols) + f" {'server':>8} {'wall':>8}")
    print(f"{s['concurrency']:>9} " + " ".join(f"{s[c + '_ms']:8.1f}" for c in cols)
          + f" {s['server_ms']:8.1f} {s['wall_ms']:8.1f}")
    print(f"{t['concurrency']:>9} {t['total_ms']:8.1f} " + " ".join(f"{'':>8}" for _ in cols[1:])
          + f" {t['server_ms']:8.1f} {t['wall_ms']:8.1f}")
    print(f"encode = PNG {s['png_ms']:.1f} + data URLs {s['data_url_ms']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
