"""Every (candidate, catalog source) pair within the match radius once the source is moved to the candidate's
epoch: the exact core of the cross-match, without a neighbour cap.

A source with total proper motion mu (arcsec/yr) is, ``dt`` years from the catalog's epoch, at most ``mu * |dt|``
from its catalog position (the propagation of :mod:`.motion` moves a unit vector by that much along the tangent
plane and normalises it, which shortens the arc). So every source that can be within ``r`` of a candidate at the
candidate's epoch lies within ``r + mu * |dt|`` of it at the catalog's epoch. The sources are split into tiers of
proper motion; each tier gets its own k-d tree, searched with a ball of ``r + (the tier's largest mu) * |dt|`` per
candidate, so that the few fast stars do not widen the search for the many slow ones. The pairs found are moved
and measured exactly; only those within ``r`` are kept. Nothing depends on how many sources lie nearer: Barnard's
star is found in the densest field.
"""

from __future__ import annotations

import numpy as np

from .motion import propagate, separation_arcsec

#: upper edges of the proper-motion tiers (arcsec/yr); the last tier takes everything faster
TIER_EDGES_ARCSEC_YR = (0.02, 0.1, 0.5, 2.5)
#: the ball is widened by this (relative) so that rounding never drops a pair the exact test would keep
_SLACK = 1e-7


def unit_vectors(ra_deg, dec_deg) -> np.ndarray:
    ra = np.radians(np.asarray(ra_deg, dtype=np.float64))
    dec = np.radians(np.asarray(dec_deg, dtype=np.float64))
    cd = np.cos(dec)
    return np.column_stack([cd * np.cos(ra), cd * np.sin(ra), np.sin(dec)])


def chord(arcsec) -> np.ndarray:
    """Chord length on the unit sphere of an angle in arcseconds (angles over 180 degrees count as 180)."""
    theta = np.radians(np.minimum(np.asarray(arcsec, dtype=np.float64), 648_000.0) / 3600.0)
    return 2.0 * np.sin(theta / 2.0)


def total_motion_arcsec_yr(pmra_mas_yr, pmdec_mas_yr) -> np.ndarray:
    """Total proper motion (arcsec/yr), a null component counting as none (as :func:`.motion.propagate` does)."""
    return np.hypot(np.nan_to_num(np.asarray(pmra_mas_yr, dtype=np.float64)),
                    np.nan_to_num(np.asarray(pmdec_mas_yr, dtype=np.float64))) / 1000.0


def pairs_within(cand_ra, cand_dec, cand_years, src_ra, src_dec, src_pmra, src_pmdec,
                 radius_arcsec: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(candidate index, source index, separation in arcsec at the candidate's epoch) of every pair within
    ``radius_arcsec``. ``cand_years``: years from the catalog's epoch to each spectrum (0 where unknown);
    ``src_pmra``/``src_pmdec`` in mas/yr (None: the catalog has no proper motions). Sources with a null ra/dec
    are skipped."""
    from scipy.spatial import cKDTree

    empty = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64))
    cand_ra = np.asarray(cand_ra, dtype=np.float64)
    cand_dec = np.asarray(cand_dec, dtype=np.float64)
    src_ra = np.asarray(src_ra, dtype=np.float64)
    src_dec = np.asarray(src_dec, dtype=np.float64)
    if len(cand_ra) == 0 or len(src_ra) == 0:
        return empty
    years = np.abs(np.nan_to_num(np.asarray(cand_years, dtype=np.float64)))
    years = np.broadcast_to(years, cand_ra.shape)
    if src_pmra is None or src_pmdec is None:
        src_pmra = src_pmdec = np.zeros(len(src_ra))
    mu = total_motion_arcsec_yr(src_pmra, src_pmdec)
    usable = np.isfinite(src_ra) & np.isfinite(src_dec)
    tier = np.searchsorted(np.asarray(TIER_EDGES_ARCSEC_YR), mu, side="left")
    cand_xyz = unit_vectors(cand_ra, cand_dec)
    found_c, found_s = [], []
    for t in np.unique(tier[usable]):
        members = np.flatnonzero(usable & (tier == t))
        tree = cKDTree(unit_vectors(src_ra[members], src_dec[members]))
        ball = chord(radius_arcsec + mu[members].max() * years) * (1.0 + _SLACK) + 1e-15
        hits = tree.query_ball_point(cand_xyz, ball, return_sorted=False)
        lengths = np.fromiter((len(h) for h in hits), dtype=np.int64, count=len(hits))
        if lengths.sum() == 0:
            continue
        found_c.append(np.repeat(np.arange(len(cand_ra), dtype=np.int64), lengths))
        found_s.append(members[np.concatenate([np.asarray(h, dtype=np.int64) for h in hits if h])])
    if not found_c:
        return empty
    ci, si = np.concatenate(found_c), np.concatenate(found_s)
    moved_ra, moved_dec = propagate(src_ra[si], src_dec[si], np.asarray(src_pmra, dtype=np.float64)[si],
                                    np.asarray(src_pmdec, dtype=np.float64)[si],
                                    np.nan_to_num(np.asarray(cand_years, dtype=np.float64) * np.ones(len(cand_ra)))[ci])
    sep = separation_arcsec(cand_ra[ci], cand_dec[ci], moved_ra, moved_dec)
    keep = sep <= radius_arcsec
    return ci[keep], si[keep], sep[keep]
