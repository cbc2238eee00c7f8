"""The fast path: the trained picture drawn straight onto Agg, matplotlib's layout rules as arithmetic, its primitives
as calls.

:mod:`.figure_path` (the fallback) keeps a matplotlib figure and lets matplotlib lay it out and draw it; even
memoised, most of a picture is matplotlib's Python walking its artists (tight layout, tight bounding box, a draw
that visits ~200 artists), not Agg drawing. For the pictures the tool makes there is little to walk: one line, two
axes of ticks, four spines, six kinds of text. This module computes what matplotlib 3.10.5 computes for them - view
limits, ticks and their labels, the tight layout, the tight bounding box crop, every text position - with the same
floating-point operations in the same order (the same numpy calls where matplotlib makes them), and hands Agg the
same paths, transforms and graphics contexts in the same order, so the pixels are the same.

What it borrows from matplotlib: the locators and the formatter (called on plain numbers), text layout and glyph
bitmaps (:mod:`.text_renderer`, from the template artists of a :class:`~.trained_figure.TrainedFigure`), the stats
box's path (its box style), marker paths and Agg itself. What it does not do, it refuses with :class:`Unsupported`,
and the caller draws the picture with :mod:`.figure_path` instead: a single point, crowded or very many ticks,
mathtext in a string, a title that would have to move. tests/test_render_paths.py holds both paths to the upstream
routine's pixels on 1,182 generated views, tests/test_render_fidelity.py to the 365 shared references.

Why one file of about 700 lines: it follows matplotlib's own order (limits, ticks, both tight-layout passes,
the tight box, the crop, the draw) and the same floating-point operations in that order; split, the order that
makes the pixels the same would be spread over modules that each look free to reorder.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
from matplotlib import _path as _mpl_path
from matplotlib import text as _mpl_text
from matplotlib.backend_bases import GraphicsContextBase
from matplotlib.colors import to_rgba
from matplotlib.path import Path
from matplotlib.ticker import AutoLocator, AutoMinorLocator, MaxNLocator, MultipleLocator, ScalarFormatter
from matplotlib.transforms import Affine2D, Bbox

from . import style
from .layout import PlotLayout
from .text_renderer import TextCachingRendererAgg
from .trained_figure import TrainedFigure

# savefig's default padding around the tight bounding box (rcParams["savefig.pad_inches"])
_PAD_INCHES = 0.1
# tight_layout's default padding, a fraction of the font size (Figure.tight_layout(pad=1.08))
_TIGHT_PAD = 1.08
# ticks of one kind beyond this are drawn tick by tick by the figure renderer (Agg snaps only short paths)
_MAX_TICKS = 300
# neighbouring ticks closer than this (pixels) overlap: left to the figure renderer, which draws them one by one
_MIN_TICK_SPACING_PX = 4.0
_IDENTITY = np.identity(3)
_RENDERERS = 8


class Unsupported(Exception):
    """A picture this renderer does not reproduce; draw it with :mod:`.figure_path`."""


def _to(x0, y0, x1, y1) -> np.ndarray:
    """BboxTransformTo's matrix for the box with these corners."""
    return np.array([[x1 - x0, 0.0, x0], [0.0, y1 - y0, y0], [0.0, 0.0, 1.0]], float)


def _from(x0, y0, x1, y1) -> np.ndarray:
    """BboxTransformFrom's matrix."""
    x_scale = 1.0 / (x1 - x0)
    y_scale = 1.0 / (y1 - y0)
    return np.array([[x_scale, 0.0, -x0 * x_scale], [0.0, y_scale, -y0 * y_scale], [0.0, 0.0, 1.0]], float)


def _blend(mx: np.ndarray, my: np.ndarray) -> np.ndarray:
    """A blended transform's affine: x from ``mx``, y from ``my``."""
    return np.array([mx[0], my[1], [0.0, 0.0, 1.0]])


def _translation(tx: float, ty: float, dpi: float) -> np.ndarray:
    """ScaledTranslation((tx, ty) inches, dpi_scale_trans)'s matrix."""
    m = _IDENTITY.copy()
    m[:2, 2] = _apply(np.array([[dpi, 0.0, 0.0], [0.0, dpi, 0.0], [0.0, 0.0, 1.0]]), tx, ty)
    return m


def _apply(m: np.ndarray, x: float, y: float) -> tuple[float, float]:
    """A point through an affine matrix, as matplotlib's affine_transform computes it."""
    return (float(m[0, 0]) * x + float(m[0, 1]) * y + float(m[0, 2]),
            float(m[1, 0]) * x + float(m[1, 1]) * y + float(m[1, 2]))


def _box_through(m: np.ndarray, x0, y0, x1, y1) -> tuple[float, float, float, float]:
    """TransformedBbox's points: the four corners through ``m``, then their extremes."""
    corners = [_apply(m, x, y) for x, y in ((x0, y0), (x1, y0), (x0, y1), (x1, y1))]
    xs = [c[0] for c in corners]
    ys = [c[1] for c in corners]
    return min(xs), min(ys), max(xs), max(ys)


