"""Damaged and impossible inputs are read errors naming the file and the key, never a verdict, a hang or
an error blamed on another file; survey sentinels mean "unknown" with a warning."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

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


# --------------------------------------------------------------------------------------------- impossible values


def _lamost(tmp_path: Path, name: str = "l.fits", edit=None, layout: str = "lamost-lrs-image") -> Path:
    from spec_vetting.synthetic.synthetic import make_spectrum
    from spec_vetting.synthetic.writers import write_spectrum

    p = write_spectrum(make_spectrum("g_star", seed=3), tmp_path / name, layout)
    if edit is not None:
        with fits.open(p, mode="update") as h:
            edit(h)
    return p


@pytest.mark.parametrize("sentinel", [-9999.0, -1.0])
def test_lamost_redshift_sentinel_is_unknown_with_a_warning(tmp_path, sentinel):
    def edit(h):
        h[0].header["Z"] = sentinel

    s = read_spectrum(_lamost(tmp_path, edit=edit))
    assert s.meta.redshift is None
    assert any(f"Z = {sentinel:g}" in w and "redshift unknown" in w for w in s.meta.warnings)
    rest = s.rest_frame()
    assert rest.wavelength[0] > 3000  # read at rest, not at -0.4 Å


@pytest.mark.parametrize("z", [-5.0, -1.5, 1e30])
def test_impossible_redshift_is_a_read_error_naming_the_key(tmp_path, z):
    def edit(h):
        h[0].header["Z"] = z

    with pytest.raises(SpectrumReadError, match=r"Z = .* is not a physical redshift"):
        read_spectrum(_lamost(tmp_path, edit=edit))


def test_negative_wavelengths_are_a_read_error_naming_the_key(tmp_path):
    def edit(h):
        h[0].data[2] = -h[0].data[2][::-1]

    with pytest.raises(SpectrumReadError, match="wavelength row .* not vacuum Å"):
        read_spectrum(_lamost(tmp_path, edit=edit))

    def dr1(h):
        h[0].header["COEFF0"] = -3.0  # 10**-3 Å

    with pytest.raises(SpectrumReadError, match="COEFF0/COEFF1 grid runs 0.001"):
        read_spectrum(_lamost(tmp_path, "dr1.fits", dr1, "lamost-lrs-dr1-image"))


@pytest.mark.parametrize("n", [1, 2])
def test_one_or_two_pixel_spectra_are_read_errors(tmp_path, n):
    p = tmp_path / f"tiny{n}.fits"
    src = _lamost(tmp_path)
    with fits.open(src) as h:
        hdr = h[0].header.copy()
        data = h[0].data[:, :n].copy()
    fits.PrimaryHDU(data, hdr).writeto(p)
    with pytest.raises(SpectrumReadError, match=f"only {n} pixel"):
        read_spectrum(p)


def _desi(tmp_path: Path, name: str, kinds, seed0: int, redrock: bool = True):
    from spec_vetting.synthetic.desi import write_desi_coadd
    from spec_vetting.synthetic.synthetic import make_spectrum
    from spec_vetting.synthetic.writers import native_grid

    grid = native_grid("desi-coadd")
    spectra = [make_spectrum(k, seed=seed0 + i, wavelength=grid) for i, k in enumerate(kinds)]
    rr = tmp_path / name.replace("coadd-", "redrock-") if redrock else None
    tids = write_desi_coadd(spectra, tmp_path / name, redrock_path=rr, seed=seed0)
    return tmp_path / name, rr, tids


def test_desi_coadd_missing_an_arm_is_reported(tmp_path):
    path, _, tids = _desi(tmp_path, "coadd-sv3-dark-1.fits", ["galaxy"], 10)
    with fits.open(path) as h:
        kept = fits.HDUList([x.copy() for x in h if not (x.name or "").startswith("R_")])
    cut = tmp_path / "coadd-sv3-dark-2.fits"
    kept.writeto(cut)
    s = read_spectrum(cut, tids[0], redrock=False)
    assert any("arm R missing" in w for w in s.meta.warnings), s.meta.warnings
    assert not read_spectrum(path, tids[0]).meta.warnings


def test_redrock_file_for_other_targets_is_reported(tmp_path):
    a, rr_a, _ = _desi(tmp_path, "coadd-sv3-dark-1.fits", ["galaxy"], 10)
    b, _, tids_b = _desi(tmp_path, "coadd-sv3-dark-2.fits", ["qso"], 500, redrock=False)
    s = read_spectrum(b, tids_b[0], redrock=rr_a)
    assert s.meta.redshift is None
    assert any(f"has no row for TARGETID {tids_b[0]}" in w and str(rr_a) in w for w in s.meta.warnings)


def test_render_cli_never_crashes_with_a_raw_value_error(tmp_path):
    from click.testing import CliRunner

    from spec_vetting.cli import main

    def sentinel(h):
        h[0].header["Z"] = -9999.0

    p = _lamost(tmp_path, edit=sentinel)
    runner = CliRunner()
    ok = runner.invoke(main, ["render", str(p), "-o", str(tmp_path / "a.png")])
    assert ok.exit_code == 0, ok.output
    assert "redshift unknown" in ok.output
    for z in ("-1", "-3"):
        bad = runner.invoke(main, ["render", str(p), "--redshift", z, "-o", str(tmp_path / "b.png")])
        assert bad.exit_code == 2 and "--redshift" in bad.output and not isinstance(bad.exception, ValueError)

    def impossible(h):
        h[0].header["Z"] = -5.0

    q = _lamost(tmp_path, "q.fits", impossible)
    bad = runner.invoke(main, ["render", str(q), "-o", str(tmp_path / "c.png")])
    assert bad.exit_code == 2 and "Z = -5 is not a physical redshift" in bad.output
    assert bad.exception is None or isinstance(bad.exception, SystemExit)


def test_reader_warnings_reach_the_catalog_row(tmp_path):
    """A survey's "no redshift" sentinel is read as unknown and the verdict row says so (``read_warnings``)."""
    from dataclasses import dataclass

    from spec_vetting.catalog.rows import empty_row, rows_to_table, survey_columns

    @dataclass
    class _Cand:
        ra: float | None = None
        dec: float | None = None

    def edit(h):
        h[0].header["Z"] = -9999.0

    s = read_spectrum(_lamost(tmp_path, edit=edit))
    cols = survey_columns(s, _Cand())
    assert "Z = -9999" in cols["read_warnings"] and "redshift unknown" in cols["read_warnings"]
    clean = survey_columns(read_spectrum(_lamost(tmp_path, "clean.fits")), _Cand())
    assert clean["read_warnings"] is None
    row = {**empty_row("verdicts"), "run_id": "r", "candidate_id": "c", "verdict": "NO", **cols}
    assert rows_to_table([row], "verdicts").column("read_warnings").to_pylist() == [cols["read_warnings"]]


