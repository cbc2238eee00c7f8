"""How far to trust p_yes, and which verdicts a person should look at.

Calibration compares the catalog's ``p_yes`` (probability that the answer is YES; from answer-token
log-probabilities or self-consistency, computed by the inspection loop) with the labels: a reliability diagram
(equal-width bins of p_yes, mean p_yes against the fraction labelled YES per bin) and the expected calibration
error ECE = sum over bins of (n_bin / n) * |fraction YES - mean p_yes|.

The review queue holds verdicts a screener should not be trusted on alone: ERROR, UNDECIDED, a verdict recovered
from a broken answer format, a p_yes inside the uncertainty band, and a p_yes that contradicts the verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

DEFAULT_BINS = 10

#: a verdict is uncertain when max(p_yes, 1 - p_yes) is below this (p_yes strictly between 0.2 and 0.8)
DEFAULT_REVIEW_THRESHOLD = 0.8

#: queue order: the most urgent reason first
REVIEW_REASONS = ("error", "undecided", "verdict_outside_answer", "recovered_format", "contradicting_p_yes",
                  "uncertain_p_yes")


@dataclass
class ReliabilityBin:
    lo: float
    hi: float
    n: int
    mean_p_yes: float | None
    fraction_yes: float | None


@dataclass
class Calibration:
    n: int  # labelled rows with a p_yes
    bins: list[ReliabilityBin]
    ece: float | None  # None when n == 0
    brier: float | None
    sources: dict[str, int] = field(default_factory=dict)  # p_yes_source -> rows


def _usable_p(value) -> float | None:
    if value is None:
        return None
    p = float(value)
    return p if math.isfinite(p) and 0.0 <= p <= 1.0 else None


def calibration(rows: list[dict], *, n_bins: int = DEFAULT_BINS) -> Calibration:
    """Reliability bins and ECE over rows that have both a label (YES/NO) and a p_yes in [0, 1]."""
    ps: list[float] = []
    ys: list[float] = []
    sources: dict[str, int] = {}
    for row in rows:
        p = _usable_p(row.get("p_yes"))
        if p is None or row.get("label") not in ("YES", "NO"):
            continue
        ps.append(p)
        ys.append(1.0 if row["label"] == "YES" else 0.0)
        src = row.get("p_yes_source") or "unknown"
        sources[src] = sources.get(src, 0) + 1
    import numpy as np

    return calibration_of(np.asarray(ps, dtype=np.float64), np.asarray(ys, dtype=np.float64), sources, n_bins=n_bins)


def calibration_of(p, y, sources: dict[str, int], *, n_bins: int = DEFAULT_BINS) -> Calibration:
    """:func:`calibration` of usable p_yes values ``p`` (a float64 numpy array, each in [0, 1]) and their labels
    ``y`` (1.0 YES, 0.0 NO), in row order; ``sources``: p_yes_source -> rows. Sums run left to right in row order
    (Python's ``sum`` per bin), so rows given as dicts or as arrays give the same digits."""
    import numpy as np

    if n_bins < 1:
        raise ValueError(f"n_bins must be at least 1, got {n_bins}")
    n = len(p)
    which = np.minimum((p * n_bins).astype(np.int64), n_bins - 1)  # p == 1.0 goes in the last bin
    bins = []
    ece = 0.0
    for i in range(n_bins):
        mask = which == i
        m = int(mask.sum())
        mean_p = _sum_in_order(p[mask]) / m if m else None
        frac = _sum_in_order(y[mask]) / m if m else None
        bins.append(ReliabilityBin(i / n_bins, (i + 1) / n_bins, m, mean_p, frac))
        if m:
            ece += m / n * abs(frac - mean_p)
    brier = _sum_in_order(p, y) / n if n else None
    return Calibration(n=n, bins=bins, ece=ece if n else None, brier=brier, sources=sources)


def _sum_in_order(a, b=None, *, chunk: int = 1 << 16) -> float:
    """``sum(a)``, or ``sum((x - z) ** 2)`` over ``zip(a, b)``, added left to right as Python floats (the digits of
    a plain loop over rows), a chunk at a time so no list of every value is made."""
    total = 0.0
    for i in range(0, len(a), chunk):
        xs = a[i:i + chunk].tolist()
        if b is None:
            total = sum(xs, total)
        else:
            total = sum(((x - z) ** 2 for x, z in zip(xs, b[i:i + chunk].tolist(), strict=True)), total)
    return total


def review_reasons(row: dict, *, threshold: float = DEFAULT_REVIEW_THRESHOLD) -> list[str]:
    """Why a verdict row belongs in the review queue (empty list: it does not)."""
    reasons = []
    verdict = row.get("verdict")
    if verdict == "ERROR":
        reasons.append("error")
    if verdict == "UNDECIDED":
        reasons.append("undecided")
    if row.get("status") == "recovered":
        reasons.append("recovered_format")
    if row.get("recovered_verdict") in ("YES", "NO"):  # a YES/NO found outside any <answer> block
        reasons.append("verdict_outside_answer")
    p = _usable_p(row.get("p_yes"))
    if p is not None and verdict in ("YES", "NO"):
        if (verdict == "YES" and p < 0.5) or (verdict == "NO" and p > 0.5):
            reasons.append("contradicting_p_yes")
        if max(p, 1.0 - p) < threshold:
            reasons.append("uncertain_p_yes")
    return reasons


def review_queue(rows: list[dict], *, threshold: float = DEFAULT_REVIEW_THRESHOLD) -> list[dict]:
    """Rows needing review, most urgent first, each with ``review_reasons`` added (a copy; input untouched)."""
    if not 0.5 <= threshold <= 1.0:
        raise ValueError(f"review threshold must be in [0.5, 1], got {threshold}")
    queued = []
    for row in rows:
        reasons = review_reasons(row, threshold=threshold)
        if reasons:
            queued.append({**row, "review_reasons": reasons})

    def urgency(row):
        first = min(REVIEW_REASONS.index(r) for r in row["review_reasons"])
        p = _usable_p(row.get("p_yes"))
        return (first, max(p, 1 - p) if p is not None else 0.0, row.get("task") or "", row["candidate_id"])

    queued.sort(key=urgency)
    return queued
