"""The pictures Spec-o3 reads: a spectrum plot in the exact style the model was trained on, drawn fast.

Public API:

* :func:`render_spectrum` - PNG bytes of the full view or a wavelength window (arrays already in the rest frame);
* :data:`RENDERER_VERSION` - recorded with every verdict; bumped whenever the output pixels change;
* :func:`image_tokens` and :data:`SIZE_CLASSES` - the Qwen2.5-VL image-token cost of each picture size.

Thread safety and use from asyncio or worker processes: see :mod:`spec_vetting.render.picture`.
"""

from __future__ import annotations

import matplotlib

from ..errors import PlottingEnvironmentError

#: the matplotlib release Spec-o3's training environment pinned (its RL requirements file): the trained pictures
#: are that release's text layout, and the fast renderer replaces some of its internals, so no other is accepted
REQUIRED_MATPLOTLIB = "3.10.5"
#: the FreeType that matplotlib 3.10.5's wheels bundle (built "local"): glyph bitmaps are FreeType's, and a
#: matplotlib built against the system's FreeType rasterises the same text differently (matplotlib's own image
#: tests demand this build for the same reason)
REQUIRED_FREETYPE = ("2.6.1", "local")


def check_matplotlib_version(found: str = matplotlib.__version__,
                             freetype: tuple[str, str] | None = None) -> None:
    """Raise :class:`PlottingEnvironmentError` (an ImportError), in one line naming what is installed and what to
    install, unless matplotlib is :data:`REQUIRED_MATPLOTLIB` built with :data:`REQUIRED_FREETYPE`."""
    if found != REQUIRED_MATPLOTLIB:
        raise PlottingEnvironmentError(
            f"the pictures need matplotlib {REQUIRED_MATPLOTLIB} exactly (the version Spec-o3 was trained with; "
            f"other releases lay text out differently), but matplotlib {found} is installed: "
            f"pip install 'matplotlib=={REQUIRED_MATPLOTLIB}'"
        )
    if freetype is None:
        from matplotlib import ft2font

        freetype = (ft2font.__freetype_version__, ft2font.__freetype_build_type__)
    if tuple(freetype) != REQUIRED_FREETYPE:
        raise PlottingEnvironmentError(
            f"the pictures need matplotlib {REQUIRED_MATPLOTLIB} with the FreeType its wheels bundle "
            f"({REQUIRED_FREETYPE[0]}, {REQUIRED_FREETYPE[1]} build), but this matplotlib uses FreeType "
            f"{freetype[0]} ({freetype[1]} build), which draws glyphs differently: "
            f"pip install --force-reinstall --only-binary=:all: 'matplotlib=={REQUIRED_MATPLOTLIB}'"
        )


check_matplotlib_version()

# The fast renderer draws on FigureCanvasAgg directly and never touches pyplot, so importing this package does not
# switch the user's matplotlib backend. Imported only after the version check on purpose (E402): the renderer
# relies on that matplotlib release's internals, so a wrong release fails with the message above, not deep inside.
from . import style  # noqa: E402
from .layout import plan  # noqa: E402
from .picture import render_png  # noqa: E402
from .tokens import SIZE_CLASSES, image_tokens, smart_resize  # noqa: E402

#: bump when the pixels change on purpose (style, layout or matplotlib release) or may change (drawing method);
#: "spec-o3-mpl3.10.5" names the trained style and the matplotlib release that reproduces it. r3: ported from
#: matplotlib 3.11.2 to 3.10.5, the release the model was trained with (text layout moves by a pixel between them;
#: pixel-identical to the upstream routine's renders under 3.10.5 on every reference case); the stats-box corner
#: counts points on a middle line on both sides, as the trained routine does. r4: views with no major x tick inside
#: (sub-Ångström windows, 2-3 close points) place the x label under the minor ticks' empty labels and keep the
#: bottom spine's box through a minor tick, as matplotlib does (the canvas was a pixel short, sometimes narrow)
RENDERER_VERSION = "spec-o3-mpl3.10.5-r4"
#: earlier versions whose pictures this one draws identically except on a known class of views: a catalog's
#: re-rendered picture of such a run is still checked by its hash (and refused where it differs)
SAME_PICTURES_EXCEPT = {
    "spec-o3-mpl3.10.5-r3": "views with no major x tick inside the window (sub-Ångström zooms, 2-3 close points)",
}

__all__ = [
    "REQUIRED_MATPLOTLIB",
    "RENDERER_VERSION",
    "SAME_PICTURES_EXCEPT",
    "SIZE_CLASSES",
    "check_matplotlib_version",
    "image_tokens",
    "render_spectrum",
    "smart_resize",
]


def render_spectrum(wavelength, flux, wavelength_range=None, title: str = style.DEFAULT_TITLE) -> bytes:
    """The PNG the Spec-o3 zoom tool would answer for these points.

    ``wavelength`` (Å, rest frame) and ``flux`` are same-length 1-D arrays; non-finite points are dropped and the
    rest sorted by wavelength. ``wavelength_range`` is ``None`` for the full view or a ``(min, max)`` pair; points
    with min <= λ <= max are drawn (a single point is drawn too). Raises :class:`spec_vetting.errors.RenderError`
    when no point is left to draw or the arguments are malformed.
    """
    return render_png(plan(wavelength, flux, wavelength_range, title))
