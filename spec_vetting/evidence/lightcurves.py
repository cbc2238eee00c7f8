"""Per-band summaries of a light curve (pure numpy): how many good epochs, over how long, how bright, how variable
against its own errors, and whether it brightened in outbursts.

``n_epochs`` counts every epoch of the band, ``n_invalid`` those with a NaN time, magnitude or error or an error
that is not positive (bad input, never used), ``n_good`` the good ones. An epoch is *good* when its time,
magnitude and error are finite, the error is positive and no flag bit of ``bad_flags`` is set. A band with fewer
than ``min_epochs`` good epochs has no summary, only the reason (so a sparse or fully flagged curve never yields
a number computed from too little).

For a band with ``n`` good epochs (magnitudes ``m``, errors ``e``, in time order):

- ``median_mag``: ``median(m)``;
- ``amplitude``: the robust amplitude, ``percentile(m, 95) - percentile(m, 5)`` (numpy's linear interpolation);
  ``amplitude_error`` = ``sqrt(2) * median(e)`` (the error of a difference of two epochs); ``amplitude_sigma`` =
  ``(amplitude - NOISE_RANGE * median(e)) / amplitude_error``: how far the range exceeds the 5-95 % range that the
  errors alone give a constant star (``NOISE_RANGE`` = 3.29 sigma, the Gaussian's), in units of its error; about 0
  for a constant star;
- ``chi2_red``: the reduced chi-square about the inverse-variance weighted mean (a constant), ``n - 1`` degrees of
  freedom; ``chi2_red_error`` = ``sqrt(2 / (n - 1))``, its standard deviation for a constant star with right errors;
- ``von_neumann``: the von Neumann ratio, mean squared successive difference over the variance (``ddof=1``): about
  2 for scatter from epoch to epoch (noise, flickering), well below 1 for variation slower than the sampling
  (a long-period variable); null when the magnitudes do not vary at all;
- ``max_brightening_mag``: ``median - min(m)``, with ``max_brightening_error`` the error of that epoch;
  ``max_brightening_sigma``: ``max((median - m) / e)``, the largest brightening above the median in sigma;
- ``n_episodes``: distinct brightening episodes: runs (in time order) of consecutive good epochs that are brighter
  than the median by at least ``outburst_mag`` beyond 3 sigma (``median - m - outburst_mag >= 3 e``); two runs
  separated by one fainter good epoch are two episodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: the 5-95 % range of a Gaussian in units of its sigma (2 x 1.6449): what the errors alone give a constant star
NOISE_RANGE = 2.0 * 1.6448536269514722
#: sigma of the brightening beyond ``outburst_mag`` for an epoch to count in an episode (the rules' 3 sigma)
EPISODE_SIGMA = 3.0
#: the summary's numeric fields, in column order
FIELDS = ("n_epochs", "n_invalid", "n_good", "span_days", "median_mag", "amplitude", "amplitude_error",
          "amplitude_sigma", "chi2_red", "chi2_red_error", "von_neumann", "max_brightening_mag",
          "max_brightening_error", "max_brightening_sigma", "n_episodes")


@dataclass(frozen=True)
class SummaryRules:
    """What makes an epoch good and a summary possible (the settings of :mod:`.lightcurve_settings`)."""

    bad_flags: int = -1  # bits of the flag column that mark an epoch bad (-1: any bit; ZTF's catflags == 0 cut)
    min_epochs: int = 5
    outburst_mag: float = 1.0


def good_epochs(t, mag, err, flags, bad_flags: int = -1) -> np.ndarray:
    """Boolean mask of the good epochs."""
    t, mag, err = (np.asarray(a, dtype=np.float64) for a in (t, mag, err))
    ok = np.isfinite(t) & np.isfinite(mag) & np.isfinite(err) & (err > 0)
    if flags is not None:
        f = np.asarray(flags)
        if f.dtype.kind == "f":  # a null flag read as NaN: not known good
            known = np.isfinite(f)
            ok &= known
            f = np.where(known, f, 0).astype(np.int64)
        ok &= (f.astype(np.int64) & int(bad_flags)) == 0
    return ok


def _episodes(outburst: np.ndarray) -> int:
    """Number of runs of True in a time-ordered boolean array."""
    if outburst.size == 0:
        return 0
    starts = outburst & ~np.concatenate(([False], outburst[:-1]))
    return int(starts.sum())


def summarise_band(t, mag, err, flags=None, rules: SummaryRules = SummaryRules()) -> dict:
    """One band's summary (the keys of :data:`FIELDS` and ``reason``); numbers are None with the reason when the
    band has too few good epochs."""
    t = np.asarray(t, dtype=np.float64)
    mag = np.asarray(mag, dtype=np.float64)
    err = np.asarray(err, dtype=np.float64)
    out: dict = dict.fromkeys(FIELDS)
    out["n_epochs"] = int(t.size)
    # NaN or non-positive errors (and NaN times or magnitudes) are counted, never summarised
    out["n_invalid"] = int((~(np.isfinite(t) & np.isfinite(mag) & np.isfinite(err) & (err > 0))).sum())
    good = good_epochs(t, mag, err, flags, rules.bad_flags)
    n = int(good.sum())
    out["n_good"] = n
    if n < rules.min_epochs:
        if t.size == 0:
            why = "no epochs"
        elif n == 0:
            why = f"all {t.size} epochs flagged or without a valid magnitude/error"
        else:
            why = f"too few good epochs ({n} < {rules.min_epochs})"
        out["reason"] = why
        return out
    order = np.argsort(t[good], kind="stable")
    t, m, e = t[good][order], mag[good][order], err[good][order]
    med = float(np.median(m))
    med_err = float(np.median(e))
    p5, p95 = np.percentile(m, [5.0, 95.0])
    amp = float(p95 - p5)
    amp_err = math.sqrt(2.0) * med_err
    w = 1.0 / (e * e)
    mean_w = float(np.sum(w * m) / np.sum(w))
    chi2 = float(np.sum(((m - mean_w) / e) ** 2))
    var = float(np.var(m, ddof=1))
    bright = med - m
    z = bright / e
    i_max = int(np.argmax(bright))
    outburst = (bright - rules.outburst_mag) >= EPISODE_SIGMA * e
    out.update(
        span_days=float(t[-1] - t[0]), median_mag=med, amplitude=amp, amplitude_error=amp_err,
        amplitude_sigma=(amp - NOISE_RANGE * med_err) / amp_err, chi2_red=chi2 / (n - 1),
        chi2_red_error=math.sqrt(2.0 / (n - 1)),
        von_neumann=(float(np.mean(np.diff(m) ** 2)) / var) if var > 0 else None,
        max_brightening_mag=float(bright[i_max]), max_brightening_error=float(e[i_max]),
        max_brightening_sigma=float(np.max(z)), n_episodes=_episodes(outburst), reason=None)
    return out


def summarise(t, band, mag, err, flags, bands: list[str], rules: SummaryRules = SummaryRules()) -> dict[str, dict]:
    """Every band of ``bands``: its summary from the epochs whose ``band`` equals it (a band without epochs gets
    the reason ``no epochs``)."""
    band = np.asarray(band, dtype=object).astype(str)
    flags_arr = None if flags is None else np.asarray(flags)
    out = {}
    for b in bands:
        sel = band == b
        out[b] = summarise_band(np.asarray(t)[sel], np.asarray(mag)[sel], np.asarray(err)[sel],
                                None if flags_arr is None else flags_arr[sel], rules)
    return out
