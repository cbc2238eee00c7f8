"""Where an evidence catalog lives and what it holds, read from its HATS metadata before (and without) lsdb.

lsdb says "not a HATS catalog" (or worse, a traceback from deep inside fsspec) for every failure; a user needs to
know which one it is: no such folder, a URL that does not answer, a filesystem package that is not installed (with
the pip line), or a place that answers but holds no HATS catalog. Only fsspec and pyarrow are used here (no lsdb
import): a night whose matches are all cached knows its catalog's identity and columns without opening it.

What it holds: the coordinate columns and the epoch (``hats_coordinate_epoch``) from the primary table's
properties, the column names from its ``dataset/_common_metadata`` schema, the margin's threshold from the
collection's default margin (``hats_margin_threshold``).

Identity: the catalog's HATS properties (the collection's ``collection.properties`` and the primary table's
``hats.properties`` or ``properties``: creation date, row count, estimated size, HATS version), its
``partition_info.csv``, and the size and modification stamp (local mtime, an object store's ETag) of its
``dataset/_metadata``. A catalog rewritten or republished at the same path or URL has a new identity, so its
cached matches are not reused.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError

#: fsspec protocol -> the pip package that provides it (the ones a HATS catalog is commonly served from)
FILESYSTEM_PACKAGES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "abfs": "adlfs",
                       "abfss": "adlfs", "az": "adlfs", "http": "aiohttp", "https": "aiohttp"}
#: the files that make a folder a HATS catalog (a collection, a catalog of HATS >= 0.4, an older catalog)
PROPERTY_FILES = ("collection.properties", "hats.properties", "properties")
HATS_HINT = "give the folder of a HATS catalog or collection (e.g. made by hats-import or lsdb's to_hats)"


@dataclass(frozen=True)
class Location:
    """``fs`` (an fsspec filesystem) and the catalog's root on it; ``url`` False for a local folder."""

    fs: object
    root: str
    url: bool


def _is_url(catalog: str) -> bool:
    return re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", catalog) is not None and not catalog.startswith("file://")


def locate(name: str, catalog: str) -> Location:
    """The filesystem of ``catalog``; :class:`ConfigError` when the path does not exist or the filesystem package
    is missing (with the pip line)."""
    import fsspec

    where = f"evidence {name}={catalog}"
    if not _is_url(catalog):
        path = Path(catalog.removeprefix("file://")).expanduser()
        if not path.exists():
            raise ConfigError(f"{where}: no such path ({path}); {HATS_HINT}")
        if not path.is_dir():
            raise ConfigError(f"{where}: {path} is a file, not a HATS catalog folder; {HATS_HINT}")
        return Location(fsspec.filesystem("file"), str(path), False)
    protocol = catalog.split("://", 1)[0].lower()
    package = FILESYSTEM_PACKAGES.get(protocol)
    try:
        fs = fsspec.filesystem(protocol)
    except ImportError as exc:
        line = f"pip install {package}" if package else "install the fsspec filesystem package for it"
        raise ConfigError(f"{where}: reading {protocol}:// needs a filesystem package that is not installed: "
                          f"{line} ({exc})") from exc
    except ValueError as exc:
        raise ConfigError(f"{where}: {protocol}:// is not a protocol fsspec knows ({exc}); give a local folder or "
                          "an http(s)://, s3://, gs:// or abfs:// URL") from exc
    return Location(fs, catalog.rstrip("/"), True)


def _read(loc: Location, rel: str) -> str | None:
    """A small file under the catalog's root; None when it is not there. Errors reaching the place propagate."""
    try:
        data = loc.fs.cat_file(f"{loc.root}/{rel}")
    except FileNotFoundError:
        return None
    return data.decode("utf-8", errors="replace")


