"""The RL reward (protocol section 5): 1 right, 0 wrong, minus 0.2 for a broken format."""

from __future__ import annotations

import pytest

from spec_vetting.types import Answer
from spec_vetting.reward import compute_score, score_answer


@pytest.mark.parametrize(
    "answer, truth, expected",
    [
        (Answer("YES", "well_formed"), "YES", 1.0),
        (Answer("NO", "well_formed"), "YES", 0.0),
        (Answer("YES", "recovered", "answer_word"), "YES", 0.8),
        (Answer("NO", "recovered", "word_anywhere"), "YES", -0.2),
        (Answer(None, "none"), "NO", -0.2),
        (Answer("NO", "well_formed"), " no ", 1.0),  # ground truth read case- and space-insensitively
    ],
)
def test_score_table(answer, truth, expected):
    assert score_answer(answer, truth) == pytest.approx(expected)


@pytest.mark.parametrize(
    "text, truth, expected",
    [
        ("<think>broad Balmer</think>\n<answer>\\boxed{YES} double-peaked H-alpha</answer>", "YES", 1.0),
        ("<think>a</think><answer>\\boxed{yes}</answer>", "YES", 1.0),  # boxed word case-insensitive
        ("<think>a</think><answer>\\boxed{NO}</answer>", "YES", 0.0),
        ("<answer>\\boxed{YES}</answer>", "YES", 0.8),  # no <think>: broken format
        ("<think>a</think><think>b</think><answer>\\boxed{NO}</answer>", "NO", 1.0),
        ("<think>a</think></think><answer>\\boxed{NO}</answer>", "NO", 0.8),  # unbalanced think tags
        ("<think>a</think><answer>YES, an S star</answer>", "YES", 0.8),  # answer without \boxed
        ("<think>a</think><answer>\\boxed{NO}</answer><answer>\\boxed{YES}</answer>", "YES", 0.8),  # last block
        ("<think>a</think> so \\boxed{NO}", "NO", 0.8),  # boxed outside an answer block
        ("<think>a</think> I would say NO", "YES", -0.2),  # recovered and wrong
        ("", "YES", -0.2),  # nothing at all
    ],
)
def test_compute_score_on_parsing_cases(text, truth, expected):
    assert compute_score("cv", text, truth) == pytest.approx(expected)


def test_compute_score_accepts_verl_extras():
    text = "<think>x</think><answer>\\boxed{NO}</answer>"
    assert compute_score("carbon", text, "NO", extra_info={"index": 3}) == 1.0
    assert compute_score("carbon", text, {"ground_truth": "NO", "style": "rule"}) == 1.0


@pytest.mark.parametrize("bad", ["MAYBE", "", None, "YES NO"])
def test_bad_ground_truth_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="ground_truth must be 'YES' or 'NO'"):
        compute_score("cv", "<think>a</think><answer>\\boxed{YES}</answer>", bad)
