"""The OpenAI-compatible HTTP engine against the local fake server: wire rules, identity, routing, faults."""

from __future__ import annotations

import asyncio
import base64
import time

import numpy as np
import pytest
from fake_server import ANSWER_YES, ZOOM_HALPHA, FakeOpenAIServer, Fault, dead_endpoint, spec_o3_reply

from spec_vetting.engines import create_engine
from spec_vetting.engines.http.engine import OpenAIEngine, normalize_endpoint
from spec_vetting.engines.http.routing import pick_endpoint, server_root
from spec_vetting.errors import ConfigError, EngineError
from spec_vetting.inspect.loop import run_inspection
from spec_vetting.inspect.tasks import get_task
from spec_vetting.spectrum import Spectrum, SpectrumMeta
from spec_vetting.types import InspectionContext, Sampling

FAST = dict(timeout_s=2.0, connect_timeout_s=1.0, max_retries=2, backoff_initial_s=0.01, backoff_max_s=0.05,
            health_interval_s=0.2)


def png_renderer(wavelength, flux, wavelength_range=None, title="Spectrum"):
    return b"\x89PNG\r\n\x1a\n" + repr(wavelength_range).encode()


def spectrum():
    wl = np.linspace(3700.0, 9100.0, 300)
    return Spectrum(wl, np.ones_like(wl), np.ones_like(wl), np.zeros(wl.shape, bool), "",
                    SpectrumMeta(survey="lamost", variant="lamost-lrs-image"))


SPEC = spectrum()


def inspect_many(engine, ids, **kw):
    async def main():
        await engine.start()
        try:
            return await asyncio.gather(*(
                run_inspection(InspectionContext(candidate_id=c, task="cv", run_id="r1", spectrum=SPEC),
                               get_task("cv"), engine, renderer=png_renderer, **kw) for c in ids))
        finally:
            await engine.close()

    return asyncio.run(main())


def assert_wire_rules(server, model="fake-spec-o3"):
    for req in server.chat_requests:
        body = req.body
        assert "tools" not in body and "tool_choice" not in body
        assert body["model"] == model and body["stream"] is False
        assert body["temperature"] == 0.0 and body["max_tokens"] > 0
        for m in body["messages"]:
            if isinstance(m["content"], list):
                for part in m["content"]:
                    if part["type"] == "image_url":
                        assert part["image_url"]["url"].startswith("data:image/png;base64,")


def test_endpoint_urls():
    assert normalize_endpoint("http://h:30000") == "http://h:30000/v1"
    assert normalize_endpoint("http://h:30000/v1/") == "http://h:30000/v1"
    assert normalize_endpoint("http://h/v1/chat/completions") == "http://h/v1"
    assert server_root("http://h:30000/v1") == "http://h:30000"
    with pytest.raises(ConfigError):
        normalize_endpoint("h:30000")
    with pytest.raises(ConfigError):
        OpenAIEngine([])


def test_one_inspection_wire_and_identity(monkeypatch, caplog):
    monkeypatch.setenv("SPEC_VETTING_API_KEY", "sk-secret-123")
    caplog.set_level("DEBUG")
    with FakeOpenAIServer() as srv:
        eng = OpenAIEngine([srv.base_url], **FAST)
        [r] = inspect_many(eng, ["cand-1"])
        assert (r.verdict, r.status) == ("YES", "well_formed")
        assert r.engine == "openai" and r.model == "fake-spec-o3"
        assert eng.identity().model_info["server_model_info"]["model_path"] == "fake-spec-o3"
        chats = srv.chat_requests
        assert len(chats) == 2  # one POST per assistant turn, no probe chats
        assert_wire_rules(srv)
        first, second = chats[0].body["messages"], chats[1].body["messages"]
        assert first[0]["role"] == "system" and "# Tools" in first[0]["content"]
        assert first[1]["content"][0]["type"] == "image_url"
        assert first[1]["content"][1] == {"type": "text", "text": "\n" + get_task("cv").prompt}
        assert second[2] == {"role": "assistant", "content": ZOOM_HALPHA}
        tool_msg = second[3]["content"]
        assert tool_msg[0] == {"type": "text", "text": "<tool_response>\n"}
        assert base64.b64decode(tool_msg[1]["image_url"]["url"].split(",")[1]).endswith(b"(6500.0, 6600.0)")
        assert tool_msg[2]["text"].endswith("\n</tool_response>")
        # the full view is byte-identical in both requests (prefix cache)
        assert first[1]["content"][0] == second[1]["content"][0]
        assert [c.headers.get("X-Request-ID") for c in chats] == ["r1/cand-1/0", "r1/cand-1/1"]
        # a gateway in manual policy keeps the inspection on one replica by this key
        assert [c.headers.get("X-SMG-Routing-Key") for c in chats] == ["cand-1", "cand-1"]
        assert all(c.headers.get("Authorization") == "Bearer sk-secret-123" for c in srv.requests)
        gets = [q.path for q in srv.requests if q.method == "GET"]
        assert "/health" in gets and "/v1/models" in gets and "/get_model_info" in gets
        t0 = r.turns[0]
        assert t0.usage.prompt_tokens is not None and t0.usage.cached_tokens is not None
        assert t0.endpoint == srv.base_url and t0.latency_s > 0
    assert "sk-secret-123" not in caplog.text and "sk-secret-123" not in repr(eng)


