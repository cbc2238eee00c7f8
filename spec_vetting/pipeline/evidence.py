"""The run's evidence step: every candidate of the pending shards cross-matched once with each evidence source,
before any shard is submitted, on the run's own Dask client; the values travel with the candidate.

Cache: ``ROOT/_evidence/<name>-<digest>/part-<run_id>.parquet`` holds one record per candidate matched (keyed by
candidate id, ra, dec and epoch), the digest covering the catalog (its path and properties) and the match
settings. A resumed run, and every later run under the same root (``--incremental`` nights), reuses what is there
and matches only the candidates it has not seen. The ``_`` folder is ignored by every Parquet reader of the
catalog.

Candidates that carry the source's columns already (a list with ``gaia_parallax`` ...) are used as given; those
without ra/dec get null evidence with the reason. A catalog that cannot be read mid-run (removed, unmounted) stops
the run with :class:`~spec_vetting.errors.RunFailedError` (exit 1); the same command resumes.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import RunFailedError
from ..evidence.crossmatch import OpenCatalog, match, open_catalog, record
from ..evidence.file_position import FROM_FILE, FROM_LIST, position_from_file
from ..evidence.gaia_columns import GAIA_SOURCE_ID
from ..evidence.lightcurve_match import light_curve_record, match_light_curves, open_light_curves
from ..evidence.motion import mjd_from_name, mjd_to_jyear
from ..evidence.sources import EvidenceSource
from .store import write_parquet_atomic

EVIDENCE_DIR = "_evidence"
NO_POSITION = "no ra/dec for the candidate (neither in the list nor in its spectrum file)"
#: evidence key saying whose position was matched: "list" or "file"
POSITION_SOURCE = "position_source"
#: candidates named in the run summary when their match could miss a moving source (the count is complete)
UNSURE_NAMED = 20


def open_sources(sources: list[EvidenceSource]) -> list[OpenCatalog]:
    """Every source opened and checked (ConfigError naming the bad one): before the run starts anything."""
    return [open_light_curves(s) if s.light_curve is not None else open_catalog(s) for s in sources]


def cache_folder(root: Path, opened: OpenCatalog) -> Path:
    """The cache of one source: keyed by its settings and the catalog's identity (its HATS properties and partition
    list, :mod:`spec_vetting.evidence.hats_catalog`), so a rewritten or republished catalog is matched again."""
    source = opened.source
    settings = source.model_dump(mode="json")
    digest = hashlib.sha256(json.dumps([settings, source.catalog, opened.identity], sort_keys=True).encode())
    return root / EVIDENCE_DIR / f"{source.name}-{digest.hexdigest()[:16]}"


def candidate_epoch_mjd(cand) -> float | None:
    """The spectrum's MJD: the list's mjd column, else the MJD in a LAMOST or SDSS file name."""
    mjd = getattr(cand, "mjd", None)
    if mjd is None:
        mjd = mjd_from_name(getattr(cand, "path", None))
    return None if mjd is None else float(mjd)


def _key(cand, where: Where) -> str:
    return json.dumps([str(cand.candidate_id), where.ra, where.dec, where.mjd])


@dataclass(frozen=True)
class Where:
    """Where and when a candidate's spectrum was taken, as matched, and where the position came from."""

    ra: float | None
    dec: float | None
    mjd: float | None
    source: str | None


def candidate_position(cand) -> Where:
    """The list's ra/dec and epoch (its mjd column, else the MJD in the file name); what the list lacks, from the
    spectrum file (:func:`~spec_vetting.evidence.file_position.position_from_file`)."""
    ra, dec, mjd = cand.ra, cand.dec, candidate_epoch_mjd(cand)
    source = FROM_LIST if ra is not None and dec is not None else None
    if source is None or mjd is None:
        found = position_from_file(cand)
        if source is None and found.ra is not None and found.dec is not None:
            ra, dec, source = found.ra, found.dec, FROM_FILE
        if mjd is None and found.mjd is not None:
            mjd = float(found.mjd)
    if source is None:
        return Where(None, None, mjd, None)
    return Where(float(ra), float(dec), mjd, source)


