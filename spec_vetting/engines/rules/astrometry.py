"""Score terms from Gaia astrometry and photometry, added to the spectral score of the rules engine.

Each term reads one value with its error from the candidate's evidence (``ctx.evidence``: ``gaia_abs_g`` and
``gaia_abs_g_error`` from :mod:`spec_vetting.evidence.photometry`, ``gaia_bp_rp``) and a threshold from the
colour-magnitude loci of :mod:`spec_vetting.evidence.loci`. A term counts only when significant: the value lies
beyond its threshold by at least :data:`N_SIGMA` = 3 times its error (M_G exists only at parallax/error >= 5, so
its error is at most 0.43 mag). A term that counts is cited in the justification with its number and error.
Without evidence (or with none significant) nothing is added: the engine answers as before. An M_G from an
astrometric solution with RUWE > 1.4 decides nothing.

- gm: M_G < 3.5 (an M giant's luminosity) adds +3; M_G > 6 (a dwarf's) adds -3;
- wd: M_G within 1.5 mag of the white-dwarf sequence adds +3; more than 3 mag above it (brighter) adds -3;
- cv: between the sequences (more than 2 mag below the main sequence and more than 1 mag above the white-dwarf
  one) adds +2; more than 2 mag above the main sequence adds -2.

The weights are of the order of the spectral terms they sit beside (a gm score of +3 alone gives p_yes 0.99).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...evidence.gaia_columns import GAIA_ABS_G, GAIA_ABS_G_ERROR, GAIA_BP_RP, GAIA_RUWE
from ...evidence.loci import (
    DWARF_MG_MIN,
    GIANT_MG_MAX,
    WD_LOCUS_HALF_WIDTH,
    main_sequence_mg,
    white_dwarf_mg,
)
from ...evidence.photometry import RUWE_MAX
from ...evidence.sources import evidence_number
from .significance import SIGMA, Term

#: a term counts only when its value is beyond the threshold by at least this many standard errors: the one rule
#: of the spectral terms (:data:`.significance.SIGMA`)
N_SIGMA = SIGMA


@dataclass(frozen=True)
class EvidenceTerm:
    """One astrometric term: a :class:`.significance.Term` (``value`` ± ``error`` against ``threshold``, in mag),
    what its side of the threshold means, and what it adds to the score."""

    key: str  # e.g. GAIA_ABS_G
    term: Term
    meaning: str  # what the value's side of the threshold means
    contribution: float

    @property
    def significance(self) -> float:
        """How many standard errors the value lies from the threshold."""
        return abs(self.term.sigmas)

    def sentence(self) -> str:
        """The justification's clause: the number with its error, its distance from the threshold, its meaning."""
        return f"{self.term.text()}: {self.meaning}"


def _term(key, name, value, error, threshold, meaning, contribution) -> EvidenceTerm | None:
    t = EvidenceTerm(key, Term(name, float(value), float(error), float(threshold), unit="mag"), meaning,
                     contribution)
    return t if t.term.significant() else None


def evidence_terms(task: str, evidence: dict[str, Any] | None) -> list[EvidenceTerm]:
    """The significant astrometric terms for ``task`` (empty without Gaia M_G, or for a task without terms)."""
    evidence = evidence or {}
    mg, err = evidence_number(evidence, GAIA_ABS_G), evidence_number(evidence, GAIA_ABS_G_ERROR)
    ruwe = evidence_number(evidence, GAIA_RUWE)
    if mg is None or err is None or (ruwe is not None and ruwe > RUWE_MAX):
        return []  # M_G from a doubtful astrometric solution (older caches and lists may still carry one)
    err = max(err, 1e-3)
    c = evidence_number(evidence, GAIA_BP_RP)
    terms: list[EvidenceTerm | None] = []
    if task == "gm":
        if mg < GIANT_MG_MAX:
            terms.append(_term(GAIA_ABS_G, "Gaia M_G", mg, err, GIANT_MG_MAX, "a giant's luminosity", 3.0))
        elif mg > DWARF_MG_MIN:
            terms.append(_term(GAIA_ABS_G, "Gaia M_G", mg, err, DWARF_MG_MIN, "a dwarf's luminosity", -3.0))
    elif task == "wd" and c is not None:
        wd = float(white_dwarf_mg(c))
        off = mg - wd  # > 0: fainter than the line
        if abs(off) < WD_LOCUS_HALF_WIDTH:
            # on the locus: significant when the value is well inside the band, towards the line
            edge = wd - WD_LOCUS_HALF_WIDTH if off < 0 else wd + WD_LOCUS_HALF_WIDTH
            terms.append(_term(GAIA_ABS_G, f"Gaia M_G at BP-RP {c:.2f}", mg, err, edge,
                               "on the white-dwarf sequence", 3.0))
        elif off < -3.0:
            terms.append(_term(GAIA_ABS_G, f"Gaia M_G at BP-RP {c:.2f}", mg, err, wd - 3.0,
                               "far above the white-dwarf sequence", -3.0))
    elif task == "cv" and c is not None:
        ms, wd = float(main_sequence_mg(c)), float(white_dwarf_mg(c))
        if ms + 2.0 < mg < wd - 1.0:
            edge = ms + 2.0 if mg - (ms + 2.0) < (wd - 1.0) - mg else wd - 1.0
            terms.append(_term(GAIA_ABS_G, f"Gaia M_G at BP-RP {c:.2f}", mg, err, edge,
                               "between the white-dwarf and main sequences", 2.0))
        elif mg < ms - 2.0:
            terms.append(_term(GAIA_ABS_G, f"Gaia M_G at BP-RP {c:.2f}", mg, err, ms - 2.0,
                               "above the main sequence, too luminous for a CV", -2.0))
    return [t for t in terms if t is not None]


def with_terms(justification: str, terms: list[EvidenceTerm]) -> str:
    """``justification`` with every counted term cited (its number, error and meaning)."""
    if not terms:
        return justification
    return f"{justification}; astrometry: " + "; ".join(t.sentence() for t in terms)
