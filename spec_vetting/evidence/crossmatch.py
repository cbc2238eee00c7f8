"""Cross-matching candidates with a HATS catalog through lsdb, on whatever Dask cluster is current.

Proper motion: a catalog's positions are at its epoch, a spectrum was taken at its own. lsdb's k-d tree
cross-match finds the ``max_neighbours`` nearest catalog sources within a *search* radius widened by the largest
proper motion looked for times the largest epoch difference; then, per partition (so memory follows partitions,
not the catalog), each source is moved to its candidate's epoch (:mod:`.motion`) and only those within the
*match* radius count: ``n_within`` of them, the nearest wins. Candidates whose epoch is unknown are compared at the
catalog's epoch.

The catalog must carry a margin cache (lsdb's ``to_hats`` of a catalog made with a margin, or hats-import's
margin pipeline) for matches across partition borders; without one, a note says that sources just across a
border may be missed.
"""

from __future__ import annotations

import logging
import math
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ConfigError
from .motion import propagate, separation_arcsec
from .photometry import absolute_g
from .sources import GAIA_DR3_EPOCH, PM_COLUMNS, EvidenceSource

log = logging.getLogger(__name__)

#: catalog properties key that may carry the positions' epoch (Julian year, "2016.0" or "J2016.0")
EPOCH_PROPERTY = "hats_coordinate_epoch"
#: candidates per partition of the left catalog (lsdb builds it from the candidates in memory)
CANDIDATES_PER_PARTITION = 50_000


@dataclass
class OpenCatalog:
    """A checked HATS catalog: the lsdb object, its coordinate columns, epoch and whether it has a margin."""

    source: EvidenceSource
    catalog: Any  # lsdb.Catalog
    ra_column: str
    dec_column: str
    epoch: float | None
    has_margin: bool
    has_pm: bool
    margin_arcsec: float | None = None

    @property
    def note(self) -> str | None:
        if self.has_margin:
            return None
        return (f"evidence {self.source.name}: {self.source.catalog} has no margin cache; a source just across a "
                "partition border from its candidate may be missed")


