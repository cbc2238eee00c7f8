"""The trained plotting routine written the plain way: the renderers' oracle and speed yardstick.

It follows SPEC_O3_PROTOCOL.md section 4 step by step with pyplot: a new figure per picture, ``tight_layout`` and
``savefig(dpi=80, bbox_inches="tight")``, and takes nothing from ``spec_vetting`` (no shared layout code, no
shared constants), so a renderer checked against it is checked against something it could not have influenced.
It is pixel-identical to the upstream routine on all 365 pictures of ``../shared/reference/renders_mpl3105`` and
``renders_mpl3105_edges`` (``tests/test_render_fidelity.py`` holds it to them), which is what makes it an oracle
for views the references do not cover, and the routine the renderer's speed is measured against
(benchmarks/bench_render.py). Slow by nature (a new figure per call): tests use it on samples.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import AutoMinorLocator, MultipleLocator  # noqa: E402


def _figsize(span: float, n: int, windowed: bool) -> tuple[float, float]:
    if windowed:
        if span < 50:
            w, h = 6, 4
        elif span < 200:
            w, h = 7, 4.5
        elif span < 1000:
            w, h = 8, 5
        else:
            w, h = 9, 5.5
    elif span > 3000:
        w, h = 10, 6
    elif span > 1000:
        w, h = 8, 5
    elif span > 200:
        w, h = 7, 4.5
    else:
        w, h = 6, 4
    # integers times the factor, in this order: 6 * 0.95 is 5.699999999999999, as in training
    if n > 10000:
        w *= 1.05
    elif n < 50:
        w *= 0.95
    return w, h


def _x_spacing(span: float) -> tuple[float, float]:
    for limit, major, minor in ((5000, 1000, 200), (1000, 200, 50), (500, 100, 20), (300, 100, 25), (150, 50, 25),
                                (100, 25, 5), (50, 10, 2), (20, 5, 1), (5, 2, 0.5)):
        if span >= limit:
            return major, minor
    return 1, 0.2


def _stats_corner(w: np.ndarray, f: np.ndarray) -> tuple[float, float, str, str]:
    mid_w, mid_f = (w.min() + w.max()) / 2, (f.min() + f.max()) / 2
    counts = [  # closed halves; ties go to the earlier corner
        ((0.02, 0.98, "left", "top"), np.sum((w <= mid_w) & (f >= mid_f))),
        ((0.98, 0.98, "right", "top"), np.sum((w >= mid_w) & (f >= mid_f))),
        ((0.02, 0.02, "left", "bottom"), np.sum((w <= mid_w) & (f <= mid_f))),
        ((0.98, 0.02, "right", "bottom"), np.sum((w >= mid_w) & (f <= mid_f))),
    ]
    return min(counts, key=lambda item: item[1])[0]


def render_baseline(wavelength, flux, wavelength_range=None, title: str = "Spectrum") -> bytes:
    """PNG bytes of the trained picture of these points (rest-frame arrays, plotted with their own dtype)."""
    w, f = np.array(wavelength), np.array(flux)
    keep = np.isfinite(w) & np.isfinite(f)
    w, f = w[keep], f[keep]
    order = np.argsort(w)
    w, f = w[order], f[order]
    if wavelength_range is not None:
        lo, hi = wavelength_range
        inside = (w >= lo) & (w <= hi)
        w, f = w[inside], f[inside]
    if w.size == 0:
        raise ValueError("no point to draw")
    span = w.max() - w.min()
    fig, ax = plt.subplots(figsize=_figsize(span, w.size, wavelength_range is not None), dpi=80)
    try:
        ax.plot(w, f, color="blue", linewidth=1.0, alpha=0.8)
        ax.set_xlabel("Wavelength (Å)", fontsize=12, fontweight="bold")
        ax.set_ylabel("Flux", fontsize=12, fontweight="bold")
        ax.set_title(title, fontsize=14, fontweight="bold", pad=20)
        ax.grid(True, alpha=0.3, linewidth=0.5)
        ax.grid(True, which="minor", alpha=0.1, linewidth=0.3)
        ax.tick_params(axis="both", which="major", labelsize=10, direction="in")
        ax.tick_params(axis="both", which="minor", direction="in")
        major, minor = _x_spacing(span)
        ax.xaxis.set_major_locator(MultipleLocator(major))
        ax.xaxis.set_minor_locator(MultipleLocator(minor))
        ax.yaxis.set_minor_locator(AutoMinorLocator())
        plt.tight_layout()
        x, y, ha, va = _stats_corner(w, f)
        text = (f"Data points: {w.size}\nλ range: {w.min():.1f} - {w.max():.1f} Å\n"
                f"Flux range: {f.min():.2e} - {f.max():.2e}")
        ax.text(x, y, text, transform=ax.transAxes, verticalalignment=va, horizontalalignment=ha, fontsize=9,
                bbox=dict(boxstyle="round", facecolor="white", alpha=0.8))
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
        return buf.getvalue()
    finally:
        plt.close(fig)
