"""Cheaper matplotlib axes for the trained figure: the same ticks, computed once per state and drawn in batches.

matplotlib spends most of a picture on its per-tick Python objects: each tick is a grid line, a tick mark and a
label, each an artist drawn on its own, and the tick positions, labels and their boxes are recomputed some thirty
times per picture (every layout pass, every spine's extent, every label and title placement asks again).
Instance-level replacements on our own figure (matplotlib's classes are left alone) cut that without changing
what is drawn:

* :func:`memoise_ticks` - an axis's ticks, tick label boxes, label placement and box answer from a memo while
  nothing they depend on changed (view interval, axes size and position, locators, dpi, renderer); the ticks
  also survive a change of axes size that leaves the locators' tick space the same (the tight-layout pass and
  the tight-bbox pass then share them);
* :func:`memoise_spine_extent`, :func:`memoise_title_position` - the same for spine extents and the title;
* :func:`batch_tick_drawing` - the axis draws all grid lines of one kind as one path and all tick marks of one kind
  as one marker call (same style, transform and clip as the per-tick artists), then the labels as before.

Each memo holds one entry: a hit means the previous computation was for the same state and nothing has run in
between that could move the objects it positioned, so skipping it leaves them exactly where it would put them.

Batching changes pixels only where two lines of one kind overlap (blended once instead of twice): ticks a few
pixels apart, which only a window holding a single point produces (matplotlib widens it and the tick table asks
for thousands of ticks). Such crowded ticks are drawn one by one as matplotlib does, so the pictures stay the same.
"""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.ticker import AutoLocator, FixedLocator, MaxNLocator, MultipleLocator, NullLocator
from matplotlib.transforms import IdentityTransform

from .text_renderer import cache_text_layout

# Agg snaps a path to whole pixels only when it has at most 1024 vertices; a grid line takes 3 (two ends and a
# NaN break), so batches stay under that to keep the lines as crisp as matplotlib draws them one by one
_TICKS_PER_BATCH = 300
# neighbouring ticks closer than this (pixels) may overlap with their antialiased edges: drawn one by one
_MIN_BATCH_SPACING_PX = 4.0
# locators whose ticks do not depend on the axes size (they never ask the axis for its tick space)
_SIZE_FREE_LOCATORS = (MultipleLocator, NullLocator, FixedLocator)


def memoise_ticks(axis) -> None:
    """Make ``axis._update_ticks()`` and the tick label boxes compute once per (view interval, axes box, locators,
    dpi) - and per renderer for the boxes."""
    memo: dict = {}

    def state() -> tuple:
        # the ticks depend on the axes size, not on where the axes sit: moving the figure origin (the tight-bbox
        # crop) keeps them; the label boxes key on the position
        ax = axis.axes
        return (
            tuple(axis.get_view_interval()),
            tuple(ax.bbox.size),
            id(axis.get_major_locator()),
            id(axis.get_minor_locator()),
            ax.figure.dpi,
        )

    _memoise_tick_values(axis, memo, state)
    _memoise_label_layout(axis, memo, state)


def update_ticks_lean(axis) -> list:
    """``axis._update_ticks()`` of matplotlib 3.10 (Axis._update_ticks), doing less for the same result.

    The same tick locations, labels and list of ticks to draw; what differs is the work: a tick already at its
    location is not moved again (``Tick.update_position`` only sets the location on its five artists, so moving it
    where it is changes nothing but the stale flags, and a full draw follows anyway), and the ticks to draw are
    picked with one array comparison instead of one transform per tick (the axis scale is linear here: its
    transform is the identity, and ``_interval_contains_close`` is the same comparison on each element).
    """
    major_locs = axis.get_majorticklocs()
    major_labels = axis.major.formatter.format_ticks(major_locs)
    major_ticks = axis.get_major_ticks(len(major_locs))
    _place(major_ticks, major_locs, major_labels)
    minor_locs = axis.get_minorticklocs()
    minor_labels = axis.minor.formatter.format_ticks(minor_locs)
    minor_ticks = axis.get_minor_ticks(len(minor_locs))
    _place(minor_ticks, minor_locs, minor_labels)
    ticks = [*major_ticks, *minor_ticks]
    if not ticks:
        return []
    low, high = axis.get_view_interval()
    if low > high:
        low, high = high, low
    a, b = float(low), float(high)  # identity transform: the interval as matplotlib transforms it
    if a > b:
        a, b = b, a
    tol = (b - a) * 1e-10  # _interval_contains_close's default rtol
    locs = np.array([tick.get_loc() for tick in ticks], dtype=float)
    keep = ((a - tol) <= locs) & (locs <= (b + tol))
    return [tick for tick, k in zip(ticks, keep.tolist(), strict=True) if k]


