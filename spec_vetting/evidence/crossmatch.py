"""Cross-matching candidates with a HATS catalog through lsdb, on whatever Dask cluster is current.

Proper motion: a catalog's positions are at its epoch, a spectrum was taken at its own. The match is exact for
every source moving up to ``max_pm_mas_yr`` (default faster than Barnard's star), whatever the catalog's margin
and however crowded the field:

1. lsdb's cross-match with :class:`.pm_crossmatch.ProperMotionCrossmatch`: per partition, every source of the
   partition and its margin that is within the radius once moved to the candidate's epoch (no neighbour cap);
2. :mod:`.beyond_margin`: the parts of each candidate's reach (``radius + max_pm * |dt|``) that lie in another
   partition beyond the margin, searched for the few sources fast enough to cross it.

Of the pairs within the radius the nearest wins and ``n_within`` counts them. Candidates whose epoch is unknown are
compared at the catalog's epoch, and named (:attr:`Matched.epoch_unknown`) since a moving source may be missed.
"""

from __future__ import annotations

import logging
import math
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ConfigError
from .gaia_columns import (
    GAIA_ABS_G,
    GAIA_ABS_G_ERROR,
    GAIA_G_MAG,
    GAIA_PARALLAX,
    GAIA_PARALLAX_ERROR,
    GAIA_REASON,
    GAIA_RUWE,
    GAIA_SOURCE_ID,
)
from .photometry import absolute_g
from .sources import GAIA_DR3_EPOCH, PM_COLUMNS, EvidenceSource

log = logging.getLogger(__name__)

#: catalog properties key that may carry the positions' epoch (Julian year, "2016.0" or "J2016.0")
EPOCH_PROPERTY = "hats_coordinate_epoch"
#: candidates per partition of the left catalog (lsdb builds it from the candidates in memory)
CANDIDATES_PER_PARTITION = 50_000


@dataclass
class OpenCatalog:
    """A checked HATS catalog: its coordinate columns, epoch, margin and identity from its metadata, and the lsdb
    catalog itself, opened only when a match needs it (:attr:`catalog`)."""

    source: EvidenceSource
    ra_column: str
    dec_column: str
    epoch: float | None
    has_margin: bool
    has_pm: bool
    margin_arcsec: float | None = None
    identity: str = ""
    _catalog: Any = field(default=None, repr=False)

    @property
    def read_columns(self) -> list[str]:
        pm = PM_COLUMNS if self.has_pm else ()
        return list(dict.fromkeys([self.ra_column, self.dec_column, *self.source.catalog_columns, *pm]))

    @property
    def catalog(self):
        """The lsdb catalog (with its margin), opened on first use: a night whose matches are all cached never
        imports lsdb."""
        if self._catalog is None:
            import lsdb

            with quiet_lsdb():
                self._catalog = lsdb.open_catalog(self.source.catalog, columns=self.read_columns)
        return self._catalog

    @property
    def note(self) -> str | None:
        if self.has_pm and self.epoch is not None:
            return None
        if not self.has_pm:
            return (f"evidence {self.source.name}: {self.source.catalog} has no proper motions (pmra, pmdec); "
                    "positions are compared as the catalog gives them")
        return (f"evidence {self.source.name}: the epoch of {self.source.catalog} is unknown (no "
                f"{EPOCH_PROPERTY} in its properties, no epoch: in the entry); positions are compared without moving "
                "them")


