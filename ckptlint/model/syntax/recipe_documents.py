"""YAML and JSON recipes as settings with positions.

A document is composed with PyYAML's safe composer (nodes with marks, no tags constructed, no
code run) and flattened to one `Setting` per mapping key path: `("fsdp_config",
"fsdp_activation_checkpointing")` -> `True` at line 12. Values follow `yaml.safe_load`
semantics, which is what accelerate, `HfArgumentParser`, TRL, axolotl and LLaMA-Factory read
these files with (so `on` / `yes` are booleans).

JSON is validated with the `json` module first (its error messages are the precise ones),
then composed by the same YAML composer for positions: JSON that `json` accepts is YAML once
its tabs (legal only between tokens) are spaces.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ckptlint.types import Location

# Bounds on what one file can make the flattening do (aliases can share a mapping between
# many keys: `b: {x: *a, y: *a}` nested ten times is a thousand paths).
MAX_DEPTH = 8
MAX_SETTINGS = 5_000

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class Span:
    start: Location
    end: Location


@dataclass(frozen=True)
class Setting:
    """One value a recipe sets: the key path from the document's root, the value as
    `yaml.safe_load` gives it, and where the key and the value are written."""

    key: tuple[str, ...]
    value: object
    path: str  # the display path of the file that says it
    key_span: Span
    value_span: Span
    # Whether the value is one plain scalar on one line that an edit may replace.
    plain_scalar: bool = False

    @property
    def where(self) -> str:
        return f"{self.path}:{self.key_span.start.row}"

    @property
    def dotted(self) -> str:
        return ".".join(self.key)


@dataclass(frozen=True)
class Recipe:
    """The settings of one document of a recipe file."""

    path: str
    settings: Mapping[tuple[str, ...], Setting]

    def get(self, *key: str) -> Setting | None:
        return self.settings.get(key)

    def __contains__(self, key: tuple[str, ...]) -> bool:
        return key in self.settings

    def top_level_keys(self) -> frozenset[str]:
        return frozenset(key[0] for key in self.settings)


# A document's settings by key path.
Settings = Mapping[tuple[str, ...], Setting]


class RecipeSyntaxError(Exception):
    """A recipe that is not valid YAML / JSON, with the 1-based position of the problem."""

    def __init__(self, message: str, row: int, column: int) -> None:
        super().__init__(message)
        self.row = row
        self.column = column


_TOO_DEEP = "the document is nested too deeply to read"


def parse_recipe(text: str, path: str, *, is_json: bool) -> list[Recipe]:
    """The documents of a YAML (or JSON) file; raises `RecipeSyntaxError`."""
    if is_json:
        try:
            json.loads(text)
        except json.JSONDecodeError as error:
            raise RecipeSyntaxError(f"invalid JSON: {error.msg}", error.lineno, error.colno) from None
        except RecursionError:
            raise RecipeSyntaxError("invalid JSON: nested too deeply", 1, 1) from None
        text = text.replace("\t", " ")  # same columns: a tab is one character
    try:
        nodes = list(yaml.compose_all(text, Loader=_Loader))
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        problem = error.problem or error.context or "invalid YAML"
        row, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        if "nesting depth" in problem:  # PyYAML 6.0.4 stops at 1,000 levels where older ones recurse
            raise RecipeSyntaxError(_TOO_DEEP, row, column) from None
        raise RecipeSyntaxError(f"invalid {'JSON' if is_json else 'YAML'}: {problem}", row, column) from None
    except yaml.YAMLError as error:
        raise RecipeSyntaxError(f"invalid {'JSON' if is_json else 'YAML'}: {error}", 1, 1) from None
    except RecursionError:
        raise RecipeSyntaxError(_TOO_DEEP, 1, 1) from None
    recipes = []
    for node in nodes:
        if node is None:
            continue
        settings: dict[tuple[str, ...], Setting] = {}
        try:
            _flatten(node, (), path, settings, frozenset())
        except RecursionError:
            raise RecipeSyntaxError(_TOO_DEEP, 1, 1) from None
        except ConstructorError as error:
            mark = error.problem_mark or error.context_mark
            row, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
            raise RecipeSyntaxError(f"invalid YAML: {error.problem or error}", row, column) from None
        recipes.append(Recipe(path, settings))
    return recipes


def _span(node: Node) -> Span:
    return Span(
        Location(node.start_mark.line + 1, node.start_mark.column + 1),
        Location(node.end_mark.line + 1, node.end_mark.column + 1),
    )


def _value(node: Node) -> object:
    # A fresh constructor per value: it memoises nodes, and recursive aliases are its business.
    return SafeConstructor().construct_object(node, deep=True)


def _entries(node: MappingNode, seen: frozenset[int]) -> Iterator[tuple[Node, Node]]:
    """A mapping's entries, with `<<: *base` merge keys expanded (own keys win, as in
    `safe_load`)."""
    own = []
    merged = []
    for key, value in node.value:
        if key.tag == "tag:yaml.org,2002:merge":
            sources = value.value if isinstance(value, SequenceNode) else [value]
            for source in sources:
                if isinstance(source, MappingNode) and id(source) not in seen:
                    merged.extend(_entries(source, seen | {id(source)}))
        else:
            own.append((key, value))
    yield from merged
    yield from own


def _flatten(
    node: Node, prefix: tuple[str, ...], path: str, settings: dict[tuple[str, ...], Setting], seen: frozenset[int]
) -> None:
    if not isinstance(node, MappingNode) or len(prefix) >= MAX_DEPTH or id(node) in seen:
        return
    for key_node, value_node in _entries(node, seen | {id(node)}):
        if len(settings) >= MAX_SETTINGS:
            return
        if not isinstance(key_node, ScalarNode):
            continue
        key = prefix + (str(_value(key_node)),)
        value_span = _span(value_node)
        plain = (
            isinstance(value_node, ScalarNode)
            and not value_node.style
            and value_span.start.row == value_span.end.row
        )
        if key in settings:  # later duplicates win, as with `safe_load` and `json.loads`
            for stale in [k for k in settings if k[: len(key)] == key]:
                del settings[stale]
        settings[key] = Setting(key, _value(value_node), path, _span(key_node), value_span, plain)
        if isinstance(value_node, MappingNode):
            _flatten(value_node, key, path, settings, seen | {id(node)})