def _place(ticks, locs, labels) -> None:
    for tick, loc, label in zip(ticks, locs, labels, strict=False):  # as matplotlib zips them
        # skipped only when this function put it there and nothing moved it since: a new tick copies its
        # neighbour's ``_loc`` (Axis._copy_tick_props) while its artists are still at 0
        if not (getattr(tick, "_lean_loc", None) == loc and tick._loc == loc):
            tick.update_position(loc)
            tick._lean_loc = loc
        tick.label1.set_text(label)
        tick.label2.set_text(label)


def _memoise_tick_values(axis, memo: dict, state) -> None:
    """:func:`memoise_ticks`' part for the ticks and their label boxes (``memo`` and ``state`` shared)."""
    original = axis._update_ticks
    # the lean version relies on a linear axis (identity scale transform); any other scale keeps matplotlib's
    compute_ticks = ((lambda: update_ticks_lean(axis)) if isinstance(axis.get_transform(), IdentityTransform)
                     else original)
    compute_boxes = axis._get_ticklabel_bboxes

    def size_free_state(key: tuple) -> tuple:
        # the size reaches the ticks only through locators that ask ``axis.get_tick_space()``: equal answers give
        # the ticks of another axes size
        return (key[0], *key[2:], *(_tick_space_used(loc, axis) for loc in (axis.get_major_locator(),
                                                                             axis.get_minor_locator())))

    def update_ticks():
        key = state()
        if memo.get("ticks_key") != key:
            memo["ticks_key"] = key
            free = size_free_state(key)
            if memo.get("free_key") != free:  # the last computation was for other ticks
                memo["free_key"] = free
                memo["ticks"] = compute_ticks()
                for tick in (*axis.majorTicks, *axis.minorTicks):  # new ticks may have been created
                    cache_text_layout(tick.label1)
                    cache_text_layout(tick.label2)
            memo.pop("boxes_key", None)
        return list(memo["ticks"])

    def ticklabel_bboxes(ticks, renderer):
        # callers pass the list update_ticks just returned; anything else is measured afresh
        if ticks != memo.get("ticks"):
            return compute_boxes(ticks, renderer)
        key = (memo["ticks_key"], axis.axes.bbox.bounds, id(renderer), renderer.width, renderer.height)
        if memo.get("boxes_key") != key:
            memo["boxes_key"] = key
            memo["boxes"] = compute_boxes(ticks, renderer)
        boxes1, boxes2 = memo["boxes"]
        return [b.frozen() for b in boxes1], [b.frozen() for b in boxes2]

    axis._update_ticks = update_ticks
    axis._get_ticklabel_bboxes = ticklabel_bboxes