def _read_cache(folder: Path) -> dict[str, dict[str, Any]]:
    import pyarrow.parquet as pq

    out: dict[str, dict[str, Any]] = {}
    if not folder.is_dir():
        return out
    for part in sorted(folder.glob("part-*.parquet")):
        table = pq.read_table(part)
        for k, v in zip(table.column("key").to_pylist(), table.column("values").to_pylist(), strict=True):
            out[k] = json.loads(v)
    return out


def _write_cache(folder: Path, run_id: str, records: dict[str, dict[str, Any]]) -> None:
    import pyarrow as pa

    if not records:
        return
    folder.mkdir(parents=True, exist_ok=True)
    keys = sorted(records)
    table = pa.table({"key": pa.array(keys, pa.string()),
                      "values": pa.array([json.dumps(records[k], sort_keys=True) for k in keys], pa.string())})
    # a later attempt of the same run adds its own part next to the first's
    n = len(list(folder.glob(f"part-{run_id}-*.parquet")))
    write_parquet_atomic(folder / f"part-{run_id}-{n}.parquet", table)


def _given(source: EvidenceSource, cand) -> dict[str, Any] | None:
    """The source's values the candidate list carries already, or None when it carries none."""
    given = getattr(cand, "given_evidence", None) or {}
    prefix = f"{source.name}_"
    mine = {k: v for k, v in given.items() if k.startswith(prefix)}
    if not mine:
        return None
    out = record(source, None, None)
    out.update(mine)
    if source.name == "gaia":
        from ..evidence.crossmatch import gaia_derived

        out.update(gaia_derived(out))
    return out


#: the source that stands for Gaia columns a candidate list carries when the run names no gaia catalog
GIVEN_GAIA = EvidenceSource(name="gaia", catalog="(given in the candidate list)")


def attach_given(candidates: list) -> int:
    """Without ``--evidence gaia=``, the Gaia columns a candidate list carries still reach the rows (and the rules
    engine), M_G derived from them; returns how many candidates had some."""
    n = 0
    for cand in {id(c): c for c in candidates}.values():
        given = _given(GIVEN_GAIA, cand)
        if given is not None:
            cand.evidence = {**(getattr(cand, "evidence", None) or {}), **given}
            n += 1
    return n


