"""The walks of `ckptlint.analysis.cst_walk` make exactly the visitor calls libcst's own
traversals make, in the same order, over every fixture file and syntax the tests hold."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import libcst as cst
import pytest
from libcst._nodes.base import CSTNode
from libcst.metadata import MetadataWrapper

from ckptlint.analysis.cst_walk import child_nodes, walk, walk_batched

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

SYNTAX = textwrap.dedent(
    '''
    """Doc."""
    from __future__ import annotations
    from .. import a as b, c
    from x import *
    import os.path as p, sys
    @decorator(1)
    @other
    async def f(a, /, b: int = 2, *args, c, d=3, **kwargs) -> "T":
        global g
        async with x as (y, z), w:
            async for i in range(3):
                await q
        x = lambda u, *, v=1: u + v
        return [i for i in x if i], {k: v for k, v in y}, {s for s in z}, (g for g in h)
    class C(Base, metaclass=M):
        attr: int = 1
        def m(self):
            nonlocal_thing = 1
            try:
                pass
            except (A, B) as e:
                raise X from e
            else:
                pass
            finally:
                del a[1:2, ::3], b.c
            while (n := 1) and not x or y is not None:
                break
            else:
                continue
            try:
                pass
            except* C:
                pass
    match command:
        case [1, 2, *rest] if rest:
            pass
        case {"k": v, **others} | Point(x=0, y=_) as p:
            pass
        case _:
            pass
    print(f"{x!r:>{width}} {y=} {'nested'}", "text" "more", -x ** 2 @ m, *a, **k); a; b
    x += 1; y: list[int]
    assert x, "message"
    if a: b
    elif c: d
    else: e
    with open(p) as f: pass
    t = 1 if c else 2, (yield), ...
    def g[T](x: T) -> T: return x
    type Alias = list[int]
    '''
)


def _sources() -> list[tuple[str, str]]:
    found = [("syntax", SYNTAX)]
    for path in sorted(FIXTURES.rglob("*.py")):
        found.append((str(path.relative_to(FIXTURES)), path.read_text(encoding="utf-8")))
    return found


def _node_classes() -> list[type]:
    found, pending = [], [CSTNode]
    while pending:
        current = pending.pop()
        for sub in current.__subclasses__():
            pending.append(sub)
            if dataclasses.is_dataclass(sub) and "_visit_and_replace_children" in vars(sub):
                found.append(sub)
    return found


def _recorder(base: type, skip: frozenset[str] = frozenset(), attributes: bool = True) -> type:
    """A visitor class recording every node hook libcst can call, and every attribute hook
    unless `attributes` is off (the walks take a shorter way without them)."""
    methods = {}

    def hook(name):
        def method(self, node):
            self.events.append((name, id(node)))
            return False if name in skip else None

        return method

    for node_class in _node_classes():
        name = node_class.__name__
        methods[f"visit_{name}"] = hook(f"visit_{name}")
        methods[f"leave_{name}"] = hook(f"leave_{name}")
        for field in dataclasses.fields(node_class) if attributes else ():
            methods[f"visit_{name}_{field.name}"] = hook(f"visit_{name}_{field.name}")
            methods[f"leave_{name}_{field.name}"] = hook(f"leave_{name}_{field.name}")

    def __init__(self):
        base.__init__(self)
        self.events = []

    return type("Recorder", (base,), {**methods, "__init__": __init__})


def _parsed(text: str) -> cst.Module:
    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError:
        pytest.skip("libcst does not parse it")


@pytest.mark.parametrize("name,text", _sources(), ids=[name for name, _ in _sources()])
def test_walk_calls_what_libcst_calls(name: str, text: str) -> None:
    module = _parsed(text)
    for skip in (frozenset(), frozenset({"visit_FunctionDef", "visit_Lambda", "visit_Attribute"})):
        for attributes in (True, False):
            recorder = _recorder(cst.CSTVisitor, skip, attributes)
            expected, actual = recorder(), recorder()
            module.visit(expected)
            walk(module, actual)
            walk(module, again := recorder())  # planned once per visitor class
            assert actual.events == expected.events == again.events


@pytest.mark.parametrize("name,text", _sources(), ids=[name for name, _ in _sources()])
def test_batched_walk_calls_what_libcst_calls(name: str, text: str) -> None:
    module = _parsed(text)
    for attributes in (True, False):
        recorder = _recorder(cst.BatchableCSTVisitor, attributes=attributes)
        expected, actual = [recorder(), recorder()], [recorder(), recorder()]
        MetadataWrapper(module, unsafe_skip_copy=True).visit_batched(expected)
        walk_batched(MetadataWrapper(module, unsafe_skip_copy=True), actual)
        assert [v.events for v in actual] == [v.events for v in expected]


@pytest.mark.parametrize("name,text", _sources(), ids=[name for name, _ in _sources()])
def test_child_nodes_are_libcsts_children(name: str, text: str) -> None:
    module = _parsed(text)
    pending = [module]
    while pending:
        node = pending.pop()
        children = child_nodes(node)
        assert [id(c) for c in children] == [id(c) for c in node.children]
        pending.extend(children)