def _union(boxes) -> tuple[float, float, float, float]:
    return (min(min(b[0], b[2]) for b in boxes), min(min(b[1], b[3]) for b in boxes),
            max(max(b[0], b[2]) for b in boxes), max(max(b[1], b[3]) for b in boxes))


def _grid_position(left, bottom, right, top) -> tuple[float, float, float, float]:
    """The one subplot's box in figure fractions, as GridSpec.get_grid_positions computes it for a 1x1 grid.

    Its steps are kept (the division by 1 + wspace*0, the cumulative sum from 0) because ``top - (top - bottom)``
    is not always ``bottom``: the box must carry matplotlib's roundings, not the exact values."""
    cell_h = (top - bottom) / (1 + 0.2 * 0)
    cell_w = (right - left) / (1 + 0.2 * 0)
    tops_bottoms = top - np.cumsum(np.column_stack([[0], [cell_h * 1 / 1]]).flat)
    lefts_rights = left + np.cumsum(np.column_stack([[0], [cell_w * 1 / 1]]).flat)
    return (float(lefts_rights[0]), float(tops_bottoms[1]), float(lefts_rights[1]), float(tops_bottoms[0]))


class _AxisStub:
    """What matplotlib's locators and formatter ask of an axis: its view interval and major ticks."""

    def __init__(self, name: str):
        self.axis_name = name
        self.view = (0.0, 1.0)
        self.major_locs = np.array([])

    def get_view_interval(self):
        return self.view

    def get_majorticklocs(self):
        return self.major_locs

    def get_scale(self):
        return "linear"


class _TextKind:
    """One kind of text (tick label, axis label, title, ...): its template artist measures strings."""

    def __init__(self, artist):
        self.artist = artist
        self.prop = artist._fontproperties
        self.angle = artist.get_rotation()
        self._layouts: OrderedDict = OrderedDict()

    def layout(self, s: str, renderer, ha: str | None = None, va: str | None = None):
        """(box x0, y0, x1, y1 relative to the anchor, [(line, dx, dy)], descent) of ``s``."""
        key = (s, ha, va)
        found = self._layouts.get(key)
        if found is None:
            a = self.artist
            if ha is not None:
                a.set_horizontalalignment(ha)
                a.set_verticalalignment(va)
            a.set_text(s)
            bbox, info, descent = a._get_layout(renderer)
            (x0, y0), (x1, y1) = bbox.get_points()
            found = (float(x0), float(y0), float(x1), float(y1), [(line, x, y) for line, _, x, y in info], descent)
            if a._bbox_patch is not None:
                found = (*found, _mpl_text._get_textbox(a, renderer))
            self._layouts[key] = found
            while len(self._layouts) > 1024:
                self._layouts.popitem(last=False)
        return found

    def box(self, s: str, x: float, y: float, renderer, ha=None, va=None):
        """The window extent of ``s`` anchored at display (x, y) (Text.get_window_extent)."""
        x0, y0, x1, y1 = self.layout(s, renderer, ha, va)[:4]
        return (x0 + x, y0 + y, x1 + x, y1 + y)


def _line_gc(line, clip) -> GraphicsContextBase:
    """The graphics context Line2D.draw sets up for ``line``'s stroke."""
    gc = GraphicsContextBase()
    if clip is not None:
        gc.set_clip_rectangle(clip)
    gc.set_antialiased(line._antialiased)
    gc.set_linewidth(line._linewidth)
    gc.set_joinstyle(line._solidjoinstyle)
    gc.set_capstyle(line._solidcapstyle)
    gc.set_snap(line.get_snap())
    gc.set_foreground(to_rgba(line._color, line._alpha), isRGBA=True)
    gc.set_dashes(*line._dash_pattern)
    return gc


