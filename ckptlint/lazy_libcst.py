"""libcst, imported when first used: `from ckptlint.lazy_libcst import cst` in place of
`import libcst as cst`.

Every rule and the analysis behind it are libcst code, but whether a file needs libcst at
all is decided by the rules' gates (`Rule.may_apply_to_project`: the project index, built
with CPython's `ast`), which are classmethods of those same rule classes. Importing libcst
costs 0.15-0.2 s (it builds some 300 dataclasses), more than the rest of a one-file run
after an edit; with this module a rule module can be imported, and its gate asked, without
it. The first attribute read (`cst.Call`, in a visitor, or a class body deriving from
`cst.CSTVisitor`) imports libcst and copies its names here, so later reads are plain module
attribute reads, with no indirection left. So: no `cst.*` in a module's top-level code (a
base class, a type alias, a default) of what the rules import, or the saving is lost
(`tests/test_no_heavy_imports.py` checks it); the behaviour is the same either way.
"""

from __future__ import annotations

import importlib
import threading
import types
from typing import TYPE_CHECKING

__all__ = ["cst", "libcst_loaded"]

_LOCK = threading.Lock()


class _LibcstOnFirstUse(types.ModuleType):
    """Stands for the `libcst` package until the first read of one of its names; then it is
    a plain module holding them (`__class__` set back, as `importlib.util.LazyLoader`
    does): CPython specializes attribute reads of plain modules only, and the rules read
    `cst.*` in every visitor."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)  # `__path__`, `__wrapped__`: not a package, not a wrapper
        with _LOCK:
            if type(self) is _LibcstOnFirstUse:  # (not loaded by another thread meanwhile)
                import libcst

                for key, value in vars(libcst).items():
                    if not key.startswith("__"):
                        self.__dict__.setdefault(key, value)
                self.__dict__["__getattr__"] = _subpackage  # PEP 562, for the plain module
                self.__class__ = types.ModuleType
        return getattr(self, name)


def _subpackage(name: str):
    """A subpackage libcst itself does not import (`cst.helpers`), on first use."""
    if name.startswith("__"):
        raise AttributeError(name)  # `__path__`, `__wrapped__`: not a package, not a wrapper
    try:
        module = importlib.import_module(f"libcst.{name}")
    except ModuleNotFoundError:
        raise AttributeError(f"module 'libcst' has no attribute {name!r}") from None
    setattr(cst, name, module)
    return module


if TYPE_CHECKING:
    import libcst as cst
else:
    cst = _LibcstOnFirstUse("libcst")


def libcst_loaded() -> bool:
    """Whether anything has read libcst through `cst` yet."""
    return type(cst) is not _LibcstOnFirstUse
