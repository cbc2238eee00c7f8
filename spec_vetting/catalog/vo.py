"""What VO readers (TOPCAT, astropy, fitsio, CFITSIO) need in the FITS, VOTable and ECSV exports beyond a column's
unit and description.

- UCDs (IVOA UCD1+ words) on positions, times, ids, probabilities and counts: VOTable ``ucd`` attributes, and in
  the column metadata of ECSV and of FITS's astropy block;
- integer nulls outside every column's domain: the type's minimum (-9223372036854775808 for int64,
  -2147483648 for int32), which no id, count or turn number takes; FITS ``TNULLn``, VOTable ``<VALUES null>``;
- ``started_at`` as a time: an astropy ``Time`` (UTC, ISO, milliseconds) in ECSV, a DALI ``timestamp`` in
  VOTable, and in FITS ISO 8601 text with ``TCTYPn = 'UTC'`` and ``TIMESYS = 'UTC'`` (FITS time standard);
- FITS column descriptions as ``TCOMMn`` (HEASARC convention; long ones as OGIP long strings) and as the
  ``TTYPEn`` comment (cut to fit the card);
- units spelled as VOUnit in VOTable (``0.1nm`` for the deprecated ``Angstrom``), so readers warn of nothing.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..evidence import gaia_columns as gaia

#: UCD1+ of the exported columns that have one (the others are free text or bookkeeping)
UCDS = {
    "run_id": "meta.id;meta.dataset",
    "candidate_id": "meta.id;meta.main",
    "verdict": "meta.code.class",
    "status": "meta.code.status",
    "p_yes": "stat.probability",
    "justification": "meta.note",
    "reason": "meta.note",
    "error_kind": "meta.code.error",
    "error_message": "meta.note",
    "survey": "meta.dataset",
    "path": "meta.ref;meta.file",
    "target": "meta.id",
    "obsid": "meta.id",
    "designation": "meta.id",
    "plate": "meta.id.part",
    "mjd": "time.epoch",
    "fiberid": "meta.id.part",
    "specobjid": "meta.id",
    "targetid": "meta.id",
    "ra": "pos.eq.ra;meta.main",
    "dec": "pos.eq.dec;meta.main",
    "healpix": "pos.healpix",
    "_healpix_29": "pos.healpix",
    "redshift": "src.redshift",
    "pipeline_class": "src.class",
    "label": "meta.code.class",
    "n_turns": "meta.number",
    "n_tool_calls": "meta.number",
    "prompt_tokens": "meta.number",
    "completion_tokens": "meta.number",
    "cached_tokens": "meta.number",
    "attempts": "meta.number",
    "started_at": "time.start",
    "elapsed_s": "time.duration",
    "run_date": "time.epoch;meta.dataset",
    # Gaia evidence (spec-vet run --evidence gaia=...): the words the Gaia archive gives its own columns where
    # UCD1+ has them (G has no em.opt.G word: em.opt, as the archive writes it)
    gaia.GAIA_SOURCE_ID: "meta.id.cross",
    gaia.GAIA_PARALLAX: "pos.parallax",
    gaia.GAIA_PARALLAX_ERROR: "stat.error;pos.parallax",
    gaia.GAIA_PMRA: "pos.pm;pos.eq.ra",
    gaia.GAIA_PMDEC: "pos.pm;pos.eq.dec",
    gaia.GAIA_G_MAG: "phot.mag;em.opt",
    gaia.GAIA_BP_RP: "phot.color;em.opt.B;em.opt.R",
    gaia.GAIA_RUWE: "stat.fit.goodness",
    gaia.GAIA_SEP_ARCSEC: "pos.angDistance",
    gaia.GAIA_N_WITHIN: "meta.number",
    gaia.GAIA_ABS_G: "phys.magAbs;em.opt",
    gaia.GAIA_ABS_G_ERROR: "stat.error;phys.magAbs;em.opt",
    gaia.GAIA_REASON: "meta.note",
}

#: VOUnit spellings of the schema's units that VOUnit deprecates
VOUNITS = {"Angstrom": "0.1nm"}
#: the time scale of the catalog's timestamps
TIMESYS = "UTC"


def int_null(t: pa.DataType) -> int:
    """The null value of an integer column of Arrow type ``t``: the type's minimum."""
    return int(np.iinfo(t.to_pandas_dtype()).min)


def vo_unit(unit: str | None) -> str | None:
    """``unit`` as VOUnit spells it."""
    return VOUNITS.get(unit, unit) if unit else unit


def is_time(t: pa.DataType) -> bool:
    return pa.types.is_timestamp(t)


def _ascii(text: str) -> str:
    return text.encode("ascii", "backslashreplace").decode("ascii")


def describe_fits_columns(header, schema: pa.Schema) -> None:
    """Add to a BINTABLE ``header`` (of the columns of ``schema``, in order) each description as ``TCOMMn`` after
    ``TTYPEn`` and as the ``TTYPEn`` comment, ``TCTYPn`` and ``TIMESYS`` for the time columns, and ``LONGSTRN``
    when a description needs the long-string convention."""
    from astropy.io import fits

    long = False
    for i, f in enumerate(schema, start=1):
        desc = _ascii(((f.metadata or {}).get(b"description") or b"").decode())
        if is_time(f.type):
            header.insert(f"TTYPE{i}", (f"TCTYP{i}", TIMESYS, "time scale of the ISO 8601 values"), after=True)
        if not desc:
            continue
        header.insert(f"TTYPE{i}", (f"TCOMM{i}", desc), after=True)
        long = long or len(desc) > 68
        # the TTYPEn comment: what fits on the card (TCOMMn has it all)
        free = 80 - (len(fits.Card(f"TTYPE{i}", header[f"TTYPE{i}"], "x").image.rstrip()) - 1)
        header.comments[f"TTYPE{i}"] = desc if len(desc) <= free else desc[: max(free - 3, 0)] + "..."
    if any(is_time(f.type) for f in schema):
        header["TIMESYS"] = (TIMESYS, "time scale of the time columns")
    if long:
        header["LONGSTRN"] = ("OGIP 1.0", "long strings use the CONTINUE convention")
