"""Write a :class:`~spec_vetting.spectrum.Spectrum` as a real survey file: LAMOST LRS, SDSS spec-lite, DESI coadd.

Why: the synthetic examples, tests and benchmarks must go through the very readers that real files go through, so
these writers copy the layouts of the real files in ``shared/data/real`` (header keywords, HDU and column names,
dtypes, and their quirks) as documented in ``shared/docs/SURVEY_FORMATS.md``:

- ``lamost-dr1-image``: 5 x N float32 primary image, rows Flux / Inverse / Subcontinuum / Andmask / Ormask, no
  wavelength row, wavelength only from ``COEFF0``/``COEFF1`` (log10) while ``CTYPE1 = 'LINEAR'`` lies; no OBSID,
  ``SN_U``... S/N keys, pipeline v2.6.4, no primary EXTNAME.
- ``lamost-image``: DR2+ (DR7, v2.9.7): the wavelength is row 2, EXTNAME ``Flux``, OBSID, DATA_V, ``SNRU``...
- ``lamost-coadd-table``: DR10 (v2.9.8): empty primary with the ``NAXIS = 0`` + ``NAXIS1``/``NAXIS2`` quirk and a
  one-row ``COADD`` BINTABLE of vector columns FLUX, IVAR, WAVELENGTH, ANDMASK, ORMASK, NORMALIZATION.
- ``sdss-spec-lite``: HDUs PRIMARY, COADD (one row per pixel: flux, loglam, ivar, and_mask, or_mask, wdisp, sky,
  model), ``SPECOBJ`` (legacy, run2d 26) or ``SPALL`` (BOSS, v5_13_2), ``SPZLINE``. The legacy primary ``COEFF0``
  is 17 pixels off ``loglam[0]`` as in the real spec-0266-51602-0013 (readers must trust ``loglam``).
- ``desi-coadd``: FIBERMAP, EXP_FIBERMAP, B/R/Z _WAVELENGTH (linear 0.8 Å, overlapping arms), _FLUX, _IVAR, _MASK
  (uint32 stored as int32 with BZERO), _RESOLUTION, SCORES; several targets per file plus a stuck fibre (negative
  TARGETID, non-zero COADD_FIBERSTATUS, no data) and a sky fibre (OBJTYPE SKY) for readers to skip.
  :func:`write_redrock` writes the matching ``redrock-*.fits`` (REDSHIFTS, FIBERMAP).
- ``sdss-spspec``: DR1-DR7 ``spSpec-MJD-PLATE-FIBER.fit``, built from the DR7 data model (no real file was found):
  4-row float32 primary image flux / continuum-subtracted flux / sigma (not ivar) / pixel mask, log-linear
  ``COEFF0``/``COEFF1``, classification as ``SPEC_CLN`` and ``Z``/``Z_ERR``/``Z_WARNIN`` header keys.
- ``sdssv-spec``: SDSS-V (DR18+) ``spec-FIELD-MJD-CATALOGID``: the BOSS spec-lite layout with ``FIELD``,
  ``CATALOGID`` (header and SPALL) in place of the plate and specobjid (unverified against a real file).

A spectrum not on the layout's native grid is resampled onto it (:func:`resample`). Flux values are written as
they are (no unit conversion): a synthetic spectrum keeps its numbers in any layout. In the DESI arm overlaps the
same flux is written in both arms and the inverse variance is split between them with a linear taper, so an
inverse-variance-weighted merge gives back the original flux and ivar.
"""

from __future__ import annotations

import gzip
import io
import shutil
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from astropy.io import fits

from ..spectrum import Spectrum, SpectrumMeta
from .synthetic import LAMOST_COEFF1, lamost_grid

LAYOUTS: tuple[str, ...] = (
    "lamost-dr1-image",
    "lamost-image",
    "lamost-coadd-table",
    "sdss-spec-lite",
    "sdss-spspec",
    "sdssv-spec",
    "desi-coadd",
)

# SDSS: loglam on integer multiples of 1e-4; legacy ~3800-9200 Å, BOSS ~3600-10400 Å
SDSS_DLOGLAM = 1e-4
SDSS_GRIDS = {"legacy": (3.5800, 3840), "boss": (3.5600, 4560)}

# DESI: linear 0.8 Å arms, overlapping (datamodel and the real coadds)
DESI_STEP = 0.8
DESI_ARMS = {"B": (3600.0, 2751), "R": (5760.0, 2326), "Z": (7520.0, 2881)}
DESI_FULL_N = 7781  # 3600 ... 9824 Å
DESI_FLUX_BUNIT = "10**-17 erg/(s cm2 Angstrom)"
DESI_IVAR_BUNIT = "10**+34 (s2 cm4 Angstrom2) / erg2"
DESI_NDIAG = 11

SDSS_BUNIT = "1E-17 erg/cm^2/s/Ang"

#: SPZLINE rows of the real spec-lite files: (name, vacuum wavelength)
SPZLINE_LINES = (
    ("Ly_alpha", 1215.67), ("N_V 1240", 1240.81), ("C_IV 1549", 1549.48), ("He_II 1640", 1640.42),
    ("C_III] 1908", 1908.734), ("Mg_II 2799", 2800.315), ("[O_II] 3725", 3727.092), ("[O_II] 3727", 3729.875),
    ("[Ne_III] 3868", 3869.857), ("H_epsilon", 3890.151), ("[Ne_III] 3970", 3971.123), ("H_delta", 4102.892),
    ("H_gamma", 4341.684), ("[O_III] 4363", 4364.435), ("He_II 4685", 4686.991), ("H_beta", 4862.683),
    ("[O_III] 4959", 4960.295), ("[O_III] 5007", 5008.240), ("He_II 5411", 5413.024), ("[O_I] 5577", 5578.888),
    ("[O_I] 6300", 6302.046), ("[S_III] 6312", 6313.806), ("[O_I] 6363", 6365.535), ("[N_II] 6548", 6549.859),
    ("H_alpha", 6564.614), ("[N_II] 6583", 6585.268), ("[S_II] 6716", 6718.294), ("[S_II] 6730", 6732.678),
    ("[Ar_III] 7135", 7137.757),
)  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------
# grids and resampling


def sdss_grid(flavour: str = "legacy") -> np.ndarray:
    start, n = SDSS_GRIDS[flavour]
    return 10.0 ** (start + SDSS_DLOGLAM * np.arange(n))


def desi_full_grid() -> np.ndarray:
    """The union of the three DESI arms: 3600, 3600.8, ... 9824 Å (the arms are slices of it)."""
    return DESI_ARMS["B"][0] + DESI_STEP * np.arange(DESI_FULL_N)


def _desi_arm_slices() -> dict[str, slice]:
    out = {}
    for arm, (start, n) in DESI_ARMS.items():
        i0 = int(round((start - DESI_ARMS["B"][0]) / DESI_STEP))
        out[arm] = slice(i0, i0 + n)
    return out


def native_grid(layout: str, *, flavour: str = "legacy") -> np.ndarray:
    """The wavelength grid (vacuum Å) a layout stores natively; generate on it to write without resampling."""
    _check_layout(layout)
    if layout.startswith("lamost"):
        return lamost_grid()
    if layout == "sdss-spec-lite":
        return sdss_grid(flavour)
    if layout == "sdss-spspec":
        return sdss_grid("legacy")
    if layout == "sdssv-spec":
        return sdss_grid("boss")
    return desi_full_grid()


