"""The shipped chat templates render the client's conversation to the trained layout (protocol section 2).

A conversation built the client's way (tools block in the system text, tool results as user messages, assistant
turns replayed raw), sent as OpenAI-style message dicts, must render to the same string under the Spec-o3 RL
template (deploy/chat_template.jinja) and the stock Qwen2.5-VL template (deploy/chat_template_stock.jinja), and
that string must be the protocol's layout written out by hand below (a newline after each <|im_end|>, as a server
re-renders). The RL template must also render a training-style conversation (``tools`` + ``tool`` messages) to
that same string.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spec_vetting import protocol
from spec_vetting.types import ImagePart, Message, TextPart

pytest.importorskip("transformers")

from spec_vetting.engines.local.inputs import openai_messages  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
RL_TEMPLATE = (REPO / "deploy" / "chat_template.jinja").read_text()
STOCK_TEMPLATE = (REPO / "deploy" / "chat_template_stock.jinja").read_text()

PNG = b"\x89PNG fake bytes: templates never decode images"
TASK_TEXT = ("Analyze the provided spectrum to determine if it is a **Cataclysmic Variables (CV)**.\n"
             "- broad Balmer emission")
TURN1 = (
    "<think>Broad emission near H-alpha? Zoom.</think>\n<tool_call>\n"
    '{"name": "spectral_visualization_tool", "arguments": {"label": "Zoom on the H\u03b1 region", '
    '"wavelength_range": [6500, 6600]}}\n</tool_call>'
)
TOOL1 = ("Generated spectral visualization focused on wavelength range (6500, 6600) \u00c5 "
         "for Zoom on the H\u03b1 region.")
TURN2 = (
    "<think>Try a window outside the data.</think>\n<tool_call>\n"
    '{"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [100, 200]}}\n</tool_call>'
)
TOOL2 = ("Error: The specified wavelength range [100, 200] is invalid or outside the available data range "
         "[3700.0, 9100.0].")
FINAL = "<think>Broad, double-peaked H-alpha.</think>\n<answer>\\boxed{YES} Broad Balmer emission.</answer>"

IMG = "<|vision_start|><|image_pad|><|vision_end|>"

# Protocol section 2, written out by hand (the system text and tool line character for character).
EXPECTED_SYSTEM = (
    "<|im_start|>system\n"
    "You are a helpful assistant.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    '{"type": "function", "function": {"name": "spectral_visualization_tool", "description": "A tool for '
    'visualizing spectral data with wavelength range zooming capabilities.", "parameters": {"type": "object", '
    '"properties": {"wavelength_range": {"type": "array", "description": "Wavelength range to focus on '
    '[min_wavelength, max_wavelength] in Angstroms"}, "label": {"type": "string", "description": "Optional label '
    'for the spectral feature being analyzed"}}, "required": ["wavelength_range"]}}}'
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
)
EXPECTED = (
    EXPECTED_SYSTEM
    + "<|im_start|>user\n" + IMG + "\n" + TASK_TEXT + "<|im_end|>\n"
    + "<|im_start|>assistant\n" + TURN1 + "<|im_end|>\n"
    + "<|im_start|>user\n<tool_response>\n" + IMG + TOOL1 + "\n</tool_response><|im_end|>\n"
    + "<|im_start|>assistant\n" + TURN2 + "<|im_end|>\n"
    + "<|im_start|>user\n<tool_response>\n" + TOOL2 + "\n</tool_response><|im_end|>\n"
    + "<|im_start|>assistant\n"
)


def client_conversation() -> list[Message]:
    """The conversation as the client builds it (spec_vetting.inspect.conversation's builders when present, else the
    same list by hand from protocol.py)."""
    try:
        from spec_vetting.inspect.conversation import (
            assistant_message,
            build_initial_messages,
            tool_response_message,
        )
    except ImportError:  # pragma: no cover - the same list, from protocol.py
        return [
            Message("system", [TextPart(protocol.SYSTEM_TEXT)]),
            Message("user", [ImagePart(PNG), TextPart("\n" + TASK_TEXT)]),
            Message("assistant", [TextPart(TURN1)]),
            Message("user", [TextPart(protocol.TOOL_RESPONSE_OPEN), ImagePart(PNG),
                             TextPart(TOOL1 + protocol.TOOL_RESPONSE_CLOSE)]),
            Message("assistant", [TextPart(TURN2)]),
            Message("user", [TextPart(protocol.TOOL_RESPONSE_OPEN + TOOL2 + protocol.TOOL_RESPONSE_CLOSE)]),
        ]
    return [
        *build_initial_messages(TASK_TEXT, PNG),
        assistant_message(TURN1),
        tool_response_message(TOOL1, PNG),
        assistant_message(TURN2),
        tool_response_message(TOOL2, None),
    ]


def wire_messages(messages: list[Message]) -> list[dict]:
    """OpenAI-style dicts exactly as the HTTP engine sends them (the in-process engine uses the same converter)."""
    return openai_messages(messages)


@pytest.fixture(scope="module")
def tokenizer():
    from tiny_qwen import build_tokenizer

    return build_tokenizer(RL_TEMPLATE)


def render(tokenizer, messages, template, **kwargs):
    return tokenizer.apply_chat_template(messages, chat_template=template, tokenize=False, **kwargs)


def test_protocol_strings_match_the_hand_written_layout():
    assert EXPECTED_SYSTEM == "<|im_start|>system\n" + protocol.SYSTEM_TEXT + "<|im_end|>\n"


@pytest.mark.parametrize("template", [RL_TEMPLATE, STOCK_TEMPLATE], ids=["rl", "stock"])
def test_client_conversation_renders_to_the_protocol_layout(tokenizer, template):
    text = render(tokenizer, wire_messages(client_conversation()), template, add_generation_prompt=True)
    assert text == EXPECTED


def test_both_templates_agree_on_the_client_conversation(tokenizer):
    msgs = wire_messages(client_conversation())
    for gen in (True, False):
        assert render(tokenizer, msgs, RL_TEMPLATE, add_generation_prompt=gen) == render(
            tokenizer, msgs, STOCK_TEMPLATE, add_generation_prompt=gen
        )
    # a finished conversation: the final answer closes with <|im_end|> and a newline, no generation prompt
    done = msgs + [{"role": "assistant", "content": FINAL}]
    full = render(tokenizer, done, RL_TEMPLATE, add_generation_prompt=False)
    assert full == EXPECTED + FINAL + "<|im_end|>\n"
    assert full == render(tokenizer, done, STOCK_TEMPLATE, add_generation_prompt=False)


def test_rl_template_renders_training_style_conversation_identically(tokenizer):
    """tools= + role "tool" messages + parsed tool_calls (how verl fed the template) give the same string."""
    image = {"type": "image"}
    arguments = {"label": "Zoom on the H\u03b1 region", "wavelength_range": [6500, 6600]}
    msgs = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": [image, {"type": "text", "text": "\n" + TASK_TEXT}]},
        {"role": "assistant", "content": "<think>Broad emission near H-alpha? Zoom.</think>",
         "tool_calls": [{"type": "function", "function": {"name": protocol.TOOL_NAME, "arguments": arguments}}]},
        {"role": "tool", "content": [image, {"type": "text", "text": TOOL1}]},
        {"role": "assistant", "content": TURN2},
        {"role": "tool", "content": TOOL2},
    ]
    text = render(tokenizer, msgs, RL_TEMPLATE, tools=[json.loads(protocol.TOOL_LINE)], add_generation_prompt=True)
    assert text == EXPECTED


def test_rl_template_folds_consecutive_tool_messages_into_one_user_turn(tokenizer):
    msgs = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "two calls"},
        {"role": "tool", "content": "first"},
        {"role": "tool", "content": [{"type": "image"}, {"type": "text", "text": "second"}]},
    ]
    text = render(tokenizer, msgs, RL_TEMPLATE, add_generation_prompt=False)
    assert text.endswith(
        "<|im_start|>assistant\ntwo calls<|im_end|>\n<|im_start|>user\n<tool_response>\nfirst\n</tool_response>\n"
        "<tool_response>\n" + IMG + "second\n</tool_response><|im_end|>\n"
    )


@pytest.mark.parametrize("template", [RL_TEMPLATE, STOCK_TEMPLATE], ids=["rl", "stock"])
def test_default_system_turn_when_none_is_given(tokenizer, template):
    text = render(tokenizer, [{"role": "user", "content": "hi"}], template, add_generation_prompt=True)
    assert text == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_wire_dicts_carry_images_as_png_data_urls_and_no_tools():
    msgs = openai_messages(client_conversation())
    user = msgs[1]["content"]
    assert user[0]["type"] == "image_url" and user[0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert user[1] == {"type": "text", "text": "\n" + TASK_TEXT}
    assert msgs[0] == {"role": "system", "content": protocol.SYSTEM_TEXT}
    assert msgs[2] == {"role": "assistant", "content": TURN1}
    assert all("tools" not in m and m["role"] != "tool" for m in msgs)
