"""Tool-call and answer parsing (protocol sections 2.4-2.6 and 5): table tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from spec_vetting.inspect import parse_answer, parse_tool_call
from spec_vetting.inspect.parsing import has_answer_block, parse_tool_calls
from spec_vetting.inspect.zoom import ZoomTool, answer_tool_call

CALL = ('{"name": "spectral_visualization_tool", '
        '"arguments": {"label": "Zoom on the Hα region", "wavelength_range": [6500, 6600]}}')


@pytest.mark.parametrize(
    "text",
    [
        f"<think>look</think>\n<tool_call>\n{CALL}\n</tool_call>",
        f"<think>look</think><tool_call>{CALL}</tool_call>",
        f"<tool_call>  {CALL}  </tool_call> trailing",
        f"<tool_call>\n{CALL}\n</tool_call>\n<tool_call>\n{{\"name\": \"x\", \"arguments\": {{}}}}\n</tool_call>",
    ],
)
def test_tool_call_usable(text):
    call = parse_tool_call(text)
    assert call is not None and call.error is None
    assert call.name == "spectral_visualization_tool"
    assert call.arguments == {"label": "Zoom on the Hα region", "wavelength_range": [6500, 6600]}
    assert call.raw.startswith("<tool_call>")


UPSTREAM = json.loads((Path(__file__).parent / "data" / "upstream" / "tool_paths.json").read_text(encoding="utf-8"))


def _spectrum_tool():
    # the spectrum the upstream table was produced on (tests/data/upstream/README.md)
    wl = np.linspace(3700.0, 9100.0, 3909)
    return ZoomTool(wl, 1.0 + 0.1 * np.sin(wl / 50.0), None, renderer=lambda *a, **k: b"PNG")


@pytest.mark.parametrize("row", UPSTREAM, ids=[f"path{i}" for i in range(len(UPSTREAM))])
def test_every_tool_call_path_answers_as_upstream(row):
    """Each row: an assistant text, and what training's parser + agent loop + tool answered to it.

    Produced by tool_parser.py:87-106 (HermesToolParser.extract_tool_calls) and tool_agent_loop.py:228-268
    (_call_tool, max_tool_response_length 1024, truncate side middle) on spectral_visualization_tool.py:246-310.
    ``n_calls`` None: the parser found no call, so the rollout ended (tool_agent_loop.py:123-125).
    """
    text, n_calls, expected = row[0], row[1], row[2]
    calls = parse_tool_calls(text)
    if n_calls is None:
        assert calls == [] and parse_tool_call(text) is None
        return
    assert len(calls) == n_calls
    got = answer_tool_call(parse_tool_call(text), _spectrum_tool())
    assert got.text == expected
    assert (got.image_png is not None) == row[3]


@pytest.mark.parametrize(
    "body, expected",
    [
        # tool_agent_loop.py:239-243 with str(KeyError(name)): the name quoted as Python repr
        ('{"name": "zoom", "arguments": {"wavelength_range": [6500, 6600]}}', "Error when executing tool: 'zoom'"),
        # tool_parser.py:99 json.dumps(arguments) then tool_agent_loop.py:234 json.loads: a string stays a string,
        # and spectral_visualization_tool.py:248 parameters.get fails on it
        ('{"name": "spectral_visualization_tool", "arguments": "{\\"wavelength_range\\": [6500, 6600]}"}',
         "Error when executing tool: 'str' object has no attribute 'get'"),
        ('{"name": "spectral_visualization_tool", "arguments": null}',
         "Error when executing tool: 'NoneType' object has no attribute 'get'"),
        # spectral_visualization_tool.py:268-271: str() of the range as parsed
        ('{"name": "spectral_visualization_tool", "arguments": {"wavelength_range": "6500-6600"}}',
         "Error: The specified wavelength range 6500-6600 is invalid or outside the available data range "
         "[3700.0, 9100.0]."),
        # spectral_visualization_tool.py:249 and 292-297: label 0 / false / "" / [] is no label; "0" is one
        ('{"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [6500, 6600], "label": 0}}',
         "Generated spectral visualization focused on wavelength range (6500, 6600) Å."),
        ('{"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [6500, 6600], "label": "0"}}',
         "Generated spectral visualization focused on wavelength range (6500, 6600) Å for 0."),
    ],
)
def test_named_paths(body, expected):
    call = parse_tool_call(f"<tool_call>\n{body}\n</tool_call>")
    assert answer_tool_call(call, _spectrum_tool()).text == expected


@pytest.mark.parametrize(
    "text",
    [
        "<tool_call>\n{bad json}\n</tool_call>",  # tool_parser.py:96-101: dropped
        '<tool_call>\n{"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [1, 2]}}',  # unclosed
        '<tool_call>{"arguments": {"wavelength_range": [1, 2]}}</tool_call>',  # no name
        '<tool_call>{"name": "spectral_visualization_tool"}</tool_call>',  # no arguments
        '<tool_call>{"name": 5, "arguments": {}}</tool_call>',  # FunctionCall.name must be a string
        "<tool_call>[1, 2]</tool_call>",
    ],
)
def test_invalid_blocks_are_not_calls(text):
    assert parse_tool_call(text) is None


def test_first_valid_call_runs_and_string_arguments_are_kept():
    text = ("<tool_call>{bad}</tool_call><tool_call>" + CALL + "</tool_call>"
            '<tool_call>{"name": "x", "arguments": {}}</tool_call>')
    assert [c.name for c in parse_tool_calls(text)] == ["spectral_visualization_tool", "x"]
    assert parse_tool_call(text).arguments["wavelength_range"] == [6500, 6600]
    s = parse_tool_call('<tool_call>{"name": "spectral_visualization_tool", "arguments": "{}"}</tool_call>')
    assert s.arguments == "{}" and s.error is None
    assert (parse_tool_call('<tool_call>{"name": "zoom", "arguments": {}}</tool_call>').error
            == "unknown tool name 'zoom'")


@pytest.mark.parametrize("text", ["", "no call here", "<think>x</think><answer>\\boxed{YES}</answer>", None, 42])
def test_no_tool_call(text):
    assert parse_tool_call(text) is None


W = "<think>reasoning</think>\n"


@pytest.mark.parametrize(
    "text, verdict, status, fallback, recovered",
    [
        (W + "<answer>\\boxed{YES} broad Balmer emission</answer>", "YES", "well_formed", None, None),
        (W + "<answer>\\boxed{NO} narrow lines</answer>", "NO", "well_formed", None, None),
        (W + "<answer>\\boxed{yes}</answer>", "YES", "well_formed", None, None),
        (W + "<answer>\\boxed{ No }</answer>", "NO", "well_formed", None, None),
        ("<think>a</think><think>b</think><answer>\\boxed{YES}</answer>", "YES", "well_formed", None, None),
        # broken <think> tags: verdict kept, flagged
        ("<answer>\\boxed{YES}</answer>", "YES", "recovered", "broken_format", None),
        ("<think>a<answer>\\boxed{NO}</answer>", "NO", "recovered", "broken_format", None),
        # several answer blocks: the last one is read
        (W + "<answer>\\boxed{YES}</answer> wait <answer>\\boxed{NO}</answer>", "NO", "recovered",
         "last_answer_block", None),
        # the FIRST box of the answer is read (spec_o3.py:338): YES here, and "Carbon star" is no verdict
        (W + "<answer>\\boxed{YES} not \\boxed{NO}</answer>", "YES", "well_formed", None, None),
        (W + "<answer>\\boxed{Carbon star} ... \\boxed{YES}</answer>", None, "none", None, None),
        # answer without boxed: word search, YES first
        (W + "<answer>Yes, it is a CV</answer>", "YES", "recovered", "answer_word", None),
        (W + "<answer>no, this is not one</answer>", "NO", "recovered", "answer_word", None),
        (W + "<answer>Yes and no</answer>", "YES", "recovered", "answer_word", None),
        # no answer block: what the fallbacks find is kept apart, not a verdict
        (W + "The verdict is \\boxed{NO}.", None, "none", "boxed_anywhere", "NO"),
        (W + "<answer>\\boxed{YES}", None, "none", "boxed_anywhere", "YES"),  # unclosed answer
        ("Yes, it is a CV", None, "none", "word_anywhere", "YES"),
        ("NO.", None, "none", "word_anywhere", "NO"),
        # an answer block whose box holds another word stops the reading (spec_o3.py:338-349)
        (W + "<answer>\\boxed{maybe}</answer> \\boxed{YES}", None, "none", None, None),
        # an answer without box nor word: the fallbacks run over the whole text
        (W + "<answer>unclear</answer>\nno", None, "none", "word_anywhere", "NO"),
        # no verdict at all; the last line never makes one
        ("", None, "none", None, None),
        ("   \n ", None, "none", None, None),
        ("<think>hmm</think>\nI cannot tell.\nPerhaps", None, "none", "last_line", None),
        ("yesterday nothing notable", None, "none", "last_line", None),  # whole words only
        (W + "<answer>\\boxed{MAYBE}</answer>", None, "none", None, None),
    ],
)
def test_parse_answer_table(text, verdict, status, fallback, recovered):
    ans = parse_answer(text)
    assert (ans.verdict, ans.status, ans.fallback, ans.recovered_verdict) == (verdict, status, fallback, recovered)


def test_one_locator_points_at_the_verdict_taken():
    from spec_vetting.answers import locate_verdict
    from spec_vetting.engines.local.engine import verdict_position

    text = W + "<answer>\\boxed{YES} not \\boxed{NO}</answer>"
    pos = locate_verdict(text)
    assert text[pos:pos + 3] == "YES" and verdict_position(text) == pos
    assert locate_verdict("Yes, it is a CV") is None  # a recovered_verdict has no p_yes


def test_justification_and_last_line():
    ans = parse_answer(W + "<answer>\\boxed{YES} Broad Hα with He II.</answer>")
    assert ans.justification == "Broad Hα with He II."
    none = parse_answer("first\n\nlast line\n")
    assert none.verdict is None and none.justification == "last line"


def test_parse_answer_never_raises_on_odd_input():
    for odd in (None, 3, "<answer>", "</answer><answer>", "\\boxed{", "<answer>\\boxed{YES"):
        parse_answer(odd)  # must not raise


def test_has_answer_block():
    assert has_answer_block("<answer>x</answer>")
    assert not has_answer_block("<answer>x")


def test_verdict_probability_is_one_rule_for_both_engines():
    """P(YES) over the alternatives at the verdict's token, worked out by hand (both engines call this)."""
    import math

    from spec_vetting.answers import verdict_probability

    alts = [("YES", math.log(0.5)), (" no", math.log(0.25)), ("maybe", math.log(0.25))]
    assert verdict_probability(alts) == pytest.approx(0.5 / 0.75)
    # a fused "{YES": only alternatives that write the same lead count, read after it
    fused = [("{YES", math.log(0.3)), ("{N", math.log(0.1)), ("YES", math.log(0.6))]
    assert verdict_probability(fused, lead="{") == pytest.approx(0.75)
    # a piece of the word counts ("Y" of "Y" + "ES"), as does a token that begins with it ("Nope" for NO)
    assert verdict_probability([("Y", math.log(0.6)), ("Nope", math.log(0.2)), ("A", math.log(0.2))]) == \
        pytest.approx(0.75)
    # other words and non-finite log-probabilities do not
    assert verdict_probability([("maybe", 0.0), ("YES", float("nan"))]) is None
