"""The output catalog's layout and its explicit Arrow schemas of ``verdicts`` and ``turns``.

A catalog root accumulates runs::

    ROOT/verdicts/<run_date>/part-<run_id>-<task>-<k>.parquet   one row per (candidate, task, run), compacted
    ROOT/turns/<run_date>/part-<run_id>-<task>-<k>.parquet      one row per turn (+ a turn -1 row)
    ROOT/pictures/<run_date>/part-<run_id>-<k>.parquet          PNG bytes by sha256, only with store_pictures
    ROOT/current/<task>.parquet                                 one row per (candidate, task): what we believe now
    ROOT/_runs/<run_id>/manifest.json, run.log, shards/<shard>.done          provenance, log, resume markers
    ROOT/_runs/<run_id>/parts/<table>/task=T/part-<shard>.parquet            a running run's shard files (staging)
    ROOT/_runs/LATEST                                                        the id of the latest run

A run's shards write their rows under ``_runs/<run_id>/parts/`` (crash safety: one file per shard, a done
marker after it); the pipeline compacts the parts of finished shards into a few large files per (task, table) at
the end of each attempt (:mod:`spec_vetting.pipeline.compact`) and then rebuilds ``current/``. ``run_date`` and
``task`` are real columns in every compacted file (:func:`file_schema`), and the date folders are plain names
(not ``key=value``) so that pandas, polars, DuckDB and astropy read a folder or a single file the same way. Names
starting with ``_`` or ``.`` are ignored by every Parquet reader.

Older roots (before schema 2.0) have per-shard files in hive folders ``verdicts/run_date=D/task=T/``; the readers
still read them and ``spec-vet catalog compact ROOT`` rewrites them in the compacted layout.

Pictures are stored by reference: the renderer is deterministic and versioned, so a turn's picture is fully given
by the spectrum source (the verdict's ``path``/``target``/``redshift``), the window (``zoom_min``/``zoom_max``;
both null on turn -1, the full view), ``renderer_version`` and ``picture_title``; ``picture_sha256`` is the PNG's
hash, checked when it is re-rendered (:mod:`spec_vetting.catalog.pictures`). ``image_png`` is null unless the job
sets ``store_pictures``; then the bytes are kept once per distinct picture in ``pictures/``.

Each field carries ``description`` and, where it has one, ``unit`` in its metadata; the schema metadata carries
``spec_vetting.schema`` (the table name) and ``spec_vetting.schema_version``. Readers are in
:mod:`spec_vetting.catalog.read`, the row builders in :mod:`spec_vetting.catalog.rows`.
"""

from __future__ import annotations

import pyarrow as pa

from ..evidence import gaia_columns as gaia

#: bump the minor number for added columns, the major one for renamed/removed/retyped columns
SCHEMA_VERSION = "2.3"

RUNS_DIR = "_runs"
LATEST_FILE = "LATEST"
MANIFEST_FILE = "manifest.json"
#: the ``schema`` field of every run manifest
MANIFEST_SCHEMA = "spec_vetting.run_manifest/1"

#: the tables of a catalog root, each a dataset under ROOT/<table>/
TABLES = ("verdicts", "turns")
#: PNG bytes by sha256 (only with store_pictures) and the current view
PICTURES_DIR = "pictures"
CURRENT_DIR = "current"
#: beside the view: run id -> started_at of the runs folded in (a fold reads the manifests of new runs only)
RUN_ORDER_FILE = "_run_order.json"
#: a month's file of small nights' rows (``ROOT/<table>/<YYYY-MM>/part-month-<task>-<k>.parquet``)
MONTH_FILE_PREFIX = "part-month-"
#: a running run's shard files, under ROOT/_runs/<run_id>/
PARTS_DIR = "parts"


def _f(name: str, type_: pa.DataType, description: str, unit: str | None = None, nullable: bool = True) -> pa.Field:
    meta = {"description": description}
    if unit:
        meta["unit"] = unit
    return pa.field(name, type_, nullable=nullable, metadata=meta)


