"""The summary form of code: what each function of a file binds, builds and returns, in a small
form the model can evaluate later across files (`ckptlint.model.evaluation.denotation`); built from
`ast` by `ckptlint.model.file_facts.code` (a libcst expression a rule holds is read the same way,
from its text: `ckptlint.analysis.model_expressions`), read back from the cache by
`ckptlint.model.file_facts.facts` (this module imports neither parser).

An expression is kept as a nested tuple (cheap to build, to hash and to write as JSON):

    ("name", id)                         ("attr", expr, attr)
    ("call", func, (arg...), ((keyword, expr)...))   an arg may be ("star", expr); keyword None: `**expr`
    ("index", expr, key)                 key: an expression (a slice with literal bounds: ("const",
                                         ("slice", lower, upper, step)); None for any other slice)
    ("seq", (expr...))                   tuple / set literal; a list literal: ("seq", (expr...), LIST)
    ("dict", ((key, expr)...))           key None: a `**` splat
    ("or", (expr...))                    ("if", test, then, else)
    ("not", expr)
    ("const", value)                     ("comp", element, ((pattern, iterable)...)); a list
                                         comprehension: ("comp", element, (...), LIST)
    ("item", key, expr)                  `expr` stored under literal `key` (an `append` binding's
                                         value, from `d["key"] = expr`): evaluates to `expr`
    ("lambda", (callee...))              the names and attribute chains its body calls, each once
    ("?",)                               anything else

A binding target (`pattern`) is a name, an attribute (`self.blocks`), a subscript, or a
sequence of patterns (`a, (b, *c) = ...`). A function summary lists, flow-insensitively,
every binding in its body in source order (`x = e`, `for x in e`, `xs.append(e)`,
`self.add_module(name, e)`), what it returns, and its parameters with their defaults and the
classes their annotations name. Expressions nested deeper than `MAX_DEPTH` are `("?",)`:
generated code cannot make a summary large.
"""

from __future__ import annotations

from dataclasses import dataclass

Expr = tuple
UNKNOWN: Expr = ("?",)
LIST = "list"  # the last item of a list literal's or list comprehension's form (a list, not a tuple)
MODULE_LEVEL = "<module>"  # the name of a module's top-level code's summary: `pkg.mod.<module>`
MAX_DEPTH = 40

# How a binding binds: `=` assigns the value; `for` binds each element of it; `append`
# (`insert`, `add`) adds the value to the container the pattern names; `extend` (`+=`) adds
# each element of it.
ASSIGN, ELEMENTS, ADD, ADD_ELEMENTS = "=", "for", "append", "extend"
ITEM = "item"  # the tag of an `append` binding's value stored under a literal key


@dataclass(frozen=True)
class Parameter:
    name: str
    default: Expr | None  # None: no default
    annotated: tuple[str, ...]  # the classes the annotation names (absolute where resolvable)
    kind: str  # "positional", "keyword" (keyword-only), "*", "**"


# The `if` tests guarding a statement, each with the truth it needs: ((test, True), ...).
Conditions = tuple


@dataclass(frozen=True)
class Binding:
    pattern: Expr
    how: str  # ASSIGN, ELEMENTS, ADD, ADD_ELEMENTS
    value: Expr
    line: int
    end: int = 0  # a `for` loop: the last line of its body (the target holds there)
    conditions: Conditions = ()


@dataclass(frozen=True)
class FunctionSummary:
    name: str  # absolute: `pkg.mod.Class.method`, nested: `pkg.mod.Class.forward.inner`
    parameters: tuple[Parameter, ...]
    bindings: tuple[Binding, ...]
    returns: tuple[tuple[Expr, Conditions], ...]
    # The callee of every call in the body (not in nested definitions), with its first line:
    # what the function runs.
    calls: tuple[tuple[Expr, int], ...] = ()
    # `self` (a method's first parameter), when the function is a method or nested in one.
    self_name: str | None = None
    nested: tuple[str, ...] = ()  # the simple names of the functions defined in its body
    # The calls of project functions and methods (a global name or `self.<method>`) that pass
    # them something the model can follow, with their first line: the call sites a generic
    # parameter (`def apply_checkpointing(model)`) is resolved at.
    passes: tuple[tuple[Expr, int], ...] = ()
    # A `@property` (`functools.cached_property`): reading the attribute runs it and gives
    # what it returns (`self.norm1` returning `getattr(self, self.norm1_name)`).
    is_property: bool = False

    def to_json(self) -> list:
        return [
            self.name,
            [[p.name, p.default, list(p.annotated), p.kind] for p in self.parameters],
            [[b.pattern, b.how, b.value, b.line, b.end, b.conditions] for b in self.bindings],
            [[value, conditions] for value, conditions in self.returns],
            [[c, line] for c, line in self.calls],
            self.self_name,
            list(self.nested),
            [[c, line] for c, line in self.passes],
            self.is_property,
        ]

    @classmethod
    def from_json(cls, data: list) -> FunctionSummary:
        name, parameters, bindings, returns, calls, self_name, nested, passes, is_property = data
        return cls(
            name,
            tuple(Parameter(p[0], frozen(p[1]) if p[1] is not None else None, tuple(p[2]), p[3]) for p in parameters),
            tuple(Binding(frozen(b[0]), b[1], frozen(b[2]), b[3], b[4], frozen(b[5])) for b in bindings),
            tuple((frozen(value), frozen(conditions)) for value, conditions in returns),
            tuple((frozen(c), line) for c, line in calls),
            self_name,
            tuple(nested),
            tuple((frozen(c), line) for c, line in passes),
            is_property,
        )


def slice_key(bounds: list[int | None | bool]) -> Expr | None:
    """`[a:b:c]` with literal (or absent) bounds, as a constant key; else None (any member)."""
    if any(bound is False for bound in bounds):
        return None
    return ("const", ("slice", *bounds))


def frozen(value):
    """JSON lists back to the tuples expressions are made of."""
    if isinstance(value, list):
        return tuple(frozen(item) for item in value)
    return value


# --- from `ast` ------------------------------------------------------------------------------


def dotted_absolute(expr, names: dict[str, str]) -> str | None:
    """`torch.utils.checkpoint.checkpoint`, `cp.checkpoint`, `checkpoint` (a summary
    expression) as the absolute name its imports give it."""
    parts: list[str] = []
    while expr[0] == "attr":
        parts.append(expr[2])
        expr = expr[1]
    if expr[0] != "name" or expr[1] not in names:
        return None
    return ".".join([names[expr[1]], *reversed(parts)])


def dotted_name(expr: Expr) -> str | None:
    """`self.model` for ("attr", ("name", "self"), "model"): a name or attribute chain as
    written, else None (the inverse of `dotted_expression`)."""
    parts: list[str] = []
    while expr[0] == "attr":
        parts.append(expr[2])
        expr = expr[1]
    return ".".join([expr[1], *reversed(parts)]) if expr[0] == "name" else None


def dotted_expression(dotted: str) -> Expr:
    """`self.model` in the summary form: ("attr", ("name", "self"), "model")."""
    first, *rest = dotted.split(".")
    expr: Expr = ("name", first)
    for attribute in rest:
        expr = ("attr", expr, attribute)
    return expr
