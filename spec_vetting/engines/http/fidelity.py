"""Does an endpoint render the conversation as training built it? Asked of the server's own tokenizer.

The client cannot tokenize (it holds no tokenizer), but a server with ``POST /tokenize`` (vLLM; SGLang where it
has one) can do both halves: tokenize the chat messages the way it renders every request (its chat template), and
tokenize the text of training's stream for the same messages (:func:`spec_vetting.chat_stream.trained_stream_text`)
as a plain prompt. The same ids mean the served template is exact; a difference is shown as the text around the
first token that differs (``/detokenize``), which for a stock template is the newline after an assistant turn.

The probe conversation holds every kind of turn a conversation has (system with the tools block, the task, a zoom
turn, an image-less tool answer, a second assistant turn) but no picture: image tokens are the processor's business
(tests/test_model_pictures.py), not the template's.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import httpx

from ...chat_stream import trained_stream_text
from ...errors import EngineError
from ...protocol import TOOL_RESPONSE_CLOSE, TOOL_RESPONSE_OPEN, system_text
from ...types import Message, Sampling, TextPart
from .routing import server_root
from .wire import PINNED_SAMPLING_FIELDS, messages_to_wire, sampling_fields

PROBE_TASK = "\nAnalyze the provided spectrum to determine if it is a **White Dwarf**."
PROBE_ZOOM = ('<think>Check the Balmer lines.</think>\n<tool_call>\n{"name": "spectral_visualization_tool", '
              '"arguments": {"label": "H\u03b2", "wavelength_range": [4800, 4920]}}\n</tool_call>')
PROBE_TOOL = ("Error: The specified wavelength range [4800, 4920] is invalid or outside the available data range "
              "[5000.0, 9000.0].")
PROBE_SECOND = ('<think>Try H\u03b1.</think>\n<tool_call>\n{"name": "spectral_visualization_tool", "arguments": '
                '{"wavelength_range": [6500, 6620]}}\n</tool_call>')


def probe_messages() -> list[Message]:
    return [
        Message("system", [TextPart(system_text())]),
        Message("user", [TextPart(PROBE_TASK)]),
        Message("assistant", [TextPart(PROBE_ZOOM)]),
        Message("user", [TextPart(TOOL_RESPONSE_OPEN + PROBE_TOOL + TOOL_RESPONSE_CLOSE)]),
        Message("assistant", [TextPart(PROBE_SECOND)]),
        Message("user", [TextPart(TOOL_RESPONSE_OPEN + PROBE_TOOL + TOOL_RESPONSE_CLOSE)]),
    ]


@dataclass
class RenderingCheck:
    """One endpoint's answer. ``exact`` None: not verifiable (the server has no /tokenize)."""

    exact: bool | None
    detail: str
    served_tokens: int | None = None
    trained_tokens: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"exact": self.exact, "detail": self.detail, "served_tokens": self.served_tokens,
                "trained_tokens": self.trained_tokens}


async def within(deadline_s: float | None, url: str, what: str, request):
    """``await request`` (one whole httpx request: connect, headers, body) cut at ``deadline_s``: a server that
    trickles its reply a byte at a time passes every per-read timeout. Past it: :class:`EngineError` naming the
    endpoint, what was asked and the seconds (``kind="probe_timeout"``)."""
    if deadline_s is None:
        return await request
    try:
        async with asyncio.timeout(deadline_s):
            return await request
    except TimeoutError:
        raise EngineError(f"{url} ({what}): no complete reply within the {deadline_s:g} s request deadline; the "
                          "server accepts but does not answer in time: check it (or raise --timeout)",
                          kind="probe_timeout", endpoint=url) from None


def _tokens(data: Any) -> list[int] | None:
    tokens = data.get("tokens") if isinstance(data, dict) else None
    if isinstance(tokens, list) and all(isinstance(t, int) for t in tokens):
        return tokens
    return None


async def _detokenize(client: httpx.AsyncClient, root: str, model: str | None, tokens: list[int],
                      headers: dict, deadline_s: float | None) -> str | None:
    try:
        r = await within(deadline_s, f"{root}/detokenize", "the chat template check", client.post(
            f"{root}/detokenize", json={"model": model, "tokens": tokens}, headers=headers))
    except httpx.HTTPError:
        return None
    data = r.json() if r.status_code == 200 else None
    prompt = data.get("prompt") if isinstance(data, dict) else None
    return prompt if isinstance(prompt, str) else None


