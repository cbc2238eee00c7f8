"""A picture's PNG: the fast path where it reproduces the trained picture, the figure path where it does not.

Concurrency model
-----------------
matplotlib is not thread-safe (shared font objects, text layout caches, figures). The renderer keeps one figure per
size class per process and draws under a process-wide lock, never touching pyplot's global state, so:

* any thread may call :func:`render_png`; calls from several threads are serialised by the lock (correct, but no
  faster than one thread);
* for parallel rendering use worker processes (Dask workers, ``ProcessPoolExecutor``): each process has its own
  figures and lock, and nothing is shared between processes;
* from asyncio never call it on the event loop thread (a picture takes milliseconds): use
  ``await loop.run_in_executor(executor, render_spectrum, ...)`` with a thread executor (simple; rendering then
  competes with the loop for the GIL) or a process executor (scales with cores).

Paths
-----
:mod:`.fast_path` draws the picture straight onto Agg from matplotlib 3.10.5's layout rules (5-10 ms); it refuses
what it does not reproduce (a single point, crowded ticks, mathtext, a title that would move), and
:mod:`.figure_path` then lets matplotlib lay out and draw the trained figure. Both give the upstream routine's
pixels; the scanlines go to :mod:`.png`'s writer (unfiltered, deflate level 1).
"""

from __future__ import annotations

import threading

from . import fast_path, figure_path
from .layout import PlotLayout
from .png import encode_rows, png_rows

_LOCK = threading.Lock()


def render_png(lay: PlotLayout) -> bytes:
    with _LOCK:
        try:
            rgba = fast_path.draw_rgba(lay)
        except fast_path.Unsupported:
            rgba = figure_path.draw_with_figure(lay)
        # the scanlines are a copy: the renderer's buffer is overwritten by the next picture
        rows, colour_type = png_rows(rgba)
    return encode_rows(rows, colour_type, remember=True)
