"""Shared by the survey readers: coerce drifting header values, and turn raw arrays into a checked Spectrum.

Header values drift between releases (LAMOST writes FIBERID as the string '27' in one pipeline version; SDSS legacy
writes SPECOBJID as a padded string), so every identifier goes through :func:`as_int` / :func:`as_str`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import SpectrumReadError
from ..spectrum import Spectrum, SpectrumMeta


def as_str(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    text = str(value).strip()
    return text or None


def as_int(value: Any) -> int | None:
    """An integer from an int, a float that is whole, or a numeric string; None for blanks and junk."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return int(value) if np.isfinite(value) and float(value).is_integer() else None
    text = as_str(value)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        try:
            f = float(text)
        except ValueError:
            return None
        return int(f) if np.isfinite(f) and f.is_integer() else None


def as_float(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        f = float(as_str(value) if isinstance(value, (str, bytes)) else value)
    except (TypeError, ValueError):
        return None
    return f if np.isfinite(f) else None


def first(header: Mapping[str, Any], *keys: str) -> Any:
    """The value of the first key present (and not blank): handles keys renamed between data releases."""
    for key in keys:
        value = header.get(key)
        if value is not None and not (isinstance(value, str) and not value.strip()):
            return value
    return None


def log_linear_grid(path: str, header: Mapping[str, Any], n: int, layout: str) -> np.ndarray:
    """lambda_i = 10**(COEFF0 + COEFF1*i), i = 0..n-1: the log-linear grid LAMOST DR1 and SDSS spSpec images describe
    in their primary header (their WCS keys say LINEAR while holding log10 lambda, so the WCS is never used)."""
    c0, c1 = as_float(header.get("COEFF0")), as_float(header.get("COEFF1"))
    if c0 is None or c1 is None:
        missing = " and ".join(k for k, v in (("COEFF0", c0), ("COEFF1", c1)) if v is None)
        raise SpectrumReadError(
            path, f"{layout} without a usable {missing} header keyword: cannot build the wavelengths",
            hint="the file's header is damaged; download it again",
        )
    return 10.0 ** (c0 + c1 * np.arange(n, dtype=np.float64))


#: survey values that mean "no redshift" (LAMOST writes -9999 when its pipeline failed; -1 is used the same way)
REDSHIFT_SENTINELS = frozenset({-9999.0, -999.0, -99.0, -1.0})
#: above this a redshift is not one of an optical survey spectrum (the highest quasars are at z ~ 7.6)
MAX_REDSHIFT = 20.0
#: fewer pixels than this is not a survey spectrum (LAMOST ~3900, SDSS ~3800-4600, DESI ~7800)
MIN_PIXELS = 100
#: a vacuum wavelength in Å outside this range is not an optical/near-infrared spectrum (a log10 grid read as Å,
#: nm, a broken header ...)
WAVELENGTH_RANGE_A = (1000.0, 100000.0)


def check_redshift(meta: SpectrumMeta, key: str = "Z", target: Any = None) -> None:
    """A survey's "no redshift" sentinel becomes unknown (None) with a warning; an impossible value is an error.

    Impossible: 1 + z <= 0 (the rest frame would be at negative wavelengths) or z above :data:`MAX_REDSHIFT`.
    """
    z = meta.redshift
    if z is None:
        return
    if float(z) in REDSHIFT_SENTINELS:
        meta.warnings.append(f"{key} = {z:g} is the survey's 'no redshift' value: redshift unknown (spectrum "
                             "read at rest)")
        meta.redshift = meta.redshift_err = None
        return
    if not (-1.0 < z <= MAX_REDSHIFT):
        raise SpectrumReadError(meta.path, f"{key} = {z:g} is not a physical redshift (expected -1 < z <= "
                                f"{MAX_REDSHIFT:g})", target=target,
                                hint="the survey pipeline's result is damaged; fix or blank that value")


def median_snr(flux: np.ndarray, ivar: np.ndarray, mask: np.ndarray) -> float | None:
    """Median of flux * sqrt(ivar) over good pixels: the per-pixel S/N a survey's own 'SN_MEDIAN' reports."""
    good = ~mask & (ivar > 0) & np.isfinite(flux) & np.isfinite(ivar)
    if not good.any():
        return None
    return float(np.median(flux[good] * np.sqrt(ivar[good])))


def finish_spectrum(
    *,
    wavelength: np.ndarray,
    flux: np.ndarray,
    ivar: np.ndarray,
    bad: np.ndarray,
    flux_unit: str,
    meta: SpectrumMeta,
    target: Any = None,
    wavelength_key: str = "wavelength",
    redshift_key: str = "Z",
) -> Spectrum:
    """Check the arrays a reader decoded and build the Spectrum.

    The mask is the survey's bad-pixel flag OR "no data" (ivar <= 0, non-finite flux or ivar), so that ``mask``
    alone tells a plotting or fitting tool which pixels to ignore. Raises SpectrumReadError when the wavelength grid
    is broken, no flux value is finite, or no pixel is usable, and for physically impossible input (fewer than
    :data:`MIN_PIXELS` pixels, wavelengths outside :data:`WAVELENGTH_RANGE_A`, an impossible redshift), naming
    ``wavelength_key`` / ``redshift_key``: where the reader took them from.
    """
    path = meta.path
    wavelength = np.asarray(wavelength, dtype=np.float64).ravel()
    flux = np.asarray(flux, dtype=np.float64).ravel()
    ivar = np.asarray(ivar, dtype=np.float64).ravel()
    bad = np.asarray(bad, dtype=bool).ravel()
    n = wavelength.size
    if n == 0:
        raise SpectrumReadError(path, "the spectrum has no pixels", target=target)
    for name, arr in (("flux", flux), ("ivar", ivar), ("mask", bad)):
        if arr.size != n:
            raise SpectrumReadError(
                path, f"{name} has {arr.size} pixels but the wavelength grid has {n}", target=target
            )
    if n < MIN_PIXELS:
        raise SpectrumReadError(path, f"the spectrum has only {n} pixel(s) in {wavelength_key}; a survey spectrum "
                                f"has thousands (at least {MIN_PIXELS} are needed)", target=target,
                                hint="the file is damaged or is not a spectrum")
    if not np.all(np.isfinite(wavelength)) or not np.all(np.diff(wavelength) > 0):
        raise SpectrumReadError(path, f"wavelength grid ({wavelength_key}) is not finite and strictly increasing",
                                target=target)
    lo_ok, hi_ok = WAVELENGTH_RANGE_A
    if wavelength[0] < lo_ok or wavelength[-1] > hi_ok:
        raise SpectrumReadError(
            path, f"{wavelength_key} runs {wavelength[0]:.6g}-{wavelength[-1]:.6g}, not vacuum Å of an optical "
            f"spectrum (expected within {lo_ok:g}-{hi_ok:g} Å)", target=target,
            hint="negative or tiny values: a damaged file, or a log10 grid stored as Å",
        )
    check_redshift(meta, redshift_key, target)
    finite_flux = np.isfinite(flux)
    if not finite_flux.any():
        raise SpectrumReadError(path, "no finite flux value (every pixel is NaN or infinite)", target=target)
    finite_ivar = np.isfinite(ivar)
    mask = bad | ~finite_flux | ~finite_ivar | (ivar <= 0)
    ivar = np.where(finite_ivar & (ivar > 0), ivar, 0.0)
    if mask.all():
        raise SpectrumReadError(
            path,
            "no good pixel: every pixel is masked or has zero inverse variance",
            target=target,
            hint="the survey flagged this spectrum as unusable",
        )
    if meta.snr is None:
        meta.snr = median_snr(flux, ivar, mask)
    return Spectrum(wavelength=wavelength, flux=flux, ivar=ivar, mask=mask, flux_unit=flux_unit, meta=meta)
