"""Issue 14: damaged and impossible inputs are read errors naming the file and the key, never a verdict, a hang or
an error blamed on another file; survey sentinels mean "unknown" with a warning."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from astropy.io import fits

from spec_vetting.errors import SpectrumReadError
from spec_vetting.io import fits_open, read_spectrum

DATA = Path(__file__).parent / "data" / "real"
DR1 = DATA / "spec-55862-B6212_sp06-006.fits"


def _with_byte(tmp_path: Path, key: bytes, offset: int, name: str) -> Path:
    raw = bytearray(DR1.read_bytes())
    i = raw.find(key.ljust(8) + b"= ")
    assert i >= 0
    raw[i + offset] = 0xE9
    p = tmp_path / name
    p.write_bytes(bytes(raw))
    return p


@pytest.mark.parametrize("key", [b"RA", b"Z", b"MJD", b"DESIG"])
def test_non_utf8_header_byte_blames_the_right_file(tmp_path, key):
    """fitsio backend, one thread: the damaged file gets the error, the next good file reads fine (5/6 trials
    blamed the good file before: cfitsio's per-thread error stack leaked into its next error)."""
    bad = _with_byte(tmp_path, key, 12, "bad.fits")
    good = tmp_path / "good.fits"
    good.write_bytes(DR1.read_bytes())

    def read(p):
        try:
            return read_spectrum(p, backend="fitsio")
        except SpectrumReadError as exc:
            return exc

    with ThreadPoolExecutor(1) as pool:
        for _ in range(3):
            r_bad = pool.submit(read, bad).result()
            r_good = pool.submit(read, good).result()
            assert isinstance(r_bad, SpectrumReadError), r_bad
            assert str(bad) in str(r_bad) and key.decode() in str(r_bad) and "0xe9" in str(r_bad)
            assert not isinstance(r_good, Exception), r_good
            assert r_good.meta.ids["designation"] == "LAMOST J063657.24+272227.2"
    for backend in ("astropy", "auto"):
        with pytest.raises(SpectrumReadError, match=f"keyword {key.decode()} holds the non-ASCII byte 0xe9"):
            read_spectrum(bad, backend=backend)


def test_non_ascii_in_a_comment_is_harmless(tmp_path):
    p = _with_byte(tmp_path, b"DESIG", 60, "comment.fits")  # inside the '/ Designation ...' comment
    s = read_spectrum(p, backend="fitsio")
    assert s.meta.ids["designation"] == "LAMOST J063657.24+272227.2"
    good = tmp_path / "good.fits"
    good.write_bytes(DR1.read_bytes())
    assert read_spectrum(good, backend="fitsio").meta.ids["designation"].startswith("LAMOST J")


def test_fitsio_stale_error_text_is_retried(tmp_path, monkeypatch):
    """The fallback behind the header check: a stale cfitsio message never fails the next good file."""
    monkeypatch.setattr(fits_open, "_check_ascii", lambda card, hdu, path: None)
    bad = _with_byte(tmp_path, b"RA", 12, "bad.fits")
    good = tmp_path / "good.fits"
    good.write_bytes(DR1.read_bytes())

    def both():
        try:
            read_spectrum(bad, backend="fitsio")
        except SpectrumReadError:
            pass
        return read_spectrum(good, backend="fitsio")

    t = ThreadPoolExecutor(1)
    try:
        for _ in range(3):
            assert t.submit(both).result().meta.ids["designation"].startswith("LAMOST J")
    finally:
        t.shutdown()


# --------------------------------------------------------------------------------------------- non-regular files


def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.fits"
    os.mkfifo(fifo)
    out: list = []
    t = threading.Thread(target=lambda: out.append(_catch(fifo)), daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "reading a FIFO blocked"
    assert isinstance(out[0], SpectrumReadError) and "FIFO" in str(out[0]) and str(fifo) in str(out[0])


def _catch(p):
    try:
        return read_spectrum(p)
    except SpectrumReadError as exc:
        return exc


def test_links_and_devices_are_named(tmp_path):
    dangling = tmp_path / "dangling.fits"
    dangling.symlink_to(tmp_path / "gone.fits")
    loop_a, loop_b = tmp_path / "a.fits", tmp_path / "b.fits"
    loop_a.symlink_to(loop_b)
    loop_b.symlink_to(loop_a)
    assert "dangling symbolic link" in str(_catch(dangling)) and "gone.fits" in str(_catch(dangling))
    assert "symbolic link loop" in str(_catch(loop_a))
    if os.path.exists("/dev/zero"):
        assert "character device" in str(_catch("/dev/zero"))
