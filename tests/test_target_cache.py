"""Targets of one DESI file read one by one: the file is read in one pass from the second read on, results equal."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from spec_vetting.errors import TargetNotFoundError
from spec_vetting.io import iter_spectra, read_spectrum
from spec_vetting.io.desi import _DesiReader
from spec_vetting.io.target_cache import TARGETS

DATA = Path(__file__).parent / "data" / "real"
HEALPIX = DATA / "coadd-sv3-dark-26065.fits"  # 5 rows: 2 negative TARGETIDs, 1 sky, 2 science
SCIENCE = [39627866878511337, 39627866878514741]


@pytest.fixture
def coadd(tmp_path):
    TARGETS.clear()
    path = tmp_path / HEALPIX.name
    shutil.copy(HEALPIX, path)
    yield path
    TARGETS.clear()


@pytest.fixture
def count_reads(monkeypatch):
    calls = {"read": 0, "iter": 0}
    real_read, real_iter = _DesiReader.read, _DesiReader.iter_spectra

    def read(self, *a, **k):
        calls["read"] += 1
        return real_read(self, *a, **k)

    def iter_(self, *a, **k):
        calls["iter"] += 1
        return real_iter(self, *a, **k)

    monkeypatch.setattr(_DesiReader, "read", read)
    monkeypatch.setattr(_DesiReader, "iter_spectra", iter_)
    return calls


def same(a, b):
    for name in ("wavelength", "flux", "ivar", "mask"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.meta == b.meta


def test_second_read_of_a_file_reads_every_target_once_and_serves_the_rest(coadd, count_reads):
    expected = {sp.meta.ids["targetid"]: sp for sp in iter_spectra(coadd, on_skip=lambda s: None)}
    count_reads["iter"] = 0
    first = read_spectrum(coadd, SCIENCE[0])  # normal path
    assert count_reads == {"read": 1, "iter": 0}
    second = read_spectrum(coadd, str(SCIENCE[1]))  # fills the cache in one pass (a string target works too)
    third = read_spectrum(coadd, SCIENCE[0])  # served from it
    assert count_reads == {"read": 1, "iter": 1}
    same(first, expected[SCIENCE[0]]), same(second, expected[SCIENCE[1]]), same(third, expected[SCIENCE[0]])


def test_served_spectra_are_independent_copies(coadd):
    for _ in range(2):
        read_spectrum(coadd, SCIENCE[0])
    a = read_spectrum(coadd, SCIENCE[0])
    a.flux[:] = 0
    a.meta.ids["targetid"] = -1
    b = read_spectrum(coadd, SCIENCE[0])
    assert b.flux.any() and b.meta.ids["targetid"] == SCIENCE[0]


def test_unusable_targets_still_raise_and_a_changed_file_is_reread(coadd, count_reads):
    for _ in range(2):
        read_spectrum(coadd, SCIENCE[0])
    with pytest.raises(TargetNotFoundError, match="sky fibre"):
        read_spectrum(coadd, 616088619186127404)  # not in the cache: the reader says why
    with pytest.raises(TargetNotFoundError):
        read_spectrum(coadd, 1234)
    st = os.stat(coadd)
    os.utime(coadd, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # "modified": the cached copy is not used
    before = dict(count_reads)
    read_spectrum(coadd, SCIENCE[1])
    assert count_reads["read"] == before["read"] + 1


def test_redrock_choice_is_part_of_the_key(coadd, tmp_path):
    rr = DATA / "redrock-4-80613-thru20210324.fits"  # joins nothing for these targets, but is another choice
    for _ in range(2):
        plain = read_spectrum(coadd, SCIENCE[0])
    assert read_spectrum(coadd, SCIENCE[0], redrock=False).meta == plain.meta
    joined = read_spectrum(coadd, SCIENCE[0], redrock=rr)
    assert joined.meta.ids == plain.meta.ids
