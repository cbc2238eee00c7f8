"""The zoom tool the model calls (``spectral_visualization_tool``), answering exactly as the trained tool did.

Protocol section 3: the tool holds one spectrum in the observed frame and works in the rest frame (wavelength
divided by 1 + z when a non-zero redshift is given); flux is plotted as given. A window must be two numbers,
min < max, overlapping the data; otherwise the tool answers text only, with the trained error texts. Nothing a
model writes makes :meth:`ZoomTool.call` raise.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Real
from typing import Any

import numpy as np

from ..errors import RenderError
from ..protocol import (
    no_points_reason,
    zoom_invalid_range_text,
    zoom_processing_error_text,
    zoom_success_text,
)

#: (wavelength, flux, wavelength_range, title) -> PNG bytes; the real one is spec_vetting.render.render_spectrum
Renderer = Callable[..., bytes]


@dataclass(frozen=True)
class ZoomResult:
    """What the tool answered: the text, the picture (None for errors) and the rest-frame window plotted."""

    text: str
    image_png: bytes | None = None
    window: tuple[float, float] | None = None

    @property
    def ok(self) -> bool:
        return self.image_png is not None


def _default_renderer() -> Renderer:
    from ..render import render_spectrum  # imported on first use: the render layer sits below this one

    return render_spectrum


def _is_number(v: Any) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(float(v))


class ZoomTool:
    """One spectrum, ready to be drawn whole or in rest-frame windows."""

    def __init__(self, wavelength, flux, redshift: float | None = None, title: str = "Spectrum",
                 *, renderer: Renderer | None = None):
        wl = np.asarray(wavelength, dtype=np.float64)
        self.flux = np.asarray(flux, dtype=np.float64)
        if wl.shape != self.flux.shape or wl.ndim != 1:
            raise ValueError(f"wavelength {wl.shape} and flux {self.flux.shape} must be 1-D arrays of one length")
        z = 0.0 if redshift is None or not math.isfinite(float(redshift)) else float(redshift)
        self.redshift = z
        # the trained tool divides only when a redshift is present and non-zero
        self.wavelength = wl / (1.0 + z) if z != 0.0 else wl
        self.title = title
        self._renderer = renderer
        finite = self.wavelength[np.isfinite(self.wavelength)]
        self.lo = float(finite.min()) if finite.size else float("nan")
        self.hi = float(finite.max()) if finite.size else float("nan")
        self._full_view: bytes | None = None

    def _render(self, window: tuple[float, float] | None) -> bytes:
        renderer = self._renderer or _default_renderer()
        return renderer(self.wavelength, self.flux, wavelength_range=window, title=self.title)

    def full_view(self) -> bytes:
        """The full-spectrum picture, drawn once: identical bytes every turn keep the server's prefix cache warm."""
        if self._full_view is None:
            self._full_view = self._render(None)
        return self._full_view

    def _points_in(self, a: float, b: float) -> int:
        keep = np.isfinite(self.wavelength) & np.isfinite(self.flux)
        w = self.wavelength[keep]
        return int(np.count_nonzero((w >= a) & (w <= b)))

    def call(self, arguments: Any) -> ZoomResult:
        """Answer one call's arguments as the trained tool did; never raises."""
        try:
            return self._call(arguments)
        except Exception as exc:  # the model must get an answer, whatever broke
            return ZoomResult(zoom_processing_error_text(str(exc) or type(exc).__name__))

    async def acall(self, arguments: Any) -> ZoomResult:
        """:meth:`call` in a worker thread, so drawing never blocks the event loop."""
        return await asyncio.get_running_loop().run_in_executor(None, self.call, arguments)

    async def afull_view(self) -> bytes:
        return await asyncio.get_running_loop().run_in_executor(None, self.full_view)

    def _call(self, arguments: Any) -> ZoomResult:
        if not isinstance(arguments, dict):
            return ZoomResult(zoom_processing_error_text(f"arguments must be an object, got {arguments!r}"))
        label = arguments.get("label")
        label = str(label) if label not in (None, "") else None
        requested = arguments.get("wavelength_range")
        if requested is None:
            return ZoomResult(zoom_success_text(None, label), self.full_view(), None)
        if (
            not isinstance(requested, list | tuple)
            or len(requested) != 2
            or not all(_is_number(v) for v in requested)
            or not requested[0] < requested[1]
            or not (math.isfinite(self.lo) and requested[1] >= self.lo and requested[0] <= self.hi)
        ):
            shown = list(requested) if isinstance(requested, tuple) else requested
            return ZoomResult(zoom_invalid_range_text(shown, self.lo, self.hi))
        typed = tuple(requested)  # printed as the model typed it: [6500, 6600] -> (6500, 6600)
        window = (float(typed[0]), float(typed[1]))
        if self._points_in(*window) == 0:
            return ZoomResult(zoom_processing_error_text(no_points_reason(typed)))
        try:
            png = self._render(window)
        except RenderError:
            return ZoomResult(zoom_processing_error_text(no_points_reason(typed)))
        return ZoomResult(zoom_success_text(typed, label), png, window)
