"""SDSS readers: ``spec-PLATE-MJD-FIBER`` (full and lite; legacy SPECOBJ or BOSS/eBOSS SPALL), SDSS-V
``spec-FIELD-MJD-CATALOGID``, and the DR1-DR7 ``spSpec-MJD-PLATE-FIBER`` image.

Data models: data.sdss.org/datamodel/files/BOSS_SPECTRO_REDUX/RUN2D/spectra/PLATE4/spec.html;
classic.sdss.org/dr7/dm/flatFiles/spSpec.html and classic.sdss.org/dr7/products/spectra/read_spSpec.html;
SPPIXMASK bits: sdss3.org/dr10/algorithms/bitmask_sppixmask.php. The layouts read: docs/guide/inputs.md.

- Wavelength comes from the COADD ``loglam`` column only: the primary-header COEFF0 describes the spPlate grid,
  which starts 17 pixels earlier than the COADD table in legacy files.
- Classification lives in HDU 2 (SPECOBJ or SPALL), never in the primary header.
- Mask: see :data:`BAD_PIXEL_BITS`. specutils masks ``and_mask != 0``, but the fibre-level bits 0-15 are set on
  whole stretches of good data (MANYBADCOLUMNS covers ~45% of the pixels in spec-0266-51602-0013 and
  spec-0332-52367-0639), so we mask only pixel-level bits that mean the value itself is unreliable.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..spectrum import SpectrumMeta
from .build import as_float, as_int, as_str, finish_spectrum, log_linear_grid
from .fits_open import FitsFile
from .registry import Reader, RefusedLayout, register

#: SPPIXMASK AND-mask bits that make a pixel bad: FULLREJECT 18, NOSKY 22, BRIGHTSKY 23, NODATA 24,
#: COMBINEREJ 25, BADFLUXFACTOR 26. Not masked: fibre-level bits 0-15, NEARBADPIXEL 16, LOWFLAT 17,
#: PARTIALREJECT 19, SCATTEREDLIGHT 20, CROSSTALK 21, BADSKYCHI 27, REDMONSTER 28 (warnings, the data are there).
BAD_PIXEL_BITS = (18, 22, 23, 24, 25, 26)
BAD_PIXEL_MASK = sum(1 << b for b in BAD_PIXEL_BITS)

#: BUNIT is written as '1E-17 erg/cm^2/s/Ang' (not astropy-parseable); this is the same unit, parseable
FLUX_UNIT = "1e-17 erg / (s cm2 Angstrom)"

SDSS_TELESCOPES = ("SDSS 2.5-M",)

#: spSpec SPEC_CLN -> (class, subclass) in the DR8+ vocabulary; the spSpec name is kept as subclass where finer
SPEC_CLN = {
    0: ("UNKNOWN", None),
    1: ("STAR", None),
    2: ("GALAXY", None),
    3: ("QSO", None),
    4: ("QSO", "HIZ_QSO"),
    5: ("SKY", None),
    6: ("STAR", "STAR_LATE"),
    7: ("GALAXY", "GAL_EM"),
}


def bad_pixels(and_mask: np.ndarray) -> np.ndarray:
    return (np.asarray(and_mask).astype(np.int64) & BAD_PIXEL_MASK) != 0


def _telescope(f: FitsFile) -> str:
    return (as_str(f.header(0).get("TELESCOP")) or "").upper()


def _has_coadd_table(f: FitsFile) -> bool:
    if not (f.has("COADD") and f.is_table("COADD")):
        return False
    cols = {c.lower() for c in f.columns("COADD")}
    return {"flux", "loglam", "ivar"} <= cols


def _summary_hdu(f: FitsFile) -> str | None:
    for name in ("SPALL", "SPECOBJ"):
        if f.has(name):
            return name
    return None


def _is_sdssv(f: FitsFile) -> bool:
    summary = _summary_hdu(f)
    if summary is not None and f.has_column(summary, "CATALOGID") and f.has_column(summary, "FIELD"):
        return True
    h = f.header(0)
    return h.get("CATALOGID") is not None and h.get("FIELD") is not None and h.get("PLATEID") is None


def _row0(f: FitsFile, hdu: str, name: str) -> Any:
    if not f.has_column(hdu, name):
        return None
    value = f.column(hdu, name)
    return value[0] if len(value) else None


def _spec_meta(f: FitsFile, variant: str, sdssv: bool) -> SpectrumMeta:
    h = f.header(0)
    summary = _summary_hdu(f)

    def get(name: str, header_key: str | None = None) -> Any:
        value = _row0(f, summary, name) if summary else None
        if value is None and header_key:
            value = h.get(header_key)
        return value

    ids: dict[str, Any] = {}
    if sdssv:
        keys = (("field", "FIELD", "FIELD"), ("mjd", "MJD", "MJD"), ("catalogid", "CATALOGID", "CATALOGID"))
    else:
        keys = (("plate", "PLATE", "PLATEID"), ("mjd", "MJD", "MJD"), ("fiberid", "FIBERID", "FIBERID"),
                ("specobjid", "SPECOBJID", None))
    for key, col, hkey in keys:
        value = as_int(get(col, hkey))
        if value is not None:
            ids[key] = value
    if sdssv:
        fiber = as_int(get("FIBERID", "FIBERID"))
        if fiber is not None:
            ids["fiberid"] = fiber
    ra = as_float(get("PLUG_RA", "PLUG_RA"))
    dec = as_float(get("PLUG_DEC", "PLUG_DEC"))
    if ra is None or dec is None:
        ra, dec = as_float(get("RA", "RA")), as_float(get("DEC", "DEC"))
    snr_bands: dict[str, float] = {}
    sn_median = get("SN_MEDIAN")
    if sn_median is not None and np.ndim(sn_median) == 1 and len(sn_median) == 5:
        snr_bands = {b: float(v) for b, v in zip("ugriz", sn_median, strict=True) if np.isfinite(v)}
    return SpectrumMeta(
        survey="sdss",
        variant=variant,
        path=f.path,
        pipeline_version=as_str(get("RUN2D", "RUN2D")) or as_str(h.get("VERS2D")),
        hdu="COADD",
        ids=ids,
        ra=ra,
        dec=dec,
        mjd=None if ids.get("mjd") is None else float(ids["mjd"]),
        pipeline_class=as_str(get("CLASS")),
        pipeline_subclass=as_str(get("SUBCLASS")),
        redshift=as_float(get("Z")),
        redshift_err=as_float(get("Z_ERR")),
        redshift_warning=as_int(get("ZWARNING")),
        snr=as_float(get("SN_MEDIAN_ALL")),
        snr_bands=snr_bands,
    )


def _read_coadd(f: FitsFile, meta: SpectrumMeta):
    loglam = np.asarray(f.column("COADD", "loglam"), dtype=np.float64)
    and_mask = f.column("COADD", "and_mask") if f.has_column("COADD", "and_mask") else np.zeros(loglam.size, int)
    return finish_spectrum(
        wavelength=10.0**loglam,
        flux=f.column("COADD", "flux"),
        ivar=f.column("COADD", "ivar"),
        bad=bad_pixels(and_mask),
        flux_unit=FLUX_UNIT,
        meta=meta,
        wavelength_key="10**COADD.loglam",
        redshift_key="Z",
    )


class _SdssSpec(Reader):
    survey = "sdss"
    full: bool = False

    def _matches(self, f: FitsFile) -> bool:
        if not _has_coadd_table(f):
            return False
        if _telescope(f) not in SDSS_TELESCOPES and _summary_hdu(f) is None:
            return False
        # full files add one table per camera per exposure after HDU 3 (SPZLINE)
        return (len(f.names) > 4) == self.full

    def identify(self, f: FitsFile) -> bool:
        return self._matches(f) and not _is_sdssv(f)

    def read(self, f: FitsFile, target: Any = None, **options: Any):
        return _read_coadd(f, _spec_meta(f, self.variant, sdssv=False))


@register
class SdssSpecLite(_SdssSpec):
    """spec-PLATE-MJD-FIBER lite: PRIMARY, COADD, SPECOBJ|SPALL, SPZLINE."""

    variant = "sdss-spec-lite"
    priority = 10
    description = "SDSS spec-PLATE-MJD-FIBER lite (COADD table, SPECOBJ/SPALL)"
    full = False


@register
class SdssSpecFull(_SdssSpec):
    """spec-PLATE-MJD-FIBER full: the lite HDUs plus per-exposure camera frames (only the COADD is read)."""

    variant = "sdss-spec-full"
    priority = 10
    description = "SDSS spec-PLATE-MJD-FIBER full (COADD table plus per-exposure frames)"
    full = True


@register
class SdssVSpec(Reader):
    """SDSS-V (DR18+) spec-FIELD-MJD-CATALOGID: the BOSS column model, identified by FIELD/CATALOGID."""

    variant = "sdssv-spec"
    survey = "sdss"
    priority = 15
    description = "SDSS-V spec-FIELD-MJD-CATALOGID (COADD table, SPALL with FIELD/CATALOGID)"

    def identify(self, f: FitsFile) -> bool:
        return _has_coadd_table(f) and _is_sdssv(f)

    def read(self, f: FitsFile, target: Any = None, **options: Any):
        return _read_coadd(f, _spec_meta(f, self.variant, sdssv=True))


#: spSpec primary image rows: 4 in the DR7 sample header (flux, continuum-subtracted flux, sigma, mask), 5 where
#: specutils expects them; an image with many more rows is a whole plate (spPlate: one row per fibre)
SPSPEC_MIN_ROWS, SPSPEC_MAX_ROWS = 4, 6


def _sdss_primary_rows(f: FitsFile) -> int:
    """NAXIS2 of an SDSS 2-D primary image with a log-linear COEFF0 grid; 0 when the file is not one."""
    h = f.header(0)
    if _telescope(f) not in SDSS_TELESCOPES or f.is_table(0) or int(h.get("NAXIS", 0) or 0) != 2:
        return 0
    if h.get("COEFF0") is None:
        return 0
    return int(h.get("NAXIS2", 0) or 0)


@register
class SdssSpPlate(RefusedLayout):
    """A whole plate (spPlate-PLATE-MJD.fits: one image row per fibre) is not one spectrum; reading row 0 as an
    spSpec flux and row 2 as its sigma would be silently wrong, so the layout is recognised and refused."""

    variant = "sdss-spplate"
    survey = "sdss"
    priority = 10
    description = "SDSS spPlate (all fibres of a plate in one image): refused"
    reason = "this is an SDSS plate file (one image row per fibre, like spPlate-PLATE-MJD.fits), not one spectrum"
    hint = "read the per-fibre spec-PLATE-MJD-FIBER.fits (or spSpec-MJD-PLATE-FIBER.fit) files instead"

    def identify(self, f: FitsFile) -> bool:
        return _sdss_primary_rows(f) > SPSPEC_MAX_ROWS


@register
class SdssSpSpec(Reader):
    """spSpec-MJD-PLATE-FIBER (DR1-DR7): primary image rows flux, continuum-subtracted flux, sigma, mask.

    The DR7 sample header has 4 rows (specutils insists on 5): we accept 4 or more. sigma -> ivar = 1/sigma**2
    (sigma <= 0 means no data). Classification from SPEC_CLN, redshift from Z/Z_ERR/Z_WARNIN in the header.
    """

    variant = "sdss-spspec"
    survey = "sdss"
    priority = 10
    description = "SDSS DR1-DR7 spSpec primary image (flux, continuum-subtracted, sigma, mask)"

    def identify(self, f: FitsFile) -> bool:
        return _sdss_primary_rows(f) in range(SPSPEC_MIN_ROWS, SPSPEC_MAX_ROWS + 1)

    def read(self, f: FitsFile, target: Any = None, **options: Any):
        h = f.header(0)
        img = f.image(0).astype(np.float64)
        wavelength = log_linear_grid(f.path, h, img.shape[1], "SDSS spSpec image")
        sigma = img[2]
        with np.errstate(divide="ignore", invalid="ignore"):
            ivar = np.where(np.isfinite(sigma) & (sigma > 0), 1.0 / sigma**2, 0.0)
        cln = as_int(h.get("SPEC_CLN"))
        cls, subcls = SPEC_CLN.get(cln, (None, None)) if cln is not None else (None, None)
        ids = {
            k: v
            for k, v in (("plate", as_int(h.get("PLATEID"))), ("mjd", as_int(h.get("MJD"))),
                         ("fiberid", as_int(h.get("FIBERID"))))
            if v is not None
        }
        meta = SpectrumMeta(
            survey="sdss",
            variant=self.variant,
            path=f.path,
            pipeline_version=as_str(h.get("VERSION")) or as_str(h.get("VERS1D")),
            hdu=0,
            ids=ids,
            ra=as_float(h.get("RAOBJ", h.get("RA"))),
            dec=as_float(h.get("DECOBJ", h.get("DEC"))),
            mjd=None if ids.get("mjd") is None else float(ids["mjd"]),
            pipeline_class=cls,
            pipeline_subclass=subcls,
            redshift=as_float(h.get("Z")),
            redshift_err=as_float(h.get("Z_ERR")),
            redshift_warning=as_int(h.get("Z_WARNIN")),
        )
        return finish_spectrum(
            wavelength=wavelength,
            flux=img[0],
            ivar=ivar,
            bad=bad_pixels(img[3]),
            flux_unit=FLUX_UNIT,
            meta=meta,
            wavelength_key="the COEFF0/COEFF1 grid",
        )
