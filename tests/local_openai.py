"""The in-process engine answering an OpenAI chat-completions request body (test-only).

What a server returns for the same body, so the real-server tests can compare the in-process engine with vLLM
field by field (tests/test_vllm_server.py). Honours ``messages``, ``temperature``, ``top_p``, ``max_tokens``,
``seed``, ``logprobs`` and ``top_logprobs``; usage counts real tokens (image tokens included).
"""

from __future__ import annotations

import time
from typing import Any

from spec_vetting.engines.local.engine import GenerationRequest, LocalEngine
from spec_vetting.types import Sampling


def chat_completion(engine: LocalEngine, body: dict[str, Any]) -> dict[str, Any]:
    """A ``POST /v1/chat/completions`` response body from ``engine`` (blocking)."""
    sampling = Sampling(
        temperature=float(body.get("temperature", 0.0) or 0.0),
        top_p=float(body.get("top_p", 1.0) or 1.0),
        max_tokens=int(body.get("max_tokens") or body.get("max_completion_tokens") or 2048),
        seed=body.get("seed"),
        logprobs=bool(body.get("logprobs")),
        top_logprobs=int(body.get("top_logprobs") or 0),
    )
    reply, logprobs = engine._generate([GenerationRequest(list(body.get("messages") or []), sampling)])[0]
    choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": reply.text},
                              "finish_reason": reply.finish_reason}
    if logprobs is not None:
        choice["logprobs"] = logprobs
    u = reply.usage
    return {
        "id": f"chatcmpl-local-{time.time_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": engine.model_path.name,
        "choices": [choice],
        "usage": {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                  "total_tokens": (u.prompt_tokens or 0) + (u.completion_tokens or 0),
                  "prompt_tokens_details": {"cached_tokens": u.cached_tokens}},
    }
