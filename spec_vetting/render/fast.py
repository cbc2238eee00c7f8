"""The fast renderer: the trained picture, pixel for pixel, without pyplot and without rebuilding figures.

Concurrency model
-----------------
matplotlib is not thread-safe (shared font objects, text layout caches, figures). This module keeps one figure per
size class per process and draws under a process-wide lock, never touching pyplot's global state, so:

* any thread may call :func:`render_png`; calls from several threads are serialised by the lock (correct, but no
  faster than one thread);
* for parallel rendering use worker processes (Dask workers, ``ProcessPoolExecutor``): each process has its own
  figures and lock, and nothing is shared between processes;
* from asyncio never call it on the event loop thread (a picture takes tens of milliseconds): use
  ``await loop.run_in_executor(executor, render_spectrum, ...)`` with a thread executor (simple; rendering then
  competes with the loop for the GIL) or a process executor (scales with cores).

Why it is fast
--------------
The straightforward routine (benchmarks/render/baseline.py) builds a new figure per picture: creating the axes and
its tick objects, a layout pass, a full draw to find the tight bounding box, a second draw, then matplotlib's PNG
writer at zlib's default level. Here (each step measured in notes/render.md):

* the figure of each size class is built once and only what changes (line data, limits, tick locators, title,
  stats box) is updated; the tight-bbox pass runs with drawing disabled; the picture is drawn once;
* the axes answer matplotlib's repeated questions from memos (:mod:`.batched_axis`): ticks, tick label boxes,
  label and title placement, spine extents are computed once per axes state instead of ~30 times per picture;
* grid lines and tick marks of one kind are drawn as one path / one marker call (:mod:`.batched_axis`);
* text is drawn by an Agg renderer that caches each string's bitmap and extent (:mod:`.text_renderer`), and Text
  boxes are cached per string and style;
* the PNG is written unfiltered at zlib level 1 (:mod:`.png`).

All of it draws the same pixels as the baseline; every cache is bounded. Most pictures do not even come here:
:mod:`.direct` draws them straight onto Agg from the same rules (about 3x faster), and hands back to this
figure only the pictures it does not reproduce (a single point, crowded ticks, mathtext, a moving title).

It is written against matplotlib 3.10.5 (the release the model was trained with; :mod:`spec_vetting.render`
refuses any other): the private pieces it uses are ``_tight_bbox.adjust_bbox``, ``Axis._update_ticks`` /
``_get_ticklabel_bboxes`` / ``_update_label_position``, ``Axes._update_title_position``, ``Text._get_layout``
and RendererAgg's ``_prepare_font`` / ``_renderer``.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

import numpy as np
from matplotlib import _tight_bbox  # private, but it is exactly what savefig uses
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.figure import Figure, SubplotParams
from matplotlib.ticker import AutoMinorLocator, MultipleLocator

from . import bbox_edges, style
from .batched_axis import batch_tick_drawing, memoise_spine_extent, memoise_ticks, memoise_title_position
from .layout import PlotLayout
from .png import encode_rows, png_rows
from .text_renderer import TextCachingRendererAgg, cache_text_layout

# savefig's default padding around the tight bounding box (rcParams["savefig.pad_inches"])
_PAD_INCHES = 0.1

_LOCK = threading.Lock()
# Agg renderers kept per canvas, by pixel size: the tight-bbox crop differs from the full figure by a few pixels,
# and matplotlib caches text metrics per renderer object, so a new renderer per draw would measure every label anew
_RENDERERS_PER_CANVAS = 8


class _RendererCachingCanvas(FigureCanvasAgg):
    """An Agg canvas that keeps its renderers by size instead of replacing the last one on every size change."""

    def __init__(self, figure):
        super().__init__(figure)
        self._renderers: OrderedDict[tuple, RendererAgg] = OrderedDict()

    def get_renderer(self):
        # sized as matplotlib 3.10's FigureCanvasAgg.get_renderer sizes it: the figure box in (fractional) pixels
        w, h = self.figure.bbox.size
        key = (w, h, self.figure.dpi)
        renderer = self._renderers.get(key)
        if renderer is None:
            renderer = self._renderers[key] = TextCachingRendererAgg(w, h, self.figure.dpi)
            while len(self._renderers) > _RENDERERS_PER_CANVAS:
                self._renderers.popitem(last=False)
        else:
            self._renderers.move_to_end(key)
        self.renderer = renderer
        self._lastKey = key
        return renderer


class _TooManyTicksFilter(logging.Filter):
    """A window holding one point makes matplotlib widen the axis to ±5 % and the trained tick table then asks
    for thousands of ticks; matplotlib draws them (the model saw that) and logs a warning per draw. Drop it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Locator attempting to generate")


logging.getLogger("matplotlib.ticker").addFilter(_TooManyTicksFilter())
# every layout pass asks bounding boxes for their edges ~1,000 times a picture: scalar comparisons, numpy's answers
bbox_edges.install()