class _Templates:
    """The trained figure's artists, whose styles, fonts and text layouts the fast path uses."""

    def __init__(self):
        fig = TrainedFigure((6.0, 4.0))  # the one source of the styling
        self.figure = fig
        ax = fig.axes
        self.dpi = float(fig.figure.dpi)
        sp = fig.figure.subplotpars
        self.subplotpars = (sp.left, sp.bottom, sp.right, sp.top)
        self.font_size_points = 10.0  # rcParams["font.size"] as FontProperties reports it
        self.line = fig.line
        xt, yt = ax.xaxis.majorTicks[0], ax.yaxis.majorTicks[0]
        xm, ym = ax.xaxis.minorTicks[0], ax.yaxis.minorTicks[0]
        self.ticks = {("x", True): xt, ("x", False): xm, ("y", True): yt, ("y", False): ym}
        self.x_tick_label = _TextKind(xt.label1)
        self.y_tick_label = _TextKind(yt.label1)
        self.x_label = _TextKind(ax.xaxis.label)
        self.y_label = _TextKind(ax.yaxis.label)
        self.x_offset = _TextKind(ax.xaxis.offsetText)
        self.y_offset = _TextKind(ax.yaxis.offsetText)
        self.title = _TextKind(fig.title)
        self.stats = _TextKind(fig.stats)
        self.stats_patch = fig.stats._bbox_patch
        self.labelpad = (ax.xaxis.labelpad, ax.yaxis.labelpad)
        self.offset_pad = ax.xaxis.OFFSETTEXTPAD
        self.title_pad = float(style.TITLE_PAD)
        self.margins = (ax._xmargin, ax._ymargin)
        self.spines = [ax.spines[name] for name in ("left", "right", "bottom", "top")]
        self.x_major_formatter = ScalarFormatter()
        self.y_major_formatter = ScalarFormatter()
        self.x_stub, self.y_stub = _AxisStub("x"), _AxisStub("y")
        self.x_major_formatter.set_axis(self.x_stub)
        self.y_major_formatter.set_axis(self.y_stub)
        self.y_auto = AutoLocator()
        self.y_minor = AutoMinorLocator()
        self.y_minor.set_axis(self.y_stub)
        self._y_locators: dict[int, MaxNLocator] = {}
        self._ticks: OrderedDict = OrderedDict()
        self._x_locators: dict[float, MultipleLocator] = {}
        self.tick_label_size = 10.0
        self.markers = {}
        for key, tick in self.ticks.items():
            line = tick.tick1line
            marker = line._marker
            size_px = line._markersize * self.dpi / 72
            snap = marker.get_snap_threshold()
            self.markers[key] = (marker.get_path(), marker.get_transform().scale(size_px), line,
                                 (size_px >= snap) if snap is not None else None, marker.get_joinstyle(),
                                 marker.get_capstyle())
        self.renderers: OrderedDict[tuple, TextCachingRendererAgg] = OrderedDict()
        # text metrics depend on the dpi only: one small renderer measures for every picture
        self.measuring = TextCachingRendererAgg(1, 1, self.dpi)

    def ticks_for(self, view_x, view_y, x_major: float, x_minor: float, nbins: int) -> tuple:
        """The drawn ticks, major labels and offset texts of both axes for these limits and tick settings.

        A picture asks three times (two layout passes and the draw) and mostly for the same answer: the last few
        are kept.
        """
        key = (view_x, view_y, x_major, x_minor, nbins)
        found = self._ticks.get(key)
        if found is None:
            found = self._ticks[key] = (*self._axis_ticks(self.x_major_formatter, self.x_stub, view_x,
                                                          self.x_locator(x_major), self.x_locator(x_minor)),
                                        *self._axis_ticks(self.y_major_formatter, self.y_stub, view_y,
                                                          self.y_locator(nbins), self.y_minor))
            while len(self._ticks) > 4:
                self._ticks.popitem(last=False)
        return found

    @staticmethod
    def _axis_ticks(formatter, stub: _AxisStub, view, major_locator, minor_locator) -> tuple:
        """Axis._update_ticks for one axis: every major tick formatted (the formatter's offset depends on all of
        them), then those inside the view kept; minor ticks where no major one is."""
        stub.view = view
        major_all = major_locator.tick_values(*view)
        stub.major_locs = major_all
        minor_all = np.asarray(minor_locator() if isinstance(minor_locator, AutoMinorLocator)
                               else minor_locator.tick_values(*view))
        minor_all = _minor(minor_all, major_all, view)
        labels = formatter.format_ticks(major_all)
        offset = formatter.get_offset()
        keep = _drawn(major_all, view)
        kept_labels = [s for s, k in zip(labels, keep.tolist(), strict=True) if k]
        return major_all[keep], kept_labels, offset, minor_all[_drawn(minor_all, view)]

    def x_locator(self, step: float) -> MultipleLocator:
        loc = self._x_locators.get(step)
        if loc is None:
            loc = self._x_locators[step] = MultipleLocator(step)
        return loc

    def y_locator(self, nbins: int) -> MaxNLocator:
        loc = self._y_locators.get(nbins)
        if loc is None:
            loc = self._y_locators[nbins] = MaxNLocator(nbins=nbins, steps=[1, 2, 2.5, 5, 10])
        return loc

    def renderer(self, width: float, height: float) -> TextCachingRendererAgg:
        """An Agg renderer of this pixel size. Agg's canvas is the whole pixels; the fractional size is what Text
        flips its y by (``get_canvas_width_height``), so one canvas serves every size that truncates to it."""
        key = (int(width), int(height))
        r = self.renderers.get(key)
        if r is None:
            r = self.renderers[key] = TextCachingRendererAgg(width, height, self.dpi)
            while len(self.renderers) > _RENDERERS:
                self.renderers.popitem(last=False)
        else:
            self.renderers.move_to_end(key)
        r.width, r.height = width, height
        return r


_TEMPLATES: _Templates | None = None


