"""Reading the model's raw text: its tool calls and its ``<answer>`` (protocol sections 2.4-2.7 and 5).

Both readers never raise: a model can write anything, and a malformed turn is a fact to record, not a crash.

Tool calls are found as verl's hermes parser found them in training (``tool_parser.py`` of the upstream agent loop):

- nothing is a call unless the text holds both ``<tool_call>`` and ``</tool_call>``; each non-greedy
  ``<tool_call>(.*?)</tool_call>`` block is one candidate (an unclosed last block is not one);
- a block is a call when its body is JSON (``json.loads`` of the body as written), an object with ``name`` (a
  string) and ``arguments`` (any JSON value); any other block is dropped, as if it were not there;
- the arguments are kept as parsed, whatever their type: a JSON string stays a string (the tool then fails on it,
  as it did in training), nothing is decoded twice.

Only the first call of a turn is run (``max_parallel_calls`` 1): :func:`parse_tool_call` returns it.

Answers are read by :func:`spec_vetting.answers.read_answer` (the published reward's reading).
"""

from __future__ import annotations

import json
import logging
import re

from ..answers import read_answer
from ..protocol import TOOL_NAME
from ..types import Answer, ToolCall

log = logging.getLogger(__name__)

_TOOL_CALL_OPEN = "<tool_call>"
_TOOL_CALL_CLOSE = "</tool_call>"
_TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def _call_from_block(body: str, raw: str) -> ToolCall | None:
    try:
        obj = json.loads(body)
        name, arguments = obj["name"], obj["arguments"]
    except Exception as exc:  # bad JSON, not an object, a key missing: not a call (hermes logs and drops it)
        log.debug("dropped <tool_call> block: %s: %s", type(exc).__name__, exc)
        return None
    if not isinstance(name, str):  # the parser's FunctionCall(name: str) refuses it
        log.debug("dropped <tool_call> block: name is %s", type(name).__name__)
        return None
    error = None if name == TOOL_NAME else f"unknown tool name {name!r}"
    return ToolCall(name=name, arguments=arguments, error=error, raw=raw)


def parse_tool_calls(text: str) -> list[ToolCall]:
    """Every call of ``text`` in order, as the hermes parser of training found them (dropped blocks left out)."""
    if not isinstance(text, str) or _TOOL_CALL_OPEN not in text or _TOOL_CALL_CLOSE not in text:
        return []
    calls = []
    for m in _TOOL_CALL_BLOCK.finditer(text):
        call = _call_from_block(m.group(1), m.group(0))
        if call is not None:
            calls.append(call)
    return calls


def parse_tool_call(text: str) -> ToolCall | None:
    """The call a turn runs: the first valid one (``max_parallel_calls`` 1); None when the turn has none.

    ``error`` is set (for the record) when the name is not the zoom tool; the call still gets the tool layer's
    answer, the KeyError text of training.
    """
    calls = parse_tool_calls(text)
    return calls[0] if calls else None


def count_tool_call_blocks(text: str) -> int:
    """How many ``<tool_call>`` openings the text holds (valid or not), for diagnostics."""
    return text.count(_TOOL_CALL_OPEN) if isinstance(text, str) else 0


def parse_answer(text: str) -> Answer:
    """The verdict of a text with the published reward's reading, keeping recovered verdicts apart.

    A YES/NO found outside every ``<answer>`` block is not a verdict: it is ``recovered_verdict``.
    """
    r = read_answer(text if isinstance(text, str) else "")
    return Answer(verdict=r.verdict, status=r.status, fallback=r.fallback, justification=r.justification,
                  recovered_verdict=r.recovered_verdict)


def has_answer_block(text: str) -> bool:
    """True when the text holds at least one complete ``<answer>...</answer>`` block."""
    return isinstance(text, str) and re.search(r"<answer>(.*?)</answer>", text, re.DOTALL) is not None