def _schema(table: str, fields: list[pa.Field], description: str) -> pa.Schema:
    return pa.schema(
        fields,
        metadata={
            "spec_vetting.schema": table,
            "spec_vetting.schema_version": SCHEMA_VERSION,
            "description": description,
        },
    )


#: the Gaia evidence columns (``spec-vet run --evidence gaia=CATALOG``), null when the run had no Gaia evidence
GAIA_FIELDS = [
    _f(gaia.GAIA_SOURCE_ID, pa.int64(), "Gaia DR3 source_id of the nearest source within the radius at the spectrum's "
       "epoch"),
    _f(gaia.GAIA_PARALLAX, pa.float64(), "Gaia parallax", unit="mas"),
    _f(gaia.GAIA_PARALLAX_ERROR, pa.float64(), "Gaia parallax standard error", unit="mas"),
    _f(gaia.GAIA_PMRA, pa.float64(), "Gaia proper motion in right ascension, times cos(dec)", unit="mas/yr"),
    _f(gaia.GAIA_PMDEC, pa.float64(), "Gaia proper motion in declination", unit="mas/yr"),
    _f(gaia.GAIA_G_MAG, pa.float64(), "Gaia G mean magnitude (Vega)", unit="mag"),
    _f(gaia.GAIA_BP_RP, pa.float64(), "Gaia BP - RP colour", unit="mag"),
    _f(gaia.GAIA_RUWE, pa.float64(),
       "Gaia renormalised unit weight error (above 1.4: a doubtful astrometric solution)"),
    _f(gaia.GAIA_SEP_ARCSEC, pa.float64(), "Separation from the candidate after moving the source to the spectrum's "
       "epoch with its proper motion", unit="arcsec"),
    _f(gaia.GAIA_N_WITHIN, pa.int32(), "Gaia sources within the match radius at the spectrum's epoch (the nearest "
       "is the one given); 0 when none; null when no match was tried"),
    _f(gaia.GAIA_ABS_G, pa.float64(), "Absolute G magnitude M_G = G + 5 log10(parallax / 100 mas), no extinction "
       "correction; null unless parallax / parallax_error >= 5 and ruwe <= 1.4 (gaia_reason says why)", unit="mag"),
    _f(gaia.GAIA_ABS_G_ERROR, pa.float64(), "Error of gaia_abs_g from the parallax: (5 / ln 10) parallax_error / "
       "parallax", unit="mag"),
    _f(gaia.GAIA_REASON, pa.string(), "Why Gaia values are null: no ra/dec, no source within the radius, the "
       "parallax not significant or not positive (no M_G); null when everything is given"),
]

