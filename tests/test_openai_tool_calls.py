"""A server started with a tool-call parser (vLLM/SGLang ``--tool-call-parser``, ``transformers serve``) moves the
``<tool_call>`` block out of the text into ``message.tool_calls``. The client writes it back exactly as the model
wrote it, so the loop zooms and the replayed turn is the trained one.

The oracle is the shipped chat template: rendering an assistant message that carries ``tool_calls`` gives the
text the model generated after ``<|im_start|>assistant\\n``.
"""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
import pytest

from spec_vetting.engines.http.wire import parse_chat_response
from spec_vetting.inspect.parsing import parse_tool_call
from spec_vetting.protocol import TOOL_NAME

TEMPLATE = Path(__file__).resolve().parents[1] / "deploy" / "chat_template.jinja"
ARGS = '{"wavelength_range": [6500, 6620], "label": "H\\u03b1 region"}'


def _rendered_assistant_text(message: dict) -> str:
    env = jinja2.Environment(extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = lambda v: json.dumps(v, ensure_ascii=False)
    text = env.from_string(TEMPLATE.read_text()).render(messages=[message], add_generation_prompt=False)
    head, tail = "<|im_start|>assistant\n", "<|im_end|>"  # no newline after an assistant turn (training's stream)
    assert head in text and text.endswith(tail), text
    return text[text.rindex(head) + len(head):-len(tail)]


def _reply(message: dict) -> dict:
    return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}], "usage": {}}


@pytest.mark.parametrize("content", ["<think>Hα first.</think>", ""])
def test_server_parsed_tool_call_is_written_back_as_the_model_wrote_it(content):
    calls = [{"id": "call_1", "type": "function", "function": {"name": TOOL_NAME, "arguments": ARGS}}]
    message = {"role": "assistant", "content": content or None, "tool_calls": calls}
    text = parse_chat_response(_reply(message)).text
    assert text == _rendered_assistant_text({"role": "assistant", "content": content, "tool_calls": calls})
    call = parse_tool_call(text)
    assert call is not None and call.name == TOOL_NAME
    assert call.arguments["wavelength_range"] == [6500, 6620]


def test_text_that_already_holds_the_call_is_left_alone():
    raw = f'<tool_call>\n{{"name": "{TOOL_NAME}", "arguments": {ARGS}}}\n</tool_call>'
    message = {"role": "assistant", "content": raw,
               "tool_calls": [{"function": {"name": TOOL_NAME, "arguments": ARGS}}]}
    assert parse_chat_response(_reply(message)).text == raw