def _check_layout(layout: str) -> None:
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; choose one of {', '.join(LAYOUTS)}")


def resample(spectrum: Spectrum, grid: np.ndarray) -> Spectrum:
    """Linear resampling onto ``grid``: flux and variance interpolated over good pixels, variance scaled by the
    pixel-size ratio (coarser pixels average more signal); pixels outside the data or next to a bad one are masked."""
    grid = np.asarray(grid, dtype=np.float64)
    w, good = spectrum.wavelength, spectrum.good
    if np.count_nonzero(good) < 2:
        raise ValueError(f"{spectrum.meta.path or 'spectrum'}: fewer than 2 good pixels, cannot resample")
    flux = np.interp(grid, w[good], spectrum.flux[good])
    var = np.interp(grid, w[good], 1.0 / spectrum.ivar[good])
    old_step = np.interp(grid, w[1:], np.diff(w))
    new_step = np.gradient(grid)
    var = var * np.clip(old_step / new_step, 0.05, 20.0)
    outside = (grid < w[0]) | (grid > w[-1])
    nearest = np.clip(np.searchsorted(w, grid), 0, w.size - 1)
    bad = outside | ~good[nearest] | ~good[np.clip(nearest - 1, 0, w.size - 1)]
    ivar = np.where(bad, 0.0, 1.0 / var)
    flux = np.where(outside, 0.0, flux)
    return Spectrum(grid.copy(), flux, ivar, bad, spectrum.flux_unit, spectrum.meta)


def _is_log_grid(w: np.ndarray, step: float, start_multiple_of: float | None = None) -> bool:
    lw = np.log10(w)
    if not np.allclose(np.diff(lw), step, rtol=1e-5, atol=0):
        return False
    if start_multiple_of is not None:
        k = lw[0] / start_multiple_of
        return abs(k - round(k)) < 1e-3
    return True


# ---------------------------------------------------------------------------------------------------------------
# identifiers for spectra that come from another survey (or from the synthetic generator)


def _key(spectrum: Spectrum) -> int:
    """A stable integer from the spectrum's identity (ids, position) to derive missing identifiers from."""
    m = spectrum.meta
    return zlib.crc32(repr((sorted((k, str(v)) for k, v in m.ids.items()), m.ra, m.dec)).encode())


def _lamost_ids(spectrum: Spectrum) -> dict:
    ids = dict(spectrum.meta.ids) if spectrum.meta.survey == "lamost" else {}
    k = _key(spectrum)
    ids.setdefault("obsid", 800_000_000 + k % 100_000_000)
    ids.setdefault("planid", f"SYN{k % 100000:05d}")
    ids.setdefault("lmjd", 56000 + k % 4000)
    ids.setdefault("spid", 1 + k % 16)
    ids.setdefault("fiberid", 1 + (k >> 8) % 250)
    ids.setdefault("designation", "LAMOST J000000.00+000000.0")
    return ids


def _sdss_ids(spectrum: Spectrum, run2d_code: int) -> dict:
    ids = dict(spectrum.meta.ids) if spectrum.meta.survey == "sdss" else {}
    k = _key(spectrum)
    ids.setdefault("plate", 300 + k % 2500)
    ids.setdefault("mjd", 51600 + (k >> 4) % 3000)
    ids.setdefault("fiberid", 1 + (k >> 12) % 640)
    if "specobjid" not in ids:
        # SDSS bit layout: plate << 50 | fiber << 38 | (mjd - 50000) << 24 | run2d << 10
        ids["specobjid"] = (
            (int(ids["plate"]) << 50)
            | (int(ids["fiberid"]) << 38)
            | ((int(ids["mjd"]) - 50000) << 24)
            | (run2d_code << 10)
        )
    return ids


def _desi_targetid(spectrum: Spectrum) -> int:
    if spectrum.meta.survey == "desi" and "targetid" in spectrum.meta.ids:
        return int(spectrum.meta.ids["targetid"])
    return 39_627_000_000_000_000 + _key(spectrum) % 1_000_000_000_000


def _radec(spectrum: Spectrum) -> tuple[float, float]:
    ra = spectrum.meta.ra if spectrum.meta.ra is not None else float(_key(spectrum) % 36000) / 100.0
    dec = spectrum.meta.dec if spectrum.meta.dec is not None else float(_key(spectrum) % 9000) / 100.0 - 10.0
    return float(ra), float(dec)


def _snr(spectrum: Spectrum, band: str) -> float:
    if band in spectrum.meta.snr_bands:
        return round(float(spectrum.meta.snr_bands[band]), 2)
    return round(float(spectrum.meta.snr or 0.0), 2)


def _smooth_continuum(flux: np.ndarray, good: np.ndarray, width: int = 101) -> np.ndarray:
    """A running median continuum (for LAMOST's continuum-normalised row/column and SDSS's model column)."""
    f = np.where(good, flux, np.nan)
    half = width // 2
    padded = np.pad(f, half, mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, width)[:, ::5]
    cont = np.nanmedian(windows, axis=1) if np.isfinite(windows).any() else np.ones_like(flux)
    cont = np.where(np.isfinite(cont) & (cont != 0), cont, np.nanmedian(f) if np.isfinite(f).any() else 1.0)
    return cont


# ---------------------------------------------------------------------------------------------------------------
# LAMOST


def lamost_file_name(ids: dict, suffix: str = ".fits") -> str:
    """The survey's file name ``spec-LMJD-PLANID_spSS-FFF.fits`` from LAMOST ids (lmjd, planid, spid, fiberid)."""
    return f"spec-{ids['lmjd']}-{ids['planid']}_sp{int(ids['spid']):02d}-{int(ids['fiberid']):03d}{suffix}"


