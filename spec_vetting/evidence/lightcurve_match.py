"""Light curves as evidence: each candidate matched once with a light-curve HATS catalog (an object table whose
rows carry a nested time series, read by lsdb/nested-pandas) and its epochs summarised per band
(:mod:`.lightcurves`).

Matching is epoch-free (light-curve catalogs carry no proper motions): every catalog row within
``radius_arcsec`` of the candidate counts (``NAME_n_within``; ZTF DR has one row per field and filter, so a star
seen in g and r is two rows). For each band the epochs of the *nearest* row that has epochs in that band are
summarised: rows are never merged, so a neighbour within the radius, or a second field's calibration, cannot mix
into a light curve. The reduction runs per partition of lsdb's cross-match (memory follows partitions).

What a candidate gets (``NAME`` is the evidence name, ``B`` each band of the settings): ``NAME_kind`` =
``light_curve``, ``NAME_sep_arcsec``, ``NAME_n_within``, ``NAME_reason`` (no row within the radius), and per band
``NAME_B_<field>`` for every field of :data:`.lightcurves.FIELDS` with ``NAME_B_reason`` when the band has no
summary. The good epochs themselves (thinned to ``max_points`` per band) go to the review page through
:mod:`.lightcurve_points`, not into the verdict rows.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ConfigError
from .crossmatch import _plain, quiet_lsdb
from .hats_catalog import describe
from .lightcurve_points import write_points
from .lightcurve_settings import LightCurveSettings
from .lightcurves import FIELDS, SummaryRules, good_epochs, summarise_band
from .sources import EvidenceSource

#: the value of ``NAME_kind`` that marks a light-curve source's values in a candidate's evidence
KIND = "light_curve"
CANDIDATES_PER_PARTITION = 50_000

#: catalog rows kept per candidate within the radius (one per object and band): a few arcseconds hold a handful of
#: objects, so this only bounds a pathological catalog; the Gaia match's max_neighbours no longer applies here
ROWS_WITHIN = 64


@dataclass
class OpenLightCurves:
    """A checked light-curve catalog: the lsdb object (only the columns used), where the band is, the margin."""

    source: EvidenceSource
    catalog: Any  # lsdb.Catalog
    ra_column: str
    dec_column: str
    band_nested: bool
    has_margin: bool
    margin_arcsec: float | None = None
    epoch: float | None = None  # epoch-free: the run's manifest says so
    has_pm: bool = False
    #: the catalog's identity from its HATS metadata (the evidence cache is keyed by it)
    identity: str = ""

    @property
    def settings(self) -> LightCurveSettings:
        return self.source.light_curve

    @property
    def note(self) -> str | None:
        if self.has_margin:
            return None
        return (f"evidence {self.source.name}: {self.source.catalog} has no margin cache; a light curve just across "
                "a partition border from its candidate may be missed")


def _nested_fields(dtype) -> list[str] | None:
    """The field names of a nested column's dtype (None when the column is not nested)."""
    names = getattr(dtype, "column_dtypes", None)
    return list(names) if isinstance(names, dict) else None


def open_light_curves(source: EvidenceSource) -> OpenLightCurves:
    """Open and check a light-curve catalog: a HATS catalog with the settings' nested column, its time,
    magnitude, error and flag fields and the band column. :class:`ConfigError` naming what is missing and what
    is there, before anything runs (a path that does not exist or does not answer is named as such first)."""
    identity = describe(source.name, source.catalog).identity
    with quiet_lsdb():
        return replace(_open(source), identity=identity)


