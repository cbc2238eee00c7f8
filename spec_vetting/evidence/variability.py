"""What a light curve's summary says about a class, each finding only beyond 3 sigma: the one place the
thresholds live, read by the rules engine's terms and by the review queue's ``evidence_disagrees``.

A *finding* is a value with its 1-sigma error against a threshold (and, for some, a condition that is not a
measurement: a time span, a timescale). The thresholds and where they come from:

- outburst: the largest brightening above the median >= :data:`OUTBURST_MAG` = 1 mag (the issue's bar; dwarf-nova
  outbursts are 2-8 mag, Warner 1995, *Cataclysmic Variable Stars*, ch. 3), with at least one episode;
- flickering: reduced chi-square >= :data:`FLICKER_CHI2` = 10 (our choice, not measured: scatter with ten times the
  variance the errors explain) with the von Neumann ratio >= :data:`FAST_VON_NEUMANN` = 1 (variation from epoch
  to epoch, as flickering is; 2 for uncorrelated scatter, our choice of bar);
- constant: reduced chi-square <= :data:`CONSTANT_CHI2` = 3 (our choice: allows for survey errors that understate
  a steady star's scatter; ZTF DR's per-epoch errors do for bright stars, not measured here) over at least
  :data:`CONSTANT_SPAN_DAYS` = 730 days of good epochs (the issue's two years), with no outburst episode;
- long-period, large amplitude: 5-95 % amplitude >= :data:`LPV_AMPLITUDE` = 1 mag (our choice, between the
  semi-regulars' tenths of a magnitude and the Miras' > 2.5 mag in V of the GCVS definition) with the von Neumann
  ratio <= :data:`SLOW_VON_NEUMANN` = 0.5 (slower than the cadence, our choice);
- strong variability: 5-95 % amplitude >= :data:`STRONG_AMPLITUDE` = 0.5 mag (above the few tenths of a magnitude
  that ZZ Ceti pulsations reach, Winget & Kepler 2008, ARA&A 46, 157).

The errors: the amplitude's is ``sqrt(2) x`` the median epoch error, the reduced chi-square's ``sqrt(2 / (n - 1))``
(its spread for a constant star), the brightening's the error of its epoch (:mod:`.lightcurves`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .lightcurve_match import KIND
from .sources import evidence_number

#: a finding counts when its value is beyond the threshold by this many errors (the rules engine's one rule)
N_SIGMA = 3.0
OUTBURST_MAG = 1.0  # the bar; dwarf-nova outbursts are 2-8 mag (Warner 1995, ch. 3)
FLICKER_CHI2 = 10.0  # our choice, not measured: ten times the variance the errors explain
FAST_VON_NEUMANN = 1.0  # our choice: 2 for uncorrelated scatter, << 1 for slow variation
CONSTANT_CHI2 = 3.0  # our choice: room for survey errors that understate a steady star's scatter
CONSTANT_SPAN_DAYS = 730.0  # the two years of good epochs
LPV_AMPLITUDE = 1.0  # our choice: semi-regulars vary by tenths of a mag, Miras by > 2.5 mag in V (GCVS)
SLOW_VON_NEUMANN = 0.5  # our choice: variation slower than the cadence
STRONG_AMPLITUDE = 0.5  # above ZZ Ceti pulsations, a few tenths of a mag (Winget & Kepler 2008, ARA&A 46, 157)


@dataclass(frozen=True)
class Finding:
    """One significant statement about a light curve: ``value ± error`` beyond ``threshold`` (mag or none)."""

    kind: str  # outburst, flickering, constant, long_period, strong
    label: str  # e.g. "ztf r largest brightening"
    value: float
    error: float
    threshold: float
    unit: str
    meaning: str

    @property
    def sigmas(self) -> float:
        return abs(self.value - self.threshold) / self.error if self.error > 0 else math.inf


def light_curve_bands(evidence: dict[str, Any] | None) -> list[tuple[str, str, dict[str, Any]]]:
    """(source name, band, summary) of every summarised band in a candidate's evidence values."""
    evidence = evidence or {}
    out = []
    for key, value in evidence.items():
        if not key.endswith("_kind") or value != KIND:
            continue
        name = key[: -len("_kind")]
        prefix = f"{name}_"
        bands = sorted({k[len(prefix):-len("_n_good")] for k in evidence
                        if k.startswith(prefix) and k.endswith("_n_good")})
        for b in bands:
            summary = {k[len(prefix) + len(b) + 1:]: v for k, v in evidence.items() if k.startswith(f"{prefix}{b}_")}
            if evidence_number(summary, "median_mag") is not None:
                out.append((name, b, summary))
    return out


