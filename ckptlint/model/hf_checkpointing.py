"""Hugging Face gradient checkpointing: which implementation a configuration really runs.

transformers turns `gradient_checkpointing_kwargs` into `partial(checkpoint, **kwargs)`, and
applies its own default only when the kwargs are `None`:

    transformers < 5.0:  None -> {"use_reentrant": True}
    transformers >= 5.0: None -> {"use_reentrant": False}
    any version:         {"preserve_rng_state": False} (a dict without the key) -> torch's
                         default, which is reentrant (with torch's warning)

The `Trainer` path differs in one detail: from 5.0 it pops `every_n_layers` / `offload` from
`TrainingArguments.gradient_checkpointing_kwargs` and passes `kwargs or None`, so `{}` or
`{"offload": True}` there still gets the library default.
"""

from __future__ import annotations

import ast
import enum
from dataclasses import dataclass

from ckptlint.lazy_libcst import cst
from ckptlint.model.library import REENTRANT_DEFAULT_VERSIONS, Reentrancy
from ckptlint.versions import Applies, TargetVersions

GC_ENABLE = "gradient_checkpointing_enable"
GC_KWARGS = "gradient_checkpointing_kwargs"
# Keys the Trainer (transformers >= 5.0) consumes itself before calling checkpoint.
TRAINER_OWN_KEYS = frozenset({"every_n_layers", "offload"})


class KwargsShape(str, enum.Enum):
    """What `gradient_checkpointing_kwargs` is."""

    DEFAULT = "not given (the library default applies)"
    WITH_FLAG = "a dict with `use_reentrant`"
    WITHOUT_FLAG = "a dict without `use_reentrant`"
    UNKNOWN = "not known statically"


@dataclass(frozen=True)
class HfCheckpointingKwargs:
    """What a `gradient_checkpointing_kwargs` expression is, as far as reentrancy goes."""

    shape: KwargsShape
    flag: Reentrancy = Reentrancy.UNKNOWN  # the literal `use_reentrant` value, for WITH_FLAG
    # The dict (or None) written in the code, if any: a libcst node (`of`), or an `ast` node of
    # the file's tree (`of_ast`, in the steps of `ckptlint.model.script_models`).
    node: object = None

    @classmethod
    def of(cls, value: cst.BaseExpression | None, *, trainer_path: bool = False) -> HfCheckpointingKwargs:
        """What a libcst expression is (the rules'; libcst is imported by the time they ask)."""
        if value is None or (isinstance(value, cst.Name) and value.value == "None"):
            return cls(KwargsShape.DEFAULT, node=value)
        keys: dict[str, cst.BaseExpression] | None = None
        if isinstance(value, cst.Dict):
            keys = {}
            for element in value.elements:
                if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
                    return cls(KwargsShape.UNKNOWN, node=value)  # `**other` or a computed key
                keys[element.key.evaluated_value] = element.value
        elif isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict":
            if any(arg.star or arg.keyword is None for arg in value.args):
                return cls(KwargsShape.UNKNOWN, node=value)
            keys = {arg.keyword.value: arg.value for arg in value.args}
        if keys is None:
            return cls(KwargsShape.UNKNOWN, node=value)
        flag = None
        if "use_reentrant" in keys:
            entry = keys["use_reentrant"]
            literal = entry.value if isinstance(entry, cst.Name) and entry.value in ("True", "False") else None
            flag = Reentrancy.UNKNOWN if literal is None else Reentrancy.EXPLICIT_TRUE if literal == "True" else Reentrancy.EXPLICIT_FALSE
        return cls._of_keys(set(keys), flag, value, trainer_path)

    @classmethod
    def of_ast(cls, value: ast.expr | None, *, trainer_path: bool = False) -> HfCheckpointingKwargs:
        """What an `ast` expression is (the project model's script interpreter's)."""
        if value is None or (isinstance(value, ast.Constant) and value.value is None):
            return cls(KwargsShape.DEFAULT, node=value)
        keys: dict[object, ast.expr] | None = None
        if isinstance(value, ast.Dict):
            keys = {}
            for key, entry in zip(value.keys, value.values):
                if not (isinstance(key, ast.Constant) and isinstance(key.value, (str, bytes))):
                    return cls(KwargsShape.UNKNOWN, node=value)  # `**other` or a computed key
                keys[key.value] = entry
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict":
            if value.args or any(keyword.arg is None for keyword in value.keywords):
                return cls(KwargsShape.UNKNOWN, node=value)
            keys = {keyword.arg: keyword.value for keyword in value.keywords}
        if keys is None:
            return cls(KwargsShape.UNKNOWN, node=value)
        flag = None
        if "use_reentrant" in keys:
            entry = keys["use_reentrant"]
            literal = entry.value if isinstance(entry, ast.Constant) and isinstance(entry.value, bool) else None
            flag = Reentrancy.UNKNOWN if literal is None else Reentrancy.EXPLICIT_TRUE if literal else Reentrancy.EXPLICIT_FALSE
        return cls._of_keys(set(keys), flag, value, trainer_path)

    @classmethod
    def _of_keys(cls, keys: set, flag: Reentrancy | None, node: object, trainer_path: bool) -> HfCheckpointingKwargs:
        """A dict with these keys (`flag`: its literal `use_reentrant`, None without the key)."""
        if flag is not None:
            return cls(KwargsShape.WITH_FLAG, flag, node)
        if trainer_path and keys <= TRAINER_OWN_KEYS:
            # From 5.0 the Trainer passes `kwargs or None`; before 5.0 these keys did not
            # exist. Either way not a dict torch sees without the flag.
            return cls(KwargsShape.UNKNOWN, node=node)
        return cls(KwargsShape.WITHOUT_FLAG, node=node)

    def reentrancy(self, versions: TargetVersions) -> tuple[Reentrancy, Applies]:
        """The implementation transformers will run, and whether that depends on a version
        that is not known (UNKNOWN: reentrant if the targeted transformers is < 5.0)."""
        if self.shape is KwargsShape.WITH_FLAG:
            return self.flag, Applies.YES
        if self.shape is KwargsShape.WITHOUT_FLAG:
            return Reentrancy.IMPLICIT, Applies.YES
        if self.shape is KwargsShape.DEFAULT:
            applies = versions.applies((REENTRANT_DEFAULT_VERSIONS,))
            if applies is Applies.NO:
                return Reentrancy.EXPLICIT_FALSE, Applies.YES
            return Reentrancy.EXPLICIT_TRUE, applies
        return Reentrancy.UNKNOWN, Applies.YES

    def reentrant_in(self, transformers_5: bool) -> bool | None:
        """Whether transformers before 5.0 (`transformers_5=False`) or from 5.0 on runs these
        kwargs with the reentrant implementation; None when that is not known statically."""
        if self.shape is KwargsShape.WITH_FLAG:
            return None if self.flag is Reentrancy.UNKNOWN else self.flag is Reentrancy.EXPLICIT_TRUE
        if self.shape is KwargsShape.WITHOUT_FLAG:
            return True
        if self.shape is KwargsShape.DEFAULT:
            return not transformers_5
        return None