def _open(source: EvidenceSource) -> OpenLightCurves:
    import lsdb

    s = source.light_curve
    where = f"evidence {source.name}={source.catalog}"
    try:
        probe = lsdb.open_catalog(source.catalog)
    except Exception as exc:
        raise ConfigError(
            f"{where}: not a HATS catalog lsdb can open ({type(exc).__name__}: {exc}); give the folder of a HATS "
            "light-curve catalog (e.g. ZTF DR's from IRSA, or one written with lsdb's to_hats)") from exc
    info = probe.hc_structure.catalog_info
    ra, dec = info.ra_column, info.dec_column
    if not ra or not dec:
        raise ConfigError(f"{where}: the catalog names no ra/dec columns (catalog type {info.catalog_type})")
    if s.detections:
        return _open_joined(source, probe, ra, dec, where)
    dtypes = probe.dtypes
    nested_cols = [c for c in probe.columns if _nested_fields(dtypes[c]) is not None]
    if s.nested not in probe.columns or s.nested not in nested_cols:
        raise ConfigError(
            f"{where}: no nested light-curve column {s.nested!r}; nested columns: "
            f"{', '.join(nested_cols) or 'none'}; set light_curve: {{nested: ...}} in the job file, or list plain "
            f"columns (columns: [...]) for a catalog without light curves")
    fields = _nested_fields(dtypes[s.nested])
    wanted = [s.time, s.mag, s.error, *([s.flags] if s.flags else [])]
    band_nested = s.band in fields
    if not band_nested and s.band not in probe.columns:
        raise ConfigError(f"{where}: band column {s.band!r} is neither a column of the catalog nor of "
                          f"{s.nested!r} ({', '.join(fields)}); set light_curve: {{band: ...}}")
    if band_nested:
        wanted.append(s.band)
    missing = [c for c in wanted if c not in fields]
    if missing:
        raise ConfigError(f"{where}: {s.nested!r} has no field(s) {', '.join(missing)}; its fields are "
                          f"{', '.join(fields)}; name the right ones under light_curve: (time, mag, error, flags)")
    _check_bands(s, where)
    read = list(dict.fromkeys([ra, dec, *([] if band_nested else [s.band]),
                               *(f"{s.nested}.{f}" for f in dict.fromkeys(wanted))]))
    try:
        cat = lsdb.open_catalog(source.catalog, columns=read)
    except Exception as exc:
        raise ConfigError(f"{where}: could not read columns {read} ({type(exc).__name__}: {exc})") from exc
    margin = _margin(cat)
    _check_radius(source, margin, where)
    return OpenLightCurves(source, cat, ra, dec, band_nested, cat.margin is not None, margin)


def _open_joined(source: EvidenceSource, probe, ra: str, dec: str, where: str) -> OpenLightCurves:
    """An object catalog and a detection catalog, nested into one by lsdb's ``join_nested`` (lazily)."""
    import lsdb

    s = source.light_curve
    try:
        dprobe = lsdb.open_catalog(s.detections)
    except Exception as exc:
        raise ConfigError(f"{where}: detections {s.detections}: not a HATS catalog lsdb can open "
                          f"({type(exc).__name__}: {exc})") from exc
    dkey = s.detection_key or s.object_key
    fields = list(dprobe.columns)
    if s.object_key not in probe.columns:
        raise ConfigError(f"{where}: no object id column {s.object_key!r} to join the detections on; set "
                          "light_curve: {object_key: ...}")
    band_nested = s.band in fields and s.band not in probe.columns
    wanted = [s.time, s.mag, s.error, *([s.flags] if s.flags else []), *([s.band] if band_nested else [])]
    missing = [c for c in [dkey, *wanted] if c not in fields]
    if missing:
        raise ConfigError(f"{where}: the detections {s.detections} have no column(s) {', '.join(missing)}; their "
                          f"columns are {', '.join(fields[:40])}")
    if not band_nested and s.band not in probe.columns:
        raise ConfigError(f"{where}: band column {s.band!r} is in neither the objects nor the detections")
    _check_bands(s, where)
    try:
        objects = lsdb.open_catalog(source.catalog, columns=list(dict.fromkeys(
            [ra, dec, s.object_key, *([] if band_nested else [s.band])])))
        dets = lsdb.open_catalog(s.detections, columns=list(dict.fromkeys([dkey, *wanted])))
        cat = objects.join_nested(dets, left_on=s.object_key, right_on=dkey, nested_column_name=s.nested,
                                  how="left")
    except Exception as exc:
        raise ConfigError(f"{where}: could not join the detections {s.detections} on {s.object_key} = {dkey} "
                          f"({type(exc).__name__}: {exc})") from exc
    margin = _margin(objects)
    _check_radius(source, margin, where)
    return OpenLightCurves(source, cat, ra, dec, band_nested, objects.margin is not None, margin)


def _margin(cat) -> float | None:
    return getattr(getattr(getattr(cat.margin, "hc_structure", None), "catalog_info", None), "margin_threshold",
                   None)


