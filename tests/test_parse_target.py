"""One reading of a target selector (a DESI TARGETID or a row number as typed on the command line or stored as
text in the catalog), used by inspect, render, the review page, pictures and the training export."""

import pytest

from spec_vetting.io import parse_target


@pytest.mark.parametrize("value, expected", [
    (None, None),
    ("39627866878511337", 39627866878511337),  # beyond float precision: stays exact
    (" 12 ", 12),
    ("-3", -3),
    (7, 7),
    ("row-2", "row-2"),
    ("", ""),
])
def test_parse_target(value, expected):
    got = parse_target(value)
    assert got == expected and type(got) is type(expected)
