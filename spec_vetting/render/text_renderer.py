"""An Agg renderer that remembers its text work: the same pixels, a fraction of the time.

matplotlib 3.10 draws a string by laying it out with FreeType (``FT2Font.set_text``), rasterising every glyph into
one bitmap of the whole string (``draw_glyphs_to_bitmap``) and pasting that bitmap at the rounded text position;
it measures a string the same way (``set_text`` then ``get_width_height``). A picture of ours has ~25 strings drawn
from a small vocabulary (tick labels, axis labels, title, stats box), so most of that work repeats from picture to
picture:

* the string bitmap, its descent and bitmap offset are cached per (string, font, size, dpi, hinting,
  antialiasing): matplotlib lays the string out at the origin and only rounds the final paste position, so the
  bitmap does not depend on where the string goes (rotated text is rotated from the same bitmap at paste time);
* string extents (width, height, descent) are cached per (string, font, size, dpi, hinting);
* a Text artist's box and line offsets (``Text._get_layout``, asked for by every measurement and draw) are cached
  per (string, font, alignment, rotation, spacing, dpi, renderer type) once :func:`cache_text_layout` is installed
  on the artist: they do not depend on where the text goes.

All caches are bounded (least recently used entries go first), so memory stays flat however many pictures are
drawn. Callers serialise drawing (see :mod:`spec_vetting.render.picture`); the caches are not locked themselves.
"""

from __future__ import annotations

import contextlib
import math
from collections import OrderedDict

import numpy as np
from matplotlib.backends.backend_agg import RendererAgg, get_hinting_flag

#: bounds of the caches (entries); a string bitmap is a few kB, an extent three floats
BITMAP_CACHE_SIZE = 4_096
EXTENT_CACHE_SIZE = 4_096
LAYOUT_CACHE_SIZE = 4_096


class _LRU(OrderedDict):
    def __init__(self, maxsize: int):
        super().__init__()
        self.maxsize = maxsize

    def get_recent(self, key):
        value = self.get(key)
        if value is not None:
            self.move_to_end(key)
        return value

    def put(self, key, value):
        self[key] = value
        while len(self) > self.maxsize:
            self.popitem(last=False)


_BITMAPS = _LRU(BITMAP_CACHE_SIZE)
_EXTENTS = _LRU(EXTENT_CACHE_SIZE)
_TEXT_LAYOUTS = _LRU(LAYOUT_CACHE_SIZE)


def cache_sizes() -> dict[str, int]:
    """Current entries per cache (for tests and the memory check)."""
    return {
        "bitmaps": len(_BITMAPS),
        "extents": len(_EXTENTS),
        "text_layouts": len(_TEXT_LAYOUTS),
    }


def _prop_key(prop) -> tuple:
    # the fields FontProperties hashes on, as a plain tuple (the object itself is mutable)
    return (
        tuple(prop.get_family()),
        prop.get_slant(),
        prop.get_variant(),
        prop.get_weight(),
        prop.get_stretch(),
        prop.get_size_in_points(),
        prop.get_file(),
        prop.get_math_fontfamily(),
    )


class TextCachingRendererAgg(RendererAgg):
    """RendererAgg with cached string bitmaps and extents (same pixels as RendererAgg under matplotlib 3.10)."""

    def get_text_width_height_descent(self, s, prop, ismath):
        if ismath:  # mathtext and TeX: matplotlib's own path
            return super().get_text_width_height_descent(s, prop, ismath)
        flags = get_hinting_flag()
        key = (s, _prop_key(prop), self.dpi, flags)
        found = _EXTENTS.get_recent(key)
        if found is None:
            # RendererAgg.get_text_width_height_descent: FreeType's 1/64 px units to pixels
            font = self._prepare_font(prop)
            font.set_text(s, 0.0, flags=flags)
            w, h = font.get_width_height()
            found = (w / 64.0, h / 64.0, font.get_descent() / 64.0)
            _EXTENTS.put(key, found)
        return found

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if ismath:
            return super().draw_text(gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)
        flags = get_hinting_flag()
        antialiased = gc.get_antialiased()
        key = (s, _prop_key(prop), self.dpi, flags, antialiased)
        found = _BITMAPS.get_recent(key)
        if found is None:
            # RendererAgg.draw_text up to the paste: the string laid out unrotated at the origin, one bitmap
            font = self._prepare_font(prop)
            font.set_text(s, 0, flags=flags)
            font.draw_glyphs_to_bitmap(antialiased=antialiased)
            xo, yo = font.get_bitmap_offset()
            found = (np.array(font.get_image()), font.get_descent() / 64.0, xo / 64.0, yo / 64.0)
            _BITMAPS.put(key, found)
        image, descent, xo, yo = found
        # the descent is turned with the text; the bitmap is rotated in raster space by draw_text_image
        xd = descent * math.sin(math.radians(angle))
        yd = descent * math.cos(math.radians(angle))
        self._renderer.draw_text_image(image, round(x + xo + xd), round(y + yo + yd) + 1, angle, gc)


def cache_text_layout(text) -> None:
    """Serve ``text._get_layout`` from the shared cache (an instance attribute; the class is left alone)."""
    if getattr(text, "_layout_cache_installed", False):
        return
    compute = type(text)._get_layout

    def get_layout(renderer):
        if text.get_wrap():  # wrapping depends on the figure size: not worth a key
            return compute(text, renderer)
        key = (
            text.get_text(),
            text.get_rotation(),
            text.get_rotation_mode(),
            text.get_horizontalalignment(),
            text.get_verticalalignment(),
            text._get_multialignment(),
            text._linespacing,
            _prop_key(text._fontproperties),
            text.get_usetex(),
            text.get_parse_math(),
            text.get_figure(root=True).dpi,
            type(renderer),
            renderer.dpi,
        )
        found = _TEXT_LAYOUTS.get_recent(key)
        if found is None:
            bbox, info, descent = compute(text, renderer)
            found = (bbox.frozen(), tuple(info), descent)
            _TEXT_LAYOUTS.put(key, found)
        bbox, info, descent = found
        return bbox.frozen(), list(info), descent

    full_cm_set = text._cm_set

    def cm_set(**kwargs):
        # Text.draw sets the wrapped string for the duration of the draw; unwrapped, that is the string it holds,
        # and setting it again changes nothing drawn (only matplotlib's stale flags, which nothing here reads)
        if kwargs.keys() == {"text"} and not text.get_wrap() and kwargs["text"] == text.get_text():
            return contextlib.nullcontext()
        return full_cm_set(**kwargs)

    text._get_layout = get_layout
    text._cm_set = cm_set
    text._layout_cache_installed = True