def test_api_key_never_logged_or_recorded_on_retries_and_errors(monkeypatch, caplog):
    """Retried failures are logged and the final one is recorded on the row: the key must appear in neither,
    even when a proxy echoes the Authorization header back in its error body."""
    key = "sk-secret-456"
    monkeypatch.setenv("SPEC_VETTING_API_KEY", key)
    caplog.set_level("DEBUG")
    echo = f"upstream refused Authorization: Bearer {key}"
    with FakeOpenAIServer() as srv:
        srv.push_faults(Fault.status(500, echo), Fault.rate_limit("0.01"), Fault.drop(), Fault.status(401, echo))
        eng = OpenAIEngine([srv.base_url], **{**FAST, "max_retries": 3})
        [r] = inspect_many(eng, ["c"])
        assert r.verdict == "ERROR" and r.error_kind == "http_401"
        assert "upstream refused" in r.error_message and "***" in r.error_message
        assert "SPEC_VETTING_API_KEY" in r.error_message  # where to fix it
        assert all(q.headers.get("Authorization") == f"Bearer {key}" for q in srv.chat_requests)
    assert "upstream refused" in caplog.text  # the retry was logged ...
    assert key not in caplog.text and key not in r.error_message  # ... without the key


def test_missing_usage_recorded_as_missing_and_explicit_model():
    with FakeOpenAIServer(usage=False, model_info=False, health_endpoint=False) as srv:
        eng = OpenAIEngine(srv.base_url, model="my-model", **FAST)
        [r] = inspect_many(eng, ["c"], sampling=Sampling(temperature=0.3, max_tokens=77, seed=5))
        assert r.verdict == "YES"
        assert all(t.usage.prompt_tokens is None and t.usage.cached_tokens is None for t in r.turns)
        body = srv.chat_requests[0].body
        assert body["model"] == "my-model" and body["temperature"] == 0.3 and body["max_tokens"] == 77
        assert body["seed"] == 5


def test_cached_tokens_missing_only():
    with FakeOpenAIServer(cached_tokens=False) as srv:
        [r] = inspect_many(OpenAIEngine([srv.base_url], **FAST), ["c"])
        assert r.turns[0].usage.prompt_tokens is not None and r.turns[0].usage.cached_tokens is None


def test_logprobs_give_p_yes():
    with FakeOpenAIServer(p_yes=0.8) as srv:
        [r] = inspect_many(OpenAIEngine([srv.base_url], **FAST), ["c"],
                           sampling=Sampling(logprobs=True, top_logprobs=5))
        assert r.verdict == "YES" and r.p_yes == pytest.approx(0.8) and r.p_yes_source == "logprobs"
        assert srv.chat_requests[0].body["logprobs"] is True


class ConcurrencyMeter:
    """A fake-server reply that takes ``delay_s`` and records the most chat requests it served at once."""

    def __init__(self, delay_s: float = 0.03):
        import threading

        self._lock = threading.Lock()
        self.delay_s = delay_s
        self.now = self.max = 0

    def __call__(self, messages, body):
        with self._lock:
            self.now += 1
            self.max = max(self.max, self.now)
        time.sleep(self.delay_s)
        with self._lock:
            self.now -= 1
        return spec_o3_reply(messages, body)