def _templates() -> _Templates:
    global _TEMPLATES
    if _TEMPLATES is None:
        _TEMPLATES = _Templates()
    return _TEMPLATES


def _view_interval(d0: float, d1: float, locator, margin: float) -> tuple[float, float]:
    """Axes.autoscale_view's limits for data from d0 to d1 (linear scale, no sticky edges), then Axis._set_lim."""
    x0, x1 = locator.nonsingular(d0, d1)
    x0t, x1t = np.asanyarray([x0, x1])
    delta = (x1t - x0t) * margin
    if not np.isfinite(delta):
        delta = 0
    x0, x1 = np.asanyarray([x0t - delta, x1t + delta])
    x0, x1 = locator.view_limits(x0, x1)
    lo, hi = sorted((x0, x1))
    if lo == hi:
        raise Unsupported("singular view interval")
    v0, v1 = locator.nonsingular(lo, hi)
    return tuple(sorted([v0, v1]))


def _drawn(locs: np.ndarray, view: tuple[float, float]) -> np.ndarray:
    """Which ticks Axis._update_ticks draws: those inside the view interval, with its relative tolerance."""
    a, b = sorted(view)
    tol = (b - a) * 1e-10
    return ((a - tol) <= locs) & (locs <= (b + tol))


def _minor(minor_locs: np.ndarray, major_locs: np.ndarray, view) -> np.ndarray:
    """Axis.get_minorticklocs: minor ticks where no major tick is (within 1e-5 of the view span)."""
    lo, hi = sorted(np.asanyarray(view))
    tol = (hi - lo) * 1e-5
    minor_locs = np.asarray(minor_locs)
    if not len(minor_locs) or not len(major_locs):
        return minor_locs
    mask = np.isclose(minor_locs[:, None], np.asarray(major_locs)[None, :], atol=tol, rtol=0).any(axis=1)
    return minor_locs[~mask]


