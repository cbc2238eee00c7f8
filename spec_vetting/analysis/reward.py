"""The Spec-o3 RL reward with the published semantics (upstream ``recipe/spec_o3/spec_o3.py``, ``compute_score``),
usable as verl's custom reward function.

In a verl config::

    custom_reward_function:
      path: <site-packages>/spec_vetting/analysis/reward.py   # or any file that imports it
      name: compute_score

The reading is :func:`spec_vetting.answers.read_answer` (first ``\\boxed{...}`` of the one ``<answer>`` block,
then the published fallbacks); the score is 1.0 when the predicted class equals the ground truth (whitespace
collapsed, no other normalisation), 0.0 otherwise, minus 0.2 for a format error. The return value is the same
dict as upstream's (``score``, ``predicted_class``, ``true_class``) and ``extra_info``, when given, gets the same
keys upstream writes (``acc``, ``pred``, ``gt``, ``format_correct``, ``tool_used``, ``raw_answer``,
``raw_solution``).

``solution_str`` is what verl decodes of the response: the whole trajectory, tool turns included
(:func:`spec_vetting.answers.trajectory_text` rebuilds it from recorded turns).

Upstream also scores two multi-class sources (``lamost_cv_galaxy``, ``tns``) that are not Spec-o3 tasks; they are
refused here rather than scored wrongly. Every other ``data_source`` is binary YES/NO, as upstream.
"""

from __future__ import annotations

import re

from spec_vetting.answers import read_answer

FORMAT_PENALTY = 0.2
_MULTICLASS_SOURCES = ("lamost_cv_galaxy", "tns")


def _cleanup(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _ground_truth(value) -> str:
    if isinstance(value, dict):  # a whole reward_model dict passed by mistake
        value = value.get("ground_truth")
    if value is None:
        raise ValueError("ground_truth must be given (reward_model.ground_truth of the row, 'YES' or 'NO')")
    return _cleanup(str(value))


def score_reading(reading, ground_truth) -> float:
    """The reward of a :class:`~spec_vetting.answers.Reading` against the ground truth."""
    correct = reading.predicted == _ground_truth(ground_truth)
    return (1.0 if correct else 0.0) - (FORMAT_PENALTY if reading.format_error else 0.0)


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict:
    """verl entry point, upstream's contract: a dict with ``score``, ``predicted_class`` and ``true_class``."""
    if data_source in _MULTICLASS_SOURCES:
        raise ValueError(f"data_source {data_source!r} is a multi-class task of upstream, not a Spec-o3 YES/NO task")
    solution = solution_str or ""
    reading = read_answer(solution)
    truth = _ground_truth(ground_truth)
    score = score_reading(reading, truth)
    if extra_info is not None and isinstance(extra_info, dict):
        extra_info["acc"] = 1.0 if reading.predicted == truth else 0.0
        extra_info["pred"] = reading.predicted
        extra_info["gt"] = truth
        extra_info["format_correct"] = 0.0 if reading.format_error else 1.0
        extra_info["tool_used"] = 1.0 if re.search(r"<tool_call>.*?</tool_call>", solution, re.DOTALL) else 0.0
        extra_info["raw_answer"] = reading.predicted if reading.predicted else solution.strip()
        extra_info["raw_solution"] = solution[:200]
    return {"score": score, "predicted_class": reading.predicted, "true_class": truth}


def predicted_class(solution_str: str) -> str:
    """The class the published reward reads from a trajectory (``YES``, ``NO`` or whatever else it found)."""
    return read_answer(solution_str or "").predicted
