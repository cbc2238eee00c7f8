"""The trained figure: one matplotlib figure per size class with every style Spec-o3 was trained on, updated per
picture (line data, limits, tick locators, title, stats box) instead of rebuilt.

It sits below both renderers: :mod:`.figure_path` (the fallback) lays it out and draws it with matplotlib, and
:mod:`.fast_path` takes its artists as templates (styles, fonts, text layouts) for the pictures it draws onto Agg
itself. The per-axis memos and batched tick drawing that keep matplotlib's own draw cheap are installed here
(:mod:`.batched_axis`), as are the cached text layouts (:mod:`.text_renderer`).
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.figure import Figure, SubplotParams
from matplotlib.ticker import AutoMinorLocator, MultipleLocator

from . import bbox_edges, style
from .batched_axis import batch_tick_drawing, memoise_spine_extent, memoise_ticks, memoise_title_position
from .layout import PlotLayout
from .text_renderer import TextCachingRendererAgg, cache_text_layout

# Agg renderers kept per canvas, by pixel size: the tight-bbox crop differs from the full figure by a few pixels,
# and matplotlib caches text metrics per renderer object, so a new renderer per draw would measure every label anew
RENDERERS_PER_CANVAS = 8


class RendererCachingCanvas(FigureCanvasAgg):
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
            while len(self._renderers) > RENDERERS_PER_CANVAS:
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


class TrainedFigure:
    """One reusable figure with the trained styling for one figure size (inches)."""

    def __init__(self, figsize: tuple[float, float]):
        self.figure = Figure(figsize=figsize, dpi=style.DPI, subplotpars=SubplotParams())
        self.canvas = RendererCachingCanvas(self.figure)
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
