"""A local OpenAI-compatible test server (standard library only) with fault injection.

Speaks the part of the protocol the service uses, like SGLang does: ``GET /health``, ``GET /v1/models``,
``GET /get_model_info``, ``POST /v1/chat/completions`` (non-streaming). Listens on 127.0.0.1, a free port, in a
background thread (a thread per request, so concurrent inspections really overlap).

API::

    from fake_server import FakeOpenAIServer, Fault, dead_endpoint, spec_o3_reply   # tests/ is on sys.path under pytest

    with FakeOpenAIServer(delay_s=0.05) as srv:           # default reply: zoom on Hα, then \\boxed{YES}
        srv.base_url                                      # "http://127.0.0.1:PORT/v1"  (pass as --endpoint)
        srv.push_faults(Fault.status(500), Fault.rate_limit("1"), Fault.sleep(2.0), Fault.drop(),
                        Fault.garbage_body(), Fault.garbage_text("lorem"))   # consumed one per chat request
        srv.always = Fault.status(503)                    # or apply one fault to every chat request
        srv.healthy = False                               # /health answers 503
        srv.requests / srv.chat_requests                  # what clients sent (parsed JSON bodies, headers)
        srv.max_in_flight                                 # most chat requests it was serving at once
    dead_endpoint()                                       # a base URL where nothing listens

Pluggable replies: ``FakeOpenAIServer(reply=fn)`` with ``fn(messages, body) -> str | dict``; ``messages`` is the
request's OpenAI message list (images as ``data:image/png;base64,...`` URLs, see :func:`image_bytes`), a ``str`` is
sent as the assistant text, a ``dict`` as the whole response JSON. (The tiny Qwen is served by a real vLLM server
in tests/test_vllm_server.py, not here: this server is for faults.) ``p_yes`` sets the probability reported in
``logprobs`` for the token after ``\\boxed{`` when a request asks for logprobs. ``usage=False`` leaves usage out;
``cached_tokens=False`` leaves ``prompt_tokens_details`` out. For benchmarks: several servers with ``delay_s``.
``chat_template=TEXT`` adds ``POST /tokenize`` and ``/detokenize`` as vLLM has them: chat messages are rendered with
that Jinja template, and every character is one token (its code point), a prompt likewise.
``refuse_sampling={"top_k"}`` answers 400 to any chat request carrying one of those fields (as OpenAI's API does).
The one-token sampling probe spec-vet sends before a run (header ``X-Spec-Vet-Probe``) is answered at once: it
consumes no fault and is not in ``chat_requests`` (it is in ``requests``).
"""

from __future__ import annotations

import base64
import json
import math
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ZOOM_HALPHA = (
    "<think>The full view shows features near 6563 Å; zoom on Hα.</think>\n<tool_call>\n"
    '{"name": "spectral_visualization_tool", "arguments": {"label": "Zoom on the Hα region", '
    '"wavelength_range": [6500, 6600]}}\n</tool_call>'
)
ANSWER_YES = "<think>Broad Hα emission is present.</think>\n<answer>\\boxed{YES} Broad Balmer emission.</answer>"

ReplyFn = Callable[[list[dict], dict], "str | dict"]


def spec_o3_reply(messages: list[dict], body: dict) -> str:
    """A Spec-o3-shaped trajectory: zoom on Hα first, then answer YES."""
    n_assistant = sum(1 for m in messages if m.get("role") == "assistant")
    return ZOOM_HALPHA if n_assistant == 0 else ANSWER_YES


def image_bytes(messages: list[dict]) -> list[bytes]:
    """Every image of a request's messages, decoded from its data URL, in order."""
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            for part in content:
                if part.get("type") == "image_url":
                    url = part["image_url"]["url"]
                    out.append(base64.b64decode(url.split(",", 1)[1]))
    return out


