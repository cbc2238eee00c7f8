"""The reader registry: each survey layout registers a reader whose ``identify`` looks at content, never the name.

``identify`` gets an open :class:`~spec_vetting.io.fits_open.FitsFile` and returns True or False; it must not raise
(a raising identifier is treated as False, so one buggy reader cannot hide the others). When several readers claim
a file the highest ``priority`` wins. Layouts we recognise but refuse (LAMOST MRS, redrock catalogues) are readers
too, so the user gets "this is X, we do not read it because Y" instead of "unknown layout".
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import SpectrumReadError, UnsupportedFormatError
from ..spectrum import Spectrum
from .fits_open import FitsFile

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SkippedTarget:
    """A fibre of a multi-target file that is not a usable science spectrum (reported, never an error)."""

    path: str
    row: int
    target: Any  # TARGETID, or None when the file has no FIBERMAP
    reason: str  # e.g. "sky fibre (OBJTYPE=SKY)", "COADD_FIBERSTATUS=1033", "no good pixel"


OnSkip = Callable[[SkippedTarget], None]


class Reader(abc.ABC):
    """One survey file layout."""

    variant: str = ""  # Spectrum.meta.variant this reader produces
    survey: str = ""
    priority: int = 0
    description: str = ""
    multi_target: bool = False  # True: the file holds many spectra, addressed by ``target``

    @abc.abstractmethod
    def identify(self, f: FitsFile) -> bool: ...

    @abc.abstractmethod
    def read(self, f: FitsFile, target: Any = None, **options: Any) -> Spectrum: ...

    def targets(self, f: FitsFile, on_skip: OnSkip | None = None) -> list[Any]:
        """Usable targets of the file; single-spectrum layouts have exactly one, addressed as None."""
        return [None]

    def iter_spectra(self, f: FitsFile, on_skip: OnSkip | None = None, **options: Any):
        for target in self.targets(f, on_skip):
            yield self.read(f, target, **options)


class RefusedLayout(Reader):
    """A layout recognised on purpose so that reading it fails with a helpful message."""

    reason: str = ""
    hint: str | None = None

    def read(self, f: FitsFile, target: Any = None, **options: Any) -> Spectrum:
        raise UnsupportedFormatError(f.path, self.reason, hint=self.hint)

    def targets(self, f: FitsFile, on_skip: OnSkip | None = None) -> list[Any]:
        raise UnsupportedFormatError(f.path, self.reason, hint=self.hint)


_READERS: list[Reader] = []


def register(reader_cls: type[Reader]) -> type[Reader]:
    """Class decorator: instantiate and register a reader."""
    _READERS.append(reader_cls())
    return reader_cls


def readers() -> list[Reader]:
    return list(_READERS)


def known_layouts() -> list[str]:
    return [r.variant for r in _READERS if not isinstance(r, RefusedLayout)]


def _safe_identify(reader: Reader, f: FitsFile) -> bool:
    try:
        return bool(reader.identify(f))
    except SpectrumReadError:
        return False
    except Exception:  # noqa: BLE001 - an identifier must never take the others down
        log.debug("identifier of %s raised on %s", reader.variant, f.path, exc_info=True)
        return False


def identify_reader(f: FitsFile) -> Reader:
    """The reader for an open file; UnsupportedFormatError naming the file and the known layouts if none fits."""
    matches = [r for r in _READERS if _safe_identify(r, f)]
    if not matches:
        hdus = ", ".join(n or f"#{i}" for i, n in enumerate(f.names))
        raise UnsupportedFormatError(
            f.path,
            f"unknown layout: no reader recognises this FITS file (HDUs: {hdus})",
            hint="known layouts: " + ", ".join(known_layouts()),
        )
    return max(matches, key=lambda r: r.priority)
