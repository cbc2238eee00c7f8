"""Tool-call and answer parsing (protocol sections 2.4-2.6 and 5): table tests."""

from __future__ import annotations

import pytest

from spec_vetting.inspect import parse_answer, parse_tool_call
from spec_vetting.inspect.parsing import has_answer_block

CALL = '{"name": "spectral_visualization_tool", "arguments": {"label": "Zoom on the Hα region", "wavelength_range": [6500, 6600]}}'


@pytest.mark.parametrize(
    "text",
    [
        f"<think>look</think>\n<tool_call>\n{CALL}\n</tool_call>",
        f"<think>look</think><tool_call>{CALL}</tool_call>",
        f"<tool_call>  {CALL}  </tool_call> trailing",
        f"<tool_call>\n{CALL}\n</tool_call>\n<tool_call>\n{{\"name\": \"x\"}}\n</tool_call>",  # first call wins
    ],
)
def test_tool_call_usable(text):
    call = parse_tool_call(text)
    assert call is not None and call.error is None
    assert call.name == "spectral_visualization_tool"
    assert call.arguments == {"label": "Zoom on the Hα region", "wavelength_range": [6500, 6600]}
    assert call.raw.startswith("<tool_call>")


@pytest.mark.parametrize(
    "text, error_part",
    [
        ("<tool_call>\n{bad json}\n</tool_call>", "bad JSON"),
        ("<tool_call>\n{\"name\": \"spectral_visualization_tool\", \"arguments\": {\"wavelength_range\": [1, 2]}",
         "no closing"),
        ('<tool_call>{"name": "other_tool", "arguments": {"wavelength_range": [1, 2]}}</tool_call>',
         "unknown tool name 'other_tool'"),
        ('<tool_call>{"arguments": {"wavelength_range": [1, 2]}}</tool_call>', "missing tool name"),
        ('<tool_call>{"name": "spectral_visualization_tool", "arguments": {}}</tool_call>', "missing wavelength_range"),
        ('<tool_call>{"name": "spectral_visualization_tool", "arguments": {"wavelength_range": ["a", "b"]}}'
         "</tool_call>", "numbers"),
        ('<tool_call>{"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [true, 2]}}'
         "</tool_call>", "numbers"),
        ('<tool_call>{"name": "spectral_visualization_tool", "arguments": {"wavelength_range": [1, 2, 3]}}'
         "</tool_call>", "two numbers"),
        ('<tool_call>{"name": "spectral_visualization_tool", "arguments": {"wavelength_range": "6500-6600"}}'
         "</tool_call>", "two numbers"),
        ('<tool_call>{"name": "spectral_visualization_tool", "arguments": [1, 2]}</tool_call>', "JSON object"),
        ("<tool_call>[1, 2]</tool_call>", "JSON object"),
        ('<tool_call>{"name": "spectral_visualization_tool", "arguments": "{bad"}</tool_call>', "arguments string"),
    ],
)
def test_tool_call_errors(text, error_part):
    call = parse_tool_call(text)
    assert call is not None
    assert call.error is not None and error_part in call.error


def test_tool_call_arguments_as_json_string():
    text = ('<tool_call>{"name": "spectral_visualization_tool", "arguments": '
            '"{\\"wavelength_range\\": [4000.5, 4100]}"}</tool_call>')
    call = parse_tool_call(text)
    assert call.error is None and call.arguments == {"wavelength_range": [4000.5, 4100]}


@pytest.mark.parametrize("text", ["", "no call here", "<think>x</think><answer>\\boxed{YES}</answer>", None, 42])
def test_no_tool_call(text):
    assert parse_tool_call(text) is None


W = "<think>reasoning</think>\n"


@pytest.mark.parametrize(
    "text, verdict, status, fallback",
    [
        (W + "<answer>\\boxed{YES} broad Balmer emission</answer>", "YES", "well_formed", None),
        (W + "<answer>\\boxed{NO} narrow lines</answer>", "NO", "well_formed", None),
        (W + "<answer>\\boxed{yes}</answer>", "YES", "well_formed", None),
        (W + "<answer>\\boxed{ No }</answer>", "NO", "well_formed", None),
        ("<think>a</think><think>b</think><answer>\\boxed{YES}</answer>", "YES", "well_formed", None),
        # broken <think> tags: verdict kept, flagged
        ("<answer>\\boxed{YES}</answer>", "YES", "recovered", "broken_format"),
        ("<think>a<answer>\\boxed{NO}</answer>", "NO", "recovered", "broken_format"),
        # several answer blocks: the last one is read
        (W + "<answer>\\boxed{YES}</answer> wait <answer>\\boxed{NO}</answer>", "NO", "recovered",
         "last_answer_block"),
        # answer without boxed: word search, YES first
        (W + "<answer>Yes, it is a CV</answer>", "YES", "recovered", "answer_word"),
        (W + "<answer>no, this is not one</answer>", "NO", "recovered", "answer_word"),
        (W + "<answer>Yes and no</answer>", "YES", "recovered", "answer_word"),
        # no usable answer block: boxed anywhere, then words anywhere
        (W + "The verdict is \\boxed{NO}.", "NO", "recovered", "boxed_anywhere"),
        (W + "<answer>\\boxed{maybe}</answer> \\boxed{YES}", "YES", "recovered", "boxed_anywhere"),
        ("Yes, it is a CV", "YES", "recovered", "word_anywhere"),
        ("NO.", "NO", "recovered", "word_anywhere"),
        (W + "<answer>unclear</answer>\nno", "NO", "recovered", "word_anywhere"),
        # no verdict at all; the last line never makes one
        ("", None, "none", None),
        ("   \n ", None, "none", None),
        ("<think>hmm</think>\nI cannot tell.\nPerhaps", None, "none", None),
        ("yesterday nothing notable", None, "none", None),  # whole words only
        (W + "<answer>\\boxed{MAYBE}</answer>", None, "none", None),
    ],
)
def test_parse_answer_table(text, verdict, status, fallback):
    ans = parse_answer(text)
    assert (ans.verdict, ans.status, ans.fallback) == (verdict, status, fallback)


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
