"""`ckptlint.analysis.positions` gives libcst's `PositionProvider` range for every node:
from the whole module's code, and from each statement's own code placed at CPython's line
(the statement found by a walk, or for calls and blocks as the traversal saw it)."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from ckptlint.analysis.cst_walk import child_nodes, walk_batched
from ckptlint.analysis.positions import Positions, statement_lines
from ckptlint.traversal import FileAnalyzer

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

SAMPLES = {
    "crlf": "import torch\r\nif x:\r\n    y = f(a,\r\n          b)  # c\r\n\r\nz = 1\r\n",
    "cr": "x = 1\ry = checkpoint(f, x)\r",
    "no final newline": "def f():\n    return checkpoint(g, x)",
    "continuations": "x = 1 + \\\n    2\nif (a and\n        b):\n    pass\n",
    "empty": "",
    "comments only": "# one\n\n# two\n",
    "strings": 's = """a\nb\r\nc"""\nt = f"{x}\\n"\n',
    # Statements each in its own code: blocks in every kind of compound statement, with
    # their own indentation (two spaces in a four-space file, a `match`'s cases), a line of small statements, a block
    # on the header's line, decorators and comments before a statement, `elif` chains.
    "blocks": (
        "import os\n\n# leading\n@dec(1)\n@ dec2\ndef f(a,\n      b):  # c\n"
        "    if a: b = 1; c = 2\n    elif b:\n        pass\n    elif c:\n      x = 1\n    else:\n        x = 1; y = 2\n"
        "    for i in a:\n        continue\n    else:\n        pass\n"
        "    while a:\n        break\n    else:\n        y = 3\n"
        "    try:\n        z = 1\n    except (ValueError,\n            KeyError) as e:\n        z = 2\n"
        "    except Exception:\n        pass\n    else:\n        z = 3\n    finally:\n        z = 4\n"
        "    with open(a) as h, open(b):\n        (\n            h.read()\n        )\n"
        "    match a:\n        case 1:\n            return (b,\n                    c)\n        case _:\n            pass\n"
        "    return a\nclass C(\n   B):\n    @property\n    async def g(self): pass\n\n    x = [\n        1]\n"
    ),
    "tabs": "def f(x):\n\tif x:\n\t\treturn g(\n\t\t\tx)\n\treturn h(x)\n",
    "try star": "try:\n    x = 1\nexcept* ValueError:\n    x = 2\n",
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
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    expected = wrapper.resolve(PositionProvider)
    by_statement = Positions(module, statement_lines(ast.parse(text)))
    analyzer = FileAnalyzer(None)  # names unasked; the traversal's holders of calls and blocks
    walk_batched(wrapper, [analyzer])
    hinted = Positions(module, statement_lines(ast.parse(text)), analyzer.statement_of)
    for positions in (Positions(module), by_statement, hinted):
        pending: list[cst.CSTNode] = [module]
        while pending:
            node = pending.pop()
            if node in expected:
                assert positions[node] == expected[node], node
            else:  # never generated (a `match` case's unused whitespace): unknown to both
                with pytest.raises(KeyError):
                    positions[node]
            pending.extend(child_nodes(node))
    assert by_statement._lines is not None or not module.body  # the statements paired up


def test_statement_lines_that_do_not_pair_up_fall_back_to_the_whole_module() -> None:
    text = "x = 1\nif x:\n    y = 2\n"
    module = cst.parse_module(text)
    other = statement_lines(ast.parse("x = 1\ny = 2\nz = 3\n"))  # another file's
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    positions = Positions(module, other)
    statement = module.body[1].body.body[0]
    assert positions[statement] == expected[statement]
    assert positions._lines is None
