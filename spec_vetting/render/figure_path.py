"""The fallback path: matplotlib lays out and draws the trained figure, as savefig(bbox_inches="tight") does.

It draws the pictures :mod:`.fast_path` refuses (a single point, crowded ticks, mathtext, a title that would move),
with matplotlib's own tight layout, tight bounding box and artist draw on the size class's
:class:`~.trained_figure.TrainedFigure`.

Even so it is not the naive routine (benchmarks/render/baseline.py builds a new figure per picture: the axes and
their tick objects, a layout pass, a draw to find the tight box, a second draw): each size class's figure is built
once and updated (:mod:`.trained_figure`), the tight-bbox pass runs with drawing disabled, the axes answer
matplotlib's repeated questions from memos and draw grid lines and tick marks of one kind in one call
(:mod:`.batched_axis`), and text comes from cached bitmaps (:mod:`.text_renderer`). Each step is measured in
notes/render.md; the pixels are the upstream routine's (tests/test_render_fidelity.py).

It is written against matplotlib 3.10.5 (the release the model was trained with; :mod:`spec_vetting.render`
refuses any other): the private pieces it uses are ``_tight_bbox.adjust_bbox``, ``Axis._update_ticks`` /
``_get_ticklabel_bboxes`` / ``_update_label_position``, ``Axes._update_title_position``, ``Text._get_layout``
and RendererAgg's ``_prepare_font`` / ``_renderer``.
"""

from __future__ import annotations

import numpy as np
from matplotlib import _tight_bbox  # private, but it is exactly what savefig uses

from .layout import PlotLayout
from .trained_figure import TrainedFigure

# savefig's default padding around the tight bounding box (rcParams["savefig.pad_inches"])
_PAD_INCHES = 0.1


def draw_rgba(figure: TrainedFigure) -> np.ndarray:
    """Tight layout, tight bounding box and one Agg draw, as savefig(bbox_inches="tight") does them."""
    fig = figure.figure
    renderer = figure.canvas.get_renderer()
    # minor ticks stay in both layout passes: their empty labels (zero-size boxes at their anchors) and tick
    # marks place the x label and keep the bottom spine's box when no major tick falls inside the view
    fig.tight_layout()
    bbox = fig.get_tightbbox(renderer).padded(_PAD_INCHES)
    restore = _tight_bbox.adjust_bbox(fig, bbox, figure.canvas.fixed_dpi)
    try:
        figure.canvas.draw()
        return np.asarray(figure.canvas.buffer_rgba())
    finally:
        restore()


FIGURES: dict[tuple[float, float], TrainedFigure] = {}


def figure_for(figsize: tuple[float, float]) -> TrainedFigure:
    # keyed on the exact floats, never rounded: 6 * 0.95 is 5.699999999999999 in the trained routine too, and the
    # tight-bbox crop truncates its pixel size, so a figure 5.7 inches wide can come out a pixel wider or narrower
    key = (float(figsize[0]), float(figsize[1]))
    fig = FIGURES.get(key)
    if fig is None:
        fig = FIGURES[key] = TrainedFigure(key)
    return fig


def draw_with_figure(lay: PlotLayout) -> np.ndarray:
    """The picture drawn by matplotlib on the size class's figure (the renderer's buffer: copy before the next)."""
    figure = figure_for(lay.figsize)
    figure.update(lay)
    return draw_rgba(figure)
