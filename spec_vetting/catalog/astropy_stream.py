"""FITS, VOTable and ECSV written batch by batch, byte for byte what astropy writes from the whole table.

astropy's writers take one in-memory table; at a million rows the text columns alone (fixed-width numpy unicode)
are gigabytes. Here the rows go through astropy a chunk at a time and only the parts that do not depend on the
other rows are kept:

- ECSV: astropy writes the YAML header of a zero-row table with the same columns; each chunk is written as ECSV
  by astropy and its data lines are appended (quoting, escaping and null markers are astropy's own);
- VOTable: each chunk is written by astropy with the final string widths (``arraysize`` is the longest value), so
  its header is the same for every chunk; the first chunk's header, every chunk's ``<TR>`` rows and the closing
  tags are kept;
- FITS: the BINTABLE header is astropy's, from a zero-row table with the final string widths and ``NAXIS2`` set
  to the row count; the rows are packed as big-endian records the way astropy fills masked values (ints: the
  column's ``TNULL``; floats: NaN; text: empty, trailing blanks dropped; bools: ``T``), then padded to a
  2880-byte block.

VOTable and FITS need the row count and the longest text before the first row: a first pass reads the rows once
more (text columns only). Memory is bounded by ``chunk_bytes`` of fixed-width arrays, whatever the row count.
FITS character fields are ASCII (astropy raises ``UnicodeEncodeError`` on anything else), so other characters are
written as Python backslash escapes (``Å`` -> ``\\xc5``).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CatalogReadError
from .vo import UCDS, describe_fits_columns, int_null, is_time, vo_unit

#: upper bound of one chunk's fixed-width arrays (numpy unicode text takes 4 bytes a character); the peak follows it:
#: a VOTable of 400k rows peaked at 1023 MB with 64 MB chunks, 672 MB with 16 MB, in the same time
CHUNK_BYTES = 16 << 20
_FITS_BLOCK = 2880
_ISO = "%Y-%m-%dT%H:%M:%S"
#: what sits under a null time (any valid time: it is masked)
_EPOCH = "2000-01-01T00:00:00.000"

#: a fresh iterator of the rows' batches each call, of the named columns only (None: all of them)
Batches = Callable[[list[str] | None], Iterable[pa.RecordBatch]]


# ------------------------------------------------------------------------------------------------ Arrow -> astropy


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t)


def _is_texty(t: pa.DataType) -> bool:
    """Written as text: strings, and timestamps (ISO 8601, UTC)."""
    return _is_text(t) or pa.types.is_timestamp(t)


def _ascii(col: pa.Array) -> pa.Array:
    """``col`` with non-ASCII characters as backslash escapes (for FITS); untouched when already ASCII (usual)."""
    if len(col) == 0 or pc.all(pc.string_is_ascii(col)).as_py() in (True, None):
        return col
    return pa.array([v if v is None or v.isascii() else v.encode("ascii", "backslashreplace").decode("ascii")
                     for v in col.to_pylist()], pa.string())


def _text(col, t: pa.DataType, ascii_only: bool) -> pa.Array:
    """A text or timestamp column as the strings written (nulls stay null)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_timestamp(t):
        text = pc.strftime(col, format=_ISO) if len(col) else col.cast(pa.string())
    else:
        text = col.cast(pa.string())
    return _ascii(text) if ascii_only else text


def _longest(text: pa.Array) -> int:
    """Characters of the longest value; 1 at least (astropy's narrowest string column)."""
    return max(pc.max(pc.utf8_length(text)).as_py() or 1, 1) if len(text) else 1


