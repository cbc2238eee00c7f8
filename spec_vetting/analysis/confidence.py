"""How far to trust p_yes, and which verdicts a person should look at.

Calibration compares the catalog's ``p_yes`` (probability that the answer is YES; from answer-token
log-probabilities or self-consistency, computed by the inspection loop) with the labels: a reliability diagram
(equal-width bins of p_yes, mean p_yes against the fraction labelled YES per bin) and the expected calibration
error ECE = sum over bins of (n_bin / n) * |fraction YES - mean p_yes|.

The review queue holds verdicts a screener should not be trusted on alone: ERROR, UNDECIDED, a verdict recovered
from a broken answer format, a p_yes inside the uncertainty band, a p_yes that contradicts the verdict, and a
verdict that contradicts significant Gaia astrometry (``evidence_disagrees``, second in urgency after ERROR).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..evidence.gaia_columns import GAIA_ABS_G, GAIA_BP_RP, GAIA_PARALLAX, GAIA_PARALLAX_ERROR, GAIA_RUWE

DEFAULT_BINS = 10

#: a verdict is uncertain when max(p_yes, 1 - p_yes) is below this (p_yes strictly between 0.2 and 0.8)
DEFAULT_REVIEW_THRESHOLD = 0.8

#: queue order: the most urgent reason first
REVIEW_REASONS = ("error", "evidence_disagrees", "undecided", "verdict_outside_answer", "recovered_format",
                  "contradicting_p_yes", "uncertain_p_yes")


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


#: the order of a row's reasons in its list (and in the review-queue CSV); REVIEW_REASONS orders the queue
_LISTED_ORDER = ("error", "undecided", "recovered_format", "verdict_outside_answer", "contradicting_p_yes",
                 "uncertain_p_yes", "evidence_disagrees")

#: the verdict-row columns the review reasons read
REVIEW_COLUMNS = ("verdict", "status", "recovered_verdict", "p_yes", "task", GAIA_ABS_G, GAIA_PARALLAX,
                  GAIA_PARALLAX_ERROR, GAIA_BP_RP, "evidence_extra")

#: ``review_urgency`` of a row that needs no review
NOT_QUEUED = len(REVIEW_REASONS)


def _column(table, name: str, type_):
    """``table``'s column ``name`` as ``type_``; all null when the table has no such column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if name not in table.schema.names:
        return pa.nulls(table.num_rows, type_)
    col = table.column(name)
    return col if col.type == type_ else pc.cast(col, type_)


def _usable_mask(p):
    """Where p_yes is a probability (finite, in [0, 1]): the Arrow form of :func:`_usable_p`."""
    import pyarrow.compute as pc

    return pc.fill_null(pc.and_(pc.is_finite(p), pc.and_(pc.greater_equal(p, 0.0), pc.less_equal(p, 1.0))), False)


def review_flags(table, *, threshold: float = DEFAULT_REVIEW_THRESHOLD) -> dict:
    """Reason -> boolean array over the rows of ``table`` (an Arrow table or record batch with the columns of
    REVIEW_COLUMNS; a missing column counts as null), in listing order: whether each row is in the review queue
    for that reason. The definition of the queue: :func:`review_reasons` and the review-queue command read it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    _check_threshold(threshold)

    def true(mask):
        return pc.fill_null(mask, False)

    def column(name, type_):
        return _column(table, name, type_)

    verdict = column("verdict", pa.string())
    p = column("p_yes", pa.float64())
    usable = _usable_mask(p)
    yes, no = true(pc.equal(verdict, "YES")), true(pc.equal(verdict, "NO"))
    decided_usable = pc.and_(pc.or_(yes, no), usable)
    contradicting = pc.or_(pc.and_(yes, true(pc.less(p, 0.5))), pc.and_(no, true(pc.greater(p, 0.5))))
    confidence = pc.max_element_wise(p, pc.subtract(1.0, p))
    return {
        "error": true(pc.equal(verdict, "ERROR")),
        "undecided": true(pc.equal(verdict, "UNDECIDED")),
        "recovered_format": true(pc.equal(column("status", pa.string()), "recovered")),
        "verdict_outside_answer": true(pc.is_in(column("recovered_verdict", pa.string()),
                                                value_set=pa.array(["YES", "NO"]))),
        "contradicting_p_yes": pc.and_(decided_usable, contradicting),
        "uncertain_p_yes": pc.and_(decided_usable, true(pc.less(confidence, threshold))),
        "evidence_disagrees": _evidence_disagrees(column),
    }


def _evidence_disagrees(column):
    """Where the verdict contradicts significant Gaia astrometry (:func:`spec_vetting.evidence.loci.disagreement`:
    gm YES at M_G > 5, wd YES far above the white-dwarf sequence or NO on it, cv YES above the main sequence; only
    at parallax/error > 10 and RUWE <= 1.4), or a significant light curve (cv YES constant over two years, wd YES
    strongly variable)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..evidence.loci import disagreement

    def numbers(name):
        return pc.fill_null(column(name, pa.float64()), float("nan")).to_numpy(zero_copy_only=False)

    texts = [column(n, pa.string()).to_numpy(zero_copy_only=False) for n in ("task", "verdict")]
    # issue 38: a YES that a significant light curve (in evidence_extra) contradicts
    light = _light_curve_disagrees(column, texts)
    mg = numbers(GAIA_ABS_G)
    if not np.isfinite(mg).any():  # no Gaia evidence in these rows: only the light curves
        return pa.array(light)
    with np.errstate(divide="ignore", invalid="ignore"):
        poe = numbers(GAIA_PARALLAX) / numbers(GAIA_PARALLAX_ERROR)
    return pa.array(disagreement(texts[0], texts[1], mg, poe, numbers(GAIA_BP_RP), numbers(GAIA_RUWE)) | light)