#: columns written in every file; the partition columns (run_date, task) are added by the hive folders
VERDICTS_SCHEMA = _schema(
    "verdicts",
    [
        _f("run_id", pa.string(), "Run that produced the row (ROOT/_runs/<run_id>/manifest.json)", nullable=False),
        _f("candidate_id", pa.string(), "Candidate id from the candidate list (unique within a list)", nullable=False),
        _f("verdict", pa.string(), "YES, NO, UNDECIDED (no parsable answer within budget) or ERROR", nullable=False),
        _f("status", pa.string(), "Format of the answer: well_formed, recovered (a fallback found it) or none"),
        _f("fallback", pa.string(), "Which answer-parsing fallback produced a recovered verdict"),
        _f("recovered_verdict", pa.string(),
           "YES/NO a fallback found outside every <answer> block (boxed_anywhere, word_anywhere): not a verdict; "
           "the row is UNDECIDED and goes to review"),
        _f("p_yes", pa.float64(), "Probability that the answer is YES, 0-1; null when not estimated"),
        _f("p_yes_source", pa.string(), "How p_yes was obtained: logprobs, self_consistency, rules_score"),
        _f("justification", pa.string(), "The answer's justification text (after the boxed verdict)"),
        _f("reason", pa.string(), "Why the verdict is UNDECIDED (budget, no answer ...)"),
        _f("error_kind", pa.string(),
           "Machine-readable error kind when verdict is ERROR (read_error, engine_error ...)"),
        _f("error_message", pa.string(), "What failed and what to do, when verdict is ERROR"),
        _f("engine", pa.string(), "Engine that inspected: openai, local, rules ..."),
        _f("engine_version", pa.string(), "Engine implementation version"),
        _f("model", pa.string(), "Served model id or local model folder; null for the rules engine"),
        _f("prompt_version", pa.string(), "Version id of the task prompt"),
        _f("renderer_version", pa.string(), "Version id of the spectrum renderer (the pictures the model saw)"),
        _f("initial_image_source", pa.string(),
           "Where the first picture (the full view, turns row -1) came from: specvi (the SpecVI-Bench row's own "
           "images cell, as in training) or rendered (drawn by renderer_version); null when none was shown"),
        _f("survey", pa.string(), "lamost, sdss or desi (null when the spectrum could not be read)"),
        _f("variant", pa.string(), "File layout variant, e.g. lamost-lrs-image, sdss-spec-lite, desi-coadd"),
        _f("path", pa.string(), "Spectrum file, absolute (relative list entries resolve against the list's folder)"),
        _f("target", pa.string(), "Target selector inside a multi-target file (DESI TARGETID or row), as text"),
        _f("obsid", pa.int64(), "LAMOST observation id"),
        _f("designation", pa.string(), "LAMOST designation"),
        _f("plate", pa.int64(), "SDSS plate (SDSS-V: field)"),
        _f("mjd", pa.int64(), "SDSS MJD of the plate (LAMOST: lmjd)", unit="d"),
        _f("fiberid", pa.int64(), "SDSS or LAMOST fiber id"),
        _f("specobjid", pa.string(), "SDSS specobjid, as text (it overflows int64 in some releases)"),
        _f("targetid", pa.int64(), "DESI TARGETID"),
        _f("ra", pa.float64(), "Right ascension (ICRS)", unit="deg"),
        _f("dec", pa.float64(), "Declination (ICRS)", unit="deg"),
        _f("healpix", pa.int64(), "HEALPix index of (ra, dec), nside 64, NESTED scheme; null when unknown"),
        _f("redshift", pa.float64(), "Redshift the zoom tool used to go to the rest frame (survey pipeline's)"),
        _f("pipeline_class", pa.string(), "Survey pipeline's class of the spectrum (never shown to the model)"),
        _f("read_warnings", pa.string(), "What the reader found doubtful but usable, one per line (a survey's "
           "'no redshift' sentinel read as unknown, a DESI arm missing, a redrock file without the target); null "
           "when none"),
        _f("label", pa.string(), "Known answer from the candidate list (YES/NO), when given"),
        _f("n_turns", pa.int32(), "Assistant turns taken"),
        _f("n_tool_calls", pa.int32(), "Zoom tool calls made"),
        _f("zoom_windows", pa.string(), "JSON list of [min, max] rest-frame windows the model zoomed into",
           unit="Angstrom"),
        _f("prompt_tokens", pa.int64(), "Prompt tokens over all turns (null when the server did not report them)"),
        _f("completion_tokens", pa.int64(), "Completion tokens over all turns"),
        _f("cached_tokens", pa.int64(), "Prompt tokens served from the server's prefix cache over all turns"),
        _f("attempts", pa.int32(), "Times the inspection was started (an endpoint that died makes it rerun)"),
        _f("started_at", pa.timestamp("ms", tz="UTC"), "When the inspection started"),
        _f("elapsed_s", pa.float64(), "Wall time of the inspection", unit="s"),
        _f("shard_id", pa.string(), "Pipeline shard that produced the row"),
        _f("value_notes", pa.string(), "Values made safe before writing (text cut to its cap, invalid UTF-8 replaced, "
           "an integer out of range dropped); null when none"),
        *GAIA_FIELDS,
        _f("evidence_extra", pa.string(), "JSON object of the other evidence catalogs' matched values, keyed "
           "NAME_<column> (NAME_sep_arcsec, NAME_n_within, NAME_reason included); null without such evidence"),
    ],
    "One row per (candidate, task, run): the verdict and everything needed to trace it.",
)

