"""SpecVI-Bench parquet files (the Spec-o3 RL/benchmark data, ``Maxwell-Jia/SpecVI-Bench``): read rows.

One row per spectrum and task (``docs/maintainers/protocol.md`` section 7):

- ``data_source``: the task key (``cv``, ``cc`` = carbon, ``ss``, ``gm``, ``wd``),
- ``prompt``: the messages (system and user; the user text opens with the ``<image>`` placeholder),
- ``reward_model.ground_truth``: ``YES``/``NO``,
- ``extra_info``: ``index``, ``name`` (the LAMOST file name) and
  ``tools_kwargs.spectral_visualization_tool.create_kwargs`` = {``wavelength``, ``flux``, ``redshift`` (may be null:
  treat as 0)},
- ``images`` (the full-spectrum image the model saw first in training: a list of ``{bytes, path}`` structs, the
  PNG in ``bytes``) and ``agent_name``.

:func:`read_specvi_rows` never reads ``images`` (1 500 PNGs per file): :func:`read_specvi_image` reads one row's
picture when its inspection runs, one row group at a time, kept for the next rows of that group.

Reading goes through Arrow's nested arrays so a 1 500-row file with 3 909-value arrays per row does not become
millions of Python floats. ``extra_info`` stored as JSON text (as some exports do) is accepted too. Test and example
files in this layout are written by :mod:`spec_vetting.synthetic.specvi`.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CandidateListError, ImageReadError
from ..label_values import LABEL_HINT, LabelValueError, parse_label
from ..protocol import IMAGE_PLACEHOLDER, TASK_ALIASES
from .file_kind import describe_start

#: columns a file must have to be read as SpecVI-Bench rows
SPECVI_REQUIRED_COLUMNS = ("data_source", "extra_info")
#: the column holding each row's full-view picture
SPECVI_IMAGE_COLUMN = "images"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

@dataclass
class SpecVIRow:
    """One SpecVI-Bench row, decoded."""

    row: int  # position in the file (0-based)
    data_source: str | None
    task: str | None  # data_source with aliases resolved (cc -> carbon)
    label: str | None  # "YES" / "NO" / None
    index: int | None
    name: str | None
    wavelength: np.ndarray | None
    flux: np.ndarray | None
    redshift: float | None  # as stored (None = null, which means 0)
    prompt_text: str | None  # the user message text, placeholder stripped (the text after the image)
    #: the system message's own text (training's template wrote it, then the tools block); None: no system message
    system_text: str | None = None


def is_specvi_parquet(path: str | Path) -> bool:
    """True when a parquet file has the SpecVI-Bench columns (reads the schema only)."""
    import pyarrow.parquet as pq

    try:
        names = set(pq.read_schema(path).names)
    except Exception:  # not parquet, unreadable: not SpecVI either
        return False
    return all(c in names for c in SPECVI_REQUIRED_COLUMNS)


def strip_placeholder(text: str) -> str:
    """The task text of ``<image>\\n<task text>``: placeholder and the one newline after it removed."""
    stripped = text.lstrip()
    if stripped.startswith(IMAGE_PLACEHOLDER):
        rest = stripped[len(IMAGE_PLACEHOLDER) :]
        return rest[1:] if rest.startswith("\n") else rest
    return text


def message_text(cell: Any, role: str = "user") -> str | None:
    """The text of the first ``role`` message of one ``prompt`` cell (a list of role/content messages, or its JSON).

    A plain string that is not JSON is the user text itself. Multimodal content parts keep their text, in order.
    """
    if isinstance(cell, str):
        try:
            cell = json.loads(cell)
        except json.JSONDecodeError:
            return cell if role == "user" else None
    if isinstance(cell, Mapping):
        cell = [cell]
    for message in cell or []:
        if isinstance(message, Mapping) and message.get("role") == role:
            content = message.get("content")
            if isinstance(content, list):  # multimodal parts: keep the text parts in order
                content = "".join(p.get("text") or "" if isinstance(p, Mapping) else str(p) for p in content)
            return content if isinstance(content, str) else None
    return None


def _child(arr, name: str):
    """A struct array's child by name, offsets and parent nulls applied; None when absent."""
    import pyarrow as pa

    if arr is None or not pa.types.is_struct(arr.type):
        return None
    idx = arr.type.get_field_index(name)
    if idx < 0:
        return None
    return arr.flatten()[idx]