@contextmanager
def quiet_lsdb():
    """lsdb and nested-pandas warn about pandas deprecations and their own future defaults on every call: not the
    user's business (and an error under pytest's settings)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        # said once by the run, in our words (OpenCatalog.note), not on every partition
        warnings.filterwarnings("ignore", message="Right catalog does not have a margin cache")
        try:
            from pandas.errors import Pandas4Warning

            warnings.simplefilter("ignore", Pandas4Warning)
        except ImportError:  # pandas < 3.1
            pass
        yield


def _epoch_from_properties(info) -> float | None:
    extra = getattr(info, "__pydantic_extra__", None) or {}
    raw = extra.get(EPOCH_PROPERTY)
    if raw is None:
        return None
    try:
        return float(str(raw).strip().lstrip("Jj"))
    except ValueError:
        return None


def open_catalog(source: EvidenceSource) -> OpenCatalog:
    """Open and check ``source.catalog``: a HATS catalog with the source's columns. :class:`ConfigError` naming
    the catalog and what is wrong, before anything runs."""
    with quiet_lsdb():
        return _open_catalog(source)


def _open_catalog(source: EvidenceSource) -> OpenCatalog:
    import lsdb

    where = f"evidence {source.name}={source.catalog}"
    try:
        probe = lsdb.open_catalog(source.catalog)
    except Exception as exc:  # lsdb raises FileNotFoundError, ValueError, ... for what is not a HATS catalog
        raise ConfigError(
            f"{where}: not a HATS catalog lsdb can open ({type(exc).__name__}: {exc}); give the folder of a HATS "
            "catalog or collection (e.g. made by hats-import or lsdb's to_hats)") from exc
    info = probe.hc_structure.catalog_info
    ra, dec = info.ra_column, info.dec_column
    if not ra or not dec:
        raise ConfigError(f"{where}: the catalog names no ra/dec columns (catalog type {info.catalog_type})")
    present = set(probe.all_columns)
    missing = [c for c in source.catalog_columns if c not in present]
    if missing:
        raise ConfigError(f"{where}: column(s) {', '.join(missing)} missing; the catalog has "
                          f"{', '.join(sorted(present)[:40])}")
    has_pm = all(c in present for c in PM_COLUMNS)
    read = list(dict.fromkeys([ra, dec, *source.catalog_columns, *(PM_COLUMNS if has_pm else ())]))
    try:
        cat = lsdb.open_catalog(source.catalog, columns=read)
    except Exception as exc:
        raise ConfigError(f"{where}: could not read columns {read} ({type(exc).__name__}: {exc})") from exc
    epoch = source.epoch if source.epoch is not None else _epoch_from_properties(info)
    if epoch is None and source.name == "gaia":
        epoch = GAIA_DR3_EPOCH
    margin = getattr(getattr(getattr(cat.margin, "hc_structure", None), "catalog_info", None), "margin_threshold",
                     None)
    return OpenCatalog(source, cat, ra, dec, epoch, cat.margin is not None, has_pm, margin)


def _reduce_partition(pairs: pd.DataFrame, *, ra_c: str, dec_c: str, ra_x: str, dec_x: str, pm: tuple | None,
                      epoch: float | None, radius: float, keep: list[str]) -> pd.DataFrame:
    """One partition's candidate-source pairs -> one row per candidate with a source within ``radius`` at the
    candidate's epoch: the nearest source's columns, its separation and how many were within."""
    out_cols = ["key_c", ra_c, dec_c, "_sep", "_n", *keep]
    if len(pairs) == 0:
        return pd.DataFrame({c: pd.Series([], dtype="float64") for c in out_cols}).astype({"key_c": "int64",
                                                                                           "_n": "int64"})
    t = pairs["jyear_c"].to_numpy(dtype=np.float64, na_value=np.nan)
    years = np.where(np.isfinite(t), t - (epoch if epoch is not None else 0.0), 0.0) if epoch is not None \
        else np.zeros(len(pairs))
    ra_s = pairs[ra_x].to_numpy(dtype=np.float64, na_value=np.nan)
    dec_s = pairs[dec_x].to_numpy(dtype=np.float64, na_value=np.nan)
    if pm is not None:
        pmra = pairs[pm[0]].to_numpy(dtype=np.float64, na_value=np.nan)
        pmdec = pairs[pm[1]].to_numpy(dtype=np.float64, na_value=np.nan)
        ra_s, dec_s = propagate(ra_s, dec_s, pmra, pmdec, years)
    sep = separation_arcsec(pairs[ra_c].to_numpy(dtype=np.float64), pairs[dec_c].to_numpy(dtype=np.float64),
                            ra_s, dec_s)
    frame = pd.DataFrame({"key_c": pairs["key_c"].to_numpy(dtype=np.int64), ra_c: pairs[ra_c].to_numpy(),
                          dec_c: pairs[dec_c].to_numpy(), "_sep": sep})
    for c in keep:
        frame[c] = pairs[c].to_numpy()
    frame = frame[frame["_sep"] <= radius]
    if frame.empty:
        return _reduce_partition(pairs.iloc[:0], ra_c=ra_c, dec_c=dec_c, ra_x=ra_x, dec_x=dec_x, pm=pm, epoch=epoch,
                                 radius=radius, keep=keep)
    counts = frame.groupby("key_c")["_sep"].transform("size")
    frame = frame.assign(_n=counts.to_numpy(dtype=np.int64))
    nearest = frame.sort_values(["key_c", "_sep"], kind="stable").drop_duplicates("key_c", keep="first")
    return nearest[out_cols]


def match(opened: OpenCatalog, candidates: pd.DataFrame) -> pd.DataFrame:
    """Match ``candidates`` (columns key: int, ra, dec: deg, jyear: the spectrum's epoch or NaN; no null ra/dec)
    against the catalog. One row per candidate with a source within the radius, indexed by key: the source's
    columns (catalog names), ``sep_arcsec`` and ``n_within``. Runs on the current Dask scheduler."""
    with quiet_lsdb():
        return _match(opened, candidates)


def _match(opened: OpenCatalog, candidates: pd.DataFrame) -> pd.DataFrame:
    import lsdb

    src = opened.source
    empty = pd.DataFrame(columns=[*src.catalog_columns, "sep_arcsec", "n_within"], index=pd.Index([], name="key"))
    if candidates.empty:
        return empty
    epoch = opened.epoch
    span = 0.0
    if epoch is not None and opened.has_pm:
        dts = np.abs(candidates["jyear"].to_numpy(dtype=np.float64) - epoch)
        span = float(np.nanmax(dts)) if np.isfinite(dts).any() else 0.0
    search = src.radius_arcsec + src.max_pm_mas_yr / 1000.0 * span
    if opened.margin_arcsec is not None and search > opened.margin_arcsec:
        log.warning("evidence %s: the search radius %.1f\" (widened for proper motion over %.1f yr) is wider than "
                    "the catalog's margin %.1f\": a fast-moving source just across a partition border may be missed; "
                    "lower max_pm_mas_yr or use a catalog with a wider margin", src.name, search, span,
                    opened.margin_arcsec)
    left = lsdb.from_dataframe(
        candidates[["key", "ra", "dec", "jyear"]], ra_column="ra", dec_column="dec", catalog_name="candidates",
        margin_threshold=None, partition_rows=CANDIDATES_PER_PARTITION, should_generate_moc=False)
    pairs = left.crossmatch(opened.catalog, n_neighbors=src.max_neighbours, radius_arcsec=search,
                            suffixes=("_c", "_x"), suffix_method="all_columns", log_changes=False)
    x = {c: f"{c}_x" for c in [opened.ra_column, opened.dec_column, *src.catalog_columns, *PM_COLUMNS]}
    keep = [x[c] for c in src.catalog_columns]
    pm = (x["pmra"], x["pmdec"]) if opened.has_pm else None
    kwargs = dict(ra_c="ra_c", dec_c="dec_c", ra_x=x[opened.ra_column], dec_x=x[opened.dec_column], pm=pm,
                  epoch=epoch, radius=src.radius_arcsec, keep=keep)
    meta = _reduce_partition(pairs.to_dask_dataframe()._meta, **kwargs)
    reduced = pairs.map_partitions(_reduce_partition, meta=meta, **kwargs).compute(progress_bar=False)
    result = pd.DataFrame({c: reduced[x[c]].to_numpy() for c in src.catalog_columns})
    result["sep_arcsec"] = reduced["_sep"].to_numpy(dtype=np.float64)
    result["n_within"] = reduced["_n"].to_numpy(dtype=np.int64)
    result.index = pd.Index(reduced["key_c"].to_numpy(dtype=np.int64), name="key")
    return result


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
    if values.get("gaia_source_id") is None and values.get("gaia_parallax") is None:
        return {"gaia_abs_g": None, "gaia_abs_g_error": None,
                "gaia_reason": values.get("gaia_reason") or "no Gaia source"}
    mg, err, why = absolute_g(values.get("gaia_phot_g_mean_mag"), values.get("gaia_parallax"),
                              values.get("gaia_parallax_error"))
    reason = values.get("gaia_reason") or (f"no M_G: {why}" if why else None)
    return {"gaia_abs_g": mg, "gaia_abs_g_error": err, "gaia_reason": reason}
