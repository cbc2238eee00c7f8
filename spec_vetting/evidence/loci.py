"""The Gaia colour-magnitude diagram's sequences, as straight lines in (BP-RP, M_G), and the checks that say a
verdict contradicts significant astrometry.

The lines are rough on purpose (a screener's sketch, not a fit to a survey), good to about a magnitude over
0 < BP-RP < 3.5 for the main sequence and -0.4 < BP-RP < 1.5 for white dwarfs:

- main sequence: M_G = 2.07 + 3.17 (BP-RP)   (the Sun: BP-RP 0.82, M_G 4.67; a K5 dwarf: 1.6, 7.1);
- white-dwarf sequence: M_G = 11.3 + 3.4 (BP-RP)   (a 10 000 K DA: 0.0, 11.3; a 6000 K one: 0.5, 13.0).

Cataclysmic variables lie between the two; M giants lie far above the main sequence (M_G < 3.5).
"""

from __future__ import annotations

import numpy as np

from .photometry import RUWE_MAX

MS_ZERO, MS_SLOPE = 2.07, 3.17
WD_ZERO, WD_SLOPE = 11.3, 3.4
#: brighter than this is a giant, fainter than DWARF_MG_MIN a dwarf (M stars: giants M_G ~ -1 to 1, dwarfs > 8)
GIANT_MG_MAX, DWARF_MG_MIN = 3.5, 6.0
#: the white-dwarf locus: within this many magnitudes of the white-dwarf line
WD_LOCUS_HALF_WIDTH = 1.5
#: parallax_over_error above which a contradiction goes to the review queue (stricter than M_G's own 5)
DISAGREE_PARALLAX_OVER_ERROR = 10.0
#: evidence_disagrees thresholds (magnitudes)
GM_YES_MG_MIN = 5.0  # an M giant with M_G above this is a dwarf
WD_YES_OFF_LOCUS = 3.0  # a white dwarf more than this above its sequence
WD_NO_ON_LOCUS = 1.0  # a NO within this of the white-dwarf line
CV_YES_ABOVE_MS = 2.0  # a CV more than this above the main sequence


def main_sequence_mg(bp_rp):
    return MS_ZERO + MS_SLOPE * np.asarray(bp_rp, dtype=np.float64)


def white_dwarf_mg(bp_rp):
    return WD_ZERO + WD_SLOPE * np.asarray(bp_rp, dtype=np.float64)


def disagreement(task, verdict, abs_g, parallax_over_error, bp_rp, ruwe=None) -> np.ndarray:
    """Where a verdict contradicts significant astrometry (arrays of one length; nulls as NaN or None):

    - gm YES with M_G > 5 (a dwarf's luminosity);
    - wd YES more than 3 mag above the white-dwarf sequence, wd NO within 1 mag of it;
    - cv YES more than 2 mag above the main sequence (no CV is that luminous);

    each only at parallax_over_error > 10 and RUWE <= 1.4 or unknown (BP-RP needed for wd and cv)."""
    task = np.asarray(task, dtype=object)
    verdict = np.asarray(verdict, dtype=object)
    mg = np.asarray(abs_g, dtype=np.float64)
    poe = np.asarray(parallax_over_error, dtype=np.float64)
    c = np.asarray(bp_rp, dtype=np.float64)
    r = np.full(mg.shape, np.nan) if ruwe is None else np.asarray(ruwe, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        strong = np.isfinite(mg) & (poe > DISAGREE_PARALLAX_OVER_ERROR) & ~(r > RUWE_MAX)
        has_c = np.isfinite(c)
        yes, no = verdict == "YES", verdict == "NO"
        wd_off = white_dwarf_mg(c) - mg
        gm = (task == "gm") & yes & (mg > GM_YES_MG_MIN)
        wd = (task == "wd") & has_c & ((yes & (wd_off > WD_YES_OFF_LOCUS)) | (no & (np.abs(wd_off) < WD_NO_ON_LOCUS)))
        cv = (task == "cv") & has_c & yes & (main_sequence_mg(c) - mg > CV_YES_ABOVE_MS)
    return strong & (gm | wd | cv)
