"""What a run asks for: one evidence source per ``--evidence NAME=CATALOG`` (or job-file ``evidence:`` entry), and
the verdict-row columns it gives.

``gaia`` is the source this project knows: its catalog columns (Gaia DR3 names) are fixed, its reference epoch is
2016.0 unless the catalog's properties or the entry say otherwise, and its values fill the ``gaia_*`` columns of
the verdict rows. Any other name needs its ``columns`` listed; its matched values are kept as ``NAME_<column>``.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer, model_validator

from .gaia_columns import (
    GAIA_BP_RP,
    GAIA_G_MAG,
    GAIA_PARALLAX,
    GAIA_PARALLAX_ERROR,
    GAIA_PMDEC,
    GAIA_PMRA,
    GAIA_RUWE,
    GAIA_SOURCE_ID,
)
from .lightcurve_settings import LightCurveSettings

#: Gaia DR3 column -> verdict-row column (the columns a ``gaia`` catalog must have, besides ra and dec)
GAIA_COLUMNS: dict[str, str] = {
    "source_id": GAIA_SOURCE_ID,
    "parallax": GAIA_PARALLAX,
    "parallax_error": GAIA_PARALLAX_ERROR,
    "pmra": GAIA_PMRA,
    "pmdec": GAIA_PMDEC,
    "phot_g_mean_mag": GAIA_G_MAG,
    "bp_rp": GAIA_BP_RP,
    "ruwe": GAIA_RUWE,
}
#: Gaia DR3's reference epoch (Julian year), used when neither the entry nor the catalog's properties give one
GAIA_DR3_EPOCH = 2016.0
#: default largest proper motion looked for (mas/yr): above Barnard's star's 10,394, the fastest star known
MAX_PM_MAS_YR = 11_000.0
#: the evidence names with a fixed column set
KNOWN_SOURCES = ("gaia",)
#: the evidence names read as light-curve catalogs (ZTF DR columns) when no plain columns are listed
LIGHT_CURVE_NAMES = ("ztf",)
#: proper-motion columns a catalog may carry (mas/yr; pmra includes cos(dec), as Gaia's)
PM_COLUMNS = ("pmra", "pmdec")

_NAME = re.compile(r"^[a-z][a-z0-9]{0,15}$")


class EvidenceSource(BaseModel):
    """One external catalog to cross-match every candidate with."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., description="short lower-case name: gaia, or your own (its columns become NAME_<col>)")
    catalog: str = Field(..., description="HATS catalog: a local folder (a collection or the catalog itself) or any "
                         "URL lsdb opens (e.g. https://data.lsdb.io/hats/gaia_dr3)")
    radius_arcsec: float = Field(1.0, gt=0, description="match radius at the spectrum's epoch, arcseconds")
    columns: list[str] = Field(default_factory=list, description="catalog columns to keep (gaia: fixed, may be "
                               "left empty; other names: required)")
    epoch: float | None = Field(None, description="the catalog positions' epoch (Julian year); default: the "
                                "catalog's properties (hats_coordinate_epoch), else 2016.0 for gaia")
    max_pm_mas_yr: float = Field(
        MAX_PM_MAS_YR, gt=0, description="largest proper motion looked for beyond a partition's margin (mas/yr); "
        "the default is faster than any star (Barnard's star: 10,394 mas/yr). Within a partition and its margin "
        "every source is moved by its own motion, whatever it is")
    max_neighbours: int | None = Field(None, description="ignored (kept so that older job files still load): the "
                                       "match has no neighbour cap")
    light_curve: LightCurveSettings | None = Field(
        None, description="read the catalog as light curves (a nested time series per object, summarised per band; "
        "see notes/evidence.md); default for the name ztf, ZTF DR column names unless set here")

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: Any) -> Any:
        # the command line's NAME=CATALOG (a job file may use it as well)
        if isinstance(value, str):
            name, sep, catalog = value.partition("=")
            if not sep or not name.strip() or not catalog.strip():
                raise ValueError(f"{value!r}: expected NAME=CATALOG, e.g. gaia=/data/hats/gaia_dr3")
            return {"name": name.strip(), "catalog": catalog.strip()}
        return value

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"evidence name {v!r}: use 1-16 lower-case letters and digits, starting with a letter")
        return v

    @model_validator(mode="after")
    def _columns_known(self) -> EvidenceSource:
        # light curves (issue 38): ztf without plain columns, or any name with light_curve settings
        if self.light_curve is None and self.name in LIGHT_CURVE_NAMES and not self.columns:
            self.light_curve = LightCurveSettings()
        if self.light_curve is not None:
            if self.columns or self.name == "gaia":
                raise ValueError(f"evidence {self.name}: a light-curve source takes light_curve settings, not "
                                 "columns (and gaia is not one)")
            return self
        if self.name not in KNOWN_SOURCES and not self.columns:
            raise ValueError(f"unknown evidence name {self.name!r}: the known ones are gaia and ztf (light "
                             "curves); for another catalog give light_curve settings or list "
                             "the columns to keep (columns: [...]) and they become "
                             f"{self.name}_<column>")
        if self.name == "gaia":
            extra = [c for c in self.columns if c not in GAIA_COLUMNS]
            if extra:
                raise ValueError(f"gaia evidence has the fixed columns {', '.join(GAIA_COLUMNS)}; drop {extra}")
        return self

    @model_serializer(mode="wrap")
    def _without_light_curve(self, handler):
        # a source without light curves dumps as before: the cache and run digests of Gaia runs stay the same
        data = handler(self)
        if self.light_curve is None and isinstance(data, dict):
            data.pop("light_curve", None)
        return data

    @property
    def catalog_columns(self) -> list[str]:
        """The catalog columns read (besides ra/dec)."""
        return list(GAIA_COLUMNS) if self.name == "gaia" else list(dict.fromkeys(self.columns))

    def output_name(self, column: str) -> str:
        """The verdict-row (or evidence-dict) key of a catalog column."""
        return GAIA_COLUMNS[column] if self.name == "gaia" else f"{self.name}_{column}"

    @property
    def match_keys(self) -> tuple[str, str, str]:
        """Keys of the match bookkeeping: separation, sources within the radius, reason when absent."""
        return f"{self.name}_sep_arcsec", f"{self.name}_n_within", f"{self.name}_reason"


def check_unique(sources: list[EvidenceSource]) -> None:
    names = [s.name for s in sources]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"evidence name(s) {', '.join(dup)} given twice; one catalog per name")


def evidence_number(values: dict[str, Any] | None, key: str) -> float | None:
    """``values[key]`` as a finite float; None when absent, null, not a number or not finite."""
    try:
        x = float((values or {}).get(key))
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None
