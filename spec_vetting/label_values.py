"""The one spelling of a ground-truth label: every reader of a label (candidate lists, SpecVI-Bench rows, label
files, review exports, the catalog's ``label`` column) turns its value into ``"YES"``, ``"NO"`` or None here.

Accepted, case-insensitive and with surrounding blanks ignored:

- YES: ``yes``, ``y``, ``true``, ``t``, ``1`` (also the Python/numpy ``True`` and the numbers 1 / 1.0),
- NO: ``no``, ``n``, ``false``, ``f``, ``0`` (also ``False`` and 0 / 0.0),
- no label: None, NaN, an empty string, ``none``, ``nan``, ``null``.

Anything else raises :class:`LabelValueError`, a ``ValueError`` without a file or row: each reader wraps it in its
own error (a :class:`~spec_vetting.errors.CandidateListError` naming the file and row).

A bottom module (it imports nothing of the package), beside ``errors.py``: ``io/`` (candidate lists, SpecVI rows)
may not import ``catalog/`` (label files, the ``label`` column), which sits above it, and a label is no more a
spectrum reader's word than a catalog's, so neither package is its home; both import this one function.
"""

from __future__ import annotations

import math
import numbers
from typing import Literal

Label = Literal["YES", "NO"]

YES_SPELLINGS = frozenset({"yes", "y", "true", "t", "1"})
NO_SPELLINGS = frozenset({"no", "n", "false", "f", "0"})
EMPTY_SPELLINGS = frozenset({"", "none", "nan", "null"})

#: what to tell someone whose label was refused
LABEL_HINT = "use YES or NO (also yes/no, y/n, true/false, t/f, 1/0, any case) or leave it empty"


class LabelValueError(ValueError):
    """A value that is neither a YES/NO spelling nor empty."""

    def __init__(self, value):
        self.value = value
        super().__init__(f"label {value!r} is not YES or NO")


def parse_label(value) -> Label | None:
    """``"YES"``, ``"NO"`` or None (no label) for one label value; raises :class:`LabelValueError` otherwise."""
    if value is None:
        return None
    given = value
    if isinstance(value, bytes):  # FITS string columns
        value = value.decode("utf-8", "replace")
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):  # floats, numpy floats
        f = float(value)
        if math.isnan(f):
            return None
        if f.is_integer():
            value = int(f)
    # str(True) is "True", str(numpy.True_) too: booleans need no case of their own
    text = str(value).strip().lower()
    if text in YES_SPELLINGS:
        return "YES"
    if text in NO_SPELLINGS:
        return "NO"
    if text in EMPTY_SPELLINGS:
        return None
    raise LabelValueError(given)