def _list_rows(arr, n: int) -> list[np.ndarray | None]:
    """Per-row float64 arrays of a list<number> Arrow array (None for null rows)."""
    if arr is None:
        return [None] * n
    offsets = arr.offsets.to_numpy()
    values = arr.values.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    return [values[offsets[i] : offsets[i + 1]].copy() if valid[i] else None for i in range(n)]


def _scalar_rows(arr, n: int) -> list[Any]:
    return [None] * n if arr is None else arr.to_pylist()


def _as_label(value: Any, path: Path, row: int) -> str | None:
    try:
        return parse_label(value)
    except LabelValueError:
        raise CandidateListError(
            path, f"reward_model.ground_truth is {value!r}, expected YES or NO", row=row, hint=LABEL_HINT
        ) from None


def read_specvi_rows(path: str | Path) -> list[SpecVIRow]:
    """Decode every row of a SpecVI-Bench parquet file (the ``images`` column is not read)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    try:
        names = pq.read_schema(path).names
    except FileNotFoundError as exc:
        raise CandidateListError(path, "no such file") from exc
    except Exception as exc:  # pyarrow raises several types for a file that is not parquet
        raise CandidateListError(path, f"not a readable parquet file ({exc})") from exc
    missing = [c for c in SPECVI_REQUIRED_COLUMNS if c not in names]
    if missing:
        raise CandidateListError(
            path, f"missing SpecVI-Bench column(s) {', '.join(missing)}; columns found: {', '.join(names)}"
        )
    wanted = [c for c in ("data_source", "prompt", "reward_model", "extra_info") if c in names]
    table = pq.read_table(path, columns=wanted)
    n = table.num_rows

    def column(name):
        return table.column(name).combine_chunks() if name in table.column_names else None

    sources = _scalar_rows(column("data_source"), n)
    prompts = _scalar_rows(column("prompt"), n)
    reward = column("reward_model")
    if reward is not None and pa.types.is_string(reward.type):
        truths = [json.loads(r).get("ground_truth") if r else None for r in reward.to_pylist()]
    else:
        truths = _scalar_rows(_child(reward, "ground_truth"), n)

    extra = column("extra_info")
    if extra is not None and (pa.types.is_string(extra.type) or pa.types.is_large_string(extra.type)):
        decoded = [json.loads(e) if e else {} for e in extra.to_pylist()]
        indices = [d.get("index") for d in decoded]
        file_names = [d.get("name") for d in decoded]
        kwargs = [
            ((d.get("tools_kwargs") or {}).get("spectral_visualization_tool") or {}).get("create_kwargs") or {}
            for d in decoded
        ]
        waves = [np.asarray(k["wavelength"], dtype=np.float64) if k.get("wavelength") is not None else None
                 for k in kwargs]  # fmt: skip
        fluxes = [np.asarray(k["flux"], dtype=np.float64) if k.get("flux") is not None else None for k in kwargs]
        redshifts = [k.get("redshift") for k in kwargs]
    else:
        create = _child(_child(_child(extra, "tools_kwargs"), "spectral_visualization_tool"), "create_kwargs")
        indices = _scalar_rows(_child(extra, "index"), n)
        file_names = _scalar_rows(_child(extra, "name"), n)
        waves = _list_rows(_child(create, "wavelength"), n)
        fluxes = _list_rows(_child(create, "flux"), n)
        redshifts = _scalar_rows(_child(create, "redshift"), n)

    rows = []
    for i in range(n):
        source = None if sources[i] is None else str(sources[i]).strip()
        text = message_text(prompts[i]) if prompts[i] is not None else None
        z = redshifts[i]
        rows.append(
            SpecVIRow(
                row=i,
                data_source=source,
                task=TASK_ALIASES.get(source, source) if source else None,
                label=_as_label(truths[i], path, i + 1),
                index=None if indices[i] is None else int(indices[i]),
                name=None if file_names[i] is None else str(file_names[i]),
                wavelength=waves[i],
                flux=fluxes[i],
                redshift=None if z is None or (isinstance(z, float) and not np.isfinite(z)) else float(z),
                prompt_text=strip_placeholder(text) if text is not None else None,
                system_text=message_text(prompts[i], "system") if prompts[i] is not None else None,
            )
        )
    return rows


# --- the full-view picture of one row ------------------------------------------------------------------------------

#: (path, size, mtime_ns, row group) -> that group's ``images`` column (Arrow keeps the bytes in one buffer; a
#: 1 500-row group of ~60 kB pictures is ~90 MB, read once, about 2 s, then ~1.5 ms a row)
_GROUPS: OrderedDict[tuple, Any] = OrderedDict()
_GROUPS_LOCK = threading.Lock()
_GROUPS_KEPT = 2  # a worker runs two shards at once; each walks consecutive rows of one file


def _images_of_group(path: Path, row: int):
    """(the ``images`` array of the row group holding ``row``, row's position in it); None when no such column."""
    import pyarrow.parquet as pq

    st = os.stat(path)
    meta = pq.read_metadata(path)
    if SPECVI_IMAGE_COLUMN not in meta.schema.to_arrow_schema().names:
        return None, 0
    start = 0
    for g in range(meta.num_row_groups):
        n = meta.row_group(g).num_rows
        if row < start + n:
            break
        start += n
    else:
        raise IndexError(f"row {row + 1} is past the end of the file ({start} rows)")
    key = (str(path), st.st_size, st.st_mtime_ns, g)
    with _GROUPS_LOCK:  # one read per group even when several inspections of it start at once
        if key not in _GROUPS:
            table = pq.ParquetFile(path).read_row_group(g, columns=[SPECVI_IMAGE_COLUMN])
            _GROUPS[key] = table.column(0).combine_chunks()
            while len(_GROUPS) > _GROUPS_KEPT:
                _GROUPS.popitem(last=False)
        _GROUPS.move_to_end(key)
        return _GROUPS[key], row - start


def _first_image(cell: Any) -> tuple[bytes | None, str | None]:
    """(PNG bytes, path) of an ``images`` cell: a list of ``{bytes, path}`` (the published layout), one such
    struct, a list of bytes or bytes; (None, None) when the cell holds no picture."""
    if isinstance(cell, (list, tuple)):
        if not cell:
            return None, None
        cell = cell[0]
    if isinstance(cell, Mapping):
        return cell.get("bytes"), cell.get("path")
    if cell is None or isinstance(cell, (bytes, bytearray, memoryview)):
        return (None if cell is None else bytes(cell)), None
    raise TypeError(f"an images cell holds {type(cell).__name__}, expected a list of {{bytes, path}}")


def check_png(data: bytes) -> str | None:
    """None when ``data`` is a whole, readable PNG; else what is wrong with it."""
    if not data.startswith(PNG_SIGNATURE):
        return f"not a PNG ({describe_start(bytes(data[:64]))})"
    from PIL import Image, UnidentifiedImageError  # Pillow comes with matplotlib

    try:
        with Image.open(BytesIO(data)) as im:
            im.verify()  # chunk CRCs and structure, without decoding the pixels
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        return f"a damaged PNG ({type(exc).__name__}: {exc})"
    return None


def read_specvi_image(path: str | Path, row: int) -> bytes | None:
    """The PNG bytes of data row ``row`` (0-based) of a SpecVI-Bench file: the first picture of its ``images`` cell.

    None when the file has no ``images`` column or the cell holds no picture. Bytes that are not a readable PNG, a
    picture given only by a path, or a row past the end raise :class:`ImageReadError` naming the file and the row
    (1-based, as in every message about a candidate list).
    """
    path = Path(path)
    try:
        arr, k = _images_of_group(path, row)
        if arr is None:
            return None
        data, where = _first_image(arr[k].as_py())
    except Exception as exc:  # unreadable file, a row past the end, a cell of another shape
        raise ImageReadError(path, f"cannot read the images cell ({type(exc).__name__}: {exc})", row=row + 1) from exc
    if data is None:
        if where:
            raise ImageReadError(path, f"images[0] gives only a path ({where!r}), no PNG bytes", row=row + 1,
                                 hint="SpecVI-Bench rows carry the picture inline; or pass --rerender to draw it")
        return None
    problem = check_png(data)
    if problem:
        raise ImageReadError(path, f"images[0].bytes is {problem}", row=row + 1,
                             hint="fix the file, or pass --rerender (specvi_rerender: true) to draw the full view")
    return data


def has_specvi_images(path: str | Path) -> bool:
    """True when a parquet file has an ``images`` column (reads the schema only)."""
    import pyarrow.parquet as pq

    try:
        return SPECVI_IMAGE_COLUMN in pq.read_schema(path).names
    except Exception:
        return False