class _AxesState:
    """Everything about the axes at one position: transforms, ticks, tick labels and their boxes."""

    def __init__(self, t: _Templates, fig_m: np.ndarray, pos, view_x, view_y, x_major, x_minor, renderer):
        dpi = t.dpi
        self.pos = pos
        self.box = _box_through(fig_m, *pos)
        x0, y0, x1, y1 = self.box
        self.ta = _to(x0, y0, x1, y1)
        self.td = np.dot(np.dot(self.ta, _from(view_x[0], view_y[0], view_x[1], view_y[1])), _IDENTITY)
        self.clip = _box_through(self.ta, 0.0, 0.0, 1.0, 1.0)  # the axes patch's box: clip of line and grid
        self.x_trans = _blend(self.td, self.ta)
        self.y_trans = _blend(self.ta, self.td)
        self.view_x, self.view_y = view_x, view_y

        # y ticks come from AutoLocator, whose bin count follows the axes height
        ends = (_apply(self.ta, 0.0, 0.0), _apply(self.ta, 0.0, 1.0))
        length = ((ends[1][1] - ends[0][1]) / dpi) * 72
        space = int(np.floor(length / (t.tick_label_size * 2)))
        nbins = int(np.clip(space, max(1, t.y_auto._min_n_ticks - 1), 9))
        (self.x_major, self.x_labels, self.x_offset_text, self.x_minor, self.y_major, self.y_labels,
         self.y_offset_text, self.y_minor) = t.ticks_for(view_x, view_y, x_major, x_minor, nbins)
        for locs, along, length_px in ((self.x_major, 0, x1 - x0), (self.x_minor, 0, x1 - x0),
                                        (self.y_major, 1, y1 - y0), (self.y_minor, 1, y1 - y0)):
            view = view_x if along == 0 else view_y
            if len(locs) > _MAX_TICKS:
                raise Unsupported("too many ticks")
            if len(locs) >= 2:
                spacing = float(np.diff(np.sort(locs)).min()) * length_px / abs(view[1] - view[0])
                if spacing < _MIN_TICK_SPACING_PX:
                    raise Unsupported("crowded ticks")

        # tick label anchors and boxes
        xt, yt = t.ticks[("x", True)], t.ticks[("y", True)]
        self.x_label_trans = np.dot(_translation(0, -1 * xt._pad / 72, dpi), self.x_trans)
        self.y_label_trans = np.dot(_translation(-1 * yt._pad / 72, 0, dpi), self.y_trans)
        self.x_anchors = [_apply(self.x_label_trans, float(loc), 0.0) for loc in self.x_major]
        self.y_anchors = [_apply(self.y_label_trans, 0.0, float(loc)) for loc in self.y_major]
        self.x_boxes = [t.x_tick_label.box(s, x, y, renderer)
                        for s, (x, y) in zip(self.x_labels, self.x_anchors, strict=True) if s]
        self.y_boxes = [t.y_tick_label.box(s, x, y, renderer)
                        for s, (x, y) in zip(self.y_labels, self.y_anchors, strict=True) if s]
        # Every visible tick label counts where matplotlib places the axis label and the offset text, the minor
        # ticks' empty ones too: Text.get_window_extent gives an empty string a zero-size box at its anchor. They
        # decide where nothing else does: a window with no major tick inside puts the x label under the minor
        # labels' anchors, a tick pad below the spine (the tight-bbox filters drop them from every other union).
        xm, ym = t.ticks[("x", False)], t.ticks[("y", False)]
        x_minor_trans = np.dot(_translation(0, -1 * xm._pad / 72, dpi), self.x_trans)
        y_minor_trans = np.dot(_translation(-1 * ym._pad / 72, 0, dpi), self.y_trans)
        x_points = [*(a for s, a in zip(self.x_labels, self.x_anchors, strict=True) if not s),
                    *(_apply(x_minor_trans, float(loc), 0.0) for loc in self.x_minor)]
        y_points = [*(a for s, a in zip(self.y_labels, self.y_anchors, strict=True) if not s),
                    *(_apply(y_minor_trans, 0.0, float(loc)) for loc in self.y_minor)]
        x_label_boxes = self.x_boxes + [(x, y, x, y) for x, y in x_points]
        y_label_boxes = self.y_boxes + [(x, y, x, y) for x, y in y_points]

        # spines (Spine.get_window_extent: the path's extent, padded inward for the tick marks)
        vx, vy = view_x, view_y
        self.spine_paths = [
            (np.array([[0.0, vy[0]], [0.0, vy[1]]]), self.y_trans),
            (np.array([[1.0, vy[0]], [1.0, vy[1]]]), self.y_trans),
            (np.array([[vx[0], 0.0], [vx[1], 0.0]]), self.x_trans),
            (np.array([[vx[0], 1.0], [vx[1], 1.0]]), self.x_trans),
        ]
        extents = []
        for verts, m in self.spine_paths:
            pts = _mpl_path.affine_transform(verts, m)
            extents.append((float(pts[:, 0].min()), float(pts[:, 1].min()), float(pts[:, 0].max()),
                            float(pts[:, 1].max())))
        left, right, bottom, top = extents
        padded_left, padded_bottom = [left], [bottom]
        # padded by the first drawn major and the first drawn minor tick: only a tick gives the bottom spine a
        # height, and the tight box drops boxes without one (a view with no major x tick keeps its spine's ends
        # through a minor tick: one pixel of the canvas width in some narrow figures)
        for major, locs_x, locs_y in ((True, self.x_major, self.y_major), (False, self.x_minor, self.y_minor)):
            if len(locs_y):
                tick = t.ticks[("y", major)]
                padin = 1 * tick._size / 72 * dpi
                padded_left.append((left[0] - 0 * tick._size / 72 * dpi, left[1], left[2] + padin, left[3]))
            if len(locs_x):
                tick = t.ticks[("x", major)]
                padin = 1 * tick._size / 72 * dpi
                padded_bottom.append((bottom[0], bottom[1] - 0 * tick._size / 72 * dpi, bottom[2], bottom[3] + padin))
        self.spine_boxes = [_union(padded_left), right, _union(padded_bottom), top]

        # axis labels: below / left of the tick labels and the spine
        below = _union([*x_label_boxes, self.spine_boxes[2]])
        self.x_label_anchor = _apply(_blend(self.ta, _IDENTITY), 0.5, below[1] - t.labelpad[0] * dpi / 72)
        beside = _union([*y_label_boxes, self.spine_boxes[0]])
        self.y_label_anchor = _apply(_blend(_IDENTITY, self.ta), beside[0] - t.labelpad[1] * dpi / 72, 0.5)
        self.x_label_box = t.x_label.box(style.X_LABEL, *self.x_label_anchor, renderer)
        self.y_label_box = t.y_label.box(style.Y_LABEL, *self.y_label_anchor, renderer)

        # offset texts: under the x tick labels, over the axes' top-left corner
        under = _union(x_label_boxes)[1] if x_label_boxes else y0
        self.x_offset_anchor = _apply(_blend(self.ta, _IDENTITY), 1.0, under - t.offset_pad * dpi / 72)
        self.y_offset_anchor = _apply(_blend(self.ta, _IDENTITY), 0.0, y1 + t.offset_pad * dpi / 72)

        # the title, above the axes
        self.title_trans = np.dot(_translation(0.0, t.title_pad / 72, dpi), self.ta)

    def axis_boxes(self, t: _Templates, renderer) -> list:
        """Both axes' Axis.get_tightbbox(for_layout_only=True): offset text, tick labels, the label collapsed."""
        boxes = []
        for offset_kind, offset_text, offset_anchor, tick_boxes, label_box, along in (
                (t.x_offset, self.x_offset_text, self.x_offset_anchor, self.x_boxes, self.x_label_box, "x"),
                (t.y_offset, self.y_offset_text, self.y_offset_anchor, self.y_boxes, self.y_label_box, "y")):
            parts = []
            if offset_text:
                parts.append(offset_kind.box(offset_text, *offset_anchor, renderer))
            parts.extend(tick_boxes)
            x0, y0, x1, y1 = label_box
            if along == "x" and x1 - x0 > 0:
                x0 = (x0 + x1) / 2 - 0.5
                x1 = x0 + 1.0
            if along == "y" and y1 - y0 > 0:
                y0 = (y0 + y1) / 2 - 0.5
                y1 = y0 + 1.0
            parts.append((x0, y0, x1, y1))
            parts = [b for b in parts if 0 < b[2] - b[0] < np.inf and 0 < b[3] - b[1] < np.inf]
            if parts:
                boxes.append(_union(parts))
        return boxes

    def title_box(self, t: _Templates, title: str, renderer, full: bool):
        if not title:
            return None
        anchor = _apply(self.title_trans, 0.5, 1.0)
        box = t.title.box(title, *anchor, renderer)
        if box[1] < self.box[3]:
            raise Unsupported("the title would move")  # Axes._update_title_position: not reproduced here
        if self.y_offset_text:
            off = t.y_offset.box(self.y_offset_text, *self.y_offset_anchor, renderer)
            if off[0] <= box[2] and box[0] <= off[2] and off[1] <= box[3] and box[1] <= off[3]:
                raise Unsupported("the title would move above the offset text")
        if not full and box[2] - box[0] > 0:
            x0 = (box[0] + box[2]) / 2 - 0.5
            box = (x0, box[1], x0 + 1.0, box[3])
        return box

    def stats_anchor(self, lay: PlotLayout):
        x, y, ha, va = style.STATS_CORNERS[lay.corner]
        return _apply(self.ta, x, y), ha, va

    def tight_box(self, t: _Templates, lay: PlotLayout, renderer, for_layout_only: bool):
        """Axes.get_tightbbox, with its default extra artists (the stats text, the spines, the axes patch) where they
        have an area."""
        boxes = self.axis_boxes(t, renderer)
        boxes.append(self.box)
        title = self.title_box(t, lay.title, renderer, full=not for_layout_only)
        if title is not None:
            boxes.append(title)
        (sx, sy), ha, va = self.stats_anchor(lay)
        extra = [t.stats.box(lay.stats_text, sx, sy, renderer, ha, va), *self.spine_boxes, self.clip]
        boxes.extend(b for b in extra if 0 < b[2] - b[0] < np.inf and 0 < b[3] - b[1] < np.inf)
        return _union([b for b in boxes if b[2] - b[0] != 0 or b[3] - b[1] != 0])


