"""The reviewer's vocabulary and the CSV the review page exports: one list drives the page (``report/page.py``), the
label reader (:mod:`.labels`), ``spec-vet review import`` and tests.

A decision is about the agent's verdict: ``agree`` (the verdict is right), ``disagree`` (it is wrong; for a YES/NO
verdict the label is the other word) or ``unsure``. The page writes the label it implies into the ``label`` column,
so ``spec-vet eval --labels`` and ``spec-vet export sft`` read the file like any label list.

Beside the decision, the page has DESI prospect's visual-inspection fields: a quality class 4-0 (``VI_QUALITY``),
issue flags as one letter each (``VI_ISSUES``), a VI redshift, a spectral type and standard comments
(``VI_STANDARD_COMMENTS``), and the reviewer's name.
"""

from __future__ import annotations

DECISIONS = ("agree", "disagree", "unsure")

#: prospect's quality classes (py/prospect/utilities.py vi_flags), best first
VI_QUALITY = {
    "4": "Confident classification: two or more secure features",
    "3": "Probable classification: at least one secure feature + continuum, or many weak features",
    "2": "Possible classification: one strong feature but unsure what it is",
    "1": "Unlikely classification: clear signal but features unidentified",
    "0": "Nothing there, no signal",
}

#: issue flags, one letter each (R, C, S are prospect's; A is about the agent's trajectory)
VI_ISSUES = {
    "R": "Bad redshift: the catalogue z the agent worked with is wrong",
    "C": "Bad spectral type from the survey pipeline",
    "S": "Bad spectrum: sky/cosmic residuals, bad calibration, gaps",
    "A": "Agent problem: its zooms or reasoning do not support its verdict",
}

#: spectral types a reviewer may give (prospect's, as redrock spells them)
VI_SPECTYPES = ("STAR", "GALAXY", "QSO")

#: standardised comments, one click each on the page (prospect's four, then stellar ones for the Spec-o3 tasks)
VI_STANDARD_COMMENTS = (
    "Broad absorption line quasar (BAL)",
    "Damped Lyman-alpha system (DLA)",
    "Two objects in spectrum",
    "Blazar",
    "Balmer emission (CV-like)",
    "Broad Balmer absorption (white dwarf)",
    "Molecular bands (M / carbon / S star)",
    "Low S/N",
)

#: columns of the exported CSV, in order; the first seven are the label-list columns older exports have
REVIEW_CSV_COLUMNS = ("candidate_id", "task", "verdict", "decision", "label", "comment", "reviewer",
                      "vi_quality", "vi_issues", "vi_z", "vi_spectype", "run_id", "reviewed_at")

#: where `spec-vet review import` keeps the decisions it brought back, under the catalog root (a ``_`` folder, so
#: no Parquet reader takes it for a table)
REVIEW_DIR = "_review"
REVIEW_DECISIONS_FILE = "decisions.csv"


def label_from_decision(verdict: str | None, decision: str | None) -> str | None:
    """The label a reviewer's decision implies; None when it implies none (unsure, or no YES/NO verdict)."""
    if verdict not in ("YES", "NO") or decision not in ("agree", "disagree"):
        return None
    if decision == "agree":
        return verdict
    return "NO" if verdict == "YES" else "YES"
