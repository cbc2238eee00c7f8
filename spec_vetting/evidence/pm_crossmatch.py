"""The proper-motion-aware cross-match as an lsdb crossmatch algorithm: per pair of aligned partitions, every
catalog source (the partition and its margin rows) that is within the radius of a candidate at the candidate's
epoch (:func:`.moving_pairs.pairs_within`). No neighbour cap, and no search radius to compare with the margin: a
source that moves from beyond the margin into the radius is the business of :mod:`.beyond_margin`.

Imports lsdb: import this module only where a cross-match is made.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from lsdb.core.crossmatch.abstract_crossmatch_algorithm import AbstractCrossmatchAlgorithm

from .moving_pairs import pairs_within

#: the left (candidate) column with the years from the catalog's epoch to the spectrum (0 where unknown)
YEARS_COLUMN = "years"


class ProperMotionCrossmatch(AbstractCrossmatchAlgorithm):
    """All pairs within ``radius_arcsec`` at each candidate's epoch; ``_dist_arcsec`` is that separation."""

    extra_columns = pd.DataFrame({"_dist_arcsec": pd.Series(dtype=np.float64)})

    def __init__(self, radius_arcsec: float, pm_columns: tuple[str, str] | None):
        super().__init__()
        self.radius_arcsec = float(radius_arcsec)
        self.pm_columns = pm_columns

    def validate(self, left, right):
        super().validate(left, right)
        if not self.radius_arcsec > 0:
            raise ValueError("the match radius must be positive")
        if YEARS_COLUMN not in left.columns:
            raise ValueError(f"the candidates need a {YEARS_COLUMN!r} column")
        if self.pm_columns is not None:
            missing = [c for c in self.pm_columns if c not in right.columns]
            if missing:
                raise ValueError(f"the catalog has no column(s) {missing}")

    def perform_crossmatch(self, crossmatch_args) -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
        left, right = crossmatch_args.left_df, crossmatch_args.right_df
        li, ri = crossmatch_args.left_catalog_info, crossmatch_args.right_catalog_info

        def col(frame, name):
            return frame[name].to_numpy(dtype=np.float64, na_value=np.nan)

        pm = (None, None) if self.pm_columns is None else (col(right, self.pm_columns[0]),
                                                           col(right, self.pm_columns[1]))
        ci, si, sep = pairs_within(col(left, li.ra_column), col(left, li.dec_column), col(left, YEARS_COLUMN),
                                   col(right, ri.ra_column), col(right, ri.dec_column), *pm, self.radius_arcsec)
        return ci, si, pd.DataFrame({"_dist_arcsec": pd.Series(sep, dtype=np.float64)})
