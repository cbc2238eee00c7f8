"""OpenAI chat-completions wire format in one place: request bodies out, replies in.

Rules (DESIGN decisions 2-5): non-streaming; images as ``image_url`` parts holding
``data:image/png;base64,...``; ``model``, ``max_tokens`` and the whole sampling of training (temperature, top_p,
top_k off, min_p 0, repetition/presence/frequency penalties neutral: :data:`PINNED_SAMPLING_FIELDS`) on every
request, so no server default and no checkpoint ``generation_config.json`` changes decoding; **no** ``tools`` field
(the tools block lives in the system text); usage fields a server leaves out are None, not zero.
"""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass
from typing import Any

from ...answers import locate_verdict, verdict_probability
from ...protocol import RESPONSE_TOKENS
from ...render.model_picture import first_picture_as_trained
from ...types import ImagePart, Message, Sampling, TextPart, Usage

REQUEST_ID_HEADER = "X-Request-ID"
#: the sglang router (``--policy manual``) pins every request with the same key to one worker: keyed by the
#: candidate id, all turns of an inspection (and the candidate's other tasks, which share its picture) stay on
#: one replica's prefix cache when a gateway stands in front of the replicas
ROUTING_KEY_HEADER = "X-SMG-Routing-Key"


#: the sampling fields every request carries, besides max_tokens (vLLM and SGLang take all of them on
#: chat completions; OpenAI's own API does not know top_k, min_p and repetition_penalty)
PINNED_SAMPLING_FIELDS = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty", "presence_penalty",
                          "frequency_penalty")


def sampling_fields(sampling: Sampling) -> dict[str, Any]:
    """The pinned sampling of one request, as sent."""
    return {
        "temperature": float(sampling.temperature),
        "top_p": float(sampling.top_p),
        "top_k": int(sampling.top_k),
        "min_p": float(sampling.min_p),
        "repetition_penalty": float(sampling.repetition_penalty),
        "presence_penalty": float(sampling.presence_penalty),
        "frequency_penalty": float(sampling.frequency_penalty),
    }


class WireError(ValueError):
    """A server reply that does not follow the chat-completions format."""


