"""Registries: classes a project registers by name and builds back from a name.

Two kinds are followed, as real projects write them:

    BACKBONES = {}                                  a dict filled by a decorator the project
    def register_backbone(name):                    defines (`register_backbone(name)`
        def deco(cls):                              returning a decorator, or `register(cls)`
            BACKBONES[name] = cls                   itself), read back by key:
            return cls                              `BACKBONES[cfg["type"]](...)`,
        return deco                                 `BACKBONES.get("resnet")`

    MODELS = Registry("models")                     a registry object (mmengine's, or the
    @MODELS.register_module()                       project's own class) whose
    class ResNet(nn.Module): ...                    `register_module` / `register` decorates
    MODELS.build(dict(type="ResNet", depth=50))     the class; `build(cfg)` constructs it

A key known where the registry is read (a constant, or a config dict literal passed down)
selects the class registered under it; an unknown key selects nothing (the configuration
decides, and the rules stay silent). Here: the registrars and registrations a file's tree
holds (its facts), and the table the index builds from every file's; what reading a registry
denotes is the evaluator's (`ckptlint.model.evaluation.registry_semantics`)."""

from __future__ import annotations

import ast
from collections.abc import Callable

from ckptlint.model.syntax.ast_walk import walk

# Methods of a registry object that register the class they decorate.
REGISTERING_METHODS = frozenset({"register_module", "register"})


def registrars(tree: ast.Module, resolve: Callable[[ast.AST], str | None], module: str) -> list[tuple[str, str]]:
    """(function, registry) for each module-level function that stores the class it
    decorates into a module-level dict: `def register(cls): REG[cls.__name__] = cls`, or a
    factory whose nested decorator does (`def register(name): def deco(cls): REG[name] = cls`)."""
    found = []
    module_names = {
        target.id for statement in tree.body if isinstance(statement, (ast.Assign, ast.AnnAssign))
        for target in (statement.targets if isinstance(statement, ast.Assign) else [statement.target])
        if isinstance(target, ast.Name)
    }
    for function in tree.body:
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for candidate in (function, *(n for n in function.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))):
            parameters = {a.arg for a in (*candidate.args.posonlyargs, *candidate.args.args)}
            for node in walk(candidate):
                if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Name) or node.value.id not in parameters:
                    continue
                for target in node.targets:
                    if isinstance(target, ast.Subscript):
                        held = target.value
                        registry = f"{module}.{held.id}" if isinstance(held, ast.Name) and held.id in module_names else resolve(held)
                        if registry is not None:
                            found.append((f"{module}.{function.name}", registry))
    return sorted(set(found))


def registrations(node: ast.ClassDef, resolve: Callable[[ast.AST], str | None], qualified: str) -> list[tuple[str, str, str]]:
    """(decorator, key, class) for each decorator of a class that may register it: a call
    or name resolving to a function or a registry method whose name says so (`register*`);
    the key is the decorator's first constant string (or `name=`), "" when it has none
    (then the class's own name)."""
    found = []
    for decorator in node.decorator_list:
        call = decorator if isinstance(decorator, ast.Call) else None
        target = call.func if call is not None else decorator
        name = resolve(target)
        if name is None or "regist" not in name.rsplit(".", 1)[-1]:
            continue  # `@dataclass`, `@torch.no_grad()`: registries' decorators are named so
        key = ""
        if call is not None:
            arguments = [*call.args, *(k.value for k in call.keywords if k.arg in ("name", "module_name"))]
            key = next((a.value for a in arguments if isinstance(a, ast.Constant) and isinstance(a.value, str)), "")
        found.append((name, key, qualified))
    return found


def registered_classes(registrars_by_function: dict[str, str], registrations_seen) -> dict[str, dict[str, tuple[str, ...]]]:
    """registry -> key -> the classes registered under it."""
    table: dict[str, dict[str, list[str]]] = {}
    for decorator, key, cls in registrations_seen:
        registry = registrars_by_function.get(decorator)
        if registry is None:
            owner, _, method = decorator.rpartition(".")
            if method not in REGISTERING_METHODS or not owner:
                continue
            registry = owner
        table.setdefault(registry, {}).setdefault(key or cls.rsplit(".", 1)[-1], []).append(cls)
    return {registry: {key: tuple(sorted(set(classes))) for key, classes in keys.items()} for registry, keys in table.items()}
