"""Start-up probes are bounded by the whole-request deadline (issue 34, item 4).

A local server on 127.0.0.1 answers every probe at once except the one under test, whose reply it trickles a byte
every second (each read returns within httpx's per-read timeout, so only a deadline on the whole request ends it).
The run must fail before it creates or locks the root, naming the endpoint and the seconds, in about the deadline.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from spec_vetting.errors import RunNotStartedError
from spec_vetting.pipeline import job_from_dict, runner

TOKENS = {"tokens": [1, 2, 3], "count": 3}
REPLIES = {
    "/health": b"ok",
    "/v1/models": json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode(),
    "/get_model_info": json.dumps({"model_path": "m"}).encode(),
    "/tokenize": json.dumps(TOKENS).encode(),
    "/v1/chat/completions": json.dumps({"id": "x", "object": "chat.completion", "model": "m", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "length"}]}).encode(),
}


class TricklingServer:
    """Answers the probes; the path in ``trickle`` gets its reply one byte a second (padded to 200 bytes)."""

    def __init__(self, trickle: str):
        outer = self
        self.trickle = trickle
        self.stop = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                body = REPLIES.get(self.path)
                if body is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                slow = self.path == outer.trickle
                if slow:
                    body = body + b" " * (200 - len(body))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not slow:
                    self.wfile.write(body)
                    return
                for k in range(len(body)):
                    if outer.stop.wait(1.0):
                        return
                    try:
                        self.wfile.write(body[k:k + 1])
                        self.wfile.flush()
                    except OSError:
                        return

            do_GET = do_POST = _answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize(("path", "seconds"), [
    ("/health", 5),  # the health check's own bound (routing.HEALTH_TIMEOUT_S)
    ("/v1/models", 3),
    ("/get_model_info", 3),
    ("/tokenize", 3),  # the chat template check
    ("/v1/chat/completions", 3),  # the sampling probe
])
def test_a_probe_trickled_a_byte_a_second_fails_the_run_before_the_lock(tmp_path, monkeypatch, path, seconds):
    monkeypatch.setattr(runner, "load_all_candidates", lambda sources: [_Candidate()])
    root = tmp_path / "cat"
    with TricklingServer(path) as srv:
        job = job_from_dict({
            "candidates": ["unused.csv"], "tasks": ["cv"], "out": str(root),
            "engine": {"name": "openai", "endpoints": [srv.base_url], "timeout_s": 3},
            "cluster": {"processes": False, "workers": 1, "dashboard": False},
        })
        t0 = time.monotonic()
        with pytest.raises(RunNotStartedError) as err:
            runner.run_job(job, fresh=True, progress=False, echo=lambda s: None)
        wall = time.monotonic() - t0
    said = str(err.value)
    assert f"127.0.0.1:{srv.httpd.server_address[1]}" in said and path.rsplit("/", 1)[-1] in said, said
    assert f"{seconds} s" in said, said
    assert wall < seconds + 10, f"the probe took {wall:.0f} s"  # not the 200 s the trickle would take
    assert not root.exists()  # neither created nor locked: the next night is not held up


def test_a_token_count_trickled_is_cut_and_estimated(tmp_path):
    """/tokenize during inspections: cut at the probe deadline, the endpoint's turns then estimated (None)."""
    import asyncio

    from spec_vetting.engines.http.engine import OpenAIEngine

    with TricklingServer("/tokenize") as srv:
        engine = OpenAIEngine([srv.base_url], model="m", timeout_s=2)

        async def count():
            await engine.start()
            try:
                t0 = time.monotonic()
                first = await engine.count_tokens(srv.base_url, "some text")
                return first, time.monotonic() - t0, await engine.count_tokens(srv.base_url, "more")
            finally:
                await engine.close()

        first, wall, second = asyncio.run(count())
    assert first is None and second is None and wall < 6


class _Candidate:
    candidate_id = "c-0"
    path = "/d/c-0.fits"
    task = "cv"
    label = None
    target = None
    image_row = None

    def load_spectrum(self):  # never reached: the run fails at its probes
        raise AssertionError("a spectrum was read before the engine answered")
