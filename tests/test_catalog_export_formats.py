"""FITS, VOTable and ECSV exports stream batch by batch and are what astropy writes from the whole table.

The oracle is astropy's own writer, given a table built here from the rows as Python values (not through the
streaming code), with the same VO metadata (UCDs, integer nulls, the time column, VOUnit units; in FITS the
TCOMMn/TTYPEn descriptions and time keywords, added here with astropy's header API): the streamed file must be
the same bytes, and read back the same columns (values, masks, units, descriptions, dtypes). What the metadata
says is checked on its own below, against literal values and astropy's UCD vocabulary.
"""

from __future__ import annotations

import datetime as dt
import io
import warnings

import numpy as np
import pyarrow as pa
import pytest
from astropy import units as u
from astropy.io import fits
from astropy.table import MaskedColumn, Table
from astropy.time import Time
from astropy.utils.masked import Masked
from test_eval_support import verdict_row, write_catalog

from spec_vetting.catalog.astropy_stream import write_ecsv, write_fits, write_votable
from spec_vetting.catalog.export import export_catalog
from spec_vetting.catalog.read import dataset
from spec_vetting.catalog.schema import file_schema
from spec_vetting.catalog.vo import UCDS

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


#: the integer null of the export: the type's minimum, outside every column's domain
INT_NULL = {pa.int64(): -9223372036854775808, pa.int32(): -2147483648}


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
        meta = {"ucd": UCDS[f.name]} if f.name in UCDS else {}
        fill = None
        if pa.types.is_timestamp(f.type):
            # the export's ISO text keeps the milliseconds (Arrow's %S has the fraction)
            iso = [v.replace(tzinfo=None).isoformat(timespec="milliseconds") if v else "" for v in vals]
            if fmt == "ecsv":  # a Time column
                filled = np.array([s or "2000-01-01T00:00:00.000" for s in iso], str)
                out[f.name] = Time(Masked(filled, mask=np.array(mask, bool)), format="isot", scale="utc",
                                   precision=3)
                out[f.name].info.description, out[f.name].info.meta = desc, meta
                continue
            data = np.array(iso or [""], str)[:len(vals)]
            desc += " (ISO 8601, UTC)"
            if fmt == "votable":
                meta["xtype"] = "timestamp"
        elif pa.types.is_string(f.type):
            data = np.array([_escape(v, fmt) if v else "" for v in vals] or [""], str)[:len(vals)]
            data = data.astype("U1") if data.dtype.itemsize == 0 else data
        elif pa.types.is_integer(f.type):
            data = np.array([0 if v is None else v for v in vals], f.type.to_pandas_dtype())
            fill = INT_NULL[f.type]
            if fmt == "votable":
                meta["values"] = {"null": fill}
        elif pa.types.is_floating(f.type):
            data = np.array([np.nan if v is None else v for v in vals], float)
        else:
            data = np.array([bool(v) for v in vals], bool)
        if fmt == "votable" and unit == "Angstrom":
            unit = "0.1nm"  # VOUnit deprecates Angstrom
        out[f.name] = MaskedColumn(data, mask=mask, unit=unit, description=desc, fill_value=fill, meta=meta or None)
    return out


def _fits_descriptions(path, schema):
    """The FITS oracle's header: each description as TCOMMn after TTYPEn and as the TTYPEn comment (what fits on
    the card, '...' when cut), TCTYPn = 'UTC' after TTYPEn of a time column, then TIMESYS, and LONGSTRN when a
    description is longer than one card's string."""
    with fits.open(path) as hdul:
        hdr = hdul[1].header
        for i, f in enumerate(schema, start=1):
            desc = f.metadata[b"description"].decode().encode("ascii", "backslashreplace").decode()
            if pa.types.is_timestamp(f.type):
                hdr.insert(f"TTYPE{i}", (f"TCTYP{i}", "UTC", "time scale of the ISO 8601 values"), after=True)
            hdr.insert(f"TTYPE{i}", (f"TCOMM{i}", desc), after=True)
            room = 80 - len(f"TTYPE{i}".ljust(8) + "= " + f"'{f.name.ljust(8)}'".ljust(20) + " / ")
            hdr.comments[f"TTYPE{i}"] = desc if len(desc) <= room else desc[:room - 3] + "..."
        if any(pa.types.is_timestamp(f.type) for f in schema):
            hdr["TIMESYS"] = ("UTC", "time scale of the time columns")
        if any(len(f.metadata[b"description"]) > 68 for f in schema):
            hdr["LONGSTRN"] = ("OGIP 1.0", "long strings use the CONTINUE convention")
        hdul.writeto(path, overwrite=True)


def _astropy_bytes(table, fmt, tmp_path, schema=None):
    path = tmp_path / f"oracle.{fmt}"
    table.write(str(path), format=ASTROPY[fmt], overwrite=True)
    if fmt == "fits":
        _fits_descriptions(path, schema or SCHEMA)
    return path.read_bytes()


def _read(data: bytes, fmt):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # VOUnit-clean units, valid UCDs: a reader has nothing to complain about
        return Table.read(io.BytesIO(data) if fmt != "ecsv" else data.decode(), format=ASTROPY[fmt])


