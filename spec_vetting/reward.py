"""The Spec-o3 RL reward (protocol section 5), usable as verl's custom reward function.

In a verl config::

    custom_reward_function:
      path: <site-packages>/spec_vetting/reward.py   # or any file that imports it
      name: compute_score

Reward: 1 for a correct verdict, 0 for a wrong (or missing) one, minus 0.2 when the answer format is broken
(a verdict recovered by a fallback, or no verdict at all). So: well-formed and right 1.0, well-formed and wrong 0.0,
recovered and right 0.8, recovered and wrong -0.2, no verdict -0.2.
"""

from __future__ import annotations

FORMAT_PENALTY = 0.2


def _parse_answer(text: str):
    from spec_vetting.inspect.parsing import parse_answer  # the same reader the inspection loop uses

    return parse_answer(text)


def _ground_truth(value) -> str:
    if isinstance(value, dict):  # a whole reward_model dict passed by mistake
        value = value.get("ground_truth")
    text = str(value).strip().upper() if value is not None else ""
    if text not in ("YES", "NO"):
        raise ValueError(f"ground_truth must be 'YES' or 'NO' (reward_model.ground_truth of the row), got {value!r}")
    return text


def score_answer(answer, ground_truth: str) -> float:
    """The reward of a parsed :class:`~spec_vetting.types.Answer` against YES/NO."""
    truth = _ground_truth(ground_truth)
    correct = 1.0 if answer.verdict == truth else 0.0
    broken = answer.status != "well_formed"
    return correct - (FORMAT_PENALTY if broken else 0.0)


def compute_score(data_source, solution_str, ground_truth, extra_info=None) -> float:
    """verl entry point: ``data_source`` is the task key (unused: the rule is the same for every task)."""
    return score_answer(_parse_answer(solution_str or ""), ground_truth)