def attach_evidence(root: Path, run_id: str, opened: list[OpenCatalog], candidates: list) -> dict[str, Any]:
    """Fill ``candidate.evidence`` of every candidate (each once) from the cache or a cross-match on the current
    Dask client; returns per-source counts for the manifest."""
    import numpy as np
    import pandas as pd

    unique = list({str(c.candidate_id): c for c in candidates}.values())
    where = {str(c.candidate_id): candidate_position(c) for c in unique
             if any(_given(oc.source, c) is None for oc in opened)}
    summary: dict[str, Any] = {}
    for oc in opened:
        src = oc.source
        t0 = time.perf_counter()
        folder = cache_folder(root, oc)
        cached = _read_cache(folder)
        values: dict[str, dict[str, Any]] = {}
        todo: list[tuple[str, Any, Where]] = []
        counts = {"given": 0, "cached": 0, "no_position": 0, "matched_now": 0}
        unsure: list[str] = []
        for cand in unique:
            cid = str(cand.candidate_id)
            # a list's NAME_* columns stand for a plain catalog's values, never for a light curve's summaries
            given = _given(src, cand) if src.light_curve is None else None
            if given is not None:
                values[cid] = given
                counts["given"] += 1
                continue
            at = where[cid]
            if at.source is None:
                values[cid] = record(src, None, NO_POSITION)
                counts["no_position"] += 1
                continue
            if at.mjd is None and oc.has_pm:
                unsure.append(cid)
            key = _key(cand, at)
            if key in cached:
                values[cid] = {**cached[key], POSITION_SOURCE: at.source}
                counts["cached"] += 1
            else:
                todo.append((key, cand, at))
        new: dict[str, dict[str, Any]] = {}
        if todo:
            frame = pd.DataFrame({
                "key": np.arange(len(todo), dtype=np.int64),
                "ra": [at.ra for _, _, at in todo], "dec": [at.dec for _, _, at in todo],
                "jyear": [float(mjd_to_jyear(at.mjd)) if at.mjd is not None else math.nan for _, _, at in todo]})
            if src.light_curve is not None:  # light curves (issue 38): summaries in the record, points aside
                _light_curves(folder, run_id, oc, frame, todo, new, values)
                counts["matched_now"] = len(todo)
                todo = []
        if todo:
            try:
                found = match(oc, frame)
            except Exception as exc:  # the catalog vanished or broke mid-run: stop, the same command resumes
                raise RunFailedError(
                    f"evidence {src.name}: the cross-match with {src.catalog} failed ({type(exc).__name__}: {exc}); "
                    "check the catalog is reachable and rerun the same command to resume") from exc
            rows = found.frame.to_dict("index")
            counts["beyond_margin"] = found.beyond_margin
            none_within = f"no {src.name} source within {src.radius_arcsec:g} arcsec at the spectrum's epoch"
            for i, (key, cand, at) in enumerate(todo):
                hit = rows.get(i)
                new[key] = record(src, hit, None if hit is not None else none_within, searched=True)
                values[str(cand.candidate_id)] = {**new[key], POSITION_SOURCE: at.source}
            counts["matched_now"] = len(todo)
            _write_cache(folder, run_id, new)
        for cand in candidates:
            cand.evidence = {**(getattr(cand, "evidence", None) or {}), **values[str(cand.candidate_id)]}
        sep_key = src.match_keys[0]
        counts["with_source"] = sum(1 for v in values.values() if v.get(sep_key) is not None
                                    or (src.name == "gaia" and v.get(GAIA_SOURCE_ID) is not None))
        summary[src.name] = {"catalog": src.catalog, "radius_arcsec": src.radius_arcsec, "epoch": oc.epoch,
                             "margin": oc.has_margin, "proper_motions": oc.has_pm, "cache": str(folder),
                             **counts, "wall_s": round(time.perf_counter() - t0, 3)}
        if unsure:
            # matched at the catalog's epoch: a source that moved out of the radius since is not found
            summary[src.name]["epoch_unknown"] = {"count": len(unsure), "candidates": unsure[:UNSURE_NAMED]}
    return summary


def _light_curves(folder: Path, run_id: str, oc, frame, todo: list, new: dict, values: dict) -> None:
    """The light-curve branch of :func:`attach_evidence`: summaries into the cache records, the good epochs into
    the points file beside them (for the review page)."""
    src = oc.source
    frame = frame.assign(cid=[str(cand.candidate_id) for _, cand, _ in todo])
    try:
        # the workers write the good epochs beside the cache (points files); the client gets the summaries
        found = match_light_curves(oc, frame, points_dir=folder, run_id=run_id)
    except Exception as exc:  # the catalog vanished or broke mid-run: stop, the same command resumes
        raise RunFailedError(
            f"evidence {src.name}: the light-curve match with {src.catalog} failed ({type(exc).__name__}: {exc}); "
            "check the catalog is reachable and rerun the same command to resume") from exc
    none_within = f"no {src.name} light curve within {src.radius_arcsec:g} arcsec"
    for i, (key, cand, _) in enumerate(todo):
        hit = found.get(i)
        new[key] = light_curve_record(src, hit, None if hit is not None else none_within, searched=True)
        values[str(cand.candidate_id)] = new[key]
    _write_cache(folder, run_id, new)