def assert_same_columns(got: Table, want: Table):
    assert got.colnames == want.colnames and len(got) == len(want)
    for name in want.colnames:
        g, w = got[name], want[name]
        if isinstance(w, Time):
            assert isinstance(g, Time) and g.info.description == w.info.description, name
            assert (np.ma.getmaskarray(g.mask) == np.ma.getmaskarray(w.mask)).all(), name
            assert list(g.isot[~w.mask]) == list(w.isot[~w.mask]), name
            continue
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
            assert hdul[1].header["NAXIS2"] == 23 and hdul[1].header["TNULL3"] == -9223372036854775808
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
    want = _astropy_bytes(oracle_table(rows, schema, fmt), fmt, tmp_path, schema)
    assert out.read_bytes() == want
    back = _read(out.read_bytes(), fmt)
    assert str(back["ra"].unit) == "deg"
    if fmt == "ecsv":
        assert isinstance(back["started_at"], Time) and back["started_at"].scale == "utc"
    else:
        assert "(ISO 8601, UTC)" in back["started_at"].description
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


def _vo_rows():
    rows = _catalog_rows()
    rows[1]["obsid"] = 999999  # a real LAMOST obsid may be any positive number: never read back as null
    rows[2]["obsid"] = None
    return rows


def test_fits_readers_see_descriptions_nulls_outside_the_domain_and_a_time_column(tmp_path):
    root = write_catalog(tmp_path / "cat", _vo_rows())
    out = tmp_path / "v.fits"
    export_catalog(root, out, "fits", batch_rows=7)
    schema = [f for f in file_schema("verdicts") if f.name != "image_png"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with fits.open(out) as hdul:
            hdr = hdul[1].header
            for i, f in enumerate(schema, start=1):
                desc = f.metadata[b"description"].decode()
                assert hdr[f"TTYPE{i}"] == f.name and hdr[f"TCOMM{i}"] == desc, f.name  # long ones: CONTINUE
                assert desc.startswith(hdr.comments[f"TTYPE{i}"].removesuffix("...")), f.name
                if pa.types.is_integer(f.type):
                    assert hdr[f"TNULL{i}"] == {64: -2**63, 32: -2**31}[f.type.bit_width], f.name
            at = [f.name for f in schema].index("started_at") + 1
            assert hdr[f"TCTYP{at}"] == "UTC" and hdr["TIMESYS"] == "UTC" and hdr["LONGSTRN"] == "OGIP 1.0"
        native = Table.read(out, astropy_native=True)
    back = Table.read(out)
    by_id = {c: i for i, c in enumerate(back["candidate_id"])}
    assert isinstance(native["started_at"], Time) and native["started_at"].scale == "utc"
    assert native["started_at"][by_id["c01"]].isot == "2026-01-01T03:04:01.000"
    assert back["obsid"][by_id["c01"]] == 999999 and not back["obsid"].mask[by_id["c01"]]
    assert back["obsid"].mask[by_id["c02"]]
    # CFITSIO (through fitsio) reads the long descriptions whole
    import fitsio

    h = fitsio.read_header(str(out), ext=1)
    j = [f.name for f in schema].index("recovered_verdict") + 1
    assert h[f"TCOMM{j}"] == schema[j - 1].metadata[b"description"].decode()


def test_votable_fields_carry_ucds_timestamps_and_vounits(tmp_path):
    from astropy.io.votable import parse
    from astropy.io.votable.ucd import check_ucd

    root = write_catalog(tmp_path / "cat", _vo_rows())
    out = tmp_path / "v.vot"
    export_catalog(root, out, "votable", batch_rows=7)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unknown or deprecated unit, a bad UCD: a warning, so a failure here
        fields = {f.name: f for f in parse(str(out), verify="warn").get_first_table().fields}
    assert fields["ra"].ucd == "pos.eq.ra;meta.main" and fields["dec"].ucd == "pos.eq.dec;meta.main"
    assert fields["candidate_id"].ucd == "meta.id;meta.main" and fields["targetid"].ucd == "meta.id"
    assert fields["p_yes"].ucd == "stat.probability"
    assert fields["started_at"].ucd == "time.start" and fields["started_at"].xtype == "timestamp"
    assert fields["zoom_windows"].unit == u.AA and str(fields["ra"].unit) == "deg"
    assert 'unit="0.1nm"' in out.read_text() and "Angstrom" not in out.read_text()
    assert fields["obsid"].values.null == -2**63 and fields["n_turns"].values.null == -2**31
    for f in fields.values():
        assert f.ucd is None or check_ucd(f.ucd, check_controlled_vocabulary=True), (f.name, f.ucd)
    back = _read(out.read_bytes(), "votable")
    by_id = {c: i for i, c in enumerate(back["candidate_id"])}
    assert back["obsid"][by_id["c01"]] == 999999 and back["obsid"].mask[by_id["c02"]]


def test_ecsv_started_at_is_an_astropy_time(tmp_path):
    root = write_catalog(tmp_path / "cat", _vo_rows())
    out = tmp_path / "v.ecsv"
    export_catalog(root, out, "ecsv", batch_rows=7)
    back = _read(out.read_bytes(), "ecsv")
    by_id = {c: i for i, c in enumerate(back["candidate_id"])}
    at = back["started_at"]
    assert isinstance(at, Time) and at.scale == "utc" and at.info.meta["ucd"] == "time.start"
    assert at[by_id["c03"]].isot == "2026-01-01T03:04:03.000" and at.mask[by_id["c02"]]
    assert back["ra"].info.meta["ucd"] == "pos.eq.ra;meta.main"
