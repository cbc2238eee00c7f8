"""The straightforward implementation of the Spec-o3 plotting routine: a new pyplot figure per call, tight layout,
tight-bbox savefig at dpi 80. It is the yardstick for the fast renderer (speed and pixels); not used in production.

It shares the pure-numpy layout decisions (points, sizes, tick tables, stats box) with the package so that a
difference between the two renderers can only come from how they draw.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import AutoMinorLocator, MultipleLocator  # noqa: E402

from spec_vetting.render import style  # noqa: E402
from spec_vetting.render.layout import plan  # noqa: E402


def render_baseline(wavelength, flux, wavelength_range=None, title: str = style.DEFAULT_TITLE) -> bytes:
    lay = plan(wavelength, flux, wavelength_range, title)
    fig, ax = plt.subplots(figsize=lay.figsize, dpi=style.DPI)
    try:
        ax.plot(lay.wavelength, lay.flux, color=style.LINE_COLOR, linewidth=style.LINE_WIDTH, alpha=style.LINE_ALPHA)
        ax.set_xlabel(style.X_LABEL, fontsize=style.LABEL_FONTSIZE, fontweight=style.LABEL_FONTWEIGHT)
        ax.set_ylabel(style.Y_LABEL, fontsize=style.LABEL_FONTSIZE, fontweight=style.LABEL_FONTWEIGHT)
        ax.set_title(lay.title, fontsize=style.TITLE_FONTSIZE, fontweight=style.TITLE_FONTWEIGHT, pad=style.TITLE_PAD)
        ax.grid(True, which="major", alpha=style.GRID_MAJOR_ALPHA, linewidth=style.GRID_MAJOR_WIDTH)
        ax.grid(True, which="minor", alpha=style.GRID_MINOR_ALPHA, linewidth=style.GRID_MINOR_WIDTH)
        ax.xaxis.set_major_locator(MultipleLocator(lay.x_major))
        ax.xaxis.set_minor_locator(MultipleLocator(lay.x_minor))
        ax.yaxis.set_minor_locator(AutoMinorLocator())
        ax.tick_params(which="both", direction=style.TICK_DIRECTION)
        ax.tick_params(which="major", labelsize=style.TICK_LABELSIZE)
        x, y, ha, va = style.STATS_CORNERS[lay.corner]
        ax.text(
            x,
            y,
            lay.stats_text,
            transform=ax.transAxes,
            fontsize=style.STATS_FONTSIZE,
            horizontalalignment=ha,
            verticalalignment=va,
            bbox=dict(style.STATS_BOX),
        )
        plt.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=style.DPI, bbox_inches="tight")
        return buf.getvalue()
    finally:
        plt.close(fig)