@dataclass(frozen=True)
class Fault:
    kind: str  # status | sleep | drop | garbage_body | garbage_text | trickle | echo_auth | usage | huge
    code: int = 200
    headers: dict = field(default_factory=dict)
    seconds: float = 0.0
    text: str = ""

    @staticmethod
    def status(code: int, body: str = "injected failure", headers: dict | None = None) -> Fault:
        """Answer HTTP ``code`` with a JSON error body (and ``headers``)."""
        return Fault("status", code=code, text=body, headers=headers or {})

    @staticmethod
    def rate_limit(retry_after: str | None = "1") -> Fault:
        return Fault("status", code=429, text="rate limited",
                     headers={} if retry_after is None else {"Retry-After": retry_after})

    @staticmethod
    def sleep(seconds: float) -> Fault:
        """Answer normally after ``seconds`` (a client with a shorter timeout sees a timeout)."""
        return Fault("sleep", seconds=seconds)

    @staticmethod
    def drop() -> Fault:
        """Read the request, then close the connection without answering."""
        return Fault("drop")

    @staticmethod
    def garbage_body() -> Fault:
        """HTTP 200 with a body that is not JSON."""
        return Fault("garbage_body", text="<html>502 upstream garbage")

    @staticmethod
    def trickle(seconds_per_byte: float = 0.2) -> Fault:
        """A normal reply, sent one byte at a time with a pause before each (every read returns within a short
        read timeout, the whole reply takes minutes)."""
        return Fault("trickle", seconds=seconds_per_byte)

    @staticmethod
    def echo_auth(code: int, offset: int, tail: str = " (request rejected by the proxy)") -> Fault:
        """HTTP ``code`` whose text body echoes the request's Authorization header after ``offset`` characters
        of filler, as a misconfigured proxy does."""
        return Fault("echo_auth", code=code, seconds=float(offset), text=tail)

    @staticmethod
    def usage(**usage) -> Fault:
        """A normal reply whose ``usage`` fields are replaced by ``usage`` (sent as raw JSON text, so NaN and
        Infinity go out as the bare words a lax server writes)."""
        return Fault("usage", headers=dict(usage))

    @staticmethod
    def huge(n_bytes: int) -> Fault:
        """HTTP 200 whose JSON body is ``n_bytes`` long (a completion text of that size), sent in 64 kB chunks."""
        return Fault("huge", code=n_bytes)

    @staticmethod
    def garbage_text(text: str = "lorem ipsum dolor sit amet") -> Fault:
        """A valid completion whose text is nonsense (no call, no answer)."""
        return Fault("garbage_text", text=text)


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict
    body: Any
    at: float


def _logprobs_for(text: str, p_yes: float) -> dict | None:
    marker = text.rfind("\\boxed{")
    if marker < 0:
        return None
    head = text[: marker + len("\\boxed{")]
    rest = text[len(head):]
    word = "YES" if rest.upper().startswith("YES") else "NO" if rest.upper().startswith("NO") else None
    if word is None:
        return None
    p_yes = min(max(p_yes, 1e-6), 1 - 1e-6)
    top = [{"token": "YES", "logprob": math.log(p_yes)}, {"token": "NO", "logprob": math.log(1 - p_yes)}]
    chosen = next(t for t in top if t["token"] == word)
    return {"content": [
        {"token": head, "logprob": -0.01, "top_logprobs": []},
        {"token": rest[: len(word)], "logprob": chosen["logprob"], "top_logprobs": top},
        {"token": rest[len(word):], "logprob": -0.01, "top_logprobs": []},
    ]}


