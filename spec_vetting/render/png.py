"""A minimal PNG writer for the renderer's RGBA buffer: no row filters, deflate level 1.

Pillow spends most of its PNG time choosing a filter per row; our pictures are mostly flat white, which deflate
compresses well unfiltered. Unfiltered level-1 deflate takes about half Pillow's time at level 1 for files ~30 %
larger (about 57 kB for a full view instead of 43 kB); the pixels are the same.

The deflate is ISA-L's (the ``isal`` package) where it is installed: a zlib stream like zlib's, decoded to the same
scanlines by any reader, in about a sixth of zlib's CPU at level 1 (0.87 vs 5.4 ms for a full view's 1.1 MB of
scanlines, and 1 % smaller). Without it, zlib.
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections import OrderedDict

import numpy as np

try:
    from isal.isal_zlib import compress as _deflate
except ImportError:  # no ISA-L wheel for this platform
    from zlib import compress as _deflate

#: deflate level: 1 is the fastest that still compresses well (zlib's 0 would store ~1 MB per picture)
COMPRESS_LEVEL = 1
_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_RGB, _RGBA = 2, 6  # PNG colour types


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_rows(rgba: np.ndarray) -> tuple[np.ndarray, int]:
    """The PNG scanlines of an (h, w, 4) or (h, w, 3) uint8 buffer (a new array: the buffer may be reused
    afterwards) and the PNG colour type: RGB when fully opaque (it decodes to the same pixels), else RGBA."""
    height, width = rgba.shape[:2]
    opaque = rgba.shape[2] == 3 or bool(rgba[..., 3].min() == 255)
    channels, colour_type = (3, _RGB) if opaque else (4, _RGBA)
    rows = np.empty((height, 1 + width * channels), dtype=np.uint8)
    rows[:, 0] = 0  # filter type None on every row
    pixels = rows[:, 1:].reshape(height, width, channels)
    for channel in range(channels):  # one plane at a time: ~5x faster than one strided copy of 3 of 4 bytes
        pixels[..., channel] = rgba[..., channel]
    return rows, colour_type


#: how many of the latest pictures :func:`pixels_of` can answer for without decoding (a few MB at most)
RECENT_PICTURES = 8
_RECENT: OrderedDict[bytes, tuple[np.ndarray, int]] = OrderedDict()
_RECENT_LOCK = threading.Lock()


def encode_rows(rows: np.ndarray, colour_type: int, level: int = COMPRESS_LEVEL, remember: bool = False) -> bytes:
    """PNG bytes of scanlines made by :func:`png_rows`; ``remember``: keep the scanlines for :func:`pixels_of`."""
    height = rows.shape[0]
    channels = 3 if colour_type == _RGB else 4
    width = (rows.shape[1] - 1) // channels
    header = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    png = (_SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", _deflate(rows.data, level))
           + _chunk(b"IEND", b""))
    if remember:
        with _RECENT_LOCK:
            _RECENT[png] = (rows, channels)
            while len(_RECENT) > RECENT_PICTURES:
                _RECENT.popitem(last=False)
    return png


def pixels_of(png: bytes) -> np.ndarray | None:
    """The (h, w, 3 or 4) pixels of a PNG this writer encoded recently with ``remember``, or None (decode it).

    The first picture of an inspection is resized right after it is drawn (model_picture.py): its pixels are
    still here, and decoding the PNG just made would cost more than the resize's other steps together.
    """
    with _RECENT_LOCK:
        found = _RECENT.get(png)
    if found is None:
        return None
    rows, channels = found
    return rows[:, 1:].reshape(rows.shape[0], -1, channels)


def encode_png(rgba: np.ndarray, level: int = COMPRESS_LEVEL) -> bytes:
    """PNG bytes of an (h, w, 4) or (h, w, 3) uint8 buffer; RGB when fully opaque (it decodes to the same pixels)."""
    return encode_rows(*png_rows(rgba), level=level)
