"""Which columns of a light-curve catalog hold what: the defaults are the ZTF public data releases' HATS light
curves as IRSA serves them (DR23: one row per object and filter, ``objectid``, ``objra``/``objdec``,
``filterid`` 1/2/3 for g/r/i, and the nested ``lightcurve`` column with ``hmjd``, ``mag``, ``magerr``,
``catflags``; an epoch is good at ``catflags == 0``, the cut the ZTF release notes recommend).

The band may be a column of the object table (ZTF DR: ``filterid``) or of the nested table (a catalog joined from
objects and detections with lsdb's ``join_nested``, e.g. ``band`` with ``g``/``r``); ``band_names`` maps the
column's values to band names.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: ZTF's filterid values
ZTF_BANDS = {"1": "g", "2": "r", "3": "i"}


class LightCurveSettings(BaseModel):
    """The columns of a light-curve catalog and how its epochs are summarised."""

    model_config = ConfigDict(extra="forbid")

    nested: str = Field("lightcurve", description="the nested column holding each object's epochs")
    detections: str | None = Field(None, description="a separate detection HATS catalog (one row per epoch, with a "
                                   "margin cache) that lsdb's join_nested nests under the objects as `nested`; "
                                   "None: the catalog carries the nested column itself")
    object_key: str = Field("objectid", description="with detections: the objects' id column")
    detection_key: str | None = Field(None, description="with detections: the detections' column holding the "
                                      "object id (default: object_key)")
    time: str = Field("hmjd", description="nested: the epoch's time (days; ZTF: heliocentric MJD)")
    mag: str = Field("mag", description="nested: the magnitude")
    error: str = Field("magerr", description="nested: the magnitude's 1-sigma error")
    flags: str | None = Field("catflags", description="nested: the epoch's quality flags (None: no flags)")
    bad_flags: int = Field(-1, description="flag bits that make an epoch bad (-1: any bit set, ZTF's catflags == 0 "
                           "cut; 32768 drops only the epochs ZTF marks unusable)")
    band: str = Field("filterid", description="the band's column, in the object table or the nested one")
    band_names: dict[str, str] = Field(default_factory=lambda: dict(ZTF_BANDS),
                                       description="band column value (as text) -> band name; a value not listed "
                                       "is used as it is")
    bands: list[str] = Field(default_factory=lambda: ["g", "r", "i"], min_length=1,
                             description="the bands summarised, in column order")
    min_epochs: int = Field(5, ge=3, description="good epochs a band needs for a summary")
    outburst_mag: float = Field(1.0, gt=0, description="brightening above the median (mag) that counts towards an "
                                "outburst episode (beyond 3 sigma)")
    max_points: int = Field(400, ge=10, le=5000, description="good epochs per band kept for the review page's plot "
                            "(evenly thinned beyond)")

    @model_validator(mode="after")
    def _distinct(self) -> LightCurveSettings:
        nested = [self.time, self.mag, self.error, *([self.flags] if self.flags else [])]
        dup = sorted({c for c in nested if nested.count(c) > 1})
        if dup:
            raise ValueError(f"light_curve: column(s) {dup} named for two roles")
        if len(set(self.bands)) != len(self.bands):
            raise ValueError(f"light_curve: bands {self.bands} repeat a band")
        return self

    def band_name(self, value) -> str:
        """A band column value as its band name (``2`` -> ``r``)."""
        text = str(value)
        if text.endswith(".0"):  # an integer band id read back as a float
            text = text[:-2]
        return self.band_names.get(text, text)