TURNS_SCHEMA = _schema(
    "turns",
    [
        _f("run_id", pa.string(), "Run that produced the row", nullable=False),
        _f("candidate_id", pa.string(), "Candidate id, joins verdicts", nullable=False),
        _f("turn", pa.int32(), "Assistant turn, 0-based; -1 is the full view shown before the first turn",
           nullable=False),
        _f("assistant_text", pa.string(), "Raw assistant text of the turn (null on turn -1)"),
        _f("tool_call", pa.string(), "JSON of the parsed tool call: name, arguments, error; null when none"),
        _f("tool_response_text", pa.string(), "Text the tool answered (without the <tool_response> markup)"),
        _f("zoom_min", pa.float64(), "Lower edge of the zoom window, rest frame", unit="Angstrom"),
        _f("zoom_max", pa.float64(), "Upper edge of the zoom window, rest frame", unit="Angstrom"),
        _f("image_png", pa.binary(), "PNG bytes of the picture shown (null unless the job stores pictures; they are "
           "re-rendered from picture_* and the verdict's path/target/redshift)"),
        _f("picture_sha256", pa.string(),
           "sha256 (hex) of the PNG shown: the full view on turn -1, the zoom otherwise; "
           "null when the turn showed no picture"),
        _f("picture_title", pa.string(), "Plot title the picture was drawn with"),
        _f("renderer_version", pa.string(), "Version id of the renderer that drew the picture"),
        _f("prompt_tokens", pa.int64(), "Prompt tokens of this request"),
        _f("completion_tokens", pa.int64(), "Completion tokens of this request"),
        _f("cached_tokens", pa.int64(), "Prompt tokens of this request served from the prefix cache"),
        _f("latency_s", pa.float64(), "Engine latency of this turn", unit="s"),
        _f("endpoint", pa.string(), "Endpoint that answered (HTTP engine)"),
        _f("finish_reason", pa.string(), "Why generation stopped: stop, length ..."),
        _f("shard_id", pa.string(), "Pipeline shard that produced the row"),
        _f("value_notes", pa.string(), "Values made safe before writing (text cut to its cap, invalid UTF-8 replaced, "
           "an integer out of range dropped); null when none"),
    ],
    "One row per assistant turn of each inspection, plus a turn -1 row carrying the initial full-view image.",
)

#: the run's date and the task: folder names (hive) in pre-2.0 roots, real columns in every compacted file
PARTITION_SCHEMA = pa.schema([
    _f("run_date", pa.string(), "Date of the run (YYYY-MM-DD), as given by --run-date or the day it started"),
    _f("task", pa.string(), "Task key (cv, wd, ...)"),
])

#: columns the compaction adds to ``verdicts`` (computed from others, vectorized)
DERIVED_FIELDS = {
    "verdicts": [
        _f("_healpix_29", pa.int64(), "HEALPix index of (ra, dec) at order 29, NESTED scheme (HATS/LSDB's spatial "
           "index); null when ra/dec are unknown"),
    ],
    "turns": [],
}

PICTURES_SCHEMA = _schema(
    "pictures",
    [
        _f("picture_sha256", pa.string(), "sha256 (hex) of the PNG; joins turns.picture_sha256", nullable=False),
        _f("image_png", pa.binary(), "PNG bytes", nullable=False),
        _f("run_date", pa.string(), "Date of the run that stored it"),
        _f("run_id", pa.string(), "Run that stored it"),
    ],
    "PNG bytes of the pictures shown, once per distinct picture (only when the job stores pictures).",
)


def column_docs(schema: pa.Schema) -> list[tuple[str, str, str, str]]:
    """(name, type, unit, description) of each column, for documentation and ``catalog schema`` output."""
    rows = []
    for f in schema:
        meta = {k.decode(): v.decode() for k, v in (f.metadata or {}).items()}
        rows.append((f.name, str(f.type), meta.get("unit", ""), meta.get("description", "")))
    return rows


def table_schema(table: str) -> pa.Schema:
    """The schema of ``verdicts`` or ``turns`` (without the partition columns); any other name is an error."""
    if table == "verdicts":
        return VERDICTS_SCHEMA
    if table == "turns":
        return TURNS_SCHEMA
    raise ValueError(f"no catalog table {table!r}: the tables are {', '.join(TABLES)}")


