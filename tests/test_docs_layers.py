"""The documentation's layer table is the test's: docs/_ext/layer_table.py reads RANKS from tests/test_layers.py,
and docs/maintainers/architecture.md describes exactly the parts ranked there (the docs build fails otherwise; this
checks the same without Sphinx)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from test_layers import RANKS

REPO = Path(__file__).resolve().parents[1]


def _extension():
    spec = importlib.util.spec_from_file_location("layer_table", REPO / "docs" / "_ext" / "layer_table.py")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ModuleNotFoundError as exc:  # docutils/sphinx: the docs extra
        import pytest

        pytest.skip(f"the docs extra is not installed ({exc.name})")
    return module


def test_the_extension_reads_the_ranks_the_test_enforces():
    ranks = _extension().read_ranks((REPO / "tests" / "test_layers.py").read_text(encoding="utf-8"))
    assert {part: rank for part, rank, _ in ranks} == RANKS
    assert all(layer for _, _, layer in ranks)  # every part under a layer comment


def test_the_architecture_page_describes_every_ranked_part_and_no_other():
    page = (REPO / "docs" / "maintainers" / "architecture.md").read_text(encoding="utf-8")
    block = re.search(r"```\{layer-table\}\n(.*?)```", page, re.S).group(1)
    described = {line.partition(":")[0].strip() for line in block.splitlines() if line.strip()}
    assert described == set(RANKS)