def _columns(data: pa.Table | pa.RecordBatch, schema: pa.Schema) -> Iterator[tuple[pa.Field, pa.Array]]:
    for f in schema:
        col = data.column(f.name)
        yield f, col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def to_astropy(schema: pa.Schema, data: pa.Table | pa.RecordBatch, widths: dict[str, int] | None = None,
               ascii_only: bool = False, fmt: str = "fits"):
    """``data`` as an astropy table of masked columns with units, descriptions and UCDs, written as ``fmt`` (fits,
    votable or ecsv: see :mod:`.vo`); text columns ``U<widths[name]>`` when given (so that every chunk has the same
    column definitions), else as wide as their longest value."""
    from astropy.table import MaskedColumn, Table

    md = schema.metadata or {}
    # FITS keywords: at most 8 characters
    out = Table(meta={"CATALOG": md.get(b"spec_vetting.schema", b"").decode(),
                      "SCHEMAV": md.get(b"spec_vetting.schema_version", b"").decode()})
    for f, col in _columns(data, schema):
        fm = {k.decode(): v.decode() for k, v in (f.metadata or {}).items()}
        mask = np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        unit, desc = fm.get("unit") or None, fm.get("description")
        meta = {"ucd": UCDS[f.name]} if f.name in UCDS else {}
        if is_time(f.type) and fmt == "ecsv":
            out[f.name] = _time(_text(col, f.type, False), mask)
            out[f.name].info.description, out[f.name].info.meta = desc, meta
            continue
        if is_time(f.type):
            unit, desc = None, fm.get("description", "") + " (ISO 8601, UTC)"
            if fmt == "votable":
                meta["xtype"] = "timestamp"
        fill = None
        if pa.types.is_integer(f.type):
            fill = int_null(f.type)
            if fmt == "votable":
                meta["values"] = {"null": fill}
        out[f.name] = MaskedColumn(_values(f, col, widths, ascii_only), mask=mask, fill_value=fill,
                                   unit=vo_unit(unit) if fmt == "votable" else unit, description=desc,
                                   meta=meta or None)
    return out


def _time(text: pa.Array, mask: np.ndarray):
    """ISO 8601 UTC text (nulls under ``mask``) as a masked astropy ``Time`` of millisecond precision."""
    from astropy.time import Time
    from astropy.utils.masked import Masked

    values = np.array(text.fill_null(_EPOCH).to_numpy(zero_copy_only=False), dtype=str)
    values[mask] = _EPOCH
    return Time(Masked(values, mask=mask), format="isot", scale="utc", precision=3)


def _values(f: pa.Field, col: pa.Array, widths: dict[str, int] | None, ascii_only: bool) -> np.ndarray:
    """The numpy values under the mask (what is under a null does not matter: the writers fill it)."""
    t = f.type
    if _is_texty(t):
        text = _text(col, t, ascii_only).fill_null("")
        width = (widths or {}).get(f.name) or _longest(text)
        return np.array(text.to_numpy(zero_copy_only=False), dtype=f"U{width}")
    if pa.types.is_integer(t):
        return col.fill_null(0).to_numpy().astype(t.to_pandas_dtype())
    if pa.types.is_floating(t):
        return col.fill_null(np.nan).to_numpy()
    if pa.types.is_boolean(t):
        return col.fill_null(False).to_numpy(zero_copy_only=False)
    raise ValueError(f"column {f.name}: no astropy export of {t}")


# ------------------------------------------------------------------------------------------------ batches, chunks


def measure(schema: pa.Schema, batches: Iterable[pa.RecordBatch], ascii_only: bool) -> tuple[int, dict[str, int]]:
    """(rows, longest written text of each text column): what the header must say before the first row."""
    n, widths = 0, {f.name: 1 for f in schema if _is_texty(f.type)}
    for b in batches:
        n += b.num_rows
        for f, col in _columns(b, schema):
            if f.name in widths:
                widths[f.name] = max(widths[f.name], _longest(_text(col, f.type, ascii_only)))
    return n, widths


def _measure_text(schema: pa.Schema, batches: Batches, ascii_only: bool) -> tuple[int, dict[str, int]]:
    """:func:`measure` over a pass that reads the text columns only (the numbers are not needed to measure)."""
    texty = pa.schema([f for f in schema if _is_texty(f.type)])
    if not len(texty):  # still one column, to count the rows
        texty = pa.schema([schema.field(0)])
    return measure(texty, batches(texty.names), ascii_only)


def _row_bytes(schema: pa.Schema, widths: dict[str, int]) -> int:
    """Bytes of one row in the chunk's numpy arrays (text as 4-byte unicode; everything else 8 at most)."""
    return sum(4 * widths[f.name] if f.name in widths else 8 for f in schema)


