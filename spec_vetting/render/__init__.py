"""The pictures Spec-o3 reads: a spectrum plot in the exact style the model was trained on, drawn fast.

Public API:

* :func:`render_spectrum` - PNG bytes of the full view or a wavelength window (arrays already in the rest frame);
* :data:`RENDERER_VERSION` - recorded with every verdict; bumped whenever the output pixels change;
* :func:`image_tokens` and :data:`SIZE_CLASSES` - the Qwen2.5-VL image-token cost of each picture size.

Thread safety and use from asyncio or worker processes: see :mod:`spec_vetting.render.fast`.
"""

from __future__ import annotations

# The fast renderer draws on FigureCanvasAgg directly and never touches pyplot, so importing this package does not
# switch the user's matplotlib backend.
from . import style
from .fast import render_png
from .layout import plan
from .tokens import SIZE_CLASSES, image_tokens, smart_resize

#: bump when the pixels change on purpose (style, layout or matplotlib range) or may change (drawing method);
#: "spec-o3-mpl3.11" names the trained style and the matplotlib series that reproduces it. r2: batched tick
#: drawing, cached text rendering and memoised layout (identical on every reference case; bumped because the
#: drawing method changed)
RENDERER_VERSION = "spec-o3-mpl3.11-r2"

__all__ = ["RENDERER_VERSION", "SIZE_CLASSES", "image_tokens", "render_spectrum", "smart_resize"]


def render_spectrum(wavelength, flux, wavelength_range=None, title: str = style.DEFAULT_TITLE) -> bytes:
    """The PNG the Spec-o3 zoom tool would answer for these points.

    ``wavelength`` (Å, rest frame) and ``flux`` are same-length 1-D arrays; non-finite points are dropped and the
    rest sorted by wavelength. ``wavelength_range`` is ``None`` for the full view or a ``(min, max)`` pair; points
    with min <= λ <= max are drawn (a single point is drawn too). Raises :class:`spec_vetting.errors.RenderError`
    when no point is left to draw or the arguments are malformed.
    """
    return render_png(plan(wavelength, flux, wavelength_range, title))
