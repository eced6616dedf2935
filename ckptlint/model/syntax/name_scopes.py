"""Python's scopes as libcst's scope analysis builds them, whatever tree they are built from:
what a name binds where (`Binding`, with the count of assignment-like statements completed
before it, libcst's index), what a read sees (`Access`, `referents`). Built from the `ast`
tree by the project model's resolution (`ckptlint.model.script_models.scopes`), which every
name question of the rules and of the interpreter goes to; a node is an `ast` node."""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Iterator


class Scope:
    """A namespace: `kind` is builtin, global, function, class or comprehension."""

    def __init__(self, kind: str, parent: Scope | None, name: str | None = None) -> None:
        self.kind = kind
        self.parent: Scope = parent if parent is not None else self
        self.bindings: dict[str, list[Binding]] = {}
        self.overwrites: dict[str, Scope] = {}  # `global` / `nonlocal` declarations
        self.count = 0  # assignment-like statements completed so far (libcst's index)
        self.in_element = False  # a comprehension whose element precedes its targets
        if kind in ("builtin", "global"):
            self.name_prefix = ""
        elif kind == "function":
            self.name_prefix = ".".join(filter(None, [self.parent.name_prefix, name, "<locals>"]))
        elif kind == "class":
            self.name_prefix = ".".join(filter(None, [self.parent.name_prefix, name]))
        else:
            self.name_prefix = ".".join(filter(None, [self.parent.name_prefix, "<comprehension>"]))
        self._builtin_bindings: dict[str, Binding] = {}

    def visible_from_children(self) -> bool:
        return self.kind != "class"

    def next_visible_parent(self, first: Scope | None = None) -> Scope:
        parent = first if first is not None else self.parent
        while not parent.visible_from_children():
            parent = parent.parent
        return parent

    def contains(self, name: str) -> bool:
        if self.kind == "builtin":
            return hasattr(builtins, name)
        if self.kind != "global" and name in self.overwrites:
            return self.overwrites[name].contains(name)
        if name in self.bindings:
            return len(self.bindings[name]) > 0
        return self.next_visible_parent().contains(name)

    def resolve(self, name: str) -> list[Binding]:
        if self.kind == "builtin":
            if not hasattr(builtins, name):
                return []
            if name not in self._builtin_bindings:
                self._builtin_bindings[name] = Binding(name, self, None, -1, "builtin")
            return [self._builtin_bindings[name]]
        if self.kind != "global" and name in self.overwrites:
            return self.next_visible_parent(self.overwrites[name]).resolve(name)
        if name in self.bindings:
            return self.bindings[name]
        return self.next_visible_parent().resolve(name)

    def assignment_target(self, name: str) -> Scope:
        if self.kind not in ("builtin", "global") and name in self.overwrites:
            return self.next_visible_parent(self.overwrites[name]).assignment_target(name)
        return self

    def bind(self, name: str, node: object, kind: str = "local", alias: object = None) -> None:
        target = self.assignment_target(name)
        target.bindings.setdefault(name, []).append(Binding(name, target, node, target.count, kind, alias))


class Binding:
    """One assignment of a name (libcst's Assignment, ImportAssignment, BuiltinAssignment)."""

    __slots__ = ("name", "scope", "node", "index", "kind", "alias")

    def __init__(self, name: str, scope: Scope, node: object, index: int, kind: str, alias: object = None) -> None:
        self.name, self.scope, self.node, self.index, self.kind, self.alias = name, scope, node, index, kind, alias


class Access:
    """A name read: where, at which point of its scope, and the attribute chain around it."""

    __slots__ = ("name", "scope", "index", "enclosing_attribute", "resolved_node", "resolved_name")

    def __init__(self, name: object, scope: Scope, index: int | None, enclosing_attribute: object) -> None:
        self.name, self.scope, self.index, self.enclosing_attribute = name, scope, index, enclosing_attribute
        self.resolved_node: object = None
        self.resolved_name = ""


def referents(access: Access) -> list[Binding]:
    scope, name = access.scope, access.resolved_name
    index = access.index if access.index is not None else scope.count
    bindings = scope.resolve(name)
    previous = [b for b in bindings if b.scope is not scope or b.index < index]
    if not previous and bindings and scope.parent is not scope:
        previous = scope.parent.resolve(name)
    return previous


def imported_names(module: str, aliases: Iterable[tuple[str, str | None]], full_name: str) -> Iterator[str]:
    """libcst's `ImportAssignment.get_qualified_names_for`, on names as written: what
    `full_name` (`np.linalg.norm`) means through an import of `module` (the `from` module
    with its leading dots, "" for a plain `import`) binding each (dotted name, `as` name)."""
    for real_name, as_name in aliases:
        if not full_name.startswith(as_name or real_name.partition(".")[0]):
            continue  # no name this alias binds begins `full_name`
        parts = real_name.split(".")
        for candidate in (".".join(parts[:i]) for i in range(len(parts), 0, -1)):
            bound = as_name or candidate
            if module:
                candidate = f"{module}{candidate}" if module.endswith(".") else f"{module}.{candidate}"
            if full_name.startswith(bound):
                remaining = full_name.split(bound, 1)[1]
                if remaining and not remaining.startswith("."):
                    continue
                remaining = remaining.lstrip(".")
                yield f"{candidate}.{remaining}" if remaining else candidate
                break
