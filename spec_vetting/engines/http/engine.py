"""The OpenAI-compatible HTTP engine: SGLang first, equally vLLM and ``transformers serve``.

One ``POST {base}/chat/completions`` per assistant turn (non-streaming, no probe chats, no ``tools`` field; wire
format in :mod:`.wire`). Every turn of one inspection goes to one endpoint chosen by the candidate id, which holds
one in-flight slot for the whole inspection (:mod:`.routing`). Timeouts, connection errors, 408/409/429 and 5xx
are retried with capped, jittered backoff honouring Retry-After (:mod:`.retry`). When an endpoint cannot be
reached after the retries it is marked unhealthy and :class:`EndpointUnavailableError` tells the loop to rerun the
inspection from its start, which lands on another endpoint.

The API key comes from an environment variable (``SPEC_VETTING_API_KEY`` by default) and is never logged or
recorded. The model id comes from ``--model`` or the first id of ``GET {base}/models``; ``/get_model_info`` at the
server root (SGLang) adds to the recorded identity where it exists.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import time
from typing import Any

import httpx

from ... import __version__
from ...engine_interface import Engine, EngineSession, SlotGate
from ...errors import ConfigError, EndpointUnavailableError, EngineError
from ...types import EngineIdentity, EngineReply, EngineSettings, InspectionContext, Message, Sampling
from . import DEFAULT_API_KEY_ENV, DEFAULT_TIMEOUT_S
from .fidelity import check_rendering, check_sampling, within
from .redact import redact_secret
from .retry import (
    DEFAULT_MAX_RETRIES,
    INITIAL_BACKOFF_S,
    MAX_BACKOFF_S,
    backoff_delay,
    is_retryable_exception,
    parse_retry_after,
    should_retry_status,
)
from .routing import DEFAULT_HEALTH_INTERVAL_S, DEFAULT_HUNG_COOLDOWN_S, Router, server_root
from .wire import (
    REQUEST_ID_HEADER,
    ROUTING_KEY_HEADER,
    RequestEncoder,
    WireError,
    model_ids,
    parse_chat_response,
)

log = logging.getLogger(__name__)

#: a start-up probe (model list, model info, template check, sampling probe) or a token count is cut at the
#: request deadline, and at this at most: they are small requests a healthy server answers at once
PROBE_DEADLINE_S = 30.0

#: a request that timed out (the server accepted it and never answered) is tried this many more times, not
#: ``max_retries``: a hung server does not answer the third time either (4 x 300 s x 3 attempts was an hour)
DEFAULT_TIMEOUT_RETRIES = 1
DEFAULT_CONNECT_TIMEOUT_S = 10.0
DEFAULT_MAX_INFLIGHT = 32
#: characters of a server's text (an error body) kept in messages, after the API key is redacted
SERVER_TEXT_CHARS = 200
#: a reply body longer than this is refused (``bad_reply``) as it is read: a real turn is a few kB of JSON
DEFAULT_MAX_REPLY_BYTES = 4 << 20
#: statuses that say the server (not our request) is unavailable: after the retries the endpoint counts as dead
UNAVAILABLE_STATUS = frozenset({502, 503, 504})


def normalize_endpoint(url: str) -> str:
    """A base URL including ``/v1`` (added when missing), without a trailing slash."""
    url = str(url).strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"endpoint {url!r} must be an http(s) URL such as http://localhost:30000/v1")
    if url.endswith("/chat/completions"):
        url = url[: -len("/chat/completions")]
    return url if url.endswith("/v1") else url + "/v1"


class _OpenAISession(EngineSession):
    def __init__(self, engine: OpenAIEngine, ctx: InspectionContext):
        self.engine = engine
        self.ctx = ctx
        self.endpoint: str | None = None
        self.encode_request = RequestEncoder()  # per inspection: its messages are serialised once

    async def __aenter__(self) -> _OpenAISession:
        eng = self.engine
        if eng._client is None:
            raise EngineError("the OpenAI engine was not started (call await engine.start())", kind="not_started")
        try:
            self.endpoint = await eng.router.acquire(self.ctx.candidate_id)
        except EngineError as exc:
            if exc.kind != "no_healthy_endpoint":
                raise
            await eng.router.check_all(eng._client, eng._auth_headers())  # maybe they came back
            self.endpoint = await eng.router.acquire(self.ctx.candidate_id)
        return self

    async def __aexit__(self, *exc) -> None:
        if self.endpoint is not None:
            url, self.endpoint = self.endpoint, None
            await self.engine.router.release_slot(url)

    async def count_tokens(self, text: str) -> int | None:
        """The endpoint's own tokenizer (``POST /tokenize``, vLLM and SGLang), cached; None where there is none."""
        return await self.engine.count_tokens(self.endpoint, text)

    async def complete(self, messages: list[Message], *, turn: int, sampling: Sampling) -> EngineReply:
        eng, url = self.engine, self.endpoint
        # sampling fields this server refused are left out only in a run that allowed it (manifest)
        body = self.encode_request.body(messages, model=eng.model, sampling=sampling,
                                        omit=tuple(eng.omit_sampling.get(url, ())))
        headers = {**eng._auth_headers(), "Content-Type": "application/json",
                   REQUEST_ID_HEADER: f"{self.ctx.run_id}/{self.ctx.candidate_id}/{turn}",
                   ROUTING_KEY_HEADER: self.ctx.candidate_id}
        t0 = time.monotonic()
        data = await eng._post_with_retries(url, body, headers, what=f"candidate {self.ctx.candidate_id} turn {turn}")
        try:
            reply = parse_chat_response(data)
        except WireError as exc:
            raise EngineError(f"{url}: malformed chat completion for candidate {self.ctx.candidate_id} "
                              f"turn {turn}: {exc}", kind="bad_reply", endpoint=url) from exc
        return EngineReply(text=reply.text, usage=reply.usage, latency_s=time.monotonic() - t0, endpoint=url,
                           finish_reason=reply.finish_reason, p_yes=reply.p_yes)