def _lamost_header(spectrum: Spectrum, path: Path, n: int, release: str) -> fits.Header:
    """Primary header keywords in the order and naming of the real files of ``release`` ("dr1", "dr7", "dr10")."""
    m = spectrum.meta
    ids = _lamost_ids(spectrum)
    ra, dec = _radec(spectrum)
    name = lamost_file_name(ids)
    h = fits.Header()
    h.add_comment("--------FILE INFORMATION")
    h["FILENAME"] = (name, "")
    if release != "dr1":
        h["OBSID"] = (int(ids["obsid"]), "Unique number ID of this spectrum")
    h["AUTHOR"] = ("LAMOST Pipeline", "Who compiled the information")
    if release == "dr7":
        h["DATA_V"] = ("LAMOST DR7", "Data release version")
        h["EXTEN0"] = ("Flux, Inverse, Wavelength, Andmask, Ormask", "")
        h["N_EXTEN"] = (1, "The extension number")
    elif release == "dr10":
        h["DATA_V"] = ("LAMOST DR10", "Data release version")
        h["N_EXTEN"] = (2, "The amount of extension")
        h["NORM"] = (1, "1 if there exists a normalizated spectrum")
    else:
        h["N_EXTEN"] = (1, "The extension number")
        h["EXTEN0"] = ("Flux Inverse Subcontinuum Andmask Ormask", "")
    h["ORIGIN"] = ("NAOC-LAMOST", "Organization responsible for creating this file")
    h["DATE"] = ("2020-01-01T00:00:00", "Time when this HDU is created (UTC)")
    h.add_comment("--------TELESCOPE PARAMETERS")
    h["TELESCOP"] = ("LAMOST", "GuoShouJing Telescope")
    h["LONGITUD"] = (117.58, "[deg] Longitude of site")
    h["LATITUDE"] = (40.39, "[deg] Latitude of site")
    h.add_comment("--------OBSERVATION PARAMETERS")
    h["LMJD"] = (int(ids["lmjd"]), "Local Modified Julian Day")
    h["MJD"] = (int(ids["lmjd"]) - 1, "Modified Julian Day")
    h["PLANID"] = (str(ids["planid"]), "Plan ID in use")
    h["RA"] = (ra, "[deg] Right ascension of object")
    h["DEC"] = (dec, "[deg] Declination of object")
    if release != "dr1":
        h["RA_OBS"] = (ra, "[deg] Right ascension during observing")
        h["DEC_OBS"] = (dec, "[deg] Declination during observing")
    h["DESIG"] = (str(ids["designation"]), "Designation of LAMOST target")
    h["FIBERID"] = (int(ids["fiberid"]), "Fiber ID of Object")
    h["OBJNAME"] = (str(_key(spectrum)), "Name of object")
    h["OBJTYPE"] = ("star", "Object type from input catalog")
    if release == "dr1":
        h["OBJSOURC"] = ("SYNTH", "Name of input catalog")
        h["T_INFO"] = ("NULL", "Target information")
        h["FIBERTYP"] = ("Obj", "Fiber type of object")
    else:
        h["TSOURCE"] = ("SYNTH", "Name of input catalog")
        h["TCOMMENT"] = ("synthetic spectrum (spec_vetting.io.synthetic)", "Target information")
        if release == "dr10":
            h["FIB_TYPE"] = ("Obj", "Fiber type of object")
            h["FIB_MASK"] = (0, "Bitmask of warning values, 0 means good")
        else:
            h["FIBERTYP"] = ("Obj", "Fiber type of object")
            h["FIBERMAS"] = (0, "Bitmask of warning values, 0 means all is well")
    h["OBS_TYPE"] = ("OBJ", "The type of target (OBJ, FLAT, ARC or BIAS)")
    h["OBSCOMM"] = ("Science", "Science, Test")
    h["RADECSYS"] = ("FK5", "Equatorial coordinate system")
    h["EQUINOX"] = (2000.0, "Equinox in years")
    h.add_comment("--------SPECTROGRAPH PARAMETERS")
    h["SPID"] = (int(ids["spid"]), "Spectrograph ID")
    h.add_comment("--------DATA REDUCTION PARAMETERS")
    h["HELIO"] = (True, "Heliocentric correction")
    h["HELIO_RV"] = (0.0, "[km/s] Heliocentric correction")
    h["VACUUM"] = (True, "Wavelengths are in vacuum")
    coeff0 = float(np.log10(spectrum.wavelength[0]))
    h["NWORDER"] = (2, "Number of linear-log10 coefficients")
    h["WFITTYPE"] = ("LOG-LINEAR", "Linear-log10 dispersion")
    h["COEFF0"] = (coeff0, "Central wavelength (log10) of first pixel")
    h["COEFF1"] = (LAMOST_COEFF1, "Log10 dispersion per pixel")
    h["WAT0_001"] = ("system=linear", "")
    h["WAT1_001"] = ("wtype=linear label=Wavelength units=Angstroms", "")
    # the WCS keys say LINEAR but hold log10 wavelength, exactly as the real files do
    h["CRVAL1"] = (coeff0, "Central wavelength (log10) of first pixel")
    h["CD1_1"] = (LAMOST_COEFF1, "Log10 dispersion per pixel")
    h["CRPIX1"] = (1, "Starting pixel (1-indexed)")
    h["CTYPE1"] = ("LINEAR", "")
    h["DC-FLAG"] = (1, "Log-linear flag")
    h.add_comment("--------SPECTRA ANALYSIS RESULTS")
    h["VERSPIPE"] = ({"dr1": "v2.6.4", "dr7": "v2.9.7", "dr10": "v2.9.8"}[release], "Version of Pipeline")
    h["CLASS"] = (m.pipeline_class or "Unknown", "Class of object")
    h["SUBCLASS"] = (m.pipeline_subclass or "Non", "Subclass of object")
    h["Z"] = (float(m.redshift if m.redshift is not None else -9999.0), "Redshift of object")
    h["Z_ERR"] = (float(m.redshift_err if m.redshift_err is not None else -9999.0), "Redshift error of object")
    if release != "dr1":
        h["ZFLAG"] = ("LASP", "Which method computes the redshift")
    prefix = "SN_" if release == "dr1" else "SNR"
    for band in "ugriz":
        h[f"{prefix}{band.upper()}"] = (_snr(spectrum, band), f"SNR of {band} filter")
    return h


def _lamost_rows(spectrum: Spectrum) -> dict[str, np.ndarray]:
    good = spectrum.good
    cont = _smooth_continuum(spectrum.flux, good)
    mask = spectrum.mask.astype(np.float32)
    return {
        "flux": spectrum.flux.astype(np.float32),
        "ivar": spectrum.ivar.astype(np.float32),
        "norm": np.where(good, spectrum.flux / cont, 0.0).astype(np.float32),
        "andmask": mask,
        "ormask": mask.copy(),
    }


def _on_lamost_grid(spectrum: Spectrum) -> Spectrum:
    # DR1 needs a pure log10 grid (COEFF0/COEFF1); any 1e-4 log grid works, anything else is resampled
    if _is_log_grid(spectrum.wavelength, LAMOST_COEFF1):
        return spectrum
    return resample(spectrum, lamost_grid())


def _write_lamost_image(spectrum: Spectrum, path: Path, release: str) -> fits.HDUList:
    spectrum = _on_lamost_grid(spectrum)
    rows = _lamost_rows(spectrum)
    n = len(spectrum)
    third = rows["norm"] if release == "dr1" else spectrum.wavelength.astype(np.float32)
    data = np.vstack([rows["flux"], rows["ivar"], third, rows["andmask"], rows["ormask"]]).astype(np.float32)
    header = _lamost_header(spectrum, path, n, release)
    hdu = fits.PrimaryHDU(data=data)
    hdu.header.extend(header, end=True)
    if release != "dr1":
        hdu.header.set("EXTNAME", "Flux", "The extension name", after="N_EXTEN")
    return fits.HDUList([hdu])


def _write_lamost_table(spectrum: Spectrum, path: Path) -> fits.HDUList:
    spectrum = _on_lamost_grid(spectrum)
    rows = _lamost_rows(spectrum)
    n = len(spectrum)
    primary = fits.PrimaryHDU()
    primary.header["BITPIX"] = 16
    # placeholders renamed to NAXIS1/NAXIS2 in the bytes after writing: the real DR10 files carry these keywords
    # beside NAXIS = 0, which astropy refuses to write itself
    primary.header.set("XNAXIS1", n, "", after="NAXIS")
    primary.header.set("XNAXIS2", 5, "", after="XNAXIS1")
    primary.header.extend(_lamost_header(spectrum, path, n, "dr10"), end=True)
    fmt = f"{n}E"
    cols = [
        fits.Column(name="FLUX", format=fmt, array=rows["flux"][None, :]),
        fits.Column(name="IVAR", format=fmt, array=rows["ivar"][None, :]),
        fits.Column(name="WAVELENGTH", format=fmt, array=spectrum.wavelength.astype(np.float32)[None, :]),
        fits.Column(name="ANDMASK", format=fmt, array=rows["andmask"][None, :]),
        fits.Column(name="ORMASK", format=fmt, array=rows["ormask"][None, :]),
        fits.Column(name="NORMALIZATION", format=fmt, array=rows["norm"][None, :]),
    ]
    table = fits.BinTableHDU.from_columns(cols, name="COADD")
    return fits.HDUList([primary, table])


