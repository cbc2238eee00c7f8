"""Reading the answer exactly as the published reward read it, and where in the text the verdict it takes sits.

Vocabulary module: the inspection layer (parsing, the loop), both model engines (p_yes at the verdict token) and
``spec_vetting.analysis.reward`` use this one reader, so the verdict, its probability and its reward always refer to
the same characters.

The published reward (``recipe/spec_o3/spec_o3.py``, ``compute_score``) reads, in this order:

1. exactly one ``<answer>...</answer>`` block (several: the last one, format error); in it the **first**
   ``\\boxed{...}``; its content, stripped and upper-cased, is the verdict when it is YES or NO; any other content
   is the prediction as it stands (a format error, and never a verdict: ``\\boxed{Carbon star} \\boxed{YES}`` is
   "Carbon star", not YES);
2. an answer block without ``\\boxed`` gives the whole word YES (checked first), then NO, inside the block;
3. only when nothing was found so far: the first ``\\boxed{...}`` anywhere in the text, then the words YES/NO
   anywhere, then the last non-empty line;
4. format error also when ``<think>``/``</think>`` counts differ or are zero, or ``<answer>``/``</answer>`` do not
   appear exactly once each.

A production reader keeps these apart: a verdict read from an ``<answer>`` block is the row's
verdict (``well_formed``, or ``recovered`` with the fallback named); a YES/NO that steps 3 dig out of a text with
no answer block is **not** a verdict (the trained format always closes with ``<answer>\\boxed{..}</answer>``, so a
text without one did not answer): it is kept as ``recovered_verdict`` for a reviewer.

``solution_str`` of the reward is the whole trajectory as verl decoded it (every assistant turn and the tool
responses between them, special tokens skipped): :func:`trajectory_text` rebuilds it from the turns.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from .protocol import TOOL_RESPONSE_CLOSE, TOOL_RESPONSE_OPEN

VERDICTS = ("YES", "NO")

#: fallback names (the ``fallback`` column)
FALLBACK_FORMAT = "broken_format"  # one answer block with a boxed verdict, but the think/answer tags are off
FALLBACK_LAST_ANSWER = "last_answer_block"  # several <answer> blocks: the last one is read
FALLBACK_ANSWER_WORD = "answer_word"  # an answer block without \boxed{}: the word YES, then NO, inside it
FALLBACK_BOXED_ANYWHERE = "boxed_anywhere"  # no answer block read: the first \boxed{} anywhere
FALLBACK_WORD_ANYWHERE = "word_anywhere"  # then the words YES/NO anywhere
FALLBACK_LAST_LINE = "last_line"  # then the last non-empty line (never YES/NO on its own)

#: fallbacks whose YES/NO is kept apart from the verdict column (no answer block gave it)
OUTSIDE_ANSWER = (FALLBACK_BOXED_ANYWHERE, FALLBACK_WORD_ANYWHERE)

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_BOX = re.compile(r"\\boxed\{([^}]*)\}")
_WORDS = (("YES", re.compile(r"\b(YES)\b", re.IGNORECASE)), ("NO", re.compile(r"\b(NO)\b", re.IGNORECASE)))


@dataclass(frozen=True)
class Reading:
    """What the published reward makes of a text, with the production reader's split of it."""

    predicted: str  # the reward's predicted class (whitespace collapsed), compared with the ground truth
    format_error: bool  # the reward's format penalty applies
    verdict: str | None  # YES/NO read from an <answer> block: the row's verdict
    recovered_verdict: str | None  # YES/NO found outside any answer block: kept apart, not a verdict
    status: str  # well_formed | recovered | none (of ``verdict``)
    fallback: str | None
    position: int | None  # index in the text of the first letter of the YES/NO taken (verdict or recovered)
    justification: str = ""


def _box(text: str, start: int = 0, end: int | None = None):
    m = _BOX.search(text, start, len(text) if end is None else end)
    if m is None:
        return None, None, None
    raw = m.group(1)
    content = raw.strip()
    return content, m.start(1) + (len(raw) - len(raw.lstrip())), m


def _word(text: str, start: int = 0, end: int | None = None):
    end = len(text) if end is None else end
    for word, pattern in _WORDS:
        m = pattern.search(text, start, end)
        if m:
            return word, m.start(1)
    return None, None


def _tags_off(text: str, blocks: list) -> bool:
    """Step 4 and the block count: the think tags unbalanced or absent, or not exactly one answer block."""
    n_think_open, n_think_close = text.count("<think>"), text.count("</think>")
    return (n_think_open != n_think_close or n_think_open == 0
            or text.count("<answer>") != 1 or text.count("</answer>") != 1 or len(blocks) != 1)


def _read_block(text: str, block: re.Match):
    """Steps 1-2 on one answer block: (answer, position, source, justification, format error)."""
    b0, b1 = block.start(1), block.end(1)
    content, pos, m = _box(text, b0, b1)
    if m is not None:
        if content.upper() in VERDICTS:
            return content.upper(), pos, "block", text[m.end():b1].strip(), False
        return content, None, None, "", True  # used as it stands: a prediction that is neither YES nor NO
    word, pos = _word(text, b0, b1)
    if word is not None:
        return word, pos, FALLBACK_ANSWER_WORD, text[b0:b1].strip(), True
    return "", None, None, "", True


