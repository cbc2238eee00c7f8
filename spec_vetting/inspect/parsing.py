"""Reading the model's raw text: the first ``<tool_call>`` and the ``<answer>`` (protocol sections 2.4-2.6 and 5).

Both readers never raise: a model can write anything, and a malformed turn is a fact to record, not a crash.

Answer semantics follow the published reward (protocol section 5) but keep its cases apart, as a production reader
should: a well-formed verdict, a verdict recovered by one of the fallbacks (named in ``Answer.fallback``), or none.
"""

from __future__ import annotations

import json
import re
from numbers import Real
from typing import Any

from ..protocol import TOOL_NAME
from ..types import Answer, ToolCall

# --- tool calls --------------------------------------------------------------------------------------------------

_TOOL_CALL_OPEN = "<tool_call>"
_TOOL_CALL_CLOSE = "</tool_call>"


def _is_number(value: Any) -> bool:
    # JSON true/false arrive as bool, which Python counts as int; a window of booleans is not a window
    return isinstance(value, Real) and not isinstance(value, bool)


def _range_problem(arguments: dict[str, Any]) -> str | None:
    if "wavelength_range" not in arguments:
        return "missing wavelength_range"
    rng = arguments["wavelength_range"]
    if not isinstance(rng, list | tuple) or len(rng) != 2:
        return f"wavelength_range must be a list of two numbers, got {rng!r}"
    if not all(_is_number(v) for v in rng):
        return f"wavelength_range must hold numbers, got {rng!r}"
    return None


def parse_tool_call(text: str) -> ToolCall | None:
    """The first ``<tool_call>`` block of ``text``; None when there is none.

    ``error`` says why the call is not usable (bad JSON, unknown tool name, missing or non-numeric range); the
    arguments are kept as parsed anyway so the zoom tool can answer them the way the trained tool did.
    """
    if not isinstance(text, str):
        return None
    start = text.find(_TOOL_CALL_OPEN)
    if start < 0:
        return None
    body_start = start + len(_TOOL_CALL_OPEN)
    end = text.find(_TOOL_CALL_CLOSE, body_start)
    unterminated = end < 0
    body = text[body_start:] if unterminated else text[body_start:end]
    raw = text[start:] if unterminated else text[start : end + len(_TOOL_CALL_CLOSE)]
    payload = body.strip()
    try:
        obj = json.loads(payload)
    except (json.JSONDecodeError, RecursionError) as exc:
        why = f"bad JSON in <tool_call>: {exc.msg if hasattr(exc, 'msg') else exc}"
        if unterminated:
            why += " (no closing </tool_call>; the reply may have been cut by max_tokens)"
        return ToolCall(name=None, arguments={}, error=why, raw=raw)
    if not isinstance(obj, dict):
        return ToolCall(name=None, arguments={}, error="<tool_call> does not hold a JSON object", raw=raw)
    name = obj.get("name")
    arguments = obj.get("arguments", {})
    if isinstance(arguments, str):  # some servers/models double-encode the arguments
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return ToolCall(name=name if isinstance(name, str) else None, arguments={},
                            error="bad JSON in the arguments string", raw=raw)
    if not isinstance(arguments, dict):
        return ToolCall(name=name if isinstance(name, str) else None, arguments={},
                        error=f"arguments must be a JSON object, got {type(arguments).__name__}", raw=raw)
    if not isinstance(name, str):
        return ToolCall(name=None, arguments=arguments, error="missing tool name", raw=raw)
    if name != TOOL_NAME:
        return ToolCall(name=name, arguments=arguments, error=f"unknown tool name {name!r}", raw=raw)
    return ToolCall(name=name, arguments=arguments, error=_range_problem(arguments), raw=raw)


# --- answers -----------------------------------------------------------------------------------------------------

#: fallback names, in the order protocol section 5 tries them
FALLBACK_FORMAT = "broken_format"  # one answer block with a boxed verdict, but <think> tags unbalanced or absent
FALLBACK_LAST_ANSWER = "last_answer_block"  # several <answer> blocks: the last one is read
FALLBACK_ANSWER_WORD = "answer_word"  # an answer block without \boxed{}: the word YES, then NO, inside it
FALLBACK_BOXED_ANYWHERE = "boxed_anywhere"  # no usable answer block: a \boxed{YES|NO} anywhere
FALLBACK_WORD_ANYWHERE = "word_anywhere"  # then the words YES/NO anywhere

_ANSWER_BLOCK = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_BOXED = re.compile(r"\\boxed\{\s*([^{}]*?)\s*\}", re.IGNORECASE)
_YES = re.compile(r"\byes\b", re.IGNORECASE)
_NO = re.compile(r"\bno\b", re.IGNORECASE)


def _boxed_verdict(text: str) -> tuple[str | None, re.Match | None]:
    """The verdict of the first ``\\boxed{YES|NO}`` in ``text`` (case-insensitive)."""
    for m in _BOXED.finditer(text):
        word = m.group(1).strip().upper()
        if word in ("YES", "NO"):
            return word, m
    return None, None


def _word_verdict(text: str) -> str | None:
    # the published scorer checks YES first, then NO
    if _YES.search(text):
        return "YES"
    if _NO.search(text):
        return "NO"
    return None


def _justification(block: str, match: re.Match | None) -> str:
    rest = block[match.end():] if match is not None else block
    return rest.strip()


def parse_answer(text: str) -> Answer:
    """The verdict of an assistant text with protocol section 5 semantics, keeping recovered verdicts apart."""
    if not isinstance(text, str) or not text.strip():
        return Answer(verdict=None, status="none")
    blocks = _ANSWER_BLOCK.findall(text)
    if blocks:
        block = blocks[-1]
        verdict, m = _boxed_verdict(block)
        if verdict is not None:
            n_open, n_close = text.count("<think>"), text.count("</think>")
            think_ok = n_open == n_close and n_open >= 1
            if len(blocks) == 1 and think_ok:
                return Answer(verdict=verdict, status="well_formed", justification=_justification(block, m))
            fallback = FALLBACK_LAST_ANSWER if len(blocks) > 1 else FALLBACK_FORMAT
            return Answer(verdict=verdict, status="recovered", fallback=fallback,
                          justification=_justification(block, m))
        if not _BOXED.search(block):
            word = _word_verdict(block)
            if word is not None:
                return Answer(verdict=word, status="recovered", fallback=FALLBACK_ANSWER_WORD,
                              justification=block.strip())
    verdict, m = _boxed_verdict(text)
    if verdict is not None:
        return Answer(verdict=verdict, status="recovered", fallback=FALLBACK_BOXED_ANYWHERE,
                      justification=text[m.end():].strip())
    word = _word_verdict(text)
    if word is not None:
        return Answer(verdict=word, status="recovered", fallback=FALLBACK_WORD_ANYWHERE, justification=text.strip())
    # The published scorer compares the last line with the label; on its own it says nothing about YES or NO.
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # The last line is kept as the justification so a reviewer sees how the text ended.
    return Answer(verdict=None, status="none", justification=lines[-1] if lines else "")


def has_answer_block(text: str) -> bool:
    """True when the text holds at least one complete ``<answer>...</answer>`` block."""
    return isinstance(text, str) and _ANSWER_BLOCK.search(text) is not None
