"""The significance rule every rules-engine term follows: a measured value with its 1-sigma error against a
threshold counts for one side only when it lies more than :data:`SIGMA` errors from the threshold.

:class:`Term` is the one piece that says so, and words it: the score terms (``scoring.py``), the decisive
measurements and any evidence from outside the spectrum (a cross-match's M_G, a parallax) build a ``Term`` from
their value, error and threshold and read ``side()``, ``significant()`` and ``text()`` from it, so every number
the engine cites comes with its error and a reader can tell a firm result from a coin toss.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: a term counts for or against only when its value is at least this many sigma from its threshold
SIGMA = 3.0


@dataclass(frozen=True)
class Term:
    """A value with its 1-sigma error against a threshold.

    ``value=None`` means there is no number: ``why`` says why and ``no_signal`` which kind of why (the pixels were
    usable but held no significant feature, versus no usable pixels at all). ``error=None`` means exact (a
    redshift from a survey pipeline, a count): any value off the threshold is significant.
    """

    name: str
    value: float | None
    error: float | None
    threshold: float
    unit: str = ""
    digits: int = 2
    why: str | None = None
    no_signal: bool = False

    @classmethod
    def of(cls, measurement, threshold: float, *, value: float | None = None, digits: int = 2) -> Term:
        """From anything with ``name, value, error, unit, why`` (a rules ``Measurement``); ``value`` overrides
        the measured one (its error is kept)."""
        v = measurement.value if value is None else value
        return cls(measurement.name, None if v is None else float(v), measurement.error, float(threshold),
                   measurement.unit, digits, measurement.why, getattr(measurement, "no_signal", False))

    @property
    def measured(self) -> bool:
        return self.value is not None and math.isfinite(self.value)

    @property
    def sigmas(self) -> float:
        """(value - threshold) / error: signed distance from the threshold in errors (nan when not measured)."""
        if not self.measured:
            return math.nan
        diff = float(self.value) - self.threshold
        if self.error is None or self.error == 0:
            return math.copysign(math.inf, diff) if diff else 0.0
        if not math.isfinite(self.error):
            return 0.0
        return diff / float(self.error)

    def side(self, sigma: float = SIGMA) -> str:
        """``"above"`` or ``"below"`` when the value is that side of the threshold at ``sigma``;
        ``"not significant"`` when it is within ``sigma`` errors; ``"not measured"`` without a value."""
        if not self.measured:
            return "not measured"
        z = self.sigmas
        if z >= sigma:
            return "above"
        if z <= -sigma:
            return "below"
        return "not significant"

    def significant(self, sigma: float = SIGMA) -> bool:
        return self.side(sigma) in ("above", "below")

    def above(self, sigma: float = SIGMA) -> bool:
        return self.side(sigma) == "above"

    def below(self, sigma: float = SIGMA) -> bool:
        return self.side(sigma) == "below"

    def error_to_decide(self, sigma: float = SIGMA) -> float | None:
        """The largest error at which this value would be significant (None without a value)."""
        if not self.measured:
            return None
        return abs(float(self.value) - self.threshold) / sigma

    def quantity(self) -> str:
        """``name = value ± error unit`` (no ``±`` for an exact value)."""
        if not self.measured:
            return self.name
        d = self.digits
        err = ""
        if self.error is not None:
            err = f" ± {self.error:.{d}f}" if math.isfinite(self.error) else " ± inf"
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.name} = {self.value:.{d}f}{err}{unit}"

    def relation(self, sigma: float = SIGMA) -> str:
        """``above 5.00 Å at 4.2σ``, ``not significantly above 5.00 Å (0.4σ)``, ``not significant (why)`` or
        ``not measurable (no usable pixels: why)``."""
        if not self.measured:
            if self.no_signal:
                return f"not significant ({self.why})"
            return f"not measurable (no usable pixels: {self.why or 'no value'})"
        unit = f" {self.unit}" if self.unit else ""
        thr = f"{self.threshold:.{self.digits}f}{unit}"
        z = self.sigmas
        way = "above" if z >= 0 else "below"
        zs = "exact" if math.isinf(z) else f"{abs(z):.1f}σ"
        if abs(z) >= sigma:
            return f"{way} {thr} at {zs}" if zs != "exact" else f"{way} {thr}"
        return f"not significantly {way} {thr} ({zs})"

    def text(self, sigma: float = SIGMA) -> str:
        """``quantity (relation)``, or ``name relation`` without a value: the form every citation takes."""
        if not self.measured:
            return f"{self.name} {self.relation(sigma)}"
        return f"{self.quantity()} ({self.relation(sigma)})"
