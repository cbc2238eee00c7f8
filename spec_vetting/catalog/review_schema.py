"""The reviewer's vocabulary and the CSV the review page exports: one list drives the page (``report/page.py``), the
label reader (:mod:`.labels`) and tests.

A decision is about the agent's verdict: ``agree`` (the verdict is right), ``disagree`` (it is wrong; for a YES/NO
verdict the label is the other word) or ``unsure``. The page writes the label it implies into the ``label`` column,
so ``spec-vet eval --labels`` and ``spec-vet export sft`` read the file like any label list.
"""

from __future__ import annotations

DECISIONS = ("agree", "disagree", "unsure")

#: columns of the exported CSV, in order
REVIEW_CSV_COLUMNS = ("candidate_id", "task", "verdict", "decision", "label", "comment", "reviewer")


def label_from_decision(verdict: str | None, decision: str | None) -> str | None:
    """The label a reviewer's decision implies; None when it implies none (unsure, or no YES/NO verdict)."""
    if verdict not in ("YES", "NO") or decision not in ("agree", "disagree"):
        return None
    if decision == "agree":
        return verdict
    return "NO" if verdict == "YES" else "YES"
