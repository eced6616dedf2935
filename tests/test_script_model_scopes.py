"""The script interpreter's name resolution on `ast` (`ckptlint.model.script_models.scopes`)
against libcst's ScopeProvider: for every name and attribute read in a file, the same
qualified names (the libcst node found through `analysis/ast_bridge.py`). Files with a
construct it does not model must say so (`unsupported`), never answer differently; the
rules then ask libcst."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from types import SimpleNamespace

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from ckptlint import traversal
from ckptlint.analysis.ast_bridge import AstBridge
from ckptlint.analysis.positions import Positions
from ckptlint.model.script_models.scopes import ScopeNames

from tests.test_name_resolution import SCOPE_RULES, UNMODELLED_CONSTRUCTS

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
_SOURCES = {"IMPORT": "import", "LOCAL": "local", "BUILTIN": "builtin"}


def differences(text: str) -> list[str] | str:
    """What the `ast` resolver answers differently from libcst; the reason it gave up, if it did."""
    tree = ast.parse(text)
    ours = ScopeNames(tree)
    if ours.unsupported is not None:
        return ours.unsupported
    module = cst.parse_module(text)
    theirs = traversal.LibcstScopes(MetadataWrapper(module, unsafe_skip_copy=True))
    positions = Positions(module)
    bridge = AstBridge(SimpleNamespace(text=text, module=module, position=positions.__getitem__), tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Name, ast.Attribute)) or not isinstance(node.ctx, ast.Load):
            continue
        libcst_node = bridge.cst_node_at(node, (cst.Name, cst.Attribute))
        if libcst_node is None:
            found.append(f"no libcst node for {ast.unparse(node)!r} at line {node.lineno}")
            continue
        reference = {(q.name, _SOURCES[q.source.name]) for q in theirs.qualified_names(libcst_node)}
        if {(q.name, q.source) for q in ours.qualified(node)} != reference:
            found.append(f"qualified names of {ast.unparse(node)!r} at line {node.lineno}")
    return found


def _python_files() -> list[Path]:
    found = []
    for path in sorted(FIXTURES.rglob("*.py")):
        try:
            ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, ValueError, UnicodeDecodeError):
            continue  # a fixture of bad input
        found.append(path)
    return found


@pytest.mark.parametrize("path", _python_files(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_names_resolve_on_ast_as_libcst_resolves_them(path):
    result = differences(path.read_text(encoding="utf-8"))
    assert isinstance(result, str) or result == []


@pytest.mark.parametrize("source", SCOPE_RULES.values(), ids=SCOPE_RULES.keys())
def test_python_scope_rules_resolve_on_ast_as_libcst_resolves_them(source):
    assert differences(textwrap.dedent(source)) == []


@pytest.mark.parametrize("source", UNMODELLED_CONSTRUCTS)
def test_constructs_the_ast_resolver_does_not_model_are_handed_to_libcst(source):
    assert isinstance(differences(source), str)
