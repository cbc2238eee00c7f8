"""Every constant of the plotting style Spec-o3 was trained on (docs/maintainers/protocol.md section 4).

Changing any value here changes the pictures the model sees; the fidelity test against ../shared/reference
catches it. Bump :data:`spec_vetting.render.RENDERER_VERSION` whenever the output pixels change on purpose.
"""

from __future__ import annotations

DPI = 80

# Figure size (inches) by plotted span (Å): (threshold, (width, height)), first match wins.
# Full view: span strictly greater than the threshold.
FULL_VIEW_SIZES: tuple[tuple[float, tuple[float, float]], ...] = (
    (3000.0, (10.0, 6.0)),
    (1000.0, (8.0, 5.0)),
    (200.0, (7.0, 4.5)),
)
FULL_VIEW_DEFAULT_SIZE = (6.0, 4.0)
# Window: span strictly less than the threshold.
WINDOW_SIZES: tuple[tuple[float, tuple[float, float]], ...] = (
    (50.0, (6.0, 4.0)),
    (200.0, (7.0, 4.5)),
    (1000.0, (8.0, 5.0)),
)
WINDOW_DEFAULT_SIZE = (9.0, 5.5)

# Width scaling by number of plotted points.
MANY_POINTS = 10_000  # more than this: wider
MANY_POINTS_WIDTH_FACTOR = 1.05
FEW_POINTS = 50  # fewer than this: narrower
FEW_POINTS_WIDTH_FACTOR = 0.95

# X tick spacing (major, minor) in Å by span: (span >= threshold) -> spacing, first match wins.
X_TICKS: tuple[tuple[float, tuple[float, float]], ...] = (
    (5000.0, (1000.0, 200.0)),
    (1000.0, (200.0, 50.0)),
    (500.0, (100.0, 20.0)),
    (300.0, (100.0, 25.0)),
    (150.0, (50.0, 25.0)),
    (100.0, (25.0, 5.0)),
    (50.0, (10.0, 2.0)),
    (20.0, (5.0, 1.0)),
    (5.0, (2.0, 0.5)),
)
X_TICKS_DEFAULT = (1.0, 0.2)

LINE_COLOR = "blue"
LINE_WIDTH = 1.0
LINE_ALPHA = 0.8

X_LABEL = "Wavelength (Å)"
Y_LABEL = "Flux"
LABEL_FONTSIZE = 12
LABEL_FONTWEIGHT = "bold"
TITLE_FONTSIZE = 14
TITLE_FONTWEIGHT = "bold"
TITLE_PAD = 20
DEFAULT_TITLE = "Spectrum"  # the RL data gave the tool no title

GRID_MAJOR_ALPHA = 0.3
GRID_MAJOR_WIDTH = 0.5
GRID_MINOR_ALPHA = 0.1
GRID_MINOR_WIDTH = 0.3

TICK_DIRECTION = "in"
TICK_LABELSIZE = 10

STATS_FONTSIZE = 9
STATS_BOX = {"boxstyle": "round", "facecolor": "white", "alpha": 0.8}
# Axes-fraction anchor of the stats box per corner: (x, y, horizontal alignment, vertical alignment).
STATS_CORNERS: dict[str, tuple[float, float, str, str]] = {
    "top-left": (0.02, 0.98, "left", "top"),
    "top-right": (0.98, 0.98, "right", "top"),
    "bottom-left": (0.02, 0.02, "left", "bottom"),
    "bottom-right": (0.98, 0.02, "right", "bottom"),
}
# Preference on ties (fewest points wins, earlier corner wins a tie).
CORNER_PREFERENCE = ("top-left", "top-right", "bottom-left", "bottom-right")
