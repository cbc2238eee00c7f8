"""The chat-completions wire format (engines/http/wire.py): request bodies out, replies in, p_yes from logprobs."""

from __future__ import annotations

import asyncio
import base64
import json
import math

import pytest
from fake_server import FakeOpenAIServer

from spec_vetting.engines.http import wire
from spec_vetting.engines.http.engine import OpenAIEngine
from spec_vetting.engines.http.wire import (
    RequestEncoder,
    WireError,
    chat_request_body,
    model_ids,
    p_yes_from_logprobs,
    parse_chat_response,
    usage_from_wire,
)
from spec_vetting.errors import EngineError
from spec_vetting.inspect.conversation import assistant_message, build_initial_messages, tool_response_message
from spec_vetting.types import Sampling, Usage

FULL = b"\x89PNG full view"
ZOOM = b"\x89PNG zoom"


def conversation():
    return [*build_initial_messages("Analyze **CV**.", FULL), assistant_message("<think>x</think><tool_call>{}"),
            tool_response_message("Generated full spectrum visualization.", ZOOM),
            assistant_message("<think>y</think>"), tool_response_message("Error: no", None)]


def test_request_body_follows_the_wire_rules():
    body = chat_request_body(conversation(), model="spec-o3-7b", sampling=Sampling())
    # no tools, no seed; the whole sampling pinned
    assert set(body) == {"model", "messages", "stream", "temperature", "top_p", "max_tokens", "top_k", "min_p",
                         "repetition_penalty", "presence_penalty", "frequency_penalty"}
    assert body["model"] == "spec-o3-7b" and body["stream"] is False
    # training: the response budget (protocol.RESPONSE_TOKENS)
    assert body["temperature"] == 0.0 and body["max_tokens"] == 32768
    # training's rollouts (verl agent loop + SGLang defaults): greedy, no top-k, no min-p, neutral penalties, so a
    # checkpoint's generation_config.json (Qwen ships repetition_penalty 1.05, top_k 1) cannot apply
    assert (body["top_p"], body["top_k"], body["min_p"]) == (1.0, -1, 0.0)
    assert (body["repetition_penalty"], body["presence_penalty"], body["frequency_penalty"]) == (1.0, 0.0, 0.0)
    msgs = body["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert isinstance(msgs[0]["content"], str) and isinstance(msgs[2]["content"], str)
    assert msgs[5] == {"role": "user", "content": "<tool_response>\nError: no\n</tool_response>"}  # text only
    image = msgs[1]["content"][0]["image_url"]["url"]
    assert image == "data:image/png;base64," + base64.b64encode(FULL).decode()
    assert [p["type"] for p in msgs[3]["content"]] == ["text", "image_url", "text"]


def test_request_body_seed_and_logprobs_only_when_asked():
    body = chat_request_body(conversation(), model="m",
                             sampling=Sampling(temperature=0.7, top_p=0.9, max_tokens=300, seed=11, logprobs=True,
                                               top_logprobs=2))
    assert body["seed"] == 11 and body["logprobs"] is True
    assert body["top_logprobs"] == 5  # at least 5 alternatives, so both verdict words show up
    assert body["temperature"] == 0.7 and body["top_p"] == 0.9 and body["max_tokens"] == 300


def httpx_json(body: dict) -> bytes:
    """What ``httpx.post(json=body)`` sends (its encode_json settings), written out here as the oracle."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


@pytest.mark.parametrize("sampling", [
    Sampling(),
    Sampling(temperature=0.7, top_p=0.9, max_tokens=300, seed=11, logprobs=True, top_logprobs=2),
])
def test_request_bytes_are_the_json_of_the_request_body_turn_after_turn(sampling):
    conv = conversation()
    conv.append(assistant_message('<think>Hα at 6563 Å, "quoted" \\ back</think>\n<tool_call>\n{}\n</tool_call>'))
    conv.append(tool_response_message("Generated Hα (6500, 6600) \u00e9", b"\x89PNG third\x00\xff"))
    encoder = RequestEncoder()
    for upto in (2, 4, 6, len(conv)):  # the conversation grows as an inspection goes on
        sent = encoder.body(conv[:upto], model="spec-o3-7b", sampling=sampling)
        assert sent == httpx_json(chat_request_body(conv[:upto], model="spec-o3-7b", sampling=sampling))


def test_request_encoder_serialises_each_message_once(monkeypatch):
    calls = []
    real = wire.message_to_wire
    monkeypatch.setattr(wire, "message_to_wire", lambda m, enc=None, **kw: calls.append(m) or real(m, enc, **kw))
    images = []
    real_url = wire.data_url
    monkeypatch.setattr(wire, "data_url", lambda png: images.append(png) or real_url(png))
    conv = conversation()
    encoder = RequestEncoder()
    for upto in range(2, len(conv) + 1):
        encoder.body(conv[:upto], model="m", sampling=Sampling())
    assert len(calls) == len(conv) and {id(m) for m in calls} == {id(m) for m in conv}
    assert images == [FULL, ZOOM]  # each picture base64-encoded once per inspection


@pytest.mark.parametrize(
    "usage, expected",
    [
        ({"prompt_tokens": 900, "completion_tokens": 40, "prompt_tokens_details": {"cached_tokens": 850}},
         Usage(900, 40, 850)),
        ({"prompt_tokens": 900, "completion_tokens": 40}, Usage(900, 40, None)),  # vLLM without prefix stats
        ({"prompt_tokens": 900, "completion_tokens": 40, "prompt_tokens_details": None}, Usage(900, 40, None)),
        ({"completion_tokens": 40}, Usage(None, 40, None)),
        (None, Usage(None, None, None)),
        ("garbage", Usage(None, None, None)),
    ],
)
def test_usage_missing_fields_are_none(usage, expected):
    assert usage_from_wire(usage) == expected


@pytest.mark.parametrize("usage, field", [
    ({"prompt_tokens": float("nan"), "completion_tokens": 4}, "usage.prompt_tokens"),
    ({"prompt_tokens": 9, "completion_tokens": float("inf")}, "usage.completion_tokens"),
    ({"prompt_tokens": -6000000, "completion_tokens": 4}, "usage.prompt_tokens"),
    ({"prompt_tokens": 9, "completion_tokens": 2.5}, "usage.completion_tokens"),
    ({"prompt_tokens": True, "completion_tokens": 4}, "usage.prompt_tokens"),
    ({"prompt_tokens": 9, "completion_tokens": "40"}, "usage.completion_tokens"),
    ({"prompt_tokens": 10**12, "completion_tokens": 4}, "usage.prompt_tokens"),
    ({"prompt_tokens": 9, "prompt_tokens_details": {"cached_tokens": -1}}, "cached_tokens"),
    ({"prompt_tokens": 9, "prompt_tokens_details": {"cached_tokens": 10}}, "cached_tokens"),
])
def test_impossible_token_counts_are_a_malformed_reply(usage, field):
    from spec_vetting.engines.http.wire import WireError

    with pytest.raises(WireError, match=field.replace(".", r"\.")):
        usage_from_wire(usage)
    assert usage_from_wire({"prompt_tokens": 9.0, "completion_tokens": 0}) == Usage(9, 0, None)


def lp(*tokens):
    """A logprobs block: each token is (text, {alternative: probability}) or just text."""
    content = []
    for t in tokens:
        text, alts = (t, {}) if isinstance(t, str) else t
        content.append({"token": text, "logprob": -0.01,
                        "top_logprobs": [{"token": a, "logprob": math.log(p)} for a, p in alts.items()]})
    return {"content": content}


@pytest.mark.parametrize(
    "logprobs, expected",
    [
        # verdict as its own token after the brace
        (lp("<answer>", "\\boxed{", ("YES", {"YES": 0.6, "NO": 0.2, "maybe": 0.2}), "}", "</answer>"), 0.75),
        # brace fused with the verdict ("{YES" is one token in some vocabularies)
        (lp("<answer>\\boxed", ("{NO", {"{NO": 0.3, "{YES": 0.1}), "}</answer>"), 0.25),
        # spacing and case variants, and verdict words split into pieces ("Y" + "ES")
        (lp("<answer>\\boxed{", (" Yes", {" Yes": 0.5, " no": 0.5}), "}</answer>"), 0.5),
        (lp("<answer>\\boxed{", ("Y", {"Y": 0.9, "N": 0.1}), "ES}</answer>"), 0.9),
        # as upstream scores: the verdict taken is the FIRST box of the answer, and p_yes is read there
        (lp("<answer>\\boxed{", ("YES", {"YES": 0.8, "NO": 0.2}), "} not \\boxed{", ("NO", {"NO": 0.8, "YES": 0.2}),
            "}</answer>"), 0.8),
        # no alternatives given: the chosen token alone
        ({"content": [{"token": "<answer>\\boxed{", "logprob": 0.0}, {"token": "NO", "logprob": -0.1},
                      {"token": "}</answer>", "logprob": 0.0}]}, 0.0),
        # an answer block without a box: its word is the verdict (answer_word), read at that token
        (lp("<answer>", ("YES", {"YES": 0.7, "NO": 0.3}), "</answer>"), 0.7),
        # no verdict: a box outside any answer block is not one, nor a box of another word
        (lp("\\boxed{", ("YES", {"YES": 0.6, "NO": 0.4}), "}"), None),
        (lp("<answer>\\boxed{", ("maybe", {"maybe": 1.0}), "}</answer>"), None),
        (lp("\\boxed{"), None),
        ({"content": []}, None),
        (None, None),
        ("garbage", None),
    ],
)
def test_p_yes_from_logprobs(logprobs, expected):
    got = p_yes_from_logprobs(logprobs)
    assert got == (None if expected is None else pytest.approx(expected))


def test_parse_chat_response_shapes():
    ok = {"model": "m", "choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
          "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
    r = parse_chat_response(ok)
    assert (r.text, r.finish_reason, r.usage, r.p_yes, r.model) == ("hi", "stop", Usage(3, 1, None), None, "m")
    # no content at all (cut at once) is an empty text, not an error
    empty = {"choices": [{"message": {"role": "assistant", "content": None}, "finish_reason": "length"}]}
    assert parse_chat_response(empty).text == ""
    # content as parts
    parts = {"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}}]}
    assert parse_chat_response(parts).text == "ab"
    # a server that split the reasoning out (--reasoning-parser) gets it back in front, so the replay is whole
    split = {"choices": [{"message": {"content": "<answer>\\boxed{NO}</answer>", "reasoning_content": "dim"}}]}
    assert parse_chat_response(split).text == "<think>dim</think>\n<answer>\\boxed{NO}</answer>"


@pytest.mark.parametrize(
    "data, why",
    [([], "not a JSON object"), ({}, "no choices"), ({"choices": []}, "no choices"), ({"choices": ["x"]}, "no choices"),
     ({"choices": [{"text": "legacy"}]}, "no message"), ({"choices": [{"message": {"content": 3}}]}, "not text")],
)
def test_parse_chat_response_rejects_other_shapes(data, why):
    with pytest.raises(WireError, match=why):
        parse_chat_response(data)


def test_model_ids():
    assert model_ids({"data": [{"id": "a"}, {"id": ""}, {"x": 1}, {"id": "b"}]}) == ["a", "b"]
    assert model_ids({"data": "nope"}) == [] and model_ids(None) == []


def test_start_without_model_when_the_server_lists_none():
    with FakeOpenAIServer(model="") as srv:
        eng = OpenAIEngine([srv.base_url], health_interval_s=0)
        with pytest.raises(EngineError, match="lists no model; pass --model") as info:
            asyncio.run(eng.start())
        assert info.value.kind == "no_model"
        assert not srv.chat_requests  # no probe chats, even to find a model
