"""Bbox edges and unions with scalar comparisons instead of numpy reductions: the same values, bit for bit.

matplotlib answers ``bbox.xmin`` with ``np.min`` over two points and ``Bbox.union`` with ``np.min`` over a list of
those; a layout pass asks ~1,000 times per picture, and each numpy reduction costs microseconds of call overhead
for a two-element comparison (about a tenth of a picture's CPU). The versions here compare the floats directly and
hand the cases where the choice of operand shows (a NaN anywhere, a tie that may be 0.0 against -0.0) back to
numpy, so every answer is numpy's own.
"""

from __future__ import annotations

import numpy as np
from matplotlib.transforms import Bbox, BboxBase

# matplotlib's own definitions (property objects and the union staticmethod), kept to hand back and compare with
_NUMPY = {name: BboxBase.__dict__[name] for name in ("xmin", "xmax", "ymin", "ymax", "union")}


def _edge(column: int, lowest: bool) -> property:
    reduce = np.min if lowest else np.max

    def edge(self):
        points = self.get_points()
        a, b = points[0, column], points[1, column]
        pick = (b if b <= a else a) if lowest else (b if b >= a else a)
        if pick == 0 or a != a or b != b:  # signed zeros and NaN: numpy decides
            return reduce(points[:, column])
        return pick

    edge.__doc__ = _NUMPY[f"{'xy'[column]}{'min' if lowest else 'max'}"].__doc__
    return property(edge)


def _union(bboxes):
    """Return a `Bbox` that contains all of the given *bboxes*."""
    if not len(bboxes):
        raise ValueError("'bboxes' cannot be empty")
    edges = []
    for name, reduce, pick in (("xmin", np.min, min), ("xmax", np.max, max), ("ymin", np.min, min),
                               ("ymax", np.max, max)):
        values = [getattr(bbox, name) for bbox in bboxes]
        value = pick(values)
        if value == 0 or any(v != v for v in values):  # signed zeros and NaN: numpy decides
            value = reduce(values)
        edges.append(value)
    x0, x1, y0, y1 = edges
    return Bbox([[x0, y0], [x1, y1]])


def install() -> None:
    """Put the scalar versions on matplotlib's Bbox classes (idempotent; the answers are unchanged)."""
    BboxBase.xmin = _edge(0, lowest=True)
    BboxBase.xmax = _edge(0, lowest=False)
    BboxBase.ymin = _edge(1, lowest=True)
    BboxBase.ymax = _edge(1, lowest=False)
    BboxBase.union = staticmethod(_union)


def uninstall() -> None:
    """Put matplotlib's own definitions back (for tests and benchmarks)."""
    for name, definition in _NUMPY.items():
        setattr(BboxBase, name, definition)


def numpy_versions() -> dict:
    """matplotlib's own functions: ``bbox -> edge`` for the four edges, ``bboxes -> Bbox`` for "union"."""
    return {name: (d.__func__ if name == "union" else d.fget) for name, d in _NUMPY.items()}
