"""Our name resolution (`ckptlint.name_resolution`, built in the shared traversal) against
libcst's ScopeProvider, the reference it replaces: for every Name, Attribute, Call and
Call's func of a file, the same qualified names, and for every Name the same bindings
(what `assigned_values` reads). Files with a construct the resolver does not model must
say so (`unsupported`), never answer differently; the engine then asks libcst."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from ckptlint import traversal
from ckptlint.name_resolution import NameResolution, ScopeBuilder

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


class _Expressions(cst.CSTVisitor):
    def __init__(self) -> None:
        self.nodes: list[cst.CSTNode] = []

    def visit_Name(self, node: cst.Name) -> None:
        self.nodes.append(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.nodes.append(node)

    def visit_Call(self, node: cst.Call) -> None:
        self.nodes.append(node)


def differences(text: str) -> list[str] | str:
    """What our resolver answers differently from libcst; the reason it gave up, if it did."""
    module = cst.parse_module(text)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    builder = ScopeBuilder()
    wrapper.visit_batched([builder])
    if builder.unsupported is not None:
        return builder.unsupported
    ours = NameResolution(builder)
    theirs = traversal.LibcstScopes(wrapper)
    expressions = _Expressions()
    module.visit(expressions)
    found = []
    for node in expressions.nodes:
        for expr in (node, node.func) if isinstance(node, cst.Call) else (node,):
            if ours.qualified_names(expr) != theirs.qualified_names(expr):
                found.append(f"qualified names of {module.code_for_node(expr)[:80]!r}")
        if isinstance(node, cst.Name):
            bindings = ours.bindings(node)
            mine = None if bindings is None else {id(b.node) if b.kind != "builtin" else b.name for b in bindings}
            reference = theirs.binding_nodes(node)
            if reference is not None:
                reference = {id(n) if n is not None else node.value for n in reference}
            if mine != reference:
                found.append(f"bindings of {node.value!r}")
    return found


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


@pytest.mark.parametrize("path", sorted(FIXTURES.rglob("*.py")), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_names_resolve_as_libcst_resolves_them(path):
    text = path.read_text(encoding="utf-8")
    try:
        result = differences(text)
    except cst.ParserSyntaxError:
        pytest.skip("not valid Python (a fixture of bad input)")
    assert isinstance(result, str) or result == []


@pytest.mark.slow
@pytest.mark.torch
def test_installed_torch_and_transformers_names_resolve_as_libcst_resolves_them():
    files = _real_files()
    if not files:
        pytest.skip("neither torch nor transformers is installed")
    compared = 0
    for path in files:
        result = differences(path.read_text(encoding="utf-8"))
        if isinstance(result, str):
            continue
        assert result == [], f"{path}: {result[:5]}"
        compared += 1
    assert compared >= len(files) // 2  # most real files are resolved by our scopes


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
def test_python_scope_rules_resolve_as_libcst_resolves_them(source):
    assert differences(textwrap.dedent(source)) == []


# Scopes the resolvers leave to libcst (also the `ast` one's: tests/test_script_model_scopes.py).
UNMODELLED_CONSTRUCTS = [
    "def f(x=(y := 1)): return y",
    "z = [(w := i) for i in range(3)]",
    "from typing import TypeVar\nname = 'T'\nT = TypeVar(name)",
]


@pytest.mark.parametrize(
    "source", [*UNMODELLED_CONSTRUCTS, "type Alias = list[int]", "def f[T](x: T) -> T: return x"]
)
def test_constructs_the_resolver_does_not_model_are_handed_to_libcst(source):
    assert isinstance(differences(source), str)


@pytest.mark.parametrize(
    "path",
    [FIXTURES / "vision" / "resnet_ckpt.py", FIXTURES / "verify" / "transformer_stack.py"],
    ids=lambda p: p.name,
)
def test_the_engine_reports_the_same_with_libcst_scopes(path, monkeypatch):
    from ckptlint.config import resolve_settings
    from ckptlint.engine import lint_text

    settings = resolve_settings(path.parent)
    ours = lint_text(path.read_text(encoding="utf-8"), path, settings).diagnostics
    monkeypatch.setattr(traversal, "LIBCST_SCOPES", True)
    assert lint_text(path.read_text(encoding="utf-8"), path, settings).diagnostics == ours