def _light_curve_disagrees(column, texts):
    """cv YES on a light curve constant over two years, wd YES on a strongly variable one
    (:func:`spec_vetting.evidence.variability.contradicts`)."""
    import pyarrow as pa

    from ..evidence.variability import disagreement_from_extra

    extra = column("evidence_extra", pa.string()).to_numpy(zero_copy_only=False)
    return disagreement_from_extra(texts[0], texts[1], extra)


def review_urgency(table, flags: dict):
    """(urgency, confidence) arrays of ``table``'s rows for :func:`review_flags`' ``flags``: urgency is the index in
    REVIEW_REASONS of a row's most urgent reason (NOT_QUEUED when it has none), confidence max(p_yes, 1 - p_yes)
    where p_yes is usable, else 0. The queue is sorted by (urgency, confidence, task, candidate_id)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    urgency = pa.array([NOT_QUEUED] * table.num_rows, pa.int8())
    for reason in reversed(REVIEW_REASONS):  # the most urgent reason is written last and wins
        urgency = pc.if_else(flags[reason], pa.scalar(REVIEW_REASONS.index(reason), pa.int8()), urgency)
    p = _column(table, "p_yes", pa.float64())
    confidence = pc.if_else(_usable_mask(p), pc.max_element_wise(p, pc.subtract(1.0, p)), 0.0)
    return urgency, confidence


def reason_lists(flags: dict) -> list[list[str]]:
    """Each row's reasons, in listing order, from :func:`review_flags`' arrays."""
    columns = [(reason, flags[reason].to_pylist()) for reason in _LISTED_ORDER]
    n = len(columns[0][1])
    return [[reason for reason, values in columns if values[i]] for i in range(n)]


def _check_threshold(threshold: float) -> None:
    if not 0.5 <= threshold <= 1.0:
        raise ValueError(f"review threshold must be in [0.5, 1], got {threshold}")


def review_table(rows: list[dict]):
    """The REVIEW_COLUMNS of ``rows`` (dicts) as an Arrow table, for :func:`review_flags`."""
    import pyarrow as pa

    def values(name):
        return [row.get(name) for row in rows]

    # NaN, inf and out-of-range p_yes stay as they are: the flags leave them out
    p = [None if row.get("p_yes") is None else float(row["p_yes"]) for row in rows]
    def numbers(name):
        return pa.array([None if row.get(name) is None else float(row[name]) for row in rows], pa.float64())

    return pa.table({"verdict": pa.array(values("verdict"), pa.string()),
                     "status": pa.array(values("status"), pa.string()),
                     "recovered_verdict": pa.array(values("recovered_verdict"), pa.string()),
                     "p_yes": pa.array(p, pa.float64()),
                     "task": pa.array(values("task"), pa.string()),
                     **{n: numbers(n) for n in (GAIA_ABS_G, GAIA_PARALLAX, GAIA_PARALLAX_ERROR, GAIA_BP_RP)},
                     "evidence_extra": pa.array(values("evidence_extra"), pa.string())})


def review_reasons(row: dict, *, threshold: float = DEFAULT_REVIEW_THRESHOLD) -> list[str]:
    """Why a verdict row belongs in the review queue (empty list: it does not)."""
    return reason_lists(review_flags(review_table([row]), threshold=threshold))[0]


def review_queue(rows: list[dict], *, threshold: float = DEFAULT_REVIEW_THRESHOLD) -> list[dict]:
    """Rows needing review, most urgent first, each with ``review_reasons`` added (a copy; input untouched).
    For rows already in memory; the review-queue command streams the catalog instead."""
    table = review_table(rows)
    flags = review_flags(table, threshold=threshold)
    urgency, confidence = review_urgency(table, flags)
    queued = [
        (u, c, row.get("task") or "", row["candidate_id"], {**row, "review_reasons": reasons})
        for row, reasons, u, c in zip(rows, reason_lists(flags), urgency.to_pylist(), confidence.to_pylist(),
                                      strict=True)
        if reasons
    ]
    queued.sort(key=lambda q: q[:4])
    return [q[4] for q in queued]
