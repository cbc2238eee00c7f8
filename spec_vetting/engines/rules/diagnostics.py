"""Classical spectral measurements on numpy arrays, in the rest frame, honouring ivar and mask.

Pure numpy, no plotting, no survey knowledge: the rules engine (``rules.py``) asks these functions for numbers and
turns them into a verdict. Every measurement comes back as a :class:`Measurement`; one that the data cannot support
(window outside the coverage, too many masked pixels, too little signal) has ``value=None`` and says why, so the
engine can answer UNDECIDED with that reason instead of guessing.

Conventions
-----------
* Wavelengths are rest-frame vacuum Å (observed / (1 + z)).
* Equivalent width ``EW = ∫ (1 - F/C) dλ`` over the line window, in Å: **positive for absorption, negative for
  emission** (the usual stellar convention; an Hα emission line of a CV has EW ≈ -30 Å).
* Band depth ``D = 1 - F_band / F_cont``: positive when the band absorbs (0.3 = 30 % below the pseudo-continuum).
* Errors are 1-sigma from the inverse variance. Window means, EWs, band depths, line ratios and continuum slopes
  propagate the pixels' variances analytically (the pseudo-continuum's error included); line widths (FWHM) have
  no closed form, so their error is the scatter of the width over :data:`FWHM_DRAWS` redraws of the profile with
  Gaussian noise of the pixels' own sigma and the pseudo-continuum redrawn within its error, each read exactly as
  the data are (a parametric bootstrap, seeded by the line so a spectrum always gives the same number).
* A measurement that cannot be made says why, and which kind of why: the window has no usable pixels (masked,
  outside the coverage, too few) or it has pixels but no significant signal to measure (a width of a line that
  is not there). :meth:`Measurement.fmt` words the two differently.
* A "window" is a closed interval ``(lo, hi)`` in Å. Pseudo-continuum windows are means of the good pixels inside
  them, joined by a straight line (one window: a flat continuum).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

C_KM_S = 299_792.458

#: fraction of a window's pixels that must be good (unmasked, ivar > 0, finite) and inside the coverage
MIN_COVERAGE = 0.6


@dataclass(frozen=True)
class Measurement:
    """One measured number with its error, or why it could not be measured."""

    name: str
    value: float | None
    error: float | None = None
    unit: str = ""
    why: str | None = None  # set when value is None: what stopped the measurement, in words
    #: with ``value=None``: True when the pixels were usable but held no significant signal (e.g. no line to
    #: measure a width of), False when the window had no usable pixels
    no_signal: bool = False
    windows: tuple[tuple[float, float], ...] = ()  # rest-frame windows the number was read from

    @property
    def ok(self) -> bool:
        return self.value is not None

    @property
    def snr(self) -> float:
        """|value| / error (inf when the error is zero, 0 when not measurable)."""
        if self.value is None:
            return 0.0
        if not self.error:
            return float("inf")
        return abs(self.value) / self.error

    def fmt(self, digits: int = 2) -> str:
        """``name = value ± error unit``, ``name not significant (why)`` or ``name not measurable (no usable
        pixels: why)``."""
        if self.value is None:
            return f"{self.name} {self.missing()}"
        err = f" ± {self.error:.{digits}f}" if self.error is not None and np.isfinite(self.error) else ""
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.name} = {self.value:.{digits}f}{err}{unit}"


    def missing(self) -> str:
        """Why there is no value, worded by kind: ``not significant (...)`` or ``not measurable (no usable
        pixels: ...)``."""
        if self.no_signal:
            return f"not significant ({self.why})"
        return f"not measurable (no usable pixels: {self.why})"


class NotMeasurable(Exception):
    """Raised inside this module when a window cannot support a number; turned into ``Measurement(why=...)``."""


class NoSignal(NotMeasurable):
    """The window's pixels are usable but hold no significant signal to measure (``Measurement.no_signal``)."""


def _unmeasured(name: str, exc: NotMeasurable, unit: str = "", windows: tuple = ()) -> Measurement:
    return Measurement(name, None, unit=unit, why=str(exc), no_signal=isinstance(exc, NoSignal), windows=windows)


