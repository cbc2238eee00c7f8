"""The one evidence sentence a run may append to the task text (``evidence_prompt``, off by default): for a
checkpoint trained with it. The published weights never saw catalog data, so the default prompt stays the trained
one; a run that turns this on records it in its manifest and in each verdict's prompt_version (``+evidence1``).
"""

from __future__ import annotations

import math
from typing import Any

from .gaia_columns import (
    GAIA_ABS_G,
    GAIA_ABS_G_ERROR,
    GAIA_BP_RP,
    GAIA_PARALLAX,
    GAIA_PARALLAX_ERROR,
    GAIA_PMDEC,
    GAIA_PMRA,
    GAIA_SOURCE_ID,
)
from .sources import evidence_number

#: the version suffix of a task text with the sentence appended; bump when the sentence's wording changes
SENTENCE_VERSION = "evidence1"


def evidence_sentence(evidence: dict[str, Any] | None) -> str | None:
    """``Gaia DR3: parallax 5.21 ± 0.05 mas, absolute G magnitude 9.12 ± 0.02, BP-RP 2.80, proper motion 120.3
    mas/yr.`` from a candidate's gaia values; None without a Gaia source (the text is then left as it is)."""
    evidence = evidence or {}
    if evidence.get(GAIA_SOURCE_ID) is None and evidence_number(evidence, GAIA_PARALLAX) is None:
        return None
    parts = []
    plx, plx_err = evidence_number(evidence, GAIA_PARALLAX), evidence_number(evidence, GAIA_PARALLAX_ERROR)
    if plx is not None and plx_err is not None:
        parts.append(f"parallax {plx:.2f} ± {plx_err:.2f} mas")
    mg, mg_err = evidence_number(evidence, GAIA_ABS_G), evidence_number(evidence, GAIA_ABS_G_ERROR)
    if mg is not None and mg_err is not None:
        parts.append(f"absolute G magnitude {mg:.2f} ± {mg_err:.2f}")
    else:
        parts.append("absolute G magnitude unknown (parallax not significant)")
    c = evidence_number(evidence, GAIA_BP_RP)
    if c is not None:
        parts.append(f"BP-RP {c:.2f}")
    pmra, pmdec = evidence_number(evidence, GAIA_PMRA), evidence_number(evidence, GAIA_PMDEC)
    if pmra is not None and pmdec is not None:
        parts.append(f"proper motion {math.hypot(pmra, pmdec):.1f} mas/yr")
    return "Gaia DR3: " + ", ".join(parts) + "."
