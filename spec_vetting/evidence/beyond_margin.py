"""The second, targeted search: catalog sources that lie beyond a partition's margin at the catalog's epoch but
move into a candidate's radius by the spectrum's epoch.

lsdb's cross-match gives each candidate the rows of the catalog partition it falls in plus the partition's margin
(the rows of the neighbouring partitions within ``margin`` of its border). A source the candidate could match lies
within ``R = radius + max_pm * |dt|`` of it at the catalog's epoch; when ``R`` exceeds the margin (the public Gaia
DR3 catalog's is 10", 1.8 years of Barnard's star's 10.4"/yr), part of that cone may lie in a neighbouring
partition beyond the margin. Those parts, and only those, are searched here: the cone's HEALPix cells that belong
to another partition than the candidate's own, gathered into one MOC and read with lsdb's ``moc_search``; only
sources fast enough to cross the margin are kept (``mu * |dt| > margin - radius``); the pairs are then made exactly
(:func:`.moving_pairs.pairs_within`). A catalog without a margin is the case ``margin = 0``.

A cone that stays inside its own partition costs nothing, so the work grows with the candidates near partition
borders, not with the catalog.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .moving_pairs import pairs_within

#: HEALPix depth of the cells a cone is cut into (51" cells), deeper when the catalog's partitions are deeper
CONE_DEPTH = 12


@dataclass
class Partitions:
    """Which catalog partition a HEALPix cell of depth ``depth`` (>= every partition's order) belongs to."""

    depth: int
    by_order: dict[int, np.ndarray]  # order -> its partitions' pixel numbers

    @classmethod
    def of(cls, healpix_pixels) -> Partitions:
        by_order: dict[int, list[int]] = {}
        for p in healpix_pixels:
            by_order.setdefault(int(p.order), []).append(int(p.pixel))
        depth = max([CONE_DEPTH, *by_order])
        return cls(depth, {k: np.unique(np.asarray(v, dtype=np.int64)) for k, v in by_order.items()})

    def owner(self, cells: np.ndarray) -> np.ndarray:
        """Per cell, its partition as ``order * 2**40 + pixel`` (-1 where no partition covers it)."""
        cells = np.asarray(cells, dtype=np.int64)
        out = np.full(len(cells), -1, dtype=np.int64)
        for order, pixels in self.by_order.items():
            parent = cells >> (2 * (self.depth - order))
            hit = np.isin(parent, pixels)
            out[hit] = order * (1 << 40) + parent[hit]
        return out


def cells_beyond(partitions: Partitions, ra, dec, cone_arcsec) -> tuple[np.ndarray, np.ndarray]:
    """(which candidates' cones reach another partition than the one the candidate is in, or any partition when
    it is in none; the union of the cells of depth ``partitions.depth`` they reach there)."""
    import astropy.units as u
    from mocpy import MOC

    ra, dec = np.asarray(ra, dtype=np.float64), np.asarray(dec, dtype=np.float64)
    own = partitions.owner(_cells_of(ra, dec, partitions.depth))
    # every cell a cone touches (a superset: the cone's MOC errs outwards), all cones at once
    mocs = MOC.from_cones(ra * u.deg, dec * u.deg, radius=np.asarray(cone_arcsec, dtype=np.float64) * u.arcsec,
                          max_depth=partitions.depth)
    if isinstance(mocs, MOC):
        mocs = [mocs]
    per_cone = [np.asarray(m.flatten(), dtype=np.int64) for m in mocs]
    which = np.repeat(np.arange(len(per_cone)), [len(c) for c in per_cone])
    cells = np.concatenate(per_cone) if per_cone else np.empty(0, np.int64)
    owner = partitions.owner(cells)
    elsewhere = (owner >= 0) & ((owner != own[which]) | (own[which] < 0))
    reach = np.bincount(which[elsewhere], minlength=len(ra)) > 0
    return reach, np.unique(cells[elsewhere])


@dataclass
class BeyondMargin:
    """The pairs found beyond the margins (columns ``key``, ``_sep`` and the catalog's) and how many candidates'
    cones reached into another partition beyond the margin."""

    pairs: pd.DataFrame
    cones: int


def search_beyond_margin(catalog, candidates: pd.DataFrame, *, ra_column: str, dec_column: str,
                         pm_columns: tuple[str, str] | None, radius_arcsec: float, max_pm_arcsec_yr: float,
                         margin_arcsec: float | None) -> BeyondMargin:
    """``candidates``: columns key, ra, dec, years (from the catalog's epoch; 0 where unknown). ``catalog``: the
    lsdb catalog (the columns to keep already selected)."""
    from mocpy import MOC

    margin = float(margin_arcsec or 0.0)
    years = np.abs(candidates["years"].to_numpy(dtype=np.float64))
    moves = max_pm_arcsec_yr * years if pm_columns is not None else np.zeros(len(candidates))
    cone = radius_arcsec + moves
    partitions = Partitions.of(catalog.get_healpix_pixels())
    own = partitions.owner(_cells_of(candidates["ra"], candidates["dec"], partitions.depth))
    need = (cone > margin) | (own < 0)
    empty = BeyondMargin(pd.DataFrame(), 0)
    if not need.any():
        return empty
    near = candidates[need]
    reach, cells = cells_beyond(partitions, near["ra"], near["dec"], cone[need])
    if not reach.any():
        return empty
    moc = MOC.from_healpix_cells(cells, np.full(len(cells), partitions.depth, dtype=np.uint8), partitions.depth)
    found = catalog.moc_search(moc, fine=True)
    reached = near[reach]
    if pm_columns is not None and margin > radius_arcsec and (own[need][reach] >= 0).all():
        # a source beyond the margin must move more than (margin - radius) to reach a candidate (slower ones are
        # in the partition's own rows or its margin, matched already)
        slowest = (margin - radius_arcsec) / float(years[need][reach].max() or np.inf) * 1000.0
        found = found.map_partitions(_faster_than, pm_columns=pm_columns, mas_yr=slowest)
    rows = pd.DataFrame(found.compute(progress_bar=False)).reset_index(drop=True)
    if rows.empty:
        return BeyondMargin(pd.DataFrame(), int(reach.sum()))

    def col(name):
        return rows[name].to_numpy(dtype=np.float64, na_value=np.nan)

    pm = (None, None) if pm_columns is None else (col(pm_columns[0]), col(pm_columns[1]))
    ci, si, sep = pairs_within(reached["ra"], reached["dec"], reached["years"], col(ra_column), col(dec_column),
                               *pm, radius_arcsec)
    pairs = rows.iloc[si].reset_index(drop=True)
    pairs.insert(0, "_sep", sep)
    pairs.insert(0, "key", reached["key"].to_numpy(dtype=np.int64)[ci])
    return BeyondMargin(pairs, int(reach.sum()))


def _faster_than(frame, *, pm_columns: tuple[str, str], mas_yr: float):
    """The rows of a partition whose total proper motion exceeds ``mas_yr`` (null motions count as none)."""
    a = frame[pm_columns[0]].to_numpy(dtype=np.float64, na_value=np.nan)
    b = frame[pm_columns[1]].to_numpy(dtype=np.float64, na_value=np.nan)
    return frame[np.hypot(np.nan_to_num(a), np.nan_to_num(b)) > mas_yr]


def _cells_of(ra, dec, depth: int) -> np.ndarray:
    import astropy.units as u
    from cdshealpix.nested import lonlat_to_healpix

    return np.asarray(lonlat_to_healpix(np.asarray(ra, dtype=np.float64) * u.deg,
                                        np.asarray(dec, dtype=np.float64) * u.deg, depth), dtype=np.int64)
