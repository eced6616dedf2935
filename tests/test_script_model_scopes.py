"""The file's names (`analysis/file_names.py`) against libcst's ScopeProvider, the reference
the project model's resolution on `ast` (`ckptlint.model.script_models.scopes`) reproduces:

- for every name and attribute read in a file, the `ast` resolver gives the qualified names
  libcst gives its libcst node (found through `analysis/ast_bridge.py`);
- for every libcst name, attribute, call and call's function, `FileNames` (the model asked
  through `ExpressionPairs`) gives libcst's qualified names, and for every name the same
  bindings (what `assigned_values` reads).

Files with a construct the `ast` resolver does not model must say so (`unsupported`), never
answer differently; `FileNames` then asks libcst."""

from __future__ import annotations

import ast
import importlib.util
from collections import Counter
import textwrap
from pathlib import Path
from types import SimpleNamespace

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from ckptlint.analysis.ast_bridge import AstBridge, ExpressionPairs
from ckptlint.analysis.file_names import Bound, FileNames, LibcstScopes
from ckptlint.analysis.positions import Positions
from ckptlint.model.index import ProjectIndex
from ckptlint.model.script_models.scopes import ScopeNames

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def differences(text: str) -> list[str] | str:
    """What the `ast` resolver answers differently from libcst; the reason it gave up, if it did."""
    tree = ast.parse(text)
    ours = ScopeNames(tree)
    if ours.unsupported is not None:
        return ours.unsupported
    module = cst.parse_module(text)
    theirs = LibcstScopes(MetadataWrapper(module, unsafe_skip_copy=True))
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
        if ours.qualified(node) != theirs.qualified(libcst_node):
            found.append(f"qualified names of {ast.unparse(node)!r} at line {node.lineno}")
    return found


class _Expressions(cst.CSTVisitor):
    def __init__(self) -> None:
        self.nodes: list[cst.CSTNode] = []

    def visit_Name(self, node: cst.Name) -> None:
        self.nodes.append(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.nodes.append(node)

    def visit_Call(self, node: cst.Call) -> None:
        self.nodes.append(node)


def file_names_differences(text: str) -> list[str] | str:
    """What `FileNames` answers differently from libcst for the libcst tree's names,
    attributes and calls that are expressions; why it asks libcst itself, if it does."""
    module = cst.parse_module(text)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    context = SimpleNamespace(
        ast_module=ast.parse(text), module=module, wrapper=wrapper, project=ProjectIndex(None, {}), relative_path="file.py"
    )
    ours = FileNames(context)
    if ours.fallback_reason is not None:
        return ours.fallback_reason
    theirs = LibcstScopes(wrapper)
    expressions = _Expressions()
    module.visit(expressions)
    pairs = ExpressionPairs(module, context.ast_module)
    found = []
    for node in expressions.nodes:
        if pairs.ast_node(node) is None:
            continue  # no expression of `ast`'s: a keyword, a definition's name, `True`
        for expr in (node, node.func) if isinstance(node, cst.Call) else (node,):
            if ours.qualified(expr) != theirs.qualified(expr):
                found.append(f"qualified names of {module.code_for_node(expr)[:80]!r}")
        if isinstance(node, cst.Name) and _unordered(ours.bindings(node), pairs) != _unordered(theirs.bindings(node), pairs):
            found.append(f"bindings of {node.value!r}")
    return found


def _unordered(bindings: list[Bound] | None, pairs: ExpressionPairs) -> Counter | None:
    """libcst's bindings come from a set: their order means nothing. A target that is no
    expression (`except E as error`) is assigned no value: libcst names it, `ast` cannot."""
    if bindings is None:
        return None
    return Counter(
        (bound.kind, id(bound.target) if pairs.ast_node(bound.target) is not None else None) for bound in bindings
    )


def _parsed_fixtures() -> list[Path]:
    found = []
    for path in sorted(FIXTURES.rglob("*.py")):
        try:
            ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, ValueError, UnicodeDecodeError):
            continue  # a fixture of bad input
        found.append(path)
    return found


