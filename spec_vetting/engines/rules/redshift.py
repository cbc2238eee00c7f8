"""Signs that a spectrum of unknown redshift is not a star at rest: emission lines where no star has one.

When the survey gives no redshift (a DESI target without its redrock file, a SpecVI-Bench row with a null
redshift), the rules engine reads the spectrum as if at rest, which is right for a star (|z| < 0.002) and wrong for
a galaxy or QSO: a QSO's Lyα forest can pass for C2 bands, its broad Mg II line for a white dwarf's Balmer
profile. A careful astronomer who sees a strong emission line at a wavelength where no star or nebula emits at
rest does not guess; nor does the engine. This module finds such lines.

How: on the observed-frame spectrum, at every centre on a grid, the mean flux in a core window is compared with the
brighter of two side windows (taking the brighter side means a molecular band head's step, or the flux peak between
two bands, is not read as a line). A line counts when it stands above both sides by a clear fraction and many sigma,
at a scale for narrow (galaxy) lines and one for broad (QSO) lines, and lies away from every line a Galactic star,
a CV or a nebula shows at rest and from the strong night-sky lines.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .diagnostics import MIN_COVERAGE, Measurement, RestSpectrum

#: vacuum Å of emission lines that stars (chromospheres, CVs, symbiotics, Be stars), planetary nebulae and H II
#: regions show at rest, and the strongest night-sky lines; emission near one of these is no sign of a redshift
REST_EMISSION_LINES = (
    # hydrogen: Balmer series to H10, Paschen lines in the far red are beyond the search range
    6564.61, 4862.68, 4341.68, 4102.89, 3971.20, 3890.16, 3836.47, 3798.98,
    # He I, He II, Bowen blend C III/N III, Fe II (42) as in CVs and symbiotic stars
    3889.7, 4027.3, 4472.7, 4923.3, 5017.1, 5877.3, 6679.99, 7067.1, 4687.02, 5413.0, 4641.0, 4650.0, 5170.5,
    # Ca II H and K, O I, the Ca II triplet
    3934.78, 3969.59, 7774.0, 8448.7, 8500.4, 8544.4,
    # forbidden nebular lines
    3727.1, 3729.9, 3869.9, 4364.4, 4960.3, 5008.2, 6549.9, 6585.3, 6718.3, 6732.7, 6302.0, 6365.5, 7137.8,
    # night sky: [O I] 5577, Na D and Hg I (street lights), residuals where subtraction is often poor
    5578.9, 5891.6, 5897.6, 4359.6, 5462.3,
)

#: narrow lines (galaxies', narrow-line QSOs'; a few Å at survey resolution): core half width, inner and outer offsets
#: of the two side windows (Å), minimum contrast over the brighter side, tolerance around a rest line (Å)
NARROW = (6.0, 20.0, 45.0, 0.35, 15.0)
#: broad lines (QSOs, thousands of km/s): the core (half width, Å) is compared with the upper envelope (the
#: ENVELOPE_PERCENTILE of 10 Å bin means) of the continuum from ``inner`` to ``outer`` Å on both sides, so the
#: continuum left between two broad absorption lines (a white dwarf's Hγ and Hδ) or two molecular bands (an M star)
#: is not read as a line: it is that envelope
BROAD = (30.0, 80.0, 400.0, 0.30, 40.0)
ENVELOPE_PERCENTILE = 80.0
BIN = 10.0
#: significance of the core above the side or envelope, in sigma
MIN_SIGMA = 10.0
#: observed range searched: the far red is a forest of sky residuals and Paschen lines; the far blue is noisy
SEARCH_RANGE = (3750.0, 8300.0)
#: spacing of the trial centres of narrow lines (Å)
STEP = 4.0
@dataclass(frozen=True)
class UnexplainedEmission:
    """The strongest emission line that no star at rest explains."""

    wavelength: float  # observed-frame centre, Å
    contrast: float  # core flux over the brighter side, minus 1
    sigma: float  # significance of the excess
    half_width: float  # half width of the core window at which it was found, Å

    def describe(self) -> str:
        return (f"an emission line at {self.wavelength:.0f} Å ({100 * self.contrast:.0f}% above the surrounding "
                f"continuum, {self.sigma:.0f} sigma) matches none of the lines a star or nebula shows at rest")

    def measurement(self) -> Measurement:
        """As a measurement the engine cites and zooms on."""
        return Measurement("centre of the unexplained emission line", self.wavelength, None, "Å",
                           windows=((self.wavelength - self.half_width, self.wavelength + self.half_width),))


def _window_means(rs: RestSpectrum, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean flux of the good pixels in each [lo, hi], its error, and whether enough of the window is good."""
    cf, cn, cv = rs.cumulative()
    i0 = np.searchsorted(rs.wavelength, lo, side="left")
    i1 = np.searchsorted(rs.wavelength, hi, side="left")
    n_all = i1 - i0
    n = cn[i1] - cn[i0]
    ok = (n >= 2) & (n >= MIN_COVERAGE * np.maximum(n_all, 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(ok, (cf[i1] - cf[i0]) / np.maximum(n, 1), np.nan)
        err = np.where(ok, np.sqrt(np.maximum(cv[i1] - cv[i0], 0.0)) / np.maximum(n, 1), np.nan)
    return mean, err, ok


def _local_peaks(values: np.ndarray, half_span: int) -> np.ndarray:
    """Where ``values`` is the largest within ``half_span`` grid steps on either side: a line is judged at its
    centre only (the wing of a broad Hα seen from 40 Å away is still Hα)."""
    padded = np.pad(np.nan_to_num(values, nan=-np.inf), half_span, constant_values=-np.inf)
    return values >= np.lib.stride_tricks.sliding_window_view(padded, 2 * half_span + 1).max(axis=1)


def _far_from_rest_lines(centres: np.ndarray, tolerance: float) -> np.ndarray:
    return np.abs(centres[:, None] - np.asarray(REST_EMISSION_LINES)[None, :]).min(axis=1) > tolerance


def _narrow(rs: RestSpectrum, lo: float, hi: float) -> UnexplainedEmission | None:
    half, inner, outer, min_contrast, tolerance = NARROW
    centres = np.arange(lo + outer, hi - outer, STEP)
    if centres.size == 0:
        return None
    core, e_core, ok_c = _window_means(rs, centres - half, centres + half)
    left, e_left, ok_l = _window_means(rs, centres - outer, centres - inner)
    right, e_right, ok_r = _window_means(rs, centres + inner, centres + outer)
    # the brighter side: a band head's step or the flux peak between two bands then reads as no line
    side = np.where(left >= right, left, right)
    e_side = np.where(left >= right, e_left, e_right)
    with np.errstate(divide="ignore", invalid="ignore"):
        contrast = core / side - 1.0
        sigma = (core - side) / np.hypot(e_core, e_side)
    hit = (ok_c & ok_l & ok_r & (side > 0) & (contrast > min_contrast) & (sigma > MIN_SIGMA)
           & _local_peaks(contrast, int(np.ceil(half / STEP))) & _far_from_rest_lines(centres, tolerance))
    return _strongest(centres, contrast, sigma, hit, half)


def _broad(rs: RestSpectrum, lo: float, hi: float) -> UnexplainedEmission | None:
    half, inner, outer, min_contrast, tolerance = BROAD
    edges = np.arange(lo, hi, BIN)
    if edges.size < 2 * outer / BIN + 3:
        return None
    bins, _, ok_b = _window_means(rs, edges[:-1], edges[1:])
    n_out, n_in = int(outer / BIN), int(inner / BIN)
    # the bins from inner to outer Å on both sides of each candidate bin; a bad bin counts as +inf, so a ring with
    # many bad bins has an infinite envelope and finds nothing (no guess on poor data)
    views = np.lib.stride_tricks.sliding_window_view(np.where(ok_b, bins, np.inf), 2 * n_out + 1)
    ring = np.concatenate([views[:, :n_out - n_in + 1], views[:, n_out + n_in:]], axis=1)
    centres = 0.5 * (edges[n_out:-n_out - 1] + edges[n_out + 1:-n_out])
    with np.errstate(invalid="ignore"):
        envelope = np.percentile(ring, ENVELOPE_PERCENTILE, axis=1)
    core, e_core, ok_c = _window_means(rs, centres - half, centres + half)
    with np.errstate(divide="ignore", invalid="ignore"):
        contrast = core / envelope - 1.0
        sigma = (core - envelope) / e_core
    hit = (ok_c & np.isfinite(envelope) & (envelope > 0) & (contrast > min_contrast) & (sigma > MIN_SIGMA)
           & _local_peaks(contrast, int(np.ceil(half / BIN))) & _far_from_rest_lines(centres, tolerance))
    return _strongest(centres, contrast, sigma, hit, half)


def _strongest(centres, contrast, sigma, hit, half) -> UnexplainedEmission | None:
    if not hit.any():
        return None
    k = int(np.flatnonzero(hit)[np.argmax(sigma[hit])])
    return UnexplainedEmission(float(centres[k]), float(contrast[k]), float(sigma[k]), half)


def unexplained_emission(rs: RestSpectrum) -> UnexplainedEmission | None:
    """The most significant emission line not explained at rest (``rs`` taken at z = 0), or None.

    Only meaningful when the redshift is unknown: with a known redshift the engine uses it.
    """
    lo, hi = max(SEARCH_RANGE[0], rs.coverage[0]), min(SEARCH_RANGE[1], rs.coverage[1])
    if hi - lo < 100:
        return None
    found = [f for f in (_narrow(rs, lo, hi), _broad(rs, lo, hi)) if f is not None]
    return max(found, key=lambda f: f.sigma) if found else None
