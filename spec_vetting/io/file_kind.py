"""What a file that is not what we expected looks like, said in words: never its bytes.

A message quoting a file's first bytes copies them into the catalog, the logs and the review page, and any
readable file can be named as a spectrum (``/proc/self/environ`` began with ``SHELL=/bin/bash``); so messages say
which kind of file it seems to be instead.
"""

from __future__ import annotations

_SIGNATURES = (
    (b"\x1f\x8b", "a gzip file"),
    (b"PAR1", "a Parquet file"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file"),
    (b"PK\x03\x04", "a ZIP archive"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"%PDF", "a PDF document"),
    (b"BZh", "a bzip2 file"),
    (b"\xfd7zXZ\x00", "an xz file"),
    (b"SIMPLE  =", "a FITS file"),
)


def describe_start(head: bytes) -> str:
    """'it looks like ...' from a file's first bytes: empty, HTML/XML, a known format, text, or unknown binary."""
    if not head:
        return "the file is empty"
    for magic, kind in _SIGNATURES:
        if head.startswith(magic):
            return f"it looks like {kind}"
    stripped = head.lstrip()
    if stripped[:1] == b"<":
        return "it looks like HTML or XML (a failed download or an error page?)"
    for cut in range(4):  # the first bytes may end inside a multi-byte character
        try:
            text = head[: len(head) - cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
        if text and all(c.isprintable() or c in "\t\r\n" for c in text):
            return "it looks like a text file"
        break
    return f"it looks like unknown binary data ({len(head)} bytes examined)"