def data_url(png: bytes) -> str:
    """The ``image_url`` of a PNG: ``data:image/png;base64,...``."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


class ImageEncoder:
    """PNG bytes -> data URL, memoised: the full view is resent every turn and must be byte-identical.

    ``first=True`` sends the picture as training handed its first picture on (resized the way qwen-vl-utils'
    ``fetch_image`` resized it, :mod:`spec_vetting.render.model_picture`); zoom pictures go as rendered.
    """

    def __init__(self):
        self._cache: dict[tuple[int, bool], tuple[bytes, str]] = {}

    def __call__(self, png: bytes, *, first: bool = False) -> str:
        hit = self._cache.get((id(png), first))
        if hit is not None and hit[0] is png:
            return hit[1]
        url = data_url(first_picture_as_trained(png) if first else png)
        self._cache[(id(png), first)] = (png, url)
        return url


def message_to_wire(message: Message, encode_image=None, *, first: bool = False) -> dict[str, Any]:
    """One message as JSON: a plain string when it holds text only, else a list of parts in order.

    ``first``: this is the first user message, whose picture is the first picture (see :class:`ImageEncoder`).
    """
    encode_image = encode_image or ImageEncoder()
    if all(isinstance(p, TextPart) for p in message.parts):
        return {"role": message.role, "content": message.text}
    content = []
    for p in message.parts:
        if isinstance(p, ImagePart):
            content.append({"type": "image_url", "image_url": {"url": encode_image(p.png, first=first)}})
        else:
            content.append({"type": "text", "text": p.text})
    return {"role": message.role, "content": content}


def messages_to_wire(messages: list[Message], encode_image=None) -> list[dict[str, Any]]:
    """The conversation as JSON messages; the first user message's picture goes as training's first picture."""
    encode_image = encode_image or ImageEncoder()
    first_user = next((i for i, m in enumerate(messages) if m.role == "user"), None)
    return [message_to_wire(m, encode_image, first=i == first_user) for i, m in enumerate(messages)]


def chat_request_body(messages: list[Message], *, model: str, sampling: Sampling,
                      encode_image=None) -> dict[str, Any]:
    """The JSON body of ``POST {base}/chat/completions`` for one assistant turn."""
    encode_image = encode_image or ImageEncoder()
    body: dict[str, Any] = {
        "model": model,
        "messages": messages_to_wire(messages, encode_image),
        "stream": False,
        **sampling_fields(sampling),
    }
    # the loop always sets it (training's rule: what is left of the response budget); a bare call may not
    body["max_tokens"] = int(sampling.max_tokens) if sampling.max_tokens is not None else RESPONSE_TOKENS
    if sampling.seed is not None:
        body["seed"] = int(sampling.seed)
    if sampling.logprobs:
        body["logprobs"] = True
        body["top_logprobs"] = max(int(sampling.top_logprobs), 5)
    return body


def _json(value: Any) -> bytes:
    # exactly what httpx's ``json=`` sends (httpx._content.encode_json), so the server parses the same request
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


class RequestEncoder:
    """The bytes of one inspection's request bodies, each message serialised once.

    Every turn resends the whole conversation, so serialising each body from scratch would encode the first turn's
    messages (and their pictures, ~80 kB of base64 each) once per turn. Here each message's JSON is kept (per
    :class:`Message` object: the loop appends to its conversation and never changes a message) and a body is the
    request fields around the joined messages: byte for byte what ``json.dumps`` gives for
    :func:`chat_request_body`'s dict with httpx's settings. One encoder per inspection: it holds its messages.
    """

    def __init__(self, encode_image: ImageEncoder | None = None):
        self.encode_image = encode_image or ImageEncoder()
        self._messages: dict[tuple[int, bool], tuple[Message, bytes]] = {}

    def message(self, message: Message, *, first: bool = False) -> bytes:
        """One message's JSON; ``first``: the first user message (its picture goes as training's first picture)."""
        hit = self._messages.get((id(message), first))
        if hit is not None and hit[0] is message:
            return hit[1]
        encoded = _json(message_to_wire(message, self.encode_image, first=first))
        self._messages[(id(message), first)] = (message, encoded)
        return encoded

    def body(self, messages: list[Message], *, model: str, sampling: Sampling, omit: tuple[str, ...] = ()) -> bytes:
        """The JSON body of ``POST {base}/chat/completions``: :func:`chat_request_body` serialised, less the fields
        in ``omit`` (sampling fields a server refused, in a run that allowed it)."""
        fields = chat_request_body([], model=model, sampling=sampling, encode_image=self.encode_image)
        first_user = next((i for i, m in enumerate(messages) if m.role == "user"), None)
        parts = []  # joined once at the end: the body is copied once, not once per nesting level
        for k, v in fields.items():
            if k in omit:
                continue
            parts.append(b"," + _json(k) + b":" if parts else b"{" + _json(k) + b":")
            if k == "messages":
                parts.append(b"[")
                for n, m in enumerate(messages):
                    if n:
                        parts.append(b",")
                    parts.append(self.message(m, first=n == first_user))
                parts.append(b"]")
            else:
                parts.append(_json(v))
        parts.append(b"}")
        return b"".join(parts)


@dataclass
class ChatReply:
    text: str
    finish_reason: str | None
    usage: Usage
    p_yes: float | None
    model: str | None


#: more tokens than any request can hold (Qwen2.5-VL's context is 128k): a count above it is not a count
MAX_TOKEN_COUNT = 10_000_000


def _token_count(v: Any, field: str) -> int | None:
    """A token count as the server gave it: None when absent, else a finite non-negative whole number up to
    :data:`MAX_TOKEN_COUNT`; anything else (NaN, Infinity, negative, fractional, text) is a :class:`WireError`
    naming the field (a bad count would be summed into the catalog and shrink the next turn's budget)."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise WireError(f"usage.{field} is {type(v).__name__} {str(v)[:40]!r}, not a token count")
    if isinstance(v, float) and (not math.isfinite(v) or not v.is_integer()):
        raise WireError(f"usage.{field} is {v!r}, not a whole finite number of tokens")
    if not 0 <= v <= MAX_TOKEN_COUNT:
        raise WireError(f"usage.{field} is {v!r}, outside 0..{MAX_TOKEN_COUNT} tokens")
    return int(v)


def usage_from_wire(usage: Any) -> Usage:
    """Usage with missing fields as None (cached tokens from ``prompt_tokens_details.cached_tokens``); a count
    that is present but impossible is a :class:`WireError`."""
    if not isinstance(usage, dict):
        return Usage()
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    out = Usage(_token_count(usage.get("prompt_tokens"), "prompt_tokens"),
                _token_count(usage.get("completion_tokens"), "completion_tokens"),
                _token_count(cached, "prompt_tokens_details.cached_tokens"))
    if out.cached_tokens is not None and out.prompt_tokens is not None and out.cached_tokens > out.prompt_tokens:
        raise WireError(f"usage.prompt_tokens_details.cached_tokens {out.cached_tokens} exceeds usage.prompt_tokens "
                        f"{out.prompt_tokens}")
    return out


def p_yes_from_logprobs(logprobs: Any) -> float | None:
    """P(YES) / (P(YES) + P(NO)) at the token of the verdict the answer reader takes; None when it cannot be read.

    The verdict is located by :func:`spec_vetting.answers.locate_verdict` on the text the tokens spell (the same
    locator the loop and the local engine use). Works whether the tokenizer splits ``\\boxed{`` and ``YES`` or
    fuses ``{YES``.
    """
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list) or not content:
        return None
    text = ""
    ends = []  # character offset where each token ends
    for item in content:
        tok = item.get("token", "") if isinstance(item, dict) else ""
        text += str(tok)
        ends.append(len(text))
    after = locate_verdict(text)
    if after is None:
        return None
    # the token holding the verdict's first letter (it may also carry text before it, e.g. a fused "{YES")
    idx = next((i for i, end in enumerate(ends) if end > after), None)
    if idx is None:
        return None
    start_of_idx = ends[idx - 1] if idx > 0 else 0
    item = content[idx]
    alts = item.get("top_logprobs") if isinstance(item, dict) else None
    if not isinstance(alts, list) or not alts:
        alts = [item]
    lead = text[start_of_idx:after]  # what the token writes before the verdict's letter (a fused "{YES")
    return verdict_probability(((str(a.get("token", "")), a.get("logprob")) for a in alts if isinstance(a, dict)),
                               lead)


