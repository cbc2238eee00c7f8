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
) -> Spectrum:
    """Check the arrays a reader decoded and build the Spectrum.

    The mask is the survey's bad-pixel flag OR "no data" (ivar <= 0, non-finite flux or ivar), so that ``mask``
    alone tells a plotting or fitting tool which pixels to ignore. Raises SpectrumReadError when the wavelength grid
    is broken, no flux value is finite, or no pixel is usable.
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
    if not np.all(np.isfinite(wavelength)) or not np.all(np.diff(wavelength) > 0):
        raise SpectrumReadError(path, "wavelength grid is not finite and strictly increasing", target=target)
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
