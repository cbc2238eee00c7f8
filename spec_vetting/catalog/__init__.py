"""The output catalog: what a run writes and how it is read back.

- :mod:`.schema`: the root's layout (folders, run records) and the Arrow schemas of ``verdicts`` and ``turns``,
  with each column's description and unit;
- :mod:`.rows`: an inspection result (with its candidate and spectrum) as verdict and turn rows, and rows as an
  Arrow table (:func:`~.rows.rows_to_table`, which refuses unknown or missing columns);
- :mod:`.healpix`: the ``healpix`` and ``_healpix_29`` pixel indices (cdshealpix);
- :mod:`.read`: verdict and turn tables, run records, one run as Python records (:class:`~.read.RunData`);
- :mod:`.current`: the current view (one row per candidate and task); :mod:`.pictures`: pictures by reference,
  re-rendered and hash-checked; :mod:`.export`: FITS/VOTable/ECSV/CSV/Parquet/HATS exports (:mod:`.astropy_stream`,
  :mod:`.vo`, :mod:`.hats_export`);
- :mod:`.labels`: ground truth for a run from the ``label`` column, label files and review-page exports.

The catalog sits above ``inspect`` (label files use its task aliases) and below ``pipeline``, which writes it, and
evaluation, the review page and export, which read it. It never imports engines, Dask or the pipeline.

The names below are the reading API docs/reference/api.md documents (``spec_vetting.catalog.read_verdicts(root)``);
code in this package imports from the modules themselves.
"""

from .listing import latest_run_id, list_runs, read_manifest
from .read import read_current, read_turns, read_verdicts
from .run_data import read_run
from .schema import TURNS_SCHEMA, VERDICTS_SCHEMA

__all__ = [
    "TURNS_SCHEMA",
    "VERDICTS_SCHEMA",
    "latest_run_id",
    "list_runs",
    "read_current",
    "read_manifest",
    "read_run",
    "read_turns",
    "read_verdicts",
]