def tool_calls_as_text(tool_calls: Any) -> str:
    """The ``<tool_call>`` blocks a server's tool-call parser took out of the text, written back as the model wrote
    them (the Qwen2.5 chat template's form: name first, then the arguments as the model typed them)."""
    blocks = []
    for call in tool_calls if isinstance(tool_calls, list) else []:
        fn = call.get("function", call) if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            continue
        args = fn.get("arguments")
        args_text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        blocks.append(f'<tool_call>\n{{"name": "{fn["name"]}", "arguments": {args_text}}}\n</tool_call>')
    return "\n".join(blocks)


def parse_chat_response(data: Any) -> ChatReply:
    """The first choice of a chat-completions reply; :class:`WireError` when the shape is wrong."""
    if not isinstance(data, dict):
        raise WireError(f"reply is {type(data).__name__}, not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise WireError("reply has no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise WireError("reply choice has no message")
    content = message.get("content")
    if isinstance(content, list):  # some servers answer with parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if content is not None and not isinstance(content, str):
        raise WireError(f"message content is {type(content).__name__}, not text")
    text = content or ""
    # a server started with a tool-call parser moves <tool_call> out of the text: put it back, or the zoom is lost
    calls = tool_calls_as_text(message.get("tool_calls"))
    if calls and "<tool_call>" not in text:
        text = f"{text}\n{calls}" if text else calls
    # a server that splits reasoning out (SGLang --reasoning-parser) must not lose the <think> part we replay
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning and "<think>" not in text:
        text = f"<think>{reasoning}</think>\n{text}"
    return ChatReply(text=text, finish_reason=choice.get("finish_reason"), usage=usage_from_wire(data.get("usage")),
                     p_yes=p_yes_from_logprobs(choice.get("logprobs")), model=data.get("model"))


def model_ids(data: Any) -> list[str]:
    """Model ids of a ``GET {base}/models`` reply."""
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return []
    return [str(m["id"]) for m in items if isinstance(m, dict) and m.get("id")]
