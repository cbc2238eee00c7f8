"""LAMOST low-resolution survey (LRS) readers: the 5-row primary image (DR1; DR2-DR7) and the DR8+ COADD table.

Data model: LAMOST pilot-data "Fits Files" page (lamost.org/public/dr/algorithms/ff), DR3 data-production
description (dr3.lamost.org/doc/data-production-description) and DR8/DR10 LRS pages; the quirks below were checked
on real files (the layouts read: docs/guide/inputs.md).

File names (for humans; we sniff content): ``spec-LMJD-PLANID_spSS-FFF.fits[.gz]`` or ``<obsid>.fits``.

- Flux is relative (no BUNIT): ``flux_unit = ""``.
- DR1 has no wavelength row: lambda_i = 10**(COEFF0 + COEFF1*i). The WCS keys say CTYPE1='LINEAR' but hold log10
  lambda, so the WCS is never used.
- Masks are float32 0/1. The AND mask (bad in every exposure) marks a pixel bad; the OR mask (bad in at least one
  exposure) does not, as the coadd still has good data there.
- Key names drift: SN_U..SN_Z (DR1-DR3) vs SNRU..SNRZ (DR6+); FIBERID may be a string; OBSID absent before DR2/3.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import SpectrumReadError
from ..spectrum import SpectrumMeta
from .build import as_float, as_int, as_str, finish_spectrum, first, log_linear_grid
from .fits_open import FitsFile
from .registry import Reader, RefusedLayout, register

BANDS = ("u", "g", "r", "i", "z")


def _is_lamost(f: FitsFile) -> bool:
    return (as_str(f.header(0).get("TELESCOP")) or "").upper() == "LAMOST"


def lamost_meta(f: FitsFile, variant: str) -> SpectrumMeta:
    h = f.header(0)
    ids: dict[str, Any] = {}
    for key, hkey in (("obsid", "OBSID"), ("lmjd", "LMJD"), ("spid", "SPID"), ("fiberid", "FIBERID")):
        value = as_int(h.get(hkey))
        if value is not None:
            ids[key] = value
    for key, hkey in (("designation", "DESIG"), ("planid", "PLANID")):
        value = as_str(h.get(hkey))
        if value is not None:
            ids[key] = value
    snr_bands = {}
    for band in BANDS:
        value = as_float(first(h, f"SNR{band.upper()}", f"SN_{band.upper()}"))
        if value is not None:
            snr_bands[band] = value
    return SpectrumMeta(
        survey="lamost",
        variant=variant,
        path=f.path,
        data_release=as_str(h.get("DATA_V")),
        pipeline_version=as_str(h.get("VERSPIPE")),
        hdu=0,
        ids=ids,
        ra=as_float(h.get("RA")),
        dec=as_float(h.get("DEC")),
        mjd=as_float(h.get("MJD")) if as_float(h.get("MJD")) is not None else as_float(h.get("LMJD")),
        pipeline_class=as_str(h.get("CLASS")),
        pipeline_subclass=as_str(h.get("SUBCLASS")),
        redshift=as_float(h.get("Z")),
        redshift_err=as_float(h.get("Z_ERR")),
        snr_bands=snr_bands,
    )


def _image_rows(f: FitsFile) -> bool:
    h = f.header(0)
    return int(h.get("NAXIS", 0) or 0) == 2 and int(h.get("NAXIS2", 0) or 0) >= 5 and not f.is_table(0)


def _has_wavelength_row(f: FitsFile) -> bool:
    return "WAVELENGTH" in (as_str(f.header(0).get("EXTEN0")) or "").upper()


class _LamostImage(Reader):
    """The 5-row primary image: rows flux, ivar, row 2, AND mask, OR mask. Row 2 is the wavelength (DR2-DR7) or a
    continuum-normalised flux (pilot/DR1, whose wavelengths come from COEFF0/COEFF1)."""

    survey = "lamost"
    priority = 10
    wavelength_row: bool = False

    def identify(self, f: FitsFile) -> bool:
        return _is_lamost(f) and _image_rows(f) and _has_wavelength_row(f) == self.wavelength_row

    def read(self, f: FitsFile, target: Any = None, **options: Any):
        img = f.image(0)
        if self.wavelength_row:
            wavelength, key = img[2], "the wavelength row (row 3 of the primary image)"
        else:
            wavelength = log_linear_grid(f.path, f.header(0), img.shape[1], "LAMOST DR1 image (no wavelength row)")
            key = "the COEFF0/COEFF1 grid"
        return finish_spectrum(
            wavelength=wavelength, flux=img[0], ivar=img[1], bad=img[3] != 0, flux_unit="",
            meta=lamost_meta(f, self.variant), wavelength_key=key,
        )


@register
class LamostDR1Image(_LamostImage):
    """Pilot/DR1 image: rows flux, ivar, continuum-normalised flux, AND mask, OR mask; log-linear COEFF0/COEFF1."""

    variant = "lamost-lrs-dr1-image"
    description = "LAMOST LRS pilot/DR1 primary image (5 rows, wavelength from COEFF0/COEFF1)"
    wavelength_row = False


@register
class LamostImage(_LamostImage):
    """DR2-DR7 image: rows flux, ivar, wavelength (vacuum Å), AND mask, OR mask."""

    variant = "lamost-lrs-image"
    description = "LAMOST LRS DR2-DR7 primary image (5 rows incl. a wavelength row)"
    wavelength_row = True


@register
class LamostCoaddTable(Reader):
    """DR8+ layout: header-only primary (NAXIS=0 though NAXIS1/2 are written) and a 1-row COADD table."""

    variant = "lamost-lrs-coadd-table"
    survey = "lamost"
    priority = 10
    description = "LAMOST LRS DR8+ COADD binary table (1 row of vector columns)"

    def identify(self, f: FitsFile) -> bool:
        return _is_lamost(f) and f.has("COADD") and f.is_table("COADD") and f.has_column("COADD", "WAVELENGTH")

    def read(self, f: FitsFile, target: Any = None, **options: Any):
        if f.nrows("COADD") < 1:
            raise SpectrumReadError(f.path, "the COADD table has no row (a DR8+ LRS file holds its spectrum in row 1)",
                                    hint="the file is damaged or incomplete; download it again")
        meta = lamost_meta(f, self.variant)
        meta.hdu = "COADD"
        meta.row = 0

        def col(name: str) -> np.ndarray:
            return np.asarray(f.column("COADD", name))[0]

        return finish_spectrum(
            wavelength=col("WAVELENGTH"), flux=col("FLUX"), ivar=col("IVAR"), bad=col("ANDMASK") != 0,
            flux_unit="", meta=meta, wavelength_key="COADD.WAVELENGTH",
        )


@register
class LamostMRS(RefusedLayout):
    """Medium-resolution survey files: per-arm COADD_B/COADD_R tables at R~7500, a different science product."""

    variant = "lamost-mrs"
    survey = "lamost"
    priority = 20
    description = "LAMOST medium-resolution (MRS) file: refused"
    reason = (
        "this is a LAMOST medium-resolution (MRS) file (COADD_B/COADD_R tables), not a low-resolution (LRS) "
        "spectrum; spec-vetting reads LRS only (the Spec-o3 model was trained on 3700-9100 Å LRS spectra)"
    )
    hint = "use the LRS spectrum of the same target (spec-LMJD-PLANID_spSS-FFF.fits)"

    def identify(self, f: FitsFile) -> bool:
        if not _is_lamost(f):
            return False
        return f.has("COADD_B") or f.has("COADD_R") or (as_str(f.header(0).get("EXTNAME")) or "") == "Information"
