"""An Agg renderer that remembers its text work: the same glyphs on the same pixels, a fraction of the time.

matplotlib 3.11 lays out every string with HarfBuzz and renders every glyph with FreeType on each draw, and reads
the font's metric tables for every text box it measures. A picture of ours has ~25 strings drawn from a small
vocabulary (tick labels, axis labels, title, stats box), so most of that work repeats from picture to picture:

* string layout (glyph ids and advances) is cached per (string, font, size, dpi) - it does not depend on where the
  string goes;
* glyph bitmaps are cached per (font, size, dpi, glyph, angle, position modulo one pixel in FreeType's 1/64 px
  units): FreeType rasterises an outline moved by whole pixels to the same bitmap moved by whole pixels, so a
  cached bitmap placed at the new whole-pixel offset is the bitmap FreeType would have drawn;
* a Text artist's box and line offsets (``Text._get_layout``, asked for by every measurement and draw) are cached
  per (string, font, alignment, rotation, spacing, dpi, renderer type) once :func:`cache_text_layout` is installed
  on the artist: they do not depend on where the text goes;
* the font height metrics matplotlib reads for every text box are cached per font properties and dpi (the hook
  ``_get_font_height_metrics`` that matplotlib's Text asks renderers for).

All caches are bounded (least recently used entries go first), so memory stays flat however many pictures are
drawn. Callers serialise drawing (see :mod:`spec_vetting.render.fast`); the caches are not locked themselves.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
from matplotlib.backends.backend_agg import RendererAgg, get_hinting_flag
from matplotlib.font_manager import fontManager, get_font
from matplotlib.ft2font import RenderMode

#: bounds of the caches (entries); a glyph bitmap is a few hundred bytes, a layout a few glyph records
GLYPH_CACHE_SIZE = 20_000
LAYOUT_CACHE_SIZE = 4_096
METRICS_CACHE_SIZE = 256


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


_GLYPHS = _LRU(GLYPH_CACHE_SIZE)
_LAYOUTS = _LRU(LAYOUT_CACHE_SIZE)
_METRICS = _LRU(METRICS_CACHE_SIZE)
_TEXT_LAYOUTS = _LRU(LAYOUT_CACHE_SIZE)


def cache_sizes() -> dict[str, int]:
    """Current entries per cache (for tests and the memory check)."""
    return {
        "glyphs": len(_GLYPHS),
        "layouts": len(_LAYOUTS),
        "metrics": len(_METRICS),
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
    """RendererAgg with cached string layouts, glyph bitmaps and font height metrics (same pixels)."""

    def _get_font_height_metrics(self, prop):
        # what Text._get_layout computes from the OS/2 or hhea table when a renderer offers no metrics
        key = (_prop_key(prop), self.dpi)
        found = _METRICS.get_recent(key)
        if found is None:
            found = (None, None, None)
            font = get_font(fontManager._find_fonts_by_props(prop))
            for table_name, gap_key, ascent_key, descent_key in (
                ("OS/2", "sTypoLineGap", "sTypoAscender", "sTypoDescender"),
                ("hhea", "lineGap", "ascent", "descent"),
            ):
                table = font.get_sfnt_table(table_name)
                if table is None:
                    continue
                scale = 1 / font.get_sfnt_table("head")["unitsPerEm"] * prop.get_size_in_points() * self.dpi / 72
                found = (table[ascent_key] * scale, -table[descent_key] * scale, table[gap_key] * scale)
                break
            _METRICS.put(key, found)
        return found

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if ismath:
            return super().draw_text(gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)
        features = mtext.get_fontfeatures() if mtext is not None else None
        language = mtext.get_language() if mtext is not None else None
        flags = get_hinting_flag()
        key = (s, _prop_key(prop), self.dpi, features, language, flags)
        items = _LAYOUTS.get_recent(key)
        if items is None:
            font = self._prepare_font(prop)
            items = tuple(
                (item.ft_object, item.glyph_index, item.x, item.y)
                for item in font._layout(s, flags=flags, features=features, language=language)
            )
            _LAYOUTS.put(key, items)
        self._draw_cached_glyphs(gc, x, y, angle, prop.get_size_in_points(), items, flags)

    def _draw_cached_glyphs(self, gc, x, y, angle, size, items, flags):
        # RendererAgg._draw_text_glyphs_and_boxes, with each bitmap looked up before FreeType is asked
        cos = math.cos(math.radians(angle))
        sin = math.sin(math.radians(angle))
        antialiased = gc.get_antialiased()
        height = self.height
        int_height = int(height)
        for font, glyph_index, dx, dy in items:
            px = round(0x40 * (x + dx * cos - dy * sin))
            py = round(0x40 * (height - y + dx * sin + dy * cos))
            key = (font.fname, size, self.dpi, glyph_index, angle, antialiased, flags, px & 63, py & 63)
            glyph = _GLYPHS.get_recent(key)
            if glyph is None:
                font.set_size(size, self.dpi)
                font._set_transform(
                    (0x10000 * np.array([[cos, -sin], [sin, cos]])).round().astype(int), [px, py]
                )
                bitmap = font._render_glyph(
                    glyph_index, flags, RenderMode.NORMAL if antialiased else RenderMode.MONO
                )
                buffer = np.array(bitmap.buffer)
                if not antialiased:
                    buffer *= 0xFF
                glyph = (buffer, bitmap.left - (px >> 6), bitmap.top - (py >> 6))
                _GLYPHS.put(key, glyph)
            buffer, left, top = glyph
            self._renderer.draw_text_image(
                buffer, left + (px >> 6), int_height - (top + (py >> 6)) + buffer.shape[0], 0, gc
            )


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

    text._get_layout = get_layout
    text._layout_cache_installed = True
