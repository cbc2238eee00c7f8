"""Score terms from a light curve (issue 38), added to the spectral score beside the astrometric ones.

Each term is a significant finding of :mod:`spec_vetting.evidence.variability` (value beyond its threshold by
3 errors; the thresholds and their sources are listed there) and is cited in the justification with its number,
its error and its distance from the threshold:

- cv: +2 for an outburst of >= 1 mag or flickering well above the errors; -2 for a light curve constant within
  its errors over >= 2 years of good epochs (only when no band shows an outburst or flickering);
- gm and carbon: +1 for large-amplitude variability slower than the cadence (semi-regular or Mira-type);
- wd: -1 for strong variability (a 5-95 % amplitude beyond 0.5 mag).

One term per kind: the most significant band's. Without light-curve evidence nothing is added.
"""

from __future__ import annotations

from typing import Any

from ...evidence.variability import Finding, findings, strongest
from .astrometry import EvidenceTerm
from .significance import Term

#: task -> (finding kinds, in order of preference, and what each adds)
TASK_TERMS: dict[str, list[tuple[tuple[str, ...], float]]] = {
    "cv": [(("outburst", "flickering"), 2.0), (("constant",), -2.0)],
    "gm": [(("long_period",), 1.0)],
    "carbon": [(("long_period",), 1.0)],
    "wd": [(("strong",), -1.0)],
}


def _term(f: Finding, contribution: float) -> EvidenceTerm:
    return EvidenceTerm(f.label.replace(" ", "_"), Term(f.label, f.value, f.error, f.threshold, unit=f.unit),
                        f.meaning, contribution)


def light_curve_terms(task: str, evidence: dict[str, Any] | None) -> list[EvidenceTerm]:
    """The significant light-curve terms for ``task`` (empty without light curves or for other tasks)."""
    rules = TASK_TERMS.get(task)
    if not rules:
        return []
    found = findings(evidence)
    if not found:
        return []
    terms = []
    for kinds, contribution in rules:
        if contribution < 0 and task == "cv" and any(f.kind in ("outburst", "flickering") for f in found):
            continue  # one steady band beside an outbursting one: not a steady star
        best = next((f for k in kinds if (f := strongest(found, k)) is not None), None)
        if best is not None:
            terms.append(_term(best, contribution))
    return terms


def with_light_curve_terms(justification: str, terms: list[EvidenceTerm]) -> str:
    """``justification`` with every counted light-curve term cited."""
    if not terms:
        return justification
    return f"{justification}; light curve: " + "; ".join(t.sentence() for t in terms)
