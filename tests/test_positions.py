"""`ckptlint.analysis.positions` gives libcst's `PositionProvider` range for every node."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from ckptlint.analysis.cst_walk import child_nodes
from ckptlint.analysis.positions import Positions

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

SAMPLES = {
    "crlf": "import torch\r\nif x:\r\n    y = f(a,\r\n          b)  # c\r\n\r\nz = 1\r\n",
    "cr": "x = 1\ry = checkpoint(f, x)\r",
    "no final newline": "def f():\n    return checkpoint(g, x)",
    "continuations": "x = 1 + \\\n    2\nif (a and\n        b):\n    pass\n",
    "empty": "",
    "comments only": "# one\n\n# two\n",
    "strings": 's = """a\nb\r\nc"""\nt = f"{x}\\n"\n',
}


def _cases() -> list[tuple[str, str]]:
    cases = list(SAMPLES.items())
    cases += [(str(p.relative_to(FIXTURES)), p.read_text(encoding="utf-8")) for p in sorted(FIXTURES.rglob("*.py"))]
    return cases


@pytest.mark.parametrize("name,text", _cases(), ids=[name for name, _ in _cases()])
def test_every_node_at_libcsts_position(name: str, text: str) -> None:
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        pytest.skip("libcst does not parse it")
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    positions = Positions(module)
    pending: list[cst.CSTNode] = [module]
    while pending:
        node = pending.pop()
        if node in expected:
            assert positions[node] == expected[node], node
        else:  # never generated (a `match` case's unused whitespace): unknown to both
            with pytest.raises(KeyError):
                positions[node]
        pending.extend(child_nodes(node))