def _properties(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.lstrip().startswith("#"):
            out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class HatsCatalog:
    """What a HATS catalog holds, from its metadata: ``identity`` (see the module's doc), the primary table's
    properties and column names, and the default margin's threshold (None without a margin)."""

    identity: str
    properties: dict[str, str]
    columns: list[str]
    margin_arcsec: float | None

    @property
    def ra_column(self) -> str | None:
        return self.properties.get("hats_col_ra")

    @property
    def dec_column(self) -> str | None:
        return self.properties.get("hats_col_dec")


def describe(name: str, catalog: str) -> HatsCatalog:
    """Read ``catalog``'s HATS metadata. :class:`ConfigError` naming the cause when it cannot: no such path, not
    reachable (with the URL), a missing filesystem package (with the pip line), not a HATS catalog."""
    loc = locate(name, catalog)
    where = f"evidence {name}={catalog}"
    try:
        return _describe(loc, where)
    except ConfigError:
        raise
    except Exception as exc:  # DNS, refused connection, timeout, access denied ...: the place does not answer
        if not loc.url:
            raise ConfigError(f"{where}: cannot read the folder ({type(exc).__name__}: {exc})") from exc
        raise ConfigError(f"{where}: not reachable: {catalog} ({type(exc).__name__}: {exc}); check the URL and the "
                          "network (or use a local copy of the catalog)") from exc


def _describe(loc: Location, where: str) -> HatsCatalog:
    import pyarrow.parquet as pq

    found = {f: _read(loc, f) for f in PROPERTY_FILES}
    parts = [f"{f}\n{t}" for f, t in found.items() if t is not None]
    if not parts:
        raise ConfigError(f"{where}: not a HATS catalog: {'the URL answers but' if loc.url else 'the folder'} has "
                          f"no {', '.join(PROPERTY_FILES)}; {HATS_HINT}")
    primary, margin = "", None
    properties = _properties(found["hats.properties"] or found["properties"] or "")
    if found["collection.properties"] is not None:
        collection = _properties(found["collection.properties"])
        primary = collection.get("hats_primary_table_url", "").strip("/")
        properties = {}
        for f in PROPERTY_FILES[1:]:
            text = _read(loc, f"{primary}/{f}") if primary else None
            if text is not None:
                parts.append(f"{primary}/{f}\n{text}")
                properties = _properties(text)
                break
        if collection.get("default_margin"):
            for f in PROPERTY_FILES[1:]:
                text = _read(loc, f"{collection['default_margin'].strip('/')}/{f}")
                if text is not None:
                    margin = _float(_properties(text).get("hats_margin_threshold"))
                    break
    if not properties:
        raise ConfigError(f"{where}: not a HATS catalog: no properties for its primary table {primary!r}; "
                          f"{HATS_HINT}")
    prefix = f"{primary}/" if primary else ""
    parts.append(f"{prefix}partition_info.csv\n{_read(loc, f'{prefix}partition_info.csv') or ''}")
    parts.append(f"{prefix}dataset/_metadata\n{_stamp(loc, f'{prefix}dataset/_metadata')}")
    columns: list[str] = []
    for meta in ("dataset/_common_metadata", "dataset/_metadata"):
        try:
            with loc.fs.open(f"{loc.root}/{prefix}{meta}", "rb") as fh:
                columns = list(pq.read_schema(fh).names)
            break
        except FileNotFoundError:
            continue
    return HatsCatalog("\n".join(parts), properties, columns, margin)


#: what a filesystem says about a file that changes when it is rewritten (local mtime, an object store's ETag ...)
_STAMP_KEYS = ("size", "mtime", "ETag", "etag", "LastModified", "last_modified", "Last-Modified")


def _stamp(loc: Location, rel: str) -> str:
    """Size and modification stamp of the data's footer file (it lists every row group, so a rewritten catalog has
    a new one); empty when the filesystem cannot say."""
    try:
        info = loc.fs.info(f"{loc.root}/{rel}")
    except Exception:  # noqa: BLE001 - a server that cannot say (no HEAD, no length): the properties still identify
        return ""
    return json.dumps({k: str(info[k]) for k in _STAMP_KEYS if k in info}, sort_keys=True)


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None
