"""The zoom tool the model calls (``spectral_visualization_tool``), answering exactly as the trained tool did.

Protocol section 3: the tool holds one spectrum in the observed frame and works in the rest frame (wavelength
divided by 1 + z when a non-zero redshift is given); flux is plotted as given. A window must be two numbers,
min < max, overlapping the data; otherwise the tool answers text only, with the trained error texts. Nothing a
model writes makes :meth:`ZoomTool.call` raise; a plotting stack other than the trained one does
(:class:`~spec_vetting.errors.PlottingEnvironmentError`).
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Real
from typing import Any

import numpy as np

from ..errors import PlottingEnvironmentError, RenderError
from ..protocol import (
    TOOL_NAME,
    bad_arguments_text,
    cut_tool_text,
    no_points_reason,
    unknown_tool_text,
    zoom_invalid_range_text,
    zoom_processing_error_text,
    zoom_success_text,
)

#: (wavelength, flux, wavelength_range, title) -> PNG bytes; the real one is spec_vetting.render.render_spectrum
Renderer = Callable[..., bytes]
#: windows whose pictures a tool keeps (besides the full view): a candidate's tasks often zoom where the others did
PICTURES_KEPT = 16


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
    # bool is a number to Python (True < 5000 holds in the trained check); NaN never passes a < b anyway
    return isinstance(v, Real) and not math.isnan(float(v))


class ZoomTool:
    """One spectrum, ready to be drawn whole or in rest-frame windows.

    Each picture is drawn once per tool: the full view, and the last :data:`PICTURES_KEPT` windows (the renderer is
    deterministic, so a kept picture is the one a new drawing would give). One tool may serve every inspection of
    its spectrum (a candidate's tasks, self-consistency samples), from several threads.
    """

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
        self._windows: OrderedDict[tuple[float, float], bytes] = OrderedDict()
        self._lock = threading.Lock()  # two inspections asking for one picture at once: drawn once

    def _render(self, window: tuple[float, float] | None) -> bytes:
        renderer = self._renderer or _default_renderer()
        return renderer(self.wavelength, self.flux, wavelength_range=window, title=self.title)

    def _window_picture(self, window: tuple[float, float]) -> bytes:
        with self._lock:
            png = self._windows.get(window)
            if png is None:
                png = self._windows[window] = self._render(window)  # RenderError: nothing kept
                while len(self._windows) > PICTURES_KEPT:
                    self._windows.popitem(last=False)
            else:
                self._windows.move_to_end(window)
            return png

    def full_view(self) -> bytes:
        """The full-spectrum picture, drawn once: identical bytes every turn keep the server's prefix cache warm."""
        with self._lock:
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
        except PlottingEnvironmentError:  # a broken install is the operator's to fix, never the model's to read
            raise
        except Exception as exc:  # the model must get an answer, whatever broke
            return ZoomResult(zoom_processing_error_text(str(exc) or type(exc).__name__))

    async def acall(self, arguments: Any) -> ZoomResult:
        """:meth:`call` in a worker thread, so drawing never blocks the event loop."""
        return await asyncio.get_running_loop().run_in_executor(None, self.call, arguments)

    async def afull_view(self) -> bytes:
        return await asyncio.get_running_loop().run_in_executor(None, self.full_view)

    def _window_ok(self, requested: Any) -> bool:
        """The trained tool's range check, with Python's own semantics: two values, min < max, overlapping the data.

        A value that cannot be measured or compared (a string's characters against the data's numbers, a dict's
        keys ...) makes the range invalid, as the TypeError inside the trained check did. Booleans and infinities
        compare as numbers there, so they pass here too.
        """
        if not math.isfinite(self.lo):
            return False
        try:
            if len(requested) != 2:
                return False
            a, b = requested
            if not a < b:
                return False
            if b < self.lo or a > self.hi:
                return False
            return bool(_is_number(a) and _is_number(b))
        except Exception:
            return False

    def _call(self, arguments: Any) -> ZoomResult:
        if not isinstance(arguments, dict):  # the trained tool calls arguments.get(...): it fails on anything else
            return ZoomResult(bad_arguments_text(arguments))
        label = arguments.get("label", "")
        requested = arguments.get("wavelength_range")
        if requested is None:
            return ZoomResult(zoom_success_text(None, label), self.full_view(), None)
        if not self._window_ok(requested):
            return ZoomResult(zoom_invalid_range_text(requested, self.lo, self.hi))
        typed = tuple(requested)  # printed as the model typed it: [6500, 6600] -> (6500, 6600)
        window = (float(typed[0]), float(typed[1]))
        if self._points_in(*window) == 0:
            return ZoomResult(zoom_processing_error_text(no_points_reason(typed)))
        try:
            png = self._window_picture(window)
        except RenderError:
            return ZoomResult(zoom_processing_error_text(no_points_reason(typed)))
        return ZoomResult(zoom_success_text(typed, label), png, window)


def answer_tool_call(call, zoom: ZoomTool) -> ZoomResult:
    """What the agent loop of training answered to one parsed call (``tool_agent_loop.py`` ``_call_tool``).

    Another tool's name: the KeyError text, ``Error when executing tool: 'zoom'``. Otherwise the tool answers (its
    own texts, an argument that is not an object included); the tool's text is cut in the middle past 1024
    characters. The agent loop's own error texts are not cut, as in training.
    """
    if call.name != TOOL_NAME:
        return ZoomResult(unknown_tool_text(str(call.name)))
    if not isinstance(call.arguments, dict):
        return ZoomResult(bad_arguments_text(call.arguments))
    zr = zoom.call(call.arguments)
    return ZoomResult(cut_tool_text(zr.text), zr.image_png, zr.window)