async def check_rendering(client: httpx.AsyncClient, base_url: str, model: str | None, *,
                          headers: dict | None = None, deadline_s: float | None = None) -> RenderingCheck:
    """Compare the server's rendering of :func:`probe_messages` with training's stream, token for token. Each
    request is cut at ``deadline_s`` (:func:`within`: EngineError naming the endpoint and the seconds)."""
    headers = headers or {}
    root = server_root(base_url)
    messages = probe_messages()
    url, what = f"{root}/tokenize", "the chat template check"
    try:
        served = await within(deadline_s, url, what, client.post(url, headers=headers, json={
            "model": model, "messages": messages_to_wire(messages), "add_generation_prompt": True}))
        if served.status_code in (404, 405):
            return RenderingCheck(None, f"{root}/tokenize does not exist here: the chat template cannot be checked "
                                        "(start the server with --chat-template deploy/chat_template.jinja)")
        trained = await within(deadline_s, url, what, client.post(url, headers=headers, json={
            "model": model, "prompt": trained_stream_text(messages), "add_special_tokens": False}))
    except httpx.HTTPError as exc:
        return RenderingCheck(None, f"{root}/tokenize did not answer ({type(exc).__name__}): rendering not checked")
    a = _tokens(served.json()) if served.status_code == 200 else None
    b = _tokens(trained.json()) if trained.status_code == 200 else None
    if a is None or b is None:
        bad = served if a is None else trained
        return RenderingCheck(None, f"{root}/tokenize answered HTTP {bad.status_code} without token ids: "
                                    "rendering not checked")
    if a == b:
        return RenderingCheck(True, f"renders training's token stream exactly ({len(a)} tokens)", len(a), len(b))
    k = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    served_text = await _detokenize(client, root, model, a[max(0, k - 6):k + 4], headers, deadline_s)
    trained_text = await _detokenize(client, root, model, b[max(0, k - 6):k + 4], headers, deadline_s)
    where = (f"; served {served_text!r} where training had {trained_text!r}"
             if served_text is not None and trained_text is not None else "")
    turns = sum(m.role == "assistant" for m in messages)
    hint = (" (one extra token per assistant turn: a stock template's newline after <|im_end|>)"
            if len(a) - len(b) == turns else "")
    return RenderingCheck(False, f"the chat template differs from training at token {k}: {len(a)} tokens served, "
                                 f"{len(b)} in training{hint}{where}. Start the server with --chat-template "
                                 "deploy/chat_template.jinja", len(a), len(b))


def pinned_sampling(sampling: Sampling | None = None) -> dict[str, Any]:
    """The sampling every request carries (what the endpoint will apply, whatever its own defaults)."""
    return sampling_fields(sampling or Sampling())


#: marks the one-token request that asks whether a server takes the pinned sampling fields (test servers let it
#: through without counting it as a chat turn)
PROBE_HEADER = "X-Spec-Vet-Probe"


@dataclass
class SamplingCheck:
    """Does an endpoint take every pinned sampling field? ``accepted`` None: not known (the probe failed otherwise)."""

    accepted: bool | None
    refused: list[str]
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "refused": list(self.refused), "detail": self.detail}


async def check_sampling(client: httpx.AsyncClient, base_url: str, model: str | None, *,
                         headers: dict | None = None, deadline_s: float | None = None) -> SamplingCheck:
    """Chat completions of one token carrying training's sampling; a 4xx naming pinned fields names them refused,
    and the probe is repeated without them (a server names one field at a time) until it is taken."""
    fields = pinned_sampling()
    refused: list[str] = []
    last = ""
    while True:
        body = {"model": model, "messages": [{"role": "user", "content": "ok"}], "max_tokens": 1, "stream": False,
                **{k: v for k, v in fields.items() if k not in refused}}
        try:
            r = await within(deadline_s, f"{base_url}/chat/completions", "the sampling probe", client.post(
                f"{base_url}/chat/completions", json=body, headers={**(headers or {}), PROBE_HEADER: "sampling"}))
        except httpx.HTTPError as exc:
            return SamplingCheck(None, refused, f"the sampling probe did not answer ({type(exc).__name__})")
        if r.status_code == 200:
            if not refused:
                return SamplingCheck(True, [], "takes every pinned sampling field")
            return SamplingCheck(False, refused, f"refuses the pinned sampling field(s) {', '.join(refused)} "
                                                 f"({last})")
        text = r.text[:500]
        named = [f for f in PINNED_SAMPLING_FIELDS if f in text and f not in refused]
        if r.status_code not in (400, 422) or not named:
            if refused:
                return SamplingCheck(False, refused, f"refuses the pinned sampling field(s) {', '.join(refused)} "
                                                     f"({last}), and then answered HTTP {r.status_code}")
            return SamplingCheck(None, [], f"the sampling probe answered HTTP {r.status_code}: not checked")
        refused += named
        last = f"HTTP {r.status_code}: {text[:160]}"