def _layout(t: _Templates, lay: PlotLayout):
    """Tight layout, then the tight bounding box: (axes position, crop box in inches, view limits)."""
    dpi = t.dpi
    width_in, height_in = float(lay.figsize[0]), float(lay.figsize[1])
    fig_box = _box_through(np.array([[dpi, 0.0, 0.0], [0.0, dpi, 0.0], [0.0, 0.0, 1.0]]), 0.0, 0.0, width_in,
                           height_in)
    fig_m = _to(*fig_box)
    w, f = lay.wavelength, lay.flux
    view_x = _view_interval(w[0], w[-1], t.x_locator(lay.x_major), t.margins[0])
    view_y = _view_interval(f.min(), f.max(), t.y_auto, t.margins[1])
    renderer = t.measuring

    # Figure.tight_layout (one pass, from the default subplot box)
    default = _grid_position(*t.subplotpars)
    first = _AxesState(t, fig_m, default, view_x, view_y, lay.x_major, lay.x_minor, renderer)
    raw = first.tight_box(t, lay, renderer, for_layout_only=True)
    inv = np.linalg.inv(fig_m)
    corners = _mpl_path.affine_transform(np.array([[raw[0], raw[1]], [raw[2], raw[3]]]), inv)
    tx0, ty0 = float(min(corners[:, 0])), float(min(corners[:, 1]))
    tx1, ty1 = float(max(corners[:, 0])), float(max(corners[:, 1]))
    hspaces = np.zeros((1, 2))
    vspaces = np.zeros((2, 1))
    hspaces[0, 0] += default[0] - tx0
    hspaces[0, 1] += tx1 - default[2]
    vspaces[0, 0] += ty1 - default[3]
    vspaces[1, 0] += default[1] - ty0
    pad_inch = _TIGHT_PAD * (t.font_size_points / 72)
    margin_left = max(hspaces[:, 0].max(), 0) + pad_inch / width_in
    margin_right = max(hspaces[:, -1].max(), 0) + pad_inch / width_in
    margin_top = max(vspaces[0, :].max(), 0) + pad_inch / height_in
    margin_bottom = max(vspaces[-1, :].max(), 0) + pad_inch / height_in
    if margin_left + margin_right >= 1 or margin_bottom + margin_top >= 1:
        raise Unsupported("tight layout gives up on this figure")
    left, right, bottom, top = margin_left, 1 - margin_right, margin_bottom, 1 - margin_top
    # TightLayoutEngine passes rect=(0, 0, 1, 1): a second pass takes the margins from that rect moved by the
    # first pass's, which rounds right and top once more (get_tight_layout_figure)
    rect_right, rect_top = 1 - (1 - right), 1 - (1 - top)
    left, bottom = 0 + left, 0 + bottom
    if not (left and bottom and rect_right and rect_top):
        raise Unsupported("tight layout recomputes a margin")
    margin_right, margin_top = 1 - rect_right, 1 - rect_top
    if left + margin_right >= 1 or bottom + margin_top >= 1:
        raise Unsupported("tight layout gives up on this figure")
    right, top = 1 - margin_right, 1 - margin_top
    if left >= right or bottom >= top:
        raise Unsupported("tight layout gives up on this figure")
    pos = _grid_position(left, bottom, right, top)

    # Figure.get_tightbbox at the new position, in inches, padded as savefig pads it
    second = _AxesState(t, fig_m, pos, view_x, view_y, lay.x_major, lay.x_minor, renderer)
    # (the figure has no artist of its own in the layout: its box is the axes' box)
    px = second.tight_box(t, lay, renderer, for_layout_only=False)
    if not (np.isfinite(px[2] - px[0]) and np.isfinite(px[3] - px[1])):
        raise Unsupported("an unbounded figure")
    inv_dpi = np.linalg.inv(np.array([[dpi, 0.0, 0.0], [0.0, dpi, 0.0], [0.0, 0.0, 1.0]]))
    inches = np.array(_box_through(inv_dpi, *px)).reshape(2, 2) + [[-_PAD_INCHES, -_PAD_INCHES],
                                                                   [_PAD_INCHES, _PAD_INCHES]]
    return pos, inches, view_x, view_y, fig_box


