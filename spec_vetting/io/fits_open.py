"""Open a FITS file robustly, behind one small interface with two back ends (astropy and fitsio).

Why our own structural check: astropy only *warns* about a truncated file and then fails deep inside numpy with
"buffer is too small"; fitsio opens it happily and fails on the first read. Walking the headers ourselves (a few
2880-byte blocks, no data read) lets every reader fail early with one clear message, whichever back end is used.

Gzip: survey downloads are often gzip bytes under a ``.fits`` name (LAMOST obsid downloads). We sniff the magic
bytes, never the name, decompress in memory (files are small) and hand the bytes to astropy, the reference path.
fitsio is the fast path for plain files (see ``benchmarks/bench_read.py``); ``SPEC_VETTING_FITS_BACKEND`` =
``astropy`` | ``fitsio`` | ``auto`` (default: fitsio for plain files when installed, astropy otherwise).

Why one file of about 500 lines: the structural check, the gzip sniffing and both back ends answer one
question (can this file be opened, and how), and the readers depend on their agreeing.
"""

from __future__ import annotations

import abc
import errno
import gzip
import io
import logging
import os
import stat
import warnings
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import SpectrumReadError
from .file_kind import describe_start

log = logging.getLogger(__name__)

BLOCK = 2880
CARD = 80
GZIP_MAGIC = b"\x1f\x8b"
FITS_MAGIC = b"SIMPLE  ="
BACKENDS = ("auto", "astropy", "fitsio")
BACKEND_ENV = "SPEC_VETTING_FITS_BACKEND"

HduRef = int | str


def _describe_start(head: bytes) -> str:
    """A hint about what a non-FITS file is (users often save an HTML error page), in words, never its bytes."""
    return describe_start(head)


def card_value(card: bytes) -> str:
    """The value text of an 80-byte ``KEY     = value / comment`` card (quotes of strings kept)."""
    value = card[10:].split(b"/", 1)[0]
    return value.decode("ascii", "replace").strip()


#: what the FITS standard allows (4.0, section 4.4.1): BITPIX values, and at most 999 axes
BITPIX_VALUES = (8, 16, 32, 64, -32, -64)
MAX_NAXIS = 999


def _size_keyword(cards: dict[bytes, str], key: bytes, default: str, hdu: int, path: str) -> int:
    text = cards.get(key, default)
    if len(text) > 20:  # a FITS integer fits in 20 characters; a longer one is garbage (and int() of it is slow)
        raise SpectrumReadError(path, f"HDU {hdu} has an impossible {key.decode()} ({text[:24]}...: "
                                f"{len(text)} characters)", hint="the header is damaged; download the file again")
    try:
        return int(text)
    except ValueError:
        raise SpectrumReadError(path, f"HDU {hdu} has an unreadable size keyword {key.decode()} = {text!r}",
                                hint="the header is damaged; download the file again") from None


def _data_bytes(cards: dict[bytes, str], hdu: int, path: str) -> int:
    """Bytes of data (padding not counted) that HDU ``hdu``'s header announces, from its size keywords, each checked
    against what the FITS standard allows before anything is computed from it (a header asking for 99,999,999 axes
    or a 70-digit BITPIX is refused here, not allocated by a back end)."""
    def bad(what: str) -> SpectrumReadError:
        return SpectrumReadError(path, f"HDU {hdu} has {what}", hint="the header is damaged; download the file again")

    bitpix = _size_keyword(cards, b"BITPIX", "8", hdu, path)
    if bitpix not in BITPIX_VALUES:
        raise bad(f"an impossible BITPIX = {bitpix} (FITS allows {', '.join(map(str, BITPIX_VALUES))})")
    naxis = _size_keyword(cards, b"NAXIS", "0", hdu, path)
    if not 0 <= naxis <= MAX_NAXIS:
        raise bad(f"an impossible NAXIS = {naxis} (FITS allows 0 to {MAX_NAXIS})")
    dims = [_size_keyword(cards, b"NAXIS%d" % (k + 1), "0", hdu, path) for k in range(naxis)]
    negative = next((k for k, d in enumerate(dims) if d < 0), None)
    if negative is not None:
        raise bad(f"a negative axis length NAXIS{negative + 1} = {dims[negative]}")
    pcount = _size_keyword(cards, b"PCOUNT", "0", hdu, path)
    gcount = _size_keyword(cards, b"GCOUNT", "1", hdu, path)
    if pcount < 0 or gcount < 0:
        raise bad(f"a negative {'PCOUNT' if pcount < 0 else 'GCOUNT'}")
    bitpix = abs(bitpix)
    if naxis == 0:
        return 0
    n = 1
    for d in dims:
        n *= d
    if hdu == 0 and cards.get(b"GROUPS") == "T" and dims and dims[0] == 0:  # random groups: NAXIS1 = 0
        n = 1
        for d in dims[1:]:
            n *= d
    return bitpix // 8 * gcount * (pcount + n)