def test_sticky_routing_and_inflight_cap():
    slow_reply = ConcurrencyMeter()

    with FakeOpenAIServer(reply=slow_reply) as a, FakeOpenAIServer(reply=slow_reply) as b:
        eng = OpenAIEngine([a.base_url, b.base_url], max_inflight_per_endpoint=2, **FAST)
        ids = [f"cand-{i}" for i in range(12)]
        results = inspect_many(eng, ids)
        assert all(r.verdict == "YES" for r in results)
        for r in results:  # every turn of an inspection on the endpoint it started on
            assert len({t.endpoint for t in r.turns}) == 1
        # the first inspections (free slots everywhere) start on their own hashed endpoint
        first = results[0]
        assert first.turns[0].endpoint == pick_endpoint(first.candidate_id, [a.base_url, b.base_url])
        assert a.chat_requests and b.chat_requests, "both endpoints should get work"
        # at most 2 inspections in flight per endpoint, 2 endpoints: never more than 4 requests at once
        assert 2 <= slow_reply.max <= 4
        assert all(s.in_flight == 0 for s in eng.router.states.values())


def test_inflight_cap_single_endpoint():
    # slow enough that the three admitted inspections overlap even on a loaded machine
    slow_reply = ConcurrencyMeter(delay_s=0.2)

    with FakeOpenAIServer(reply=slow_reply) as a:
        results = inspect_many(OpenAIEngine([a.base_url], max_inflight_per_endpoint=3, **FAST),
                               [f"c{i}" for i in range(10)])
        assert all(r.verdict == "YES" for r in results)
        assert slow_reply.max == 3


def test_start_fails_clearly_when_no_endpoint_is_up():
    eng = OpenAIEngine([dead_endpoint()], **FAST)
    with pytest.raises(EngineError, match="no endpoint answered its health check"):
        asyncio.run(eng.start())


def test_4xx_is_not_retried():
    with FakeOpenAIServer() as srv:
        srv.push_faults(Fault.status(400, "bad model"))
        [r] = inspect_many(OpenAIEngine([srv.base_url], **FAST), ["c"])
        assert r.verdict == "ERROR" and r.error_kind == "http_400" and "bad model" in r.error_message
        assert len(srv.chat_requests) == 1


def test_create_engine_factory():
    eng = create_engine("openai", endpoints=["http://127.0.0.1:1/v1"])
    assert isinstance(eng, OpenAIEngine)
    with pytest.raises(ConfigError, match="unknown engine"):
        create_engine("nope")
    with pytest.raises(ConfigError, match="bad options"):
        create_engine("openai", endpoints=["http://x/v1"], colour="red")


# --- fault injection: errors, rate limits, stalls, dropped connections and garbage from the server -------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "faults, verdict, min_chats",
    [
        ([Fault.status(500), Fault.status(502)], "YES", 4),  # retried, then fine
        ([Fault.rate_limit("0.2")], "YES", 3),  # Retry-After honoured
        ([Fault.sleep(3.0)], "YES", 3),  # client timeout (2 s), retried
        ([Fault.drop()], "YES", 3),  # dropped connection, retried
        ([Fault.garbage_text("lorem ipsum")], "UNDECIDED", 1),  # nonsense: no call, no answer
        ([Fault.garbage_body()], "ERROR", 1),  # not JSON: error row with reason
        ([Fault.status(500)] * 3, "ERROR", 3),  # retries exhausted
        ([Fault.rate_limit(None)] * 3, "ERROR", 3),
    ],
)
def test_faults_end_with_verdict_or_error(faults, verdict, min_chats):
    with FakeOpenAIServer() as srv:
        srv.push_faults(*faults)
        t0 = time.monotonic()
        [r] = inspect_many(OpenAIEngine([srv.base_url], **FAST), ["c"])
        assert r.verdict == verdict, (r.reason, r.error_kind, r.error_message)
        if verdict == "ERROR":
            assert r.error_kind and r.error_message
        if verdict == "UNDECIDED":
            assert r.reason
        assert len(srv.chat_requests) >= min_chats
        assert_wire_rules(srv)
        assert time.monotonic() - t0 < 20


def test_retry_after_is_waited():
    with FakeOpenAIServer() as srv:
        srv.push_faults(Fault.rate_limit("0.5"))
        inspect_many(OpenAIEngine([srv.base_url], **FAST), ["c"])
        t = [q.at for q in srv.chat_requests]
        assert t[1] - t[0] >= 0.45


