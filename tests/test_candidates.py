"""Candidate lists: every accepted format, relative paths, stable ids, and messages that say what to fix."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from astropy.io import fits

from spec_vetting.errors import CandidateListError, SpectrumReadError
from spec_vetting.io.candidate import Candidate
from spec_vetting.io.candidates import load_candidates
from spec_vetting.synthetic.desi import write_desi_coadd
from spec_vetting.synthetic.synthetic import make_spectrum
from spec_vetting.synthetic.writers import native_grid, write_spectrum


@pytest.fixture(scope="module")
def spectra_dir(tmp_path_factory):
    """Two LAMOST files, an SDSS file and a DESI coadd (2 science targets + stuck + sky) with its redrock file."""
    d = tmp_path_factory.mktemp("spectra")
    write_spectrum(make_spectrum("cv", seed=1), d / "lamost" / "a.fits", "lamost-lrs-image")
    write_spectrum(make_spectrum("wd_da", seed=2), d / "lamost" / "b.fits.gz", "lamost-lrs-dr1-image")
    write_spectrum(
        make_spectrum("galaxy", seed=3, wavelength=native_grid("sdss-spec-lite")), d / "sdss" / "spec-1.fits",
        "sdss-spec-lite",
    )  # fmt: skip
    grid = native_grid("desi-coadd")
    tids = write_desi_coadd(
        [make_spectrum("qso", seed=4, wavelength=grid), make_spectrum("m_giant", seed=5, wavelength=grid)],
        d / "desi" / "coadd-sv3-dark-1.fits",
        redrock_path=d / "desi" / "redrock-sv3-dark-1.fits",
    )
    return d, tids


def _csv(path, text):
    path.write_text(text)
    return path


def test_csv_relative_paths_and_fields(spectra_dir, tmp_path):
    d, tids = spectra_dir
    lst = _csv(
        d / "list.csv",
        "candidate_id,path,targetid,task,label,ra,dec\n"
        "c1,lamost/a.fits,,cv,yes,10.5,-3\n"
        f",desi/coadd-sv3-dark-1.fits,{tids[1]},gm,NO,,\n"
        ",sdss/spec-1.fits,,,,,\n",
    )
    # an empty id in a list with an id column is that row's error, not an id guessed from the file name (issue 34)
    refused = load_candidates(lst)
    assert [c.candidate_id for c in refused] == ["c1", "(no id) list.csv row 2", "(no id) list.csv row 3"]
    assert refused[0].refused is None and all("cell is empty" in c.refused for c in refused[1:])
    # without an id column every id is made from the file name (and the DESI target)
    lst = _csv(d / "list.csv", "\n".join(",".join(line.split(",")[1:]) for line in lst.read_text().splitlines())
               + "\n")
    cands = load_candidates(lst)
    assert [c.candidate_id for c in cands] == ["a", f"coadd-sv3-dark-1-{tids[1]}", "spec-1"]
    c1, c2, c3 = cands
    assert c1.path == str(d / "lamost" / "a.fits") and c1.task == "cv" and c1.label == "YES"
    assert (c1.ra, c1.dec) == (10.5, -3.0) and c1.target is None
    assert c2.target == tids[1] and isinstance(c2.target, int) and c2.label == "NO"
    assert c3.task is None and c3.label is None and c3.ra is None
    assert "row 2" in c2.source
    # the list can be loaded from anywhere: paths resolve against its folder, ids do not change
    assert [c.candidate_id for c in load_candidates(str(lst))] == [c.candidate_id for c in cands]
    assert c2.load_spectrum().meta.pipeline_class == "STAR"  # redrock beside the coadd joined
    assert c1.load_spectrum().meta.variant == "lamost-lrs-image"


def test_paths_are_absolute_whatever_the_working_folder(spectra_dir, monkeypatch):
    d, _ = spectra_dir
    _csv(d / "rel.csv", "candidate_id,path\nc1,lamost/a.fits\n")
    monkeypatch.chdir(d.parent)
    for source in (f"{d.name}/rel.csv", f"{d.name}/lamost", f"{d.name}/lamost/*.fits"):
        paths = [c.path for c in load_candidates(source)]
        assert paths and all(Path(p).is_absolute() for p in paths), (source, paths)
    assert load_candidates(f"{d.name}/rel.csv")[0].path == str(d / "lamost" / "a.fits")


def test_parquet_and_fits_tables(spectra_dir, tmp_path):
    d, tids = spectra_dir
    (tmp_path / "data").symlink_to(d)  # lists live outside the spectra folder (a FITS list would be listed there)
    table = pa.table({"PATH": ["data/lamost/a.fits", "data/desi/coadd-sv3-dark-1.fits"], "TARGET": [None, tids[0]],
                      "Label": ["NO", "YES"], "task": ["wd", "cv"], "extra": [1, 2]})  # fmt: skip
    pq.write_table(table, tmp_path / "list.parquet")
    pcands = load_candidates(tmp_path / "list.parquet")
    assert [c.target for c in pcands] == [None, tids[0]]
    assert [c.label for c in pcands] == ["NO", "YES"] and pcands[0].path == str(tmp_path / "data/lamost/a.fits")

    cols = [
        fits.Column(name="PATH", format="40A", array=np.array(["data/lamost/a.fits", "data/sdss/spec-1.fits"])),
        fits.Column(name="CANDIDATE_ID", format="10A", array=np.array(["x1", "x2"])),
        fits.Column(name="RA", format="D", array=np.array([1.0, 2.0])),
    ]
    fits.BinTableHDU.from_columns(cols).writeto(tmp_path / "list.fits")
    fcands = load_candidates(tmp_path / "list.fits")
    assert [c.candidate_id for c in fcands] == ["x1", "x2"] and fcands[1].ra == 2.0
    assert fcands[1].path == str(tmp_path / "data/sdss/spec-1.fits")
    assert fcands[1].load_spectrum().meta.survey == "sdss"


def test_missing_path_column_lists_the_columns(tmp_path):
    lst = _csv(tmp_path / "l.csv", "obsid,task\n123,cv\n")
    with pytest.raises(CandidateListError, match=r"no path column; columns found: obsid, task") as exc:
        load_candidates(lst)
    assert str(lst) in str(exc.value) and "add a column 'path'" in str(exc.value)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("a.fits,,maybe,,", r"row 2: label 'maybe' is not YES or NO"),
        ("a.fits,,,400,", r"row 2: ra 400.0 is outside \[0, 360\]"),
        ("a.fits,,,,north", r"row 2: dec 'north' is not a number"),
        (",,YES,,", r"row 2: empty path"),
    ],
)
def test_bad_row_names_the_row(tmp_path, row, message):
    lst = _csv(tmp_path / "l.csv", f"path,task,label,ra,dec\nok.fits,cv,YES,1,1\n{row}\n")
    with pytest.raises(CandidateListError, match=message):
        load_candidates(lst)


def test_directory_lists_every_file_and_desi_targets(spectra_dir, tmp_path):
    d, tids = spectra_dir
    cands = load_candidates(d)
    ids = [c.candidate_id for c in cands]
    assert ids == [f"coadd-sv3-dark-1-{tids[0]}", f"coadd-sv3-dark-1-{tids[1]}", "a", "b", "spec-1"]
    assert all(c.task is None and c.label is None for c in cands)  # the redrock file is not a candidate
    assert load_candidates(str(d / "lamost" / "*.fits*"))[1].candidate_id == "b"
    assert [c.target for c in load_candidates(d / "desi" / "coadd-sv3-dark-1.fits")] == tids


def test_a_redrock_file_named_on_its_own_is_one_candidate_that_fails_when_read(spectra_dir):
    d, _ = spectra_dir
    (cand,) = load_candidates(d / "desi" / "redrock-sv3-dark-1.fits")
    assert cand.candidate_id == "redrock-sv3-dark-1" and cand.target is None
    with pytest.raises(SpectrumReadError, match="redshift catalogue"):
        cand.load_spectrum()


def test_corrupt_file_in_a_directory_is_still_one_candidate(spectra_dir, tmp_path):
    d, _ = spectra_dir
    shutil.copy(d / "lamost" / "a.fits", tmp_path / "good.fits")
    (tmp_path / "broken.fits").write_bytes(b"SIMPLE  =    T" + b"\0" * 100)
    (tmp_path / "notes.txt").write_text("not a spectrum")
    cands = load_candidates(tmp_path)
    assert [c.candidate_id for c in cands] == ["broken", "good"]
    with pytest.raises(SpectrumReadError, match="broken.fits"):
        cands[0].load_spectrum()
    assert cands[1].load_spectrum().meta.survey == "lamost"


def test_same_file_name_in_two_folders_gets_distinct_stable_ids(spectra_dir, tmp_path):
    d, _ = spectra_dir
    for sub in ("n1", "n2"):
        (tmp_path / sub).mkdir()
        shutil.copy(d / "lamost" / "a.fits", tmp_path / sub / "a.fits")
    first = [c.candidate_id for c in load_candidates(tmp_path)]
    assert len(set(first)) == 2 and all(i.startswith("a-") for i in first)
    assert [c.candidate_id for c in load_candidates(tmp_path)] == first


def test_missing_sources_and_formats(tmp_path):
    with pytest.raises(CandidateListError, match="no such file or directory"):
        load_candidates(tmp_path / "nope.csv")
    with pytest.raises(CandidateListError, match="matches no FITS file"):
        load_candidates(str(tmp_path / "*.fits"))
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(CandidateListError, match="unknown candidate list format"):
        load_candidates(tmp_path / "x.json")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert load_candidates(empty) == []  # an empty incoming folder is a normal night, not an error


def test_links_and_fifos_in_a_folder_are_candidates_with_errors(spectra_dir, tmp_path):
    """Dangling links, link loops and FIFOs used to vanish from a folder listing without a message."""
    import os
    import threading

    d, _ = spectra_dir
    shutil.copy(d / "lamost" / "a.fits", tmp_path / "good.fits")
    (tmp_path / "dangling.fits").symlink_to(tmp_path / "gone.fits")
    (tmp_path / "loop1.fits").symlink_to(tmp_path / "loop2.fits")
    (tmp_path / "loop2.fits").symlink_to(tmp_path / "loop1.fits")
    os.mkfifo(tmp_path / "pipe.fits")
    (tmp_path / "linked.fits").symlink_to(tmp_path / "good.fits")
    out: list = []
    t = threading.Thread(target=lambda: out.append(load_candidates(tmp_path)), daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "listing a folder with a FIFO blocked"
    cands = {c.candidate_id: c for c in out[0]}
    assert sorted(cands) == ["dangling", "good", "linked", "loop1", "loop2", "pipe"]
    for cid, message in [("dangling", "dangling symbolic link"), ("loop1", "symbolic link loop"),
                         ("loop2", "symbolic link loop"), ("pipe", "FIFO")]:
        with pytest.raises(SpectrumReadError, match=message):
            cands[cid].load_spectrum()
    assert cands["linked"].load_spectrum().meta.survey == "lamost"


def test_load_spectrum_errors_are_typed(tmp_path):
    with pytest.raises(SpectrumReadError, match="missing.fits"):
        Candidate(candidate_id="m", path=str(tmp_path / "missing.fits")).load_spectrum()
    with pytest.raises(SpectrumReadError, match="neither a path nor an inline spectrum"):
        Candidate(candidate_id="m").load_spectrum()


def test_several_sources_at_once(spectra_dir):
    d, _ = spectra_dir
    cands = load_candidates([d / "lamost" / "a.fits", d / "sdss" / "spec-1.fits"])
    assert [c.candidate_id for c in cands] == ["a", "spec-1"]


def _write_list(tmp_path, fmt, columns: dict):
    if fmt == "csv":
        names = list(columns)
        lines = [",".join(names)] + [",".join(str(columns[n][i]) for n in names) for i in range(len(columns[names[0]]))]
        return _csv(tmp_path / "l.csv", "\n".join(lines) + "\n")
    if fmt == "parquet":
        pq.write_table(pa.table(columns), tmp_path / "l.parquet")
        return tmp_path / "l.parquet"
    cols = [fits.Column(name=n, format="K" if isinstance(v[0], int) else "10A", array=np.array(v))
            for n, v in columns.items()]
    fits.BinTableHDU.from_columns(cols).writeto(tmp_path / "l.fits")
    return tmp_path / "l.fits"


@pytest.mark.parametrize("fmt", ["csv", "parquet", "fits"])
def test_every_table_format_missing_path_lists_the_columns(tmp_path, fmt):
    lst = _write_list(tmp_path, fmt, {"OBSID": [123, 456], "TASK": ["cv", "wd"]})
    with pytest.raises(CandidateListError, match=r"no path column; columns found: OBSID, TASK") as exc:
        load_candidates(lst)
    assert str(lst) in str(exc.value)


@pytest.mark.parametrize("fmt", ["parquet", "fits"])
def test_bad_row_in_parquet_and_fits_lists_names_the_row(tmp_path, fmt):
    lst = _write_list(tmp_path, fmt, {"path": ["a.fits", "b.fits"], "label": ["YES", "perhaps"]})
    with pytest.raises(CandidateListError, match=r"row 2: label 'perhaps' is not YES or NO"):
        load_candidates(lst)


def test_non_finite_coordinate_is_named(tmp_path):
    lst = _csv(tmp_path / "l.csv", "path,ra,dec\na.fits,nan,1\n")
    with pytest.raises(CandidateListError, match=r"row 1: ra 'nan' is not a finite number"):
        load_candidates(lst)


def test_corrupt_and_truncated_gzip_files_in_a_directory_are_still_candidates(spectra_dir, tmp_path):
    d, _ = spectra_dir
    raw = (d / "lamost" / "b.fits.gz").read_bytes()
    corrupt = bytearray(raw)
    corrupt[40:900] = bytes(range(256)) * 3 + bytes(92)  # the deflate stream no longer decodes
    (tmp_path / "corrupt.fits.gz").write_bytes(bytes(corrupt))
    (tmp_path / "cut.fits.gz").write_bytes(raw[:3000])
    (tmp_path / "empty.fits").write_bytes(b"")
    cands = load_candidates(tmp_path)
    assert [c.candidate_id for c in cands] == ["corrupt", "cut", "empty"]
    for c, message in zip(cands, ["gzip data is truncated or corrupt"] * 2 + ["the file is empty"], strict=True):
        with pytest.raises(SpectrumReadError, match=message):
            c.load_spectrum()


@pytest.mark.parametrize("bad", ["c\x001", "c\n1", "c\x1b[31m1", "c\x7f1", "c\x851"])
def test_a_control_character_in_a_candidate_id_is_that_rows_error(tmp_path, bad):
    """Every export format must agree on an id: VOTable drops NUL, FITS/ECSV/CSV keep it. Such a row is not vetted
    (issue 34, item 7): it is recorded under its id with the control character written as \\uXXXX, and reading it
    raises the reason naming the file and row; the other rows are as given."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from spec_vetting.errors import CandidateRowError
    from spec_vetting.io.candidates import load_candidates

    path = tmp_path / "list.parquet"
    pq.write_table(pa.table({"candidate_id": ["ok-1", bad], "path": ["a.fits", "b.fits"]}), path)
    ok, refused = load_candidates(path)
    assert ok.candidate_id == "ok-1" and ok.refused is None
    code = next(c for c in bad if not c.isprintable())
    assert refused.candidate_id == bad.replace(code, f"\\u{ord(code):04X}") and refused.candidate_id.isprintable()
    with pytest.raises(CandidateRowError) as info:
        refused.load_spectrum()
    said = str(info.value)
    assert f"U+{ord(code):04X}" in said and f"{path} (parquet row 2)" in said and said.isprintable(), said