@contextmanager
def quiet_lsdb():
    """lsdb and nested-pandas warn about pandas deprecations and their own future defaults on every call: not the
    user's business (and an error under pytest's settings)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        # without a margin the search beyond it covers the borders (beyond_margin)
        warnings.filterwarnings("ignore", message="Right catalog does not have a margin cache")
        try:
            from pandas.errors import Pandas4Warning

            warnings.simplefilter("ignore", Pandas4Warning)
        except ImportError:  # pandas < 3.1
            pass
        yield


#: hats modules whose numba functions a match calls once per night, on arrays of a few thousand pixels
_PIXEL_TREE_MODULES = ("hats.pixel_tree.pixel_alignment", "hats.pixel_tree.moc_filter")


@contextmanager
def interpreted_pixel_trees():
    """hats aligns pixel trees (the cross-match) and filters them by a MOC (the search beyond the margin) with
    numba functions compiled on first call and not cached: 10 CPU seconds (30 s on a loaded machine) in every
    process, every night, for trees of a few thousand pixels that plain Python walks in milliseconds. Inside this
    context those functions run as the Python they were written in (numba's ``py_func``: the same code, the same
    results); outside it they are restored."""
    import importlib

    swapped = []
    for name in _PIXEL_TREE_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # another hats layout: keep whatever it does
            continue
        for attr, value in list(vars(module).items()):
            if callable(getattr(value, "py_func", None)) and hasattr(value, "signatures"):
                swapped.append((module, attr, value))
                setattr(module, attr, value.py_func)
    try:
        yield
    finally:
        for module, attr, value in swapped:
            setattr(module, attr, value)


def _epoch_from_properties(properties: dict[str, str]) -> float | None:
    raw = properties.get(EPOCH_PROPERTY)
    if raw is None:
        return None
    try:
        return float(str(raw).strip().lstrip("Jj"))
    except ValueError:
        return None


def _columns_from_lsdb(where: str, catalog: str) -> set[str]:
    """The columns of a catalog whose metadata has no schema file (older HATS writers): ask lsdb."""
    import lsdb

    try:
        with quiet_lsdb():
            return set(lsdb.open_catalog(catalog).all_columns)
    except Exception as exc:
        raise ConfigError(f"{where}: not a HATS catalog lsdb can open ({type(exc).__name__}: {exc})") from exc


def open_catalog(source: EvidenceSource) -> OpenCatalog:
    """Check ``source.catalog`` from its HATS metadata, without lsdb: reachable, HATS, with the source's columns.
    :class:`ConfigError` naming the catalog and what is wrong, before anything runs."""
    from .hats_catalog import describe

    where = f"evidence {source.name}={source.catalog}"
    info = describe(source.name, source.catalog)
    ra, dec = info.ra_column, info.dec_column
    if not ra or not dec:
        raise ConfigError(f"{where}: the catalog's properties name no ra/dec columns (hats_col_ra, hats_col_dec)")
    present = set(info.columns) or _columns_from_lsdb(where, source.catalog)
    if present:
        missing = [c for c in [ra, dec, *source.catalog_columns] if c not in present]
        if missing:
            raise ConfigError(f"{where}: column(s) {', '.join(missing)} missing; the catalog has "
                              f"{', '.join(sorted(present)[:40])}")
    has_pm = all(c in present for c in PM_COLUMNS)
    epoch = source.epoch if source.epoch is not None else _epoch_from_properties(info.properties)
    if epoch is None and source.name == "gaia":
        epoch = GAIA_DR3_EPOCH
    return OpenCatalog(source, ra, dec, epoch, info.margin_arcsec is not None, has_pm, info.margin_arcsec,
                       info.identity)


@dataclass
class Matched:
    """A match's result: one row per candidate with a source within the radius (indexed by key: the source's
    columns under their catalog names, ``sep_arcsec``, ``n_within``), how many candidates' cones were searched
    beyond their partition's margin, and the keys of the candidates compared at the catalog's epoch because their
    own epoch is unknown (a moving source may have been missed for those)."""

    frame: pd.DataFrame
    beyond_margin: int = 0
    epoch_unknown: list[int] = field(default_factory=list)


def _nearest(pairs: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """All pairs (key, _sep, _sra, _sdec, columns) -> per key the nearest source, its separation and how many
    distinct sources were within."""
    pairs = pairs.drop_duplicates(["key", "_sra", "_sdec"])  # a source found by both searches counts once
    counts = pairs.groupby("key")["_sep"].size()
    nearest = pairs.sort_values(["key", "_sep"], kind="stable").drop_duplicates("key", keep="first")
    out = pd.DataFrame({c: nearest[c].to_numpy() for c in columns})
    out["sep_arcsec"] = nearest["_sep"].to_numpy(dtype=np.float64)
    keys = nearest["key"].to_numpy(dtype=np.int64)
    out["n_within"] = counts.reindex(keys).to_numpy(dtype=np.int64)
    out.index = pd.Index(keys, name="key")
    return out


def match(opened: OpenCatalog, candidates: pd.DataFrame) -> Matched:
    """Match ``candidates`` (columns key: int, ra, dec: deg, jyear: the spectrum's epoch or NaN; no null ra/dec)
    against the catalog: every source within the radius at the spectrum's epoch, whatever the catalog's margin
    and however crowded the field. Runs on the current Dask scheduler."""
    with quiet_lsdb(), interpreted_pixel_trees():
        return _match(opened, candidates)


def _match(opened: OpenCatalog, candidates: pd.DataFrame) -> Matched:
    import lsdb

    from .beyond_margin import search_beyond_margin
    from .pm_crossmatch import YEARS_COLUMN, ProperMotionCrossmatch

    src = opened.source
    columns = list(src.catalog_columns)
    if candidates.empty:
        return Matched(pd.DataFrame(columns=[*columns, "sep_arcsec", "n_within"], index=pd.Index([], name="key")))
    moving = opened.epoch is not None and opened.has_pm
    jyear = candidates["jyear"].to_numpy(dtype=np.float64)
    years = np.where(np.isfinite(jyear), jyear - (opened.epoch or 0.0), 0.0) if moving else np.zeros(len(jyear))
    frame = pd.DataFrame({"key": candidates["key"].to_numpy(dtype=np.int64),
                          "ra": candidates["ra"].to_numpy(dtype=np.float64),
                          "dec": candidates["dec"].to_numpy(dtype=np.float64), YEARS_COLUMN: years})
    pm = PM_COLUMNS if opened.has_pm else None
    ra, dec = opened.ra_column, opened.dec_column

    left = lsdb.from_dataframe(frame, ra_column="ra", dec_column="dec", catalog_name="candidates",
                               margin_threshold=None, partition_rows=CANDIDATES_PER_PARTITION,
                               should_generate_moc=False)
    xmatch = left.crossmatch(opened.catalog, algorithm=ProperMotionCrossmatch(src.radius_arcsec, pm),
                             suffixes=("_c", "_x"), suffix_method="all_columns", log_changes=False)
    near = pd.DataFrame(xmatch.compute(progress_bar=False))
    pairs = pd.DataFrame({"key": near["key_c"].to_numpy(dtype=np.int64),
                          "_sep": near["_dist_arcsec"].to_numpy(dtype=np.float64),
                          "_sra": near[f"{ra}_x"].to_numpy(dtype=np.float64),
                          "_sdec": near[f"{dec}_x"].to_numpy(dtype=np.float64),
                          **{c: near[f"{c}_x"].to_numpy() for c in columns}})

    far = search_beyond_margin(opened.catalog, frame, ra_column=ra, dec_column=dec, pm_columns=pm,
                               radius_arcsec=src.radius_arcsec, max_pm_arcsec_yr=src.max_pm_mas_yr / 1000.0,
                               margin_arcsec=opened.margin_arcsec if opened.has_margin else None)
    if not far.pairs.empty:
        extra = pd.DataFrame({"key": far.pairs["key"].to_numpy(dtype=np.int64),
                              "_sep": far.pairs["_sep"].to_numpy(dtype=np.float64),
                              "_sra": far.pairs[ra].to_numpy(dtype=np.float64),
                              "_sdec": far.pairs[dec].to_numpy(dtype=np.float64),
                              **{c: far.pairs[c].to_numpy() for c in columns}})
        pairs = pd.concat([pairs, extra], ignore_index=True) if len(pairs) else extra
    unknown = frame["key"][~np.isfinite(jyear)].tolist() if opened.has_pm else []
    if opened.has_pm and opened.epoch is None:
        unknown = frame["key"].tolist()
    log.debug("evidence %s: %d pair(s) within %g arcsec, %d cone(s) searched beyond the margin", src.name,
              len(pairs), src.radius_arcsec, far.cones)
    return Matched(_nearest(pairs, columns), far.cones, [int(k) for k in unknown])


def _plain(v: Any) -> Any:
    """A cell as a plain Python value (numpy scalars unwrapped, NaN and NA as None)."""
    if v is None or v is pd.NA:
        return None
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def record(source: EvidenceSource, matched: dict[str, Any] | None, reason: str | None, *,
           searched: bool = False) -> dict[str, Any]:
    """A candidate's evidence values for ``source``: the output columns (``gaia_*``), the separation, how many
    sources were within the radius (0 when ``searched`` found none; null when no search was made), the reason
    when there is no match, and for gaia M_G with its error (null with the reason when the parallax does not
    support it)."""
    sep_key, n_key, reason_key = source.match_keys
    out: dict[str, Any] = {source.output_name(c): None for c in source.catalog_columns}
    out[sep_key], out[n_key] = None, (0 if searched else None)
    if matched is not None:
        for c in source.catalog_columns:
            out[source.output_name(c)] = _plain(matched.get(c))
        out[sep_key] = _plain(matched.get("sep_arcsec"))
        out[n_key] = _plain(matched.get("n_within"))
    out[reason_key] = reason
    if source.name == "gaia":
        out.update(gaia_derived(out))
    return out


def gaia_derived(values: dict[str, Any]) -> dict[str, Any]:
    """``gaia_abs_g``, ``gaia_abs_g_error`` and, when they are null, why (in ``gaia_reason``, unless the match
    itself already says why)."""
    if values.get(GAIA_SOURCE_ID) is None and values.get(GAIA_PARALLAX) is None:
        return {GAIA_ABS_G: None, GAIA_ABS_G_ERROR: None,
                GAIA_REASON: values.get(GAIA_REASON) or "no Gaia source"}
    mg, err, why = absolute_g(values.get(GAIA_G_MAG), values.get(GAIA_PARALLAX),
                              values.get(GAIA_PARALLAX_ERROR), values.get(GAIA_RUWE))
    reason = values.get(GAIA_REASON) or (f"no M_G: {why}" if why else None)
    return {GAIA_ABS_G: mg, GAIA_ABS_G_ERROR: err, GAIA_REASON: reason}