def check_structure(data: bytes | None, path: str, *, file_obj=None, size: int | None = None) -> None:
    """Walk the HDU headers and make sure every data section the headers announce is in the file.

    Reads only headers (from ``data`` in memory, or seeking through ``file_obj``). Raises SpectrumReadError for a
    truncated file or a header without END.
    """

    def read(offset: int, n: int) -> bytes:
        if data is not None:
            return data[offset : offset + n]
        file_obj.seek(offset)
        return file_obj.read(n)

    total = len(data) if data is not None else int(size)
    offset = 0
    hdu = 0
    while offset < total:
        head = read(offset, CARD)
        if hdu > 0 and not head.startswith(b"XTENSION="):
            return  # trailing padding or junk after the last HDU: harmless, astropy and fitsio ignore it
        cards: dict[bytes, str] = {}
        pos = offset
        ended = False
        while not ended:
            block = read(pos, BLOCK)
            if len(block) < BLOCK:
                raise SpectrumReadError(
                    path,
                    f"file is truncated: the header of HDU {hdu} is cut off at byte {total}",
                    hint="download the file again",
                )
            pos += BLOCK
            for i in range(0, BLOCK, CARD):
                card = block[i : i + CARD]
                key = card[:8].rstrip()
                if key == b"END":
                    ended = True
                    break
                _check_ascii(card, hdu, path)
                if card[8:10] == b"= " and key not in cards:
                    cards[key] = card_value(card)
        nbytes = _data_bytes(cards, hdu, path)
        if pos + nbytes > total:
            name = cards.get(b"EXTNAME", "").strip("'").strip()
            label = f"HDU {hdu}" + (f" ({name})" if name else "")
            raise SpectrumReadError(
                path,
                f"file is truncated: {label} needs {nbytes} bytes of data from byte {pos} "
                f"but the file ends at byte {total}",
                hint="download the file again",
            )
        offset = pos + ((nbytes + BLOCK - 1) // BLOCK) * BLOCK
        hdu += 1


def _value_part(card: bytes) -> bytes:
    """Key and value of a card, without its comment (a ``/`` inside a quoted string is not a comment)."""
    if card[8:10] != b"= ":
        return card[:8]  # COMMENT, HISTORY, blank keys: free text after the key
    rest = card[10:]
    stripped = rest.lstrip()
    if stripped.startswith(b"'"):
        i = len(rest) - len(stripped) + 1
        while i < len(rest):
            if rest[i : i + 1] == b"'":
                if rest[i + 1 : i + 2] == b"'":
                    i += 2
                    continue
                break
            i += 1
        return card[: 10 + i + 1]
    return card[:10] + rest.split(b"/", 1)[0]


def _check_ascii(card: bytes, hdu: int, path: str) -> None:
    """FITS headers are printable ASCII (0x20-0x7E). A byte outside that in a key or value is a damaged header.

    Why this is checked here and not left to the back ends: cfitsio keeps its error messages on a per-thread stack,
    and fitsio turns that stack into the text of the *next* error, so a non-UTF-8 byte in one file's header made
    the next good file read in the same thread fail with "'utf-8' codec can't decode byte", while the damaged file
    itself was read with '?' in place of the byte. Free text (comments, COMMENT/HISTORY cards) is left
    alone: the back ends never parse it.
    """
    part = _value_part(card)
    if all(0x20 <= b <= 0x7E for b in part):
        return
    offset = next(i for i, b in enumerate(part) if not 0x20 <= b <= 0x7E)
    key = card[:8].decode("ascii", "replace").strip() or "(blank)"
    raise SpectrumReadError(
        path,
        f"header of HDU {hdu} is damaged: keyword {key} holds the non-ASCII byte 0x{part[offset]:02x} "
        f"(FITS headers are ASCII text)",
        hint="download the file again; if it was edited by hand, fix that card",
    )


def check_regular_file(path: str) -> os.stat_result:
    """``os.stat`` of ``path``, refusing what is not a regular file with a message naming what it is.

    A FIFO (or a character device) blocks the first ``open`` for ever, so it must be refused before opening; a
    dangling symbolic link or a symlink loop would only say "no such file".
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SpectrumReadError(path, "symbolic link loop: the link points (through other links) back to "
                                    "itself", hint="fix or remove the link") from None
        if exc.errno == errno.ENOENT and os.path.islink(path):
            target = os.readlink(path)
            raise SpectrumReadError(path, f"dangling symbolic link: it points to {target}, which does not exist",
                                    hint="fix the link, or mount the folder it points into") from None
        if exc.errno == errno.ENOENT:
            raise SpectrumReadError(path, "no such file", hint="check the path (relative paths in a candidate "
                                    "list resolve against the list's folder)") from None
        raise SpectrumReadError(path, f"cannot read the file: {exc.strerror or exc}") from None
    mode = st.st_mode
    if stat.S_ISREG(mode):
        return st
    if stat.S_ISDIR(mode):
        raise SpectrumReadError(path, "is a directory, not a FITS file")
    what = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file")
    raise SpectrumReadError(path, f"not a regular file: it is {what}, which is never read (it could block for ever)",
                            hint="list regular FITS files only")


@contextmanager
def _quiet() -> Iterator[None]:
    """astropy warns about harmless header quirks of survey files; readers report real problems as errors."""
    from astropy.utils.exceptions import AstropyWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AstropyWarning)
        yield


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return value.strip()
    return value


class FitsFile(abc.ABC):
    """What the survey readers need from a FITS file; HDUs are addressed by index or EXTNAME (case-insensitive)."""

    backend: str = ""

    def __init__(self, path: str):
        self.path = path
        self._headers: dict[int, dict[str, Any]] = {}

    # -- structure ---------------------------------------------------------------------------------------------
    names: list[str]  # EXTNAME per HDU, upper case; "PRIMARY" for an unnamed HDU 0, "" for other unnamed HDUs

    def has(self, name: str) -> bool:
        return name.upper() in self.names

    def index(self, hdu: HduRef) -> int:
        if isinstance(hdu, int):
            if 0 <= hdu < len(self.names):
                return hdu
            raise SpectrumReadError(self.path, f"missing HDU {hdu}: the file has only {len(self.names)} HDUs")
        key = hdu.upper()
        if key in self.names:
            return self.names.index(key)
        shown = ", ".join(n or f"#{i}" for i, n in enumerate(self.names))
        raise SpectrumReadError(self.path, f"missing HDU '{hdu}' (the file has: {shown})")

    def header(self, hdu: HduRef = 0) -> dict[str, Any]:
        """The header as a plain dict (string values stripped; first occurrence of a key wins)."""
        i = self.index(hdu)
        if i not in self._headers:
            self._headers[i] = self._read_header(i)
        return self._headers[i]

    @abc.abstractmethod
    def _read_header(self, i: int) -> dict[str, Any]: ...

    @abc.abstractmethod
    def is_table(self, hdu: HduRef) -> bool: ...

    @abc.abstractmethod
    def image(self, hdu: HduRef) -> np.ndarray:
        """The image data (numpy axis order, BSCALE/BZERO applied); raises when the HDU has none."""

    @abc.abstractmethod
    def columns(self, hdu: HduRef) -> list[str]: ...

    @abc.abstractmethod
    def nrows(self, hdu: HduRef) -> int: ...

    @abc.abstractmethod
    def _column(self, i: int, name: str) -> np.ndarray: ...

    def column(self, hdu: HduRef, name: str) -> np.ndarray:
        """One table column (case-insensitive name); strings come back as a numpy str array, stripped."""
        i = self.index(hdu)
        cols = self.columns(i)
        upper = {c.upper(): c for c in cols}
        if name.upper() not in upper:
            label = self.names[i] or f"HDU {i}"
            raise SpectrumReadError(
                self.path, f"missing column '{name}' in {label} (columns found: {', '.join(cols[:40])})"
            )
        values = self._column(i, upper[name.upper()])
        if values.dtype.kind in "SU":
            if values.dtype.kind == "S":
                values = np.char.decode(values, "ascii", "replace")
            values = np.char.strip(values.astype(str))
        return values

    def has_column(self, hdu: HduRef, name: str) -> bool:
        return name.upper() in {c.upper() for c in self.columns(hdu)}

    # an optional hook, not abstract: a backend with nothing to release may keep this no-op
    def close(self) -> None:  # noqa: B027  # pragma: no cover - overridden
        pass

    def __enter__(self) -> FitsFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AstropyFits(FitsFile):
    backend = "astropy"

    def __init__(self, path: str, source):
        super().__init__(path)
        from astropy.io import fits

        with _quiet():
            self._hdul = fits.open(source, memmap=False, lazy_load_hdus=False)
        self.names = []
        for i, h in enumerate(self._hdul):
            name = str(h.header.get("EXTNAME", "") or "").strip().upper()
            self.names.append(name or ("PRIMARY" if i == 0 else ""))

    def _read_header(self, i: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in self._hdul[i].header.items():
            if key and key not in out and key not in ("COMMENT", "HISTORY"):
                out[key] = _clean(value)
        return out

    def is_table(self, hdu: HduRef) -> bool:
        from astropy.io import fits

        return isinstance(self._hdul[self.index(hdu)], (fits.BinTableHDU, fits.TableHDU))

    def image(self, hdu: HduRef) -> np.ndarray:
        i = self.index(hdu)
        with _quiet():
            data = self._hdul[i].data
        if data is None or self.is_table(i):
            raise SpectrumReadError(self.path, f"HDU {self.names[i] or i} holds no image data")
        return np.asarray(data)

    def columns(self, hdu: HduRef) -> list[str]:
        i = self.index(hdu)
        if not self.is_table(i):
            return []
        return list(self._hdul[i].columns.names)

    def nrows(self, hdu: HduRef) -> int:
        i = self.index(hdu)
        return int(self._hdul[i].header.get("NAXIS2", 0)) if self.is_table(i) else 0

    def _column(self, i: int, name: str) -> np.ndarray:
        with _quiet():
            return np.asarray(self._hdul[i].data[name])

    def close(self) -> None:
        self._hdul.close()


class FitsioFits(FitsFile):
    backend = "fitsio"

    def __init__(self, path: str):
        super().__init__(path)
        import fitsio

        self._f = _fitsio_call(lambda: fitsio.FITS(path))
        self._hdus = _fitsio_call(lambda: list(self._f))
        self.names = []
        for i, h in enumerate(self._hdus):
            name = (h.get_extname() or "").strip().upper()
            self.names.append(name or ("PRIMARY" if i == 0 else ""))

    def _read_header(self, i: int) -> dict[str, Any]:
        hdr = _fitsio_call(self._hdus[i].read_header)
        out: dict[str, Any] = {}
        for rec in hdr.records():
            key = rec.get("name")
            if key and key not in out and key not in ("COMMENT", "HISTORY") and "value" in rec:
                out[key] = _clean(rec["value"])
        return out

    def is_table(self, hdu: HduRef) -> bool:
        return self._hdus[self.index(hdu)].get_exttype() in ("BINARY_TBL", "ASCII_TBL")

    def image(self, hdu: HduRef) -> np.ndarray:
        i = self.index(hdu)
        h = self._hdus[i]
        if self.is_table(i) or not h.has_data():
            raise SpectrumReadError(self.path, f"HDU {self.names[i] or i} holds no image data")
        try:
            return _fitsio_call(h.read)
        except OSError as exc:
            raise SpectrumReadError(self.path, f"cannot read HDU {self.names[i] or i}: {_first_line(exc)}") from None

    def columns(self, hdu: HduRef) -> list[str]:
        i = self.index(hdu)
        return list(self._hdus[i].get_colnames()) if self.is_table(i) else []

    def nrows(self, hdu: HduRef) -> int:
        i = self.index(hdu)
        return int(self._hdus[i].get_nrows()) if self.is_table(i) else 0

    def _column(self, i: int, name: str) -> np.ndarray:
        try:
            return _fitsio_call(lambda: self._hdus[i].read_column(name))
        except OSError as exc:
            raise SpectrumReadError(self.path, f"cannot read column {name}: {_first_line(exc)}") from None

    def close(self) -> None:
        self._f.close()


def _fitsio_call(fn):
    """``fn()``, once more when fitsio fails to decode cfitsio's error text (UnicodeDecodeError).

    cfitsio's error-message stack is per thread and fitsio reads it whole into the text of the next error, so a
    message left there by an earlier damaged file (one holding a non-ASCII byte) makes an unrelated, good file's
    harmless internal error surface as a UnicodeDecodeError. Reading the stack empties it: the second call sees
    only this file's own state. :func:`check_structure` refuses such damaged headers first; this is the fallback.
    """
    try:
        return fn()
    except UnicodeDecodeError:
        log.debug("fitsio: stale cfitsio error text (non-UTF-8) discarded; retrying once")
        return fn()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _fitsio_available() -> bool:
    try:
        import fitsio  # noqa: F401
    except ImportError:  # pragma: no cover - fitsio is a dependency, but it has no wheels on some platforms
        return False
    return True


def default_backend() -> str:
    choice = os.environ.get(BACKEND_ENV, "auto").strip().lower() or "auto"
    if choice not in BACKENDS:
        from ..errors import ConfigError

        raise ConfigError(f"{BACKEND_ENV}={choice!r} is not one of {', '.join(BACKENDS)}")
    return choice


def open_fits(path: str | os.PathLike, *, backend: str | None = None) -> FitsFile:
    """Open ``path`` for reading, checking first that it is FITS (plain or gzip) and complete.

    ``backend``: "astropy", "fitsio" or "auto" (None = ``SPEC_VETTING_FITS_BACKEND`` or "auto"). Gzip content
    always goes through astropy from memory. Raises SpectrumReadError (missing, unreadable, not FITS, truncated).
    """
    path_str = str(path)
    backend = backend or default_backend()
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    p = Path(path_str)
    check_regular_file(path_str)
    try:
        with open(p, "rb") as fh:
            head = fh.read(len(FITS_MAGIC))
            if head[:2] == GZIP_MAGIC:
                fh.seek(0)
                raw = fh.read()
            else:
                raw = None
                size = p.stat().st_size
                if head != FITS_MAGIC:
                    raise SpectrumReadError(path_str, f"not a FITS file: {_describe_start(head + fh.read(64))}")
                check_structure(None, path_str, file_obj=fh, size=size)
    except OSError as exc:
        raise SpectrumReadError(path_str, f"cannot read the file: {exc.strerror or exc}") from None

    if raw is not None:
        try:
            data = gzip.decompress(raw)
        except (EOFError, zlib.error, OSError) as exc:
            raise SpectrumReadError(
                path_str, f"gzip data is truncated or corrupt ({exc})", hint="download the file again"
            ) from None
        if not data.startswith(FITS_MAGIC):
            raise SpectrumReadError(path_str, f"gzip content is not a FITS file: {_describe_start(data[:64])}")
        check_structure(data, path_str)
        return _open_checked(path_str, lambda: AstropyFits(path_str, io.BytesIO(data)))

    if backend == "fitsio" or (backend == "auto" and _fitsio_available()):
        return _open_checked(path_str, lambda: FitsioFits(path_str))
    return _open_checked(path_str, lambda: AstropyFits(path_str, path_str))


def _open_checked(path: str, opener) -> FitsFile:
    try:
        return opener()
    except SpectrumReadError:
        raise
    except (OSError, ValueError, TypeError) as exc:
        raise SpectrumReadError(path, f"not a readable FITS file: {_first_line(exc)}") from None