def _check_bands(s: LightCurveSettings, where: str) -> None:
    if s.band_names:
        unknown = [b for b in s.bands if b not in s.band_names.values()]
        if unknown:
            raise ConfigError(f"{where}: band(s) {', '.join(unknown)} are not among the band names "
                              f"{sorted(set(s.band_names.values()))} of light_curve.band_names")


def _check_radius(source: EvidenceSource, margin: float | None, where: str) -> None:
    if margin is not None and source.radius_arcsec > margin:
        raise ConfigError(f"{where}: radius_arcsec {source.radius_arcsec:g} is wider than the catalog's margin "
                          f"({margin:g}\"), so matches across partition borders would be lost; use at most {margin:g}")


def _thin(n: int, keep: int, must: int) -> np.ndarray:
    """Indices of ``keep`` of ``n`` evenly spread epochs, ``must`` (the brightest) always among them."""
    if n <= keep:
        return np.arange(n)
    idx = np.unique(np.round(np.linspace(0, n - 1, keep - 1)).astype(np.int64))
    return np.union1d(idx, [must])


def band_values(settings: LightCurveSettings, t, mag, err, flags) -> tuple[dict, list | None]:
    """One band's summary and its good epochs for the page (``[times, mags, errors]``, time order, thinned)."""
    rules = SummaryRules(settings.bad_flags, settings.min_epochs, settings.outburst_mag)
    summary = summarise_band(t, mag, err, flags, rules)
    good = good_epochs(t, mag, err, flags, settings.bad_flags)
    if not good.any():
        return summary, None
    order = np.argsort(np.asarray(t, dtype=np.float64)[good], kind="stable")
    tg, mg, eg = (np.asarray(a, dtype=np.float64)[good][order] for a in (t, mag, err))
    idx = _thin(tg.size, settings.max_points, int(np.argmin(mg)))
    return summary, [np.round(tg[idx], 5).tolist(), np.round(mg[idx], 4).tolist(), np.round(eg[idx], 4).tolist()]


def _reduce_partition(pairs: pd.DataFrame, *, settings: LightCurveSettings, name: str, nested: str, band: str,
                      band_nested: bool, points_dir: str | None = None, run_id: str = "run") -> pd.DataFrame:
    """One partition's candidate-row pairs -> one row per candidate: key, the record and the points (JSON). With
    ``points_dir`` (and a ``cid_c`` column: the candidates' ids) the points are written there by the worker, one
    file per partition, and left out of the result: the client then holds the summaries only, whatever the
    curves' length."""
    cols = {"key_c": pd.Series([], dtype="int64"), "record": pd.Series([], dtype="object"),
            "points": pd.Series([], dtype="object")}
    if len(pairs) == 0:
        return pd.DataFrame(cols)
    pairs = pairs.reset_index(drop=True)
    keys = pairs["key_c"].to_numpy(dtype=np.int64)
    sep = pairs["_dist_arcsec"].to_numpy(dtype=np.float64, na_value=np.nan)
    flat = pairs[nested].nest.to_flat()
    row = np.asarray(flat.index, dtype=np.int64)

    def field(f, dtype=np.float64):
        return flat[f].to_numpy(dtype=dtype, na_value=np.nan)

    t, mag, err = field(settings.time), field(settings.mag), field(settings.error)
    flags = field(settings.flags) if settings.flags else None
    raw_band = flat[band].to_numpy(dtype=object) if band_nested else pairs[band].to_numpy(dtype=object)[row]
    names = {v: settings.band_name(v) for v in pd.unique(raw_band)}
    band_of = np.array([names[v] for v in raw_band], dtype=object)
    cids = pairs["cid_c"].to_numpy(dtype=object) if points_dir is not None and "cid_c" in pairs.columns else None
    out_keys, records, points = [], [], []
    aside: dict[str, tuple[str, dict]] = {}
    by_key: dict[int, list[int]] = {}
    for i, k in enumerate(keys):
        by_key.setdefault(int(k), []).append(i)
    epochs_of_row = pd.Series(np.arange(row.size)).groupby(row).indices
    for k, rows in by_key.items():
        rows.sort(key=lambda i: sep[i])
        rec: dict[str, Any] = {f"{name}_kind": KIND, f"{name}_sep_arcsec": float(sep[rows[0]]),
                               f"{name}_n_within": len(rows), f"{name}_reason": None}
        pts: dict[str, list] = {}
        for b in settings.bands:
            chosen = None
            for i in rows:  # the nearest row with epochs in this band
                ep = epochs_of_row.get(i)
                if ep is not None:
                    sel = ep[band_of[ep] == b]
                    if sel.size:
                        chosen = sel
                        break
            if chosen is None:
                summary = dict.fromkeys(FIELDS)
                summary.update(n_epochs=0, n_good=0, reason="no epochs in this band")
            else:
                summary, p = band_values(settings, t[chosen], mag[chosen], err[chosen],
                                         None if flags is None else flags[chosen])
                if p is not None:
                    pts[b] = p
            for f in (*FIELDS, "reason"):
                rec[f"{name}_{b}_{f}"] = _plain(summary.get(f))
        out_keys.append(k)
        records.append(json.dumps(rec))
        if cids is not None:
            if pts:
                aside[str(cids[rows[0]])] = (name, pts)
            pts = {}
        points.append(json.dumps(pts))
    if aside:
        write_points(Path(points_dir), f"{run_id}-{uuid.uuid4().hex[:12]}", aside)
    return pd.DataFrame({"key_c": np.asarray(out_keys, dtype=np.int64), "record": pd.Series(records, dtype=object),
                         "points": pd.Series(points, dtype=object)})