def test_an_empty_id_is_that_rows_error_not_a_guess(tmp_path):
    from spec_vetting.errors import CandidateRowError
    from spec_vetting.io.candidates import load_candidates

    path = tmp_path / "list.csv"
    path.write_text("candidate_id,path\nok-1,a.fits\n,b.fits\n")
    ok, empty = load_candidates(path)
    assert ok.candidate_id == "ok-1" and empty.candidate_id == "(no id) list.csv row 2"
    with pytest.raises(CandidateRowError, match="cell is empty"):
        empty.load_spectrum()


def test_a_night_with_bad_empty_and_duplicate_ids_vets_the_rest(tmp_path):
    """One row with NUL in its id, one with an empty id, one listed again: three ERROR rows naming the cause
    (error_kind bad_candidate), the first of the duplicates and the good rows vetted, exit 0 (issue 34, item 7)."""
    import pyarrow.dataset as ds
    from test_pipeline_cli import _env, _examples, _run

    env = _env(tmp_path)
    examples = _examples(tmp_path, 4, env)
    header, *rows = examples.read_text().strip().splitlines()
    first = rows[0].split(",")
    extra = [f"bad\x00id,{first[1]},,{first[3]},", f",{first[1]},,{first[3]},", f"{first[0]},{first[1]},,{first[3]},"]
    cands = examples.with_name("night.csv")
    cands.write_bytes(("\n".join([header, *rows, *extra]) + "\n").encode())
    r = _run(["run", "--candidates", cands, "--out", tmp_path / "cat"], env)
    assert r.returncode == 0, r.stderr
    got = {x["candidate_id"]: x for x in ds.dataset(tmp_path / "cat" / "verdicts", format="parquet").to_table(
        columns=["candidate_id", "verdict", "error_kind", "error_message"]).to_pylist()}
    again = f"{first[0]} (again: {cands} (csv row {len(rows) + 3}))"
    refused = {k: v for k, v in got.items() if v["error_kind"] == "bad_candidate"}
    assert sorted(refused) == sorted(["bad\\u0000id", f"(no id) night.csv row {len(rows) + 2}", again]), sorted(got)
    assert all(v["verdict"] == "ERROR" for v in refused.values())
    assert "U+0000" in refused["bad\\u0000id"]["error_message"]
    assert "cell is empty" in refused[f"(no id) night.csv row {len(rows) + 2}"]["error_message"]
    assert "listed again" in refused[again]["error_message"]
    assert {ln.split(",")[0] for ln in rows} <= set(got) and got[first[0]]["error_kind"] != "bad_candidate"