def draw_rgba(lay: PlotLayout) -> np.ndarray:
    """The picture's RGBA buffer (the renderer's own memory: copy it before the next picture), or Unsupported."""
    if lay.n_points < 2:
        raise Unsupported("a single point")
    if "$" in lay.title or "$" in lay.stats_text:
        raise Unsupported("mathtext")
    t = _templates()
    dpi = t.dpi
    pos, inches, view_x, view_y, fig_box = _layout(t, lay)

    # _tight_bbox.adjust_bbox: the figure cropped to the box, the scale kept
    x0c, y0c = _apply(np.array([[dpi, 0.0, 0.0], [0.0, dpi, 0.0], [0.0, 0.0, 1.0]]), inches[0, 0], inches[0, 1])
    w1, h1 = fig_box[2] - fig_box[0], fig_box[3] - fig_box[1]
    size = inches[1] - inches[0]
    boxout = (-x0c, -y0c, -x0c + w1, -y0c + h1)
    fig_m = _to(*boxout)
    canvas = _box_through(np.array([[dpi, 0.0, 0.0], [0.0, dpi, 0.0], [0.0, 0.0, 1.0]]), 0.0, 0.0,
                          0.0 + size[0], 0.0 + size[1])
    width, height = canvas[2] - canvas[0], canvas[3] - canvas[1]
    renderer = t.renderer(width, height)
    ax = _AxesState(t, fig_m, pos, view_x, view_y, lay.x_major, lay.x_minor, renderer)
    ax.title_box(t, lay.title, renderer, full=True)  # only for its check: raises where the title would move

    # the figure patch: opaque white, unantialiased, over every pixel (a reused canvas needs no clearing first)
    np.asarray(renderer.buffer_rgba())[...] = 255
    agg = renderer._renderer
    clip = Bbox([[ax.clip[0], ax.clip[1]], [ax.clip[2], ax.clip[3]]])

    text_gc = _text_gc()
    _draw_axis(t, renderer, agg, ax, "x", clip, text_gc)
    _draw_axis(t, renderer, agg, ax, "y", clip, text_gc)

    # the spectrum
    line = t.line
    gc = _line_gc(line, clip)
    path = Path(np.column_stack([lay.wavelength, lay.flux]).astype(float))
    agg.draw_path(gc, path, ax.td, None)

    # the spines
    for spine, (verts, m) in zip(t.spines, ax.spine_paths, strict=True):
        agg.draw_path(_patch_gc(spine), Path(verts), m, spine._facecolor if spine._facecolor[3] else None)

    # the stats box and its text
    (sx, sy), ha, va = ax.stats_anchor(lay)
    *layout, textbox = t.stats.layout(lay.stats_text, renderer, ha, va)
    patch = t.stats_patch
    x_box, y_box, w_box, h_box = textbox
    patch.set_bounds(0.0, 0.0, w_box, h_box)
    patch.set_mutation_scale(t.stats.prop.get_size_in_points() * dpi / 72)
    box_m = Affine2D().rotate_deg(t.stats.angle).translate(sx + x_box, sy + y_box).get_matrix()
    agg.draw_path(_patch_gc(patch), patch.get_path(), box_m, patch._facecolor if patch._facecolor[3] else None)
    _draw_text(renderer, text_gc, t.stats, lay.stats_text, sx, sy, height, layout)

    # the title
    if lay.title:
        tx, ty = _apply(ax.title_trans, 0.5, 1.0)
        _draw_text(renderer, text_gc, t.title, lay.title, tx, ty, height)
    return np.asarray(renderer.buffer_rgba())