@pytest.mark.timeout(60)
def test_one_dead_endpoint_among_three():
    dead = dead_endpoint()
    with FakeOpenAIServer() as a, FakeOpenAIServer() as b:
        eng = OpenAIEngine([a.base_url, dead, b.base_url], **FAST)
        ids = [f"cand-{i}" for i in range(9)]
        results = inspect_many(eng, ids)
        assert all(r.verdict == "YES" for r in results)
        assert all(t.endpoint in (a.base_url, b.base_url) for r in results for t in r.turns)
        assert_wire_rules(a)
        assert_wire_rules(b)


@pytest.mark.timeout(60)
def test_endpoint_dies_mid_inspection_rerun_elsewhere():
    with FakeOpenAIServer() as a, FakeOpenAIServer() as b:
        urls = [a.base_url, b.base_url]
        cid = "cand-x"
        pinned = a if pick_endpoint(cid, urls) == a.base_url else b
        other = b if pinned is a else a
        # first turn answers, then the pinned endpoint drops every connection: the inspection moves
        pinned.push_faults(Fault.sleep(0.0))
        pinned.always = Fault.drop()
        eng = OpenAIEngine(urls, **FAST)
        [r] = inspect_many(eng, [cid])
        assert r.verdict == "YES" and r.attempts == 2
        assert {t.endpoint for t in r.turns} == {other.base_url}
        assert len(other.chat_requests) == 2  # the rerun started from turn 0


@pytest.mark.timeout(60)
def test_every_endpoint_dead_mid_run_gives_error_rows():
    with FakeOpenAIServer() as a:
        eng = OpenAIEngine([a.base_url], **FAST)

        async def main():
            await eng.start()
            a.always = Fault.drop()  # the server dies after the engine started
            a.healthy = False
            try:
                return await asyncio.gather(*(
                    run_inspection(InspectionContext(candidate_id=c, task="cv", spectrum=SPEC), get_task("cv"), eng,
                                   renderer=png_renderer) for c in ("c1", "c2", "c3")))
            finally:
                await eng.close()

        results = asyncio.run(main())
        assert all(r.verdict == "ERROR" for r in results)
        assert {r.error_kind for r in results} <= {"engine_unavailable"}
        assert all(r.error_message for r in results)


def test_answer_after_zoom_sequence_of_turns_counts():
    replies = iter([ZOOM_HALPHA, ZOOM_HALPHA, ANSWER_YES])
    with FakeOpenAIServer(reply=lambda m, b: next(replies)) as srv:
        [r] = inspect_many(OpenAIEngine([srv.base_url], **FAST), ["c"])
        assert r.verdict == "YES" and len(r.turns) == 3 and r.n_tool_calls == 2
        last = srv.chat_requests[-1].body["messages"]
        assert [m["role"] for m in last] == ["system", "user", "assistant", "user", "assistant", "user"]


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_mixed_fault_batch_nothing_hangs_nothing_lost():
    """Three endpoints (one dead) serving a batch while 500s, 429s, timeouts, drops and garbage are injected."""
    import random

    rng = random.Random(7)
    kinds = [Fault.status(500), Fault.status(503), Fault.rate_limit("0.1"), Fault.sleep(2.5), Fault.drop(),
             Fault.garbage_text(), Fault.garbage_body(), Fault.status(502)]
    with FakeOpenAIServer(delay_s=0.01) as a, FakeOpenAIServer(delay_s=0.01) as b:
        for srv in (a, b):
            srv.push_faults(*(rng.choice(kinds) for _ in range(12)))
        eng = OpenAIEngine([a.base_url, dead_endpoint(), b.base_url], **FAST)
        ids = [f"cand-{i}" for i in range(16)]
        t0 = time.monotonic()
        results = inspect_many(eng, ids, time_budget_s=30)
        assert time.monotonic() - t0 < 60
        assert sorted(r.candidate_id for r in results) == sorted(ids)
        for r in results:
            assert r.verdict in ("YES", "NO", "UNDECIDED", "ERROR")
            if r.verdict == "UNDECIDED":
                assert r.reason
            if r.verdict == "ERROR":
                assert r.error_kind and r.error_message
        assert sum(r.verdict == "YES" for r in results) >= len(ids) // 2
        assert_wire_rules(a)
        assert_wire_rules(b)
