"""Issue 4 test 2 over the wire: the trained tiny model served on loopback, driven by the HTTP engine.

The loopback OpenAI-compatible server (tests/fake_server.py) answers every chat request with the same tiny model
through :meth:`LocalEngine.chat_completion` (the server side renders the received messages with the chat
template, as SGLang does). The loop must zoom and answer YES / well_formed exactly as it does in process, with the
same texts and the same token counts, and no request may carry a ``tools`` field.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("transformers")

from fake_server import FakeOpenAIServer  # noqa: E402
from tiny_qwen import (  # noqa: E402
    TRAJ_FINAL,
    TRAJ_TURN1,
    inspection_context,
    one_torch_thread,
    spectrum_renderer,
    tiny_model_dir,
    trained_model_dir,
)

from spec_vetting.types import Sampling  # noqa: E402
from spec_vetting.engines.local.engine import LocalEngine  # noqa: E402
from spec_vetting.inspect.loop import run_inspection  # noqa: E402
from spec_vetting.inspect.tasks import get_task  # noqa: E402

__all__ = ["one_torch_thread", "tiny_model_dir", "trained_model_dir"]  # fixtures imported so pytest finds them


def _inspect(engine, candidate_id: str, sampling: Sampling):
    async def main():
        await engine.start()
        try:
            return await run_inspection(inspection_context(candidate_id), get_task("cv"), engine,
                                        sampling=sampling, renderer=spectrum_renderer())
        finally:
            await engine.close()

    return asyncio.run(main())


@pytest.mark.slow
def test_served_model_zooms_then_answers_yes_like_in_process(trained_model_dir):
    from spec_vetting.engines.http.engine import OpenAIEngine

    model = LocalEngine(trained_model_dir)
    model.load()
    sampling = Sampling(max_tokens=120, logprobs=True, top_logprobs=5)
    with FakeOpenAIServer(reply=lambda messages, body: model.chat_completion(body),
                          model=trained_model_dir.name) as server:
        over_http = _inspect(OpenAIEngine([server.base_url], timeout_s=60), "http-1", sampling)
        bodies = [r.body for r in server.chat_requests]
    in_process = _inspect(LocalEngine(trained_model_dir), "http-1", sampling)

    assert [t.assistant_text for t in over_http.turns] == [TRAJ_TURN1, TRAJ_FINAL]
    assert over_http.verdict == "YES" and over_http.status == "well_formed", over_http.error_message
    assert over_http.n_tool_calls == 1 and over_http.turns[0].zoom_window == (6500.0, 6600.0)
    assert over_http.engine == "openai" and over_http.model == trained_model_dir.name

    # the same conversation, the same tokens: the server renders what the in-process engine renders
    assert [t.assistant_text for t in in_process.turns] == [t.assistant_text for t in over_http.turns]
    assert [t.usage.prompt_tokens for t in in_process.turns] == [t.usage.prompt_tokens for t in over_http.turns]
    assert [t.usage.completion_tokens for t in in_process.turns] == [t.usage.completion_tokens
                                                                    for t in over_http.turns]
    # p_yes read by the HTTP client from the served logprobs agrees with the engine's own reading
    assert over_http.p_yes_source == "logprobs" and in_process.p_yes_source == "logprobs"
    assert over_http.p_yes == pytest.approx(in_process.p_yes, abs=1e-4) and over_http.p_yes > 0.9

    assert len(bodies) == 2 and all("tools" not in b for b in bodies)
    assert all(b["temperature"] == 0.0 and b["max_tokens"] == 120 for b in bodies)


def test_chat_completion_reports_real_usage_and_logprobs(tiny_model_dir):
    model = LocalEngine(tiny_model_dir)
    body = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 5, "temperature": 0,
            "logprobs": True, "top_logprobs": 3}
    data = model.chat_completion(body)
    choice = data["choices"][0]
    n = data["usage"]["completion_tokens"]
    assert data["usage"]["prompt_tokens"] == model.complete_openai(body["messages"], Sampling(max_tokens=5)) \
        .usage.prompt_tokens
    assert choice["finish_reason"] in ("stop", "length") and 1 <= n <= 5
    tokens = choice["logprobs"]["content"]
    assert "".join(t["token"] for t in tokens) == choice["message"]["content"]
    for t in tokens:  # greedy: the chosen token is the most likely one
        assert len(t["top_logprobs"]) == 3
        assert t["logprob"] == pytest.approx(t["top_logprobs"][0]["logprob"], abs=1e-5)
