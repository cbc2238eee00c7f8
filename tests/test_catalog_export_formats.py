"""FITS, VOTable and ECSV exports stream batch by batch and are what astropy writes from the whole table.

The oracle is astropy's own writer, given a table built here from the rows as Python values (not through the
streaming code): the streamed file must be the same bytes, and read back the same columns (values, masks, units,
descriptions, dtypes).
"""

from __future__ import annotations

import datetime as dt
import io
import warnings

import numpy as np
import pyarrow as pa
import pytest
from astropy.table import MaskedColumn, Table
from astropy.units import UnitsWarning
from test_eval_support import verdict_row, write_catalog

from spec_vetting.catalog.astropy_stream import write_ecsv, write_fits, write_votable
from spec_vetting.catalog.export import export_catalog
from spec_vetting.catalog.read import dataset
from spec_vetting.catalog.schema import file_schema

WRITERS = {"fits": write_fits, "votable": write_votable, "ecsv": write_ecsv}
ASTROPY = {"fits": "fits", "votable": "votable", "ecsv": "ascii.ecsv"}
TARGETID = 39627866878511337  # > 2**53: exact only as an integer
UTC = dt.UTC


def _field(name, type_, description, unit=None):
    meta = {"description": description, **({"unit": unit} if unit else {})}
    return pa.field(name, type_, metadata=meta)


SCHEMA = pa.schema([
    _field("name", pa.string(), "Text: nulls, long, unicode, markup"),
    _field("empty", pa.string(), "Text that is always null"),
    _field("targetid", pa.int64(), "Big ids with nulls"),
    _field("n", pa.int32(), "Small ints", unit="d"),
    _field("x", pa.float64(), "Floats with nulls", unit="deg"),
    _field("ok", pa.bool_(), "Bools with nulls"),
    _field("at", pa.timestamp("ms", tz="UTC"), "A time"),
], metadata={"spec_vetting.schema": "test", "spec_vetting.schema_version": "9.9"})


def _rows(k=23):
    texts = ["a", None, "Hα 6563 Å – broad", "x" * 3000, 'quote " and, comma', "<TD>&amp;</TD>", "two\nlines", "",
             "blanks  ", " tab\t "]
    return [{"name": texts[i % len(texts)], "empty": None,
             "targetid": None if i % 3 == 1 else TARGETID + i, "n": None if i % 5 == 2 else i - 4,
             "x": None if i % 4 == 3 else 0.1 * i - 1.0, "ok": None if i % 6 == 5 else i % 2 == 0,
             "at": None if i % 7 == 6 else dt.datetime(2026, 1, 1, 12, 0, i, 1000 * i, tzinfo=UTC)} for i in range(k)]


def _scan(table, batch_rows):
    """The writers' batches callable: fresh batches of ``batch_rows`` rows, of some columns or all."""
    return lambda columns=None: (table.select(columns) if columns else table).to_batches(max_chunksize=batch_rows)


def _escape(s, fmt):
    # FITS text is ASCII: the export writes other characters as Python backslash escapes
    return s.encode("ascii", "backslashreplace").decode("ascii") if fmt == "fits" else s


def oracle_table(rows, schema, fmt):
    """The astropy table of ``rows``, built from Python values, as the export describes it (ISO times, masks)."""
    md = schema.metadata
    out = Table(meta={"CATALOG": md[b"spec_vetting.schema"].decode(),
                      "SCHEMAV": md[b"spec_vetting.schema_version"].decode()})
    for f in schema:
        fm = {k.decode(): v.decode() for k, v in f.metadata.items()}
        vals = [r[f.name] for r in rows]
        mask = [v is None for v in vals]
        unit, desc = fm.get("unit"), fm["description"]
        if pa.types.is_timestamp(f.type):
            # the export's ISO text keeps the milliseconds (Arrow's %S has the fraction)
            iso = [v.replace(tzinfo=None).isoformat(timespec="milliseconds") if v else "" for v in vals]
            data = np.array(iso or [""], str)[:len(vals)]
            desc += " (ISO 8601, UTC)"
        elif pa.types.is_string(f.type):
            data = np.array([_escape(v, fmt) if v else "" for v in vals] or [""], str)[:len(vals)]
            data = data.astype("U1") if data.dtype.itemsize == 0 else data
        elif pa.types.is_integer(f.type):
            data = np.array([0 if v is None else v for v in vals], f.type.to_pandas_dtype())
        elif pa.types.is_floating(f.type):
            data = np.array([np.nan if v is None else v for v in vals], float)
        else:
            data = np.array([bool(v) for v in vals], bool)
        out[f.name] = MaskedColumn(data, mask=mask, unit=unit, description=desc)
    return out


def _astropy_bytes(table, fmt, tmp_path):
    path = tmp_path / f"oracle.{fmt}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnitsWarning)
        table.write(str(path), format=ASTROPY[fmt], overwrite=True)
    return path.read_bytes()


def _read(data: bytes, fmt):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnitsWarning)  # VOUnit deprecates Angstrom; astropy still reads it
        return Table.read(io.BytesIO(data) if fmt != "ecsv" else data.decode(), format=ASTROPY[fmt])


