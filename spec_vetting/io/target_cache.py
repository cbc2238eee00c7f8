"""Reading the targets of one multi-target file (a DESI coadd) one by one without re-reading the whole file each time.

A DESI reader must load every row of every arm to give one target, so a candidate list naming 500 targets of one
coadd would read the file 500 times. The first targeted read of a file goes the normal way; the second one of the
same file (same size and modification time, same redrock choice and back end) reads every usable target in one pass
and keeps them, so the rest cost a dictionary look-up and a copy. Only the most recent file is kept (a DESI coadd of
500 targets is about 100 MB of float64 spectra), and a changed file is never served from the cache.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

from ..spectrum import Spectrum

#: files whose usable targets are kept (the most recent ones)
MAX_FILES = 1


def _copy(sp: Spectrum) -> Spectrum:
    """A copy that shares no array or dict with the cached spectrum (callers may change theirs)."""
    meta = dataclasses.replace(sp.meta, ids=dict(sp.meta.ids), snr_bands=dict(sp.meta.snr_bands))
    return dataclasses.replace(sp, wavelength=sp.wavelength.copy(), flux=sp.flux.copy(), ivar=sp.ivar.copy(),
                               mask=sp.mask.copy(), meta=meta)


def _target_key(target: Any) -> int | None:
    try:
        return int(str(target).strip())
    except ValueError:
        return None


def _spectrum_key(sp: Spectrum) -> int | None:
    ids = sp.meta.ids
    value = ids.get("targetid", ids.get("row"))
    return None if value is None else int(value)


class TargetCache:
    def __init__(self, max_files: int = MAX_FILES):
        self.max_files = max_files
        self._lock = threading.Lock()
        self._seen: dict[tuple, int] = {}  # file key -> targeted reads so far (bounded like the cache)
        self._files: dict[tuple, dict[int, Spectrum]] = {}

    @staticmethod
    def file_key(path: str, *options: Any) -> tuple | None:
        try:
            st = os.stat(path)
        except OSError:
            return None  # the normal path raises the reader's error
        return (os.path.realpath(path), st.st_size, st.st_mtime_ns, *map(str, options))

    def get(self, key: tuple | None, target: Any, read_all: Callable[[], Iterable[Spectrum]]) -> Spectrum | None:
        """The cached spectrum of ``target``, filling the cache on the second read of the file; None when the
        normal path should read it (first read, unknown target, unusable target: the reader then raises)."""
        wanted = _target_key(target)
        if key is None or wanted is None or self.max_files < 1:
            return None
        with self._lock:
            spectra = self._files.get(key)
            if spectra is None:
                count = self._seen.get(key, 0) + 1
                self._seen = {key: count, **{k: v for k, v in self._seen.items() if k != key}}
                while len(self._seen) > 4 * self.max_files:
                    self._seen.pop(next(reversed(self._seen)))
                if count < 2:
                    return None
        if spectra is None:
            spectra = {k: sp for sp in read_all() if (k := _spectrum_key(sp)) is not None}
            with self._lock:
                self._files[key] = spectra
                while len(self._files) > self.max_files:
                    self._files.pop(next(iter(self._files)))
        found = spectra.get(wanted)
        return None if found is None else _copy(found)

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()
            self._files.clear()


#: the process-wide cache used by :func:`spec_vetting.io.read_spectrum`
TARGETS = TargetCache()
