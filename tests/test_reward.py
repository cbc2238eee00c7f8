"""The RL reward = upstream ``recipe/spec_o3/spec_o3.py`` ``compute_score``, score for score.

Expected scores and predicted classes were produced by running upstream's function on each string
(tests/data/upstream/README.md: ``spec_o3.py:210``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spec_vetting.analysis.reward import compute_score, predicted_class

CASES = json.loads((Path(__file__).parent / "data" / "upstream" / "reward.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("text, truth, score, predicted", CASES)
def test_reward_equals_upstream(text, truth, score, predicted):
    got = compute_score("cv", text, truth)
    assert got["score"] == pytest.approx(score)
    assert got["predicted_class"] == predicted
    assert got["true_class"] == truth


def test_first_box_of_the_answer_is_read():
    # upstream reads the first \boxed{}; "Carbon star" is the prediction, never YES
    text = "<think>a</think><answer>\\boxed{Carbon star} ... \\boxed{YES}</answer>"
    assert compute_score("carbon", text, "YES") == {"score": pytest.approx(-0.2), "predicted_class": "Carbon star",
                                                    "true_class": "YES"}
    assert predicted_class("<think>a</think><answer>\\boxed{YES} not \\boxed{NO}</answer>") == "YES"


def test_extra_info_filled_like_upstream():
    info = {"index": 3}
    text = "<think>x</think>\n<tool_call>\n{}\n</tool_call><answer>\\boxed{NO}</answer>"
    compute_score("carbon", text, "NO", extra_info=info)
    assert info["acc"] == 1.0 and info["pred"] == "NO" and info["gt"] == "NO"
    assert info["format_correct"] == 1.0 and info["tool_used"] == 1.0 and info["index"] == 3


def test_ground_truth_forms():
    text = "<think>x</think><answer>\\boxed{NO}</answer>"
    assert compute_score("carbon", text, {"ground_truth": "NO", "style": "rule"})["score"] == 1.0
    assert compute_score("carbon", text, " NO ")["score"] == 1.0  # whitespace collapsed, as upstream
    assert compute_score("carbon", text, "no")["score"] == 0.0  # no case folding of the truth, as upstream
    with pytest.raises(ValueError, match="ground_truth"):
        compute_score("cv", text, None)
    with pytest.raises(ValueError, match="multi-class"):
        compute_score("tns", text, "NO")