def _patch_gc(patch) -> GraphicsContextBase:
    """The graphics context Patch.draw sets up for ``patch``'s outline (a spine, the stats box)."""
    gc = GraphicsContextBase()
    gc.set_foreground(patch._edgecolor, isRGBA=True)
    gc.set_linewidth(0 if patch._edgecolor[3] == 0 else patch._linewidth)
    gc.set_dashes(*patch._dash_pattern)
    gc.set_capstyle(patch._capstyle)
    gc.set_joinstyle(patch._joinstyle)
    gc.set_antialiased(patch._antialiased)
    gc.set_snap(patch.get_snap())
    gc.set_alpha(patch._alpha)
    return gc


def _text_gc() -> GraphicsContextBase:
    gc = GraphicsContextBase()
    gc.set_foreground((0.0, 0.0, 0.0, 1.0), isRGBA=True)
    gc.set_alpha(None)
    gc.set_antialiased(True)
    return gc


def _draw_text(renderer, gc, kind: _TextKind, s: str, x: float, y: float, canvas_height: float, layout=None) -> None:
    """Text.draw: each line at the anchor plus its offset, flipped, through the caching renderer (``gc``: every
    text's context is the same, black and unclipped, so one serves them all)."""
    if not s:
        return
    if layout is None:
        layout = kind.layout(s, renderer)
    lines = layout[4]
    for line, dx, dy in lines:
        renderer.draw_text(gc, dx + x, canvas_height - (dy + y), line, kind.prop, kind.angle)


def _draw_axis(t: _Templates, renderer, agg, ax: _AxesState, which: str, clip: Bbox, text_gc) -> None:
    """One axis as the batched axis draws it: per kind, grid lines in one path, tick marks in one call, labels."""
    height = renderer.height
    along_x = which == "x"
    trans = ax.x_trans if along_x else ax.y_trans
    groups = ((True, ax.x_major if along_x else ax.y_major), (False, ax.x_minor if along_x else ax.y_minor))
    for major, locs in groups:
        if not len(locs):
            continue
        tick = t.ticks[(which, major)]
        grid = tick.gridline
        if grid.get_visible():
            across = np.append(np.asarray(grid.get_ydata() if along_x else grid.get_xdata(), dtype=float).ravel(),
                               np.nan)
            pos = np.repeat(locs, across.size)
            other = np.tile(across, locs.size)
            pos[across.size - 1:: across.size] = np.nan
            pos, other = pos[:-1], other[:-1]
            xy = np.column_stack((pos, other) if along_x else (other, pos)).astype(float)
            agg.draw_path(_line_gc(grid, clip), Path(xy), trans, None)
        marker_path, marker_trans, line, snap, join, cap = t.markers[(which, major)]
        if line.get_visible():
            gc = GraphicsContextBase()
            gc.set_linewidth(line._markeredgewidth)
            gc.set_antialiased(line._antialiased)
            ec = to_rgba(line.get_markeredgecolor(), line._alpha)
            fc = to_rgba(line._get_markerfacecolor(), line._alpha)
            gc.set_foreground(ec, isRGBA=True)
            gc.set_snap(snap)
            gc.set_joinstyle(join)
            gc.set_capstyle(cap)
            across = np.asarray(line.get_ydata() if along_x else line.get_xdata(), dtype=float).ravel()
            pos = np.repeat(locs, across.size)
            other = np.tile(across, locs.size)
            xy = np.column_stack((pos, other) if along_x else (other, pos)).astype(float)
            agg.draw_markers(gc, marker_path, marker_trans, Path(xy), trans, fc)
        if major:
            kind = t.x_tick_label if along_x else t.y_tick_label
            labels = ax.x_labels if along_x else ax.y_labels
            anchors = ax.x_anchors if along_x else ax.y_anchors
            for s, (x, y) in zip(labels, anchors, strict=True):
                _draw_text(renderer, text_gc, kind, s, x, y, height)
    if along_x:
        _draw_text(renderer, text_gc, t.x_label, style.X_LABEL, *ax.x_label_anchor, height)
        _draw_text(renderer, text_gc, t.x_offset, ax.x_offset_text, *ax.x_offset_anchor, height)
    else:
        _draw_text(renderer, text_gc, t.y_label, style.Y_LABEL, *ax.y_label_anchor, height)
        _draw_text(renderer, text_gc, t.y_offset, ax.y_offset_text, *ax.y_offset_anchor, height)
