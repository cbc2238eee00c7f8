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
    ImageEncoder,
    WireError,
    chat_request_body,
    model_ids,
    parse_chat_response,
)

log = logging.getLogger(__name__)

#: a request that timed out (the server accepted it and never answered) is tried this many more times, not
#: ``max_retries``: a hung server does not answer the third time either (4 x 300 s x 3 attempts was an hour)
DEFAULT_TIMEOUT_RETRIES = 1
DEFAULT_CONNECT_TIMEOUT_S = 10.0
DEFAULT_MAX_INFLIGHT = 32
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
        self.encode_image = ImageEncoder()

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

    async def complete(self, messages: list[Message], *, turn: int, sampling: Sampling) -> EngineReply:
        eng, url = self.engine, self.endpoint
        body = chat_request_body(messages, model=eng.model, sampling=sampling, encode_image=self.encode_image)
        headers = {**eng._auth_headers(),
                   REQUEST_ID_HEADER: f"{self.ctx.run_id}/{self.ctx.candidate_id}/{turn}",
                   ROUTING_KEY_HEADER: self.ctx.candidate_id}
        t0 = time.monotonic()
        data = await eng._post_with_retries(url, body, headers, what=f"candidate {self.ctx.candidate_id} turn {turn}")
        try:
            reply = parse_chat_response(data)
        except WireError as exc:
            raise EngineError(f"{url}: malformed chat completion for candidate {self.ctx.candidate_id} "
                              f"turn {turn}: {exc}", kind="bad_response", endpoint=url) from exc
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
                 seed: int | None = None):
        if isinstance(endpoints, str):
            endpoints = [endpoints]
        if not endpoints:
            raise ConfigError("the openai engine needs at least one --endpoint (e.g. http://localhost:30000/v1)")
        self.endpoints = list(dict.fromkeys(normalize_endpoint(e) for e in endpoints))
        self.model = model
        self.api_key_env = api_key_env
        self.timeout = httpx.Timeout(timeout_s, connect=min(connect_timeout_s, timeout_s))
        self.max_retries = max_retries
        self.timeout_retries = min(timeout_retries, max_retries)
        self.backoff_initial_s, self.backoff_max_s = backoff_initial_s, backoff_max_s
        self.router = Router(self.endpoints, max_inflight_per_endpoint=max_inflight_per_endpoint,
                             health_interval_s=health_interval_s, hung_cooldown_s=hung_cooldown_s)
        self._rng = random.Random(seed)
        self._client: httpx.AsyncClient | None = None
        self._model_info: dict[str, Any] = {}

    def share_slots(self, gate: SlotGate | None) -> None:
        self.router.gate = gate

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIEngine(endpoints={self.endpoints!r}, model={self.model!r})"

    def _api_key(self) -> str | None:
        return (os.environ.get(self.api_key_env) or None) if self.api_key_env else None

    def _auth_headers(self) -> dict[str, str]:
        key = self._api_key()
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _redact(self, text: str) -> str:
        """``text`` with the API key blanked: a proxy may echo request headers in an error body we log and record."""
        key = self._api_key()
        return text.replace(key, "***") if key and len(key) >= 4 else text

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

    async def _get_json(self, url: str) -> Any:
        r = await self._client.get(url, headers=self._auth_headers(), timeout=min(self.timeout.read or 30, 30))
        if r.status_code != 200:
            return None
        try:
            return r.json()
        except ValueError:
            return None

    async def _resolve_identity(self, base: str) -> None:
        info: dict[str, Any] = {"endpoints": list(self.endpoints)}
        try:
            ids = model_ids(await self._get_json(f"{base}/models"))
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
            extra = await self._get_json(f"{server_root(base)}/get_model_info")
        except httpx.HTTPError:
            extra = None
        if isinstance(extra, dict):
            info["server_model_info"] = {k: v for k, v in extra.items() if isinstance(v, str | int | float | bool)}
        self._model_info = info

    def identity(self) -> EngineIdentity:
        return EngineIdentity(engine=self.name, engine_version=f"spec-vetting {__version__} openai-http",
                              model=self.model, model_info=dict(self._model_info))

    def session(self, ctx: InspectionContext) -> EngineSession:
        return _OpenAISession(self, ctx)

    # --- one request with retries ----------------------------------------------------------------------------

    async def _post_with_retries(self, url: str, body: dict, headers: dict, *, what: str) -> Any:
        attempt = 0
        timeouts = 0
        hung = False
        while True:
            retry_after = None
            try:
                r = await self._client.post(f"{url}/chat/completions", json=body, headers=headers)
            except httpx.HTTPError as exc:
                if not is_retryable_exception(exc):
                    raise EngineError(self._redact(f"{url}: request for {what} failed: {type(exc).__name__}: {exc}"),
                                      kind="http_error", endpoint=url) from exc
                problem, status = self._redact(f"{type(exc).__name__}: {exc}".rstrip(": ")), None
                if isinstance(exc, httpx.TimeoutException) and not isinstance(exc, httpx.ConnectTimeout):
                    timeouts += 1
                    problem = f"no answer within {self.timeout.read:g} s ({problem or type(exc).__name__})"
                    if timeouts > self.timeout_retries:
                        hung = True
                        break
            else:
                if r.status_code == 200:
                    self.router.note_success(url)
                    try:
                        return r.json()
                    except ValueError as exc:
                        raise EngineError(f"{url}: reply for {what} is not JSON ({self._redact(r.text[:200])!r})",
                                          kind="bad_response", endpoint=url) from exc
                status = r.status_code
                problem = self._redact(f"HTTP {status}: {r.text[:200]}")
                if not should_retry_status(status):
                    hint = (f"check the API key in the environment variable {self.api_key_env}"
                            if status in (401, 403) else "check --model and the server log")
                    raise EngineError(f"{url}: {what} was refused with {problem}; {hint}", kind=f"http_{status}",
                                      endpoint=url)
                retry_after = parse_retry_after(r.headers)
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