def chunks(schema: pa.Schema, batches: Iterable[pa.RecordBatch], chunk_bytes: int,
           widths: dict[str, int] | None = None) -> Iterator[pa.RecordBatch]:
    """The batches cut so that a chunk's fixed-width arrays stay under ``chunk_bytes`` (one long text in a batch
    would otherwise widen a whole column of 64k rows). Without ``widths``, each batch's own longest texts."""
    for b in batches:
        if not b.num_rows:
            continue
        _, own = measure(schema, [b], ascii_only=False) if widths is None else (0, widths)
        step = max(1, chunk_bytes // _row_bytes(schema, own))
        for start in range(0, b.num_rows, step):
            yield b.slice(start, step)


def _changed(path) -> CatalogReadError:
    return CatalogReadError(f"{path}: the rows changed while they were exported (a run writing?); export again")


# ------------------------------------------------------------------------------------------------------------ ECSV


def _ecsv(table) -> str:
    buf = io.StringIO()
    table.write(buf, format="ascii.ecsv")
    return buf.getvalue()


def _split_ecsv(text: str) -> tuple[str, str]:
    """(header comment lines + the column-names line, data rows). A quoted value may span lines, so the data part
    is everything after the names line, never split further."""
    pos = 0
    while text.startswith("#", pos):
        pos = text.index("\n", pos) + 1
    end = text.index("\n", pos) + 1
    return text[:end], text[end:]


def _ecsv_head(schema: pa.Schema, masked: frozenset[str]) -> str:
    """The ECSV header astropy writes for rows whose time columns ``masked`` hold a null (and the others none):
    astropy describes a Time column with a null as a masked one, and one without as a plain one."""
    row = [pa.array([None if f.name in masked else 0], f.type) if is_time(f.type) else pa.nulls(1, f.type)
           for f in schema]
    return _split_ecsv(_ecsv(to_astropy(schema, pa.table(row, schema=schema), fmt="ecsv")))[0]


def write_ecsv(out, schema: pa.Schema, batches: Batches, *, chunk_bytes: int = CHUNK_BYTES) -> int:
    """Stream the rows as ECSV; returns the row count. With a time column, a first pass over the time columns
    finds which hold a null (the header says so before the first row)."""
    times = [f.name for f in schema if is_time(f.type)]
    total, masked = None, set()
    if times:
        total = 0
        for b in batches(times):
            total += b.num_rows
            masked.update(name for name in times if b.column(name).null_count)
    if total:
        head = _ecsv_head(schema, frozenset(masked))
    else:  # no time column, or no row: what astropy writes for an empty table
        head, _ = _split_ecsv(_ecsv(to_astropy(schema, schema.empty_table(), fmt="ecsv")))
    heads = {frozenset(masked): head}
    rows_in = batches(None)  # before the file is opened: a bad --where leaves no file behind
    n = 0
    with open(out, "w", encoding="utf-8", newline="") as fh:
        fh.write(head)
        for chunk in chunks(schema, rows_in, chunk_bytes):
            own_head, rows = _split_ecsv(_ecsv(to_astropy(schema, chunk, fmt="ecsv")))
            # a chunk without the nulls of the whole is described as unmasked; its rows read the same under head
            own = frozenset(name for name in times if chunk.column(name).null_count)
            if not own <= masked:
                raise _changed(out)
            if own not in heads:
                heads[own] = _ecsv_head(schema, own)
            if own_head != (heads[own] if times else head):  # a chunk astropy describes otherwise
                raise RuntimeError(f"ECSV header of a chunk differs from the first:\n{own_head}\n{head}")
            fh.write(rows)
            n += chunk.num_rows
    if total is not None and n != total:
        raise _changed(out)
    return n


# --------------------------------------------------------------------------------------------------------- VOTable


def _votable(table) -> bytes:
    buf = io.BytesIO()
    table.write(buf, format="votable")
    return buf.getvalue()


def _split_votable(xml: bytes) -> tuple[bytes, bytes, bytes]:
    """(everything up to the ``<TABLEDATA>`` line, the ``<TR>`` rows, the closing lines). Values are XML-escaped,
    so the tags cannot occur inside a cell."""
    start = xml.index(b"\n", xml.index(b"<TABLEDATA>")) + 1
    end = xml.rindex(b"\n", 0, xml.rindex(b"</TABLEDATA>")) + 1
    return xml[:start], xml[start:end], xml[end:]


def write_votable(out, schema: pa.Schema, batches: Batches, *, chunk_bytes: int = CHUNK_BYTES) -> int:
    """Stream the rows as a TABLEDATA VOTable; returns the row count."""
    total, widths = _measure_text(schema, batches, ascii_only=False)
    head = tail = None
    n = 0
    with open(out, "wb") as fh:
        for chunk in chunks(schema, batches(None), chunk_bytes, widths) if total else ():
            own_head, rows, own_tail = _split_votable(_votable(_checked(schema, chunk, widths, out)))
            if head is None:
                head, tail = own_head, own_tail
                fh.write(head)
            elif own_head != head:
                raise RuntimeError("VOTable header of a chunk differs from the first")
            fh.write(rows)
            n += chunk.num_rows
        # no rows: astropy writes a table without DATA
        fh.write(tail if head is not None else _votable(to_astropy(schema, schema.empty_table(), widths,
                                                                   fmt="votable")))
    return n


def _checked(schema, chunk, widths, out):
    """The chunk as VOTable astropy columns of the final widths; a longer text than measured (rows added
    meanwhile) would be cut silently by numpy, so it is an error."""
    _, own = measure(schema, [chunk], False)
    if any(own[k] > widths[k] for k in own):
        raise _changed(out)
    return to_astropy(schema, chunk, widths, False, fmt="votable")


# ------------------------------------------------------------------------------------------------------------ FITS


def _fits_headers(schema: pa.Schema, widths: dict[str, int], n: int):
    """(primary header bytes, BINTABLE header, TNULL of each int column), astropy's own for a zero-row table with
    the final widths (through ``Table.write``, which adds the serialized column descriptions), NAXIS2 = ``n``,
    with the column descriptions and time keywords of :func:`.vo.describe_fits_columns`."""
    from astropy.io import fits

    buf = io.BytesIO()
    to_astropy(schema, schema.empty_table(), widths, ascii_only=True).write(buf, format="fits")
    buf.seek(0)
    with fits.open(buf) as hdul:
        primary = hdul[0].header.tostring().encode("ascii")
        header = hdul[1].header.copy()
        nulls = {c.name: c.null for c in hdul[1].columns if c.null is not None}
    header["NAXIS2"] = n
    describe_fits_columns(header, schema)
    return primary, header, nulls


def _record_dtype(schema: pa.Schema, widths: dict[str, int]) -> np.dtype:
    """The BINTABLE row: big-endian numbers, ASCII text, FITS logicals as one byte."""
    parts = []
    for f in schema:
        t = f.type
        if f.name in widths:
            parts.append((f.name, f"S{widths[f.name]}"))
        elif pa.types.is_boolean(t):
            parts.append((f.name, "S1"))
        elif pa.types.is_integer(t) or pa.types.is_floating(t):
            parts.append((f.name, np.dtype(t.to_pandas_dtype()).newbyteorder(">")))
        else:
            raise ValueError(f"column {f.name}: no FITS export of {t}")
    return np.dtype(parts)


def _records(schema: pa.Schema, chunk: pa.RecordBatch, dtype: np.dtype, nulls: dict[str, int]) -> np.ndarray:
    """The chunk's rows as FITS records, nulls filled as astropy fills a masked table before writing it."""
    rec = np.zeros(chunk.num_rows, dtype)
    for f, col in _columns(chunk, schema):
        t = f.type
        if _is_texty(t):
            # astropy drops trailing blanks (insignificant in FITS text) but sizes the column before it does
            text = pc.utf8_rtrim(_text(col, t, True).fill_null(""), characters=" ")
            rec[f.name] = text.to_numpy(zero_copy_only=False).astype(dtype[f.name])
        elif pa.types.is_boolean(t):
            # astropy's fill value of a masked bool is True
            rec[f.name] = np.where(col.fill_null(True).to_numpy(zero_copy_only=False), b"T", b"F")
        elif pa.types.is_integer(t):
            rec[f.name] = col.fill_null(nulls.get(f.name, 0)).to_numpy()
        else:
            rec[f.name] = col.fill_null(np.nan).to_numpy()
    return rec


def write_fits(out, schema: pa.Schema, batches: Batches, *, chunk_bytes: int = CHUNK_BYTES) -> int:
    """Stream the rows as a FITS BINTABLE extension; returns the row count."""
    total, widths = _measure_text(schema, batches, ascii_only=True)
    primary, header, nulls = _fits_headers(schema, widths, total)
    dtype = _record_dtype(schema, widths)
    if dtype.itemsize != header["NAXIS1"]:
        raise RuntimeError(f"FITS row of {dtype.itemsize} bytes, astropy's header says {header['NAXIS1']}")
    n = 0
    with open(out, "wb") as fh:
        fh.write(primary)
        fh.write(header.tostring().encode("ascii"))
        for chunk in chunks(schema, batches(None), chunk_bytes, widths):
            _, own = measure(schema, [chunk], ascii_only=True)
            if any(own[k] > widths[k] for k in own) or n + chunk.num_rows > total:
                raise _changed(out)
            fh.write(_records(schema, chunk, dtype, nulls).tobytes())
            n += chunk.num_rows
        if n != total:
            raise _changed(out)
        fh.write(b"\0" * (-(n * dtype.itemsize) % _FITS_BLOCK))
    return n