def _header_only(tmp_path: Path, cards: list[str], name: str = "spec-55862-B6212_sp06-006.fits") -> Path:
    """A file of one header block and no data: the cards given, then END (written by hand: astropy refuses them)."""
    block = b"".join(c.ljust(80).encode() for c in [*cards, "END"]).ljust(2880, b" ")
    p = tmp_path / name
    p.write_bytes(block)
    return p


@pytest.mark.parametrize(("cards", "said"), [
    # the file: a 70-digit BITPIX, 99,999,999 axes, a negative axis (24 s and 0.94 GB per read before)
    (["SIMPLE  =                    T", "BITPIX  = " + "9" * 70, "NAXIS   =             99999999",
      "NAXIS1  =                   -5"], "impossible BITPIX"),
    (["SIMPLE  =                    T", "BITPIX  =                    8", "NAXIS   =             99999999"],
     "impossible NAXIS = 99999999"),
    (["SIMPLE  =                    T", "BITPIX  =                    7", "NAXIS   =                    0"],
     "impossible BITPIX = 7"),
    (["SIMPLE  =                    T", "BITPIX  =                  -32", "NAXIS   =                    1",
      "NAXIS1  =                   -5"], "negative axis length NAXIS1 = -5"),
    (["SIMPLE  =                    T", "BITPIX  =                  -64", "NAXIS   =                    2",
      "NAXIS1  =          99999999999", "NAXIS2  =          99999999999"], "truncated"),  # sizes vs the length
], ids=["issue-34", "naxis", "bitpix", "negative-axis", "sizes"])
def test_impossible_header_sizes_are_refused_before_anything_is_allocated(tmp_path, cards, said):
    import resource
    import time

    p = _header_only(tmp_path, cards)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    with pytest.raises(SpectrumReadError, match=said) as err:
        read_spectrum(str(p))
    assert time.perf_counter() - t0 < 2
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0 < 50_000  # kB: nothing the header asked for
    assert str(p) in str(err.value)