class _SizeClassFigure:
    """One reusable figure with the trained styling for one figure size (inches)."""

    def __init__(self, figsize: tuple[float, float]):
        self.figure = Figure(figsize=figsize, dpi=style.DPI, subplotpars=SubplotParams())
        self.canvas = _RendererCachingCanvas(self.figure)
        self.default_subplotpars = {
            name: getattr(self.figure.subplotpars, name) for name in ("left", "bottom", "right", "top")
        }
        ax = self.axes = self.figure.add_subplot()
        (self.line,) = ax.plot(
            [], [], color=style.LINE_COLOR, linewidth=style.LINE_WIDTH, alpha=style.LINE_ALPHA
        )
        ax.set_xlabel(style.X_LABEL, fontsize=style.LABEL_FONTSIZE, fontweight=style.LABEL_FONTWEIGHT)
        ax.set_ylabel(style.Y_LABEL, fontsize=style.LABEL_FONTSIZE, fontweight=style.LABEL_FONTWEIGHT)
        self.title = ax.set_title(
            style.DEFAULT_TITLE, fontsize=style.TITLE_FONTSIZE, fontweight=style.TITLE_FONTWEIGHT, pad=style.TITLE_PAD
        )
        ax.grid(True, which="major", alpha=style.GRID_MAJOR_ALPHA, linewidth=style.GRID_MAJOR_WIDTH)
        ax.grid(True, which="minor", alpha=style.GRID_MINOR_ALPHA, linewidth=style.GRID_MINOR_WIDTH)
        ax.yaxis.set_minor_locator(AutoMinorLocator())
        ax.tick_params(which="both", direction=style.TICK_DIRECTION)
        ax.tick_params(which="major", labelsize=style.TICK_LABELSIZE)
        self.stats = ax.text(
            0.0, 0.0, "", transform=ax.transAxes, fontsize=style.STATS_FONTSIZE, bbox=dict(style.STATS_BOX)
        )
        self.x_spacing: tuple[float, float] | None = None
        for axis in (ax.xaxis, ax.yaxis):
            memoise_ticks(axis)
            batch_tick_drawing(axis)
        for spine in ax.spines.values():
            memoise_spine_extent(spine)
        memoise_title_position(ax)
        for text in (self.title, ax._left_title, ax._right_title, self.stats, ax.xaxis.label, ax.yaxis.label,
                     ax.xaxis.offsetText, ax.yaxis.offsetText):
            cache_text_layout(text)
    def update(self, lay: PlotLayout) -> None:
        ax = self.axes
        self.line.set_data(lay.wavelength, lay.flux)
        ax.relim()
        ax.autoscale_view()
        if self.x_spacing != (lay.x_major, lay.x_minor):
            ax.xaxis.set_major_locator(MultipleLocator(lay.x_major))
            ax.xaxis.set_minor_locator(MultipleLocator(lay.x_minor))
            self.x_spacing = (lay.x_major, lay.x_minor)
        self.title.set_text(lay.title)
        x, y, ha, va = style.STATS_CORNERS[lay.corner]
        self.stats.set_position((x, y))
        self.stats.set_horizontalalignment(ha)
        self.stats.set_verticalalignment(va)
        self.stats.set_text(lay.stats_text)
        # tight layout starts from the default subplot box, as on a new figure: the y tick count (and so the
        # label widths tight layout makes room for) depends on the axes height it starts from
        self.figure.subplots_adjust(**self.default_subplotpars)

    def draw_rgba(self) -> np.ndarray:
        """Tight layout, tight bounding box and one Agg draw, as savefig(bbox_inches="tight") does them."""
        fig = self.figure
        renderer = self.canvas.get_renderer()
        # minor ticks stay in both layout passes: their empty labels (zero-size boxes at their anchors) and tick
        # marks place the x label and keep the bottom spine's box when no major tick falls inside the view
        fig.tight_layout()
        bbox = fig.get_tightbbox(renderer).padded(_PAD_INCHES)
        restore = _tight_bbox.adjust_bbox(fig, bbox, self.canvas.fixed_dpi)
        try:
            self.canvas.draw()
            return np.asarray(self.canvas.buffer_rgba())
        finally:
            restore()


_FIGURES: dict[tuple[float, float], _SizeClassFigure] = {}


def _figure_for(figsize: tuple[float, float]) -> _SizeClassFigure:
    # keyed on the exact floats, never rounded: 6 * 0.95 is 5.699999999999999 in the trained routine too, and the
    # tight-bbox crop truncates its pixel size, so a figure 5.7 inches wide can come out a pixel wider or narrower
    key = (float(figsize[0]), float(figsize[1]))
    fig = _FIGURES.get(key)
    if fig is None:
        fig = _FIGURES[key] = _SizeClassFigure(key)
    return fig


def draw_with_figure(lay: PlotLayout) -> np.ndarray:
    """The picture drawn by matplotlib on the size class's figure (the renderer's buffer: copy before the next)."""
    figure = _figure_for(lay.figsize)
    figure.update(lay)
    return figure.draw_rgba()


def render_png(lay: PlotLayout) -> bytes:
    from . import direct  # below this module: it takes its templates from a figure of this one

    with _LOCK:
        try:
            rgba = direct.draw_rgba(lay)
        except direct.Unsupported:
            rgba = draw_with_figure(lay)
        # the scanlines are a copy: the renderer's buffer is overwritten by the next picture
        rows, colour_type = png_rows(rgba)
    return encode_rows(rows, colour_type, remember=True)