class OpenAIEngine(Engine):
    """Chat completions against one or more OpenAI-compatible servers."""

    name = "openai"
    p_yes_source = "logprobs"

    @classmethod
    def options_from_settings(cls, settings: EngineSettings) -> dict[str, Any]:
        if not settings.endpoints:
            raise ConfigError("the openai engine needs engine.endpoints (--endpoint URL) or engine.gateway")
        given = {"api_key_env": settings.api_key_env, "timeout_s": settings.timeout_s,
                 "max_inflight_per_endpoint": settings.max_inflight_per_endpoint}
        return {"endpoints": list(settings.endpoints), "model": settings.model,
                **{k: v for k, v in given.items() if v is not None}, **settings.options}

    @classmethod
    def ignored_settings(cls, settings: EngineSettings) -> list[str]:
        return []

    @classmethod
    def in_flight_slots(cls, options: dict[str, Any]) -> int | None:
        endpoints = options.get("endpoints") or []
        n = 1 if isinstance(endpoints, str) else len(endpoints)
        return options.get("max_inflight_per_endpoint", DEFAULT_MAX_INFLIGHT) * n

    def __init__(self, endpoints: list[str] | str, model: str | None = None, *,
                 api_key_env: str = DEFAULT_API_KEY_ENV,
                 max_inflight_per_endpoint: int = DEFAULT_MAX_INFLIGHT,
                 timeout_s: float = DEFAULT_TIMEOUT_S, connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
                 max_retries: int = DEFAULT_MAX_RETRIES, backoff_initial_s: float = INITIAL_BACKOFF_S,
                 backoff_max_s: float = MAX_BACKOFF_S, health_interval_s: float = DEFAULT_HEALTH_INTERVAL_S,
                 timeout_retries: int = DEFAULT_TIMEOUT_RETRIES, hung_cooldown_s: float = DEFAULT_HUNG_COOLDOWN_S,
                 seed: int | None = None, request_deadline_s: float | None = None,
                 max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES, omit_sampling: dict[str, list[str]] | None = None,
                 warm_prefix_first: bool = True):
        if isinstance(endpoints, str):
            endpoints = [endpoints]
        if not endpoints:
            raise ConfigError("the openai engine needs at least one --endpoint (e.g. http://localhost:30000/v1)")
        self.endpoints = list(dict.fromkeys(normalize_endpoint(e) for e in endpoints))
        self.model = model
        self.api_key_env = api_key_env
        self.timeout = httpx.Timeout(timeout_s, connect=min(connect_timeout_s, timeout_s))
        #: the whole request (connect + headers + body): --timeout unless given apart
        self.request_deadline_s = float(request_deadline_s if request_deadline_s is not None else timeout_s)
        self.max_reply_bytes = int(max_reply_bytes)
        self.max_retries = max_retries
        self.timeout_retries = min(timeout_retries, max_retries)
        self.backoff_initial_s, self.backoff_max_s = backoff_initial_s, backoff_max_s
        self.router = Router(self.endpoints, max_inflight_per_endpoint=max_inflight_per_endpoint,
                             health_interval_s=health_interval_s, hung_cooldown_s=hung_cooldown_s)
        self._rng = random.Random(seed)
        self._client: httpx.AsyncClient | None = None
        self._model_info: dict[str, Any] = {}
        self._token_counts: dict[tuple[str, str], int] = {}
        self._no_tokenize: set[str] = set()
        #: sampling fields left out per endpoint: only those a server refused, in a run told --allow-inexact-template
        self.omit_sampling = {normalize_endpoint(e): list(v) for e, v in (omit_sampling or {}).items()}
        #: SGLang caches a prompt's prefix only once its prefill has run: a candidate's other tasks are sent once
        #: its first task's first reply is back, so they find its picture cached (vLLM shares it either way);
        #: ``--engine-option warm_prefix_first=false`` sends them all at once
        self.warm_prefix_first = bool(warm_prefix_first)

    def share_slots(self, gate: SlotGate | None) -> None:
        self.router.gate = gate

    def in_flight_capacity(self) -> int:
        return sum(s.capacity for s in self.router.states.values())

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIEngine(endpoints={self.endpoints!r}, model={self.model!r})"

    def _api_key(self) -> str | None:
        return (os.environ.get(self.api_key_env) or None) if self.api_key_env else None

    def _auth_headers(self) -> dict[str, str]:
        key = self._api_key()
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _redact(self, text: str) -> str:
        """``text`` with the API key blanked: a proxy may echo request headers in an error body we log and record.
        Also a piece of the key that ends the text or starts it (a body the server itself cut inside the key)."""
        return redact_secret(text, self._api_key())

    # --- lifecycle -------------------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._client is not None:
            return
        n = len(self.endpoints)
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=max(20, 4 * n))
        self._client = httpx.AsyncClient(timeout=self.timeout, limits=limits)
        try:
            await self.router.check_all(self._client, self._auth_headers())
            healthy = self.router.healthy
            if not healthy:
                details = "; ".join(f"{s.last_error}" for s in self.router.states.values())
                raise EngineError(f"no endpoint answered its health check: {details}. Start the servers or fix "
                                  "--endpoint", kind="no_healthy_endpoint")
            await self._resolve_identity(healthy[0])
        except BaseException:
            await self.close()
            raise
        self.router.start_polling(self._client, self._auth_headers())

    async def close(self) -> None:
        await self.router.stop_polling()
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    @property
    def probe_deadline_s(self) -> float:
        """The whole-request deadline of a start-up probe or a token count: the request deadline, at most 30 s."""
        return min(self.request_deadline_s, PROBE_DEADLINE_S)

    async def _get_json(self, url: str, what: str) -> Any:
        r = await within(self.probe_deadline_s, url, what, self._client.get(
            url, headers=self._auth_headers(), timeout=min(self.timeout.read or 30, 30)))
        if r.status_code != 200:
            return None
        try:
            return r.json()
        except ValueError:
            return None

    async def _resolve_identity(self, base: str) -> None:
        info: dict[str, Any] = {"endpoints": list(self.endpoints)}
        try:
            ids = model_ids(await self._get_json(f"{base}/models", "the model list"))
        except httpx.HTTPError as exc:
            ids = []
            log.warning("GET %s/models failed: %s", base, exc)
        info["served_models"] = ids
        if self.model is None:
            if not ids:
                raise EngineError(f"{base}/models lists no model; pass --model with the served model name",
                                  kind="no_model", endpoint=base)
            self.model = ids[0]
        try:
            extra = await self._get_json(f"{server_root(base)}/get_model_info", "the model info")
        except httpx.HTTPError:
            extra = None
        if isinstance(extra, dict):
            info["server_model_info"] = {k: v for k, v in extra.items() if isinstance(v, str | int | float | bool)}
        self._model_info = info

    def identity(self) -> EngineIdentity:
        return EngineIdentity(engine=self.name, engine_version=f"spec-vetting {__version__} openai-http",
                              model=self.model, model_info=dict(self._model_info))

    async def count_tokens(self, endpoint: str, text: str) -> int | None:
        if endpoint in self._no_tokenize or self._client is None:
            return None
        key = (endpoint, text)
        if key in self._token_counts:
            return self._token_counts[key]
        try:
            url = f"{server_root(endpoint)}/tokenize"
            r = await within(self.probe_deadline_s, url, "a token count", self._client.post(
                url, headers=self._auth_headers(), json={"model": self.model, "prompt": text,
                                                         "add_special_tokens": False},
                timeout=min(self.timeout.read or 30, 30)))
            count = r.json().get("count") if r.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError, EngineError):
            count = None  # cut at the deadline too: this endpoint's turns are estimated
        if not isinstance(count, int):
            self._no_tokenize.add(endpoint)  # asked once: this endpoint's turns are estimated
            return None
        if len(self._token_counts) > 4096:  # tool turns repeat (the same texts): a small memo is enough
            self._token_counts.clear()
        self._token_counts[key] = count
        return count

    async def fidelity_checks(self) -> dict[str, dict[str, Any]]:
        """Per healthy endpoint: does its chat template render training's token stream, and does it take the pinned
        sampling (:mod:`.fidelity`)? ``{endpoint: {"rendering": RenderingCheck, "sampling": SamplingCheck}}``."""
        endpoints = self.router.healthy
        headers = self._auth_headers()

        async def one(e: str) -> dict[str, Any]:
            deadline = self.probe_deadline_s
            rendering, sampling = await asyncio.gather(
                check_rendering(self._client, e, self.model, headers=headers, deadline_s=deadline),
                check_sampling(self._client, e, self.model, headers=headers, deadline_s=deadline))
            return {"rendering": rendering, "sampling": sampling}

        return dict(zip(endpoints, await asyncio.gather(*(one(e) for e in endpoints)), strict=True))

    def session(self, ctx: InspectionContext) -> EngineSession:
        return _OpenAISession(self, ctx)

    # --- one request with retries ----------------------------------------------------------------------------

    async def _send(self, url: str, body: bytes, headers: dict) -> tuple[int, httpx.Headers, bytes]:
        """One POST under the whole-request deadline (connect, headers and body together: a reply trickled byte by
        byte is cut at it), its body read up to ``max_reply_bytes``. TimeoutError past the deadline."""
        async with asyncio.timeout(self.request_deadline_s):
            async with self._client.stream("POST", f"{url}/chat/completions", content=body, headers=headers) as r:
                chunks, n = [], 0
                async for chunk in r.aiter_bytes():
                    n += len(chunk)
                    if n > self.max_reply_bytes:
                        raise _ReplyTooLarge(n)
                    chunks.append(chunk)
                return r.status_code, r.headers, b"".join(chunks)

    def _server_text(self, content: bytes) -> str:
        """A server's text as we may record or log it: the API key redacted FIRST, then cut to
        :data:`SERVER_TEXT_CHARS` (cut first, a key echoed across the cut would survive in part)."""
        text = content[: 4 * SERVER_TEXT_CHARS + 4096].decode("utf-8", "replace")
        return clip(self._redact(text), SERVER_TEXT_CHARS)

    def _transport_problem(self, exc: Exception) -> tuple[str, bool]:
        """(what went wrong, redacted and cut; whether the server accepted the request and did not answer in time)."""
        if isinstance(exc, TimeoutError):
            return f"no complete reply within the {self.request_deadline_s:g} s request deadline", True
        problem = clip(self._redact(f"{type(exc).__name__}: {exc}".rstrip(": ")), SERVER_TEXT_CHARS)
        if isinstance(exc, httpx.TimeoutException) and not isinstance(exc, httpx.ConnectTimeout):
            return f"no answer within {self.timeout.read:g} s ({problem or type(exc).__name__})", True
        return problem, False

    async def _post_with_retries(self, url: str, body: bytes, headers: dict, *, what: str) -> Any:
        attempt = 0
        timeouts = 0
        hung = False
        while True:
            retry_after = None
            try:
                status, reply_headers, content = await self._send(url, body, headers)
            except _ReplyTooLarge as exc:
                raise EngineError(f"{url}: the reply for {what} is larger than {self.max_reply_bytes} bytes "
                                  f"(max_reply_bytes; {exc.n} read before it was cut); no real turn is that long: "
                                  "check the server, or raise --engine-option max_reply_bytes=N",
                                  kind="bad_reply", endpoint=url) from None
            except (httpx.HTTPError, TimeoutError) as exc:
                if isinstance(exc, httpx.HTTPError) and not is_retryable_exception(exc):
                    raise EngineError(self._redact(f"{url}: request for {what} failed: {type(exc).__name__}: {exc}"),
                                      kind="http_error", endpoint=url) from exc
                status = None
                problem, timed_out = self._transport_problem(exc)
                timeouts += timed_out
                if timeouts > self.timeout_retries:
                    hung = True
                    break
            else:
                if status == 200:
                    self.router.note_success(url)
                    try:
                        return json.loads(content)
                    except ValueError as exc:
                        raise EngineError(f"{url}: reply for {what} is not JSON ({self._server_text(content)!r})",
                                          kind="bad_reply", endpoint=url) from exc
                problem = f"HTTP {status}: {self._server_text(content)}"
                if not should_retry_status(status):
                    hint = (f"check the API key in the environment variable {self.api_key_env}"
                            if status in (401, 403) else "check --model and the server log")
                    raise EngineError(f"{url}: {what} was refused with {problem}; {hint}", kind=f"http_{status}",
                                      endpoint=url)
                retry_after = parse_retry_after(reply_headers)
            if attempt >= self.max_retries:
                break
            delay = backoff_delay(attempt, retry_after=retry_after, initial_s=self.backoff_initial_s,
                                  max_s=self.backoff_max_s, rng=self._rng)
            log.info("%s: %s for %s; retry %d/%d in %.2fs", url, problem, what, attempt + 1, self.max_retries, delay)
            await asyncio.sleep(delay)
            attempt += 1
        tries = attempt + 1
        if hung:
            self.router.mark_hung(url, problem)
            raise EndpointUnavailableError(f"{url} hung for {what}: {tries} tries, {problem}", endpoint=url)
        if status is None or status in UNAVAILABLE_STATUS:
            self.router.mark_unhealthy(url, problem)
            raise EndpointUnavailableError(f"{url} unavailable for {what} after {tries} tries: {problem}",
                                           endpoint=url)
        kind = "rate_limited" if status == 429 else f"http_{status}"
        raise EngineError(f"{url}: {what} failed after {tries} tries: {problem}", kind=kind, endpoint=url)


class _ReplyTooLarge(Exception):
    def __init__(self, n: int):
        super().__init__(n)
        self.n = n


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, marked when cut. Only ever applied to text already redacted."""
    return text if len(text) <= limit else text[:limit] + "...(cut)"
