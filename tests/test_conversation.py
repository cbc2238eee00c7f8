"""The conversation as protocol section 2 lays it out."""

from __future__ import annotations

from spec_vetting.inspect.conversation import (
    assistant_message,
    build_initial_messages,
    cut_tool_response,
    render_text,
    tool_response_message,
)
from spec_vetting.inspect.tasks import get_task
from spec_vetting.protocol import SYSTEM_TEXT, TOOL_LINE
from spec_vetting.types import ImagePart, TextPart

PNG = b"\x89PNG-full"
ZOOM = b"\x89PNG-zoom"


def test_initial_messages():
    task = get_task("cv")
    msgs = build_initial_messages(task, PNG)
    assert [m.role for m in msgs] == ["system", "user"]
    assert msgs[0].parts == [TextPart(SYSTEM_TEXT)]
    assert TOOL_LINE in msgs[0].text
    assert msgs[1].parts == [ImagePart(PNG), TextPart("\n" + task.prompt)]


def test_tool_response_with_image():
    m = tool_response_message("Generated spectral visualization focused on wavelength range (6500, 6600) Å.", ZOOM)
    assert m.role == "user"
    assert m.parts == [
        TextPart("<tool_response>\n"),
        ImagePart(ZOOM),
        TextPart("Generated spectral visualization focused on wavelength range (6500, 6600) Å.\n</tool_response>"),
    ]


def test_tool_response_text_only_and_cut():
    m = tool_response_message("Error: x")
    assert m.images == [] and len(m.parts) == 1
    assert m.text == "<tool_response>\nError: x\n</tool_response>"
    # tool_agent_loop.py:249-256 (truncate side middle): first 512 + marker + last 512, once
    long = "a" * 600 + "b" * 600
    cut = cut_tool_response(long)
    assert cut == "a" * 512 + "...(truncated)..." + "b" * 512 and len(cut) == 1041
    assert cut_tool_response("a" * 1024) == "a" * 1024
    assert tool_response_message(cut).text == "<tool_response>\n" + cut + "\n</tool_response>"  # not cut twice


def test_render_text_matches_protocol_layout():
    task = get_task("wd")
    raw = ('<think>x</think>\n<tool_call>\n'
           '{"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [4000, 4200]}}\n</tool_call>')
    msgs = build_initial_messages(task, PNG) + [assistant_message(raw), tool_response_message("ok.", ZOOM)]
    img = "<|vision_start|><|image_pad|><|vision_end|>"
    expected = (
        f"<|im_start|>system\n{SYSTEM_TEXT}<|im_end|>\n"
        f"<|im_start|>user\n{img}\n{task.prompt}<|im_end|>\n"
        f"<|im_start|>assistant\n{raw}<|im_end|>"  # training appended the tool turn right after it
        f"<|im_start|>user\n<tool_response>\n{img}ok.\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert render_text(msgs) == expected