def _read_anywhere(text: str):
    """Step 3, when no answer block gave anything: (answer, position, source, justification)."""
    content, pos, m = _box(text)
    if m is not None:
        if content.upper() in VERDICTS:
            return content.upper(), pos, FALLBACK_BOXED_ANYWHERE, text[m.end():].strip()
        if content:
            return content, None, None, ""
    word, pos = _word(text)
    if word is not None:
        return word, pos, FALLBACK_WORD_ANYWHERE, text.strip()
    lines = [ln.strip() for ln in text.split("\n") if ln.strip()]
    if lines:
        return lines[-1], None, FALLBACK_LAST_LINE, lines[-1]
    return "", None, None, ""


def _split(answer: str, source: str | None, format_error: bool, n_blocks: int):
    """The production reader's split of what was read where: (verdict, recovered_verdict, status, fallback)."""
    if source == "block":
        if not format_error:
            return answer, None, "well_formed", None
        return answer, None, "recovered", FALLBACK_LAST_ANSWER if n_blocks > 1 else FALLBACK_FORMAT
    if source == FALLBACK_ANSWER_WORD:
        return answer, None, "recovered", source
    if source in OUTSIDE_ANSWER:
        return None, answer, "none", source
    if source == FALLBACK_LAST_LINE:
        return None, None, "none", source
    return None, None, "none", None


def read_answer(text: str) -> Reading:
    """The reward's reading of ``text`` (one turn, or a whole trajectory from :func:`trajectory_text`)."""
    text = text if isinstance(text, str) else ""
    blocks = list(_ANSWER.finditer(text))
    format_error = _tags_off(text, blocks)
    answer, position, source, justification = "", None, None, ""
    if blocks:
        answer, position, source, justification, block_error = _read_block(text, blocks[-1])
        format_error = format_error or block_error
    if not answer and format_error:
        answer, position, source, justification = _read_anywhere(text)
    answer = answer.strip()
    if not answer:
        format_error = True
        answer = text.strip()
    predicted = re.sub(r"\s+", " ", answer).strip()
    verdict, recovered, status, fallback = _split(answer, source, format_error, len(blocks))
    if verdict is None and recovered is None:
        position = None
    return Reading(predicted=predicted, format_error=format_error, verdict=verdict, recovered_verdict=recovered,
                   status=status, fallback=fallback, position=position, justification=justification)


def locate_verdict(text: str) -> int | None:
    """Index of the first letter of the verdict :func:`read_answer` takes from ``text`` (None: no verdict).

    Engines read p_yes at the token holding this character, so the probability is that of the verdict recorded.
    """
    r = read_answer(text)
    return r.position if r.verdict is not None else None


#: what verl's decode (special tokens skipped) leaves of a tool turn between two assistant turns:
#: ``<|im_start|>user\n<tool_response>\n<image>TEXT\n</tool_response><|im_end|>\n<|im_start|>assistant\n``
TOOL_TURN_HEAD = "user\n" + TOOL_RESPONSE_OPEN
TOOL_TURN_TAIL = TOOL_RESPONSE_CLOSE + "\nassistant\n"


def verdict_word(piece: str) -> str | None:
    """"YES" or "NO" for the text one token writes from the verdict's first letter on, when it can be the start of
    that word or the word itself (any case, spaces and a brace before it): the rule both engines read P(YES) by."""
    t = piece.strip().lstrip("{").strip().upper()
    if not t:
        return None
    if "YES".startswith(t) or t.startswith("YES"):
        return "YES"
    if "NO".startswith(t) or t.startswith("NO"):
        return "NO"
    return None


def verdict_probability(alternatives: Iterable[tuple[str, float]], lead: str = "") -> float | None:
    """P(YES) / (P(YES) + P(NO)) over the (token text, log-probability) alternatives the model weighed at the token
    that writes the verdict's first letter (:func:`locate_verdict`); ``lead`` is the text that token writes before
    the letter (a fused ``{YES``), which an alternative must write too. None when no alternative is a verdict."""
    mass = {"YES": 0.0, "NO": 0.0}
    for text, logprob in alternatives:
        if not isinstance(text, str) or not isinstance(logprob, int | float) or not math.isfinite(logprob):
            continue
        if not text.startswith(lead):
            continue
        word = verdict_word(text[len(lead):])
        if word is not None:
            mass[word] += math.exp(logprob)
    total = mass["YES"] + mass["NO"]
    return None if total <= 0 else mass["YES"] / total


def trajectory_text(turns) -> tuple[str, list[int]]:
    """The reward's ``solution_str`` of a trajectory, and where each assistant turn starts in it.

    ``turns`` are objects with ``assistant_text`` and ``tool_response_text`` (None when no tool response followed
    the turn). Special tokens (``<|im_end|>``, ``<|im_start|>``, the image markup) are what verl's decode skips.
    """
    parts, starts, n = [], [], 0
    for t in turns:
        starts.append(n)
        parts.append(t.assistant_text or "")
        n += len(parts[-1])
        if t.tool_response_text is not None:
            piece = TOOL_TURN_HEAD + t.tool_response_text + TOOL_TURN_TAIL
            parts.append(piece)
            n += len(piece)
    return "".join(parts), starts