def assert_same_columns(got: Table, want: Table):
    assert got.colnames == want.colnames and len(got) == len(want)
    for name in want.colnames:
        g, w = got[name], want[name]
        assert g.dtype == w.dtype, name
        assert str(g.unit) == str(w.unit) and g.description == w.description, name
        gm, wm = np.ma.getmaskarray(g), np.ma.getmaskarray(w)
        assert (gm == wm).all(), name
        gv, wv = np.asarray(g)[~gm], np.asarray(w)[~wm]
        assert (gv == wv).all() if g.dtype.kind != "f" else np.array_equal(gv, wv, equal_nan=True), name


@pytest.mark.parametrize("fmt", list(WRITERS))
@pytest.mark.parametrize("batch_rows,chunk_bytes", [(7, 64 << 20), (1000, 20_000), (5, 1)])
def test_streamed_file_is_what_astropy_writes(tmp_path, fmt, batch_rows, chunk_bytes):
    rows = _rows()
    out = tmp_path / f"streamed.{fmt}"
    n = WRITERS[fmt](out, SCHEMA, _scan(pa.Table.from_pylist(rows, SCHEMA), batch_rows), chunk_bytes=chunk_bytes)
    assert n == len(rows)
    oracle = oracle_table(rows, SCHEMA, fmt)
    want = _astropy_bytes(oracle, fmt, tmp_path)
    got = out.read_bytes()
    assert got == want  # the strongest check: byte for byte astropy's own file
    assert_same_columns(_read(got, fmt), _read(want, fmt))
    back = _read(got, fmt)
    assert int(back["targetid"][0]) == TARGETID and back["targetid"].mask[1]
    assert back["x"].unit == "deg" and back["n"].description == "Small ints"


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_no_rows_is_what_astropy_writes(tmp_path, fmt):
    out = tmp_path / f"empty.{fmt}"
    assert WRITERS[fmt](out, SCHEMA, _scan(SCHEMA.empty_table(), 7)) == 0
    assert out.read_bytes() == _astropy_bytes(oracle_table([], SCHEMA, fmt), fmt, tmp_path)


def test_fits_structure_verifies(tmp_path):
    from astropy.io import fits

    out = tmp_path / "v.fits"
    write_fits(out, SCHEMA, _scan(pa.Table.from_pylist(_rows(), SCHEMA), 7))
    assert out.stat().st_size % 2880 == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any complaint about the file's structure fails the test
        with fits.open(out, checksum=False) as hdul:
            hdul.verify("exception")
            assert hdul[1].header["NAXIS2"] == 23 and hdul[1].header["TNULL3"] == 999999
            assert hdul[1].data["name"][2] == "H\\u03b1 6563 \\xc5 \\u2013 broad"


def _catalog_rows():
    rows = []
    for i in range(19):
        extra = {"targetid": TARGETID + i if i % 3 else None, "ra": None if i % 4 == 0 else 10.0 + i,
                 "justification": ("Hα and Hβ 6563 Å " * 200) if i == 5 else (None if i % 5 == 0 else f"j{i}"),
                 "started_at": dt.datetime(2026, 1, 1, 3, 4, i, tzinfo=UTC) if i % 2 else None}
        rows.append(verdict_row(f"c{i:02d}", "cv" if i % 2 else "wd", "YES" if i % 3 else "NO", **extra))
    return rows


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_export_catalog_streams_what_astropy_writes(tmp_path, fmt):
    root = write_catalog(tmp_path / "cat", _catalog_rows())
    out = tmp_path / f"v.{fmt}"
    assert export_catalog(root, out, fmt, batch_rows=7) == 19
    schema = pa.schema([f for f in file_schema("verdicts") if f.name != "image_png"],
                       metadata=file_schema("verdicts").metadata)
    rows = dataset(root, "verdicts").to_table(columns=schema.names).to_pylist()  # the scan's order
    want = _astropy_bytes(oracle_table(rows, schema, fmt), fmt, tmp_path)
    assert out.read_bytes() == want
    back = _read(out.read_bytes(), fmt)
    assert str(back["ra"].unit) == "deg" and "(ISO 8601, UTC)" in back["started_at"].description
    assert sorted(int(v) for v in back["targetid"].compressed()) == sorted(
        r["targetid"] for r in rows if r["targetid"] is not None)


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_export_where_streams_the_selected_rows(tmp_path, fmt):
    root = write_catalog(tmp_path / "cat", _catalog_rows())
    out = tmp_path / f"v.{fmt}"
    assert export_catalog(root, out, fmt, where="verdict = 'YES' AND task = 'cv'", batch_rows=3) == 6
    back = _read(out.read_bytes(), fmt)
    assert sorted(back["candidate_id"]) == [f"c{i:02d}" for i in range(19) if i % 3 and i % 2]
    assert set(back["verdict"]) == {"YES"}
    with pytest.raises(FileExistsError):
        export_catalog(root, out, fmt, overwrite=False)
