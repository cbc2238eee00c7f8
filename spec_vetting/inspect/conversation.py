"""The conversation exactly as protocol section 2 lays it out, built on the client.

- system: the task's system text (the default sentence unless a SpecVI-Bench row gave its own) plus the Qwen2.5
  tools block, as training's template appended it (``protocol.system_text``); requests carry no ``tools`` field,
  so every server renders the same text;
- user: the full-spectrum image, then a newline and the task text;
- assistant: each turn replayed as its raw generated text (``<think>``, ``<tool_call>`` and all), which keeps the
  server's re-rendered prompt closest to the token sequence of RL training;
- tool result: a user message ``<tool_response>\\n`` + image + ``<text>\\n</tool_response>``. When the tool answered
  with text only (an error), the trained tool's message had no image, so none is sent.
"""

from __future__ import annotations

from ..chat_stream import trained_stream_text
from ..protocol import IMAGE_MARKUP, TOOL_RESPONSE_CLOSE, TOOL_RESPONSE_OPEN, cut_tool_text, system_text
from ..types import ImagePart, Message, TextPart
from .tasks import Task


def system_message(own: str | None = None) -> Message:
    """The system turn: ``own`` text (None: the default sentence), then the tools block."""
    return Message("system", [TextPart(system_text(own))])


def build_initial_messages(task: Task | str, image_png: bytes) -> list[Message]:
    """System message and the first user message (image, then ``\\n`` + task text)."""
    prompt = task.prompt if isinstance(task, Task) else str(task)
    system = task.system if isinstance(task, Task) else None
    return [system_message(system), Message("user", [ImagePart(image_png), TextPart("\n" + prompt)])]


def assistant_message(raw_text: str) -> Message:
    """An assistant turn replayed as the model wrote it."""
    return Message("assistant", [TextPart(raw_text)])


def cut_tool_response(text: str) -> str:
    """A tool's text as training cut it: past 1024 characters, first 512 + ``...(truncated)...`` + last 512.

    Only the tool's own texts are cut (the loop does it in :func:`~spec_vetting.inspect.zoom.answer_tool_call`);
    the agent loop's error texts were not.
    """
    return cut_tool_text(text)


def tool_response_message(text: str, image_png: bytes | None = None) -> Message:
    """The tool's answer as a user message, its text as given (already cut where training cut it)."""
    if image_png is None:
        return Message("user", [TextPart(TOOL_RESPONSE_OPEN + text + TOOL_RESPONSE_CLOSE)])
    return Message("user", [TextPart(TOOL_RESPONSE_OPEN), ImagePart(image_png), TextPart(text + TOOL_RESPONSE_CLOSE)])


def render_text(messages: list[Message], *, image_markup: str = IMAGE_MARKUP,
                add_generation_prompt: bool = True) -> str:
    """The conversation as the text of the token stream training built (and the shipped template renders): for
    logs, tests and debugging (:func:`spec_vetting.chat_stream.trained_stream_text`)."""
    return trained_stream_text(messages, image_markup=image_markup, add_generation_prompt=add_generation_prompt)
