"""The ``layer-table`` directive: the package's layers as ``tests/test_layers.py`` ranks them, so the page cannot
drift from the test that enforces them.

The ranks and the layer names (the comments that head each group in ``RANKS``) are read from the test's source.
The directive's content says what each part owns, one ``part: text`` line per part; a part the test ranks without a
line here, or a line for a part the test does not know, is a warning (an error under ``make docs``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.util import logging

log = logging.getLogger(__name__)
TEST = Path(__file__).resolve().parents[2] / "tests" / "test_layers.py"


def read_ranks(source: str) -> list[tuple[str, int, str]]:
    """(part, rank, layer name) in the order of the ``RANKS`` literal; the layer is the last comment above."""
    tree = ast.parse(source)
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.AnnAssign | ast.Assign)
                and getattr(n.targets[0] if isinstance(n, ast.Assign) else n.target, "id", None) == "RANKS")
    lines = source.splitlines()
    layer, out = "", []
    value = node.value
    assert isinstance(value, ast.Dict)
    first = value.lineno
    comments = {}
    for i in range(first - 1, value.end_lineno):
        m = re.match(r"\s*#\s*(.*)", lines[i])
        if m:
            comments[i + 1] = m.group(1)
    for key, val in zip(value.keys, value.values, strict=True):
        above = [c for line, c in comments.items() if line < key.lineno]
        layer = above[-1] if above else layer
        out.append((ast.literal_eval(key), ast.literal_eval(val), layer))
    return out


class LayerTable(Directive):
    has_content = True

    def run(self):
        ranks = read_ranks(TEST.read_text(encoding="utf-8"))
        owns = {}
        for line in self.content:
            if line.strip():
                part, _, text = line.partition(":")
                owns[part.strip()] = text.strip()
        known = {p for p, _, _ in ranks}
        for part in sorted(known - set(owns)):
            log.warning(f"layer-table: part {part!r} is ranked in tests/test_layers.py but not described here",
                        location=(self.state.document.settings.env.docname, self.lineno))
        for part in sorted(set(owns) - known):
            log.warning(f"layer-table: part {part!r} is described here but not ranked in tests/test_layers.py",
                        location=(self.state.document.settings.env.docname, self.lineno))
        by_rank: dict[int, list[tuple[str, str]]] = {}
        for part, rank, layer in ranks:
            by_rank.setdefault(rank, []).append((part, layer))
        table = nodes.table()
        group = nodes.tgroup(cols=4)
        table += group
        for width in (6, 22, 24, 48):
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        group += head
        head += self._row(["rank", "part", "layer", "what it owns"])
        body = nodes.tbody()
        group += body
        for rank in sorted(by_rank):
            for part, layer in by_rank[rank]:
                body += self._row([str(rank), part, layer, owns.get(part, "")], literal=1)
        return [table]

    @staticmethod
    def _row(cells: list[str], literal: int | None = None):
        row = nodes.row()
        for i, text in enumerate(cells):
            entry = nodes.entry()
            para = nodes.paragraph()
            para += nodes.literal(text=text) if i == literal else nodes.Text(text)
            entry += para
            row += entry
        return row


def setup(app):
    app.add_directive("layer-table", LayerTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