def match_light_curves(opened: OpenLightCurves, candidates: pd.DataFrame, *, points_dir: Path | None = None,
                       run_id: str = "run") -> dict[int, dict]:
    """Match ``candidates`` (columns key: int, ra, dec: deg; cid: the candidate id, with ``points_dir``) against
    the light-curve catalog on the current Dask scheduler: ``{key: {"record": {...}, "points": {band: [t, m,
    e]}}}`` for every candidate with a row within the radius. With ``points_dir`` the workers write the points
    there (:mod:`.lightcurve_points`) and ``points`` is empty."""
    with quiet_lsdb():
        return _match(opened, candidates, points_dir, run_id)


def _match(opened: OpenLightCurves, candidates: pd.DataFrame, points_dir: Path | None, run_id: str
           ) -> dict[int, dict]:
    import lsdb

    if candidates.empty:
        return {}
    src, s = opened.source, opened.settings
    keep = ["key", "ra", "dec", *(["cid"] if points_dir is not None else [])]
    left = lsdb.from_dataframe(
        candidates[keep], ra_column="ra", dec_column="dec", catalog_name="candidates",
        margin_threshold=None, partition_rows=CANDIDATES_PER_PARTITION, should_generate_moc=False)
    pairs = left.crossmatch(opened.catalog, n_neighbors=ROWS_WITHIN, radius_arcsec=src.radius_arcsec,
                            suffixes=("_c", "_x"), suffix_method="all_columns", log_changes=False)
    kwargs = dict(settings=s, name=src.name, nested=f"{s.nested}_x", band=s.band if opened.band_nested
                  else f"{s.band}_x", band_nested=opened.band_nested,
                  points_dir=None if points_dir is None else str(points_dir), run_id=run_id)
    meta = _reduce_partition(pairs.to_dask_dataframe()._meta, **kwargs)
    reduced = pairs.map_partitions(_reduce_partition, meta=meta, **kwargs).compute(progress_bar=False)
    return {int(k): {"record": json.loads(r), "points": json.loads(p)}
            for k, r, p in zip(reduced["key_c"].to_numpy(), reduced["record"], reduced["points"], strict=True)}


def light_curve_record(source: EvidenceSource, hit: dict | None, reason: str | None, *,
                       searched: bool = False) -> dict[str, Any]:
    """A candidate's light-curve values: the matched record, or every column null with ``reason`` (a band's
    reason says no match too, so a row read alone explains itself)."""
    if hit is not None:
        return dict(hit["record"])
    name, s = source.name, source.light_curve
    rec: dict[str, Any] = {f"{name}_kind": KIND, f"{name}_sep_arcsec": None,
                           f"{name}_n_within": 0 if searched else None, f"{name}_reason": reason}
    for b in s.bands:
        for f in FIELDS:
            rec[f"{name}_{b}_{f}"] = None
        rec[f"{name}_{b}_reason"] = reason
    return rec