def _beyond(value, error, threshold, above: bool) -> bool:
    if value is None or error is None or not error > 0:
        return False
    return (value - threshold if above else threshold - value) >= N_SIGMA * error


def band_findings(name: str, band: str, s: dict[str, Any]) -> list[Finding]:
    """The significant findings of one band's summary."""
    n = lambda k: evidence_number(s, k)  # noqa: E731
    label = f"{name} {band}"
    out = []
    b, be = n("max_brightening_mag"), n("max_brightening_error")
    if (n("n_episodes") or 0) >= 1 and _beyond(b, be, OUTBURST_MAG, True):
        out.append(Finding("outburst", f"{label} largest brightening", b, be, OUTBURST_MAG, "mag",
                           f"an outburst ({int(n('n_episodes'))} episode(s) of >= {OUTBURST_MAG:g} mag)"))
    chi, ce, vn = n("chi2_red"), n("chi2_red_error"), n("von_neumann")
    if vn is not None and vn >= FAST_VON_NEUMANN and _beyond(chi, ce, FLICKER_CHI2, True):
        out.append(Finding("flickering", f"{label} reduced chi-square", chi, ce, FLICKER_CHI2, "",
                           f"flickering well above the errors (von Neumann ratio {vn:.2f})"))
    span = n("span_days")
    if span is not None and span >= CONSTANT_SPAN_DAYS and not n("n_episodes") and \
            _beyond(chi, ce, CONSTANT_CHI2, False):
        out.append(Finding("constant", f"{label} reduced chi-square", chi, ce, CONSTANT_CHI2, "",
                           f"constant within its errors over {span / 365.25:.1f} yr ({int(n('n_good'))} good "
                           "epochs)"))
    amp, ae = n("amplitude"), n("amplitude_error")
    if vn is not None and vn <= SLOW_VON_NEUMANN and _beyond(amp, ae, LPV_AMPLITUDE, True):
        out.append(Finding("long_period", f"{label} 5-95% amplitude", amp, ae, LPV_AMPLITUDE, "mag",
                           f"large-amplitude variability slower than the cadence (von Neumann ratio {vn:.2f})"))
    if _beyond(amp, ae, STRONG_AMPLITUDE, True):
        out.append(Finding("strong", f"{label} 5-95% amplitude", amp, ae, STRONG_AMPLITUDE, "mag",
                           "strong variability"))
    return out


def findings(evidence: dict[str, Any] | None) -> list[Finding]:
    """Every band's significant findings, most significant first within each kind."""
    out = [f for name, b, s in light_curve_bands(evidence) for f in band_findings(name, b, s)]
    return sorted(out, key=lambda f: (f.kind, -f.sigmas))


def strongest(found: list[Finding], kind: str) -> Finding | None:
    return next((f for f in found if f.kind == kind), None)


def contradicts(task: str, verdict: str | None, evidence: dict[str, Any] | None) -> bool:
    """A YES that a significant light curve contradicts: cv YES on a star constant over two years, wd YES on a
    strongly variable one."""
    if verdict != "YES" or task not in ("cv", "wd"):
        return False
    found = findings(evidence)
    if task == "cv":
        # a constant band beside an outbursting one is not a steady star
        return strongest(found, "constant") is not None and not any(f.kind in ("outburst", "flickering")
                                                                    for f in found)
    return strongest(found, "strong") is not None


def disagreement_from_extra(task, verdict, evidence_extra) -> np.ndarray:
    """:func:`contradicts` for arrays of rows whose light-curve values are in ``evidence_extra`` (JSON)."""
    out = np.zeros(len(task), dtype=bool)
    for i, (t, v, extra) in enumerate(zip(task, verdict, evidence_extra, strict=True)):
        if v != "YES" or t not in ("cv", "wd") or not extra or f'"{KIND}"' not in extra:
            continue
        try:
            values = json.loads(extra)
        except (TypeError, ValueError):
            continue
        out[i] = contradicts(t, v, values)
    return out
