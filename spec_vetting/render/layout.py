"""What a picture holds, decided before anything is drawn: the points, the figure size, the tick spacing, the
stats box text and corner. Pure numpy, no matplotlib, so both renderers (and tests) share one source of truth.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import RenderError
from . import style


@dataclass(frozen=True)
class PlotLayout:
    """Everything the renderers need for one picture."""

    wavelength: np.ndarray  # finite, sorted, inside the window
    flux: np.ndarray
    figsize: tuple[float, float]  # inches
    x_major: float  # Å between major x ticks
    x_minor: float
    stats_text: str
    corner: str  # a key of style.STATS_CORNERS
    title: str

    @property
    def n_points(self) -> int:
        return int(self.wavelength.size)


def clean_points(wavelength, flux) -> tuple[np.ndarray, np.ndarray]:
    """Drop non-finite points and sort by wavelength, as the trained routine does."""
    w = np.asarray(wavelength, dtype=np.float64).ravel()
    f = np.asarray(flux, dtype=np.float64).ravel()
    if w.shape != f.shape:
        raise RenderError(
            f"wavelength has {w.size} values but flux has {f.size}; pass arrays of the same length"
        )
    good = np.isfinite(w) & np.isfinite(f)
    if not good.all():
        w, f = w[good], f[good]
    order = np.argsort(w)
    return w[order], f[order]


def parse_window(wavelength_range) -> tuple[float, float] | None:
    """``None`` for the full view, else ``(min, max)`` as floats; RenderError for anything else."""
    if wavelength_range is None:
        return None
    if isinstance(wavelength_range, (str, bytes)) or not isinstance(wavelength_range, Sequence | np.ndarray):
        raise RenderError(f"wavelength_range must be None or a (min, max) pair, got {wavelength_range!r}")
    if len(wavelength_range) != 2:
        raise RenderError(f"wavelength_range must hold exactly two numbers, got {wavelength_range!r}")
    try:
        lo, hi = float(wavelength_range[0]), float(wavelength_range[1])
    except (TypeError, ValueError) as exc:
        raise RenderError(f"wavelength_range must hold two numbers, got {wavelength_range!r}") from exc
    return lo, hi


def figure_size(span: float, n_points: int, windowed: bool) -> tuple[float, float]:
    if windowed:
        width, height = next((size for limit, size in style.WINDOW_SIZES if span < limit), style.WINDOW_DEFAULT_SIZE)
    else:
        width, height = next(
            (size for limit, size in style.FULL_VIEW_SIZES if span > limit), style.FULL_VIEW_DEFAULT_SIZE
        )
    if n_points > style.MANY_POINTS:
        width *= style.MANY_POINTS_WIDTH_FACTOR
    elif n_points < style.FEW_POINTS:
        width *= style.FEW_POINTS_WIDTH_FACTOR
    return width, height


def x_tick_spacing(span: float) -> tuple[float, float]:
    return next((spacing for limit, spacing in style.X_TICKS if span >= limit), style.X_TICKS_DEFAULT)


def stats_text(wavelength: np.ndarray, flux: np.ndarray) -> str:
    return (
        f"Data points: {wavelength.size}\n"
        f"λ range: {wavelength[0]:.1f} - {wavelength[-1]:.1f} Å\n"
        f"Flux range: {flux.min():.2e} - {flux.max():.2e}"
    )


def emptiest_corner(wavelength: np.ndarray, flux: np.ndarray) -> str:
    """The corner holding the fewest points, splitting at the middle of the wavelength and flux ranges.

    As the trained routine counts them, the halves are closed: a point on a middle line counts in both corners
    beside it (and a point at the centre in all four).
    """
    mid_w = (wavelength[0] + wavelength[-1]) / 2.0
    mid_f = (flux.min() + flux.max()) / 2.0
    left, right = wavelength <= mid_w, wavelength >= mid_w
    top, bottom = flux >= mid_f, flux <= mid_f
    counts = {
        "top-left": np.count_nonzero(left & top),
        "top-right": np.count_nonzero(right & top),
        "bottom-left": np.count_nonzero(left & bottom),
        "bottom-right": np.count_nonzero(right & bottom),
    }
    return min(style.CORNER_PREFERENCE, key=lambda corner: counts[corner])


def plan(wavelength, flux, wavelength_range=None, title: str = style.DEFAULT_TITLE) -> PlotLayout:
    """Select the points and decide the layout; RenderError when nothing is left to draw."""
    window = parse_window(wavelength_range)
    w, f = clean_points(wavelength, flux)
    if window is not None:
        lo, hi = window
        inside = (w >= lo) & (w <= hi)
        w, f = w[inside], f[inside]
        if w.size == 0:
            a, b = wavelength_range[0], wavelength_range[1]
            raise RenderError(f"No data points in specified wavelength range ({_num(a)}, {_num(b)})")
    elif w.size == 0:
        raise RenderError("No finite data points to plot (every wavelength or flux value is NaN or infinite)")
    span = float(w[-1] - w[0])
    major, minor = x_tick_spacing(span)
    return PlotLayout(
        wavelength=w,
        flux=f,
        figsize=figure_size(span, int(w.size), window is not None),
        x_major=major,
        x_minor=minor,
        stats_text=stats_text(w, f),
        corner=emptiest_corner(w, f),
        title=str(title),
    )


def _num(x) -> str:
    """Print a window bound as Python prints it inside a tuple (ints stay ints), as the trained tool did."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return str(int(x))
    return repr(float(x))
