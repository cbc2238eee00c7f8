"""DESI redshift catalogues: ``redrock-*.fits`` (REDSHIFTS HDU, Everest and later) and ``zbest-*.fits`` (ZBEST).

Data model: desihub/desidatamodel ``doc/DESI_SPECTRO_REDUX/SPECPROD/.../redrock-*.rst`` and, for the pre-Everest
zbest files, ``zbest-NSIDE-PIXNUM.rst``. Rows are joined to spectra by TARGETID (the zbest FIBERMAP is per exposure,
so we never join through it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import SpectrumReadError
from .build import as_float, as_int, as_str
from .fits_open import FitsFile, open_fits
from .registry import RefusedLayout, register

REDSHIFT_HDUS = ("REDSHIFTS", "ZBEST")


@dataclass(frozen=True)
class Redshift:
    targetid: int
    z: float | None
    zerr: float | None
    zwarn: int | None
    spectype: str | None
    subtype: str | None


def redshift_hdu(f: FitsFile) -> str | None:
    for name in REDSHIFT_HDUS:
        if f.has(name) and f.is_table(name):
            return name
    return None


def read_redshifts(path: str | os.PathLike, *, backend: str | None = None) -> tuple[dict[int, Redshift], str | None]:
    """All rows of a redrock/zbest file by TARGETID, and the redrock version (RRVER) when written."""
    with open_fits(path, backend=backend) as f:
        hdu = redshift_hdu(f)
        if hdu is None:
            raise SpectrumReadError(
                path, "not a redrock/zbest file: no REDSHIFTS or ZBEST table",
                hint="pass the redrock-*.fits (or zbest-*.fits) file written for this coadd",
            )
        targetids = f.column(hdu, "TARGETID")
        z = f.column(hdu, "Z")
        zerr = f.column(hdu, "ZERR") if f.has_column(hdu, "ZERR") else np.full(len(z), np.nan)
        zwarn = f.column(hdu, "ZWARN") if f.has_column(hdu, "ZWARN") else [None] * len(z)
        spectype = f.column(hdu, "SPECTYPE") if f.has_column(hdu, "SPECTYPE") else [None] * len(z)
        subtype = f.column(hdu, "SUBTYPE") if f.has_column(hdu, "SUBTYPE") else [None] * len(z)
        version = as_str(f.header(0).get("RRVER"))
    rows: dict[int, Redshift] = {}
    for i, tid in enumerate(targetids):
        rows[int(tid)] = Redshift(
            targetid=int(tid),
            z=as_float(z[i]),
            zerr=as_float(zerr[i]),
            zwarn=as_int(zwarn[i]),
            spectype=as_str(spectype[i]),
            subtype=as_str(subtype[i]),
        )
    return rows, version


def find_redrock_file(spectra_path: str | os.PathLike) -> Path | None:
    """``coadd-X.fits`` -> ``redrock-X.fits`` or ``zbest-X.fits`` in the same folder (also for ``spectra-X``)."""
    p = Path(spectra_path)
    name = p.name
    for prefix in ("coadd-", "spectra-"):
        if name.startswith(prefix):
            stem = name[len(prefix):]
            for rr_prefix in ("redrock-", "zbest-"):
                candidate = p.with_name(rr_prefix + stem)
                if candidate.exists():
                    return candidate
    return None


@register
class RedrockCatalogue(RefusedLayout):
    """A redshift catalogue handed over as if it were a spectrum: say what it is and how to use it."""

    variant = "desi-redrock"
    survey = "desi"
    priority = 5
    description = "DESI redrock/zbest redshift catalogue: joined to a coadd, not read as a spectrum"
    reason = "this is a DESI redrock/zbest redshift catalogue (REDSHIFTS/ZBEST table), not a spectrum file"
    hint = (
        "read the coadd-*.fits it belongs to; the redrock file is joined automatically when it sits next to the "
        "coadd, or pass it with --redrock / read_spectrum(..., redrock=PATH)"
    )

    def identify(self, f: FitsFile) -> bool:
        return redshift_hdu(f) is not None and not any(n.endswith("_FLUX") for n in f.names)