@dataclass
class RestSpectrum:
    """Rest-frame arrays of one spectrum, with only what measurements need."""

    wavelength: np.ndarray
    flux: np.ndarray
    ivar: np.ndarray
    good: np.ndarray  # not masked, ivar > 0, finite flux
    redshift: float = 0.0
    _cache: dict = field(default_factory=dict, repr=False)
    # running sums over good pixels (flux, count, variance), so a window's mean costs two look-ups
    _cum: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    def cumulative(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._cum is None:
            zero = np.zeros(1)
            with np.errstate(divide="ignore"):
                var = np.where(self.good, 1.0 / np.where(self.good, self.ivar, 1.0), 0.0)
            self._cum = (
                np.concatenate([zero, np.cumsum(np.where(self.good, self.flux, 0.0))]),
                np.concatenate([zero, np.cumsum(self.good)]),
                np.concatenate([zero, np.cumsum(var)]),
            )
        return self._cum

    @classmethod
    def from_arrays(cls, wavelength, flux, ivar=None, mask=None, redshift: float | None = 0.0) -> RestSpectrum:
        wl = np.asarray(wavelength, dtype=np.float64)
        fl = np.asarray(flux, dtype=np.float64)
        iv = np.ones_like(fl) if ivar is None else np.asarray(ivar, dtype=np.float64)
        bad = np.zeros(fl.shape, bool) if mask is None else np.asarray(mask, dtype=bool)
        z = 0.0 if redshift is None or not np.isfinite(redshift) else float(redshift)
        good = ~bad & np.isfinite(fl) & np.isfinite(iv) & (iv > 0)
        return cls(wl / (1.0 + z), fl, np.where(good, iv, 0.0), good, z)

    @classmethod
    def from_spectrum(cls, spectrum, redshift: float | None) -> RestSpectrum:
        """From a :class:`spec_vetting.spectrum.Spectrum` (observed frame) and the redshift the zoom tool uses."""
        return cls.from_arrays(spectrum.wavelength, spectrum.flux, spectrum.ivar, spectrum.mask, redshift)

    @property
    def coverage(self) -> tuple[float, float]:
        return float(self.wavelength[0]), float(self.wavelength[-1])

    def select(self, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
        """(all pixels in [lo, hi], good pixels in [lo, hi]) as index slices/masks, via binary search."""
        i0, i1 = np.searchsorted(self.wavelength, [lo, hi], side="left")
        i1 = max(i1, i0)
        return np.arange(i0, i1), self.good[i0:i1]


def _window_stats(rs: RestSpectrum, lo: float, hi: float) -> tuple[float, float, int]:
    """Mean flux of the good pixels in [lo, hi], its 1-sigma error and the number of good pixels.

    Raises NotMeasurable when the window is outside the coverage or too many of its pixels are bad.
    """
    key = (lo, hi)
    hit = rs._cache.get(key)
    if hit is not None:
        if isinstance(hit, str):
            raise NotMeasurable(hit)
        return hit
    wmin, wmax = rs.coverage
    try:
        if hi <= wmin or lo >= wmax:
            raise NotMeasurable(
                f"window {lo:.0f}-{hi:.0f} Å is outside the rest-frame coverage {wmin:.0f}-{wmax:.0f} Å"
            )
        covered = (min(hi, wmax) - max(lo, wmin)) / (hi - lo)
        i0, i1 = (int(i) for i in np.searchsorted(rs.wavelength, (lo, hi), side="left"))
        n_all = i1 - i0
        if n_all < 2:
            raise NotMeasurable(f"window {lo:.0f}-{hi:.0f} Å holds fewer than 2 pixels")
        cf, cn, cv = rs.cumulative()
        n = int(cn[i1] - cn[i0])
        frac = covered * n / n_all
        if frac < MIN_COVERAGE or n < 2:
            raise NotMeasurable(
                f"window {lo:.0f}-{hi:.0f} Å is {100 * (1 - frac):.0f}% masked or outside the coverage"
            )
        mean = float(cf[i1] - cf[i0]) / n
        err = float(np.sqrt(max(float(cv[i1] - cv[i0]), 0.0))) / n
        out = (mean, err, n)
    except NotMeasurable as exc:
        rs._cache[key] = str(exc)
        raise
    rs._cache[key] = out
    return out


def window_flux(rs: RestSpectrum, lo: float, hi: float, name: str = "flux") -> Measurement:
    """Mean flux in a window with its error."""
    try:
        mean, err, _ = _window_stats(rs, lo, hi)
    except NotMeasurable as exc:
        return _unmeasured(name, exc, windows=((lo, hi),))
    return Measurement(name, mean, err, windows=((lo, hi),))


def _continuum_at(rs: RestSpectrum, x: float, conts: tuple[tuple[float, float], ...]) -> tuple[float, float]:
    """Pseudo-continuum at ``x`` from one window (flat) or two (straight line through their centres), with error."""
    stats = [_window_stats(rs, lo, hi) for lo, hi in conts]
    if len(stats) == 1:
        return stats[0][0], stats[0][1]
    (c1, e1, _), (c2, e2, _) = stats[0], stats[-1]
    x1 = 0.5 * sum(conts[0])
    x2 = 0.5 * sum(conts[-1])
    t = (x - x1) / (x2 - x1)
    value = c1 + t * (c2 - c1)
    error = float(np.hypot((1 - t) * e1, t * e2))
    return float(value), error


def _positive_continuum(value: float, error: float, what: str) -> None:
    if not np.isfinite(value) or value <= 0 or value < 2.0 * error:
        # the pixels are there but too noisy to place the continuum: no signal rather than no data
        raise NoSignal(f"{what}: pseudo-continuum {value:.3g} ± {error:.2g} is not significantly positive")


def _relative_flux(
    rs: RestSpectrum, window: tuple[float, float], conts: tuple[tuple[float, float], ...], name: str
) -> tuple[float, float]:
    """``F_window / C`` at the window's centre and its error: what equivalent widths and band depths are made of."""
    f, ef, _ = _window_stats(rs, *window)
    c, ec = _continuum_at(rs, 0.5 * (window[0] + window[1]), conts)
    _positive_continuum(c, ec, name)
    return float(f / c), float(np.hypot(ef / c, f * ec / c**2))


def equivalent_width(
    rs: RestSpectrum, line: tuple[float, float], conts: tuple[tuple[float, float], ...], name: str = "EW"
) -> Measurement:
    """EW in Å of the line window against the pseudo-continuum: positive = absorption, negative = emission."""
    windows = (line, *conts)
    try:
        ratio, err = _relative_flux(rs, line, conts, name)
    except NotMeasurable as exc:
        return _unmeasured(name, exc, "Å", windows)
    width = line[1] - line[0]
    return Measurement(name, width * (1.0 - ratio), width * err, "Å", windows=windows)


def band_depth(
    rs: RestSpectrum, band: tuple[float, float], conts: tuple[tuple[float, float], ...], name: str = "depth"
) -> Measurement:
    """``1 - F_band / F_cont``: positive when the band absorbs."""
    windows = (band, *conts)
    try:
        ratio, err = _relative_flux(rs, band, conts, name)
    except NotMeasurable as exc:
        return _unmeasured(name, exc, windows=windows)
    return Measurement(name, 1.0 - ratio, err, windows=windows)


def _line_flux(
    rs: RestSpectrum, line: tuple[float, float], conts: tuple[tuple[float, float], ...], name: str
) -> tuple[float, float]:
    """Line flux ``∫ (F - C) dλ`` over the window (positive for emission) and its error."""
    f, ef, _ = _window_stats(rs, *line)
    c, ec = _continuum_at(rs, 0.5 * (line[0] + line[1]), conts)
    _positive_continuum(c, ec, name)
    width = line[1] - line[0]
    return width * (f - c), width * float(np.hypot(ef, ec))


def emission_line_ratio(
    rs: RestSpectrum,
    num: tuple[tuple[float, float], tuple[tuple[float, float], ...]],
    den: tuple[tuple[float, float], tuple[tuple[float, float], ...]],
    name: str = "line ratio",
    min_sigma: float = 3.0,
) -> Measurement:
    """Ratio of two emission-line fluxes, each ``(line window, continuum windows)``; e.g. the Balmer decrement
    F(Hα)/F(Hβ). Not measurable unless both lines are in emission at ``min_sigma``: a ratio of noise says nothing."""
    windows = (num[0], *num[1], den[0], *den[1])
    try:
        a, ea = _line_flux(rs, *num, name)
        b, eb = _line_flux(rs, *den, name)
        if a < min_sigma * ea or b < min_sigma * eb:
            raise NoSignal(f"{name} needs both lines in emission at {min_sigma:g} sigma "
                                f"(line fluxes {a:.3g} ± {ea:.2g} and {b:.3g} ± {eb:.2g})")
    except NotMeasurable as exc:
        return _unmeasured(name, exc, windows=windows)
    value = a / b
    return Measurement(name, float(value), float(value * np.hypot(ea / a, eb / b)), windows=windows)


def continuum_slope(
    rs: RestSpectrum, blue: tuple[float, float], red: tuple[float, float], name: str = "slope"
) -> Measurement:
    """Power-law index α of F_λ ∝ λ^α between two windows (hot blue objects: α < -2; cool stars: α > 0)."""
    windows = (blue, red)
    try:
        a, ea, _ = _window_stats(rs, *blue)
        b, eb, _ = _window_stats(rs, *red)
        if a <= 0 or b <= 0:
            raise NotMeasurable(f"{name}: non-positive mean flux in a slope window")
    except NotMeasurable as exc:
        return _unmeasured(name, exc, windows=windows)
    lever = np.log(0.5 * sum(red) / (0.5 * sum(blue)))
    alpha = float(np.log(b / a) / lever)
    err = float(np.hypot(ea / a, eb / b) / lever)
    return Measurement(name, alpha, err, windows=windows)


def snr_per_angstrom(rs: RestSpectrum, lo: float, hi: float, name: str = "S/N") -> Measurement:
    """Typical per-pixel S/N in the window (mean flux over the rms error), scaled to one Å so that surveys with
    different pixel sizes compare."""
    try:
        mean, err, n = _window_stats(rs, lo, hi)
    except NotMeasurable as exc:
        return _unmeasured(name, exc, windows=((lo, hi),))
    i0, i1 = np.searchsorted(rs.wavelength, (lo, hi), side="left")
    pix = (float(rs.wavelength[i1 - 1]) - float(rs.wavelength[i0])) / max(int(i1 - i0) - 1, 1)
    per_pixel = mean / (err * np.sqrt(n)) if err > 0 else float("inf")
    return Measurement(name, float(per_pixel / np.sqrt(pix)), None, "/Å", windows=((lo, hi),))


def _normalised_profile(
    rs: RestSpectrum, center: float, half: float, conts: tuple[tuple[float, float], ...]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(wavelength, F/C - 1, its error) of the good pixels within ``center ± half``."""
    c_lo, _ = _continuum_at(rs, center - half, conts)
    c_hi, ec = _continuum_at(rs, center + half, conts)
    _positive_continuum(min(c_lo, c_hi), ec, "profile")
    idx, good = rs.select(center - half, center + half)
    sel = idx[good]
    if sel.size < 5:
        raise NotMeasurable(f"fewer than 5 good pixels within {center:.0f} ± {half:.0f} Å")
    if sel.size < MIN_COVERAGE * idx.size:
        raise NotMeasurable(f"{center:.0f} ± {half:.0f} Å is more than {100 * (1 - MIN_COVERAGE):.0f}% masked")
    wl = rs.wavelength[sel]
    x1, x2 = 0.5 * sum(conts[0]), 0.5 * sum(conts[-1])
    c1, _ = _continuum_at(rs, x1, conts)
    c2, _ = _continuum_at(rs, x2, conts)
    cont = c1 + (wl - x1) / (x2 - x1) * (c2 - c1) if len(conts) > 1 else np.full(wl.shape, c1)
    return wl, rs.flux[sel] / cont - 1.0, 1.0 / (np.sqrt(rs.ivar[sel]) * cont)


def _smooth(y: np.ndarray, n: int) -> np.ndarray:
    """Boxcar mean over ``n`` pixels along the last axis (edges padded with the edge value); rows smoothed alike."""
    if n <= 1 or y.shape[-1] < n:
        return y
    pad = [(0, 0)] * (y.ndim - 1) + [(n // 2, n - 1 - n // 2)]
    c = np.cumsum(np.pad(y, pad, mode="edge"), axis=-1)
    c = np.concatenate([np.zeros(c.shape[:-1] + (1,)), c], axis=-1)
    return (c[..., n:] - c[..., :-n]) / n


def _smoothed_profile(
    rs: RestSpectrum, center: float, half: float, conts: tuple[tuple[float, float], ...], smooth_a: float
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """The normalised profile boxcar-smoothed over ``smooth_a`` Å: (wavelength, smoothed ``F/C - 1``, pixel size
    in Å, 1-sigma noise of the smoothed profile)."""
    wl, y, ey = _normalised_profile(rs, center, half, conts)
    pix = float(np.median(np.diff(wl)))
    n = max(1, int(round(smooth_a / pix)))
    return wl, _smooth(y, n), pix, float(np.median(ey)) / np.sqrt(n)


#: redraws of a line profile with its pixels' noise whose width scatter is the FWHM's error
FWHM_DRAWS = 48
#: a profile is smoothed further until its peak stands this many sigma above the noise (or the boxcar reaches a
#: tenth of the window): half-maximum crossings of a noisier profile fall on noise spikes
FWHM_PEAK_SNR = 10.0


def _half_max_width(wl: np.ndarray, ys: np.ndarray, k: int) -> tuple[float, bool]:
    """Width between the half-maximum crossings either side of the peak at index ``k`` of the smoothed profile
    ``ys``, interpolated linearly, and whether a side ran to the window's edge (a lower limit)."""
    half_max = 0.5 * ys[k]
    left = np.flatnonzero(ys[:k] < half_max)
    right = np.flatnonzero(ys[k:] < half_max)
    if left.size:
        i = left[-1]
        x_left = np.interp(half_max, [ys[i], ys[i + 1]], [wl[i], wl[i + 1]])
    else:  # a side that never falls to half maximum inside the window gives a lower limit at the window's edge
        x_left = wl[0]
    if right.size:
        j = k + right[0]
        x_right = np.interp(half_max, [ys[j], ys[j - 1]], [wl[j], wl[j - 1]])
    else:
        x_right = wl[-1]
    return float(x_right - x_left), not (left.size and right.size)


@dataclass(frozen=True)
class _WidthRule:
    """How :func:`line_fwhm` reads a width from a profile, so that the data and each redraw are read alike."""

    wl: np.ndarray
    core: np.ndarray  # indices of the pixels where the peak is searched
    n: int  # boxcar of ``smooth_a`` Å, in pixels
    n_max: int  # the widest boxcar the adaptive smoothing may reach
    noise: float  # 1-sigma noise of one unsmoothed pixel (median over the window)
    min_peak_snr: float

    def widths(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(width, lower limit?, detected?) of each row of ``rows`` (profiles with the line as a positive peak).

        Each row is smoothed over ``n`` pixels; a peak below ``min_peak_snr`` sigma is not detected; a detected
        peak below :data:`FWHM_PEAK_SNR` sigma is smoothed further, as much as its own height asks."""
        r = np.arange(rows.shape[0])
        first = _smooth(rows, self.n)
        k = self.core[np.argmax(first[:, self.core], axis=1)]
        peak = first[r, k]
        noise = self.noise / np.sqrt(self.n)
        detected = peak >= self.min_peak_snr * noise
        with np.errstate(divide="ignore", invalid="ignore"):
            want = np.ceil(self.n * (FWHM_PEAK_SNR * noise / np.where(detected, peak, np.inf)) ** 2)
        n = np.where(want > self.n, np.minimum(want, max(self.n, self.n_max)), self.n).astype(int)
        width = np.full(rows.shape[0], np.nan)
        limit = np.zeros(rows.shape[0], bool)
        for m in np.unique(n[detected]):
            rows_m = r[detected & (n == m)]
            ys = first[rows_m] if m == self.n else _smooth(rows[rows_m], int(m))
            km = self.core[np.argmax(ys[:, self.core], axis=1)]
            for i, row, kk in zip(rows_m, ys, km, strict=True):
                width[i], limit[i] = _half_max_width(self.wl, row, int(kk))
        return width, limit, detected


def line_fwhm(
    rs: RestSpectrum,
    center: float,
    half: float,
    conts: tuple[tuple[float, float], ...],
    *,
    emission: bool,
    smooth_a: float = 4.0,
    min_peak_snr: float = 4.0,
    name: str = "FWHM",
) -> Measurement:
    """Full width at half maximum (Å) of the emission peak or absorption trough nearest ``center``.

    The profile ``F/C - 1`` within ``center ± half`` is boxcar-smoothed over ``smooth_a`` Å; the half-maximum
    crossings are interpolated linearly. Not significant (``no_signal``) when the extremum is below
    ``min_peak_snr`` sigma. A noisy profile (peak below :data:`FWHM_PEAK_SNR` sigma) is smoothed further, up to a
    tenth of the window. A line wider than the window gives a lower limit (unit ``"Å (lower limit)"``) measured
    to the window's edge.

    Error: the standard deviation of the widths of :data:`FWHM_DRAWS` copies of the profile, each with Gaussian
    noise of the pixels' sigma (from ivar) added and its pseudo-continuum levels redrawn within their errors, each
    read exactly as the data are (peak searched again, detection and the extra smoothing decided again): the
    scatter that noise gives this estimator. When fewer than half the copies still show the line at
    ``min_peak_snr`` the width is a guess, and its error is at least half the width.
    """
    windows = ((center - half, center + half), *conts)
    try:
        wl, y, ey = _normalised_profile(rs, center, half, conts)
        pix = float(np.median(np.diff(wl)))
        sign = 1.0 if emission else -1.0  # an absorption trough is measured as a peak of the inverted profile
        core = np.flatnonzero(np.abs(wl - center) <= max(4.0, 0.15 * half))
        if not core.size:
            raise NotMeasurable(f"not a single good pixel near {center:.0f} Å")
        rule = _WidthRule(wl, core, max(1, int(round(smooth_a / pix))), int(0.2 * half / pix),
                          float(np.median(ey)), min_peak_snr)
        width, limit, detected = rule.widths(sign * y[None, :])
        if not detected[0]:
            kind = "emission" if emission else "absorption"
            noise = rule.noise / np.sqrt(rule.n)
            peak = float(np.max(sign * _smooth(y, rule.n)[core]))
            raise NoSignal(f"without significant {kind} at {center:.0f} Å (peak {peak:.2f}, noise {noise:.2f})")
        fwhm, lower_limit = float(width[0]), bool(limit[0])
        rng = np.random.default_rng([int(round(center * 10)), int(round(half)), wl.size])
        draws = sign * (_redrawn_continuum(rs, wl, y, conts, rng, FWHM_DRAWS)
                        + ey * rng.standard_normal((FWHM_DRAWS, y.size)))
        widths = rule.widths(draws)[0]
        widths = widths[np.isfinite(widths)]
        error = float(np.std(widths, ddof=1)) if widths.size > 2 else fwhm
        if widths.size < FWHM_DRAWS / 2:
            error = max(error, 0.5 * fwhm)
    except NotMeasurable as exc:
        return _unmeasured(name, exc, "Å", windows)
    return Measurement(name, fwhm, error, "Å (lower limit)" if lower_limit else "Å", windows=windows)


def _redrawn_continuum(
    rs: RestSpectrum, wl: np.ndarray, y: np.ndarray, conts: tuple[tuple[float, float], ...],
    rng: np.random.Generator, draws: int,
) -> np.ndarray:
    """``draws`` copies of the normalised profile ``y = F/C - 1`` divided instead by a pseudo-continuum whose window
    means are redrawn within their errors: the continuum's own noise, which moves the half maximum."""
    stats = [_window_stats(rs, lo, hi) for lo, hi in conts]
    (c1, e1, _), (c2, e2, _) = stats[0], stats[-1]
    if len(stats) == 1:
        c = np.full(wl.shape, c1)
        new = c + e1 * rng.standard_normal((draws, 1))
    else:
        x1, x2 = 0.5 * sum(conts[0]), 0.5 * sum(conts[-1])
        t = (wl - x1) / (x2 - x1)
        c = c1 + t * (c2 - c1)
        d1 = e1 * rng.standard_normal((draws, 1))
        d2 = e2 * rng.standard_normal((draws, 1))
        new = c + d1 * (1.0 - t) + d2 * t
    return (y + 1.0) * c / new - 1.0


def double_peak_separation(
    rs: RestSpectrum,
    center: float,
    half: float,
    conts: tuple[tuple[float, float], ...],
    *,
    smooth_a: float = 3.0,
    min_dip_sigma: float = 3.0,
    name: str = "peak separation",
) -> Measurement:
    """Velocity separation (km/s) of two emission peaks around ``center`` with a significant dip between them.

    value 0.0 means the line was measured and is single-peaked; None means no significant emission to judge.
    """
    windows = ((center - half, center + half), *conts)
    try:
        wl, ys, pix, noise = _smoothed_profile(rs, center, half, conts, smooth_a)
        if ys.max() < 4.0 * noise:
            raise NoSignal(f"without significant emission at {center:.0f} Å")
        blue = wl < center
        red = ~blue
        if blue.sum() < 2 or red.sum() < 2:
            raise NotMeasurable(f"too few good pixels on one side of {center:.0f} Å")
        kb = int(np.flatnonzero(blue)[np.argmax(ys[blue])])
        kr = int(np.flatnonzero(red)[np.argmax(ys[red])])
        if kr - kb < 2:
            return Measurement(name, 0.0, None, "km/s", windows=windows)
        dip = float(ys[kb:kr + 1].min())
        lower_peak = float(min(ys[kb], ys[kr]))
        if lower_peak - dip < min_dip_sigma * noise or lower_peak < 0.3 * float(max(ys[kb], ys[kr])):
            return Measurement(name, 0.0, None, "km/s", windows=windows)
        sep = float((wl[kr] - wl[kb]) / center * C_KM_S)
    except NotMeasurable as exc:
        return _unmeasured(name, exc, "km/s", windows)
    return Measurement(name, sep, pix / center * C_KM_S, "km/s", windows=windows)
