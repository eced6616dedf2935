"""Module names and imports: how a file of the project names itself and what it imports."""

from __future__ import annotations

from collections.abc import Iterable

# A source root: `src/pkg/mod.py` is imported as `pkg.mod` (setuptools' src layout), and a
# project whose `src` is itself a package imports it as `src.pkg.mod`; both spell one module.
_SOURCE_ROOT = "src"


def canonical_name(name: str) -> str:
    """An absolute name as the model spells it: `src.pkg.mod.f` -> `pkg.mod.f`."""
    head, dot, rest = name.partition(".")
    return rest if head == _SOURCE_ROOT and dot and rest else name


def module_name(relative_path: str) -> str:
    """`pkg/sub/mod.py` -> `pkg.sub.mod`; `pkg/__init__.py` -> `pkg`; `src/pkg/mod.py` ->
    `pkg.mod` (`canonical_name`)."""
    parts = relative_path.removesuffix(".ipynb").removesuffix(".pyi").removesuffix(".py").split("/")
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return canonical_name(".".join(parts))


def absolute_import(module: str, is_package: bool, relative: str) -> str:
    """`from ..x import y` seen in `module`: the absolute name `..x.y` stands for."""
    level = len(relative) - len(relative.lstrip("."))
    if level == 0:
        return canonical_name(relative)
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[: len(package) - (level - 1)] if level > 1 else package
    rest = relative[level:]
    return ".".join([*base, rest] if rest else base)



_TEST_DIRECTORIES = frozenset({"tests", "test", "testing"})


def is_test_path(relative_path: str) -> bool:
    """A test of the project (`tests/...`, `test_x.py`, `x_test.py`, `conftest.py`, torch's
    `testing/`): it exercises the package, it is not how the package is trained."""
    parts = relative_path.split("/")
    name = parts[-1]
    return (
        any(part in _TEST_DIRECTORIES for part in parts[:-1])
        or name.startswith("test_")
        or name.endswith("_test.py")
        or name == "conftest.py"
    )


# The methods pytest and unittest run before each test of a class.
TEST_SETUP_METHODS = frozenset({"setUp", "setup_method", "setup"})


def is_test_function(name: str) -> bool:
    """A test pytest collects (`test_generate`, `test`)."""
    return name.startswith("test")


def is_test_class(class_name: str, bases: Iterable[str]) -> bool:
    """A pytest (`class TestQuant:`) or unittest (a `TestCase` subclass) test class; `bases`
    as written."""
    return class_name.rsplit(".", 1)[-1].startswith("Test") or any("TestCase" in base for base in bases)