@pytest.mark.parametrize("path", _parsed_fixtures(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_names_resolve_on_ast_as_libcst_resolves_them(path):
    text = path.read_text(encoding="utf-8")
    for result in (differences(text), file_names_differences(text)):
        assert isinstance(result, str) or result == []


SCOPE_RULES = {
    "imports": """
        import a.b.c
        import a.b as ab
        from x.y import z as w, v
        from . import sibling
        from ..pkg.mod import thing
        from .mod import *
        a.b.c.d()
        ab.e()
        w()
        v.attr.call()
        sibling.f()
        thing()
        a.b()
    """,
    "class scopes are invisible to methods": """
        x = 1
        class C:
            x = 2
            y = x
            def f(self):
                return x
            g = lambda self: x
            h = [x for _ in range(3)]
    """,
    "a local is local in all the function": """
        def f():
            print(len)
            len = 3
            return len
        def g():
            for i in range(3):
                pass
            return i
    """,
    "global and nonlocal": """
        counter = 0
        def bump():
            global counter
            counter = counter + 1
        def outer():
            v = 1
            class K:
                v = 2
                def m(self):
                    nonlocal v
                    v = 3
                    return v
            return K
    """,
    "comprehensions": """
        def f(rows):
            flat = [y for x in rows for y in x if y]
            table = {k: v for k, v in rows}
            gen = (z(q) for q in z)
            nested = [[c for c in r] for r in rows]
            return flat, table, gen, nested
    """,
    "defaults, annotations and decorators": """
        import functools
        from torch.utils.checkpoint import checkpoint as ckpt
        def deco(fn): return fn
        @functools.partial(deco)
        def f(x: int = ckpt, *args: str, fn=lambda y=ckpt: y, **kw) -> ckpt:
            return ckpt(x), fn()
    """,
    "assignment expressions and match": """
        def f(items):
            if (n := len(items)) > 3:
                return n
            while chunk := items.pop():
                print(chunk)
            match items:
                case [first, *rest]:
                    return first
                case {"k": value, **others}:
                    return value
                case Point(x=px) as point:
                    return point
    """,
    "names the trees hold differently": """
        import os.path as osp
        from torch.utils import checkpoint
        def f(*, key: "Forward" = None, flag=True):
            global G
            x = f"{key!r:>{width}} {osp.join('a', f'{key}')}"
            y = x if flag is None else {k: v for k, v in key}
            return checkpoint.checkpoint(f, key=key, use_reentrant=False)
        class K(Base, metaclass=Meta):
            def m(self, value=K.attr):
                try:
                    pass
                except* ValueError as group:
                    raise group
    """,
    "attribute chains through calls and subscripts": """
        import torch
        torch.nn.Linear(1, 2).weight.data.zero_()
        torch.cat([a[0].b, "".join([]), (1).real])
        x = torch.utils
        x.checkpoint.checkpoint(f)
        del x
        with open("f") as fh, torch.no_grad():
            fh.read()
        try:
            pass
        except (ValueError, torch.OutOfMemoryError) as error:
            raise error
    """,
}


@pytest.mark.parametrize("source", SCOPE_RULES.values(), ids=SCOPE_RULES.keys())
def test_python_scope_rules_resolve_on_ast_as_libcst_resolves_them(source):
    text = textwrap.dedent(source)
    assert differences(text) == []
    assert file_names_differences(text) == []


# Scopes the `ast` resolver leaves to libcst.
UNMODELLED_CONSTRUCTS = [
    "def f(x=(y := 1)): return y",
    "z = [(w := i) for i in range(3)]",
    "from typing import TypeVar\nname = 'T'\nT = TypeVar(name)",
]


@pytest.mark.parametrize("source", UNMODELLED_CONSTRUCTS)
def test_constructs_the_ast_resolver_does_not_model_are_handed_to_libcst(source):
    assert isinstance(differences(source), str)
    assert isinstance(file_names_differences(source), str)


def test_trees_that_do_not_pair_up_are_left_to_libcst():
    module = cst.parse_module("import torch\nx = torch.nn\n")
    pairs = ExpressionPairs(module, ast.parse("import torch\nx = torch.cuda\n"))
    assert pairs.mismatch == "the trees' attributes differ"
    assert pairs.ast_node(module.body[1].body[0].value) is None


def test_names_inside_visit_hooks_are_those_after_the_traversal():
    from ckptlint import traversal
    from ckptlint.config import resolve_settings
    from ckptlint.parsing import parse_module
    from ckptlint.rule import Rule

    seen = []

    class Probe(Rule):
        code, name = "CKPT999", "probe"

        def visit_Call(self, node):
            seen.append({q.name for q in self.context.qualified_names(node.func)})

    path = FIXTURES / "vision" / "resnet_ckpt.py"
    text = path.read_text(encoding="utf-8")
    parsed = parse_module(text, path.name, with_libcst=True)
    expected = [
        {q.name for q in LibcstScopes(MetadataWrapper(parsed.module, unsafe_skip_copy=True)).qualified(call.func)}
        for call in _calls(parsed.module)
    ]
    errors: list[str] = []
    traversal.run_rules(parsed, text, path, path.name, resolve_settings(path.parent), [Probe], errors, ProjectIndex(None, {}), path.name)
    assert errors == []
    assert seen == expected and any("torch.utils.checkpoint.checkpoint" in names for names in seen)


def _calls(module: cst.Module) -> list[cst.Call]:
    expressions = _Expressions()
    module.visit(expressions)
    return [node for node in expressions.nodes if isinstance(node, cst.Call)]


def _installed(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _real_files() -> list[Path]:
    torch, transformers = _installed("torch"), _installed("transformers")
    files: list[Path] = []
    if torch is not None:
        files += sorted((torch / "distributed" / "fsdp").rglob("*.py"))
        files += sorted((torch / "distributed" / "algorithms" / "_checkpoint").rglob("*.py"))
        files.append(torch / "utils" / "checkpoint.py")
    if transformers is not None:
        files += [transformers / "modeling_utils.py", transformers / "trainer.py"]
        for model in ("llama", "bert", "vit"):
            files += sorted((transformers / "models" / model).rglob("*.py"))
    return [f for f in files if f.is_file()]


@pytest.mark.slow
@pytest.mark.torch
def test_installed_torch_and_transformers_names_resolve_as_libcst_resolves_them():
    files = _real_files()
    if not files:
        pytest.skip("neither torch nor transformers is installed")
    compared = 0
    for path in files:
        result = file_names_differences(path.read_text(encoding="utf-8"))
        if isinstance(result, str):
            continue
        assert result == [], f"{path}: {result[:5]}"
        compared += 1
    assert compared >= len(files) * 9 // 10  # nearly every real file is answered by the model


def test_a_name_the_file_leaves_unbound_is_what_its_star_imports_bind():
    from ckptlint.model.file_facts.extraction import extract_facts

    blocks = "import torch.nn as nn\nfrom torch.utils.checkpoint import checkpoint as _ckpt, checkpoint\n"
    tower = textwrap.dedent(
        """
        from .blocks import *

        def forward(block, x, run=None):
            checkpoint(block, x)
            nn.Linear(2, 2)
            _ckpt(block, x)
            run(block, x)
        """
    )
    files = {"pkg/__init__.py": "", "pkg/blocks.py": blocks, "pkg/tower.py": tower}
    project = ProjectIndex(None, {path: extract_facts(text, path, prefilter=False) for path, text in files.items()})
    module = cst.parse_module(tower)
    context = SimpleNamespace(
        ast_module=ast.parse(tower), module=module, wrapper=MetadataWrapper(module, unsafe_skip_copy=True),
        project=project, relative_path="pkg/tower.py",
    )
    names = FileNames(context)
    calls = [statement.body[0].value for statement in module.body[1].body.body]
    assert [{q.name for q in names.qualified(call.func)} for call in calls] == [
        {"torch.utils.checkpoint.checkpoint"},  # `blocks` imports it
        {"torch.nn.Linear"},  # an attribute of a star-imported name
        set(),  # a private name: no star import brings it
        {"forward.<locals>.run"},  # the file's own binding
    ]