# ---------------------------------------------------------------------------------------------------------------
# SDSS


def _run2d_code(run2d: str) -> int:
    if run2d.startswith("v"):
        n, m, p = (int(x) for x in run2d[1:].split("_"))
        return (n - 5) * 10000 + m * 100 + p
    return int(run2d)


def _write_sdss_lite(spectrum: Spectrum, path: Path, flavour: str) -> fits.HDUList:
    if flavour not in SDSS_GRIDS:
        raise ValueError(f"unknown SDSS flavour {flavour!r}; choose legacy or boss")
    if not _is_log_grid(spectrum.wavelength, SDSS_DLOGLAM, start_multiple_of=SDSS_DLOGLAM):
        spectrum = resample(spectrum, sdss_grid(flavour))
    m = spectrum.meta
    run2d = "26" if flavour == "legacy" else "v5_13_2"
    ids = _sdss_ids(spectrum, _run2d_code(run2d))
    ra, dec = _radec(spectrum)
    n = len(spectrum)
    loglam = np.log10(spectrum.wavelength)
    # the legacy spPlate starts 17 pixels before the COADD table: COEFF0 must not be trusted (real file quirk)
    coeff0 = float(np.round(loglam[0], 4)) - (17 * SDSS_DLOGLAM if flavour == "legacy" else 0.0)

    h = fits.Header()
    h["TAI"] = (4.5e9, "1st row - seconds since Nov 17 1858")
    h["RA"] = (ra, "1st row - Right ascension of telescope")
    h["DEC"] = (dec, "1st row - Declination of telescope")
    h["EQUINOX"] = (2000.0, "")
    h["RADECSYS"] = ("FK5", "")
    h["MJD"] = (int(ids["mjd"]), "MJD of observation")
    h["TELESCOP"] = ("SDSS 2.5-M", "Sloan Digital Sky Survey")
    h["PLATEID"] = (int(ids["plate"]), "Plate Id")
    if flavour == "legacy":
        # legacy headers carry TILEID and PROGRAM, which DESI also uses: readers must not sniff DESI on them
        h["TILEID"] = (int(ids["plate"]) // 2, "Tile Id")
        h["PROGRAM"] = ("binning 1   1 ", "Identifying name for CCD program")
    h["VERS2D"] = ("v5_3_12" if flavour == "legacy" else run2d, "Version of idlspec2d for 2D reduction")
    if flavour == "boss":
        h["RUN2D"] = (run2d, "2D reduction name")
    h["HELIO_RV"] = (0.0, "Heliocentric correction (added to velocities)")
    h["VACUUM"] = (True, "Wavelengths are in vacuum")
    h["NWORDER"] = (2, "Linear-log10 coefficients")
    h["WFITTYPE"] = ("LOG-LINEAR", "Linear-log10 dispersion")
    h["COEFF0"] = (coeff0, "Central wavelength (log10) of first pixel")
    h["COEFF1"] = (SDSS_DLOGLAM, "Log10 dispersion per pixel")
    h["DC-FLAG"] = (1, "Log-linear flag")
    h["BUNIT"] = (SDSS_BUNIT, "")
    h["PLUG_RA"] = (ra, "RA of object [deg]")
    h["PLUG_DEC"] = (dec, "dec of object [deg]")
    h["SPEC_ID"] = (f"{int(ids['specobjid']):>22d}", "Unique object id")
    h["FIBERID"] = (int(ids["fiberid"]), "Fiber number (1-640)")
    h["NEXP"] = (4, "Number of individual exposures")
    primary = fits.PrimaryHDU(header=h)

    good = spectrum.good
    cont = _smooth_continuum(spectrum.flux, good)
    bitmask = np.where(spectrum.mask, 1 << 24, 0).astype(np.int32)  # NODATA
    coadd = fits.BinTableHDU.from_columns(
        [
            fits.Column(name="flux", format="E", array=spectrum.flux.astype(np.float32)),
            fits.Column(name="loglam", format="E", array=loglam.astype(np.float32)),
            fits.Column(name="ivar", format="E", array=spectrum.ivar.astype(np.float32)),
            fits.Column(name="and_mask", format="J", array=bitmask),
            fits.Column(name="or_mask", format="J", array=bitmask.copy()),
            fits.Column(name="wdisp", format="E", array=np.full(n, 1.1, dtype=np.float32)),
            fits.Column(name="sky", format="E", array=np.abs(cont * 0.3).astype(np.float32)),
            fits.Column(name="model", format="E", array=cont.astype(np.float32)),
        ],
        name="COADD",
    )

    z = float(m.redshift if m.redshift is not None else 0.0)
    zerr = float(m.redshift_err if m.redshift_err is not None else 0.0)
    sdss_class = (m.pipeline_class or "STAR").upper()
    if sdss_class not in ("STAR", "GALAXY", "QSO"):
        sdss_class = "STAR"
    wmin, wmax = float(spectrum.wavelength[0]), float(spectrum.wavelength[-1])
    snr_all = float(m.snr or 0.0)
    common = [
        ("PLATE", "J", int(ids["plate"])),
        ("MJD", "J", int(ids["mjd"])),
        ("FIBERID", "J", int(ids["fiberid"])),
        ("PLUG_RA", "D", ra),
        ("PLUG_DEC", "D", dec),
        ("CLASS", "6A", sdss_class),
        ("SUBCLASS", "21A", m.pipeline_subclass or ""),
        ("Z", "E", z),
        ("Z_ERR", "E", zerr),
        ("RCHI2", "E", 1.0),
        ("DOF", "J", n - 10),
        ("ZWARNING", "J", 0 if m.redshift is not None else 4),
        ("WAVEMIN", "E", wmin),
        ("WAVEMAX", "E", wmax),
        ("SN_MEDIAN_ALL", "E", snr_all),
        ("SN_MEDIAN", "5E", np.array([_snr(spectrum, b) for b in "ugriz"], dtype=np.float32)),
        ("SPECPRIMARY", "B", 1),
    ]
    if flavour == "legacy":
        head = [
            ("SURVEY", "6A", "sdss"),
            ("INSTRUMENT", "4A", "SDSS"),
            ("PROGRAMNAME", "23A", "legacy"),
            ("SPECOBJID", "22A", f"{int(ids['specobjid']):>22d}"),
            ("RUN2D", "3A", run2d),
            ("SOURCETYPE", "19A", sdss_class),
            ("TARGETTYPE", "8A", "SCIENCE"),
        ]
        extname = "SPECOBJ"
    else:
        head = [
            ("SURVEY", "6A", "boss"),
            ("INSTRUMENT", "4A", "BOSS"),
            ("PROGRAMNAME", "27A", "boss"),
            ("SPECOBJID", "K", np.uint64(ids["specobjid"])),
            ("RUN2D", "7A", run2d),
            ("OBJTYPE", "16A", "NA"),
            ("FIELD", "I", int(ids["plate"])),
        ]
        extname = "SPALL"
    cols = []
    for name, fmt, value in head + common:
        arr = np.asarray([value])
        if name == "SPECOBJID" and fmt == "K":
            cols.append(fits.Column(name=name, format="K", bzero=2**63, array=arr.astype(np.uint64)))
        else:
            cols.append(fits.Column(name=name, format=fmt, array=arr))
    specobj = fits.BinTableHDU.from_columns(cols, name=extname)

    nl = len(SPZLINE_LINES)
    zline = fits.BinTableHDU.from_columns(
        [
            fits.Column(name="PLATE", format="J", array=np.full(nl, int(ids["plate"]))),
            fits.Column(name="MJD", format="J", array=np.full(nl, int(ids["mjd"]))),
            fits.Column(name="FIBERID", format="J", array=np.full(nl, int(ids["fiberid"]))),
            fits.Column(name="LINENAME", format="13A", array=np.array([x[0] for x in SPZLINE_LINES])),
            fits.Column(name="LINEWAVE", format="D", array=np.array([x[1] for x in SPZLINE_LINES])),
            fits.Column(name="LINEZ", format="E", array=np.full(nl, z, dtype=np.float32)),
            fits.Column(name="LINEZ_ERR", format="E", array=np.full(nl, -1.0, dtype=np.float32)),
            fits.Column(name="LINESIGMA", format="E", array=np.zeros(nl, dtype=np.float32)),
            fits.Column(name="LINEAREA", format="E", array=np.zeros(nl, dtype=np.float32)),
            fits.Column(name="LINEEW", format="E", array=np.zeros(nl, dtype=np.float32)),
            fits.Column(name="LINECONTLEVEL", format="E", array=np.zeros(nl, dtype=np.float32)),
        ],
        name="SPZLINE",
    )
    return fits.HDUList([primary, coadd, specobj, zline])


SDSSV_RUN2D = "v6_1_3"
#: spSpec SPEC_CLN codes of the DR8+ classes (classic.sdss.org/dr7/dm/flatFiles/spSpec.html)
SPEC_CLN_CODES = {"UNKNOWN": 0, "STAR": 1, "GALAXY": 2, "QSO": 3}


def _write_spspec(spectrum: Spectrum) -> fits.HDUList:
    """DR1-DR7 spSpec: rows flux, continuum-subtracted flux, sigma, mask; wavelength only from COEFF0/COEFF1."""
    if not _is_log_grid(spectrum.wavelength, SDSS_DLOGLAM):
        spectrum = resample(spectrum, sdss_grid("legacy"))
    m = spectrum.meta
    ids = _sdss_ids(spectrum, _run2d_code("26"))
    ra, dec = _radec(spectrum)
    good = spectrum.good
    cont = _smooth_continuum(spectrum.flux, good)
    sigma = np.where(spectrum.ivar > 0, 1.0 / np.sqrt(np.where(spectrum.ivar > 0, spectrum.ivar, 1.0)), 0.0)
    mask = np.where(spectrum.mask, 1 << 24, 0)  # NODATA, a pixel-level SPPIXMASK bit
    data = np.vstack([spectrum.flux, spectrum.flux - cont, sigma, mask]).astype(np.float32)
    hdu = fits.PrimaryHDU(data=data)
    h = hdu.header
    coeff0 = float(np.log10(spectrum.wavelength[0]))
    h["TELESCOP"] = ("SDSS 2.5-M", "Sloan Digital Sky Survey")
    h["NAME"] = (f"{int(ids['plate']):04d}-{int(ids['mjd'])}-{int(ids['fiberid']):03d}", "plate-mjd-fiber")
    h["PLATEID"] = (int(ids["plate"]), "Plate Id")
    h["MJD"] = (int(ids["mjd"]), "MJD of observation")
    h["FIBERID"] = (int(ids["fiberid"]), "Fiber number (1-640)")
    h["RAOBJ"] = (ra, "RA (deg) of object")
    h["DECOBJ"] = (dec, "DEC (deg) of object")
    h["VERSION"] = ("v5_4", "spectro1d version")
    h["COEFF0"] = (coeff0, "Center wavelength (log10) of first pixel")
    h["COEFF1"] = (SDSS_DLOGLAM, "Log10 dispersion per pixel")
    # the WCS keys repeat the log10 grid under CTYPE1 'LINEAR' (DC-FLAG = 1 means log-linear), as in the data model
    h["CRVAL1"] = (coeff0, "Center wavelength (log10) of first pixel")
    h["CD1_1"] = (SDSS_DLOGLAM, "Log10 dispersion per pixel")
    h["CRPIX1"] = (1, "Starting pixel (1-indexed)")
    h["CTYPE1"] = ("LINEAR", "")
    h["DC-FLAG"] = (1, "Log-linear flag")
    h["BUNIT"] = ("1E-17 erg/cm/s/Ang", "units")  # the 'mutilated' unit string of the real files
    cls = (m.pipeline_class or "UNKNOWN").upper()
    h["SPEC_CLN"] = (SPEC_CLN_CODES.get(cls, 0), "Spectral classification")
    h["Z"] = (float(m.redshift if m.redshift is not None else 0.0), "Redshift")
    h["Z_ERR"] = (float(m.redshift_err if m.redshift_err is not None else 0.0), "Redshift error")
    h["Z_CONF"] = (0.99, "Redshift confidence")
    h["Z_STATUS"] = (4, "Redshift status")
    h["Z_WARNIN"] = (0 if m.redshift is not None else 4, "Redshift warning flags")
    return fits.HDUList([hdu])


def _sdssv_ids(spectrum: Spectrum) -> dict:
    ids = dict(spectrum.meta.ids) if spectrum.meta.survey == "sdss" and "catalogid" in spectrum.meta.ids else {}
    k = _key(spectrum)
    ids.setdefault("field", 100_000 + k % 20_000)
    ids.setdefault("mjd", 59_000 + (k >> 4) % 2000)
    ids.setdefault("catalogid", 27_021_597_000_000_000 + k % 1_000_000_000)
    ids.setdefault("fiberid", 1 + (k >> 12) % 500)
    return ids


def _write_sdssv(spectrum: Spectrum, path: Path) -> fits.HDUList:
    """The BOSS spec-lite layout with SDSS-V identifiers: FIELD/CATALOGID instead of PLATEID/SPECOBJID."""
    hdul = _write_sdss_lite(spectrum, path, "boss")
    ids = _sdssv_ids(spectrum)
    h = hdul[0].header
    for key in ("PLATEID", "SPEC_ID"):
        del h[key]
    h["MJD"] = int(ids["mjd"])
    h["FIBERID"] = int(ids["fiberid"])
    h.set("FIELD", int(ids["field"]), "Field ID", after="MJD")  # CATALOGID (9 letters) lives in SPALL only
    h.set("OBSERV", "APO", "Observatory", after="TELESCOP")
    h["RUN2D"] = SDSSV_RUN2D
    h["VERS2D"] = SDSSV_RUN2D
    replaced = {"PLATE", "SPECOBJID", "FIELD", "MJD", "FIBERID", "RUN2D", "PROGRAMNAME"}
    ident = [
        fits.Column(name="FIELD", format="J", array=np.array([ids["field"]], dtype=np.int32)),
        fits.Column(name="MJD", format="J", array=np.array([ids["mjd"]], dtype=np.int32)),
        fits.Column(name="CATALOGID", format="K", array=np.array([ids["catalogid"]], dtype=np.int64)),
        fits.Column(name="FIBERID", format="J", array=np.array([ids["fiberid"]], dtype=np.int32)),
        fits.Column(name="RUN2D", format="7A", array=np.array([SDSSV_RUN2D])),
        fits.Column(name="PROGRAMNAME", format="27A", array=np.array(["bhm_aqmes"])),
    ]
    spall = hdul["SPALL"]
    hdul["SPALL"] = fits.BinTableHDU.from_columns(
        ident + [c for c in spall.columns if c.name not in replaced], name="SPALL"
    )
    zline = hdul["SPZLINE"]
    nl = len(zline.data)
    hdul["SPZLINE"] = fits.BinTableHDU.from_columns(
        [fits.Column(name="FIELD", format="J", array=np.full(nl, ids["field"], dtype=np.int32)),
         fits.Column(name="MJD", format="J", array=np.full(nl, ids["mjd"], dtype=np.int32)),
         fits.Column(name="FIBERID", format="J", array=np.full(nl, ids["fiberid"], dtype=np.int32))]
        + [c for c in zline.columns if c.name not in ("PLATE", "MJD", "FIBERID")],
        name="SPZLINE",
    )  # fmt: skip
    return hdul


# ---------------------------------------------------------------------------------------------------------------
# DESI


def _resolution_diagonals(nwave: int, sigma_pix: float = 1.0) -> np.ndarray:
    """Resolution-matrix diagonals (ndiag, nwave) of a Gaussian line-spread function, rows summing to 1."""
    offsets = DESI_NDIAG // 2 - np.arange(DESI_NDIAG)
    kernel = np.exp(-0.5 * (offsets / sigma_pix) ** 2)
    kernel /= kernel.sum()
    return np.repeat(kernel[:, None], nwave, axis=1).astype(np.float32)


def _desi_overlap_weights(full: np.ndarray) -> dict[str, np.ndarray]:
    """Share of the inverse variance each arm gets on the full grid: 1 outside overlaps, a linear taper inside."""
    slices = _desi_arm_slices()
    cover = {arm: np.zeros(full.size) for arm in DESI_ARMS}
    for arm, sl in slices.items():
        cover[arm][sl] = 1.0
    weights = {arm: cover[arm].copy() for arm in DESI_ARMS}
    for blue, red in (("B", "R"), ("R", "Z")):
        both = (cover[blue] > 0) & (cover[red] > 0)
        idx = np.flatnonzero(both)
        t = np.linspace(0.9, 0.1, idx.size)  # the blue arm's share falls across the overlap
        weights[blue][idx] = t
        weights[red][idx] = 1.0 - t
    return weights


def _on_desi_grid(spectrum: Spectrum) -> Spectrum:
    full = desi_full_grid()
    w = spectrum.wavelength
    if w.size == full.size and np.allclose(w, full, rtol=0, atol=1e-6):
        return spectrum
    return resample(spectrum, full)


def _fibermap_columns(rows: list[dict], tiles: bool) -> list[fits.Column]:
    def col(name, fmt, key, dtype=None):
        values = [r[key] for r in rows]
        return fits.Column(name=name, format=fmt, array=np.array(values, dtype=dtype))

    cols = [
        col("TARGETID", "K", "targetid", np.int64),
    ]
    if tiles:
        cols += [
            col("PETAL_LOC", "I", "petal", np.int16),
            col("DEVICE_LOC", "J", "device", np.int32),
            col("LOCATION", "K", "location", np.int64),
            col("FIBER", "J", "fiber", np.int32),
        ]
    cols += [
        col("COADD_FIBERSTATUS", "J", "status", np.int32),
        col("TARGET_RA", "D", "ra", np.float64),
        col("TARGET_DEC", "D", "dec", np.float64),
        col("PMRA", "E", "zero", np.float32),
        col("PMDEC", "E", "zero", np.float32),
        col("REF_EPOCH", "E", "epoch", np.float32),
        col("FA_TARGET", "K", "desi_target", np.int64),
        col("FA_TYPE", "B", "fa_type", np.uint8),
        col("OBJTYPE", "3A", "objtype"),
        col("SUBPRIORITY", "D", "subpriority", np.float64),
        col("OBSCONDITIONS", "J", "obscond", np.int32),
        col("RELEASE", "I", "release", np.int16),
        col("BRICKNAME", "8A", "brickname"),
        col("BRICKID", "J", "brickid", np.int32),
        col("BRICK_OBJID", "J", "brick_objid", np.int32),
        col("MORPHTYPE", "4A", "morph"),
        col("EBV", "E", "ebv", np.float32),
    ]
    for band in ("G", "R", "Z", "W1", "W2"):
        cols.append(col(f"FLUX_{band}", "E", f"flux_{band}", np.float32))
    for band in ("G", "R", "Z", "W1", "W2"):
        cols.append(col(f"FLUX_IVAR_{band}", "E", "flux_ivar", np.float32))
    cols += [
        col("MASKBITS", "I", "zero_i", np.int16),
        col("PHOTSYS", "1A", "photsys"),
        col("SV3_DESI_TARGET", "K", "desi_target", np.int64),
        col("SV3_BGS_TARGET", "K", "zero_k", np.int64),
        col("SV3_MWS_TARGET", "K", "zero_k", np.int64),
        col("SV3_SCND_TARGET", "K", "zero_k", np.int64),
        col("DESI_TARGET", "K", "zero_k", np.int64),
        col("BGS_TARGET", "K", "zero_k", np.int64),
        col("MWS_TARGET", "K", "zero_k", np.int64),
        col("PLATE_RA", "D", "ra", np.float64),
        col("PLATE_DEC", "D", "dec", np.float64),
    ]
    if tiles:
        cols.append(col("TILEID", "J", "tileid", np.int32))
    cols += [
        col("COADD_NUMEXP", "I", "numexp", np.int16),
        col("COADD_EXPTIME", "E", "exptime", np.float32),
        col("COADD_NUMNIGHT", "I", "numnight", np.int16),
        col("COADD_NUMTILE", "I", "numtile", np.int16),
        col("MEAN_FIBER_RA", "D", "ra", np.float64),
        col("MEAN_FIBER_DEC", "D", "dec", np.float64),
    ]
    return cols


def _fibermap_row(targetid: int, ra: float, dec: float, objtype: str, status: int, i: int, tileid: int) -> dict:
    science = objtype == "TGT"
    return {
        "targetid": targetid,
        "petal": 4,
        "device": 100 + i,
        "location": 4000 + 100 + i,
        "fiber": 2000 + i,
        "status": status,
        "ra": ra,
        "dec": dec,
        "zero": 0.0,
        "epoch": 2015.5 if science else 0.0,
        "desi_target": (1 << 2) if science else (1 << 32 if objtype == "SKY" else 0),
        "fa_type": 1 if science else (4 if objtype == "SKY" else 0),
        "objtype": objtype,
        "subpriority": 0.5,
        "obscond": 1,
        "release": 9010 if science else 0,
        "brickname": "0000p000" if science else "",
        "brickid": 300000 + i,
        "brick_objid": 10 + i,
        "morph": "PSF" if science else "",
        "ebv": 0.03,
        **{f"flux_{b}": (10.0 if science else 0.0) for b in ("G", "R", "Z", "W1", "W2")},
        "flux_ivar": 100.0 if science else 0.0,
        "zero_i": 0,
        "photsys": "S" if science else "",
        "zero_k": 0,
        "tileid": tileid,
        "numexp": 3 if status == 0 else 0,
        "exptime": 2700.0 if status == 0 else 0.0,
        "numnight": 1 if status == 0 else 0,
        "numtile": 1 if status == 0 else 0,
    }


def write_desi_coadd(
    spectra: Sequence[Spectrum],
    path: str | Path,
    *,
    targetids: Sequence[int] | None = None,
    n_sky: int = 1,
    n_stuck: int = 1,
    survey: str = "sv3",
    program: str = "dark",
    healpix: int | None = 26065,
    tileid: int | None = None,
    seed: int = 0,
    redrock_path: str | Path | None = None,
) -> list[int]:
    """Write ``spectra`` as science targets of one DESI coadd file; returns their TARGETIDs (in order).

    A healpix coadd by default (``SPGRP = 'healpix'``, ``SURVEY``/``PROGRAM`` in the primary header); pass
    ``tileid`` (and ``healpix=None``) for a tile-cumulative coadd. ``n_stuck`` unassigned fibres (negative TARGETID,
    blank OBJTYPE, ``COADD_FIBERSTATUS`` 1, no data) come first and ``n_sky`` sky fibres (OBJTYPE ``SKY``, noise
    around zero) after the first science target, as in the real EDR coadd. With ``redrock_path`` the matching
    redrock file is written too.
    """
    path = Path(path)
    if not spectra:
        raise ValueError("write_desi_coadd needs at least one spectrum")
    spectra = [_on_desi_grid(s) for s in spectra]
    if targetids is None:
        targetids = []
        for s in spectra:
            tid = _desi_targetid(s)
            while tid in targetids:
                tid += 1
            targetids.append(tid)
    targetids = [int(t) for t in targetids]
    if len(targetids) != len(spectra) or len(set(targetids)) != len(targetids):
        raise ValueError("targetids must be unique, one per spectrum")
    rng = np.random.default_rng([seed, len(spectra), 7])
    full = desi_full_grid()
    tile = int(tileid) if tileid is not None else 0

    # rows: (kind, spectrum or None, targetid, objtype, status)
    rows: list[tuple] = [("stuck", None, -2713437 - i, "", 1) for i in range(n_stuck)]
    science = [("science", s, t, "TGT", 0) for s, t in zip(spectra, targetids, strict=True)]
    sky = [("sky", None, 616088619186127404 + i, "SKY", 0) for i in range(n_sky)]
    rows += science[:1] + sky + science[1:]
    nspec = len(rows)

    flux = np.zeros((nspec, full.size))
    ivar = np.zeros((nspec, full.size))
    mask = np.zeros((nspec, full.size), dtype=np.uint32)
    fm_rows = []
    for i, (kind, s, tid, objtype, status) in enumerate(rows):
        if kind == "science":
            flux[i], ivar[i] = s.flux, s.ivar
            mask[i] = np.where(s.mask, 1 << 1, 0)  # ALLBADPIX
            ra, dec = _radec(s)
        elif kind == "sky":
            sigma = 0.5
            flux[i] = rng.normal(0, sigma, full.size)
            ivar[i] = 1 / sigma**2
            ra, dec = 150.0 + 0.01 * i, 2.0
        else:  # stuck / unassigned: no data at all
            mask[i] = 1 << 1
            ra, dec = 0.0, 0.0
        fm_rows.append(_fibermap_row(tid, ra, dec, objtype, status, i, tile))

    primary = fits.PrimaryHDU()
    if healpix is not None:
        primary.header["SPGRP"] = "healpix"
        primary.header["SPGRPVAL"] = int(healpix)
        primary.header["HPXPIXEL"] = int(healpix)
        primary.header["HPXNSIDE"] = 64
        primary.header["HPXNEST"] = "True"
        primary.header["SURVEY"] = survey
        primary.header["PROGRAM"] = program
    else:
        primary.header["SPGRP"] = "cumulative"
        primary.header["SPGRPVAL"] = 20210324
        primary.header["TILEID"] = tile
        primary.header["SPECTRO"] = 4
        primary.header["PETAL"] = 4
        primary.header["NIGHT"] = 20210324
    primary.header["DEPNAM00"] = "spec_vetting"
    primary.header["DEPVER00"] = "synthetic"
    hdus: list[fits.hdu.base.ExtensionHDU | fits.PrimaryHDU] = [primary]
    hdus.append(fits.BinTableHDU.from_columns(_fibermap_columns(fm_rows, tiles=healpix is None), name="FIBERMAP"))
    science_idx = [i for i, r in enumerate(rows) if r[0] == "science"]
    exp = fits.BinTableHDU.from_columns(
        [
            fits.Column(name="TARGETID", format="K", array=np.repeat([r[2] for r in rows], 3).astype(np.int64)),
            fits.Column(name="NIGHT", format="J", array=np.full(3 * nspec, 20210324, dtype=np.int32)),
            fits.Column(name="EXPID", format="J", array=np.tile([68657, 68658, 68659], nspec).astype(np.int32)),
            fits.Column(name="MJD", format="D", array=np.full(3 * nspec, 59297.2)),
            fits.Column(name="TILEID", format="J", array=np.full(3 * nspec, tile, dtype=np.int32)),
            fits.Column(name="EXPTIME", format="D", array=np.full(3 * nspec, 900.0)),
            fits.Column(name="FIBER", format="J", array=np.repeat(2000 + np.arange(nspec), 3).astype(np.int32)),
            fits.Column(name="FIBERSTATUS", format="J", array=np.repeat([r[4] for r in rows], 3).astype(np.int32)),
        ],
        name="EXP_FIBERMAP",
    )
    hdus.append(exp)

    weights = _desi_overlap_weights(full)
    slices = _desi_arm_slices()
    for arm, sl in slices.items():
        wave = fits.ImageHDU(full[sl].copy(), name=f"{arm}_WAVELENGTH")
        wave.header["BUNIT"] = "Angstrom"
        f = fits.ImageHDU(flux[:, sl].astype(np.float32), name=f"{arm}_FLUX")
        f.header["BUNIT"] = DESI_FLUX_BUNIT
        iv = fits.ImageHDU((ivar[:, sl] * weights[arm][sl]).astype(np.float32), name=f"{arm}_IVAR")
        iv.header["BUNIT"] = DESI_IVAR_BUNIT
        mk = fits.ImageHDU(mask[:, sl].copy(), name=f"{arm}_MASK", uint=True)
        nw = sl.stop - sl.start
        res = fits.ImageHDU(
            np.repeat(_resolution_diagonals(nw)[None, :, :], nspec, axis=0), name=f"{arm}_RESOLUTION"
        )
        hdus += [wave, f, iv, mk, res]

    score_cols = [fits.Column(name="TARGETID", format="K", array=np.array([r[2] for r in rows], dtype=np.int64))]
    for arm, sl in slices.items():
        med_flux = np.median(flux[:, sl], axis=1).astype(np.float32)
        snr = np.array(
            [np.median(flux[i, sl] * np.sqrt(ivar[i, sl])) if ivar[i, sl].any() else 0.0 for i in range(nspec)],
            dtype=np.float32,
        )
        score_cols += [
            fits.Column(name=f"INTEG_COADD_FLUX_{arm}", format="E", array=(med_flux * (sl.stop - sl.start))),
            fits.Column(name=f"MEDIAN_COADD_FLUX_{arm}", format="E", array=med_flux),
            fits.Column(name=f"MEDIAN_COADD_SNR_{arm}", format="E", array=snr),
        ]
    hdus.append(fits.BinTableHDU.from_columns(score_cols, name="SCORES"))
    _save(fits.HDUList(hdus), path)

    if redrock_path is not None:
        write_redrock(
            [rows[i][1] for i in science_idx],
            redrock_path,
            [rows[i][2] for i in science_idx],
            sky_targetids=[r[2] for r in rows if r[0] == "sky"],
            healpix=healpix,
            survey=survey,
            program=program,
        )
    return targetids


_REDROCK_TEMPLATES = ("GALAXY", "QSO:::HIZ", "QSO:::LOZ", "STAR:::A", "STAR:::B", "STAR:::CV", "STAR:::F",
                      "STAR:::G", "STAR:::K", "STAR:::M", "STAR:::WD")  # fmt: skip


def _redrock_type(meta: SpectrumMeta) -> tuple[str, str]:
    cls = (meta.pipeline_class or "STAR").upper()
    sub = (meta.pipeline_subclass or "").strip()
    if cls in ("GALAXY", "QSO"):
        return cls, ""
    if sub.upper() in ("CV", "WD"):
        return "STAR", sub.upper()
    letter = sub.lstrip("dg")[:1].upper()
    return "STAR", letter if letter in "ABFGKM" and letter else "M"


def write_redrock(
    spectra: Sequence[Spectrum],
    path: str | Path,
    targetids: Sequence[int],
    *,
    sky_targetids: Sequence[int] = (),
    healpix: int | None = 26065,
    survey: str = "sv3",
    program: str = "dark",
) -> Path:
    """A ``redrock-*.fits`` for the science targets (class/subclass/redshift from each spectrum's metadata);
    sky fibres get ZWARN = 1 (SKY) as in the real redrock-test.fits."""
    path = Path(path)
    n_sci = len(spectra)
    tids = [int(t) for t in targetids] + [int(t) for t in sky_targetids]
    n = len(tids)
    types = [_redrock_type(s.meta) for s in spectra] + [("GALAXY", "")] * len(sky_targetids)
    z = [float(s.meta.redshift or 0.0) for s in spectra] + [0.0] * len(sky_targetids)
    zerr = [float(s.meta.redshift_err or 1e-5) for s in spectra] + [1e-3] * len(sky_targetids)
    zwarn = [0] * n_sci + [1] * len(sky_targetids)
    primary = fits.PrimaryHDU()
    primary.header["LONGSTRN"] = "OGIP 1.0"
    primary.header["RRVER"] = ("0.17.0", "Redrock version")
    for i, name in enumerate(_REDROCK_TEMPLATES):
        primary.header[f"TEMNAM{i:02d}"] = name
        primary.header[f"TEMVER{i:02d}"] = "unknown" if name.startswith("STAR") else "1.0"
    if healpix is not None:
        primary.header["SPGRP"] = "healpix"
        primary.header["SPGRPVAL"] = int(healpix)
        primary.header["SURVEY"] = survey
        primary.header["PROGRAM"] = program
    redshifts = fits.BinTableHDU.from_columns(
        [
            fits.Column(name="TARGETID", format="K", array=np.array(tids, dtype=np.int64)),
            fits.Column(name="Z", format="D", array=np.array(z)),
            fits.Column(name="ZERR", format="D", array=np.array(zerr)),
            fits.Column(name="ZWARN", format="K", array=np.array(zwarn, dtype=np.int64)),
            fits.Column(name="CHI2", format="D", array=np.full(n, 8000.0)),
            fits.Column(name="COEFF", format="10D", array=np.zeros((n, 10))),
            fits.Column(name="NPIXELS", format="K", array=np.full(n, 7781, dtype=np.int64)),
            fits.Column(name="SPECTYPE", format="6A", array=np.array([t[0] for t in types])),
            fits.Column(name="SUBTYPE", format="20A", array=np.array([t[1] for t in types])),
            fits.Column(name="NCOEFF", format="K", array=np.full(n, 10, dtype=np.int64)),
            fits.Column(name="DELTACHI2", format="D", array=np.full(n, 500.0)),
        ],
        name="REDSHIFTS",
    )
    fm_rows = [
        _fibermap_row(t, *(_radec(s) if s is not None else (150.0, 2.0)), "TGT" if s is not None else "SKY", 0, i, 0)
        for i, (t, s) in enumerate(zip(tids, list(spectra) + [None] * len(sky_targetids), strict=True))
    ]
    fibermap = fits.BinTableHDU.from_columns(_fibermap_columns(fm_rows, tiles=healpix is None), name="FIBERMAP")
    _save(fits.HDUList([primary, redshifts, fibermap]), path)
    return path


# ---------------------------------------------------------------------------------------------------------------


def _save(hdul: fits.HDUList, path: Path, *, gzip_bytes: bool = False, rename: dict[bytes, bytes] | None = None):
    """Write ``hdul`` to ``path`` (gzip bytes when asked or when the name ends in .gz), renaming header keywords in
    the bytes when asked (8-character names only, so the layout does not move)."""
    buf = io.BytesIO()
    hdul.writeto(buf, output_verify="silentfix")
    data = buf.getvalue()
    for old, new in (rename or {}).items():
        assert len(old) == len(new) == 8
        header_end = data.find(b"END" + b" " * 77)
        head = data[:header_end].replace(old, new)
        data = head + data[header_end:]
    path.parent.mkdir(parents=True, exist_ok=True)
    if gzip_bytes or path.name.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    shutil.move(tmp, path)


def write_spectrum(spectrum: Spectrum, path: str | Path, layout: str, **options) -> Path:
    """Write one spectrum in ``layout`` (see :data:`LAYOUTS`) and return the path.

    Options: ``gzip=True`` writes gzip bytes whatever the name (LAMOST downloads do this; a ``.gz`` name always
    compresses); ``flavour="legacy"|"boss"`` for ``sdss-spec-lite``; for ``desi-coadd`` every keyword of
    :func:`write_desi_coadd` (the file then also holds a stuck and a sky fibre; ``redrock_path`` writes the
    redrock file beside it).
    """
    _check_layout(layout)
    path = Path(path)
    gzip_bytes = bool(options.pop("gzip", False))
    if layout == "desi-coadd":
        write_desi_coadd([spectrum], path, **options)
        return path
    rename = None
    if layout == "sdss-spec-lite":
        flavour = options.pop("flavour", "legacy")
        hdul = _write_sdss_lite(spectrum, path, flavour)
    elif layout == "sdss-spspec":
        hdul = _write_spspec(spectrum)
    elif layout == "sdssv-spec":
        hdul = _write_sdssv(spectrum, path)
    elif layout == "lamost-coadd-table":
        hdul = _write_lamost_table(spectrum, path)
        rename = {b"XNAXIS1 ": b"NAXIS1  ", b"XNAXIS2 ": b"NAXIS2  "}
    else:
        hdul = _write_lamost_image(spectrum, path, "dr1" if layout == "lamost-dr1-image" else "dr7")
    if options:
        raise TypeError(f"unknown option(s) for layout {layout}: {', '.join(sorted(options))}")
    _save(hdul, path, gzip_bytes=gzip_bytes, rename=rename)
    return path