def with_partitions(schema: pa.Schema) -> pa.Schema:
    """``schema`` plus the partition columns (run_date, task)."""
    return pa.schema(list(schema) + list(PARTITION_SCHEMA), metadata=schema.metadata)


def file_schema(table: str) -> pa.Schema:
    """The columns of a compacted file of ``verdicts`` or ``turns`` (and of the ``current`` view, which has the
    verdicts' columns): the rows' schema, run_date and task, and the derived columns. What the readers return."""
    base = with_partitions(table_schema("verdicts" if table == "current" else table))
    derived = DERIVED_FIELDS["verdicts" if table == "current" else table]
    meta = dict(base.metadata or {})
    if table == "current":
        meta[b"spec_vetting.schema"] = b"current"
        meta[b"description"] = (b"One row per (candidate, task): the latest verdict of a finished shard (a later "
                                b"ERROR does not replace an earlier answer), with the run that gave it.")
    return pa.schema(list(base) + derived, metadata=meta)


# ---------------------------------------------------------------------------------------------------- other readers


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t)


def text_lengths(table: pa.Table | pa.RecordBatch, into: dict[str, int] | None = None) -> dict[str, int]:
    """The longest value (characters, or bytes for binary) of each text column, merged into ``into``."""
    import pyarrow.compute as pc

    out = {} if into is None else into
    for f in table.schema:
        if _is_text(f.type):
            col = table.column(f.name)
            n = pc.max(pc.binary_length(col) if pa.types.is_binary(f.type) else pc.utf8_length(col)).as_py()
            out[f.name] = max(out.get(f.name, 1), n or 1)
    return out


def with_reader_metadata(schema: pa.Schema, lengths: dict[str, int] | None = None) -> pa.Schema:
    """``schema`` with what pandas and astropy need to read a file exactly, written into every catalog file:

    - ``pandas``: integer columns as pandas' nullable ``Int64``/``Int32``, so ``pd.read_parquet`` keeps ids such
      as a DESI TARGETID exact (the default would turn a column with nulls into float64);
    - ``table_meta_yaml`` (units and descriptions) and ``table::len::<column>`` (longest text), which
      ``astropy.table.Table.read`` uses (without them it fails on a column of nulls).
    """
    import json

    import yaml

    meta = {k: v for k, v in (schema.metadata or {}).items() if not k.startswith(b"table::len::")}
    cols = []
    for f in schema:
        if pa.types.is_integer(f.type):
            bits = f.type.bit_width
            cols.append({"name": f.name, "field_name": f.name, "pandas_type": f"int{bits}",
                         "numpy_type": f"Int{bits}", "metadata": None})
    meta[b"pandas"] = json.dumps({"index_columns": [], "column_indexes": [], "columns": cols,
                                  "creator": {"library": "spec_vetting", "version": SCHEMA_VERSION},
                                  "pandas_version": "2.2.0"}).encode()
    datatype = []
    for f in schema:
        fm = {k.decode(): v.decode() for k, v in (f.metadata or {}).items()}
        entry = {"name": f.name}
        if fm.get("unit"):
            entry["unit"] = fm["unit"]
        if fm.get("description"):
            entry["description"] = fm["description"]
        datatype.append(entry)
    meta[b"table_meta_yaml"] = yaml.safe_dump({"datatype": datatype}, sort_keys=False, width=1 << 16).encode()
    for f in schema:
        if _is_text(f.type):
            meta[f"table::len::{f.name}".encode()] = str((lengths or {}).get(f.name, 1)).encode()
    return schema.with_metadata(meta)


def lengths_in(schema: pa.Schema, into: dict[str, int] | None = None) -> dict[str, int]:
    """The ``table::len::`` values a file's schema carries (see :func:`with_reader_metadata`), merged into ``into``."""
    out = {} if into is None else into
    for k, v in (schema.metadata or {}).items():
        if k.startswith(b"table::len::"):
            name = k[len(b"table::len::"):].decode()
            out[name] = max(out.get(name, 1), int(v))
    return out