def _memoise_label_layout(axis, memo: dict, state) -> None:
    """:func:`memoise_ticks`' part for the axis label's placement and the axis box (``memo`` and ``state`` shared)."""
    compute_label_position = axis._update_label_position
    compute_tightbbox = axis.get_tightbbox

    def placed(renderer) -> tuple:
        # label placement and the axis box: the ticks' state, where the axes sit, the renderer measuring text
        return (state(), axis.axes.bbox.bounds, id(renderer), renderer.width, renderer.height, axis.label.get_text())

    def update_label_position(renderer):
        # idempotent for one state: placing the label again would put it where it already is
        key = placed(renderer)
        if memo.get("label_key") != key:
            compute_label_position(renderer)
            memo["label_key"] = key

    def get_tightbbox(renderer=None, *, for_layout_only=False):
        if renderer is None:
            renderer = axis.get_figure(root=True)._get_renderer()
        key = (placed(renderer), for_layout_only)
        if memo.get(("tight", for_layout_only)) != key:
            memo[("tight", for_layout_only)] = key
            memo[("tight_box", for_layout_only)] = compute_tightbbox(renderer, for_layout_only=for_layout_only)
        box = memo[("tight_box", for_layout_only)]
        return None if box is None else box.frozen()

    axis._update_label_position = update_label_position
    axis.get_tightbbox = get_tightbbox


def _tick_space_used(locator, axis):
    """What of the axis length ``locator`` uses: nothing (None) for locators that never ask for the tick space;
    for matplotlib's automatic locator (MaxNLocator, nbins "auto") the bin count it derives from the tick space,
    which it clips to at most 9 (MaxNLocator.__call__ in matplotlib 3.10); the tick space for any other locator."""
    if isinstance(locator, _SIZE_FREE_LOCATORS):
        return None
    space = axis.get_tick_space()
    if type(locator) in (MaxNLocator, AutoLocator) and locator._nbins == "auto":
        return ("bins", int(np.clip(space, max(1, locator._min_n_ticks - 1), 9)))
    return ("space", space)


def memoise_title_position(ax) -> None:
    """Make ``ax._update_title_position`` run once per (axes box, title, renderer, y axis state).

    It runs in every layout pass and draw and asks the y axis for its whole box each time; for one state it puts
    the title where it already is.
    """
    compute = ax._update_title_position
    memo: dict = {}

    def update_title_position(renderer):
        key = (
            ax.bbox.bounds,
            ax.viewLim.bounds,
            ax.title.get_text(),
            id(renderer),
            renderer.width,
            renderer.height,
            tuple(ax.yaxis._update_ticks()),
        )
        if memo.get("key") != key:
            # matplotlib asks the y axis for its whole box here only to have it place its offset text, and drops the
            # box: have it do just that placing while the title is placed
            whole_box = ax.yaxis.get_tightbbox
            ax.yaxis.get_tightbbox = lambda renderer=None, **_: place_offset_text(ax.yaxis, renderer)
            try:
                compute(renderer)
            finally:
                ax.yaxis.get_tightbbox = whole_box
            memo["key"] = key

    ax._update_title_position = update_title_position


def place_offset_text(axis, renderer) -> None:
    """What ``Axis.get_tightbbox`` does besides measuring (matplotlib 3.10): ticks updated, the axis label and the
    offset text placed, the offset text's string set."""
    if not axis.get_visible():
        return
    if renderer is None:
        renderer = axis.get_figure(root=True)._get_renderer()
    ticks = axis._update_ticks()
    axis._update_label_position(renderer)
    tlb1, tlb2 = axis._get_ticklabel_bboxes(ticks, renderer)
    axis._update_offset_text_position(tlb1, tlb2)
    axis.offsetText.set_text(axis.major.formatter.get_offset())


def memoise_spine_extent(spine) -> None:
    """Make ``spine.get_window_extent()`` compute once per (axes box, view limits, drawn ticks).

    matplotlib asks each spine for its extent (which re-lists the drawn ticks to pad for outward tick marks) some
    fifteen times per picture: in both layout passes, for every axis label placement and for the title.
    """
    compute = spine.get_window_extent
    memo: dict = {}

    def window_extent(renderer=None):
        ax = spine.axes
        axis = spine.axis
        ticks = tuple(axis._update_ticks()) if axis is not None and axis.get_visible() else ()
        key = (ax.bbox.bounds, ax.viewLim.bounds, ticks)
        if memo.get("key") != key:
            memo["key"] = key
            memo["extent"] = compute(renderer)
        return memo["extent"].frozen()

    spine.get_window_extent = window_extent