class FakeOpenAIServer:
    def __init__(self, reply: ReplyFn | None = None, *, model: str = "fake-spec-o3", delay_s: float = 0.0,
                 p_yes: float = 0.9, usage: bool = True, cached_tokens: bool = True, model_info: bool = True,
                 health_endpoint: bool = True, chat_template: str | None = None,
                 refuse_sampling: set[str] | frozenset[str] = frozenset()):
        self.reply = reply or spec_o3_reply
        self.chat_template = chat_template
        self.refuse_sampling = set(refuse_sampling)
        self.model = model
        self.delay_s = delay_s
        self.p_yes = p_yes
        self.usage = usage
        self.cached_tokens = cached_tokens
        self.model_info = model_info
        self.health_endpoint = health_endpoint
        self.healthy = True
        self.always: Fault | None = None
        self.faults: deque[Fault] = deque()
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self.in_flight = 0  # chat requests being served now
        self.max_in_flight = 0  # the most ever served at once (an in-flight cap measured at the server)
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -------------------------------------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.root_url + "/v1"

    # --- scripting -------------------------------------------------------------------------------------------

    def push_faults(self, *faults: Fault) -> None:
        with self._lock:
            self.faults.extend(faults)

    def _next_fault(self) -> Fault | None:
        with self._lock:
            if self.faults:
                return self.faults.popleft()
        return self.always

    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(req)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")
                    and not any(k.lower() == "x-spec-vet-probe" for k in r.headers)]

    def interruptible_sleep(self, seconds: float) -> bool:
        """Sleep unless the server stops first; False when stopped."""
        return not self._stop.wait(seconds)

    def completion(self, body: dict) -> dict:
        messages = body.get("messages") or []
        out = self.reply(messages, body)
        if isinstance(out, dict):
            return out
        text = str(out)
        n_prompt = sum(len(json.dumps(m)) for m in messages) // 4
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text},
                                  "finish_reason": "stop"}
        if body.get("logprobs"):
            choice["logprobs"] = _logprobs_for(text, self.p_yes)
        data: dict[str, Any] = {"id": f"chatcmpl-{time.time_ns()}", "object": "chat.completion",
                                "created": int(time.time()), "model": self.model, "choices": [choice]}
        if self.usage:
            usage: dict[str, Any] = {"prompt_tokens": n_prompt, "completion_tokens": max(1, len(text) // 4),
                                     "total_tokens": n_prompt + max(1, len(text) // 4)}
            if self.cached_tokens:
                usage["prompt_tokens_details"] = {"cached_tokens": n_prompt // 2}
            data["usage"] = usage
        return data


def _tokenize(template: str, path: str, body: dict) -> dict:
    """vLLM's /tokenize and /detokenize with one token per character (code point)."""
    if path == "/detokenize":
        return {"prompt": "".join(chr(t) for t in body.get("tokens") or [])}
    if "messages" in body:
        import jinja2

        env = jinja2.Environment()
        env.filters["tojson"] = lambda v: json.dumps(v, ensure_ascii=False)
        text = env.from_string(template).render(messages=body["messages"],
                                                 add_generation_prompt=body.get("add_generation_prompt", True))
    else:
        text = body.get("prompt") or ""
    tokens = [ord(c) for c in text]
    return {"tokens": tokens, "count": len(tokens), "max_model_len": 34816}


class _Handler(BaseHTTPRequestHandler):
    owner: FakeOpenAIServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def _send_json(self, status: int, data: Any, headers: dict | None = None) -> None:
        payload = json.dumps(data).encode()
        self._send_raw(status, payload, "application/json", headers)

    def _send_raw(self, status: int, payload: bytes, ctype: str, headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        try:
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        srv = self.owner
        srv._record(RecordedRequest("GET", self.path, dict(self.headers), None, time.time()))
        if self.path == "/health" and srv.health_endpoint:
            if srv.healthy:
                self._send_raw(200, b"", "text/plain")
            else:
                self._send_json(503, {"error": "unhealthy"})
        elif self.path == "/v1/models":
            self._send_json(200, {"object": "list", "data": [{"id": srv.model, "object": "model"}]})
        elif self.path == "/get_model_info" and srv.model_info:
            self._send_json(200, {"model_path": srv.model, "is_generation": True})
        else:
            self._send_json(404, {"error": f"no route {self.path}"})

    def do_POST(self) -> None:  # noqa: N802
        srv = self.owner
        with srv._lock:
            srv.in_flight += 1
            srv.max_in_flight = max(srv.max_in_flight, srv.in_flight)
        try:
            self._post()
        finally:
            with srv._lock:
                srv.in_flight -= 1

    def _post(self) -> None:
        srv = self.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = None
        srv._record(RecordedRequest("POST", self.path, dict(self.headers), body, time.time()))
        if self._answered_before_faults(body):
            return
        fault = srv._next_fault()
        if fault is not None and fault.kind == "drop":
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if fault is not None and fault.kind == "status":
            self._send_json(fault.code, {"error": {"message": fault.text}}, fault.headers)
            return
        if fault is not None and fault.kind == "echo_auth":
            echoed = "x" * int(fault.seconds) + f"Authorization: {self.headers.get('Authorization')}" + fault.text
            self._send_raw(fault.code, echoed.encode(), "text/plain")
            return
        if fault is not None and fault.kind == "huge":
            self._send_huge(fault.code)
            return
        delay = srv.delay_s + (fault.seconds if fault is not None and fault.kind == "sleep" else 0.0)
        if delay and not srv.interruptible_sleep(delay):
            return
        if fault is not None and fault.kind == "garbage_body":
            self._send_raw(200, fault.text.encode(), "text/html")
            return
        if fault is not None and fault.kind == "garbage_text":
            data = srv.completion({**body, "messages": []})
            data["choices"][0]["message"]["content"] = fault.text
            self._send_json(200, data)
            return
        try:
            data = srv.completion(body)
        except Exception as exc:  # a plugged-in reply function failed: answer 500 like a real server
            self._send_json(500, {"error": {"message": f"{type(exc).__name__}: {exc}"}})
            return
        if fault is not None and fault.kind == "usage":
            data["usage"] = {**(data.get("usage") or {}), **fault.headers}
            # json.dumps writes float("nan") as NaN, as a lax server does
            self._send_raw(200, json.dumps(data).encode(), "application/json")
            return
        if fault is not None and fault.kind == "trickle":
            self._send_trickle(json.dumps(data).encode(), fault.seconds)
            return
        self._send_json(200, data)

    def _answered_before_faults(self, body) -> bool:
        """Routes other than a chat turn, bad bodies, refused sampling fields and the sampling probe: answered here
        (True), without taking a fault."""
        srv = self.owner
        if self.path in ("/tokenize", "/detokenize") and srv.chat_template is not None and isinstance(body, dict):
            self._send_json(200, _tokenize(srv.chat_template, self.path, body))
        elif self.path != "/v1/chat/completions":
            self._send_json(404, {"error": f"no route {self.path}"})
        elif not isinstance(body, dict):
            self._send_json(400, {"error": "body is not JSON"})
        elif srv.refuse_sampling & set(body):
            refused = sorted(srv.refuse_sampling & set(body))
            self._send_json(400, {"error": {"message": f"Unrecognized request argument supplied: {refused[0]}",
                                            "type": "invalid_request_error"}})
        elif self.headers.get("X-Spec-Vet-Probe"):
            self._send_json(200, srv.completion({**body, "messages": body.get("messages") or []}))
        else:
            return False
        return True

    def _send_trickle(self, payload: bytes, seconds_per_byte: float) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        try:
            for i in range(len(payload)):
                if not self.owner.interruptible_sleep(seconds_per_byte):
                    return
                self.wfile.write(payload[i:i + 1])
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _send_huge(self, n_bytes: int) -> None:
        head, tail = b'{"choices": [{"message": {"content": "', b'"}}]}'
        n_text = max(0, n_bytes - len(head) - len(tail))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(head) + n_text + len(tail)))
        self.end_headers()
        chunk = b"a" * (64 << 10)
        try:
            self.wfile.write(head)
            left = n_text
            while left > 0:
                self.wfile.write(chunk[:left])
                left -= min(left, len(chunk))
            self.wfile.write(tail)
        except (BrokenPipeError, ConnectionResetError):
            pass


def dead_endpoint() -> str:
    """A base URL on 127.0.0.1 where nothing listens (connections are refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