def batch_tick_drawing(axis) -> None:
    """Replace ``axis.draw`` with one that draws grid lines and tick marks of each kind in one call."""
    batches: dict[tuple[str, bool], tuple[int, Line2D]] = {}
    along_x = axis.axis_name == "x"

    def batch_line(template: Line2D, kind: str, major: bool) -> Line2D:
        # style, transform, clip and visibility follow the tick artists; copied again when matplotlib replaced them
        source, line = batches.get((kind, major), (None, None))
        if line is None:
            line = Line2D([], [])
            line.set_figure(template.get_figure(root=False))
        if source != id(template):
            line.update_from(template)
            batches[(kind, major)] = (id(template), line)
        return line

    def draw(renderer):
        if not axis.get_visible():
            return
        renderer.open_group("matplotlib.axis", gid=axis.get_gid())
        ticks = axis._update_ticks()
        tlb1, tlb2 = axis._get_ticklabel_bboxes(ticks, renderer)
        majors = set(axis.majorTicks)
        groups = ([t for t in ticks if t in majors], [t for t in ticks if t not in majors])
        for major, group in zip((True, False), groups, strict=True):
            if _crowded(axis, group):
                for tick in group:  # matplotlib's own order: overlapping lines blend one by one
                    tick.draw(renderer)
                continue
            for start in range(0, len(group), _TICKS_PER_BATCH):
                chunk = group[start : start + _TICKS_PER_BATCH]
                locs = np.array([t.get_loc() for t in chunk], dtype=float)
                for kind in ("gridline", "tick1line", "tick2line"):
                    template = getattr(chunk[0], kind)
                    if template.get_visible():
                        line = batch_line(template, kind, major)
                        line.set_data(*_tick_lines(template, locs, along_x, broken=kind == "gridline"))
                        line.draw(renderer)
            for tick in group:
                for label in (tick.label1, tick.label2):
                    if label.get_visible():
                        label.draw(renderer)
        axis._update_label_position(renderer)
        axis.label.draw(renderer)
        axis._update_offset_text_position(tlb1, tlb2)
        axis.offsetText.set_text(axis.major.formatter.get_offset())
        axis.offsetText.draw(renderer)
        renderer.close_group("matplotlib.axis")
        axis.stale = False

    axis.draw = draw


def _crowded(axis, ticks: list) -> bool:
    """Whether two neighbouring ticks are closer than a few pixels, so their grid lines overlap.

    Overlapping translucent lines drawn one by one darken where they overlap; one batched path would blend the
    overlap once. That happens only when matplotlib widens a one-point window and the tick table then asks for
    thousands of ticks; those pictures are drawn tick by tick, as matplotlib does.
    """
    if len(ticks) < 2:
        return False
    locs = np.sort(np.array([t.get_loc() for t in ticks], dtype=float))
    low, high = axis.get_view_interval()
    length = axis.axes.bbox.width if axis.axis_name == "x" else axis.axes.bbox.height
    px_per_unit = length / abs(high - low) if high != low else np.inf
    return float(np.diff(locs).min()) * px_per_unit < _MIN_BATCH_SPACING_PX


def _tick_lines(template: Line2D, locs: np.ndarray, along_x: bool, broken: bool) -> tuple[np.ndarray, np.ndarray]:
    """The data of one line through every tick: each tick line of ``template``'s shape moved to its location.

    A tick line holds its location once and its other coordinate as a sequence (a grid line spans (0, 1) in axes
    units, a tick mark sits at 0); grid lines are separated by a NaN point, where Agg starts a new sub-path.
    """
    xdata, ydata = template.get_data()
    across = np.asarray(ydata if along_x else xdata, dtype=float).ravel()
    if broken:
        across = np.append(across, np.nan)
    pos = np.repeat(locs, across.size)
    other = np.tile(across, locs.size)
    if broken:
        pos[across.size - 1 :: across.size] = np.nan
        pos, other = pos[:-1], other[:-1]
    return (pos, other) if along_x else (other, pos)
